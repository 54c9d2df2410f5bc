// The reference interpreter: one function per op of ops.def (see interpret.h for the numerics).
#include "ir/interpret.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "base/dtype.h"
#include "base/error.h"

namespace orion::ir {

Tensor32::Tensor32(std::vector<int64_t> s, float fill) : shape(std::move(s)) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  data.assign(size_t(n), fill);
}

Tensor32::Tensor32(std::vector<int64_t> s, std::vector<float> values) : shape(std::move(s)), data(std::move(values)) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  ORION_CHECK(n == int64_t(data.size()), "tensor of {} elements given {} values", n, data.size());
}

float round_to_fp16(float x) { return f16_to_f32(f32_to_f16(x)); }

namespace {

using Shape = std::vector<int64_t>;

[[noreturn]] void bad(const std::string& node, const std::string& msg) {
  throw Error(ErrorKind::Input, msg, {{}, node, -1, {}});
}

// Row-major strides of a shape.
Shape strides_of(const Shape& s) {
  Shape st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

// Strides that read `in` (right-aligned, numpy style) at the coordinates of `out`: 0 where `in`
// has a 1 (or no dimension) that is broadcast.
Shape broadcast_strides(const Shape& in, const Shape& out) {
  Shape st(out.size(), 0), own = strides_of(in);
  size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); i++) st[off + i] = in[i] == 1 ? 0 : own[i];
  return st;
}

// Calls f(out_index, offset_a, offset_b) for every element of `out`, with the offsets of the
// broadcast operands a and b.
template <typename F>
void for_each_broadcast(const Shape& out, const Shape& sa, const Shape& sb, F f) {
  const size_t R = out.size();
  int64_t n = 1;
  for (int64_t d : out) n *= d;
  Shape idx(R, 0);
  int64_t oa = 0, ob = 0;
  for (int64_t i = 0; i < n; i++) {
    f(i, oa, ob);
    for (size_t d = R; d-- > 0;) {  // odometer increment, keeping the offsets in step
      if (++idx[d] < out[d]) {
        oa += sa[d], ob += sb[d];
        break;
      }
      oa -= sa[d] * (out[d] - 1), ob -= sb[d] * (out[d] - 1);
      idx[d] = 0;
    }
  }
}

// --- elementwise --------------------------------------------------------------------------------

template <typename F>
Tensor32 unary(const Tensor32& x, F f) {
  Tensor32 y(x.shape);
  for (size_t i = 0; i < x.data.size(); i++) y.data[i] = f(x.data[i]);
  return y;
}

// An elementwise unary op, unary_value(op, ·) on every element.
Tensor32 unary_op(const Tensor32& x, Op op) {
  return unary(x, [op](float v) { return unary_value(op, v); });
}

// a ∘ b with numpy broadcasting; the result shape comes from shape inference.
template <typename F>
Tensor32 binary(const Tensor32& a, const Tensor32& b, const Shape& out_shape, F f) {
  Tensor32 y(out_shape);
  for_each_broadcast(out_shape, broadcast_strides(a.shape, out_shape), broadcast_strides(b.shape, out_shape),
                     [&](int64_t i, int64_t ia, int64_t ib) {
                       y.data[size_t(i)] = f(a.data[size_t(ia)], b.data[size_t(ib)]);
                     });
  return y;
}

// --- linear algebra -----------------------------------------------------------------------------

// y[0, o, 0, s] = Σ_i W[o, i, 0, 0] · x[0, i, 0, s] (+ bias[o])       x [1, Cin, 1, S], W [Cout, Cin, 1, 1]
Tensor32 conv1x1(const Tensor32& x, const Tensor32& w, const Tensor32* bias) {
  const int64_t Cin = x.shape[1], S = x.shape[3], Cout = w.shape[0];
  Tensor32 y({1, Cout, 1, S});
  for (int64_t o = 0; o < Cout; o++)
    for (int64_t s = 0; s < S; s++) {
      double acc = bias ? bias->data[size_t(o)] : 0.0;
      for (int64_t i = 0; i < Cin; i++) acc += double(w.data[size_t(o * Cin + i)]) * x.data[size_t(i * S + s)];
      y.data[size_t(o * S + s)] = float(acc);
    }
  return y;
}

