// The weights of one transformer, in Orion's canonical layout, whatever file they came from.
//
// Canonical layout (every matrix is [out, in] row-major, as nn.Linear / llama2.c / llm.c store it):
//   tok_emb    [Vp, C]     token embedding (also the classifier when tied)
//   pos_emb    [T, C]      GPT-2 only: learned positions
//   per layer:
//     attn_norm  [C]  (+ attn_norm_b [C] for GPT-2 LayerNorm)
//     wq [NH·HS, C]  wk [NKV·HS, C]  wv [NKV·HS, C]  wo [C, NH·HS]   (+ bq bk bv bo for GPT-2;
//                                                                    bq bk bv for Qwen2)
//     q_norm [HS]  k_norm [HS]   Qwen3: per-head RMSNorm gains of q and k (in the interleaved order)
//     ffn_norm   [C]  (+ ffn_norm_b [C])
//     Llama: w1 [H, C] gate, w3 [H, C] up, w2 [C, H] down:   y = w2 · (silu(w1·x) ⊙ w3·x)
//     GPT-2: w1 [H, C] fc (+ b1 [H]), w2 [C, H] proj (+ b2 [C]): y = w2 · gelu(w1·x + b1) + b2
//   final_norm [C] (+ final_norm_b [C])
//   classifier [V or Vp, C]  (points at tok_emb when tied)
// RoPE convention: llama2.c's — rotate interleaved pairs (x[2i], x[2i+1]). Hugging Face Llama
// checkpoints permute wq/wk rows (and bq/bk, q_norm/k_norm) for their rotate-half convention; the
// safetensors reader and writer undo and redo that permutation.
//
// Matrices may be f32, f16, bf16 or q8_0 (the kernels use them in their stored precision); vectors
// (norms, biases) are always f32. Tensors are views: the memory belongs to `storage` (memory maps
// of the files read, or buffers owned by this object), so a loaded model is usually zero-copy.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "model/config.h"

namespace orion {

struct Tensor {
  const void* data = nullptr;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;

  bool empty() const { return data == nullptr; }
  int64_t numel() const;
  size_t nbytes() const { return dtype_bytes(dtype, size_t(numel())); }
  const float* f32() const;  // ORION_CHECKs that dtype is F32
  // Row r of a 2-D tensor (pointer arithmetic in the stored dtype).
  const void* row(int64_t r) const;
};

struct LayerWeights {
  Tensor attn_norm, attn_norm_b;
  Tensor wq, wk, wv, wo;
  Tensor bq, bk, bv, bo;
  Tensor q_norm, k_norm;
  Tensor ffn_norm, ffn_norm_b;
  Tensor w1, w2, w3;
  Tensor b1, b2;
};

class ModelWeights {
 public:
  ModelConfig config;
  Tensor tok_emb, pos_emb;
  std::vector<LayerWeights> layers;
  Tensor final_norm, final_norm_b;
  Tensor classifier;

  // Keeps memory alive (a MappedFile, or an owned buffer).
  void keep(std::shared_ptr<const void> s) { storage_.push_back(std::move(s)); }
  // Keeps everything `other` keeps alive, so tensors of `other` may be used here (no copy).
  void share_storage(const ModelWeights& other) {
    storage_.insert(storage_.end(), other.storage_.begin(), other.storage_.end());
  }
  // A new zeroed 64-byte-aligned buffer owned by these weights.
  void* alloc(size_t bytes);
  // A new owned tensor holding a copy of src converted to dtype.
  Tensor copy_as(const Tensor& src, DType dtype);
  // A new owned f32 tensor of the given shape (zeroed), returned writable.
  Tensor alloc_tensor(std::vector<int64_t> shape, DType dtype, void** writable);

  // Every tensor with its canonical name ("tok_emb", "layers.3.wq", ...), in file order
  // (the order llama2.c writes them). Empty optional tensors are skipped.
  std::vector<std::pair<std::string, const Tensor*>> named_tensors() const;
  std::vector<std::pair<std::string, Tensor*>> named_tensors_mut();

  // Checks every tensor's shape against config and that all values are finite; Input error naming
  // `source` and the tensor otherwise.
  void validate(const std::string& source) const;
  // Converts every matrix to dtype (vectors stay f32). No-op for matrices already in dtype.
  void convert_matrices(DType dtype);
  // q8_0 needs matrix rows of a multiple of 32 elements: a Usage error naming the first matrix
  // whose rows are not (what converting or writing as q8_0 would meet).
  void check_fits_q8_0() const;
  DType matrix_dtype() const { return tok_emb.dtype; }
  size_t matrix_bytes() const;  // bytes of all matrices (what decode streams per token)

 private:
  std::vector<std::shared_ptr<const void>> storage_;
};

// Random weights of a config (for `orion bench`, `orion demo` and tests): matrices ~ N(0, std)
// with std = 0.02 (GPT-2 / llama2.c init), norms 1, biases 0; deterministic in seed.
ModelWeights random_weights(const ModelConfig& config, uint64_t seed, DType dtype = DType::F32);

}  // namespace orion
