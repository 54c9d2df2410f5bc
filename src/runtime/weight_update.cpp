// Weight updates: three strategies behind update_weights, each verified against a CPU reference.
#include "runtime/weight_update.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>

#include "base/dtype.h"
#include "base/error.h"
#include "base/timer.h"
#include "compiler/compile.h"
#include "runtime/fp16_span.h"

namespace orion::runtime {

const char* strategy_name(UpdateStrategy s) {
  switch (s) {
    case UpdateStrategy::Auto: return "auto";
    case UpdateStrategy::DeltaReload: return "delta-reload";
    case UpdateStrategy::WeightsAsInputs: return "weights-as-inputs";
    case UpdateStrategy::Recompile: return "recompile";
  }
  return "?";
}

// ---- UpdatableKernel --------------------------------------------------------------------------

UpdatableKernel::UpdatableKernel(Driver& driver, CompileBudget& budget, ir::Graph g, Mode mode)
    : own_cache_(std::make_unique<ProgramCache>(driver, budget)),
      cache_(*own_cache_),
      key_{"", g.name()},
      graph_(std::move(g)),
      mode_(mode) {
  compile_first();
}

UpdatableKernel::UpdatableKernel(ProgramCache& cache, ProgramKey key, ir::Graph g, Mode mode)
    : cache_(cache), key_(std::move(key)), graph_(std::move(g)), mode_(mode) {
  compile_first();
}

// Baked weights are constants; streamed ones wait in their resident surfaces (stream_weights_of).
TensorMap UpdatableKernel::run(const TensorMap& inputs) { return kernel_->run(inputs); }

void UpdatableKernel::stream_weights(const ir::Graph& g) {
  ORION_CHECK(mode_ == Mode::WeightsAsInputs, "stream_weights on a kernel with baked weights");
  stream_weights_of(g);
  graph_ = g;
}

uint16_t* UpdatableKernel::weight_data(size_t i) {
  ORION_CHECK(mode_ == Mode::WeightsAsInputs && i < weight_data_.size(), "weight_data({}) of a kernel streaming {} weights",
              i, weight_data_.size());
  return weight_data_[i];
}

void UpdatableKernel::compile_first() {
  if (mode_ == Mode::BakedWeights) compile_baked(graph_);
  else compile_weights_as_inputs(graph_);
}

void UpdatableKernel::compile(const ir::Graph& program) {
  ProgramKey next = key_;
  if (kernel_) next.weights_version++;
  kernel_ = cache_.get(next, [&] { return program; });  // the old program is unloaded as it is replaced
  key_ = std::move(next);
}

void UpdatableKernel::compile_baked(const ir::Graph& g) {
  compile(g);
  mode_ = Mode::BakedWeights;
  weight_inputs_.clear();
  weight_data_.clear();
}

void UpdatableKernel::compile_weights_as_inputs(const ir::Graph& g) {
  ir::Graph streamed = g;
  std::vector<WeightInput> weights = weights_to_inputs(streamed, {.chip = &driver().chip()});
  compile(streamed);
  mode_ = Mode::WeightsAsInputs;
  weight_inputs_ = std::move(weights);
  stream_weights_of(g);
}

// Every tensor is checked before any surface is written: a graph of another structure changes nothing.
void UpdatableKernel::stream_weights_of(const ir::Graph& g) {
  std::vector<ir::Tensor32> tensors;
  for (const WeightInput& w : weight_inputs_) {
    const int i = g.find(w.name);
    if (i < 0)
      throw Error(ErrorKind::Input, fmt::format("the new graph has no weight '{}'", w.name),
                  {{}, w.name, -1, "weights as inputs keep the kernel's structure: rebuild it for a new one"});
    tensors.push_back(weight_input_tensor(w, g.node(i)));
  }
  weight_data_.clear();
  for (size_t k = 0; k < tensors.size(); k++) {
    weight_data_.push_back(kernel_->resident_input(weight_inputs_[k].name));
    f32_to_f16_span(weight_data_.back(), tensors[k].data.data(), tensors[k].numel());
  }
}

// ---- the strategies -----------------------------------------------------------------------------

class WeightUpdater {
 public:
  WeightUpdater(UpdatableKernel& k, const ir::Graph& g) : k_(k), g_(g) {}

