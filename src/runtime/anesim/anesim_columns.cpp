// anesim's column sharing (see anesim_columns.h for why it gives the full program's bytes).
#include "runtime/anesim/anesim_columns.h"

#include <algorithm>
#include <unordered_map>

namespace orion::runtime::anesim {
namespace {

using ir::Op;
using Shape = std::vector<int64_t>;

// A value every column reads whole: a scalar, or a last axis of 1 that broadcasts over the columns.
bool same_for_every_column(const Shape& s) { return s.empty() || s.back() == 1; }

int64_t normalised_axis(int64_t axis, size_t rank) { return axis < 0 ? axis + int64_t(rank) : axis; }

// Whether node n, reading at least one column-carrying value, keeps the columns apart: each op's
// own condition, and every operand that does not carry columns is the same for every column where
// the op would broadcast it. The result then carries the columns.
bool keeps_columns_apart(const ir::Graph& g, const ir::Node& n, const std::vector<bool>& carries) {
  const auto carrying = [&](size_t k) { return bool(carries[size_t(n.inputs[k].node)]); };
  const Shape& in0 = g.type(n.inputs[0]).shape;
  const size_t last = in0.size() - 1;
  switch (n.op) {
    case Op::Add:
    case Op::Sub:
    case Op::Mul:
    case Op::Pow:
      for (size_t k = 0; k < n.inputs.size(); k++)
        if (!carrying(k) && !same_for_every_column(g.type(n.inputs[k]).shape)) return false;
      return true;
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
    case Op::Silu: return true;
    case Op::Conv1x1:  // x [1, Cin, 1, S] by constant weights (and bias): column s of y is W·x[:, s]
      for (size_t k = 1; k < n.inputs.size(); k++)
        if (carrying(k)) return false;
      return carrying(0) && in0.size() == 4;
    case Op::ReduceSum:
    case Op::ReduceMean:
    case Op::ReduceMax:
      for (int64_t a : ir::attr_ints(n.attrs, "axes", n.name))
        if (normalised_axis(a, in0.size()) == int64_t(last)) return false;
      return true;
    case Op::Softmax: return normalised_axis(ir::attr_int(n.attrs, "axis", n.name, -1), in0.size()) != int64_t(last);
    case Op::Transpose: {
      const Shape perm = ir::attr_ints(n.attrs, "perm", n.name);
      return !perm.empty() && perm.back() == int64_t(last);
    }
    case Op::Reshape: return true;  // both last axes are S (checked by the caller): lead·S + s stays
    default: return false;          // matmul, slices, pads, splits, attention mix columns or cut them
  }
}

// Column n's hash over one source's rows, for every n < N, folded into h.
template <typename T>
void hash_columns(std::vector<uint64_t>& h, const ColumnSource& m, int N) {
  const T* p = static_cast<const T*>(m.data);
  for (int64_t r = 0; r < m.rows; r++)
    for (int n = 0; n < N; n++) h[size_t(n)] = (h[size_t(n)] ^ uint64_t(p[r * m.ld + n])) * 0x100000001b3ull;
}

template <typename T>
bool equal_columns_of(const ColumnSource& m, int a, int b) {
  const T* p = static_cast<const T*>(m.data);
  for (int64_t r = 0; r < m.rows; r++)
    if (p[r * m.ld + a] != p[r * m.ld + b]) return false;  // the bits (T is an unsigned integer)
  return true;
}
bool equal_columns(const ColumnSource& m, int a, int b) {
  return m.elem_bytes == 2 ? equal_columns_of<uint16_t>(m, a, b) : equal_columns_of<uint32_t>(m, a, b);
}

}  // namespace

ColumnLayout column_layout(const ir::Graph& g) {
  const size_t N = g.nodes().size();
  ColumnLayout layout;
  layout.carries.assign(N, false);
  int64_t S = 0;
  for (int i : g.input_nodes()) {
    const Shape& s = g.node(i).results[0].shape;
    if (!same_for_every_column(s)) S = std::max(S, s.back());
  }
  if (S <= 1) return layout;
  for (size_t i = 0; i < N; i++) {
    const ir::Node& n = g.node(int(i));
    if (n.dead || n.op == Op::Const) continue;
    const Shape& shape = n.results[0].shape;
    if (n.op == Op::Input) {
      layout.carries[i] = !same_for_every_column(shape);
      if (layout.carries[i] && shape.back() != S) return {};  // two column counts: not one sequence
      continue;
    }
    bool reads_columns = false;
    for (ir::Value v : n.inputs) reads_columns = reads_columns || layout.carries[size_t(v.node)];
    if (!reads_columns) continue;  // computed from constants: the same for every column
    if (n.results.size() != 1 || shape.empty() || shape.back() != S || !keeps_columns_apart(g, n, layout.carries))
      return {};
    for (ir::Value v : n.inputs)
      if (layout.carries[size_t(v.node)] && g.type(v).shape.back() != S) return {};
    layout.carries[i] = true;
  }
  layout.S = S;
  return layout;
}

std::vector<int> first_equal_columns(const std::vector<ColumnSource>& sources, int N) {
  std::vector<uint64_t> h(size_t(N), 0x9e3779b97f4a7c15ull);
  for (const ColumnSource& m : sources) {
    if (m.elem_bytes == 2) hash_columns<uint16_t>(h, m, N);
    else hash_columns<uint32_t>(h, m, N);
  }
  std::vector<int> first(static_cast<size_t>(N));
  std::unordered_map<uint64_t, int> seen;
  for (int n = 0; n < N; n++) {
    auto [it, inserted] = seen.emplace(h[size_t(n)], n);
    bool same = !inserted;
    for (size_t k = 0; k < sources.size() && same; k++) same = equal_columns(sources[k], n, it->second);
    first[size_t(n)] = same ? it->second : n;
  }
  return first;
}

ColumnClasses::ColumnClasses(const std::vector<int>& first) : slot(first.size()) {
  for (size_t n = 0; n < first.size(); n++)
    if (first[n] == int(n)) slot[n] = int(distinct.size()), distinct.push_back(int(n));
  for (size_t n = 0; n < first.size(); n++) slot[n] = slot[size_t(first[n])];
}

}  // namespace orion::runtime::anesim
