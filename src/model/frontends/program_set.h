// The one description of a model's ANE programs: which kernels each family runs, at which sequence
// buckets, and the resulting list of programs. `orion compile` writes exactly the list that the
// inference runner (infer/ane_model.h) and the training runner (train/ane/ane_blocks.h) load, because
// all three take it from here (tests/model/test_program_set.cpp compares them).
//
// Inference (generation through programs), per layer:
//   prefill_attn, prefill_ffn at the prefill bucket (a prompt of n > 1 tokens; the smallest bucket
//   ≥ n and ≥ the smallest legal attention bucket), decode_attn (GPT-2: decode_qkv at the decode
//   bucket 16; Llama and LoRA: the attention kernel at the smallest legal attention bucket),
//   decode_ffn at 16; then final_norm at 16. The classifier stays on the CPU (C12).
// Training, per layer: fwd_attn, fwd_ffn, ffn_bwd, sdpa_bwd1, sdpa_bwd2 (weight-free: one program
//   for every layer), qkv_bwd; the attention kernels at the attention bucket, the others at the
//   feed-forward bucket (compiler/sequence_bucket.h: the smallest legal S ≥ T of each group).
// A LoRA rank slot > 0 replaces the kernels an adapter on q and v changes by their LoRA versions,
// whose adapter matrices are program inputs (lora_frontends.h).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "compiler/chip.h"
#include "ir/graph.h"
#include "model/frontends/frontends.h"
#include "model/weights.h"

namespace orion::frontends {

using GraphBuilder = std::function<ir::Graph(const ModelWeights& w, int layer, int S)>;

struct KernelSpec {
  std::string kernel;  // the program's kernel name: "llama_fwd_attn", "lora_prefill_attn_r8", ...
  GraphBuilder build;
  bool attention = false;  // positions mix (no padding by legalize-ane): runs at an attention bucket
  bool per_layer = true;   // false: weight-free, one program serves every layer (layer −1)
};

enum TrainingRole { kFwdAttn, kFwdFfn, kFfnBwd, kSdpaBwd1, kSdpaBwd2, kQkvBwd, kTrainingRoles };
enum InferenceRole { kPrefillAttn, kPrefillFfn, kDecodeAttn, kDecodeFfn, kFinalNorm, kInferenceRoles };

// The kernels of a family by role (index = the role's enum value): the family's tables
// (ModelFamily::training_kernels / inference_kernels), with the LoRA inference kernels, which serve
// every family, at a rank slot > 0.
std::vector<KernelSpec> training_kernels(Arch arch, int lora_slot = 0);
std::vector<KernelSpec> inference_kernels(Arch arch, int lora_slot = 0);

// Builders for the kernel tables of the families: a frontend function of the usual
// (weights, layer, S, options) form, and one of a LoRA kernel at a rank slot.
using LayerKernelFn = ir::Graph (*)(const ModelWeights&, int, int, KernelOptions);
using LoraKernelFn = ir::Graph (*)(const ModelWeights&, int, int, int, KernelOptions);
GraphBuilder layer_kernel(LayerKernelFn fn);
GraphBuilder lora_kernel(LoraKernelFn fn, int slot);
// The weight-free attention backward (sdpa_bwd2), which serves every family.
GraphBuilder sdpa_bwd2_kernel();
// The final norm of either norm kind (frontends.h final_norm).
GraphBuilder final_norm_kernel();

constexpr int kDecodeBucket = 16;  // position-wise kernels for one token (legalize-ane pads them, C7)

// Inference buckets. attention_min: the smallest bucket at which the prefill attention kernel
// reaches the minimum buffer (0 when none does).
int inference_attention_bucket(const ModelWeights& w, const compiler::ChipProfile& chip);
int prefill_bucket(int n, int attention_min, const compiler::ChipProfile& chip);
int decode_attention_bucket(Arch arch, int lora_slot, int attention_min);  // the single row's projections
// The bucket a decode batch of `rows` rows (one per column) runs a position-wise program at whose
// single row runs at single_bucket: that bucket while the rows fit, else the smallest sequence
// bucket ≥ rows (AneModel::decode_batch).
int decode_batch_bucket(int single_bucket, int rows, const compiler::ChipProfile& chip);
// The projections kernel of a decode batch (AneModel::decode_batch), which keeps its columns apart
// so that the batch's rows share one evaluation: GPT-2's decode_qkv, Llama's decode_qkv (fwd_attn,
// the single row's kernel, attends across its columns), lora_decode_qkv for rows with one adapter
// (adapter_slots 0), lora_decode_qkv_mixed for rows with up to adapter_slots different ones.
KernelSpec decode_batch_projections(Arch arch, int lora_slot, int adapter_slots);
// It runs one row at the single row's decode_attention_bucket: 16 for GPT-2's decode_qkv; the
// attention bucket for the LoRA kernels (their adapter products are not padded) and for Llama's
// (legalize-ane pads a sequence for its input only, and GQA's k, v are narrower than x: the
// attention bucket is one where fwd_attn's x, q, k, v all reach the C7 minimum).

// Training buckets for T tokens (0 in a field when no bucket up to the cap is legal).
struct TrainingBuckets {
  int attention = 0, ffn = 0;
};
TrainingBuckets training_buckets(const ModelWeights& w, int T, const compiler::ChipProfile& chip, int lora_slot = 0);

struct ProgramSpec {
  std::string name;                  // "layer03.gpt2_prefill_attn.s64": unique, usable as a folder name
  std::string kernel;                // KernelSpec::kernel
  int role = 0;                      // index into the kernel table it came from
  int layer = -1;                    // −1: whole-model or shared by every layer
  int S = 0;                         // the sequence bucket
  std::function<ir::Graph()> build;  // the IR, weights baked in as constants
};

// The programs a prompt of prompt_tokens and the decode after it use (duplicates removed), in the
// order the runner first uses them. attention_min as inference_attention_bucket (must be > 0).
// decode_rows > 1 adds the programs decode batches of up to that many rows use (AneModel::
// decode_batch, with adapter_slots as there): the single row's position-wise decode programs serve
// every batch that fits their bucket, and the batch projections kernel runs at each bucket.
std::vector<ProgramSpec> inference_programs(const ModelWeights& w, int prompt_tokens, int attention_min,
                                            const compiler::ChipProfile& chip, int lora_slot = 0, int decode_rows = 1,
                                            int adapter_slots = 0);
// The programs of training on T tokens at the given buckets, role by role, layer by layer.
std::vector<ProgramSpec> training_programs(const ModelWeights& w, TrainingBuckets b, int lora_slot = 0);

}  // namespace orion::frontends