  void apply(UpdateStrategy s) {
    switch (s) {
      case UpdateStrategy::DeltaReload: delta_reload(); break;
      case UpdateStrategy::WeightsAsInputs: weights_as_inputs(); break;
      case UpdateStrategy::Recompile: k_.compile_baked(g_); break;
      case UpdateStrategy::Auto: ORION_CHECK(false, "Auto is a sequence of strategies, not one");
    }
    k_.graph_ = g_;
  }

 private:
  // Only the weight files may differ: the new graph must emit the very same MIL text.
  void delta_reload() {
    if (k_.mode_ != UpdatableKernel::Mode::BakedWeights)
      throw_runtime_error("the kernel streams its weights as inputs; it has no weight files to reload");
    ir::Graph work = g_;
    compiler::CompileResult r = compiler::compile_graph(work, k_.driver().chip());
    if (r.program.mil_text != k_.kernel_->program().mil_text)
      throw_runtime_error("the new graph is not the same program with other weights (its MIL text differs)");
    k_.kernel_->reload_weights(r.program.weights);
  }

  // A kernel already streaming weights of the same layout only needs new tensors; otherwise the
  // weights-as-inputs program is compiled (once).
  void weights_as_inputs() {
    if (k_.mode_ == UpdatableKernel::Mode::WeightsAsInputs && same_streamed_program()) {
      k_.stream_weights_of(g_);
      return;
    }
    k_.compile_weights_as_inputs(g_);
  }

  bool same_streamed_program() const {
    ir::Graph streamed = g_;
    std::vector<WeightInput> w = weights_to_inputs(streamed, {.chip = &k_.driver().chip()});
    if (w.size() != k_.weight_inputs_.size()) return false;
    for (size_t i = 0; i < w.size(); i++)
      if (w[i].name != k_.weight_inputs_[i].name || w[i].declared != k_.weight_inputs_[i].declared) return false;
    return compiler::compile_graph(streamed, k_.driver().chip()).program.mil_text == k_.kernel_->program().mil_text;
  }

