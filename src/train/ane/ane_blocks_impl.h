// Internal to the ANE block runner (ane_blocks*.cpp): the program set, the timed kernel calls, the
// layout helpers and the weight-update policy shared by the Llama and GPT-2 runners. The family
// files (train/family/<name>/<name>_ane_train.cpp) add only their forward and backward.
#pragma once
#include <functional>
#include <initializer_list>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/timer.h"
#include "ir/interpret.h"
#include "model/frontends/program_set.h"
#include "runtime/weight_update.h"
#include "train/ane/ane_blocks.h"
#include "train/ane/ordered_worker.h"
#include "train/ane/weight_recipes.h"

namespace orion::train::ane {

using runtime::TensorMap;

// The six training kernels of a layer, in the order of a step, from the one description of a
// model's programs (model/frontends/program_set.h). A kernel that is not per layer (sdpa_bwd2) has
// no weights: one program serves every layer and is never updated.
using KernelRole = frontends::TrainingRole;
using frontends::kFfnBwd, frontends::kFwdAttn, frontends::kFwdFfn, frontends::kQkvBwd, frontends::kSdpaBwd1,
    frontends::kSdpaBwd2;
constexpr int kRoles = frontends::kTrainingRoles;
using frontends::KernelSpec;

// One compiled program and its update record.
struct Program {
  const KernelSpec* spec = nullptr;
  int layer = 0, S = 0;
  std::unique_ptr<runtime::UpdatableKernel> k;
  runtime::UpdateStrategy strategy = runtime::UpdateStrategy::Recompile;  // what its last update used
  int64_t updates = 0;
  bool verify_next = true;  // the first update in a mode is always verified
  // Its weights as layouts of the parameters (weight_recipes.h), looked for once per program the
  // kernel compiles in weights-as-inputs mode (recipes_for: that program's weights version).
  std::optional<ProgramRecipes> recipes;
  uint64_t recipes_for = UINT64_MAX;
};

// The q and v adapters of a frozen-base LoRA runner (make_lora_ane_blocks) as the inputs of its
// fwd_attn and qkv_bwd programs: per layer A_q, s·B_q, A_v, s·B_v (frontends::lora_qv_inputs, the
// rank slot = the adapter's rank), built on the host from the adapter when first needed after
// changed() — the runner calls that from weights_updated(), so every step reads the new A, B.
class QvAdapterInputs {
 public:
  // Usage error unless the adapter's targets are among q and v (the kernels' slots).
  QvAdapterInputs(const LoraAdapter& adapter, const ModelConfig& c);
  int slot() const;
  void changed() { current_ = false; }
  // Adds layer l's four adapter inputs to `inputs`.
  void add(int l, TensorMap& inputs);

 private:
  const LoraAdapter& a_;
  const ModelConfig c_;
  std::vector<TensorMap> per_layer_;
  bool current_ = false;
};

class AneBlocksBase : public AneBlocks {
 public:
  // lora_slot > 0: fwd_attn and qkv_bwd are the LoRA kernels of that rank slot (adapter inputs).
  AneBlocksBase(const Params& p, Grads* g, int B, int T, const AneTrainOptions& o, int lora_slot);
  std::vector<frontends::ProgramSpec> program_list() const override;

  void weights_updated() override;  // also: the adapter inputs are rebuilt at their next use
  bool freeze_base(AdapterGradSink* sink) override;
  std::string progress() override;
  const AnePhaseTimes& phases() const override { return ph_; }
  bool overlapping_dw() const override { return overlap_; }
  void reset_phases() override { ph_ = {}, shown_ = {}; }
  const WeightUpdateStats& updates() const override { return up_; }
  runtime::Driver& driver() override { return *driver_; }
  runtime::CompileBudget& budget() override { return *budget_; }
  const runtime::ProgramCache& cache() const override { return *cache_; }
  int programs() const override;
  int attention_bucket() const override { return Sa_; }
  int ffn_bucket() const override { return Sf_; }
  size_t sanitized() const override { return sanitized_; }

