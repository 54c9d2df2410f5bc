// weights_to_inputs: constants → program inputs (see weights_as_inputs.h).
#include "runtime/weights_as_inputs.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "base/error.h"

namespace orion::runtime {

namespace {

bool is_float(ir::ElemType t) { return t == ir::ElemType::F16 || t == ir::ElemType::F32; }

// The boundary layout of a weight of type t: [1, R, 1, L] fp16 with R ≥ t's leading dim, enough rows
// for the minimum buffer (C7).
ir::Type declared_type(const ir::Type& t, const std::set<int64_t>& activation_lengths, int64_t min_bytes) {
  int64_t rows = t.shape.empty() ? 1 : std::max<int64_t>(t.shape[0], 1);
  int64_t len = t.numel() / rows;
  if (activation_lengths.count(len)) rows = t.numel(), len = 1;
  const int64_t row_bytes = len * int64_t(ir::elem_size(ir::ElemType::F16));
  rows = std::max(rows, (min_bytes + row_bytes - 1) / row_bytes);
  return {ir::ElemType::F16, {1, rows, 1, len}};
}

}  // namespace

std::vector<WeightInput> weights_to_inputs(ir::Graph& g, const WeightsToInputsOptions& options) {
  const compiler::ChipProfile& chip = options.chip ? *options.chip : compiler::default_chip();
  std::set<int64_t> activation_lengths;  // sequence lengths of the graph's own inputs
  for (int i : g.input_nodes())
    if (!g.node(i).results[0].shape.empty()) activation_lengths.insert(g.node(i).results[0].shape.back());

  std::vector<WeightInput> weights;
  const int count = int(g.nodes().size());
  for (int i = 0; i < count; i++) {
    const ir::Node& c = g.node(i);
    if (c.dead || c.op != ir::Op::Const || !is_float(c.results[0].elem) || c.results[0].numel() < options.min_elements)
      continue;
    std::vector<std::pair<int, size_t>> uses;  // (node, operand)
    for (int u = 0; u < count; u++)
      if (!g.node(u).dead)
        for (size_t k = 0; k < g.node(u).inputs.size(); k++)
          if (g.node(u).inputs[k] == ir::Value{i, 0}) uses.push_back({u, k});
    if (uses.empty()) continue;  // dead code: dce's business

    WeightInput w{c.name, c.results[0], declared_type(c.results[0], activation_lengths, chip.min_buffer_bytes)};
    ir::Node& n = g.node_mut(i);  // the constant becomes the input, keeping its name
    n.op = ir::Op::Input;
    n.results = {w.declared};
    n.data.reset();
    n.attrs.clear();
    ir::Value v{i, 0};
    const int64_t rows = w.original.shape.empty() ? 1 : w.original.shape[0];
    const int64_t used_rows = w.declared.shape[3] == 1 ? w.original.numel() : rows;
    if (used_rows != w.declared.shape[1])
      v = g.add_node(ir::Op::Slice, {v},
                     {{"begin", std::vector<int64_t>{0, 0, 0, 0}},
                      {"end", std::vector<int64_t>{1, used_rows, 1, w.declared.shape[3]}}},
                     g.fresh_name(w.name + "_rows"));
    v = g.add_node(ir::Op::Reshape, {v}, {{"shape", w.original.shape}}, g.fresh_name(w.name + "_weight"));
    if (w.original.elem != ir::ElemType::F16)
      v = g.add_node(ir::Op::Cast, {v}, {{"dtype", std::string(ir::elem_name(w.original.elem))}},
                     g.fresh_name(w.name + "_cast"));
    for (auto [u, k] : uses) g.node_mut(u).inputs[k] = v;
    weights.push_back(std::move(w));
  }
  g.sort_topologically();
  if (std::string problem = g.verify(); !problem.empty())
    ORION_CHECK(false, "weights_to_inputs broke graph '{}': {}", g.name(), problem);
  return weights;
}

ir::Tensor32 weight_input_tensor(const WeightInput& w, const ir::Node& c) {
  if (c.op != ir::Op::Const || c.results[0].shape != w.original.shape)
    throw Error(ErrorKind::Input,
                fmt::format("weight '{}' must be a constant of type {}, not {} {}", w.name, w.original.str(),
                            ir::op_info(c.op).name, c.results[0].str()),
                {{}, w.name, -1, "weights as inputs keep the kernel's structure: rebuild it for new shapes"});
  ir::Tensor32 values = ir::const_values(c);
  ir::Tensor32 t(w.declared.shape);
  std::copy(values.data.begin(), values.data.end(), t.data.begin());
  return t;
}

}  // namespace orion::runtime
