// anesim's column sharing (runtime/anesim/anesim_columns.h): a position-wise program computes each
// distinct input column once and copies it to the equal ones. It must write the very bytes the
// program computing every column writes — for a decode token with padding, for a batch whose rows
// repeat in any order, and when no two columns are alike — and programs that mix columns must not
// be taken for position-wise ones.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "anesim_test_util.h"
#include "base/dtype.h"
#include "compiler/mil/parse_mil.h"
#include "model/frontend_test_util.h"
#include "runtime/anesim/anesim_plan.h"

namespace orion::runtime::anesim {
namespace {

using namespace orion::frontends;
using ir::ElemType;
using ir::Graph;
using ir::Op;

constexpr int S = 32;  // [1, 768, 1, 32]: the C7 minimum, the bucket a GPT-2 124M decode runs at

const ModelWeights& weights(Arch arch) {
  static const auto make = [](Arch a) {
    ModelConfig c;
    c.arch = a;
    c.dim = 768, c.hidden_dim = 1024, c.n_layers = 1, c.n_heads = 12, c.n_kv_heads = 12;
    c.vocab_size = c.padded_vocab = 512, c.seq_len = 64;
    c.validate("test");
    return test::test_weights(c, a == Arch::GPT2 ? 21 : 22, 1.0f);
  };
  static const ModelWeights gpt2 = make(Arch::GPT2), llama = make(Arch::Llama);
  return arch == Arch::GPT2 ? gpt2 : llama;
}

// The plan anesim loads for g: compiled for M4 and parsed back, bound in alphabetical order.
Plan plan_of(Graph g) {
  compiler::CompileResult r = compiler::compile_graph(g, compiler::default_chip());
  auto parsed = std::make_shared<const Graph>(compiler::parse_mil(r.program.mil_text, r.program.weights, g.name()));
  return Plan(parsed, r.program.inputs.names(), r.program.outputs.names());
}

// How the columns of every input are filled.
enum class Pattern {
  Decode,        // column 0 holds a token, the others zeros (the padding of a single-row decode)
  RepeatedRows,  // 5 different columns repeated in a scrambled order (a batch whose rows repeat)
  AllDistinct,   // no two columns alike
};

// fp16 inputs of the plan's sizes, each input's rows filled per `pattern`.
std::vector<std::vector<uint16_t>> inputs_for(const Plan& p, Pattern pattern, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<std::vector<uint16_t>> in;
  for (int64_t numel : p.input_numel()) {
    std::vector<uint16_t> t(size_t(numel), 0);
    const int64_t rows = numel / S;
    for (int64_t r = 0; r < rows; r++)
      for (int s = 0; s < S; s++) {
        const int source = pattern == Pattern::Decode ? (s == 0 ? 0 : -1)
                           : pattern == Pattern::RepeatedRows ? (s * 7 + 3) % 5
                                                               : s;
        if (source >= 0) t[size_t(r * S + s)] = f32_to_f16(n(rng) + float(source));
      }
    if (pattern == Pattern::RepeatedRows)  // make the repeats exact copies of their first column
      for (int64_t r = 0; r < rows; r++)
        for (int s = 0; s < S; s++)
          for (int e = 0; e < s; e++)
            if ((e * 7 + 3) % 5 == (s * 7 + 3) % 5) {
              t[size_t(r * S + s)] = t[size_t(r * S + e)];
              break;
            }
    in.push_back(std::move(t));
  }
  return in;
}

// Every output's bytes after running p on `in` (outputs pre-filled with a pattern no result has).
std::vector<std::vector<uint16_t>> outputs_of(const Plan& p, const std::vector<std::vector<uint16_t>>& in,
                                              Plan::Columns mode) {
  std::vector<std::vector<uint16_t>> out;
  for (int64_t numel : p.output_numel()) out.emplace_back(size_t(numel), uint16_t(0x7c01));  // a NaN
  std::vector<const uint16_t*> ip;
  std::vector<uint16_t*> op;
  for (const auto& t : in) ip.push_back(t.data());
  for (auto& t : out) op.push_back(t.data());
  p.run(ip, op, mode);
  return out;
}

struct Kernel {
  const char* name;
  Graph (*build)();
  bool position_wise;
};

const Kernel kKernels[] = {
    {"gpt2_decode_qkv", [] { return gpt2_decode_qkv(weights(Arch::GPT2), 0, S); }, true},
    {"gpt2_decode_ffn", [] { return gpt2_decode_ffn(weights(Arch::GPT2), 0, S); }, true},
    {"final_norm_gpt2", [] { return final_norm(weights(Arch::GPT2), S); }, true},
    {"gpt2_prefill_ffn", [] { return gpt2_prefill_ffn(weights(Arch::GPT2), 0, S); }, true},
    {"llama_fwd_ffn", [] { return llama_fwd_ffn(weights(Arch::Llama), 0, S); }, true},
    {"final_norm_llama", [] { return final_norm(weights(Arch::Llama), S); }, true},
    {"gpt2_prefill_attn", [] { return gpt2_prefill_attn(weights(Arch::GPT2), 0, S); }, false},
    {"llama_fwd_attn", [] { return llama_fwd_attn(weights(Arch::Llama), 0, S); }, false},
};

TEST(anesim_Columns, PositionWiseKernelsWriteTheBytesOfEveryColumnComputed) {
  for (const Kernel& k : kKernels) {
    SCOPED_TRACE(k.name);
    const Plan p = plan_of(k.build());
    EXPECT_EQ(p.position_wise(), k.position_wise);
    for (Pattern pattern : {Pattern::Decode, Pattern::RepeatedRows, Pattern::AllDistinct}) {
      SCOPED_TRACE(int(pattern));
      const auto in = inputs_for(p, pattern, 5);
      const auto every = outputs_of(p, in, Plan::Columns::Every);
      const auto distinct = outputs_of(p, in, Plan::Columns::Distinct);
      ASSERT_EQ(every.size(), distinct.size());
      for (size_t o = 0; o < every.size(); o++) {
        ASSERT_EQ(every[o], distinct[o]) << "output " << o;
        for (uint16_t v : every[o]) ASSERT_NE(v, 0x7c01) << "output " << o << " not written";
      }
    }
  }
}

// x [1, 768, 1, 32] → op → output, for the layout rules one op at a time.
Graph one_op(Op op, ir::Attrs attrs, const char* name) {
  Graph g(name);
  ir::Value x = g.input("x", {ElemType::F16, {1, 768, 1, S}});
  g.add_output("y", g.add_node(op, {x}, std::move(attrs), "y"));
  return g;
}

TEST(anesim_Columns, OpsThatMixOrCutColumnsAreNotPositionWise) {
  using V = std::vector<int64_t>;
  EXPECT_TRUE(column_layout(one_op(Op::Softmax, {{"axis", int64_t(1)}}, "softmax_channels")).position_wise());
  EXPECT_FALSE(column_layout(one_op(Op::Softmax, {{"axis", int64_t(-1)}}, "softmax_columns")).position_wise());
  EXPECT_TRUE(column_layout(one_op(Op::ReduceSum, {{"axes", V{1}}, {"keep_dims", true}}, "sum_channels")).position_wise());
  EXPECT_FALSE(column_layout(one_op(Op::ReduceSum, {{"axes", V{3}}, {"keep_dims", true}}, "sum_columns")).position_wise());
  EXPECT_TRUE(column_layout(one_op(Op::Transpose, {{"perm", V{0, 2, 1, 3}}}, "swap_leading")).position_wise());
  EXPECT_FALSE(column_layout(one_op(Op::Transpose, {{"perm", V{0, 1, 3, 2}}}, "swap_last")).position_wise());
  EXPECT_TRUE(column_layout(one_op(Op::Reshape, {{"shape", V{1, 12, 64, S}}}, "heads")).position_wise());
  EXPECT_FALSE(column_layout(one_op(Op::Reshape, {{"shape", V{1, 768, S, 1}}}, "column_last")).position_wise());
  EXPECT_FALSE(column_layout(one_op(Op::Slice, {{"begin", V{0, 0, 0, 0}}, {"end", V{1, 768, 1, 16}}}, "cut")).position_wise());
  Graph m("matmul");  // xᵀ·x mixes every column with every other
  ir::Value x = m.input("x", {ElemType::F16, {1, 768, 1, S}});
  ir::Value x2 = m.add_node(Op::Reshape, {x}, {{"shape", V{1, 768, S}}});
  m.add_output("y", m.add_node(Op::Matmul, {x2, x2}, {{"transpose_x", true}, {"transpose_y", false}}, "y"));
  EXPECT_FALSE(column_layout(m).position_wise());
  Graph c("per_column_constant");  // a constant that differs per column: equal inputs, unequal outputs
  ir::Value xc = c.input("x", {ElemType::F16, {1, 768, 1, S}});
  c.add_output("y", c.add_node(Op::Add, {xc, c.constant_f32("ramp", {1, 1, 1, S}, std::vector<float>(S, 1.0f))}, {}, "y"));
  EXPECT_FALSE(column_layout(c).position_wise());
}

}  // namespace
}  // namespace orion::runtime::anesim
