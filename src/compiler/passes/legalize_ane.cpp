// legalize-ane: rewrites what the ANE cannot run into what it can (DESIGN.md §2).
//
// Op rewrites, each a small function below: gelu and silu expanded (C2), neg → mul(x, −1) (MIL has
// no neg), conv bias → separate add (C4), rsqrt → pow(x, −0.5) where the chip lacks it (C17),
// attention spelled out as QKᵀ·scale + mask → softmax → ·V (C15), and on chips without cast (M1/M2,
// C18) the fp16↔fp32 casts dropped by running the whole program in fp16. Boundary rewrites
// (legalize_ane_boundary.cpp): concats that only feed outputs become separate outputs (C1),
// inputs and outputs of another shape are declared as the [1, C, 1, S] the runtime binds (C14), and
// inputs below the minimum buffer get their sequence padded to a bucket (C7).
//
// What is graph-level and what is runtime-level: the graph can change only what the program
// declares — its ops, and its input/output types (padded sequence, fp16). Everything about the
// buffers themselves is the runtime's: writing zeros into the padding, converting fp32 host data,
// concatenating split outputs, and allocating every input (C13) and every output (C5) with one
// uniform size. The pass records those duties in PassContext::ane_boundary (ane_boundary.h);
// allocation sizes are recomputed on every run and never count as a change.
//
// What cannot be rewritten (a concat inside the program, an int cast on M1/M2, a too-wide
// convolution, ...) is left alone for validate-ane to reject. The pass is idempotent: every rewrite
// produces only ops that no rewrite matches again.
#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "base/dtype.h"
#include "base/error.h"
#include "compiler/passes/passes.h"
#include "compiler/passes/legalize_ane.h"

