// Small hand-built graphs for the MIL emitter and parser tests (test_mil*.cpp). Weights are
// deterministic functions of their index so the golden text and blobs never change by accident.
#pragma once
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace orion::compiler::test_graphs {

using ir::ElemType;
using ir::Graph;
using ir::Op;
using ir::Value;
using V = std::vector<int64_t>;

inline std::vector<float> ramp(int64_t n, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; i++) v[size_t(i)] = scale * std::sin(0.37f * float(i) + 0.1f);
  return v;
}

// x [1, 64, 1, 16] → conv1x1 (w [32, 64, 1, 1]) → + bias [1, 32, 1, 1] → relu → y
inline Graph linear() {
  Graph g("linear");
  Value x = g.input("x", {ElemType::F16, {1, 64, 1, 16}});
  Value w = g.constant_f32("w", {32, 64, 1, 1}, ramp(32 * 64, 0.125f));
  Value b = g.constant_f32("b", {1, 32, 1, 1}, ramp(32, 1.0f));
  Value c = g.add_node(Op::Conv1x1, {x, w}, {}, "proj");
  Value a = g.add_node(Op::Add, {c, b}, {}, "biased");
  g.add_output("y", g.add_node(Op::Relu, {a}, {}, "y"));
  return g;
}

// RMSNorm, a projection, and attention scores QKᵀ·scale → softmax; two outputs whose names differ
// from their nodes ("probs", "normed") so the emitter writes identity statements for them.
inline Graph norm_attention() {
  Graph g("norm_attention");
  Value x = g.input("x", {ElemType::F16, {1, 64, 1, 16}});
  Value k = g.input("k", {ElemType::F16, {1, 4, 16, 16}});
  Value sq = g.add_node(Op::Mul, {x, x}, {}, "sq");
  Value ms = g.add_node(Op::ReduceMean, {sq}, {{"axes", V{1}}, {"keep_dims", true}}, "ms");
  Value eps = g.scalar("eps", 0.00001);
  Value ad = g.add_node(Op::Add, {ms, eps}, {}, "ms_eps");
  Value nh = g.scalar("neg_half", -0.5);
  Value inv = g.add_node(Op::Pow, {ad, nh}, {}, "inv_rms");
  Value xn = g.add_node(Op::Mul, {x, inv}, {}, "xn");
  Value wq = g.constant_f32("wq", {64, 64, 1, 1}, ramp(64 * 64, 0.0625f));
  Value q = g.add_node(Op::Conv1x1, {xn, wq}, {}, "q");
  Value qh = g.add_node(Op::Reshape, {q}, {{"shape", V{1, 4, 16, 16}}}, "qh");
  Value qt = g.add_node(Op::Transpose, {qh}, {{"perm", V{0, 1, 3, 2}}}, "qt");
  Value s = g.add_node(Op::Matmul, {qt, k}, {{"transpose_x", false}, {"transpose_y", true}}, "scores");
  Value sc = g.scalar("scale", 0.25);
  Value ss = g.add_node(Op::Mul, {s, sc}, {}, "scaled");
  Value p = g.add_node(Op::Softmax, {ss}, {{"axis", int64_t(-1)}}, "sm");
  g.add_output("probs", p);
  g.add_output("normed", xn);
  return g;
}

