// The ANE block runner's shared machinery (ane_blocks.h): choosing the sequence buckets, compiling
// the program set after the parameters are final, timed kernel calls, the layout between the
// trainer's rows [T, C] and the programs' [1, C, 1, S], and the verified weight updates.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/error.h"
#include "compiler/compile.h"
#include "runtime/ane_layout.h"
#include "runtime/anesim/anesim_driver.h"
#include "train/ane/ane_blocks_impl.h"
#include "train/cpu/layers.h"
#include "train/family/training_family.h"
#include "train/model/guards.h"

namespace orion::train {

runtime::UpdateStrategy parse_update_strategy(const std::string& name) {
  using S = runtime::UpdateStrategy;
  for (S s : {S::Auto, S::DeltaReload, S::WeightsAsInputs, S::Recompile})
    if (name == runtime::strategy_name(s)) return s;
  throw_usage_error(fmt::format("unknown weight-update strategy '{}'", name), "--weight-update",
                    "use auto, delta-reload, weights-as-inputs or recompile");
}

AneTrainOptions::Overlap parse_overlap(const std::string& name) {
  using O = AneTrainOptions::Overlap;
  if (name == "auto") return O::Auto;
  if (name == "on") return O::On;
  if (name == "off") return O::Off;
  throw_usage_error(fmt::format("unknown --overlap-dw value '{}'", name), "--overlap-dw", "use auto, on or off");
}

std::unique_ptr<AneBlocks> make_ane_blocks(const Params& params, Grads* grads, int B, int T,
                                           const AneTrainOptions& options) {
  return training_family(params.config().arch).ane_blocks(params, grads, B, T, options);
}

namespace ane {

using runtime::UpdatableKernel;
using runtime::UpdateStrategy;

AneBlocksBase::AneBlocksBase(const Params& p, Grads* g, int B, int T, const AneTrainOptions& o, int lora_slot)
    : p_(p),
      g_(g),
      B_(B),
      T_(T),
      view_(p.view()),
      opt_(o),
      lora_slot_(lora_slot),
      specs_(frontends::training_kernels(p.config().arch, lora_slot)) {
  runtime::DriverOptions d;
  d.chip = &compiler::chip_profile(o.chip);
  d.reload_takes_effect = o.reload_takes_effect;
  driver_ = runtime::make_driver(o.driver, d);
  overlap_ =
      o.overlap_dw == AneTrainOptions::Overlap::On || (o.overlap_dw == AneTrainOptions::Overlap::Auto && o.driver == "ane");
  budget_ = std::make_unique<runtime::CompileBudget>(o.compile_budget > 0 ? runtime::CompileBudget(o.compile_budget)
                                                                          : runtime::CompileBudget::for_driver(*driver_));
  cache_ = std::make_unique<runtime::ProgramCache>(*driver_, *budget_);
}

int AneBlocksBase::programs() const { return int(cache_->stats().resident); }

void AneBlocksBase::note(const std::string& line) const {
  if (!opt_.quiet) std::fprintf(stderr, "train: ane: %s\n", line.c_str());
}

// --- compiling ---------------------------------------------------------------------------------

// The smallest S ≥ T at which every program of a group is legal (model/frontends/program_set.h).
void AneBlocksBase::choose_buckets() {
  const compiler::ChipProfile& chip = driver_->chip();
  const frontends::TrainingBuckets b = frontends::training_buckets(view_, T_, chip, lora_slot_);
  for (bool attention : {true, false})
    if ((attention ? b.attention : b.ffn) == 0)
      throw Error(ErrorKind::Runtime,
                  fmt::format("no sequence bucket up to {} lets the {} kernels reach the {}-byte minimum buffer (C7)",
                              chip.max_sequence_bucket, attention ? "attention" : "feed-forward", chip.min_buffer_bytes),
                  {"", "backend", -1, "use --backend cpu for this model, or a wider model (dim) or longer --seq"});
  Sa_ = b.attention, Sf_ = b.ffn;
}

std::vector<frontends::ProgramSpec> AneBlocksBase::program_list() const {
  std::vector<frontends::ProgramSpec> out;
  for (const Program& p : programs_)
    out.push_back({"", p.spec->kernel, int(p.spec - specs_.data()), p.spec->per_layer ? p.layer : -1, p.S, {}});
  return out;
}

// On one throw-away program (layer 0's fwd_ffn): compile it, reload it with other weights (every
// weight negated) and verify. Costs one compile, two when the reload is stale (the fallback) —
// charged to the runner's budget, but kept out of its cache: the program is not one of the list.
UpdateStrategy AneBlocksBase::probe_delta_reload() {
  const KernelSpec& s = specs_[kFwdFfn];
  ir::Graph g = s.build(view_, 0, Sf_);
  UpdatableKernel k(*driver_, *budget_, g, UpdatableKernel::Mode::BakedWeights);
  TensorMap negated;
  for (const ir::Node& n : g.nodes())
    if (n.op == ir::Op::Const && n.results[0].numel() > 1 && n.name.size() > 1 && n.name[0] == 'w') {
      ir::Tensor32 t = ir::const_values(n);
      for (float& x : t.data) x = -x;
      negated[n.name] = std::move(t);
    }
  runtime::UpdateResult r = runtime::update_weights(k, negated, UpdateStrategy::DeltaReload);
  const bool works = r.used == UpdateStrategy::DeltaReload && r.verified;
  up_.probe =
      works ? fmt::format("delta reload verified (error {:.2g})", r.max_error)
            : fmt::format("delta reload stale ({}), weights as inputs instead", r.attempts.empty() ? "" : r.attempts[0]);
  up_.stale_detected += r.stale_detected ? 1 : 0;
  note("probe: " + up_.probe);
  return works ? UpdateStrategy::DeltaReload : UpdateStrategy::WeightsAsInputs;
}

void AneBlocksBase::compile_all(UpdatableKernel::Mode mode) {
  const int L = p_.config().n_layers;
  programs_.clear();
  index_.assign(size_t(kRoles) * L, -1);
  const UpdateStrategy as = mode == UpdatableKernel::Mode::WeightsAsInputs ? UpdateStrategy::WeightsAsInputs
                            : opt_.weight_update == UpdateStrategy::Auto   ? UpdateStrategy::DeltaReload
                                                                           : opt_.weight_update;
  const std::vector<frontends::ProgramSpec> list = frontends::training_programs(view_, {Sa_, Sf_}, lora_slot_);
  programs_.reserve(list.size());
  for (const frontends::ProgramSpec& ps : list) {
    const KernelSpec& s = specs_[size_t(ps.role)];
    Program p;
    p.spec = &s, p.layer = std::max(ps.layer, 0), p.S = ps.S;
    const runtime::ProgramKey key{opt_.model_name, ps.kernel, ps.layer, ps.S, 0};
    p.k = std::make_unique<UpdatableKernel>(*cache_, key, ps.build(),
                                            s.per_layer ? mode : UpdatableKernel::Mode::BakedWeights);
    p.strategy = as;
    programs_.push_back(std::move(p));
    // a per-layer program serves its layer; a shared one every layer
    for (int l = s.per_layer ? ps.layer : 0; l < (s.per_layer ? ps.layer + 1 : L); l++)
      index_[size_t(ps.role) * L + l] = int(programs_.size()) - 1;
  }
  if (mode != UpdatableKernel::Mode::WeightsAsInputs || !opt_.direct_weight_writes) return;
  for (Program& p : programs_)  // found now, with the compiles, rather than in the first fast update
    if (p.spec->per_layer) recipes(p);
  finder_.reset();  // its patterned copy of a layer is needed again only after a switch of strategy
}

void AneBlocksBase::ensure_compiled() {
  if (compiled_) return;
  Timer t;
  choose_buckets();
  UpdateStrategy s = frozen_weights_ ? UpdateStrategy::Recompile : opt_.weight_update;  // Recompile: baked (never used)
  if (s == UpdateStrategy::Auto) s = probe_delta_reload();
  compile_all(s == UpdateStrategy::WeightsAsInputs ? UpdatableKernel::Mode::WeightsAsInputs
                                                   : UpdatableKernel::Mode::BakedWeights);
  compiled_ = true;
  up_.strategy = frozen_weights_ ? "none (frozen base, baked once)" : strategies_in_use();
  ph_.compile_s += t.seconds();
  note(fmt::format("{} programs on {} ({}), buckets S={} (attention) / {} (feed-forward), weights by {}; {}",
                   programs_.size(), driver_->name(), driver_->chip().name, Sa_, Sf_, up_.strategy, budget_->str()));
}

Program& AneBlocksBase::prog(KernelRole role, int layer) {
  return programs_[size_t(index_[size_t(role) * p_.config().n_layers + layer])];
}

// --- running -------------------------------------------------------------------------------------

TensorMap AneBlocksBase::run(KernelRole role, int layer, const TensorMap& inputs) {
  Program& p = prog(role, layer);
  Timer t;
  runtime::AneKernel& k = p.k->kernel();
  const double eval0 = k.timing().evaluate_s, ane0 = driver_->counters().predicted_ane_ms;
  TensorMap out;
  if (has_extra_inputs(role)) {
    TensorMap all = inputs;
    add_extra_inputs(role, layer, all);
    out = p.k->run(all);
  } else {
    out = p.k->run(inputs);
  }
  const double eval = k.timing().evaluate_s - eval0;
  ph_.ane_eval_s += eval;
  ph_.surface_copy_s += t.seconds() - eval;
  ph_.predicted_ane_ms += driver_->counters().predicted_ane_ms - ane0;
  if (const auto* sim = dynamic_cast<const runtime::anesim::AnesimDriver*>(driver_.get())) {
    const runtime::anesim::TimingBreakdown tb = sim->predicted(k.driver_program());
    ph_.predicted_dispatch_ms += tb.dispatch_ms, ph_.predicted_compute_ms += tb.compute_ms,
        ph_.predicted_copy_ms += tb.copy_ms;
    double weight_bytes = 0;
    for (const runtime::WeightInput& w : p.k->weight_inputs()) weight_bytes += double(w.declared.bytes());
    ph_.predicted_weight_stream_ms +=
        runtime::anesim::surface_copy_ms(weight_bytes, runtime::anesim::chip_timing(driver_->chip()));
  }
  ph_.evaluations++;
  return out;
}

ir::Tensor32 AneBlocksBase::to_ane(const float* rows, int n, int C, int S, float scale) {
  Timer t;
  ir::Tensor32 x = runtime::rows_to_ane(rows, n, C, S, scale);
  ph_.surface_copy_s += t.seconds();
  return x;
}

void AneBlocksBase::from_ane(const ir::Tensor32& t, int n, float* rows, bool accumulate, float scale) {
  Timer timer;
  runtime::ane_to_rows(t, n, rows, accumulate, scale);
  ph_.surface_copy_s += timer.seconds();
}

void AneBlocksBase::projection_weight_gradients(int l, std::initializer_list<ProjectionGrad> projections, int N) const {
  for (const ProjectionGrad& p : projections) {
    matmul_backward((float*)nullptr, f_.grad(p.dw), f_.grad(p.db), p.dy, p.x, p.w, N, p.in, p.out);
    f_.report(l, p.target, p.x, p.dy, N);
  }
}

float AneBlocksBase::gradient_scale(const float* dy, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; i++) m = std::max(m, std::fabs(dy[i]));
  if (!(m > 0) || !std::isfinite(m)) return 1.0f;
  const int k = std::clamp(-std::ilogb(m), -30, 60);  // max|dy|·2^k ∈ [1, 2)
  return std::ldexp(1.0f, k);
}

void AneBlocksBase::sanitize(float* v, size_t n) {
  Timer t;
  sanitized_ += sanitize_fp16(v, n);
  ph_.cpu_other_s += t.seconds();
}

void AneBlocksBase::attention_forward(int l, const float* x, int T, ir::Tensor32& q, ir::Tensor32& k, ir::Tensor32& v,
                                      float* att, float* xnorm, float* x1) {
  const int C = p_.config().dim;
  TensorMap fa = run(kFwdAttn, l, {{"x", to_ane(x, T, C, Sa_)}});
  q = std::move(fa.at("q")), k = std::move(fa.at("k")), v = std::move(fa.at("v"));
  from_ane(fa.at("att"), T, att);
  from_ane(fa.at("xnorm"), T, xnorm);
  std::copy_n(x, size_t(T) * C, x1);  // x1 = x + o
  from_ane(fa.at("o"), T, x1, /*accumulate=*/true);
}

AneBlocksBase::AttentionGrads AneBlocksBase::attention_backward(int l, const float* dx1, const float* x, int T,
                                                                const ir::Tensor32& q, const ir::Tensor32& k,
                                                                const ir::Tensor32& v, float gscale) {
  const int C = p_.config().dim;
  AttentionGrads g;
  g.sdpa1 = run(kSdpaBwd1, l, {{"dy", to_ane(dx1, T, C, Sa_, gscale)}, {"q", q}, {"k", k}, {"v", v}});
  g.sdpa2 = run(kSdpaBwd2, l, {{"probs", g.sdpa1.at("probs")}, {"dprobs", g.sdpa1.at("dprobs")}, {"q", q}, {"k", k}});
  g.qkv = run(kQkvBwd, l,
              {{"dq", g.sdpa2.at("dq")}, {"dk", g.sdpa2.at("dk")}, {"dv", g.sdpa1.at("dv")}, {"x", to_ane(x, T, C, Sa_)}});
  return g;
}

// --- weight gradients, overlapped with the ANE ------------------------------------------------------

void AneBlocksBase::weight_gradients(int l, bool may_overlap, std::function<void()> job) {
  if (overlap_ && may_overlap) {
    worker_.submit([this, job = std::move(job)] {
      Timer t;
      job();
      worker_dw_s_ += t.seconds();  // read by the main thread only after a wait (the worker's mutex orders it)
    });
  } else {
    Timer t;
    job();
    ph_.cpu_dw_s += t.seconds();
  }
  if (l > 0) return;
  if (overlap_) {  // the last layer: the optimiser comes next and needs every gradient
    Timer wait;
    worker_.wait();
    ph_.dw_wait_s += wait.seconds();
    ph_.cpu_dw_s += worker_dw_s_, worker_dw_s_ = 0;
  }
  since_backward_.reset(), backward_done_ = true;
}

void AneBlocksBase::wait_for_scratch() {
  if (!overlap_) return;
  Timer wait;
  worker_.wait_until_pending(1);  // jobs run in order: only layer l + 1's may still be running
  ph_.dw_wait_s += wait.seconds();
}

void AneBlocksBase::finish_jobs() noexcept {
  try {
    worker_.wait();
  } catch (...) {  // a failed job's error was the caller's to see; the runner is going away
  }
}

// --- weight updates ------------------------------------------------------------------------------

void AneBlocksBase::update_program(Program& p) {
  const bool verify = p.verify_next || (opt_.verify_every > 0 && p.updates % opt_.verify_every == 0);
  if (!verify && p.strategy == UpdateStrategy::WeightsAsInputs && p.k->mode() == UpdatableKernel::Mode::WeightsAsInputs) {
    if (const ProgramRecipes* r = opt_.direct_weight_writes ? recipes(p) : nullptr) {
      write_weights(*p.k, *r);  // the parameters straight into the weight surfaces
      up_.written_directly++;
    } else {
      p.k->stream_weights(p.spec->build(view_, p.layer, p.S));  // same program, a new graph's weights
    }
  } else {
    ir::Graph g = p.spec->build(view_, p.layer, p.S);
    runtime::Verification v;
    v.enabled = verify;
    const int compiles = budget_->used();
    Timer t;
    runtime::UpdateResult r = runtime::update_weights(*p.k, g, p.strategy, v);
    if (budget_->used() > compiles) ph_.compile_s += t.seconds();
    if (r.verified) up_.verified++, up_.max_error = std::max(up_.max_error, r.max_error);
    if (r.stale_detected) up_.stale_detected++;
    if (r.used != p.strategy) up_.fallbacks++, note(r.message);
    p.strategy = r.used;
    p.verify_next = false;
  }
  p.updates++;
  up_.updates++;
}

const ProgramRecipes* AneBlocksBase::recipes(Program& p) {
  if (p.k->mode() != UpdatableKernel::Mode::WeightsAsInputs) return nullptr;
  if (p.recipes_for != p.k->key().weights_version) {
    if (!finder_) finder_ = std::make_unique<RecipeFinder>(view_);
    std::string why;
    p.recipes = finder_->find(p.spec->build, p.layer, p.S, p.k->weight_inputs(), &why);
    p.recipes_for = p.k->key().weights_version;
    if (!p.recipes)
      note(fmt::format("{} of layer {}: weights updated through its graph ({})", p.spec->kernel, p.layer, why));
  }
  return p.recipes ? &*p.recipes : nullptr;
}

// Recompiling every weighted program each step spends the budget quickly (C9). While a switch to
// weights as inputs (one compile per program) still fits with a step to spare, it is made.
void AneBlocksBase::switch_to_weights_as_inputs() {
  int recompiling = 0;
  for (const Program& p : programs_) recompiling += p.spec->per_layer && p.strategy == UpdateStrategy::Recompile;
  if (recompiling == 0 || budget_->remaining() >= 2 * recompiling) return;
  note(fmt::format("{} left, fewer than two rounds of {} recompiles: switching to weights as inputs (compiled once)",
                   budget_->str(), recompiling));
  for (Program& p : programs_)
    if (p.spec->per_layer && p.strategy == UpdateStrategy::Recompile)
      p.strategy = UpdateStrategy::WeightsAsInputs, p.verify_next = true;
  up_.budget_switches++;
}

bool AneBlocksBase::freeze_base(AdapterGradSink* sink) {
  if (adapters_ && sink) f_.sink = sink;  // the LoRA runner is always frozen
  else if (!adapters_) f_.sink = sink;
  return true;
}

void AneBlocksBase::use_adapter_inputs(const LoraAdapter& lora, AdapterGradSink* sink) {
  ORION_CHECK(sink, "adapter training on the ANE needs a gradient sink");
  adapters_ = std::make_unique<QvAdapterInputs>(lora, p_.config());
  frozen_weights_ = true, f_.sink = sink;
}

void AneBlocksBase::weights_updated() {
  if (adapters_) adapters_->changed();  // the adapter changed: its inputs are rebuilt at the next call
  if (backward_done_) ph_.optimizer_s += since_backward_.seconds(), backward_done_ = false;
  ph_.steps++;
  if (!compiled_ || frozen_weights_) return;  // programs are built from the current parameters when first needed
  Timer t;
  switch_to_weights_as_inputs();
  for (Program& p : programs_)
    if (p.spec->per_layer) update_program(p);
  up_.strategy = strategies_in_use();
  ph_.weight_update_s += t.seconds();
}

std::string AneBlocksBase::strategies_in_use() const {
  std::vector<std::string> names;
  for (const Program& p : programs_) {
    if (!p.spec->per_layer) continue;
    std::string n = runtime::strategy_name(p.strategy);
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  }
  return fmt::format("{}", fmt::join(names, "+"));
}

std::string AneBlocksBase::progress() {
  const double steps = double(std::max<int64_t>(1, ph_.steps - shown_.steps));
  auto ms = [&](double now, double before) { return 1000.0 * (now - before) / steps; };
  std::string s = fmt::format(
      "ane {:.0f} | copies {:.0f} | dW {:.0f} (waited {:.0f}) | cpu {:.0f} | adam {:.0f} | update {:.0f} ({}) | compile {:.0f} ms/step | "
      "predicted ANE {:.1f} ms/step",
      ms(ph_.ane_eval_s, shown_.ane_eval_s), ms(ph_.surface_copy_s, shown_.surface_copy_s),
      ms(ph_.cpu_dw_s, shown_.cpu_dw_s), ms(ph_.dw_wait_s, shown_.dw_wait_s), ms(ph_.cpu_other_s, shown_.cpu_other_s),
      ms(ph_.optimizer_s, shown_.optimizer_s), ms(ph_.weight_update_s, shown_.weight_update_s), up_.strategy,
      ms(ph_.compile_s, shown_.compile_s), (ph_.predicted_ane_ms - shown_.predicted_ane_ms) / steps);
  shown_ = ph_;
  return s;
}

// --- norm weight gradients -------------------------------------------------------------------------

void rmsnorm_weight_grad(float* dw, const float* dxnorm, const float* x, int N, int C, float eps) {
  for (int n = 0; n < N; n++) {
    const float* xn = x + size_t(n) * C;
    const float* d = dxnorm + size_t(n) * C;
    double ss = 0;
    for (int c = 0; c < C; c++) ss += double(xn[c]) * xn[c];
    const float r = float(1.0 / std::sqrt(ss / C + eps));
    for (int c = 0; c < C; c++) dw[c] += d[c] * xn[c] * r;
  }
}

void layernorm_weight_grad(float* dw, float* db, const float* dxnorm, const float* x, int N, int C, float eps) {
  for (int n = 0; n < N; n++) {
    const float* xn = x + size_t(n) * C;
    const float* d = dxnorm + size_t(n) * C;
    double mean = 0, var = 0;
    for (int c = 0; c < C; c++) mean += xn[c];
    mean /= C;
    for (int c = 0; c < C; c++) var += (xn[c] - mean) * (xn[c] - mean);
    const double r = 1.0 / std::sqrt(var / C + eps);
    for (int c = 0; c < C; c++) {
      dw[c] += d[c] * float((xn[c] - mean) * r);
      db[c] += d[c];
    }
  }
}

}  // namespace ane
}  // namespace orion::train