namespace orion::compiler {
namespace ane {

using ir::ElemType;
using ir::Graph;
using ir::Op;
using ir::Value;

namespace {
std::vector<uint8_t> scalar_bytes(double v, ElemType t) {
  std::vector<uint8_t> b(ir::elem_size(t));
  switch (t) {
    case ElemType::F16: {
      uint16_t h = f32_to_f16(float(v));
      std::memcpy(b.data(), &h, 2);
      break;
    }
    case ElemType::F32: {
      float f = float(v);
      std::memcpy(b.data(), &f, 4);
      break;
    }
    case ElemType::I32: {
      int32_t i = int32_t(v);
      std::memcpy(b.data(), &i, 4);
      break;
    }
    case ElemType::Bool: b[0] = v != 0; break;
  }
  return b;
}

std::string scalar_name(double v) {
  std::string s = fmt::format("c_{:g}", v);
  for (char& c : s) c = c == '.' ? 'p' : c == '-' ? 'm' : c == '+' ? '_' : c;
  return s;
}
}  // namespace

Value shared_scalar(Graph& g, double v, ElemType t) {
  std::vector<uint8_t> want = scalar_bytes(v, t);
  for (int i = 0; i < int(g.nodes().size()); i++) {
    const ir::Node& n = g.node(i);
    if (!n.dead && n.op == Op::Const && n.results[0].shape.empty() && n.results[0].elem == t && n.data &&
        n.data->bytes == want)
      return {i, 0};
  }
  auto d = std::make_shared<ir::ConstData>();
  d->bytes = std::move(want);
  return g.constant(g.fresh_name(scalar_name(v)), {t, {}}, std::move(d));
}

int count_uses(const Graph& g, Value v) {
  int n = 0;
  for (const ir::Node& node : g.nodes())
    if (!node.dead)
      for (Value in : node.inputs) n += in == v;
  for (const ir::GraphOutput& o : g.outputs()) n += o.value == v;
  return n;
}

void drop_if_unused(Graph& g, int i) {
  ir::Node& n = g.node_mut(i);
  if (n.dead || n.op == Op::Input) return;  // inputs are the program's interface
  for (Value r : g.results_of({i, 0}))
    if (count_uses(g, r)) return;
  n.dead = true;
  for (Value in : std::vector<Value>(n.inputs)) drop_if_unused(g, in.node);
}

void retype(Graph& g) {
  for (int i = 0; i < int(g.nodes().size()); i++) {
    ir::Node& n = g.node_mut(i);
    if (n.dead || n.op == Op::Input || n.op == Op::Const) continue;
    std::vector<ir::Type> in;
    for (Value v : n.inputs) in.push_back(g.type(v));
    n.results = ir::infer_types(n.op, in, n.attrs, n.name);
  }
}

void record_change(PassContext& ctx, const std::string& name, bool is_input, const ir::Type& before, const ir::Type& after,
                   const std::string& rule) {
  for (BoundaryChange& c : ctx.ane_boundary.changes)
    if (c.name == name && c.is_input == is_input) {
      c.legalized = after;
      c.rules.push_back(rule);
      return;
    }
  ctx.ane_boundary.changes.push_back({name, is_input, before, after, {rule}});
}

namespace {

// Builders that name every new node after the one it replaces ("<base>_<role>").
struct Rewriter {
  Graph& g;
  std::string base;
  ElemType elem;
  Value op(Op o, std::vector<Value> in, const std::string& role, ir::Attrs attrs = {}) {
    return g.add_node(o, std::move(in), std::move(attrs), g.fresh_name(base + "_" + role));
  }
  Value c(double v) { return shared_scalar(g, v, elem); }
  // v converted to the rewriter's element type (a cast only when it differs).
  Value as_elem(Value v, const std::string& role) {
    if (g.type(v).elem == elem) return v;
    return op(Op::Cast, {v}, role, {{"dtype", std::string(ir::elem_name(elem))}});
  }
};

// Points every use of node i at `to` and drops node i (and operands only it used).
bool replace(Graph& g, int i, Value to) {
  g.replace_all_uses({i, 0}, to);
  drop_if_unused(g, i);
  return true;
}

Rewriter rewriter_for(Graph& g, int i) {
  const ir::Node& n = g.node(i);
  return {g, n.name, n.results[0].elem};
}

// C2: gelu is not an ANE op; use its tanh approximation.
//   y = gelu(x)  →  y = (0.5·x) · (1 + tanh(0.79788456 · (x + 0.044715·x·x·x)))
// (x³ as two muls: pow of a negative base is not safe on the hardware.)
bool expand_gelu(Graph& g, int i) {
  Rewriter r = rewriter_for(g, i);
  Value x = g.node(i).inputs[0];
  Value x2 = r.op(Op::Mul, {x, x}, "x2");
  Value x3 = r.op(Op::Mul, {x2, x}, "x3");
  Value arg = r.op(Op::Add, {x, r.op(Op::Mul, {x3, r.c(0.044715)}, "cubic")}, "arg");
  Value t = r.op(Op::Tanh, {r.op(Op::Mul, {arg, r.c(0.79788456)}, "scaled")}, "tanh");
  Value half_x = r.op(Op::Mul, {x, r.c(0.5)}, "half");
  return replace(g, i, r.op(Op::Mul, {half_x, r.op(Op::Add, {t, r.c(1.0)}, "onep")}, "gelu"));
}

// C2: silu is not an ANE op.
//   y = silu(x)  →  y = x · sigmoid(x)
bool expand_silu(Graph& g, int i) {
  Rewriter r = rewriter_for(g, i);
  Value x = g.node(i).inputs[0];
  return replace(g, i, r.op(Op::Mul, {x, r.op(Op::Sigmoid, {x}, "sigmoid")}, "silu"));
}

// MIL has no neg.
//   y = neg(x)  →  y = mul(x, −1)
bool lower_neg(Graph& g, int i) {
  Rewriter r = rewriter_for(g, i);
  return replace(g, i, r.op(Op::Mul, {g.node(i).inputs[0], r.c(-1.0)}, "neg"));
}

// C4: the ANE's conv takes no bias.
//   y = conv1x1(x, W, b)  →  y = add(conv1x1(x, W), b4)   b4 = b as a [1, Cout, 1, 1] tensor
// A constant bias becomes a new [1, Cout, 1, 1] constant sharing its data; any other bias is reshaped.
bool split_conv_bias(Graph& g, int i) {
  if (g.node(i).inputs.size() != 3) return false;
  Rewriter r = rewriter_for(g, i);
  Value x = g.node(i).inputs[0], w = g.node(i).inputs[1], b = g.node(i).inputs[2];
  const int64_t cout = g.type(w).shape[0];
  const std::vector<int64_t> shape4 = {1, cout, 1, 1};
  Value b4 = b;
  if (g.type(b).shape != shape4) {
    const ir::Node& bn = g.node(b);
    if (bn.op == Op::Const) {
      b4 = g.constant(g.fresh_name(bn.name + "_4d"), {bn.results[0].elem, shape4}, bn.data);
    } else {
      b4 = r.op(Op::Reshape, {b}, "bias_4d", {{"shape", shape4}});
    }
  }
  Value conv = r.op(Op::Conv1x1, {x, w}, "nobias", g.node(i).attrs);
  return replace(g, i, r.op(Op::Add, {conv, b4}, "bias"));
}

// C17: rsqrt fails on some chips (ChipProfile::supports_rsqrt).
//   y = rsqrt(x)  →  y = pow(x, −0.5)
bool lower_rsqrt(Graph& g, int i, const ChipProfile& chip) {
  if (chip.supports_rsqrt) return false;
  Rewriter r = rewriter_for(g, i);
  return replace(g, i, r.op(Op::Pow, {g.node(i).inputs[0], r.c(-0.5)}, "pow"));
}

// C15: the ANE's scaled_dot_product_attention ignores causal masks; spell attention out.
//   o = attention(q, k, v [, mask]; scale)  →  s = matmul(q, k, transpose_y) · scale [+ mask]
//                                             o = matmul(softmax(s, axis −1), v)
// q [1, H, Sq, D], k and v [1, H, Skv, D]; scale defaults to 1/√D.
bool expand_attention(Graph& g, int i) {
  Rewriter r = rewriter_for(g, i);
  const ir::Node& n = g.node(i);
  std::vector<Value> in = n.inputs;
  const double scale = ir::attr_float(n.attrs, "scale", n.name, 1.0 / std::sqrt(double(g.type(in[0]).shape[3])));
  Value k = r.as_elem(in[1], "k_cast"), v = r.as_elem(in[2], "v_cast");
  Value s = r.op(Op::Matmul, {in[0], k}, "scores", {{"transpose_x", false}, {"transpose_y", true}});
  s = r.op(Op::Mul, {s, r.c(scale)}, "scaled");
  if (in.size() == 4) s = r.op(Op::Add, {s, r.as_elem(in[3], "mask_cast")}, "masked");
  Value p = r.op(Op::Softmax, {s}, "probs", {{"axis", int64_t(-1)}});
  return replace(g, i, r.op(Op::Matmul, {p, v}, "attn", {{"transpose_x", false}, {"transpose_y", false}}));
}

bool is_float(ElemType t) { return t == ElemType::F16 || t == ElemType::F32; }

// C18: M1/M2 have no cast. Their ANE computes in fp16 throughout, so a cast between fp16 and fp32
// is a no-op once the program is fp16 everywhere: demote every fp32 tensor (inputs, constants,
// results) to fp16 and drop the casts that became fp16 → fp16. Boundary tensors that changed are
// recorded (the runtime converts). Casts to or from int32/bool do real work: left for validate-ane.
//   x:fp32 → y = cast(x, fp16) → relu(y)   →   x:fp16 → relu(x)
bool drop_float_casts(Graph& g, PassContext& ctx) {
  if (ctx.chip->supports_cast) return false;
  bool any = false;
  for (const ir::Node& n : g.nodes())
    if (!n.dead && n.op == Op::Cast && is_float(n.results[0].elem) && is_float(g.type(n.inputs[0]).elem)) any = true;
  if (!any) return false;
  Graph d = g;
  for (int i = 0; i < int(d.nodes().size()); i++) {
    ir::Node& n = d.node_mut(i);
    if (n.dead) continue;
    if ((n.op == Op::Input || n.op == Op::Const) && n.results[0].elem == ElemType::F32) {
      n.results[0].elem = ElemType::F16;
      if (n.op == Op::Const) {
        auto h = std::make_shared<ir::ConstData>();
        h->bytes.resize(n.results[0].bytes());
        convert_dtype(n.data->bytes.data(), DType::F32, h->bytes.data(), DType::F16, size_t(n.results[0].numel()));
        n.data = std::move(h);
      }
    }
    if (n.op == Op::Cast && n.results[0].elem == ElemType::F32) n.attrs["dtype"] = std::string("fp16");
  }
  try {
    retype(d);
  } catch (const Error&) {
    return false;  // some op cannot run in fp16 as built; validate-ane reports the casts
  }
  for (int i = 0; i < int(d.nodes().size()); i++) {
    const ir::Node& n = d.node(i);
    if (!n.dead && n.op == Op::Cast && d.type(n.inputs[0]) == n.results[0]) replace(d, i, n.inputs[0]);
  }
  for (int i : g.input_nodes())
    if (g.node(i).results[0] != d.node(i).results[0])
      record_change(ctx, g.node(i).name, true, g.node(i).results[0], d.node(i).results[0], "C18");
  for (size_t o = 0; o < g.outputs().size(); o++) {
    const ir::Type &before = g.type(g.outputs()[o].value), &after = d.type(d.outputs()[o].value);
    if (before != after) record_change(ctx, g.outputs()[o].name, false, before, after, "C18");
  }
  g = std::move(d);
  return true;
}

// One pass over the nodes that existed when it started (new nodes are already legal).
bool rewrite_ops(Graph& g, const ChipProfile& chip) {
  bool changed = false;
  const int count = int(g.nodes().size());
  for (int i = 0; i < count; i++) {
    if (g.node(i).dead) continue;
    switch (g.node(i).op) {
      case Op::Gelu: changed |= expand_gelu(g, i); break;
      case Op::Silu: changed |= expand_silu(g, i); break;
      case Op::Neg: changed |= lower_neg(g, i); break;
      case Op::Conv1x1: changed |= split_conv_bias(g, i); break;
      case Op::Rsqrt: changed |= lower_rsqrt(g, i, chip); break;
      case Op::Attention: changed |= expand_attention(g, i); break;
      // Every other op is already legal, handled elsewhere (Concat: split_output_concats; Cast:
      // drop_float_casts), or left for validate-ane, whose check_op lists every op.
      default: break;
    }
  }
  return changed;
}

// Drops dead nodes and restores topological order after replacements were appended.
void tidy(Graph& g) {
  g.compact();
  g.sort_topologically();
}

}  // namespace
}  // namespace ane

namespace {

class LegalizeAne final : public Pass {
 public:
  const char* name() const override { return "legalize-ane"; }
  const char* summary() const override {
    return "rewrite what the ANE rejects (gelu, silu, neg, conv bias, rsqrt, attention, casts on M1/M2, output concats, "
           "non-[1, C, 1, S] boundaries), pad short sequences to a bucket; record what the runtime must do";
  }
  bool run(ir::Graph& g, PassContext& ctx) override {
    bool changed = ane::rewrite_ops(g, *ctx.chip);
    changed |= ane::split_output_concats(g, ctx);
    changed |= ane::flatten_boundary_to_ane_layout(g, ctx);
    if (changed) ane::tidy(g);
    if (ane::drop_float_casts(g, ctx)) {
      ane::tidy(g);
      changed = true;
    }
    changed |= ane::pad_sequence_to_min_buffer(g, ctx);
    ane::record_allocation_sizes(g, ctx);
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_legalize_ane_pass() { return std::make_unique<LegalizeAne>(); }

}  // namespace orion::compiler