// Every op that has a MIL form except cast (which M1/M2 lack; see cast_fp32): unary and binary
// elementwise, conv with a bias (C4 is validate-ane's business), split, reductions, reshape,
// transpose, matmul, softmax, pad with a non-zero value, slice, identity, concat.
inline Graph every_op() {
  Graph g("every_op");
  Value x = g.input("x", {ElemType::F16, {1, 32, 1, 16}});
  Value w = g.constant_f32("w", {16, 32, 1, 1}, ramp(16 * 32, 0.25f));
  Value bias = g.constant_f32("bias", {16}, ramp(16, 0.5f));
  Value c = g.add_node(Op::Conv1x1, {x, w, bias}, {}, "c");
  Value s = g.add_node(Op::Split, {c}, {{"axis", int64_t(1)}, {"split_sizes", V{8, 8}}}, "s");
  auto parts = g.results_of(s);
  Value a = g.add_node(Op::Add, {parts[0], parts[1]}, {}, "a");
  Value sb = g.add_node(Op::Sub, {a, parts[1]}, {}, "sb");
  Value m = g.add_node(Op::Mul, {sb, g.scalar("half", 0.5)}, {}, "m");
  Value v = g.add_node(Op::Relu, {m}, {}, "r");
  for (Op op : {Op::Tanh, Op::Sigmoid, Op::Exp, Op::Sqrt, Op::Rsqrt}) v = g.add_node(op, {v});
  Value p = g.add_node(Op::Pow, {v, g.scalar("two", 2.0)}, {}, "p");
  g.add_output("rsum", g.add_node(Op::ReduceSum, {p}, {{"axes", V{3}}, {"keep_dims", true}}, "rsum"));
  g.add_output("rmean", g.add_node(Op::ReduceMean, {p}, {{"axes", V{1}}, {"keep_dims", false}}, "rmean"));
  g.add_output("rmax", g.add_node(Op::ReduceMax, {p}, {{"axes", V{1, 3}}}, "rmax"));
  Value rs = g.add_node(Op::Reshape, {p}, {{"shape", V{1, 8, 4, -1}}}, "rs");
  Value tr = g.add_node(Op::Transpose, {rs}, {{"perm", V{0, 1, 3, 2}}}, "tr");
  Value mm = g.add_node(Op::Matmul, {tr, rs}, {{"transpose_x", true}, {"transpose_y", false}}, "mm");
  g.add_output("soft", g.add_node(Op::Softmax, {mm}, {}, "sm"));
  Value pd = g.add_node(Op::Pad, {p}, {{"pad", V{0, 0, 0, 0, 0, 0, 4, 12}}, {"value", 1.5}}, "pd");
  Value sl = g.add_node(Op::Slice, {pd}, {{"begin", V{0, 0, 0, 8}}, {"end", V{1, 8, 1, 24}}}, "sl");
  g.add_output("sl_id", g.add_node(Op::Identity, {sl}, {}, "sl_id"));
  g.add_output("cat", g.add_node(Op::Concat, {parts[0], parts[1]}, {{"axis", int64_t(3)}}, "cat"));
  g.add_output("second", parts[1]);
  return g;
}

// fp32 and int32 constants and cast (M3 and later): x fp16 → fp32 → × scale [1, 4, 1, 1] fp32 +
// scalar fp32 → fp16; and an int32 path with an int32 blob.
inline Graph cast_fp32() {
  Graph g("cast_fp32");
  Value x = g.input("x", {ElemType::F16, {1, 4, 1, 8}});
  Value i = g.input("i", {ElemType::I32, {1, 4, 1, 8}});
  Value xf = g.add_node(Op::Cast, {x}, {{"dtype", std::string("fp32")}}, "xf");
  Value sc = g.constant_f32("scale32", {1, 4, 1, 1}, {0.1f, -2.5f, 3.0e-8f, 65504.f}, ElemType::F32);
  Value y = g.add_node(Op::Mul, {xf, sc}, {}, "y32");
  y = g.add_node(Op::Add, {y, g.scalar("shift", 1.0 / 3.0, ElemType::F32)}, {}, "z32");
  g.add_output("y", g.add_node(Op::Cast, {y}, {{"dtype", std::string("fp16")}}, "y"));
  Value ic = g.constant_f32("offsets", {1, 4, 1, 1}, {-7, 0, 1, 123456}, ElemType::I32);
  Value is = g.add_node(Op::Add, {i, ic}, {}, "ia");
  g.add_output("ib", g.add_node(Op::Mul, {is, g.scalar("three", 3, ElemType::I32)}, {}, "ib"));
  return g;
}

struct NamedGraph {
  std::string name;
  std::function<Graph()> make;
  bool uses_cast;
};
inline std::vector<NamedGraph> all() {
  return {{"linear", linear, false},
          {"norm_attention", norm_attention, false},
          {"every_op", every_op, false},
          {"cast_fp32", cast_fp32, true}};
}

}  // namespace orion::compiler::test_graphs