  UpdatableKernel& k_;
  const ir::Graph& g_;
};

namespace {

TensorMap random_probe(const ir::Graph& g) {
  std::mt19937 rng(20240611);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  TensorMap probe;
  for (int i : g.input_nodes()) {
    ir::Tensor32 t(g.node(i).results[0].shape);
    for (float& x : t.data) x = u(rng);
    probe[g.node(i).name] = std::move(t);
  }
  return probe;
}

// a − b, output by output (the outputs of a; b has the same names and shapes).
TensorMap difference(const TensorMap& a, const TensorMap& b) {
  TensorMap d;
  for (const auto& [name, t] : a) {
    ir::Tensor32 x = t;
    const ir::Tensor32& y = b.at(name);
    for (size_t i = 0; i < x.data.size(); i++) x.data[i] -= y.data[i];
    d[name] = std::move(x);
  }
  return d;
}

// The largest relative error over the outputs (infinity for a missing output or a NaN).
double probe_error(const TensorMap& got, const TensorMap& want) {
  double worst = 0;
  for (const auto& [name, ref] : want) {
    auto it = got.find(name);
    if (it == got.end() || it->second.data.size() != ref.data.size()) return std::numeric_limits<double>::infinity();
    double err = 0, scale = 1;
    for (size_t i = 0; i < ref.data.size(); i++) {
      const double d = std::fabs(double(it->second.data[i]) - double(ref.data[i]));
      err = std::isnan(d) ? std::numeric_limits<double>::infinity() : std::max(err, d);
      scale = std::max(scale, std::fabs(double(ref.data[i])));
    }
    worst = std::max(worst, err / scale);
  }
  return worst;
}

// The spacing of fp16 values around x: what one rounding of an output can move it by.
double fp16_step(double x) {
  const double a = std::fabs(x);
  return a < 0x1p-14 ? 0x1p-24 : std::ldexp(1.0, std::ilogb(a) - 10);
}

// Whether the kernel's outputs moved the way the update moves them (see Verification). `expected`
// is the reference's change (new − old weights, both in fp32 on the CPU), `got` the kernel's
// (after − before, same probe). Returns "" when they agree, else what is wrong.
//   - An update no output can show (every expected change under one fp16 step): nothing to check.
//   - A kernel whose outputs did not move at all while the update moves some output by more than
//     one fp16 step did not take the update: the reload left the old weights (C10).
//   - When the change stands above fp16 noise as a whole (its energy above one fp16 step per
//     output), the kernel's change must carry at least half of it along the expected direction.
std::string small_change_problem(const TensorMap& expected, const TensorMap& got, const TensorMap& reference) {
  double dot = 0, energy = 0, noise = 0, largest = 0;
  bool visible = false, moved = false;
  for (const auto& [name, e] : expected) {
    const ir::Tensor32 &g = got.at(name), &ref = reference.at(name);
    for (size_t i = 0; i < e.data.size(); i++) {
      const double de = e.data[i], dg = g.data[i], step = fp16_step(ref.data[i]);
      dot += de * dg, energy += de * de, noise += step * step;
      visible = visible || std::fabs(de) > step;
      moved = moved || dg != 0;
      largest = std::max(largest, std::fabs(de));
    }
  }
  if (!visible) return "";
  if (!moved)
    return fmt::format("outputs unchanged by an update that moves them by up to {:.3g}; the old weights are in use", largest);
  const double along = dot / energy;
  if (energy >= noise && along < 0.5)
    return fmt::format("outputs moved {:.2f} of the update's change along it (at least 0.5 expected)", along);
  return "";
}

// The strategies to try, in order, when `s` is asked for on a kernel in `mode`.
std::vector<UpdateStrategy> strategy_order(UpdateStrategy s, UpdatableKernel::Mode mode) {
  using S = UpdateStrategy;
  if (s == S::Auto) s = mode == UpdatableKernel::Mode::WeightsAsInputs ? S::WeightsAsInputs : S::DeltaReload;
  switch (s) {
    case S::DeltaReload: return {S::DeltaReload, S::WeightsAsInputs, S::Recompile};
    case S::WeightsAsInputs: return {S::WeightsAsInputs, S::Recompile};
    case S::Recompile:
    case S::Auto: break;
  }
  return {S::Recompile};
}

}  // namespace

UpdateResult update_weights(UpdatableKernel& k, const ir::Graph& new_graph, UpdateStrategy strategy,
                            const Verification& verification) {
  Timer t;
  UpdateResult r;
  r.requested = strategy;
  const int compiles_before = k.budget().used();
  const bool verify = verification.enabled || strategy == UpdateStrategy::Auto;
  TensorMap probe, reference, before, expected_change;
  double change = 0;  // how far the new weights move the probe's outputs from what the kernel gives now
  if (verify) {
    probe = verification.probe.empty() ? random_probe(new_graph) : verification.probe;
    reference = verification.reference ? verification.reference(probe) : ir::interpret_named(new_graph, probe);
    before = k.run(probe);
    change = probe_error(before, reference);
    // A change within fp16 noise of the tolerance (one small AdamW step) is checked against the
    // change itself.
    if (change <= verification.tolerance / 4)
      expected_change = difference(verification.reference ? ir::interpret_named(new_graph, probe) : reference,
                                   ir::interpret_named(k.graph(), probe));
  }
  bool accepted = false;
  for (UpdateStrategy s : strategy_order(strategy, k.mode())) {
    try {
      WeightUpdater(k, new_graph).apply(s);
    } catch (const Error& e) {
      r.attempts.push_back(fmt::format("{}: not possible: {}", strategy_name(s), e.message()));
      continue;
    }
    r.used = s;
    if (!verify) {
      accepted = true;
      break;
    }
    // Within tolerance of the new reference — and, when the update moves the outputs by more than
    // fp16 noise (a quarter of the tolerance), nearer the new outputs than the old: a small update
    // (a low learning rate) moves them by less than the tolerance, and a stale kernel, which still
    // gives the old outputs, would otherwise pass.
    const TensorMap after = k.run(probe);
    const double err = probe_error(after, reference);
    const bool moved = change <= verification.tolerance / 4 || err <= change / 2;
    // Only a reload can leave the old weights in place; the other strategies make a new program.
    const std::string small = expected_change.empty() || s != UpdateStrategy::DeltaReload
                                  ? ""
                                  : small_change_problem(expected_change, difference(after, before), reference);
    if (err <= verification.tolerance && moved && small.empty()) {
      r.verified = accepted = true;
      r.max_error = err;
      break;
    }
    r.stale_detected = true;
    const char* kind = s == UpdateStrategy::DeltaReload ? "stale" : "wrong";
    const char* c10 = s == UpdateStrategy::DeltaReload ? "; the hardware kept the compiled weights, C10" : "";
    r.attempts.push_back(
        !small.empty() && err <= verification.tolerance
            ? fmt::format("{}: {} results ({}{})", strategy_name(s), kind, small, c10)
            : fmt::format("{}: {} results (error {:.3g} > {:.3g}{}{})", strategy_name(s), kind, err,
                          moved ? verification.tolerance : change / 2, moved ? "" : ", half the update's change", c10));
  }
  r.compiles = k.budget().used() - compiles_before;
  r.seconds = t.seconds();
  const std::string tried = r.attempts.empty() ? "" : fmt::format("; {}", fmt::join(r.attempts, "; "));
  if (!accepted)
    throw_runtime_error(fmt::format("the weights of '{}' could not be updated: {}", new_graph.name(),
                                    fmt::join(r.attempts, "; ")),
                        {}, "run the kernel on the CPU backend");
  r.message = fmt::format("'{}': weights updated by {} ({}, {} compile{}){}", new_graph.name(), strategy_name(r.used),
                          r.verified ? fmt::format("verified, error {:.3g}", r.max_error) : std::string("not verified"),
                          r.compiles, r.compiles == 1 ? "" : "s", tried);
  // A fallback changes what every later update costs: say so where the user sees it.
  if (!r.attempts.empty()) std::fprintf(stderr, "note: %s\n", r.message.c_str());
  return r;
}

UpdateResult update_weights(UpdatableKernel& k, const TensorMap& new_weights, UpdateStrategy strategy,
                            const Verification& verification) {
  return update_weights(k, with_weights(k.graph(), new_weights), strategy, verification);
}

ir::Graph with_weights(const ir::Graph& g, const TensorMap& weights) {
  ir::Graph out = g;
  for (const auto& [name, t] : weights) {
    const int i = out.find(name);
    if (i < 0 || out.node(i).op != ir::Op::Const)
      throw_usage_error(fmt::format("graph '{}' has no constant '{}'", g.name(), name), name);
    const ir::Type& type = out.node(i).results[0];
    if (t.shape != type.shape)
      throw_usage_error(fmt::format("weight '{}' has shape [{}], the constant is {}", name, fmt::join(t.shape, ", "),
                                    type.str()),
                        name);
    auto data = std::make_shared<ir::ConstData>();
    data->bytes.resize(type.bytes());
    switch (type.elem) {
      case ir::ElemType::F16: convert_dtype(t.data.data(), DType::F32, data->bytes.data(), DType::F16, t.data.size()); break;
      case ir::ElemType::F32: std::memcpy(data->bytes.data(), t.data.data(), type.bytes()); break;
      case ir::ElemType::I32:
      case ir::ElemType::Bool: throw_usage_error(fmt::format("constant '{}' is {}, not a weight", name, type.str()), name);
    }
    out.node_mut(i).data = std::move(data);
  }
  return out;
}

}  // namespace orion::runtime
