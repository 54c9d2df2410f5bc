// Training through the ANE path: a BlockRunner whose transformer blocks run as compiled programs
// on a runtime::Driver (anesim anywhere, the Apple `ane` driver on a Mac) — DESIGN.md §3.
//
//   AneTrainOptions o;  o.driver = "anesim";                      // or "ane"
//   model.set_blocks(make_ane_blocks(params, &grads, B, T, o));   // TrainModel (trainer_api.h)
//   … the training loop does not change: forward, backward, AdamW, then model.weights_updated().
//
// Interface (what a caller — the Trainer, `orion bench train`, a LoRA trainer — relies on):
//   * The runner reads the weights from `params` (zero-copy view) and adds every weight gradient
//     into `grads` (backward_block: grads.layers[l] += ∂loss/∂W, as the CPU runners do).
//   * Nothing is compiled before the first forward_block: a checkpoint loaded into `params` before
//     that is what the programs are built from (stale programs gave NaN on resume in the original).
//   * weights_updated() must follow every change of `params` (after each optimiser step); it
//     refreshes the programs' weights through the runtime's strategies (weight_update.h), verified
//     by probes, and returns only when the programs compute with the new weights.
//   * progress() is a one-line summary of the per-phase times since its last call (the Trainer
//     appends it to its progress lines); phases() / updates() give the figures.
//
// Who computes what, per layer and sequence (S = the sequence bucket, tokens in columns 0..T−1,
// zeros after them — causal attention keeps the padding out of real columns):
//   ANE  fwd_attn (norm, q k v, attention, Wo), fwd_ffn (norm, W1/W3 or W1+GELU, W2),
//        ffn_bwd, sdpa_bwd1, sdpa_bwd2 (weight-free: one program for all layers), qkv_bwd — the
//        input gradients; Stories kernels for Llama, gpt2_* kernels for GPT-2 (frontends.h).
//   CPU  the residual adds, every weight and bias gradient dW = dYᵀ·X as multithreaded sgemm over
//        all B·T rows (train/cpu/layers.h matmul_backward), the norm weights' gradients, fp16 range
//        clamps of what goes into a program and sanitising of the gradients that come back.
//        Layer l's dW runs on a worker thread while layer l−1's backward programs run (overlap_dw;
//        the backward's scratch buffers alternate between two sets so the two never share one).
// TrainModel keeps the embedding, the final norm, the classifier and the loss on the CPU.
//
// Weight updates (DESIGN.md §6): with UpdateStrategy::Auto the runner first probes, on one
// throw-away program, whether a delta reload takes effect on this driver; anesim by default (and,
// by public reports, M3–M5 hardware) keeps the compiled weights, so the probe finds it stale and
// every program is compiled once with its weights as inputs — the compile count then stays
// constant for the whole run. Each program's first update, and every verify_every-th after it,
// is verified against the CPU reference (ir::interpret of the rebuilt graph); a failing strategy
// falls back (delta reload → weights as inputs → recompile) for that program, counted in updates().
// Recompile (asked for explicitly) switches to weights as inputs before the compile budget (C9)
// runs out, so a run never has to restart the process.
#pragma once
#include <memory>
#include <string>

#include "model/frontends/program_set.h"
#include "runtime/compile_budget.h"
#include "runtime/driver.h"
#include "runtime/program_cache.h"
#include "runtime/weight_update.h"
#include "train/model/trainer_api.h"