 protected:
  // Compiles the program set on first use (after any checkpoint was loaded into the parameters).
  void ensure_compiled();
  Program& prog(KernelRole role, int layer);
  // Runs a program, timing the evaluation apart from the surface copies around it.
  TensorMap run(KernelRole role, int layer, const TensorMap& inputs);
  // Inputs added to every call of a role's programs beyond the activations (the LoRA runner's
  // adapter matrices): has_extra_inputs says whether there are any, add_extra_inputs adds them.
  bool has_extra_inputs(KernelRole role) const { return adapters_ && (role == kFwdAttn || role == kQkvBwd); }
  void add_extra_inputs(KernelRole, int layer, TensorMap& inputs) { adapters_->add(layer, inputs); }
  // Adapter training with the base baked (make_lora_ane_blocks): fwd_attn and qkv_bwd take the q, v
  // adapters of `lora` as inputs, no program is ever updated, and sink gets X and dY of the adapted
  // projections instead of any dW being computed.
  void use_adapter_inputs(const LoraAdapter& lora, AdapterGradSink* sink);
  // The weights never change (a frozen base, baked as constants): no delta-reload probe, every
  // program compiled once with its weights baked, and weights_updated() touches no program.
  bool frozen_weights_ = false;
  // runtime::rows_to_ane / ane_to_rows (runtime/ane_layout.h), timed as surface copies.
  ir::Tensor32 to_ane(const float* rows, int n, int C, int S, float scale = 1.0f);
  void from_ane(const ir::Tensor32& t, int n, float* rows, bool accumulate = false, float scale = 1.0f);
  // Gradient scaling at the programs' boundary. A layer's backward is linear in its upstream
  // gradient dy, so the programs may run on s·dy and their gradient outputs be divided by s on the
  // way back: with s a power of two both are exact in fp32, and only the fp16 rounding inside the
  // programs changes — for the better when dy is small. The loss gradient is a mean over B·T
  // tokens and shrinks as the loss falls; unscaled, its products inside the backward programs
  // (dprobs, dscores, dq, dk) fall into fp16's subnormal range, where a value keeps fewer than 11
  // significant bits (below 2⁻¹⁴ ≈ 6.1e-5). s = 2^k brings max|dy| into [1, 2): ample headroom
  // below 65504 for the products, and most values in fp16's normal range.
  static float gradient_scale(const float* dy, size_t n);
  // The attention halves both families share, for one sequence of T rows:
  //   forward:  fwd_attn(x) → q, k, v kept in the programs' layout, att and xnorm as rows [T, ·],
  //             and the residual x1 = x + o written to x1 [T, C];
  //   backward: sdpa_bwd1(dx1, q, k, v) → sdpa_bwd2 → qkv_bwd(dq, dk, dv, x): the three programs'
  //             outputs (dv from the first, dq, dk after RoPE from the second, dx, dxnorm, ... from qkv_bwd).
  void attention_forward(int l, const float* x, int T, ir::Tensor32& q, ir::Tensor32& k, ir::Tensor32& v, float* att,
                         float* xnorm, float* x1);
  struct AttentionGrads {
    TensorMap sdpa1, sdpa2, qkv;
  };
  // dx1 enters the programs times gscale (gradient_scale); the returned gradients carry that factor.
  AttentionGrads attention_backward(int l, const float* dx1, const float* x, int T, const ir::Tensor32& q,
                                    const ir::Tensor32& k, const ir::Tensor32& v, float gscale);
  // NaN → 0, ±Inf → ±65504 in gradients read back from fp16 programs (counted).
  void sanitize(float* v, size_t n);
  // Layer l's weight gradients (sgemm dW = dYᵀ·X, norm and bias gradients): given to the worker
  // thread when overlapping (full training, overlap_dw), else run here. After layer 0's, every job
  // is waited for and the optimiser may read the gradients. A job may only read the scratch set
  // l % 2 (scratch(l)), the layer's saved activations, the parameters and its own gradients.
  void weight_gradients(int l, bool may_overlap, std::function<void()> job);
  // One projection y = x·Wᵀ (+ b) of a layer over N rows, W [out, in], as its weight gradients need it.
  struct ProjectionGrad {
    LoraTarget target;
    float *dw, *db;  // db: nullptr without a bias
    const float *dy, *x, *w;
    int in, out;
  };
  // dW += dyᵀ·x and db += Σ dy for each projection of layer l, in the order given (a frozen base:
  // no dW; an adapted projection reports its X and dY to f_.sink instead).
  void projection_weight_gradients(int l, std::initializer_list<ProjectionGrad> projections, int N) const;
  // Before layer l's backward writes scratch set l % 2: the job of layer l + 2, which read it, is done
  // (jobs run in order, so at most the newest, layer l + 1's, may still be running).
  void wait_for_scratch();
  // Destructors of the family runners call it first: no job may outlive their buffers.
  void finish_jobs() noexcept;

