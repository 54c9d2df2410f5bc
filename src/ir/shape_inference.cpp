// Shape inference: the result types of every op, and the checks that make a node well-formed.
#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "base/error.h"
#include "ir/graph.h"

namespace orion::ir {
namespace {

[[noreturn]] void bad(const std::string& node, const std::string& msg) {
  throw Error(ErrorKind::Input, msg, {{}, node, -1, {}});
}

std::string shape_str(const std::vector<int64_t>& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

// An axis in [−rank, rank) made non-negative.
int64_t norm_axis(int64_t axis, size_t rank, const std::string& node) {
  int64_t r = int64_t(rank);
  if (axis < -r || axis >= r) bad(node, fmt::format("axis {} is out of range for rank {}", axis, rank));
  return axis < 0 ? axis + r : axis;
}

// numpy broadcasting: shapes aligned at the right, each pair of dims equal or one of them 1.
std::vector<int64_t> broadcast(const std::vector<int64_t>& a, const std::vector<int64_t>& b, const std::string& node) {
  size_t n = std::max(a.size(), b.size());
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; i++) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      bad(node, fmt::format("shapes {} and {} do not broadcast", shape_str(a), shape_str(b)));
    out[i] = std::max(da, db);
  }
  return out;
}

Type conv1x1(const std::vector<Type>& in, const std::string& node) {
  const auto &x = in[0].shape, &w = in[1].shape;
  if (x.size() != 4 || x[0] != 1 || x[2] != 1)
    bad(node, fmt::format("conv1x1 input must be [1, C, 1, S], got {}", shape_str(x)));
  if (w.size() != 4 || w[2] != 1 || w[3] != 1 || w[1] != x[1])
    bad(node, fmt::format("conv1x1 weight must be [Cout, {}, 1, 1], got {}", x[1], shape_str(w)));
  if (in.size() == 3 && in[2].numel() != w[0])
    bad(node, fmt::format("conv1x1 bias must have {} elements, got {}", w[0], in[2].numel()));
  return {in[0].elem, {1, w[0], 1, x[3]}};
}

Type matmul(const std::vector<Type>& in, const Attrs& attrs, const std::string& node) {
  auto x = in[0].shape, y = in[1].shape;
  if (x.size() < 2 || y.size() < 2) bad(node, "matmul operands need rank ≥ 2");
  if (attr_bool(attrs, "transpose_x", node, false)) std::swap(x[x.size() - 1], x[x.size() - 2]);
  if (attr_bool(attrs, "transpose_y", node, false)) std::swap(y[y.size() - 1], y[y.size() - 2]);
  int64_t M = x[x.size() - 2], K = x.back(), K2 = y[y.size() - 2], N = y.back();
  if (K != K2) bad(node, fmt::format("matmul inner dimensions differ: {} vs {}", K, K2));
  std::vector<int64_t> bx(x.begin(), x.end() - 2), by(y.begin(), y.end() - 2);
  std::vector<int64_t> out = broadcast(bx, by, node);
  out.push_back(M), out.push_back(N);
  return {in[0].elem, out};
}

Type reduce(const Type& x, const Attrs& attrs, const std::string& node) {
  auto axes = attr_ints(attrs, "axes", node);
  bool keep = attr_bool(attrs, "keep_dims", node, true);
  std::vector<bool> reduced(x.shape.size());
  for (int64_t a : axes) reduced[size_t(norm_axis(a, x.shape.size(), node))] = true;
  std::vector<int64_t> out;
  for (size_t i = 0; i < x.shape.size(); i++)
    if (!reduced[i]) out.push_back(x.shape[i]);
    else if (keep) out.push_back(1);
  return {x.elem, out};
}

Type reshape(const Type& x, const Attrs& attrs, const std::string& node) {
  auto shape = attr_ints(attrs, "shape", node);
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); i++) {
    if (shape[i] == -1) {
      if (infer >= 0) bad(node, "reshape may infer only one dimension (-1)");
      infer = int64_t(i);
    } else if (shape[i] <= 0) {
      bad(node, fmt::format("reshape dimension {} must be positive", shape[i]));
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    if (x.numel() % known) bad(node, fmt::format("cannot reshape {} elements into {}", x.numel(), shape_str(shape)));
    shape[size_t(infer)] = x.numel() / known;
  }
  Type t{x.elem, shape};
  if (t.numel() != x.numel()) bad(node, fmt::format("cannot reshape {} into {}", x.str(), shape_str(shape)));
  return t;
}

Type transpose(const Type& x, const Attrs& attrs, const std::string& node) {
  auto perm = attr_ints(attrs, "perm", node);
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> iota(x.shape.size());
  std::iota(iota.begin(), iota.end(), 0);
  if (sorted != iota) bad(node, fmt::format("perm {} is not a permutation of rank {}", shape_str(perm), x.shape.size()));
  std::vector<int64_t> out;
  for (int64_t p : perm) out.push_back(x.shape[size_t(p)]);
  return {x.elem, out};
}

std::vector<Type> split(const Type& x, const Attrs& attrs, const std::string& node) {
  int64_t axis = norm_axis(attr_int(attrs, "axis", node), x.shape.size(), node);
  auto sizes = attr_ints(attrs, "split_sizes", node);
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s <= 0) bad(node, "split sizes must be positive");
    total += s;
  }
  if (total != x.shape[size_t(axis)])
    bad(node, fmt::format("split sizes add up to {}, axis {} has {}", total, axis, x.shape[size_t(axis)]));
  std::vector<Type> out;
  for (int64_t s : sizes) {
    Type t = x;
    t.shape[size_t(axis)] = s;
    out.push_back(t);
  }
  return out;
}

