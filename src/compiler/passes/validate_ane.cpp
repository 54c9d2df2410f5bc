// validate-ane: rejects what the ANE cannot run and legalize-ane could not rewrite (DESIGN.md §2).
//
// Each problem is one Diagnostic error naming the rule and the node (or "" for the whole program):
// ops the chip does not support (composites left over C2/C15, neg, conv bias C4, concat C1, cast on
// M1/M2 C18, rsqrt where the chip lacks it C17), convolutions wider than the chip's channel limit
// (C12), more BLOBFILE constants than the chip accepts (C16), outputs that name no live node (C11),
// and boundary tensors the runtime cannot bind: not [1, C, 1, S] (C14), below the minimum buffer
// (C7), or not fp16.
//
// Counting for C16: every constant used by a live node occupies one BLOBFILE slot — a tensor (more
// than one element) because it is stored in the weight blob, a scalar because the emitter writes
// it as a named const operand, which costs a slot too. A constant used several times counts once
// (legalize-ane shares equal scalars for that reason). Op parameters that are not graph values
// (conv strides and pads, matmul transpose flags) are not counted.
//
// The boundary dtype: the ANE computes in fp16 and our runtime's buffers hold packed fp16
// [1, C, 1, S] (DESIGN.md §2), converting host fp32 itself — so every program input and output must
// be fp16, on every chip. On M1/M2 legalize-ane demotes fp32 programs that only cast between fp16
// and fp32; anything else that is still fp32 (or int32/bool) at the boundary is rejected here.
//
// The pass never changes the graph. It owns the error diagnostics (pass.h): each run replaces the
// errors of the previous one, so the pipeline's later rounds do not leave stale findings behind.
#include <fmt/format.h>

#include <set>
#include <vector>

#include "compiler/passes/passes.h"

