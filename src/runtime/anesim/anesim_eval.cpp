// anesim's evaluator: runs an execution plan in fp16 semantics (see anesim_plan.h).
//
// Why this mirrors the hardware: the ANE keeps every tensor in fp16 in its SRAM and between ops,
// so an op sees fp16 inputs and its result is stored as fp16 — rounding happens once per op
// boundary, never inside an op. Its multiply-accumulate arrays sum in fp32 (wider accumulators),
// so a long dot product does not lose precision term by term; we do the same, in an order that
// gives the same bits on every host CPU (anesim_gemm.h).
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "base/dtype.h"
#include "base/error.h"
#include "runtime/anesim/anesim_fast_ops.h"
#include "runtime/anesim/anesim_gemm.h"
#include "runtime/anesim/anesim_plan.h"
#include "runtime/fp16_span.h"

namespace orion::runtime::anesim {
namespace {

using ir::Op;
using ir::Tensor32;
using Shape = std::vector<int64_t>;

// dst[c, r] = src[r, c] for a row-major [rows, cols] src.
void transpose2d(float* dst, const float* src, int64_t rows, int64_t cols) {
  constexpr int64_t B = 32;  // blocked so both sides stay in cache
  for (int64_t r0 = 0; r0 < rows; r0 += B)
    for (int64_t c0 = 0; c0 < cols; c0 += B)
      for (int64_t r = r0; r < std::min(rows, r0 + B); r++)
        for (int64_t c = c0; c < std::min(cols, c0 + B); c++) dst[c * rows + r] = src[r * cols + c];
}

// Offsets (in matrices) of operand `in` for every batch index of `batch` (numpy broadcasting of
// the leading axes, right-aligned; an axis of size 1 repeats).
std::vector<int64_t> batch_offsets(const Shape& in, const Shape& batch) {
  int64_t n = 1;
  for (int64_t d : batch) n *= d;
  std::vector<int64_t> offs(size_t(n), 0);
  const size_t lead = batch.size() - in.size();
  for (int64_t b = 0; b < n; b++) {
    int64_t rest = b, off = 0, stride = 1;
    for (size_t d = batch.size(); d-- > 0;) {
      const int64_t idx = rest % batch[d];
      rest /= batch[d];
      if (d < lead) continue;
      const int64_t size = in[d - lead];
      if (size != 1) off += idx * stride;
      stride *= size;
    }
    offs[size_t(b)] = off;
  }
  return offs;
}

bool is_f16(const ir::Type& t) { return t.elem == ir::ElemType::F16; }

// A reshape keeps the values and their order, so only the shape changes: the input's buffer is
// taken over when this step is its last reader (and it is not a constant), copied otherwise.
template <typename Get>
Tensor32 reshaped(std::vector<std::vector<Tensor32>>& values, Get& get, ir::Value in, const Shape& shape,
                  const std::vector<int>& freed_here) {
  const bool last_read = std::find(freed_here.begin(), freed_here.end(), in.node) != freed_here.end() &&
                         !values[size_t(in.node)].empty();
  Tensor32 y = last_read ? std::move(values[size_t(in.node)][size_t(in.result)]) : get(in);
  y.shape = shape;
  return y;
}

}  // namespace

void round_fp16(Tensor32& t) { round_fp16_span(t.data.data(), t.numel()); }

Tensor32 conv1x1_fast(const Tensor32& x, const Tensor32& w) {
  // y[o, s] = Σ_i W[o, i]·x[i, s]: W [Cout, Cin] is A, x [Cin, S] (channel-major) is B as it is.
  const int64_t Cin = x.shape[1], S = x.shape[3], Cout = w.shape[0];
  Tensor32 y({1, Cout, 1, S});
  gemm_fixed_order(y.data.data(), w.data.data(), Cin, 1, x.data.data(), S, int(Cout), int(Cin), int(S));
  return y;
}

Tensor32 conv1x1_fast_blocked(const Tensor32& x, const BlockedWeight& w) {
  const int64_t Cin = x.shape[1], S = x.shape[3], Cout = w.rows;
  Tensor32 y({1, Cout, 1, S});
  gemm_fixed_order_blocked(y.data.data(), w.bits.data(), x.data.data(), S, int(Cout), int(Cin), int(S));
  return y;
}

Tensor32 matmul_fast(const Tensor32& x, const Tensor32& y, bool tx, bool ty, const Shape& out_shape) {
  const size_t R = out_shape.size(), rx = x.shape.size(), ry = y.shape.size();
  const int64_t M = out_shape[R - 2], N = out_shape[R - 1];
  const int64_t xr = x.shape[rx - 2], xc = x.shape[rx - 1], yr = y.shape[ry - 2], yc = y.shape[ry - 1];
  const int64_t K = tx ? xr : xc;
  const Shape batch(out_shape.begin(), out_shape.end() - 2);
  const std::vector<int64_t> ox = batch_offsets(Shape(x.shape.begin(), x.shape.end() - 2), batch);
  const std::vector<int64_t> oy = batch_offsets(Shape(y.shape.begin(), y.shape.end() - 2), batch);
  Tensor32 out(out_shape);
  std::vector<float> bt(ty ? size_t(K * N) : 0);
  for (size_t i = 0; i < ox.size(); i++) {
    // out = X·Y with X [M, K] (stored [K, M] when tx: read through strides) and Y [K, N]
    // (stored [N, K] when ty: transposed into bt, since B's rows must be contiguous).
    const float* xm = x.data.data() + ox[i] * xr * xc;
    const float* ym = y.data.data() + oy[i] * yr * yc;
    if (ty) transpose2d(bt.data(), ym, yr, yc), ym = bt.data();
    gemm_fixed_order(out.data.data() + int64_t(i) * M * N, xm, tx ? 1 : K, tx ? M : 1, ym, N, int(M), int(K), int(N));
  }
  return out;
}

Plan::Plan(std::shared_ptr<const ir::Graph> g, const std::vector<std::string>& input_names,
           const std::vector<std::string>& output_names)
    : g_(std::move(g)) {
  const ir::Graph& graph = *g_;
  const int N = int(graph.nodes().size());
  constants_.resize(size_t(N));
  for (const std::string& name : input_names) {
    const int i = graph.find(name);
    ORION_CHECK(i >= 0 && graph.node(i).op == Op::Input, "anesim plan: no input '{}'", name);
    input_nodes_.push_back(i);
    input_numel_.push_back(graph.node(i).results[0].numel());
  }
  std::map<std::string, ir::Value> outs;
  for (const ir::GraphOutput& o : graph.outputs()) outs[o.name] = o.value;
  for (const std::string& name : output_names) {
    ORION_CHECK(outs.count(name), "anesim plan: no output '{}'", name);
    output_values_.push_back(outs[name]);
    output_numel_.push_back(graph.type(outs[name]).numel());
  }
  // Last reader of every node (outputs live to the end, N).
  std::vector<int> last_use(size_t(N), -1);
  for (int i = 0; i < N; i++)
    if (!graph.node(i).dead)
      for (ir::Value v : graph.node(i).inputs) last_use[size_t(v.node)] = std::max(last_use[size_t(v.node)], i);
  for (ir::Value v : output_values_) last_use[size_t(v.node)] = N;
  std::map<int, size_t> step_of;  // node index → step
  for (int i = 0; i < N; i++) {
    const ir::Node& n = graph.node(i);
    if (n.dead || n.op == Op::Input) continue;
    if (n.op == Op::Const) {
      constants_[size_t(i)] = ir::const_values(n);  // converted once per load
      continue;
    }
    step_of[i] = steps_.size();
    steps_.push_back({i, {}});
  }
  for (int i = 0; i < N; i++) {
    const ir::Node& n = graph.node(i);
    if (n.dead || n.op == Op::Const || last_use[size_t(i)] >= N || last_use[size_t(i)] < 0) continue;
    steps_[step_of.at(last_use[size_t(i)])].frees.push_back(i);
  }
  pack_conv_weights();
  columns_ = column_layout(graph);
}

void Plan::pack_conv_weights() {
  const ir::Graph& graph = *g_;
  const size_t N = graph.nodes().size();
  conv_weights_.resize(N);
  std::vector<int> other_readers(N, 0);  // readers of each node that are not 1×1 convs' weights
  for (const Step& s : steps_) {
    const ir::Node& n = graph.node(s.node);
    for (size_t k = 0; k < n.inputs.size(); k++)
      if (!(n.op == Op::Conv1x1 && n.inputs.size() == 2 && k == 1)) other_readers[size_t(n.inputs[k].node)]++;
  }
  for (ir::Value v : output_values_) other_readers[size_t(v.node)]++;
  for (const Step& s : steps_) {
    const ir::Node& n = graph.node(s.node);
    if (n.op != Op::Conv1x1 || n.inputs.size() != 2 || graph.node(n.inputs[1].node).op != Op::Const) continue;
    const size_t w = size_t(n.inputs[1].node);
    const ir::Node& weight = graph.node(int(w));
    // Packed already (a weight shared by several convs), or fp32: kept as it is.
    if (!conv_weights_[w].empty() || weight.results[0].elem != ir::ElemType::F16) continue;
    Tensor32& c = constants_[w];
    const int64_t Cout = c.shape[0], Cin = c.numel() / Cout;
    std::vector<uint16_t> bits(size_t(Cin * Cout));
    std::memcpy(bits.data(), weight.data->bytes.data(), bits.size() * 2);  // [Cout, Cin] fp16
    conv_weights_[w] = {Cout, Cin, pack_row_blocks(bits.data(), int(Cout), int(Cin))};
    if (other_readers[w] == 0) c = Tensor32();  // no other reader needs the [Cout, Cin] layout
  }
}

std::vector<ir::Type> Plan::result_types(int i, int64_t width) const {
  std::vector<ir::Type> types = g_->node(i).results;
  if (columns_.position_wise() && columns_.carries[size_t(i)])
    for (ir::Type& t : types) t.shape.back() = width;
  return types;
}

std::vector<std::vector<Tensor32>> Plan::read_inputs(const std::vector<const uint16_t*>& inputs,
                                                     const ColumnClasses* narrow) const {
  std::vector<std::vector<Tensor32>> values(g_->nodes().size());
  std::vector<uint16_t> columns;
  for (size_t k = 0; k < inputs.size(); k++) {
    const int i = input_nodes_[k];
    const bool narrowed = narrow && columns_.carries[size_t(i)];
    Tensor32 t(narrowed ? result_types(i, narrow->width())[0].shape : g_->node(i).results[0].shape);
    const uint16_t* src = inputs[k];  // packed from byte 0 (C14)
    if (narrowed) {
      columns.resize(size_t(t.numel()));
      gather_columns(columns.data(), src, t.numel() / narrow->width(), columns_.S, *narrow);
      src = columns.data();
    }
    f16_to_f32_span(t.data.data(), src, t.numel());
    values[size_t(i)].push_back(std::move(t));
  }
  return values;
}

void Plan::write_outputs(const std::vector<std::vector<Tensor32>>& values, const std::vector<uint16_t*>& outputs,
                         const ColumnClasses* narrow) const {
  std::vector<uint16_t> columns;
  for (size_t k = 0; k < outputs.size(); k++) {
    const ir::Value v = output_values_[k];
    const Tensor32& t = g_->node(v.node).op == Op::Const ? constants_[size_t(v.node)]
                                                         : values[size_t(v.node)].at(size_t(v.result));
    if (!narrow || !columns_.carries[size_t(v.node)]) {
      f32_to_f16_span(outputs[k], t.data.data(), t.numel());  // packed at byte 0
      continue;
    }
    columns.resize(size_t(t.numel()));
    f32_to_f16_span(columns.data(), t.data.data(), t.numel());
    scatter_columns(outputs[k], columns.data(), t.numel() / narrow->width(), *narrow);
  }
}

void Plan::run(const std::vector<const uint16_t*>& inputs, const std::vector<uint16_t*>& outputs,
               Columns mode) const {
  const ir::Graph& graph = *g_;
  ORION_CHECK(inputs.size() == input_nodes_.size() && outputs.size() == output_values_.size(),
              "anesim plan: {} inputs and {} outputs given, the program has {} and {}", inputs.size(), outputs.size(),
              input_nodes_.size(), output_values_.size());
  // A position-wise program with equal columns runs one column of each class (anesim_columns.h).
  ColumnClasses classes;
  if (mode == Columns::Distinct && columns_.position_wise()) {
    std::vector<ColumnSource> sources;
    for (size_t k = 0; k < inputs.size(); k++)
      if (columns_.carries[size_t(input_nodes_[k])])
        sources.push_back({inputs[k], input_numel_[k] / columns_.S, columns_.S, 2});
    classes = ColumnClasses(first_equal_columns(sources, int(columns_.S)));
  }
  const ColumnClasses* narrow = classes.width() > 0 && classes.width() < columns_.S ? &classes : nullptr;
  const int64_t width = narrow ? narrow->width() : 0;
  std::vector<std::vector<Tensor32>> values = read_inputs(inputs, narrow);
  auto get = [&](ir::Value v) -> const Tensor32& {
    const Tensor32& c = constants_[size_t(v.node)];
    return graph.node(v.node).op == Op::Const ? c : values[size_t(v.node)].at(size_t(v.result));
  };
  for (const Step& s : steps_) {
    const ir::Node& n = graph.node(s.node);
    std::vector<ir::Type> narrowed;
    const std::vector<ir::Type>& results = narrow ? (narrowed = result_types(s.node, width)) : n.results;
    std::vector<Tensor32>& out = values[size_t(s.node)];
    bool rounded = false;  // the fast ops round their results themselves
    if (n.op == Op::Reshape && (is_f16(graph.type(n.inputs[0])) || !is_f16(n.results[0]))) {
      out.push_back(reshaped(values, get, n.inputs[0], results[0].shape, s.frees));
      rounded = true;  // the input's values, fp16 already when the type says so
    } else if (n.op == Op::Conv1x1 && n.inputs.size() == 2) {
      const BlockedWeight& w = conv_weights_[size_t(n.inputs[1].node)];
      out.push_back(w.empty() ? conv1x1_fast(get(n.inputs[0]), get(n.inputs[1])) : conv1x1_fast_blocked(get(n.inputs[0]), w));
    } else if (n.op == Op::Matmul) {
      out.push_back(matmul_fast(get(n.inputs[0]), get(n.inputs[1]), ir::attr_bool(n.attrs, "transpose_x", n.name, false),
                                ir::attr_bool(n.attrs, "transpose_y", n.name, false), results[0].shape));
    } else {
      std::vector<const Tensor32*> in;
      for (ir::Value v : n.inputs) in.push_back(&get(v));
      out.resize(1);
      rounded = eval_fast_op(n.op, in, n.attrs, results[0], n.name, out[0]);
      if (!rounded) out = ir::eval_op(n.op, in, n.attrs, results, n.name);
    }
    for (size_t r = 0; r < out.size() && !rounded; r++)
      if (is_f16(n.results[r])) round_fp16(out[r]);  // stored as fp16 between ops
    for (int dead : s.frees) values[size_t(dead)].clear();
  }
  write_outputs(values, outputs, narrow);
}

}  // namespace orion::runtime::anesim
