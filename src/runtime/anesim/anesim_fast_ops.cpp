// anesim's fast ops (see anesim_fast_ops.h for why they give eval_op's bits).
#include "runtime/anesim/anesim_fast_ops.h"

#include <algorithm>
#include <cmath>

#include "runtime/fp16_span.h"

namespace orion::runtime::anesim {
namespace {

using ir::Op;
using ir::Tensor32;
using Shape = std::vector<int64_t>;

constexpr int64_t kParallelAbove = 1 << 17;  // elements; smaller ops are not worth waking threads

// out = a ∘ b over numpy-broadcast shapes, as rows: the output's axes with the broadcast strides
// of both operands, size-1 axes dropped and neighbours merged wherever both operands step through
// them contiguously. What is left is `rows` rows of n elements; a row reads a and b with the
// strides step_a, step_b (1, or 0 for a broadcast operand), starting at offsets the outer axes give.
struct Rows {
  Shape outer, outer_a, outer_b;  // outer axes (outermost first) and the operands' strides along them
  int64_t n = 1, step_a = 0, step_b = 0;
  int64_t rows() const {
    int64_t r = 1;
    for (int64_t d : outer) r *= d;
    return r;
  }
  // Offsets into a and b of row r.
  void offsets(int64_t r, int64_t& oa, int64_t& ob) const {
    oa = ob = 0;
    for (size_t d = outer.size(); d-- > 0;) {
      const int64_t i = r % outer[d];
      r /= outer[d];
      oa += i * outer_a[d], ob += i * outer_b[d];
    }
  }
};

// Strides reading `in` (right-aligned) at the coordinates of `out`: 0 along broadcast axes.
Shape strides_into(const Shape& in, const Shape& out) {
  Shape st(out.size(), 0);
  int64_t stride = 1;
  for (size_t i = in.size(); i-- > 0;) {
    st[out.size() - in.size() + i] = in[i] == 1 ? 0 : stride;
    stride *= in[i];
  }
  return st;
}

Rows fold_axes(const Shape& a, const Shape& b, const Shape& out) {
  const Shape sa = strides_into(a, out), sb = strides_into(b, out);
  Shape dims, da, db;
  for (size_t i = 0; i < out.size(); i++) {
    if (out[i] == 1) continue;
    if (!dims.empty() && da.back() == sa[i] * out[i] && db.back() == sb[i] * out[i]) {
      dims.back() *= out[i], da.back() = sa[i], db.back() = sb[i];  // contiguous with the axis before
    } else {
      dims.push_back(out[i]), da.push_back(sa[i]), db.push_back(sb[i]);
    }
  }
  Rows r;
  if (dims.empty()) return r;  // one element
  r.n = dims.back(), r.step_a = da.back(), r.step_b = db.back();
  r.outer.assign(dims.begin(), dims.end() - 1);
  r.outer_a.assign(da.begin(), da.end() - 1);
  r.outer_b.assign(db.begin(), db.end() - 1);
  return r;
}

// y[i] = f(a[i·sa], b[i·sb]) for i < n, with the common stride patterns as their own loops so the
// compiler vectorises them.
template <typename F>
void binary_row(float* y, const float* a, int64_t sa, const float* b, int64_t sb, int64_t n, F f) {
  if (sa == 1 && sb == 1) {
    for (int64_t i = 0; i < n; i++) y[i] = f(a[i], b[i]);
  } else if (sa == 1 && sb == 0) {
    const float s = b[0];
    for (int64_t i = 0; i < n; i++) y[i] = f(a[i], s);
  } else if (sa == 0 && sb == 1) {
    const float s = a[0];
    for (int64_t i = 0; i < n; i++) y[i] = f(s, b[i]);
  } else {
    for (int64_t i = 0; i < n; i++) y[i] = f(a[i * sa], b[i * sb]);
  }
}

// The rows are cut into pieces of at most kChunk elements, shared among threads: a long row (two
// operands of one shape fold into a single row) is split too, and each piece is rounded while it
// is in cache, by a call too short to start a parallel region of its own.
template <typename F>
void binary(const Tensor32& a, const Tensor32& b, Tensor32& y, bool round, F f) {
  constexpr int64_t kChunk = 4096;
  const Rows r = fold_axes(a.shape, b.shape, y.shape);
  const int64_t rows = r.rows(), per_row = (r.n + kChunk - 1) / kChunk, pieces = rows * per_row;
#pragma omp parallel for schedule(static) if (rows * r.n > kParallelAbove && pieces > 1)
  for (int64_t p = 0; p < pieces; p++) {
    const int64_t row = p / per_row, i0 = p % per_row * kChunk, len = std::min(kChunk, r.n - i0);
    int64_t oa, ob;
    r.offsets(row, oa, ob);
    float* yr = y.data.data() + row * r.n + i0;
    binary_row(yr, a.data.data() + oa + i0 * r.step_a, r.step_a, b.data.data() + ob + i0 * r.step_b, r.step_b, len, f);
    if (round) round_fp16_span(yr, len);
  }
}

// y = unary_value(OP, x) elementwise, in chunks shared among threads.
template <Op OP>
void unary(const Tensor32& x, Tensor32& y, bool round) {
  constexpr int64_t kChunk = 4096;
  const int64_t n = x.numel(), chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n > kParallelAbove)
  for (int64_t c = 0; c < chunks; c++) {
    const int64_t i0 = c * kChunk, i1 = std::min(n, i0 + kChunk);
    const float* xs = x.data.data();
    float* ys = y.data.data();
    for (int64_t i = i0; i < i1; i++) ys[i] = ir::unary_value(OP, xs[i]);
    if (round) round_fp16_span(ys + i0, i1 - i0);
  }
}

// y = softmax(x) along `axis`, per line: max, then Σ exp(x − max) in double in ascending order,
// then exp(x − max) / Σ — eval_op's formula, with each exponential computed once instead of twice.
void softmax(const Tensor32& x, int64_t axis, Tensor32& y) {
  const size_t R = x.shape.size(), a = size_t(axis < 0 ? axis + int64_t(R) : axis);
  int64_t n = x.shape[a], inner = 1, outer = 1;
  for (size_t i = a + 1; i < R; i++) inner *= x.shape[i];
  for (size_t i = 0; i < a; i++) outer *= x.shape[i];
  const int64_t lines = outer * inner;
#pragma omp parallel if (lines * n > kParallelAbove)
  {
    std::vector<double> e(static_cast<size_t>(n));
#pragma omp for schedule(static)
    for (int64_t l = 0; l < lines; l++) {
      const int64_t base = l / inner * n * inner + l % inner;
      const float* xs = x.data.data() + base;
      float* ys = y.data.data() + base;
      float mx = -INFINITY;
      for (int64_t j = 0; j < n; j++) mx = std::max(mx, xs[j * inner]);
      double sum = 0;
      for (int64_t j = 0; j < n; j++) e[size_t(j)] = std::exp(double(xs[j * inner]) - mx), sum += e[size_t(j)];
      for (int64_t j = 0; j < n; j++) ys[j * inner] = float(e[size_t(j)] / sum);
    }
  }
}

// x viewed as [outer, reduced, inner] when the reduced axes of size > 1 are neighbours; false
// otherwise. `count` is the number of elements each output sums.
bool reduction_block(const Shape& shape, const Shape& axes, int64_t& outer, int64_t& reduced, int64_t& inner,
                     int64_t& count) {
  const int64_t R = int64_t(shape.size());
  std::vector<bool> is_reduced(size_t(R), false);
  for (int64_t a : axes) is_reduced[size_t(a < 0 ? a + R : a)] = true;
  outer = reduced = inner = count = 1;
  int phase = 0;  // 0: before the reduced block, 1: in it, 2: after it
  for (int64_t d = 0; d < R; d++) {
    const int64_t size = shape[size_t(d)];
    if (is_reduced[size_t(d)]) count *= size;
    if (size == 1) continue;
    if (is_reduced[size_t(d)]) {
      if (phase == 2) return false;
      phase = 1, reduced *= size;
    } else {
      if (phase == 1) phase = 2;
      (phase == 0 ? outer : inner) *= size;
    }
  }
  return true;
}

enum class Reduction { Sum, Mean, Max };

// eval_op's reductions: every output accumulates its inputs in double, in ascending order of the
// reduced index (as eval_op's walk over x does), then is rounded to fp32 once.
bool reduce(const Tensor32& x, const Shape& axes, Reduction kind, Tensor32& y) {
  int64_t outer, reduced, inner, count;
  if (!reduction_block(x.shape, axes, outer, reduced, inner, count)) return false;
#pragma omp parallel if (x.numel() > kParallelAbove)
  {
    std::vector<double> acc(static_cast<size_t>(inner));
#pragma omp for schedule(static)
    for (int64_t o = 0; o < outer; o++) {
      std::fill(acc.begin(), acc.end(), kind == Reduction::Max ? -INFINITY : 0.0);
      for (int64_t r = 0; r < reduced; r++) {
        const float* xs = x.data.data() + (o * reduced + r) * inner;
        if (kind == Reduction::Max)
          for (int64_t i = 0; i < inner; i++) acc[size_t(i)] = std::max(acc[size_t(i)], double(xs[i]));
        else
          for (int64_t i = 0; i < inner; i++) acc[size_t(i)] += double(xs[i]);
      }
      float* ys = y.data.data() + o * inner;
      for (int64_t i = 0; i < inner; i++)
        ys[i] = float(kind == Reduction::Mean ? acc[size_t(i)] / double(count) : acc[size_t(i)]);
    }
  }
  return true;
}

}  // namespace

