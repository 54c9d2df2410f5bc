// AneModel: inference with the transformer blocks running as compiled ANE programs (DESIGN.md §3)
// — on the Apple Neural Engine, or on anesim, the software ANE, anywhere.
//
// Who computes what (Orion's split):
//   CPU  token (+ position) embedding: table lookups;
//        attention over the KV cache during decode: one query against a growing cache is small,
//        sequential work, and the cache would have to be copied into surfaces every step;
//        RoPE at the decode position (Llama), residual adds the kernels leave out (Llama);
//        the classifier: 32000 / 50257 output channels exceed the ANE's limit (C12);
//        sampling (infer/sampler.h), in generate().
//   ANE  every other projection, norm, GELU/SwiGLU and the whole prefill attention, as the
//        frontends' kernels (model/frontends/frontends.h), compiled once per (layer, bucket) and
//        kept in a runtime::ProgramCache.
//
// Prefill (n > 1 tokens at position 0) runs in sequence buckets S = 16, 32, 64, ...: the tokens
// occupy columns 0..n−1 of [1, C, 1, S] and the rest is zeros, which causal attention never lets
// into a real column. An attention kernel cannot have its sequence padded by the compiler (the
// positions mix), so a narrow model needs a wider bucket for its buffers to reach the chip's
// minimum (C7): the smallest legal one is found once by asking the validator.
//   GPT-2: prefill_attn (y = x + attention, k, v for the cache) → prefill_ffn, per layer.
//   Llama: fwd_attn (o, k, v after RoPE) → CPU h = x + o → fwd_ffn → CPU x = h + y, per layer.
// Decode (one token) puts the token in column 0 of a small bucket:
//   GPT-2: decode_qkv (S = 16) → CPU attention over the cache → decode_ffn (S = 16; it applies
//          Wo and the residual) — the kernels the original Orion made for this.
//   Llama: no decode kernels exist, so: fwd_attn at the smallest attention bucket gives q, k, v
//          at column 0 — position 0, where RoPE is the identity, i.e. the plain projections of
//          rmsnorm(x) — the CPU rotates them to the real position, attends over the cache and
//          applies Wo (one C×Q matrix–vector product: no kernel in the set is a bare projection,
//          and a LoRA linear with a zero adapter cannot be padded to the C7 minimum); then
//          fwd_ffn (S = 16) on h = x + Wo·att. fwd_attn's own attention and Wo over the padding
//          are wasted work on the ANE; decode batches already project with llama_decode_qkv
//          (ane_batch_decode.cpp), which a single row could use too.
// Both paths end with final_norm (S = 16, the last token in column 0) on the ANE and the
// classifier on the CPU.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "infer/language_model.h"
#include "model/frontends/program_set.h"
#include "runtime/program_cache.h"

namespace orion {

class LoraAdapter;

struct AneModelOptions {
  std::string model_name = "model";  // the program cache's model key ("gpt2-124m", a file's stem)
  int max_seq = 0;                   // ≤ 0: the model's seq_len
  uint64_t weights_version = 0;      // change it after changing the weights: programs recompile
};

class AneModel final : public LanguageModel {
 public:
  // The weights and the cache (with its driver and compile budget) must outlive the model. Finds
  // the smallest attention bucket the driver's chip accepts; compiles nothing yet.
  AneModel(const ModelWeights& w, runtime::ProgramCache& cache, AneModelOptions opt = {});

  const float* forward(const int* tokens, int n, int pos) override;
  int max_seq() const override { return max_seq_; }
  int vocab_size() const override { return w_.config.vocab_size; }
  const ModelConfig& config() const { return w_.config; }

