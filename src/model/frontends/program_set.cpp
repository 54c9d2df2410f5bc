#include "model/frontends/program_set.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "base/error.h"
#include "compiler/sequence_bucket.h"
#include "model/family/family.h"
#include "model/frontends/frontends.h"
#include "model/frontends/lora_frontends.h"

namespace orion::frontends {
namespace {

std::string program_name(const std::string& kernel, int layer, int S) {
  return layer >= 0 ? fmt::format("layer{:02}.{}.s{}", layer, kernel, S) : fmt::format("{}.s{}", kernel, S);
}

}  // namespace

GraphBuilder layer_kernel(LayerKernelFn fn) {
  return [fn](const ModelWeights& w, int l, int S) { return fn(w, l, S, KernelOptions{}); };
}

GraphBuilder lora_kernel(LoraKernelFn fn, int slot) {
  return [fn, slot](const ModelWeights& w, int l, int S) { return fn(w, l, S, slot, KernelOptions{}); };
}

GraphBuilder sdpa_bwd2_kernel() {
  return [](const ModelWeights& w, int, int S) { return sdpa_bwd2(w.config, S); };
}

GraphBuilder final_norm_kernel() {
  return [](const ModelWeights& w, int, int S) { return final_norm(w, S); };
}

std::vector<KernelSpec> training_kernels(Arch arch, int slot) {
  std::vector<KernelSpec> k = model_family(arch).training_kernels(slot);
  ORION_CHECK(k.size() == size_t(kTrainingRoles), "no training kernels for this architecture");
  return k;
}

std::vector<KernelSpec> inference_kernels(Arch arch, int slot) {
  std::vector<KernelSpec> k = model_family(arch).inference_kernels();
  ORION_CHECK(k.size() == size_t(kInferenceRoles), "no inference kernels for this architecture");
  if (slot > 0) {  // every family: the LoRA kernels take the family from the weights
    k[kPrefillAttn] = {fmt::format("lora_prefill_attn_r{}", slot), lora_kernel(lora_prefill_attn, slot), true};
    k[kDecodeAttn] = {fmt::format("lora_decode_qkv_r{}", slot), lora_kernel(lora_decode_qkv, slot), true};
  }
  return k;
}

// Inference runs every block the CPU runs: the kernels compute q/k/v biases, q/k norms, a head
// size ≠ C/NH, scaled RoPE and a sliding-window mask (attention_sublayer). Training refuses a
// config whose blocks need more than the plain Llama / GPT-2 ones: its backward kernels do not
// differentiate those features.
int inference_attention_bucket(const ModelWeights& w, const compiler::ChipProfile& chip) {
  const KernelSpec attn = inference_kernels(w.config.arch)[kPrefillAttn];
  return compiler::smallest_legal_bucket(compiler::kSmallestSequenceBucket, chip,
                                         [&](int S) { return std::vector<ir::Graph>{attn.build(w, 0, S)}; });
}

int prefill_bucket(int n, int attention_min, const compiler::ChipProfile& chip) {
  const int64_t S = compiler::sequence_bucket_at_least(n, chip);
  ORION_CHECK(S > 0, "a prompt of {} tokens is beyond the largest sequence bucket", n);
  return std::max(int(S), attention_min);
}

int decode_attention_bucket(Arch arch, int lora_slot, int attention_min) {
  return lora_slot > 0 || !model_family(arch).ane_inference_kernels() ? attention_min : kDecodeBucket;
}

int decode_batch_bucket(int single_bucket, int rows, const compiler::ChipProfile& chip) {
  if (rows <= single_bucket) return single_bucket;
  const int64_t S = compiler::sequence_bucket_at_least(rows, chip);
  ORION_CHECK(S > 0, "a decode batch of {} rows is beyond the largest sequence bucket", rows);
  return std::max(int(S), single_bucket);
}

KernelSpec decode_batch_projections(Arch arch, int lora_slot, int adapter_slots) {
  if (lora_slot > 0 && adapter_slots > 0)
    return {fmt::format("lora_decode_qkv_mixed_r{}_a{}", lora_slot, adapter_slots),
            [lora_slot, adapter_slots](const ModelWeights& w, int l, int S) {
              return lora_decode_qkv_mixed(w, l, S, lora_slot, adapter_slots);
            },
            true};
  if (lora_slot > 0 || model_family(arch).ane_inference_kernels()) return inference_kernels(arch, lora_slot)[kDecodeAttn];
  return {"llama_decode_qkv", layer_kernel(llama_decode_qkv), false};
}

TrainingBuckets training_buckets(const ModelWeights& w, int T, const compiler::ChipProfile& chip, int lora_slot) {
  w.config.require_plain_blocks({}, "the ANE path");
  const std::vector<KernelSpec> kernels = training_kernels(w.config.arch, lora_slot);
  auto bucket = [&](bool attention) {
    return compiler::smallest_legal_bucket(T, chip, [&](int S) {
      std::vector<ir::Graph> group;
      for (const KernelSpec& k : kernels)
        if (k.attention == attention) group.push_back(k.build(w, 0, S));
      return group;
    });
  };
  return {bucket(true), bucket(false)};
}

std::vector<ProgramSpec> inference_programs(const ModelWeights& w, int prompt_tokens, int attention_min,
                                            const compiler::ChipProfile& chip, int lora_slot, int decode_rows,
                                            int adapter_slots) {
  const ModelConfig& c = w.config;
  const std::vector<KernelSpec> kernels = inference_kernels(c.arch, lora_slot);
  std::vector<ProgramSpec> out;
  std::set<std::tuple<std::string, int, int>> seen;  // (kernel, layer, S)
  const ModelWeights* pw = &w;
  auto add_kernel = [&](const KernelSpec& k, int role, int layer, int S) {
    if (!k.per_layer) layer = -1;
    if (!seen.insert({k.kernel, layer, S}).second) return;
    GraphBuilder build = k.build;
    out.push_back({program_name(k.kernel, layer, S), k.kernel, role, layer, S,
                   [pw, build, layer, S] { return build(*pw, layer, S); }});
  };
  auto add = [&](InferenceRole role, int layer, int S) { add_kernel(kernels[size_t(role)], role, layer, S); };
  const int decode_attn = decode_attention_bucket(c.arch, lora_slot, attention_min);
  for (int l = 0; l < c.n_layers; l++) {
    if (prompt_tokens > 1) {
      const int S = prefill_bucket(prompt_tokens, attention_min, chip);
      add(kPrefillAttn, l, S), add(kPrefillFfn, l, S);
    }
    add(kDecodeAttn, l, decode_attn), add(kDecodeFfn, l, kDecodeBucket);
  }
  add(kFinalNorm, -1, kDecodeBucket);
  if (decode_rows < 2) return out;
  // Decode batches: the batch projections kernel (in the projections' role) at every bucket up to
  // the one decode_rows rows need, and the FFN and final norm at the wider buckets.
  const KernelSpec projections = decode_batch_projections(c.arch, lora_slot, adapter_slots);
  for (int rows = 1; rows == 1 || rows / 2 < decode_rows; rows = std::max(2 * kDecodeBucket, 2 * rows)) {
    const int n = std::min(rows, decode_rows);
    for (int l = 0; l < c.n_layers; l++) {
      add_kernel(projections, kDecodeAttn, l, decode_batch_bucket(decode_attn, n, chip));
      add(kDecodeFfn, l, decode_batch_bucket(kDecodeBucket, n, chip));
    }
    add(kFinalNorm, -1, decode_batch_bucket(kDecodeBucket, n, chip));
  }
  return out;
}

std::vector<ProgramSpec> training_programs(const ModelWeights& w, TrainingBuckets b, int lora_slot) {
  w.config.require_plain_blocks({}, "the ANE path");
  const std::vector<KernelSpec> kernels = training_kernels(w.config.arch, lora_slot);
  std::vector<ProgramSpec> out;
  const ModelWeights* pw = &w;
  for (int r = 0; r < kTrainingRoles; r++) {
    const KernelSpec& k = kernels[size_t(r)];
    const int S = k.attention ? b.attention : b.ffn;
    for (int l = 0; l < (k.per_layer ? w.config.n_layers : 1); l++) {
      const int layer = k.per_layer ? l : -1;
      GraphBuilder build = k.build;
      out.push_back(
          {program_name(k.kernel, layer, S), k.kernel, r, layer, S, [pw, build, l, S] { return build(*pw, l, S); }});
    }
  }
  return out;
}

}  // namespace orion::frontends