// y[..., m, n] = Σ_k X[..., m, k] · Y[..., k, n] where X = x or xᵀ (transpose_x), Y = y or yᵀ
// (transpose_y) on the last two axes; the leading (batch) axes broadcast like numpy.
Tensor32 matmul(const Tensor32& x, const Tensor32& y, bool tx, bool ty, const Shape& out_shape) {
  const size_t R = out_shape.size();
  const int64_t M = out_shape[R - 2], N = out_shape[R - 1];
  const int64_t xr = x.shape[x.shape.size() - 2], xc = x.shape.back();  // stored rows, columns
  const int64_t yr = y.shape[y.shape.size() - 2], yc = y.shape.back();
  const int64_t K = tx ? xr : xc;
  // Batch offsets: broadcast the leading axes of x and y to those of the output.
  Shape batch(out_shape.begin(), out_shape.end() - 2);
  Shape xb(x.shape.begin(), x.shape.end() - 2), yb(y.shape.begin(), y.shape.end() - 2);
  Shape sxb = broadcast_strides(xb, batch), syb = broadcast_strides(yb, batch);
  for (auto& s : sxb) s *= xr * xc;
  for (auto& s : syb) s *= yr * yc;
  if (batch.empty()) batch = {1}, sxb = {0}, syb = {0};
  Tensor32 out(out_shape);
  for_each_broadcast(batch, sxb, syb, [&](int64_t b, int64_t ox, int64_t oy) {
    for (int64_t m = 0; m < M; m++)
      for (int64_t n = 0; n < N; n++) {
        double acc = 0;
        for (int64_t k = 0; k < K; k++) {
          float a = x.data[size_t(ox + (tx ? k * xc + m : m * xc + k))];
          float c = y.data[size_t(oy + (ty ? n * yc + k : k * yc + n))];
          acc += double(a) * c;
        }
        out.data[size_t(b * M * N + m * N + n)] = float(acc);
      }
  });
  return out;
}

// --- reductions and softmax ---------------------------------------------------------------------

enum class Reduction { Sum, Mean, Max };

// Reduces x over `axes` into out_shape (whose rank may be lower when keep_dims is false: the
// output is laid out the same either way, since reduced axes have size 1).
Tensor32 reduce(const Tensor32& x, const Attrs& attrs, const Shape& out_shape, Reduction r, const std::string& node) {
  const size_t R = x.shape.size();
  std::vector<bool> reduced(R, false);
  for (int64_t a : attr_ints(attrs, "axes", node)) reduced[size_t(a < 0 ? a + int64_t(R) : a)] = true;
  Shape kept(R);  // the output shape with keep_dims
  int64_t count = 1;
  for (size_t i = 0; i < R; i++) kept[i] = reduced[i] ? 1 : x.shape[i], count *= reduced[i] ? x.shape[i] : 1;
  Shape to_out = broadcast_strides(kept, x.shape);  // x coordinates → output offset
  std::vector<double> acc(size_t(Tensor32(kept).numel()), r == Reduction::Max ? -INFINITY : 0.0);
  for_each_broadcast(x.shape, strides_of(x.shape), to_out, [&](int64_t, int64_t ix, int64_t io) {
    double v = x.data[size_t(ix)];
    acc[size_t(io)] = r == Reduction::Max ? std::max(acc[size_t(io)], v) : acc[size_t(io)] + v;
  });
  Tensor32 y(out_shape);
  for (size_t i = 0; i < acc.size(); i++) y.data[i] = float(r == Reduction::Mean ? acc[i] / double(count) : acc[i]);
  return y;
}

