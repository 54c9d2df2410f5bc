// An f16 KV cache (KvLayout::dtype F16, `--kv-cache f16`): stored values are rounded to f16 once,
// and attention over them gives exactly the bits attention over an f32 cache holding the rounded
// values gives — on every instruction set, both layouts, grouped-query heads, sliding windows and
// head sizes that leave vector tails. (The kernels themselves: test_kernels.cpp,
// AttentionScoresAndWeightedSumEqualTheDotAndAxpyLoops.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "base/dtype.h"
#include "kernel_test_util.h"
#include "runtime/cpu/kernels.h"

namespace orion::cpu {
namespace {

using test::available_isas;
using test::random_floats;
using test::RestoreIsa;

float to_f16_and_back(float x) { return f16_to_f32(f32_to_f16(x)); }

// KvLayout::store into an f16 cache rounds each channel to the nearest f16, where at() says.
TEST(KernelsKvF16, StoreRoundsEachChannelToF16) {
  const int NKV = 3, HS = 5, S = 4, KV = NKV * HS;
  const std::vector<float> row = random_floats(size_t(KV), 31, -3, 3);
  for (const KvLayout& kv : {KvLayout::rows(KV, HS, DType::F16), KvLayout::heads(S, HS, DType::F16)}) {
    EXPECT_EQ(kv.elem_bytes(), 2u);
    std::vector<uint16_t> cache(size_t(S) * KV, 0xffff);
    kv.store(cache.data(), 1, row.data(), 2, 13);
    int untouched = 0;
    for (int g = 0; g < NKV; g++)
      for (int i = 0; i < HS; i++) {
        const int c = g * HS + i;
        const uint16_t h = cache[kv.at(g, 1) + size_t(i)];
        if (c >= 2 && c < 13) EXPECT_EQ(h, f32_to_f16(row[size_t(c)])) << "channel " << c;
        else EXPECT_EQ(h, 0xffff) << "channel " << c;
      }
    for (uint16_t h : cache) untouched += h == 0xffff;
    EXPECT_EQ(untouched, S * KV - 11);
    EXPECT_EQ(kv.address(cache.data(), 2, 3), static_cast<const void*>(cache.data() + kv.at(2, 3)));
  }
}

// attention() over an f16 cache = attention() over an f32 cache of the rounded values, bit for bit,
// and within f16 rounding of attention over the unrounded ones.
TEST(KernelsKvF16, AttentionEqualsF32AttentionOverTheRoundedValues) {
  RestoreIsa restore;
  struct Case {
    int T, pos0, NH, NKV, HS, window;
  };
  const Case cases[] = {{1, 0, 4, 4, 16, 0}, {1, 9, 4, 2, 20, 0}, {5, 0, 6, 2, 20, 0},
                        {5, 7, 4, 1, 67, 0}, {3, 30, 2, 2, 64, 8}, {1, 40, 8, 2, 64, 0}};
  for (Isa isa : available_isas()) {
    ASSERT_TRUE(set_isa(isa));
    for (const Case& c : cases) {
      const int L = c.pos0 + c.T, Q = c.NH * c.HS, KV = c.NKV * c.HS;
      const std::vector<float> q = random_floats(size_t(c.T) * Q, 41, -2, 2);
      const std::vector<float> k = random_floats(size_t(L) * KV, 42, -2, 2), v = random_floats(size_t(L) * KV, 43);
      std::vector<float> kr(k.size()), vr(v.size());
      for (size_t i = 0; i < k.size(); i++) kr[i] = to_f16_and_back(k[i]), vr[i] = to_f16_and_back(v[i]);
      for (bool heads : {false, true}) {
        const KvLayout l32 = heads ? KvLayout::heads(L + 1, c.HS) : KvLayout::rows(KV, c.HS);
        const KvLayout l16 = heads ? KvLayout::heads(L + 1, c.HS, DType::F16) : KvLayout::rows(KV, c.HS, DType::F16);
        std::vector<float> k32(size_t(L + 1) * KV, NAN), v32(k32.size(), NAN), k32u(k32.size(), NAN), v32u(k32.size(), NAN);
        std::vector<uint16_t> k16(k32.size(), 0x7e00), v16(k32.size(), 0x7e00);  // NaN where nothing was stored
        for (int p = 0; p < L; p++) {
          const size_t r = size_t(p) * KV;
          l32.store(k32.data(), p, kr.data() + r, 0, KV), l32.store(v32.data(), p, vr.data() + r, 0, KV);
          l32.store(k32u.data(), p, k.data() + r, 0, KV), l32.store(v32u.data(), p, v.data() + r, 0, KV);
          l16.store(k16.data(), p, k.data() + r, 0, KV), l16.store(v16.data(), p, v.data() + r, 0, KV);
        }
        std::vector<float> got(size_t(c.T) * Q, NAN), want(got.size(), NAN), exact(got.size(), NAN);
        attention(got.data(), q.data(), k16.data(), v16.data(), c.T, c.pos0, c.NH, c.NKV, l16, c.window);
        attention(want.data(), q.data(), k32.data(), v32.data(), c.T, c.pos0, c.NH, c.NKV, l32, c.window);
        attention(exact.data(), q.data(), k32u.data(), v32u.data(), c.T, c.pos0, c.NH, c.NKV, l32, c.window);
        EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * 4))
            << isa_name(isa) << " T=" << c.T << " pos0=" << c.pos0 << " HS=" << c.HS << (heads ? " heads" : " rows");
        double worst = 0, moved = 0;
        for (size_t i = 0; i < got.size(); i++)
          worst = std::max(worst, double(std::fabs(got[i] - exact[i]))), moved += got[i] != exact[i];
        EXPECT_LT(worst, 4e-3) << isa_name(isa) << " HS=" << c.HS;  // f16 keeps 11 bits: ~5e-4 relative per value
        EXPECT_GT(moved, 0) << "the f16 cache rounded nothing";
      }
    }
  }
}

}  // namespace
}  // namespace orion::cpu