bool eval_fast_op(Op op, const std::vector<const Tensor32*>& in, const ir::Attrs& attrs, const ir::Type& result,
                  const std::string& node, Tensor32& out) {
  const bool round = result.elem == ir::ElemType::F16;
  const auto rounded = [&] {
    if (round) round_fp16_span(out.data.data(), out.numel());
    return true;
  };
  switch (op) {
    case Op::Softmax:
      out = Tensor32(in[0]->shape);
      softmax(*in[0], ir::attr_int(attrs, "axis", node, -1), out);
      return rounded();
    case Op::ReduceSum:
    case Op::ReduceMean:
    case Op::ReduceMax: {
      const Reduction kind =
          op == Op::ReduceSum ? Reduction::Sum : op == Op::ReduceMean ? Reduction::Mean : Reduction::Max;
      Tensor32 y(result.shape);
      if (!reduce(*in[0], ir::attr_ints(attrs, "axes", node), kind, y)) return false;
      out = std::move(y);
      return rounded();
    }
    case Op::Add:
    case Op::Sub:
    case Op::Mul: {
      out = Tensor32(result.shape);
      const Tensor32 &a = *in[0], &b = *in[1];
      if (op == Op::Add) binary(a, b, out, round, [](float x, float y) { return x + y; });
      if (op == Op::Sub) binary(a, b, out, round, [](float x, float y) { return x - y; });
      if (op == Op::Mul) binary(a, b, out, round, [](float x, float y) { return x * y; });
      return true;
    }
#define ANESIM_UNARY(o)                      \
  case Op::o:                                \
    out = Tensor32(in[0]->shape);            \
    unary<Op::o>(*in[0], out, round);        \
    return true;
      ANESIM_UNARY(Neg)
      ANESIM_UNARY(Relu)
      ANESIM_UNARY(Tanh)
      ANESIM_UNARY(Sigmoid)
      ANESIM_UNARY(Exp)
      ANESIM_UNARY(Sqrt)
      ANESIM_UNARY(Rsqrt)
      ANESIM_UNARY(Gelu)
      ANESIM_UNARY(Silu)
#undef ANESIM_UNARY
    default: return false;
  }
}

}  // namespace orion::runtime::anesim