Type pad(const Type& x, const Attrs& attrs, const std::string& node) {
  auto p = attr_ints(attrs, "pad", node);
  if (p.size() != 2 * x.shape.size())
    bad(node, fmt::format("pad needs {} values (before, after per axis)", 2 * x.shape.size()));
  Type t = x;
  for (size_t i = 0; i < x.shape.size(); i++) {
    if (p[2 * i] < 0 || p[2 * i + 1] < 0) bad(node, "pad amounts must be ≥ 0");
    t.shape[i] += p[2 * i] + p[2 * i + 1];
  }
  return t;
}

Type slice(const Type& x, const Attrs& attrs, const std::string& node) {
  auto b = attr_ints(attrs, "begin", node), e = attr_ints(attrs, "end", node);
  if (b.size() != x.shape.size() || e.size() != x.shape.size()) bad(node, "slice needs begin and end for every axis");
  Type t = x;
  for (size_t i = 0; i < x.shape.size(); i++) {
    if (b[i] < 0 || e[i] > x.shape[i] || b[i] >= e[i])
      bad(node, fmt::format("slice [{}, {}) is out of range for axis {} of size {}", b[i], e[i], i, x.shape[i]));
    t.shape[i] = e[i] - b[i];
  }
  return t;
}

Type concat(const std::vector<Type>& in, const Attrs& attrs, const std::string& node) {
  int64_t axis = norm_axis(attr_int(attrs, "axis", node), in[0].shape.size(), node);
  Type t = in[0];
  for (size_t i = 1; i < in.size(); i++) {
    Type a = in[i];
    if (a.shape.size() != t.shape.size()) bad(node, "concat operands differ in rank");
    for (size_t d = 0; d < a.shape.size(); d++)
      if (int64_t(d) != axis && a.shape[d] != in[0].shape[d]) bad(node, "concat operands differ outside the axis");
    t.shape[size_t(axis)] += a.shape[size_t(axis)];
  }
  return t;
}

// q [1, H, Sq, D], k and v [1, H, Skv, D], optional additive mask broadcastable to [1, H, Sq, Skv].
Type attention(const std::vector<Type>& in, const std::string& node) {
  const auto &q = in[0].shape, &k = in[1].shape, &v = in[2].shape;
  if (q.size() != 4 || k.size() != 4 || v.size() != 4) bad(node, "attention operands must be [1, H, S, D]");
  if (k != v || k[1] != q[1] || k[3] != q[3])
    bad(node, fmt::format("attention shapes q {}, k {}, v {} do not fit", shape_str(q), shape_str(k), shape_str(v)));
  if (in.size() == 4) broadcast(in[3].shape, {1, q[1], q[2], k[2]}, node);
  return in[0];
}

}  // namespace

std::vector<Type> infer_types(Op op, const std::vector<Type>& in, const Attrs& attrs, const std::string& node) {
  const OpInfo& info = op_info(op);
  if (int(in.size()) < info.min_inputs || int(in.size()) > info.max_inputs)
    bad(node, fmt::format("{} takes {}..{} inputs, got {}", info.name, info.min_inputs, info.max_inputs, in.size()));
  for (size_t i = 1; i < in.size(); i++)
    if (in[i].elem != in[0].elem && op != Op::Attention)
      bad(node, fmt::format("{} mixes element types {} and {}", info.name, elem_name(in[0].elem), elem_name(in[i].elem)));
  switch (op) {
    case Op::Input:
    case Op::Const: bad(node, "inputs and constants carry their own type");
    case Op::Identity:
    case Op::Neg:
    case Op::Relu:
    case Op::Tanh:
    case Op::Sigmoid:
    case Op::Exp:
    case Op::Sqrt:
    case Op::Rsqrt:
    case Op::Gelu:
    case Op::Silu: return {in[0]};
    case Op::Softmax: norm_axis(attr_int(attrs, "axis", node, -1), in[0].shape.size(), node); return {in[0]};
    case Op::Cast: {
      auto it = attrs.find("dtype");
      auto* s = it == attrs.end() ? nullptr : std::get_if<std::string>(&it->second);
      auto e = s ? elem_from_name(*s) : std::nullopt;
      if (!e) bad(node, "cast needs attribute dtype = fp16 | fp32 | int32 | bool");
      return {{*e, in[0].shape}};
    }
    case Op::Add:
    case Op::Sub:
    case Op::Mul:
    case Op::Pow: return {{in[0].elem, broadcast(in[0].shape, in[1].shape, node)}};
    case Op::Conv1x1: return {conv1x1(in, node)};
    case Op::Matmul: return {matmul(in, attrs, node)};
    case Op::ReduceSum:
    case Op::ReduceMean:
    case Op::ReduceMax: return {reduce(in[0], attrs, node)};
    case Op::Reshape: return {reshape(in[0], attrs, node)};
    case Op::Transpose: return {transpose(in[0], attrs, node)};
    case Op::Split: return split(in[0], attrs, node);
    case Op::Pad: return {pad(in[0], attrs, node)};
    case Op::Slice: return {slice(in[0], attrs, node)};
    case Op::Concat: return {concat(in, attrs, node)};
    case Op::Attention: return {attention(in, node)};
  }
  bad(node, "unknown op");
}

}  // namespace orion::ir
