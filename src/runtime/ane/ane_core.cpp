// AneDriver: see ane_core.h.
#include "runtime/ane/ane_core.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "base/file.h"

namespace orion::runtime::ane {

struct AneDriver::State {
  std::shared_ptr<Framework> framework;
  ModelDirUsers dirs;
};

class AneDriver::Program final : public DriverProgram {
 public:
  Program(std::shared_ptr<State> state, std::string name, std::string mil_text, IoPlan io, ModelDir dir,
          std::vector<std::string> weight_keys, std::unique_ptr<FrameworkModel> model)
      : state_(std::move(state)),
        name_(std::move(name)),
        mil_text_(std::move(mil_text)),
        io_(std::move(io)),
        dir_(std::move(dir)),
        weight_keys_(std::move(weight_keys)),
        model_(std::move(model)),
        input_names_(io_.inputs.names()),
        output_names_(io_.outputs.names()) {}
  ~Program() override {
    if (loaded_) (void)model_->unload(kQoS);  // nothing to report to from a destructor
    model_.reset();
    if (state_->dirs.release(dir_.root)) remove_model_dir(dir_);
  }

  const std::string& name() const override { return name_; }
  bool loaded() const override { return loaded_; }
  const std::vector<std::string>& input_names() const override { return input_names_; }
  const std::vector<std::string>& output_names() const override { return output_names_; }

  std::shared_ptr<State> state_;
  std::string name_;
  std::string mil_text_;  // as the caller gave it (unsalted): a delta reload makes a new model of it
  IoPlan io_;
  ModelDir dir_;
  std::vector<std::string> weight_keys_;
  std::unique_ptr<FrameworkModel> model_;
  std::vector<std::string> input_names_, output_names_;
  bool loaded_ = false;
};

AneDriver::AneDriver(std::shared_ptr<Framework> framework, const DriverOptions& options)
    : chip_(options.chip ? options.chip : &compiler::default_chip()), state_(std::make_shared<State>()) {
  ORION_CHECK(framework != nullptr, "AneDriver needs a framework");
  state_->framework = std::move(framework);
}

AneDriver::~AneDriver() = default;

const DriverCounters& AneDriver::counters() const {
  counters_.compiles = state_->framework->compile_attempts;  // other drivers of the process count too
  return counters_;
}

std::string AneDriver::salted(const std::string& mil_text) const {
  return with_build_info_entry(mil_text, kModelSaltKey, state_->framework->next_model_salt());
}

AneDriver::Program& AneDriver::own(DriverProgram& p) {
  auto* prog = dynamic_cast<Program*>(&p);
  if (!prog || prog->state_ != state_)
    throw_usage_error(fmt::format("program '{}' was not compiled by this ane driver", p.name()), "program",
                      "a program can only be used by the driver that compiled it");
  return *prog;
}

std::unique_ptr<DriverProgram> AneDriver::compile(const std::string& mil_text, const WeightDict& weights,
                                                  const std::string& name) {
  check_mil_utf8(mil_text, name);                                         // C19: UTF-8 bytes
  IoPlan io = plan_io(mil_text, weights, *chip_, name);                   // C6 bindings; parser errors → CompileFailed
  std::vector<WeightEntry> entries = plan_weight_entries(weights, name);  // C19: empty dict when none

  const int attempt = ++state_->framework->compile_attempts;  // C9: every attempt counts against the process's budget
  // A model of its own, in a folder of its own (kModelSaltKey, ane_plan.h).
  const std::string model_mil = salted(mil_text);
  std::unique_ptr<FrameworkModel> model = state_->framework->create_model(model_mil, entries);
  if (!model) {
    counters_.failed_compiles++;
    throw framework_error(Phase::Compile, name, "the framework refused to create the in-memory model", *chip_, attempt);
  }

  // The framework compiles from <tmp>/<hexStringIdentifier>/: model.mil and weights/<file>.bin.
  ModelDir dir = model_dir_layout(state_->framework->temp_dir(), model->hex_identifier());
  state_->dirs.acquire(dir.root);
  auto release = [&] {
    if (state_->dirs.release(dir.root)) remove_model_dir(dir);
  };
  try {
    write_model_dir(dir, model_mil, entries);
  } catch (...) {
    counters_.failed_compiles++;
    release();
    throw;
  }
  CallResult r = model->compile(kQoS);
  if (!r.ok) {
    counters_.failed_compiles++;
    model.reset();
    release();
    throw framework_error(Phase::Compile, name, r.error, *chip_, attempt);
  }
  std::vector<std::string> keys;
  for (const WeightEntry& e : entries) keys.push_back(e.key);
  return std::make_unique<Program>(state_, name, mil_text, std::move(io), std::move(dir), std::move(keys),
                                   std::move(model));
}

void AneDriver::load(DriverProgram& dp) {
  Program& p = own(dp);
  if (p.loaded_) return;
  CallResult r;
  for (int attempt = 0; attempt < kLoadAttempts; attempt++) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(kLoadRetryDelayMs));
    r = p.model_->load(kQoS);
    if (r.ok) break;
  }
  if (!r.ok) throw framework_error(Phase::Load, p.name_, r.error, *chip_, counters().compiles);
  p.loaded_ = true;
  counters_.loads++;
}