  const Params& p_;
  Grads* g_;
  const int B_, T_;
  ModelWeights view_;                          // the parameters as fp32 ModelWeights (zero-copy): what graphs are built from
  std::unique_ptr<QvAdapterInputs> adapters_;  // LoRA mode only
  FrozenBase f_;                               // a frozen base: no dW, the adapted projections' X and dY go to f_.sink
  int Sa_ = 0, Sf_ = 0;
  AnePhaseTimes ph_;

 private:
  void choose_buckets();
  runtime::UpdateStrategy probe_delta_reload();  // Auto: does a delta reload take effect here?
  void compile_all(runtime::UpdatableKernel::Mode mode);
  void update_program(Program& p);
  // p's recipes when its weights can be written straight from the parameters, else nullptr.
  const ProgramRecipes* recipes(Program& p);
  void switch_to_weights_as_inputs();  // before the compile budget runs out (C9)
  void note(const std::string& line) const;
  std::string strategies_in_use() const;

  AneTrainOptions opt_;
  std::unique_ptr<runtime::Driver> driver_;
  std::unique_ptr<runtime::CompileBudget> budget_;
  std::unique_ptr<runtime::ProgramCache> cache_;  // every program of programs_ (declared before them: outlives them)
  int lora_slot_ = 0;
  std::vector<KernelSpec> specs_;  // by KernelRole
  std::vector<Program> programs_;  // weighted: [role][layer]; weight-free: one per role
  std::vector<int> index_;         // role·L + layer → programs_ index
  std::unique_ptr<RecipeFinder> finder_;  // while recipes are looked for
  bool compiled_ = false;
  WeightUpdateStats up_;
  AnePhaseTimes shown_;  // ph_ at the last progress() line
  size_t sanitized_ = 0;
  bool backward_done_ = false;
  bool overlap_ = false;    // options' overlap_dw resolved for the driver
  OrderedWorker worker_;    // overlapped weight gradients
  double worker_dw_s_ = 0;  // the worker's dW seconds, folded into ph_ once its jobs are waited for
  Timer since_backward_;    // from the last backward block to weights_updated(): the optimiser
};

// Weight gradients of the norms from the CPU's fp32 statistics of the norm's input x [N, C] and the
// gradient of the norm's output dxnorm [N, C] (from the ANE):
//   RMSNorm:   dw[c] += Σ_n dxnorm[n, c]·x[n, c]·r[n],          r = (mean(x²) + eps)^−½
//   LayerNorm: dw[c] += Σ_n dxnorm[n, c]·x̂[n, c], db[c] += Σ_n dxnorm[n, c],  x̂ = (x − mean)·r
void rmsnorm_weight_grad(float* dw, const float* dxnorm, const float* x, int N, int C, float eps);
void layernorm_weight_grad(float* dw, float* db, const float* dxnorm, const float* x, int N, int C, float eps);

// The family runners are in train/family/<name>/ (training_family.h).

}  // namespace orion::train::ane