// y = exp(x − max) / Σ exp(x − max) along `axis`.
Tensor32 softmax(const Tensor32& x, int64_t axis) {
  const size_t R = x.shape.size();
  size_t a = size_t(axis < 0 ? axis + int64_t(R) : axis);
  int64_t n = x.shape[a], inner = 1, outer = 1;
  for (size_t i = a + 1; i < R; i++) inner *= x.shape[i];
  for (size_t i = 0; i < a; i++) outer *= x.shape[i];
  Tensor32 y(x.shape);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t in = 0; in < inner; in++) {
      auto at = [&](int64_t j) { return size_t((o * n + j) * inner + in); };
      float mx = -INFINITY;
      for (int64_t j = 0; j < n; j++) mx = std::max(mx, x.data[at(j)]);
      double sum = 0;
      for (int64_t j = 0; j < n; j++) sum += std::exp(double(x.data[at(j)]) - mx);
      for (int64_t j = 0; j < n; j++) y.data[at(j)] = float(std::exp(double(x.data[at(j)]) - mx) / sum);
    }
  return y;
}

// --- layout -------------------------------------------------------------------------------------

Tensor32 reshape(const Tensor32& x, const Shape& out_shape) { return Tensor32(out_shape, x.data); }

// y[i0, i1, ...] = x[i_perm⁻¹...]: output axis d is input axis perm[d].
Tensor32 transpose(const Tensor32& x, const Shape& perm, const Shape& out_shape) {
  Shape xs = strides_of(x.shape), st(perm.size());
  for (size_t d = 0; d < perm.size(); d++) st[d] = xs[size_t(perm[d])];
  Tensor32 y(out_shape);
  for_each_broadcast(out_shape, st, st, [&](int64_t i, int64_t ix, int64_t) { y.data[size_t(i)] = x.data[size_t(ix)]; });
  return y;
}

// Copies the box of x starting at `begin` with the shape of y into y.
void copy_box(const Tensor32& x, const Shape& begin, Tensor32& y) {
  Shape xs = strides_of(x.shape);
  int64_t base = 0;
  for (size_t d = 0; d < begin.size(); d++) base += begin[d] * xs[d];
  for_each_broadcast(y.shape, xs, xs,
                     [&](int64_t i, int64_t ix, int64_t) { y.data[size_t(i)] = x.data[size_t(base + ix)]; });
}

Tensor32 slice(const Tensor32& x, const Attrs& attrs, const Shape& out_shape, const std::string& node) {
  Tensor32 y(out_shape);
  copy_box(x, attr_ints(attrs, "begin", node), y);
  return y;
}

std::vector<Tensor32> split(const Tensor32& x, const Attrs& attrs, const std::vector<Type>& results,
                            const std::string& node) {
  int64_t axis = attr_int(attrs, "axis", node);
  if (axis < 0) axis += int64_t(x.shape.size());
  std::vector<Tensor32> parts;
  Shape begin(x.shape.size(), 0);
  for (const Type& t : results) {
    Tensor32 p(t.shape);
    copy_box(x, begin, p);
    begin[size_t(axis)] += t.shape[size_t(axis)];
    parts.push_back(std::move(p));
  }
  return parts;
}

// Constant padding: attr pad = (before, after) per axis, attr value (default 0).
Tensor32 pad(const Tensor32& x, const Attrs& attrs, const Shape& out_shape, const std::string& node) {
  Shape p = attr_ints(attrs, "pad", node);
  Tensor32 y(out_shape, float(attr_float(attrs, "value", node, 0.0)));
  Shape ys = strides_of(out_shape);
  int64_t base = 0;
  for (size_t d = 0; d < x.shape.size(); d++) base += p[2 * d] * ys[d];
  for_each_broadcast(x.shape, strides_of(x.shape), ys,
                     [&](int64_t, int64_t ix, int64_t iy) { y.data[size_t(base + iy)] = x.data[size_t(ix)]; });
  return y;
}