void AneDriver::unload(DriverProgram& dp) {
  Program& p = own(dp);
  if (!p.loaded_) return;
  KeptModelDir kept(p.dir_);  // the framework's unload may remove the folder a later load reads
  CallResult r = p.model_->unload(kQoS);
  p.loaded_ = false;  // whatever the answer, the program must be loaded again before use
  counters_.unloads++;
  kept.restore();
  if (!r.ok) throw framework_error(Phase::Unload, p.name_, r.error, *chip_, counters().compiles);
}

namespace {

// The weight files of a model folder, by dictionary key.
WeightDict read_weight_files(const ModelDir& dir, const std::vector<std::string>& keys) {
  WeightDict out;
  for (const std::string& key : keys) {
    const std::string bytes = read_text_file(dir.root + "/" + key.substr(std::strlen(kModelPathPrefix)));
    out[key] = std::vector<uint8_t>(bytes.begin(), bytes.end());
  }
  return out;
}

// The folder's compiled `data` file with `before`'s values replaced by `after`'s (patch_compiled_data).
std::string patched_data_file(const ModelDir& dir, const std::vector<WeightEntry>& before,
                              const std::vector<WeightEntry>& after, const std::string& program) {
  const std::string path = dir.root + "/" + kCompiledDataFileName;
  if (!file_exists(path))
    throw DriverError(DriverStatus::LoadFailed,
                      fmt::format("program '{}': the framework left no compiled data file at {}", program, path),
                      "update the weights by recompiling or with weights as inputs");
  return patch_compiled_data(read_text_file(path), before, after, program);
}

}  // namespace

// C10 (ane_plan.h): a new descriptor and model for the new weights, in a folder of their own (a new
// salt) that holds model.mil, weights/ and the compiled `data` file patched with the new values; the
// next load loads that model without compiling. A decompiled framework's unload removes its model's
// folder (docs/reliability.md): unload() keeps the folder's files across it (KeptModelDir), and the
// old folder is read here before this function's own unload.
void AneDriver::replace_weight_files(DriverProgram& dp, const WeightDict& weights) {
  Program& p = own(dp);
  std::vector<WeightEntry> changed = plan_weight_entries(weights, p.name_);
  for (const WeightEntry& e : changed)
    if (std::find(p.weight_keys_.begin(), p.weight_keys_.end(), e.key) == p.weight_keys_.end())
      throw_usage_error(fmt::format("program '{}' has no weight file '{}'", p.name_, e.key), "weights",
                        fmt::format("its weight files: {}", fmt::join(p.weight_keys_, ", ")));
  // Every weight file, old and new (a file the caller left out keeps its value).
  const WeightDict current = read_weight_files(p.dir_, p.weight_keys_);
  WeightDict next = current;
  for (const WeightEntry& e : changed) next[e.key] = *e.data;
  const std::vector<WeightEntry> after = plan_weight_entries(next, p.name_);
  const std::string data = patched_data_file(p.dir_, plan_weight_entries(current, p.name_), after, p.name_);
  unload(p);  // a no-op when the caller unloaded it already

  const std::string model_mil = salted(p.mil_text_);
  std::unique_ptr<FrameworkModel> model = state_->framework->create_model(model_mil, after);
  if (!model)
    throw framework_error(Phase::Load, p.name_, "the framework refused to create the in-memory model", *chip_,
                          counters().compiles);
  ModelDir dir = model_dir_layout(state_->framework->temp_dir(), model->hex_identifier());
  state_->dirs.acquire(dir.root);
  try {
    write_model_dir(dir, model_mil, after);
    write_file_atomic(dir.root + "/" + kCompiledDataFileName, [&](FileWriter& w) { w.write_str(data); });
  } catch (...) {
    if (state_->dirs.release(dir.root)) remove_model_dir(dir);
    throw;
  }
  p.model_ = std::move(model);
  if (state_->dirs.release(p.dir_.root)) remove_model_dir(p.dir_);
  p.dir_ = dir;
}

void AneDriver::evaluate(DriverProgram& dp, const std::vector<Surface*>& inputs, const std::vector<Surface*>& outputs) {
  Program& p = own(dp);
  if (!p.loaded_)
    throw DriverError(DriverStatus::EvalFailed, fmt::format("program '{}' is not loaded", p.name_),
                      "load the program before evaluating it");
  auto sizes = [](const std::vector<Surface*>& v) {
    std::vector<size_t> s;
    for (const Surface* x : v) {
      ORION_CHECK(x != nullptr, "null surface");
      s.push_back(x->alloc_bytes());
    }
    return s;
  };
  check_surfaces(p.io_, sizes(inputs), sizes(outputs), *chip_, p.name_);  // C5 C7 C13 C14
  CallResult r = p.model_->evaluate(kQoS, inputs, request_indices(p.io_.inputs), outputs,
                                    request_indices(p.io_.outputs));  // C6
  if (!r.ok) throw framework_error(Phase::Evaluate, p.name_, r.error, *chip_, counters().compiles);
  counters_.evaluations++;
}

}  // namespace orion::runtime::ane
