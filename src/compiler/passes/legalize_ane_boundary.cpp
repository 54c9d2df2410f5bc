// legalize-ane, boundary part: rewrites of what the program takes and returns (C1, C7) and the
// uniform allocation sizes the runtime must use (C5, C13). See legalize_ane.cpp for the whole pass.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "base/error.h"
#include "compiler/passes/legalize_ane.h"
#include "compiler/sequence_bucket.h"

namespace orion::compiler::ane {

using ir::Graph;
using ir::Op;
using ir::Value;

namespace {

bool is_ane_4d(const ir::Type& t) { return t.shape.size() == 4 && t.shape[0] == 1 && t.shape[2] == 1; }

int64_t norm_axis(int64_t axis, size_t rank) { return axis < 0 ? axis + int64_t(rank) : axis; }

// A name for part k of output `out` that no output or node uses yet.
std::string part_name(const Graph& g, const std::set<std::string>& taken, const std::string& out, size_t k) {
  std::string n = fmt::format("{}_{}", out, k);
  for (int extra = 0; taken.count(n) || g.find(n) >= 0; extra++) n = fmt::format("{}_{}_{}", out, k, extra);
  return n;
}

}  // namespace

// C1: the ANE compiler rejects concat. A concat whose result is only returned is not needed: the
// program returns each operand as its own output and the runtime concatenates them.
//   return y = concat(a, b; axis)  →  return y_0 = a, y_1 = b      (+ OutputSplit{y, axis, [y_0, y_1]})
// A concat used by another node cannot be rewritten here; validate-ane rejects it.
bool split_output_concats(Graph& g, PassContext& ctx) {
  if (ctx.chip->supports_concat) return false;
  bool changed = false;
  for (int i = 0; i < int(g.nodes().size()); i++) {
    const ir::Node& n = g.node(i);
    if (n.dead || n.op != Op::Concat) continue;
    bool used_by_node = false;
    for (const ir::Node& user : g.nodes())
      if (!user.dead)
        for (Value in : user.inputs) used_by_node |= in.node == i;
    if (used_by_node) continue;
    const int64_t axis = norm_axis(ir::attr_int(n.attrs, "axis", n.name), n.results[0].shape.size());
    const std::vector<Value> operands = n.inputs;
    std::set<std::string> taken;
    for (const ir::GraphOutput& o : g.outputs()) taken.insert(o.name);
    std::vector<ir::GraphOutput> outs;
    bool split_here = false;
    for (const ir::GraphOutput& o : g.outputs()) {
      if (o.value.node != i) {
        outs.push_back(o);
        continue;
      }
      OutputSplit split{o.name, axis, {}};
      for (size_t k = 0; k < operands.size(); k++) {
        std::string part = part_name(g, taken, o.name, k);
        taken.insert(part);
        split.parts.push_back(part);
        outs.push_back({part, operands[k]});
      }
      ctx.ane_boundary.output_splits.push_back(std::move(split));
      split_here = true;
    }
    if (!split_here) continue;  // returned nowhere: dead code, dce's job
    g.outputs_mut() = std::move(outs);
    drop_if_unused(g, i);
    changed = true;
  }
  return changed;
}

// C14: the runtime binds every buffer as packed [1, C, 1, S]. A boundary tensor of another shape
// holds the same bytes as [1, numel/S, 1, S] (S its last dimension; row-major), so it is declared
// that way and reshaped inside the program; the runtime moves no data.
//   x: [1, H, S, S] → users              →   x: [1, H·S, 1, S] → reshape [1, H, S, S] → users
//   return p = v: [1, H, S, S]            →   return p = reshape(v, [1, H·S, 1, S])
bool flatten_boundary_to_ane_layout(Graph& g, PassContext& ctx) {
  auto flat = [](const ir::Type& t) {
    const int64_t S = t.shape.empty() ? 1 : t.shape.back();
    return ir::Type{t.elem, {1, S ? t.numel() / S : 0, 1, S}};
  };
  bool changed = false;
  for (int i : g.input_nodes()) {
    const ir::Type original = g.node(i).results[0];
    if (is_ane_4d(original) || original.numel() == 0) continue;
    std::vector<std::pair<int, size_t>> uses;  // (node, operand index)
    for (int u = 0; u < int(g.nodes().size()); u++)
      if (!g.node(u).dead)
        for (size_t k = 0; k < g.node(u).inputs.size(); k++)
          if (g.node(u).inputs[k] == Value{i, 0}) uses.push_back({u, k});
    g.node_mut(i).results[0] = flat(original);
    Value back = g.add_node(Op::Reshape, {{i, 0}}, {{"shape", original.shape}}, g.fresh_name(g.node(i).name + "_unflat"));
    for (auto [u, k] : uses) g.node_mut(u).inputs[k] = back;
    record_change(ctx, g.node(i).name, true, original, flat(original), "C14");
    changed = true;
  }
  for (size_t o = 0; o < g.outputs().size(); o++) {
    const Value v = g.outputs()[o].value;
    if (v.node < 0 || v.node >= int(g.nodes().size()) || g.node(v.node).dead) continue;  // C11: validate-ane
    const ir::Type original = g.type(v);
    if (is_ane_4d(original) || original.numel() == 0) continue;
    const std::string name = g.outputs()[o].name;
    Value f = g.add_node(Op::Reshape, {v}, {{"shape", flat(original).shape}}, g.fresh_name(name + "_flat"));
    g.outputs_mut()[o].value = f;
    record_change(ctx, name, false, original, flat(original), "C14");
    changed = true;
  }
  return changed;
}

int64_t sequence_bucket(int64_t seq, int64_t bytes_per_position, const ChipProfile& chip) {
  int64_t b = sequence_bucket_at_least(seq, chip);
  while (b != 0 && b * bytes_per_position < chip.min_buffer_bytes) b = sequence_bucket_at_least(b + 1, chip);
  return b;
}

namespace {

// Whether the positions of the sequence axis never mix in `g` once the inputs in `padded` carry a
// padded sequence (their last axis), i.e. the results at the real positions do not depend on the
// padding and the padding never moves into them. `tainted` receives, per node and result, whether
// the value's last axis is the padded sequence.
bool sequence_stays_local(const Graph& g, const std::set<int>& padded, std::vector<std::vector<bool>>& tainted) {
  tainted.assign(g.nodes().size(), {});
  for (int i = 0; i < int(g.nodes().size()); i++) {
    const ir::Node& n = g.node(i);
    tainted[size_t(i)].assign(n.results.size(), false);
    if (n.dead) continue;
    std::vector<bool> in;
    bool any = false;
    for (Value v : n.inputs) in.push_back(tainted[size_t(v.node)][size_t(v.result)]), any |= in.back();
    if (n.op == Op::Input) tainted[size_t(i)][0] = padded.count(i) > 0;
    if (!any) continue;
    const size_t rank = g.type(n.inputs[0]).shape.size();
    const int64_t last = int64_t(rank) - 1;
    bool local = false;
    switch (n.op) {
      case Op::Identity:
      case Op::Neg:
      case Op::Relu:
      case Op::Tanh:
      case Op::Sigmoid:
      case Op::Exp:
      case Op::Sqrt:
      case Op::Rsqrt:
      case Op::Cast:
      case Op::Gelu:
      case Op::Silu: local = true; break;
      case Op::Add:
      case Op::Sub:
      case Op::Mul:
      case Op::Pow:  // an untainted operand must broadcast along the sequence (last dim 1 or a scalar)
        local = true;
        for (size_t k = 0; k < n.inputs.size(); k++) {
          const auto& s = g.type(n.inputs[k]).shape;
          if (!in[k] && !s.empty() && s.back() != 1) local = false;
        }
        break;
      case Op::Conv1x1: local = in[0] && std::count(in.begin(), in.end(), true) == 1; break;
      case Op::Matmul:  // W · x keeps x's columns apart; anything else contracts or moves the sequence
        local = !in[0] && in[1] && !ir::attr_bool(n.attrs, "transpose_y", n.name, false) &&
                !ir::attr_bool(n.attrs, "transpose_x", n.name, false);
        break;
      case Op::ReduceSum:
      case Op::ReduceMean:
      case Op::ReduceMax: {
        local = true;
        for (int64_t a : ir::attr_ints(n.attrs, "axes", n.name)) local &= norm_axis(a, rank) != last;
        break;
      }
      case Op::Softmax: local = norm_axis(ir::attr_int(n.attrs, "axis", n.name, -1), rank) != last; break;
      case Op::Transpose: local = ir::attr_ints(n.attrs, "perm", n.name).back() == last; break;
      case Op::Split: local = norm_axis(ir::attr_int(n.attrs, "axis", n.name), rank) != last; break;
      case Op::Pad: {
        auto p = ir::attr_ints(n.attrs, "pad", n.name);
        local = p[size_t(2 * last)] == 0 && p[size_t(2 * last + 1)] == 0;
        break;
      }
      case Op::Concat:
        local = norm_axis(ir::attr_int(n.attrs, "axis", n.name), rank) != last &&
                std::count(in.begin(), in.end(), true) == int(in.size());
        break;
      // These read the sequence axis as a whole (or their attributes spell its length).
      case Op::Reshape:
      case Op::Slice:
      case Op::Attention:
      case Op::Input:
      case Op::Const: local = false; break;
    }
    if (!local) return false;
    tainted[size_t(i)].assign(n.results.size(), true);
  }
  return true;
}

}  // namespace

// C7: a buffer below the chip's minimum (49,152 bytes) evaluates with status 0x1d. Inputs
// [1, C, 1, S] below it get their sequence padded to the smallest bucket (16, 32, 64, ...) with
// C·S'·elem ≥ the minimum; every input of the same S is padded with it so shapes still agree. Only
// done when no op mixes sequence positions (the real positions' results are then unchanged and
// the runtime fills the padding with zeros and drops it from the outputs). Otherwise, or when no
// bucket up to the chip's max_sequence_bucket is enough, the graph is left for validate-ane.
//   x: fp16[1, 768, 1, 8] → relu → y   →   x: fp16[1, 768, 1, 32] → relu → y   (+ changes x, y)
bool pad_sequence_to_min_buffer(Graph& g, PassContext& ctx) {
  const int64_t min_bytes = ctx.chip->min_buffer_bytes;
  std::map<int64_t, int64_t> small_per_position;  // S → smallest bytes per position among its inputs
  for (int i : g.input_nodes()) {
    const ir::Type& t = g.node(i).results[0];
    if (is_ane_4d(t) && int64_t(t.bytes()) < min_bytes) small_per_position[t.shape[3]] = 0;
  }
  if (small_per_position.empty()) return false;
  for (int i : g.input_nodes()) {
    const ir::Type& t = g.node(i).results[0];
    if (!is_ane_4d(t) || !small_per_position.count(t.shape[3])) continue;
    int64_t per = t.shape[1] * int64_t(ir::elem_size(t.elem));
    int64_t& m = small_per_position[t.shape[3]];
    m = m ? std::min(m, per) : per;
  }
  Graph d = g;
  std::set<int> padded;
  for (int i : d.input_nodes()) {
    ir::Type& t = d.node_mut(i).results[0];
    if (!is_ane_4d(t) || !small_per_position.count(t.shape[3])) continue;
    int64_t bucket = sequence_bucket(t.shape[3], small_per_position[t.shape[3]], *ctx.chip);
    if (!bucket) return false;
    t.shape[3] = bucket;
    padded.insert(i);
  }
  try {
    retype(d);
  } catch (const Error&) {
    return false;
  }
  std::vector<std::vector<bool>> tainted;
  if (!sequence_stays_local(d, padded, tainted)) return false;
  for (int i : padded) record_change(ctx, g.node(i).name, true, g.node(i).results[0], d.node(i).results[0], "C7");
  for (size_t o = 0; o < g.outputs().size(); o++) {
    const ir::Type &before = g.type(g.outputs()[o].value), &after = d.type(d.outputs()[o].value);
    if (before != after) record_change(ctx, g.outputs()[o].name, false, before, after, "C7");
  }
  g = std::move(d);
  return true;
}

// C13 and C5: all inputs of a program need one allocation size, and so do all outputs. The graph
// keeps its declared shapes; the runtime allocates every buffer of a group with the group's largest
// size, raised to the minimum buffer (C7) and rounded up to the chip's buffer alignment (C18) — the
// same rule as the emitter's binding table (program.h) — and writes or reads packed data at byte 0 (C14).
void record_allocation_sizes(const Graph& g, PassContext& ctx) {
  const int64_t align = std::max(1, ctx.chip->buffer_alignment);
  auto round_up = [&](int64_t b) {
    b = std::max(b, ctx.chip->min_buffer_bytes);
    return (b + align - 1) / align * align;
  };
  int64_t in = 0, out = 0;
  for (int i : g.input_nodes()) in = std::max(in, int64_t(g.node(i).results[0].bytes()));
  for (const ir::GraphOutput& o : g.outputs())
    if (o.value.node >= 0 && o.value.node < int(g.nodes().size()) && !g.node(o.value.node).dead &&
        o.value.result < int(g.node(o.value.node).results.size()))
      out = std::max(out, int64_t(g.type(o.value).bytes()));
  ctx.ane_boundary.input_alloc_bytes = round_up(in);
  ctx.ane_boundary.output_alloc_bytes = round_up(out);
}

}  // namespace orion::compiler::ane
