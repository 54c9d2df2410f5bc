// anesim's numerics: fp16 storage rounded at every op boundary, fp32 accumulation inside conv and
// matmul, packed fp16 read from and written to byte 0 (C14), and the fast kernels against the
// reference interpreter's ops.
#include <gtest/gtest.h>

#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "anesim_test_util.h"
#include "base/dtype.h"
#include "runtime/anesim/anesim_gemm.h"
#include "runtime/anesim/anesim_plan.h"
#include "runtime/cpu/kernels.h"

namespace orion::runtime::anesim {
namespace {

using ir::ElemType;
using ir::Graph;
using ir::Op;
using ir::Tensor32;

const std::vector<int64_t> kX = {1, 768, 1, 32};  // the C7 minimum exactly

// Compiles g for M4, evaluates it on x with surfaces of `alloc` bytes; returns output `name`.
Tensor32 run(Graph g, const Tensor32& x, size_t alloc = 49152, runtime::Surface* out_surface = nullptr) {
  const std::vector<int64_t> out_shape = g.type(g.outputs()[0].value).shape;
  compiler::CompiledProgram cp = compiler::compile_graph(g, compiler::default_chip()).program;
  AnesimDriver d;
  auto p = d.compile(cp.mil_text, cp.weights, g.name());
  d.load(*p);
  auto in = test::make_surfaces(1, alloc), out = test::make_surfaces(1, alloc);
  std::memset(in.s[0].data(), 0xff, alloc);  // NaN bytes after the data: must never be read
  std::memset(out.s[0].data(), 0x7c, alloc);
  in.s[0].write_f32(x.data.data(), x.data.size());
  d.evaluate(*p, in.ptrs(), out.ptrs());
  if (out_surface) *out_surface = out.s[0];
  return test::read_surface(out.s[0], out_shape);
}

TEST(anesim_Eval, EveryOpResultIsRoundedToFp16) {
  // y = (x + 2048) − 2048. In fp16 the sum is stored with a spacing of 2 near 2048, so |x| < 1
  // comes back as 0 (fp32 arithmetic would return x). The hardware stores the sum in fp16.
  Graph g("round");
  ir::Value x = g.input("x", {ElemType::F16, kX});
  ir::Value big = g.scalar("big", 2048.0);
  g.add_output("y", g.add_node(Op::Sub, {g.add_node(Op::Add, {x, big}), big}, {}, "y"));
  Tensor32 xv = test::random_t(kX, 3, 0.3f);
  Tensor32 y = run(g, xv);
  size_t nonzero_inputs = 0;
  for (size_t i = 0; i < xv.data.size(); i++) {
    nonzero_inputs += xv.data[i] != 0.0f;
    const float want = ir::round_to_fp16(2048.0f + xv.data[i]) - 2048.0f;
    ASSERT_EQ(y.data[i], want) << i;
  }
  EXPECT_GT(nonzero_inputs, xv.data.size() / 2);
}

TEST(anesim_Eval, ConvAccumulatesInFp32) {
  // Every output channel sums 2048 + 767 ones. Accumulating in fp16 would stall at 2048 (2049
  // rounds back to 2048); the ANE accumulates in fp32 and stores 2815 → fp16 2816.
  Graph g("acc");
  ir::Value x = g.input("x", {ElemType::F16, kX});
  ir::Value W = g.constant_f32("w", {768, 768, 1, 1}, std::vector<float>(768 * 768, 1.0f));
  g.add_output("y", g.add_node(Op::Conv1x1, {x, W}, {}, "y"));
  Tensor32 xv(kX, 1.0f);
  for (int s = 0; s < 32; s++) xv.data[size_t(s)] = 2048.0f;  // channel 0
  Tensor32 y = run(g, xv);
  for (float v : y.data) ASSERT_EQ(v, 2816.0f);
}

TEST(anesim_Eval, InputsReadAndOutputsWrittenPackedFromByteZero) {
  // C14: a surface larger than the data holds it packed at offset 0; anesim reads only the data
  // (the input's tail is NaN bytes) and writes only the data (the output's tail keeps its bytes).
  Graph g("packed");
  g.add_output("y", g.add_node(Op::Relu, {g.input("x", {ElemType::F16, kX})}, {}, "y"));
  Tensor32 xv = test::random_t(kX, 4);
  runtime::Surface out;
  Tensor32 y = run(g, xv, 65536, &out);
  for (size_t i = 0; i < xv.data.size(); i++) ASSERT_EQ(y.data[i], std::max(0.0f, xv.data[i]));
  for (size_t b = 49152; b < 65536; b++) ASSERT_EQ(out.data()[b], 0x7c) << b;
}

// The fast kernels against eval_op (which accumulates in double): within fp32 summation error.
void expect_close(const Tensor32& got, const Tensor32& want) {
  ASSERT_EQ(got.shape, want.shape);
  const test::ErrorStats e = test::compare(got, want);
  EXPECT_LE(e.rel(), 1e-5) << "max |err| " << e.max_abs;
}

TEST(anesim_Eval, FastMatmulMatchesTheInterpreterWithFlagsAndBroadcasting) {
  // x [2, 1, M, K] · y [1, 3, K, N] → [2, 3, M, N] (and every transposed spelling).
  const int64_t M = 5, K = 37, N = 19;
  for (bool tx : {false, true})
    for (bool ty : {false, true}) {
      SCOPED_TRACE(testing::Message() << "tx " << tx << " ty " << ty);
      Tensor32 x = test::random_t({2, 1, tx ? K : M, tx ? M : K}, 7), y = test::random_t({1, 3, ty ? N : K, ty ? K : N}, 8);
      const std::vector<int64_t> out = {2, 3, M, N};
      const ir::Attrs attrs = {{"transpose_x", tx}, {"transpose_y", ty}};
      Tensor32 want = ir::eval_op(Op::Matmul, {&x, &y}, attrs, {{ElemType::F32, out}}, "mm")[0];
      expect_close(matmul_fast(x, y, tx, ty, out), want);
    }
}

TEST(anesim_Eval, FastConvMatchesTheInterpreter) {
  Tensor32 x = test::random_t({1, 40, 1, 23}, 9), w = test::random_t({17, 40, 1, 1}, 10);
  Tensor32 want = ir::eval_op(Op::Conv1x1, {&x, &w}, {}, {{ElemType::F32, {1, 17, 1, 23}}}, "conv")[0];
  expect_close(conv1x1_fast(x, w), want);
}

// The ANE's sums do not depend on the host: every instruction set's tile and any thread count give
// the same bits (anesim_gemm.h), so a program's fp16 outputs are the same on every machine.
TEST(anesim_Eval, MatmulAndConvGiveTheSameBitsOnEveryInstructionSetAndThreadCount) {
  // Odd sizes: partial row tiles and columns past the last whole tile of every width (8, 16, 32),
  // and big enough (M·N·K > 2¹⁸) to be split over threads.
  const int64_t M = 45, K = 301, N = 83;
  const Tensor32 x = test::random_t({2, 1, M, K}, 21), y = test::random_t({1, 3, N, K}, 22);
  const Tensor32 cx = test::random_t({1, K, 1, N}, 23), cw = test::random_t({M, K, 1, 1}, 24);
  std::vector<uint16_t> cw16(cw.data.size());  // as the plan keeps a constant weight: fp16, packed
  for (size_t i = 0; i < cw16.size(); i++) cw16[i] = f32_to_f16(cw.data[i]);
  const BlockedWeight cwb{M, K, pack_row_blocks(cw16.data(), int(M), int(K))};
  std::vector<Tensor32> mm, conv;
  std::vector<std::string> runs;
  test::on_every_path([&](const std::string& run) {
    mm.push_back(matmul_fast(x, y, false, true, {2, 3, M, N}));
    conv.push_back(conv1x1_fast(cx, cw));
    EXPECT_EQ(std::memcmp(conv1x1_fast_blocked(cx, cwb).data.data(), conv.back().data.data(), M * N * 4), 0)
        << "conv with the packed fp16 weight: " << run;
    runs.push_back(run);
  });
  std::printf("  compared: %s\n", fmt::format("{}", fmt::join(runs, ", ")).c_str());
  for (size_t i = 1; i < mm.size(); i++) {
    EXPECT_EQ(std::memcmp(mm[i].data.data(), mm[0].data.data(), mm[0].data.size() * 4), 0)
        << "matmul: " << runs[i] << " vs " << runs[0];
    EXPECT_EQ(std::memcmp(conv[i].data.data(), conv[0].data.data(), conv[0].data.size() * 4), 0)
        << "conv: " << runs[i] << " vs " << runs[0];
  }
}

// What gemm_fixed_order promises, checked against the definition itself: every output is
// acc = acc + A(m, k)·B(k, n) for k = 0 .. K−1, the product rounded before the add. Covered: the
// wide tiles (row-major A), the narrow product (A with contiguous rows, few columns), columns of B
// equal bit for bit to earlier ones (computed once and copied), on every instruction set and
// thread count; A also as fp16 bits packed in row blocks (widened exactly: the same sums).
TEST(anesim_Eval, FixedOrderGemmIsTheAscendingSumWithRoundedProducts) {
  const int M = 150, K = 67;  // rows past the last whole tile or narrow group of every path
  const Tensor32 a = test::random_t({M, K}, 31);
  Tensor32 at({K, M});  // the same A stored transposed: its rows (m) contiguous
  for (int m = 0; m < M; m++)
    for (int k = 0; k < K; k++) at.data[size_t(k) * M + m] = a.data[size_t(m) * K + k];
  std::vector<uint16_t> a16(a.data.size());  // random_t's values are fp16 values: exact
  for (size_t i = 0; i < a16.size(); i++) a16[i] = f32_to_f16(a.data[i]);
  const std::vector<uint16_t> blocks = pack_row_blocks(a16.data(), M, K);  // 3 blocks, the last one partial
  for (int N : {1, 2, 3, 5, 13, 33, 70}) {
    Tensor32 b = test::random_t({K, N}, 32 + N);
    for (int k = 0; k < K; k++)  // columns 2, 4, 6, … repeat column 0 (a decode program's padding)
      for (int n = 2; n < N; n += 2) b.data[size_t(k) * N + n] = b.data[size_t(k) * N];
    std::vector<float> want(size_t(M) * N);
    for (int m = 0; m < M; m++)
      for (int n = 0; n < N; n++) {
        float acc = 0.0f;
        for (int k = 0; k < K; k++) {
          volatile float product = a.data[size_t(m) * K + k] * b.data[size_t(k) * N + n];  // rounded: never an FMA
          acc = acc + product;
        }
        want[size_t(m) * N + n] = acc;
      }
    test::on_every_path([&](const std::string& run) {
      std::vector<float> c(want.size()), ct(want.size());
      gemm_fixed_order(c.data(), a.data.data(), K, 1, b.data.data(), N, M, K, N);
      gemm_fixed_order(ct.data(), at.data.data(), 1, M, b.data.data(), N, M, K, N);
      EXPECT_EQ(std::memcmp(c.data(), want.data(), want.size() * 4), 0) << "row-major A, N " << N << ", " << run;
      EXPECT_EQ(std::memcmp(ct.data(), want.data(), want.size() * 4), 0) << "transposed A, N " << N << ", " << run;
      gemm_fixed_order_blocked(c.data(), blocks.data(), b.data.data(), N, M, K, N);
      EXPECT_EQ(std::memcmp(c.data(), want.data(), want.size() * 4), 0) << "fp16 A in row blocks, N " << N << ", " << run;
    });
  }
}

TEST(anesim_Eval, RoundFp16IsNearestEvenWithOverflowToInfinity) {
  Tensor32 t({5}, std::vector<float>{1.0f + 2.0f / 4096, 1.0f + 6.0f / 4096, 65504.0f, 70000.0f, -1e-9f});
  round_fp16(t);
  EXPECT_EQ(t.data[0], 1.0f);                // halfway between 1 and 1 + 2^-10: even wins (down)
  EXPECT_EQ(t.data[1], 1.0f + 2.0f / 1024);  // halfway between odd and even mantissas: up to even
  EXPECT_EQ(t.data[2], 65504.0f);
  EXPECT_TRUE(std::isinf(t.data[3]));
  EXPECT_EQ(t.data[4], 0.0f);
}

}  // namespace
}  // namespace orion::runtime::anesim
