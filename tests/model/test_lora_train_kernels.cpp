// The LoRA training kernels (lora_frontends.h: llama_lora_fwd_attn, llama_lora_qkv_bwd and the
// GPT-2 pair gpt2_lora_fwd_attn, gpt2_lora_qkv_bwd), run by the reference interpreter in fp32: with
// A and s·B as program inputs on the baked base they compute what the plain kernels of the family
// (stories_*, gpt2_*) compute on the merged weights W + s·B·A — the forward and
// the input gradient dxnorm = Wᵀ·dy + s·Aᵀ·(Bᵀ·dy) — and a zero B gives the base kernels' outputs
// exactly. Their adapter inputs follow C7 (each at least the minimum buffer).
#include "frontend_test_util.h"

#include "base/error.h"
#include "compiler/chip.h"
#include "model/frontends/lora_frontends.h"
#include "model/lora/lora.h"

namespace orion::test {
namespace {

using namespace orion::frontends;
const KernelOptions kF32{ir::ElemType::F32};

// A family's two LoRA training kernels and the plain kernels they stand in for.
struct Family {
  Arch arch;
  ir::Graph (*lora_fwd)(const ModelWeights&, int, int, int, KernelOptions);
  ir::Graph (*lora_bwd)(const ModelWeights&, int, int, int, KernelOptions);
  ir::Graph (*fwd)(const ModelWeights&, int, int, KernelOptions);
  ir::Graph (*bwd)(const ModelWeights&, int, int, KernelOptions);
};
const Family kFamilies[] = {
    {Arch::Llama, llama_lora_fwd_attn, llama_lora_qkv_bwd, llama_fwd_attn, llama_qkv_bwd},
    {Arch::GPT2, gpt2_lora_fwd_attn, gpt2_lora_qkv_bwd, gpt2_fwd_attn, gpt2_qkv_bwd},
};

struct Rig {
  ModelConfig c;  // Llama: grouped-query attention, Q = 32, KV = 16; GPT-2: Q = KV = 32, biases
  ModelWeights w;
  LoraAdapter a;
  explicit Rig(Arch arch = Arch::Llama)
      : c(tiny_config(arch, 2)), w(test_weights(c, 61, 15.0f)), a{c, 4, 8.0f, {LoraTarget::Q, LoraTarget::V}} {
    a.init(5);
    std::mt19937 rng(6);
    std::normal_distribution<float> n(0.0f, 0.3f);
    for (const LoraTensor& t : a.tensors())
      for (int64_t i = 0; i < t.out * a.rank(); i++) a.B(t)[i] = n(rng);
  }
  // The adapter inputs of layer l in a slot of 6 (rank 4 zero-padded), B times `b_mult`.
  In adapter_inputs(int l, int slot, float b_mult = 1.0f) const {
    const LoraTensor *q = a.find(l, LoraTarget::Q), *v = a.find(l, LoraTarget::V);
    return lora_qv_inputs(c, slot, a.rank(), a.scale() * b_mult, a.A(*q), a.B(*q), a.A(*v), a.B(*v));
  }
};

void expect_close(const std::map<std::string, Tensor32>& got, const std::map<std::string, Tensor32>& want, float rel,
                  const char* kernel) {
  ASSERT_EQ(got.size(), want.size()) << kernel;
  for (const auto& [name, t] : want) {
    const float d = max_abs_diff(got.at(name).data, t.data), m = max_abs(t.data);
    std::printf("  %s %s: max |diff| %.3g of max %.3g\n", kernel, name.c_str(), d, m);
    EXPECT_LE(d, rel * m) << kernel << " " << name;
    if (rel == 0) {
      EXPECT_GT(m, 0.0f) << kernel << " " << name << " is all zero: nothing was compared";
    }
  }
}

TEST(lora_train_kernels, AdapterKernelsComputeTheMergedWeightsKernels) {
  for (const Family& f : kFamilies) {
    SCOPED_TRACE(f.arch == Arch::GPT2 ? "gpt2" : "llama");
    Rig s(f.arch);
    const int S = 8, l = 1, slot = 6, C = s.c.dim, Q = s.c.n_heads * s.c.head_dim(), KV = s.c.kv_dim();
    const ModelWeights merged = merge_lora(s.w, s.a);
    ir::Graph fwd = f.lora_fwd(s.w, l, S, slot, kF32);
    ir::Graph bwd = f.lora_bwd(s.w, l, S, slot, kF32);
    expect_valid(fwd), expect_valid(bwd);
    // The forward: o, q, k, v, att, xnorm.
    In in = s.adapter_inputs(l, slot);
    in["x"] = random_tensor({1, C, 1, S}, 62);
    expect_close(run(fwd, in), run(f.fwd(merged, l, S, kF32), {{"x", in.at("x")}}), 2e-5f, "fwd_attn");
    // The input gradients: dx, dxnorm (and for Llama dq_lin, dk_lin).
    In g = s.adapter_inputs(l, slot);
    g["dq"] = random_tensor({1, Q, 1, S}, 63), g["dk"] = random_tensor({1, KV, 1, S}, 64),
    g["dv"] = random_tensor({1, KV, 1, S}, 65);
    g["x"] = in.at("x");
    In plain = g;
    for (const char* n : {"lora_a_q", "lora_b_q", "lora_a_v", "lora_b_v"}) plain.erase(n);
    const auto lora_bwd = run(bwd, g), merged_bwd = run(f.bwd(merged, l, S, kF32), plain);
    expect_close(lora_bwd, merged_bwd, 2e-5f, "qkv_bwd");
    // The adapter really contributes: its share of dxnorm is far above the tolerance.
    const auto base_bwd = run(f.bwd(s.w, l, S, kF32), plain);
    EXPECT_GT(max_abs_diff(base_bwd.at("dxnorm").data, merged_bwd.at("dxnorm").data),
              0.05f * max_abs(merged_bwd.at("dxnorm").data));
  }
}

TEST(lora_train_kernels, ZeroAdapterGivesTheBaseKernelsExactly) {
  for (const Family& f : kFamilies) {
    SCOPED_TRACE(f.arch == Arch::GPT2 ? "gpt2" : "llama");
    Rig s(f.arch);
    const int S = 8, l = 0, slot = 4, C = s.c.dim, Q = s.c.n_heads * s.c.head_dim(), KV = s.c.kv_dim();
    In in = s.adapter_inputs(l, slot, /*b_mult=*/0.0f);  // A random, B = 0
    in["x"] = random_tensor({1, C, 1, S}, 72);
    expect_close(run(f.lora_fwd(s.w, l, S, slot, kF32), in), run(f.fwd(s.w, l, S, kF32), {{"x", in.at("x")}}), 0.0f,
                 "fwd_attn B=0");
    In g = s.adapter_inputs(l, slot, 0.0f);
    g["dq"] = random_tensor({1, Q, 1, S}, 73), g["dk"] = random_tensor({1, KV, 1, S}, 74),
    g["dv"] = random_tensor({1, KV, 1, S}, 75);
    g["x"] = in.at("x");
    In plain = g;
    for (const char* n : {"lora_a_q", "lora_b_q", "lora_a_v", "lora_b_v"}) plain.erase(n);
    expect_close(run(f.lora_bwd(s.w, l, S, slot, kF32), g), run(f.bwd(s.w, l, S, kF32), plain), 0.0f, "qkv_bwd B=0");
  }
}

TEST(lora_train_kernels, AdapterInputsReachTheMinimumBufferAndOtherFamiliesAreRefused) {
  Rig s, s2(Arch::GPT2);
  const int64_t min_bytes = compiler::default_chip().min_buffer_bytes;
  for (const ir::Graph& g : {llama_lora_fwd_attn(s.w, 0, 16, 16), llama_lora_qkv_bwd(s.w, 0, 16, 16),
                             gpt2_lora_fwd_attn(s2.w, 0, 16, 16), gpt2_lora_qkv_bwd(s2.w, 0, 16, 16)}) {
    int adapters = 0;
    for (int i : g.input_nodes()) {
      const ir::Node& n = g.node(i);
      if (!n.name.starts_with("lora_")) continue;
      adapters++;
      EXPECT_GE(n.results[0].numel() * 2, min_bytes) << g.name() << " " << n.name << " (fp16) is below C7's minimum";
    }
    EXPECT_EQ(adapters, 4) << g.name();
  }
  const ModelWeights gpt2 = test_weights(tiny_config(Arch::GPT2), 3, 1.0f);
  EXPECT_THROW(llama_lora_fwd_attn(gpt2, 0, 8, 4), Error);
  EXPECT_THROW(llama_lora_qkv_bwd(s.w, 0, 8, 0), Error);  // a rank slot of 0
  EXPECT_THROW(gpt2_lora_fwd_attn(s.w, 0, 8, 4), Error);  // Llama weights
  EXPECT_THROW(gpt2_lora_qkv_bwd(s.w, 0, 8, 4), Error);
  EXPECT_THROW(gpt2_lora_qkv_bwd(s2.w, 0, 8, 0), Error);
}

}  // namespace
}  // namespace orion::test