  // The programs a prompt of `prompt_tokens` and the decode after it use (model/frontends/
  // program_set.h: the list `orion compile` writes), and prepare() compiles (or finds) them all,
  // so that later timings exclude compiles. Returns the number of programs. decode_rows > 1: with
  // the programs decode batches of up to that many rows use (decode_batch with adapter_slots).
  std::vector<frontends::ProgramSpec> programs(int prompt_tokens, int decode_rows = 1, int adapter_slots = 0) const;
  int prepare(int prompt_tokens, int decode_rows = 1, int adapter_slots = 0);
  // The bucket a prefill of n tokens runs in: 16, 32, ... ≥ n, and ≥ attention_min_bucket().
  int prefill_bucket(int n) const;
  int attention_min_bucket() const { return attn_min_; }
  runtime::ProgramCache& cache() { return cache_; }

  // LoRA on q and v through programs whose adapter matrices are inputs (model/frontends/
  // lora_frontends.h). enable_lora(slot) makes every attention program a LoRA one with that rank
  // slot (compiled on first use, like the others; with no adapter set its inputs are zeros and it
  // computes the base model). set_lora() switches adapters — or back to none — by replacing host
  // tensors only: no compile, the program cache untouched. Usage errors for an adapter of rank
  // above the slot or with targets other than q and v (use the CPU backend, or merge it).
  void enable_lora(int rank_slot);
  void set_lora(const LoraAdapter* adapter, float scale_mult = 1.0f);
  // The usage errors set_lora() would raise for `adapter` with the rank slot compiled now.
  void check_lora(const LoraAdapter& adapter) const;
  int lora_slot() const { return lora_slot_; }

  // One decode step of several sequences — rows[b] feeds tokens[b] at position pos[b] of its own
  // model — with ONE evaluation per position-wise program for all of them (ane_batch_decode.cpp):
  // row b sits in column b of the program's bucket, the smallest of 16, 32, 64, … that holds the
  // rows and is at least the bucket a single row runs at, so up to 16 rows (more where the single
  // row's bucket is wider) run the very programs a single row does, and only a wider batch compiles
  // a wider bucket, once. The projections run a position-wise kernel (frontends::
  // decode_batch_projections: Llama's decode_qkv where the single row runs fwd_attn). Each row's
  // attention over its own KV cache stays on the CPU, as for one row. Every column is computed as
  // it would be alone, so each row's logits equal forward(token, 1, pos) on its model bit for bit.
  // The models share the weights, the program cache and the rank slot. adapter_slots 0: the rows
  // hold the same adapter (or none). adapter_slots > 0 (with a rank slot): rows may hold different
  // adapters; the projections run lora_decode_qkv_mixed, adapter_slots adapters per evaluation
  // (one evaluation while a step has no more distinct adapters than that, base rows free), its
  // adapter matrices and per-column mask inputs: no compile depends on which adapters a step mixes.
  // Writes [rows, V].
  static void decode_batch(const std::vector<AneModel*>& rows, const int* tokens, const int* pos, float* logits,
                           int adapter_slots = 0);
  // The bucket `rows` rows of a program whose single row runs at `single_bucket` use.
  int batch_bucket(int single_bucket, int rows) const;

 private:
  using Kernel = std::shared_ptr<runtime::AneKernel>;
  // The program of a role of this family's inference kernels (kernels_), from the cache.
  Kernel program(frontends::InferenceRole role, int layer, int S);
  Kernel program(const frontends::KernelSpec& k, int layer, int S);
  runtime::TensorMap with_lora(int layer, runtime::TensorMap inputs) const;  // + the layer's adapter inputs
  int decode_qkv_bucket() const;                                             // the sequence bucket attn_decode runs at

