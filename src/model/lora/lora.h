// LoRA adapters (Hu et al. 2021): a frozen base matrix W [out, in] plus a trainable low-rank
// update, so that a layer computes
//   y = W·x + s·B·(A·x),   A [r, in], B [out, r], s = alpha / r
// (in Orion's canonical [out, in] orientation, model/weights.h). B starts at zero, so a fresh
// adapter leaves the model exactly as it was; the merged weight is W' = W + s·B·A.
//
// Targets are the projections of a block, named as Orion's weights are:
//   q k v o   attention (wq [NH·HS, C], wk wv [NKV·HS, C], wo [C, NH·HS])
//   w1 w2 w3  feed-forward (Llama: w1 gate [H, C], w3 up [H, C], w2 down [C, H];
//             GPT-2: w1 = mlp.c_fc [H, C], w2 = mlp.c_proj [C, H], no w3)
// parse_lora_targets also takes the Hugging Face names (q_proj, gate_proj, up_proj, down_proj, …).
//
// All adapter parameters live in ONE fp32 buffer (as train/model/params.h does for models): the
// optimiser is one loop over it and a checkpoint one write. Tensors are ordered layer by layer,
// target by target, A then B, each starting on a 16-float boundary.
//
// Files (lora_io.cpp): Orion's own format (adapter.olora) and the Hugging Face PEFT layout
// (adapter_model.safetensors + adapter_config.json); see lora_io.h.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/weights.h"

namespace orion {

enum class LoraTarget : int { Q = 0, K, V, O, W1, W2, W3 };
constexpr int kLoraTargetCount = 7;
// Every target in canonical order: the enum's, and the order of the parameter buffer and the files.
constexpr LoraTarget kAllLoraTargets[kLoraTargetCount] = {LoraTarget::Q,  LoraTarget::K,  LoraTarget::V, LoraTarget::O,
                                                          LoraTarget::W1, LoraTarget::W2, LoraTarget::W3};

// A set of targets, collected in any order and listed in canonical order without duplicates.
class LoraTargetSet {
 public:
  void add(LoraTarget t) { bits_ |= 1u << int(t); }
  bool has(LoraTarget t) const { return bits_ & (1u << int(t)); }
  std::vector<LoraTarget> list() const {
    std::vector<LoraTarget> out;
    for (LoraTarget t : kAllLoraTargets)
      if (has(t)) out.push_back(t);
    return out;
  }

 private:
  unsigned bits_ = 0;
};

const char* lora_target_name(LoraTarget t);  // "q", "k", "v", "o", "w1", "w2", "w3"
// "q,v" / "q_proj,v_proj" / "all" (every projection of the family) → targets in canonical order,
// duplicates removed. Usage error naming the bad entry and listing the valid names.
std::vector<LoraTarget> parse_lora_targets(const std::string& csv, Arch arch);
// [out, in] of the base matrix the target adapts.
std::pair<int64_t, int64_t> lora_target_shape(const ModelConfig& c, LoraTarget t);
// The member of a layer that a target adapts: of LayerWeights (a Tensor) or of any struct with the
// same member names (train/model/params.h LayerParams: float*).
template <typename Layer>
auto& lora_target_member(Layer& l, LoraTarget t) {
  switch (t) {
    case LoraTarget::Q: return l.wq;
    case LoraTarget::K: return l.wk;
    case LoraTarget::V: return l.wv;
    case LoraTarget::O: return l.wo;
    case LoraTarget::W1: return l.w1;
    case LoraTarget::W2: return l.w2;
    case LoraTarget::W3: return l.w3;
  }
  return l.wq;
}
inline const Tensor& lora_base_matrix(const LayerWeights& l, LoraTarget t) { return lora_target_member(l, t); }
inline Tensor& lora_base_matrix(LayerWeights& l, LoraTarget t) { return lora_target_member(l, t); }

// One adapted matrix: A [r, in] at a_offset, B [out, r] at b_offset (floats into the buffer).
struct LoraTensor {
  int layer = 0;
  LoraTarget target = LoraTarget::Q;
  int64_t out = 0, in = 0;
  size_t a_offset = 0, b_offset = 0;
};

class LoraAdapter {
 public:
  LoraAdapter() = default;
  // A zeroed adapter for a model of config `base` (Usage errors for rank < 1, alpha ≤ 0, no
  // targets, or a target the family lacks: w3 on GPT-2).
  LoraAdapter(const ModelConfig& base, int rank, float alpha, std::vector<LoraTarget> targets);

  // PEFT's initialisation: A ~ U(−1/√in, 1/√in) (kaiming_uniform with a = √5), B = 0.
  // Deterministic in seed.
  void init(uint64_t seed);

  const ModelConfig& base_config() const { return base_; }
  int rank() const { return rank_; }
  float alpha() const { return alpha_; }
  float scale() const { return alpha_ / float(rank_); }  // s = alpha / r
  const std::vector<LoraTarget>& targets() const { return targets_; }
  bool has(LoraTarget t) const;
  const std::vector<LoraTensor>& tensors() const { return tensors_; }
  const LoraTensor* find(int layer, LoraTarget t) const;  // nullptr when the target is not adapted

  float* data() { return data_.get(); }
  const float* data() const { return data_.get(); }
  size_t size() const { return size_; }  // floats, padding included
  size_t num_params() const;             // real adapter parameters
  float* A(const LoraTensor& t) { return data() + t.a_offset; }
  float* B(const LoraTensor& t) { return data() + t.b_offset; }
  const float* A(const LoraTensor& t) const { return data() + t.a_offset; }
  const float* B(const LoraTensor& t) const { return data() + t.b_offset; }
  LoraAdapter clone() const;

  // Input error naming `source` when the adapter does not fit the model (architecture or any
  // dimension that shapes an adapted matrix).
  void check_fits(const ModelConfig& c, const std::string& source) const;
  std::string describe() const;  // "LoRA r=16 alpha=16 (s=1) on q,v of 6 layers: 55296 parameters"

 private:
  ModelConfig base_;
  int rank_ = 0;
  float alpha_ = 0;
  std::vector<LoraTarget> targets_;
  std::vector<LoraTensor> tensors_;
  std::shared_ptr<float> data_;
  size_t size_ = 0;
};

// W'[o, :] = W[o, :] + s·Σ_k B[o, k]·A[k, :] for one fp32 matrix (out × in, row-major), written to
// merged (which may alias base). With B = 0 the result is W bit for bit.
void lora_merge_matrix(float* merged, const float* base, const float* A, const float* B, int64_t out, int64_t in, int rank,
                       float s);

// The base weights with every adapted matrix replaced by W + scale_mult·s·B·A (computed in fp32,
// stored back in the base matrix's dtype); the other tensors are shared with `base`.
ModelWeights merge_lora(const ModelWeights& base, const LoraAdapter& adapter, float scale_mult = 1.0f);

}  // namespace orion