Tensor32 concat(const std::vector<const Tensor32*>& in, int64_t axis, const Shape& out_shape) {
  if (axis < 0) axis += int64_t(out_shape.size());
  Tensor32 y(out_shape);
  Shape ys = strides_of(out_shape);
  int64_t base = 0;
  for (const Tensor32* x : in) {
    for_each_broadcast(x->shape, strides_of(x->shape), ys,
                       [&](int64_t, int64_t ix, int64_t iy) { y.data[size_t(base + iy)] = x->data[size_t(ix)]; });
    base += x->shape[size_t(axis)] * ys[size_t(axis)];
  }
  return y;
}

// Element conversion of a cast (the values stay floats): int32 truncates toward zero (as C and
// numpy's astype do), bool is x ≠ 0; fp16 is rounded by interpret() when round_fp16 is set, like
// every other fp16-typed result.
Tensor32 cast(const Tensor32& x, ElemType to) {
  switch (to) {
    case ElemType::F16:
    case ElemType::F32: return x;
    case ElemType::I32: return unary(x, [](float v) { return std::trunc(v); });
    case ElemType::Bool: return unary(x, [](float v) { return v != 0.0f ? 1.0f : 0.0f; });
  }
  return x;
}

// --- composites ---------------------------------------------------------------------------------

// out = softmax(q·kᵀ·scale + mask)·v per head; q [1, H, Sq, D], k and v [1, H, Skv, D], mask
// broadcast to [1, H, Sq, Skv]; scale defaults to 1/√D.
Tensor32 attention(const std::vector<const Tensor32*>& in, const Attrs& attrs, const std::string& node) {
  const Tensor32 &q = *in[0], &k = *in[1], &v = *in[2];
  const int64_t H = q.shape[1], Sq = q.shape[2], D = q.shape[3], Skv = k.shape[2];
  const double scale = attr_float(attrs, "scale", node, 1.0 / std::sqrt(double(D)));
  Shape sshape{1, H, Sq, Skv};
  Tensor32 scores = matmul(q, k, false, true, sshape);
  for (float& s : scores.data) s = float(s * scale);
  if (in.size() == 4) scores = binary(scores, *in[3], sshape, [](float a, float b) { return a + b; });
  return matmul(softmax(scores, -1), v, false, false, q.shape);
}

}  // namespace

Tensor32 const_values(const Node& n) {
  const Type& t = n.results.at(0);
  ORION_CHECK(n.op == Op::Const && n.data && n.data->bytes.size() == t.bytes(), "node {} is not a valid constant", n.name);
  Tensor32 y(t.shape);
  const uint8_t* b = n.data->bytes.data();
  for (size_t i = 0; i < y.data.size(); i++) {
    switch (t.elem) {
      case ElemType::F16: {
        uint16_t h;
        std::memcpy(&h, b + 2 * i, 2);
        y.data[i] = f16_to_f32(h);
        break;
      }
      case ElemType::F32: std::memcpy(&y.data[i], b + 4 * i, 4); break;
      case ElemType::I32: {
        int32_t v;
        std::memcpy(&v, b + 4 * i, 4);
        y.data[i] = float(v);
        break;
      }
      case ElemType::Bool: y.data[i] = b[i] ? 1.0f : 0.0f; break;
    }
  }
  return y;
}