namespace orion::compiler {
namespace {

using ir::Graph;
using ir::Op;
using ir::Value;

std::string shape_str(const std::vector<int64_t>& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

// Ops this chip cannot run as they stand.
void check_op(const Graph& g, const ir::Node& n, PassContext& ctx) {
  const ChipProfile& chip = *ctx.chip;
  switch (n.op) {
    case Op::Gelu:
    case Op::Silu:
      ctx.error("C2", n.name,
                fmt::format("{} '{}' is not an ANE op; legalize-ane must expand it (C2)", ir::op_info(n.op).name, n.name));
      break;
    case Op::Attention:
      ctx.error("C15", n.name,
                fmt::format("attention '{}' must be expanded by legalize-ane: the ANE's sdpa ignores masks (C15)", n.name));
      break;
    case Op::Neg:
      ctx.error("", n.name, fmt::format("neg '{}' has no MIL op; legalize-ane rewrites it to mul(x, -1)", n.name));
      break;
    case Op::Concat:
      if (!chip.supports_concat)
        ctx.error(
            "C1", n.name,
            fmt::format(
                "concat '{}' is rejected by the ANE compiler (C1); only a concat that feeds nothing but outputs can be split into outputs",
                n.name));
      break;
    case Op::Cast:
      if (!chip.supports_cast)
        ctx.error("C18", n.name,
                  fmt::format("cast '{}' ({} -> {}) is not supported on {} (C18)", n.name,
                              ir::elem_name(g.type(n.inputs[0]).elem), ir::elem_name(n.results[0].elem), chip.name));
      break;
    case Op::Rsqrt:
      if (!chip.supports_rsqrt)
        ctx.error("C17", n.name,
                  fmt::format("rsqrt '{}' fails on {}; legalize-ane rewrites it to pow(x, -0.5) (C17)", n.name, chip.name));
      break;
    case Op::Conv1x1: {
      if (n.inputs.size() == 3)
        ctx.error("C4", n.name, fmt::format("conv '{}' has a bias; the ANE's conv takes none (C4)", n.name));
      const auto& w = g.type(n.inputs[1]).shape;  // [Cout, Cin, 1, 1]
      if (w[0] > chip.max_conv_channels)
        ctx.error("C12", n.name,
                  fmt::format("conv '{}' has {} output channels, more than the {} the ANE accepts (C12); run it on the CPU",
                              n.name, w[0], chip.max_conv_channels));
      if (w[1] > chip.max_conv_channels)
        ctx.error("C12", n.name,
                  fmt::format("conv '{}' has {} input channels, more than the {} the ANE accepts (C12); run it on the CPU",
                              n.name, w[1], chip.max_conv_channels));
      break;
    }
    case Op::Input:
    case Op::Const:
    case Op::Identity:
    case Op::Matmul:
    case Op::Add:
    case Op::Sub:
    case Op::Mul:
    case Op::Relu:
    case Op::Tanh:
    case Op::Sigmoid:
    case Op::Exp:
    case Op::Pow:
    case Op::Sqrt:
    case Op::ReduceSum:
    case Op::ReduceMean:
    case Op::ReduceMax:
    case Op::Reshape:
    case Op::Transpose:
    case Op::Split:
    case Op::Pad:
    case Op::Slice:
    case Op::Softmax: break;
  }
}

// C16: at most chip.max_blob_constants BLOBFILE constants (see the counting at the top).
void check_constant_slots(const Graph& g, PassContext& ctx) {
  std::set<int> used;
  for (const ir::Node& n : g.nodes())
    if (!n.dead)
      for (Value v : n.inputs)
        if (g.node(v).op == Op::Const) used.insert(v.node);
  int tensors = 0, scalars = 0;
  for (int i : used) (g.node(i).results[0].numel() > 1 ? tensors : scalars)++;
  if (tensors + scalars > ctx.chip->max_blob_constants)
    ctx.error(
        "C16", "",
        fmt::format(
            "program '{}' needs {} BLOBFILE constants (tensors: {}, inline scalars: {}), more than the {} the ANE accepts (C16); split the program or pass weights as inputs",
            g.name(), tensors + scalars, tensors, scalars, ctx.chip->max_blob_constants));
}

// C7, C14 and the fp16 boundary, for one program input or output.
void check_boundary(const std::string& what, const std::string& name, const ir::Type& t, PassContext& ctx) {
  if (t.shape.size() != 4 || t.shape[0] != 1 || t.shape[2] != 1)
    ctx.error("C14", name,
              fmt::format("program {} '{}' has shape {}; ANE buffers are [1, C, 1, S] (C14)", what, name,
                          shape_str(t.shape)));
  if (t.elem != ir::ElemType::F16)
    ctx.error("", name,
              fmt::format("program {} '{}' is {}; ANE buffers are fp16 (the runtime converts host data)", what, name,
                          ir::elem_name(t.elem)));
  if (int64_t(t.bytes()) < ctx.chip->min_buffer_bytes)
    ctx.error("C7", name,
              fmt::format("program {} '{}' {} is {} bytes, below the minimum buffer of {} bytes (C7)", what, name, t.str(),
                          t.bytes(), ctx.chip->min_buffer_bytes));
}

class ValidateAne final : public Pass {
 public:
  const char* name() const override { return "validate-ane"; }
  const char* summary() const override {
    return "reject what the ANE cannot run: unsupported ops for the chip, too many BLOBFILE constants, convs over the "
           "channel limit, dangling outputs, boundary tensors that are not fp16 [1, C, 1, S] of at least the minimum buffer";
  }
  bool run(ir::Graph& g, PassContext& ctx) override {
    // Errors are validate-ane's alone (pass.h); those of an earlier run (an earlier pipeline
    // round, on a graph that has changed since) are replaced by this run's findings.
    std::erase_if(ctx.diagnostics, [](const Diagnostic& d) { return d.level == Diagnostic::Level::Error; });
    for (const ir::Node& n : g.nodes())
      if (!n.dead) check_op(g, n, ctx);
    check_constant_slots(g, ctx);
    for (int i : g.input_nodes()) check_boundary("input", g.node(i).name, g.node(i).results[0], ctx);
    if (g.outputs().empty()) ctx.error("C11", "", fmt::format("program '{}' returns nothing (C11)", g.name()));
    for (const ir::GraphOutput& o : g.outputs()) {
      const Value v = o.value;
      if (v.node < 0 || v.node >= int(g.nodes().size()) || g.node(v.node).dead ||
          v.result >= int(g.node(v.node).results.size())) {
        ctx.error("C11", o.name, fmt::format("output '{}' does not name a live node (C11)", o.name));
        continue;
      }
      check_boundary("output", o.name, g.type(v), ctx);
    }
    return false;
  }
};

}  // namespace

std::unique_ptr<Pass> make_validate_ane_pass() { return std::make_unique<ValidateAne>(); }

}  // namespace orion::compiler