  void check_tokens(const int* tokens, int n, int pos) const;
  void embed(const int* tokens, int n, int pos);  // x_[t] = tok_emb (+ pos_emb)
  void prefill(int n);                            // x_ [n, C] through every layer, positions 0..n−1
  void decode(int pos);                           // x_ [1, C] through every layer at position pos
  // One layer, by the kind of kernels the family's inference table holds (ModelFamily::
  // ane_inference_kernels): its own inference kernels (GPT-2), or its training kernels (Llama).
  void prefill_layer_inference_kernels(int l, int n, int S);
  void prefill_layer_training_kernels(int l, int n, int S);
  void decode_layer_inference_kernels(int l, int pos);
  void decode_layer_training_kernels(int l, int pos);
  void logits_of_row(int row);  // final norm (ANE) and classifier (CPU) of x_[row]
  // The CPU's part of a decode layer, the token's projections in q_ and the cache's row pos: RoPE
  // families rotate q_ and that key to pos; att_ = attention of q_ over the cache (its window).
  void attend(int l, int pos);
  // attend() for a row of a decode batch: its q, k, v in, its att [Q] out.
  void attend_row(int l, int pos, const float* q, const float* k, const float* v, float* att);
  // decode_batch's parts (ane_batch_decode.cpp), over x [B, C], the rows' residual streams.
  static void batch_projections(const std::vector<AneModel*>& m, int l, int adapter_slots, const float* x, float* q,
                                float* k, float* v);
  // batch_projections of rows holding different adapters, through lora_decode_qkv_mixed.
  static void project_mixed_adapters(const std::vector<AneModel*>& m, int l, const frontends::KernelSpec& kernel,
                                     int adapter_slots, const float* x, float* q, float* k, float* v);
  // The projections of the rows `cols` (indices into m) in one evaluation, with `extra` inputs.
  static void project_columns(const std::vector<AneModel*>& m, int l, const frontends::KernelSpec& kernel, int bucket,
                              const std::vector<size_t>& cols, runtime::TensorMap extra, const float* x, float* q, float* k,
                              float* v);
  static void batch_layer_inference_kernels(const std::vector<AneModel*>& m, int l, int adapter_slots, const int* pos,
                                            float* x);
  static void batch_layer_training_kernels(const std::vector<AneModel*>& m, int l, int adapter_slots, const int* pos,
                                           float* x);

  float* k_cache(int layer, int pos) { return key_cache_.data() + (size_t(layer) * max_seq_ + pos) * kv_dim_; }
  float* v_cache(int layer, int pos) { return value_cache_.data() + (size_t(layer) * max_seq_ + pos) * kv_dim_; }

  const ModelWeights& w_;
  runtime::ProgramCache& cache_;
  AneModelOptions opt_;
  int max_seq_, kv_dim_, attn_min_;
  std::vector<float> x_;                         // [n, C] residual stream, row-major (host layout)
  std::vector<float> q_, att_, o_;               // [NH·HS] / [C]: one decode token's scratch
  std::vector<float> key_cache_, value_cache_;   // [L, max_seq, NKV·HS]: the ANE programs' rows as they come
                                                 // (cpu::KvLayout::rows; the CPU path's KvCache keeps heads)
  std::vector<float> logits_;                    // [V]
  int lora_slot_ = 0;                            // > 0: attention programs take adapter inputs
  std::vector<frontends::KernelSpec> kernels_;   // by InferenceRole, for lora_slot_
  std::vector<runtime::TensorMap> lora_inputs_;  // [L] lora_a_q, lora_b_q, lora_a_v, lora_b_v
  // What lora_inputs_ hold (null: no adapter), so that a decode batch knows which rows share one.
  const LoraAdapter* lora_adapter_ = nullptr;
  float lora_scale_mult_ = 1.0f;
};

// What a process needs to run AneModels: a driver ("anesim", or "ane" on macOS) for a chip, the
// compile budget that guards it (C9) and the program cache over both.
struct AneRuntime {
  explicit AneRuntime(const std::string& driver_name, const std::string& chip = "m4");
  AneRuntime(const AneRuntime&) = delete;  // the cache refers to the driver and budget beside it
  AneRuntime& operator=(const AneRuntime&) = delete;
  std::unique_ptr<runtime::Driver> driver;
  runtime::CompileBudget budget;
  runtime::ProgramCache cache;
  // "program cache: … | compiles 9/119 (110 left) | predicted ANE time 12.3 ms over 40 evaluations"
  std::string summary() const;
};

}  // namespace orion