std::vector<Tensor32> eval_op(Op op, const std::vector<const Tensor32*>& in, const Attrs& attrs,
                              const std::vector<Type>& results, const std::string& node) {
  const Shape& out = results.at(0).shape;
  auto one = [](Tensor32 t) { return std::vector<Tensor32>{std::move(t)}; };
  auto sum = [](float a, float b) { return a + b; };
  switch (op) {
    case Op::Input:
    case Op::Const: bad(node, "inputs and constants are not evaluated as ops");
    case Op::Identity: return one(*in[0]);
    case Op::Conv1x1: return one(conv1x1(*in[0], *in[1], in.size() == 3 ? in[2] : nullptr));
    case Op::Matmul:
      return one(matmul(*in[0], *in[1], attr_bool(attrs, "transpose_x", node, false),
                        attr_bool(attrs, "transpose_y", node, false), out));
    case Op::Add: return one(binary(*in[0], *in[1], out, sum));
    case Op::Sub: return one(binary(*in[0], *in[1], out, [](float a, float b) { return a - b; }));
    case Op::Mul: return one(binary(*in[0], *in[1], out, [](float a, float b) { return a * b; }));
    case Op::Pow: return one(binary(*in[0], *in[1], out, [](float a, float b) { return std::pow(a, b); }));
    case Op::Neg:
    case Op::Relu:
    case Op::Tanh:
    case Op::Sigmoid:
    case Op::Exp:
    case Op::Sqrt:
    case Op::Rsqrt:
    case Op::Gelu:
    case Op::Silu: return one(unary_op(*in[0], op));
    case Op::ReduceSum: return one(reduce(*in[0], attrs, out, Reduction::Sum, node));
    case Op::ReduceMean: return one(reduce(*in[0], attrs, out, Reduction::Mean, node));
    case Op::ReduceMax: return one(reduce(*in[0], attrs, out, Reduction::Max, node));
    case Op::Reshape: return one(reshape(*in[0], out));
    case Op::Transpose: return one(transpose(*in[0], attr_ints(attrs, "perm", node), out));
    case Op::Split: return split(*in[0], attrs, results, node);
    case Op::Pad: return one(pad(*in[0], attrs, out, node));
    case Op::Slice: return one(slice(*in[0], attrs, out, node));
    case Op::Cast: return one(cast(*in[0], results[0].elem));
    case Op::Softmax: return one(softmax(*in[0], attr_int(attrs, "axis", node, -1)));
    case Op::Concat: return one(concat(in, attr_int(attrs, "axis", node), out));
    case Op::Attention: return one(attention(in, attrs, node));
  }
  bad(node, "unknown op");
}

std::vector<Tensor32> interpret(const Graph& g, const std::map<std::string, Tensor32>& inputs, InterpretOptions opt) {
  // values[i][r] holds result r of node i.
  std::vector<std::vector<Tensor32>> values(g.nodes().size());
  auto round_if_fp16 = [&](Tensor32& t, const Type& type) {
    if (opt.round_fp16 && type.elem == ElemType::F16)
      for (float& v : t.data) v = round_to_fp16(v);
  };
  for (int i = 0; i < int(g.nodes().size()); i++) {
    const Node& n = g.node(i);
    if (n.dead) continue;
    if (n.op == Op::Input) {
      auto it = inputs.find(n.name);
      if (it == inputs.end()) bad(n.name, "input is missing");
      if (it->second.shape != n.results[0].shape)
        bad(n.name, fmt::format("input has shape [{}], the graph declares {}", fmt::join(it->second.shape, ", "),
                                n.results[0].str()));
      values[size_t(i)] = {cast(it->second, n.results[0].elem)};  // int32/bool inputs hold integers
      round_if_fp16(values[size_t(i)][0], n.results[0]);
      continue;
    }
    if (n.op == Op::Const) {
      values[size_t(i)] = {const_values(n)};
      continue;
    }
    std::vector<const Tensor32*> in;
    for (Value v : n.inputs) in.push_back(&values.at(size_t(v.node)).at(size_t(v.result)));
    values[size_t(i)] = eval_op(n.op, in, n.attrs, n.results, n.name);
    for (size_t r = 0; r < n.results.size(); r++) round_if_fp16(values[size_t(i)][r], n.results[r]);
  }
  std::vector<Tensor32> out;
  for (const GraphOutput& o : g.outputs()) out.push_back(values.at(size_t(o.value.node)).at(size_t(o.value.result)));
  return out;
}

std::map<std::string, Tensor32> interpret_named(const Graph& g, const std::map<std::string, Tensor32>& inputs,
                                                InterpretOptions opt) {
  std::vector<Tensor32> v = interpret(g, inputs, opt);
  std::map<std::string, Tensor32> out;
  for (size_t i = 0; i < v.size(); i++) out[g.outputs()[i].name] = std::move(v[i]);
  return out;
}

}  // namespace orion::ir