namespace orion::train {

struct AneTrainOptions {
  std::string driver = "anesim";  // runtime::make_driver name: "anesim" or "ane"
  std::string chip = "m4";
  runtime::UpdateStrategy weight_update = runtime::UpdateStrategy::Auto;
  int verify_every = 100;            // verify each program's 1st update and every N-th after (0: only the 1st)
  bool reload_takes_effect = false;  // anesim: model hardware on which a delta reload works
  int compile_budget = 0;            // > 0: a smaller budget than the chip's (tests of C9)
  std::string model_name = "model";  // the program cache's model key, as inference's (AneModelOptions)
  bool quiet = false;                // no notes on stderr (strategy choice, budget switches)
  // Each layer's weight gradients (CPU sgemm) on a worker thread while the main thread drives the
  // next layer's backward programs; the gradients are bit-identical either way. Auto: on where the
  // ANE is its own silicon (driver "ane"), off on anesim, whose programs run on the same cores, so
  // that overlapping only adds contention (bench/TRAIN.md).
  enum class Overlap { Auto, On, Off };
  Overlap overlap_dw = Overlap::Auto;
  // Unverified weights-as-inputs updates convert the parameters straight into the programs' fp16
  // weight surfaces (train/ane/weight_recipes.h); false: through each program's rebuilt graph, as
  // verified updates do. The same bytes either way (tests compare them).
  bool direct_weight_writes = true;
};

// Seconds per phase, summed since the last reset.
struct AnePhaseTimes {
  double ane_eval_s = 0;        // driver.evaluate of the training programs
  double surface_copy_s = 0;    // host layout [T, C] ⇄ [C, S], fp32 ⇄ fp16 surfaces, clamps
  double cpu_dw_s = 0;          // weight and bias gradients (sgemm) and norm-weight gradients (worker time when overlapped)
  double dw_wait_s = 0;         // overlapped: time the main thread waited for the worker's dW (the part not hidden)
  double cpu_other_s = 0;       // residual adds, sanitising
  double optimizer_s = 0;       // from the last backward block to weights_updated(): AdamW + grad norm
  double weight_update_s = 0;   // weights_updated(): writing weights into the programs, reloads, probes
  double compile_s = 0;         // compiles (first compile and fallbacks), host time
  double predicted_ane_ms = 0;  // the driver's timing model for the training evaluations (anesim)
  // anesim's breakdown of predicted_ane_ms: per-evaluation dispatch, compute, host ⇄ surface copies,
  // and the part of the copies that streams weights (weights as inputs: the price of never reloading)
  double predicted_dispatch_ms = 0, predicted_compute_ms = 0, predicted_copy_ms = 0, predicted_weight_stream_ms = 0;
  int64_t evaluations = 0;
  int64_t steps = 0;  // weights_updated() calls
};

struct WeightUpdateStats {
  std::string strategy;         // the strategy in use now ("weights-as-inputs", ...; "a+b" when mixed)
  std::string probe;            // what the start-up probe found ("" when none ran)
  int64_t updates = 0;          // program updates done
  int64_t verified = 0;         // of which verified by a probe
  int64_t written_directly = 0;  // of which written straight from the parameters (no graph)
  int64_t stale_detected = 0;   // verifications that found stale or wrong results (then fell back)
  int64_t fallbacks = 0;        // updates that ended on another strategy than asked
  int64_t budget_switches = 0;  // recompile → weights-as-inputs switches before the budget ran out
  double max_error = 0;         // largest verified probe error
};

class AneBlocks : public BlockRunner {
 public:
  // Per-phase times since the last reset_phases(), and the weight-update record of the run.
  virtual const AnePhaseTimes& phases() const = 0;
  virtual void reset_phases() = 0;
  virtual const WeightUpdateStats& updates() const = 0;
  virtual bool overlapping_dw() const = 0;  // weight gradients on a worker thread (AneTrainOptions::overlap_dw)
  virtual runtime::Driver& driver() = 0;
  virtual runtime::CompileBudget& budget() = 0;
  // The runner's programs, kept as inference keeps its own: by (model_name, kernel, layer, bucket,
  // weights version), where an update that compiles (a recompile, a fallback to weights as inputs)
  // is the slot's next version and evicts the one before, and an update that keeps the program
  // (weights streamed as inputs, a delta reload) keeps it. stats(): misses are the programs'
  // compiles, evictions the compiles that replaced one (the delta-reload probe's throw-away program
  // is compiled outside it, charged to the same budget).
  virtual const runtime::ProgramCache& cache() const = 0;
  virtual int programs() const = 0;  // programs resident (0 before the first forward)
  // The programs compiled at the first forward, as (kernel, layer, S) — layer −1 for one shared by
  // every layer; empty before it. model/frontends/program_set.h is where the list comes from.
  virtual std::vector<frontends::ProgramSpec> program_list() const = 0;
  virtual int attention_bucket() const = 0;  // S of the attention kernels (0 before compiling)
  virtual int ffn_bucket() const = 0;        // S of the feed-forward kernels
  virtual size_t sanitized() const = 0;      // gradient values repaired (NaN/Inf from fp16)
};

// The ANE runner for the parameters' architecture (Llama/Stories or GPT-2), for up to B×T tokens.
// grads may be null (forward only). Makes its own driver and compile budget.
std::unique_ptr<AneBlocks> make_ane_blocks(const Params& params, Grads* grads, int B, int T,
                                           const AneTrainOptions& options = {});

// Adapter training with the base baked: the runner of the base's family (Llama or GPT-2)
// with fwd_attn and qkv_bwd taking the q and v adapters (targets ⊆ {q, v}; A and s·B of `adapter`, read again after every
// weights_updated()) as program inputs. base never changes: it is compiled into the programs once,
// the compile count stays constant for the whole run, and switching or updating the adapter
// recompiles nothing. No weight gradient is computed; the adapted projections' X and dY (ANE
// outputs) go to sink, which forms dA, dB on the CPU. Usage error for other targets.
std::unique_ptr<AneBlocks> make_lora_ane_blocks(const Params& base, const LoraAdapter& adapter, AdapterGradSink& sink, int B,
                                                int T, const AneTrainOptions& options = {});

// "auto", "on", "off" → AneTrainOptions::Overlap (Usage error otherwise).
AneTrainOptions::Overlap parse_overlap(const std::string& name);

// "auto", "delta-reload", "weights-as-inputs", "recompile" → the strategy (Usage error otherwise).
runtime::UpdateStrategy parse_update_strategy(const std::string& name);

}  // namespace orion::train
