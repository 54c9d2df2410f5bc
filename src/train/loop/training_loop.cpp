// The training loop proper: guarded steps, evaluation, metrics, checkpoints, signals, export.
#include "train/loop/training_loop.h"

#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/file.h"
#include "base/timer.h"
#include "data/token_dataset.h"
#include "train/ane/ane_blocks.h"
#include "train/dist/communicator.h"
#include "train/dist/data_parallel.h"
#include "train/model/guards.h"
#include "train/model/trainer_api.h"

namespace orion::train {
namespace fs = std::filesystem;

namespace {

// Ctrl-C (or SIGUSR1) during run(): finish the current step, write a checkpoint, stop.
std::atomic<bool> g_interrupted{false};
extern "C" void on_interrupt(int) { g_interrupted = true; }

constexpr const char* kCsvHeader = "step,loss,lr,grad_norm,ms,skipped,val_loss";
bool is_csv(const std::string& path) { return path.ends_with(".csv"); }

// A resumed run drops the metrics of steps after its checkpoint (they are about to be redone).
void trim_metrics(const std::string& path, int64_t last_step) {
  if (!file_exists(path)) return;
  std::stringstream in(read_text_file(path));
  std::string kept, line;
  while (std::getline(in, line)) {
    if (is_csv(path)) {  // the header, and rows whose first field (the step) is at most last_step
      if (line == kCsvHeader || std::strtoll(line.c_str(), nullptr, 10) <= last_step) kept += line + "\n";
      continue;
    }
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.value("step", int64_t(0)) <= last_step) kept += line + "\n";
  }
  write_file_atomic(path, [&](FileWriter& w) { w.write_str(kept); });
}

}  // namespace

void report_note(const TrainOptions& opt, const std::string& line) {
  if (!opt.progress || !opt.on_progress) return;
  ProgressEvent e;
  e.options = &opt, e.text = line;
  opt.on_progress(e);
}

TrainingData open_training_data(const std::string& path, const TrainOptions& opt, dist::Communicator& comm, int vocab_size,
                                const std::string& who) {
  data::DatasetOptions d;
  d.B = opt.batch, d.T = opt.seq, d.shuffle = opt.shuffle, d.seed = opt.seed, d.vocab_size = vocab_size;
  d.rank = comm.rank(), d.world = comm.world();  // this rank's rows of every global batch
  TrainingData out;
  out.train = std::make_unique<data::TokenDataset>(data::TokenDataset::open(path, "train", d));
  if (is_directory(path)) {
    d.shuffle = false;
    try {
      out.val = std::make_unique<data::TokenDataset>(data::TokenDataset::open(path, "val", d));
    } catch (const Error& e) {
      report_note(opt, fmt::format("{}: no validation loss: {}", who, e.what()));
    }
  }
  return out;
}

TrainingLoop::TrainingLoop(TrainOptions& opt, dist::Communicator& comm, TrainModel& model, TrainableSet& trained,
                           data::TokenDataset& train, data::TokenDataset* val, CheckpointState& state)
    : opt_(opt),
      comm_(comm),
      model_(model),
      trained_(trained),
      train_(train),
      val_(val),
      state_(state),
      scaler_(LossScaler::parse(opt.loss_scale_mode(), opt.loss_scale_window)),
      precision_before_(cpu::train_gemm_precision()) {
  cpu::set_train_gemm_precision(opt.gemm_precision());
  scaler_.restore(state.loss_scale, state.loss_scale_clean_steps);
}

TrainingLoop::~TrainingLoop() { cpu::set_train_gemm_precision(precision_before_); }

bool TrainingLoop::unscale_gradients(size_t repaired_before) {
  const bool finite = unscale_and_check(trained_.grads(), trained_.size(), scaler_.scale());
  return finite && (!ane || ane->sanitized() == repaired_before);
}

bool TrainingLoop::reporting() const { return opt_.progress && opt_.on_progress; }

void TrainingLoop::emit(ProgressEvent e) const {
  if (!reporting()) return;
  e.options = &opt_;
  opt_.on_progress(e);
}

StepStats TrainingLoop::step() {
  Timer timer;
  // This rank's rows of the step's micro-batches.
  std::vector<data::Batch> batches;
  for (int a = 0; a < opt_.accum; ++a) batches.push_back(train_.next());
  return step_batches(batches, timer);
}

StepStats TrainingLoop::step_on(const std::vector<data::Batch>& batches) {
  for (const data::Batch& b : batches)
    if (b.B != opt_.batch || b.T != opt_.seq || b.inputs.size() != size_t(b.B) * size_t(b.T) ||
        b.targets.size() != b.inputs.size())
      throw_usage_error(fmt::format("a batch must be {} rows of {} tokens (--batch × --seq), not {} × {}", opt_.batch,
                                    opt_.seq, b.B, b.T),
                        "batch");
  if (batches.empty()) throw_usage_error("a step needs at least one batch", "batch");
  return step_batches(batches, Timer());
}

StepStats TrainingLoop::step_batches(const std::vector<data::Batch>& batches, const Timer& timer) {
  StepStats s;
  s.step = state_.step;
  s.lr = opt_.lr_at(state_.step);
  trained_.zero_grads();
  // With several ranks each micro-batch's loss and gradient are weighted by this rank's share of
  // its counted targets (dist/data_parallel.h).
  const int accum = int(batches.size());
  std::vector<int64_t> counts;
  for (const data::Batch& b : batches) counts.push_back(dist::counted_targets(b.targets));
  const std::vector<double> weight = dist::micro_batch_weights(comm_, counts);
  double loss_sum = 0;
  bool finite = true;
  // Loss scaling: the backward starts from scale·∂loss, the gradients are divided back below.
  const float loss_scale = scaler_.enabled() ? scaler_.scale() : 1.0f;
  const size_t repaired_before = ane ? ane->sanitized() : 0;
  s.loss_scale = scaler_.enabled() ? loss_scale : 0.0f;
  for (int a = 0; a < accum; ++a) {  // gradient accumulation: grads average over the micro-batches
    const data::Batch& b = batches[size_t(a)];
    const float loss = model_.forward(b.inputs.data(), b.targets.data());
    loss_sum += weight[size_t(a)] * loss;
    finite = finite && std::isfinite(loss);
    if (finite && !scaler_.enabled()) model_.backward(float(weight[size_t(a)]) * (1.0f / float(accum)));
    if (finite && scaler_.enabled()) model_.backward(float(weight[size_t(a)]) * (1.0f / float(accum)) * loss_scale);
  }
  if (finite) trained_.gradients_done();
  if (comm_.world() > 1) {  // the global loss (a NaN on any rank makes every rank skip the step)
    Timer comm_timer;
    double total[2] = {loss_sum, finite ? 0.0 : 1.0};
    comm_.allreduce_sum(total, 2);
    loss_sum = total[0] / comm_.world(), finite = total[1] == 0;
    s.comm_seconds += comm_timer.seconds();
  }
  s.loss = float(loss_sum / accum);
  if (after_backward) after_backward(state_.step);
  if (comm_.world() > 1 && finite) {  // every rank ends with the same mean gradient of what is trained
    Timer comm_timer;
    dist::allreduce_mean(comm_, trained_.grads(), trained_.size());
    s.comm_seconds += comm_timer.seconds();
  }
  if (finite && scaler_.enabled()) finite = unscale_gradients(repaired_before);
  if (finite && opt_.sanitize_grads) s.sanitized = sanitize_fp16(trained_.grads(), trained_.size());
  // The guard: a non-finite loss or gradient never reaches the trained values or AdamW's moments.
  const double gnorm = finite ? trained_.grad_norm() : NAN;
  s.grad_norm = float(gnorm);
  s.skipped = !std::isfinite(s.loss) || !std::isfinite(s.grad_norm);
  if (scaler_.enabled()) scaler_.update(!s.skipped);  // a dynamic scale halves on a skip, grows when clean
  if (scaler_.mode() == LossScaler::Mode::Dynamic)
    state_.loss_scale = scaler_.scale(), state_.loss_scale_clean_steps = scaler_.clean_steps();
  if (!s.skipped) {
    trained_.update(s.lr, gnorm);
    consecutive_bad_ = 0;
  } else {
    ++state_.skipped_steps;
    if (!scaler_.overflow_is_recoverable()) ++consecutive_bad_;  // a smaller scale may fix it: not bad yet
  }
  ++state_.step;
  state_.data_position = train_.position();
  state_.adam_steps = trained_.adam_steps();
  s.seconds = timer.seconds();
  if (consecutive_bad_ >= opt_.max_bad_steps)
    throw_runtime_error(
        fmt::format("{} consecutive steps had a non-finite loss or gradient (the last: step {}, loss {}, gradient norm {}); "
                    "stopped without writing them",
                    consecutive_bad_, state_.step, s.loss, s.grad_norm),
        last_checkpoint_.empty() ? opt_.out : last_checkpoint_,
        "lower --lr, keep --clip on, or check the data; --resume continues from the last good checkpoint");
  return s;
}

float TrainingLoop::evaluate() {
  if (!val_) return -1;
  const uint64_t n = std::min<uint64_t>(uint64_t(std::max(1, opt_.eval_batches)), val_->batches_per_epoch());
  std::vector<float> losses;
  std::vector<int64_t> counts;
  for (uint64_t i = 0; i < n; ++i) {  // always the same first batches: comparable across steps and runs
    data::Batch b = val_->batch(i);   // with several ranks: this rank's rows of the global batch i
    losses.push_back(model_.forward(b.inputs.data(), b.targets.data()));
    counts.push_back(dist::counted_targets(b.targets));
  }
  const std::vector<double> weight = dist::micro_batch_weights(comm_, counts);  // as in step()
  double sum = 0;
  for (uint64_t i = 0; i < n; ++i) sum += weight[i] * losses[i];
  comm_.allreduce_sum(&sum, 1);
  return float(sum / comm_.world() / double(n));
}

std::string TrainingLoop::save() {
  // Collective: the ranks' trained values must still be the same bits (dist/communicator.h).
  if (comm_.world() > 1)
    dist::check_ranks_agree(comm_,
                            {{fmt::format("{} after step {}", trained_.name(), state_.step), trained_.values_hash()}});
  if (comm_.rank() != 0) return "";  // rank 0 alone writes
  last_checkpoint_ = trained_.save_checkpoint(opt_.checkpoint_dir(), state_, opt_.keep);
  return last_checkpoint_;
}

void TrainingLoop::append_metrics(const StepStats& s, float val) {
  if (comm_.rank() != 0) return;
  const std::string path = opt_.metrics_path();
  if (is_csv(path)) {  // floats in their shortest round-trip form; val_loss empty when not evaluated
    const bool fresh = !file_exists(path) || read_text_file(path).empty();
    std::ofstream f(path, std::ios::app);
    if (fresh) f << kCsvHeader << "\n";
    f << fmt::format("{},{},{},{},{:.3f},{},{}\n", state_.step, s.loss, s.lr, s.grad_norm, s.seconds * 1000.0,
                     s.skipped ? 1 : 0, val >= 0 ? fmt::format("{}", val) : "");
    return;
  }
  nlohmann::json j = {{"step", state_.step},      {"loss", s.loss},           {"lr", s.lr},
                      {"grad_norm", s.grad_norm}, {"ms", s.seconds * 1000.0}, {"skipped", s.skipped}};
  // Tokens the step trained on, over every rank: what a reader of this file needs for tokens/s.
  j["tokens"] = int64_t(opt_.batch) * opt_.seq * opt_.accum * comm_.world();
  if (val >= 0) j["val_loss"] = val;
  if (s.loss_scale > 0) j["loss_scale"] = s.loss_scale;
  // The floats are stored as doubles and printed to round-trip: losses compare bit for bit after a
  // resume. Non-finite values print as null.
  std::ofstream(path, std::ios::app) << j.dump() << "\n";
}

void TrainingLoop::report_start() {
  ProgressEvent e;
  e.kind = ProgressEvent::Kind::Start;
  e.text = what;
  e.train_tokens = train_.total_tokens(), e.batches_per_epoch = train_.batches_per_epoch();
  e.val_tokens = val_ ? int64_t(val_->total_tokens()) : -1;
  e.world = comm_.world(), e.comm = comm_.world() > 1 ? comm_.describe() : "";
  e.first_step = state_.step;
  emit(std::move(e));
}

void TrainingLoop::report_step(const StepStats& s, float val) {
  if (!reporting()) return;
  ProgressEvent e;
  e.kind = ProgressEvent::Kind::Step;
  e.stats = s, e.done = state_.step, e.skipped_total = state_.skipped_steps, e.val_loss = val;
  e.run_steps = run_steps_, e.run_seconds = run_seconds_, e.world = comm_.world();
  e.phases = [this] { return model_.blocks().progress(); };
  if (ane) e.compiles = int64_t(ane->driver().counters().compiles);
  emit(std::move(e));
}

// With several ranks, every rank stops after the same step.
bool TrainingLoop::interrupted() {
  double any = g_interrupted ? 1 : 0;
  if (comm_.world() > 1) comm_.allreduce_sum(&any, 1);
  return any > 0;
}

TrainResult TrainingLoop::run() {
  TrainResult r;
  if (comm_.rank() == 0) trim_metrics(opt_.metrics_path(), state_.step);
  report_start();
  g_interrupted = false;
  auto previous = std::signal(SIGINT, on_interrupt);
  // Under mpirun, Ctrl-C ends the job at once; mpirun forwards SIGUSR1 to every rank instead
  // (docs/distributed.md), so SIGUSR1 is the clean stop of a data-parallel run.
  auto previous_usr1 = std::signal(SIGUSR1, on_interrupt);
  Timer total;
  double comm_seconds = 0;
  while (state_.step < opt_.steps && (opt_.stop_after <= 0 || run_steps_ < opt_.stop_after) && !interrupted()) {
    StepStats s = step();
    comm_seconds += s.comm_seconds, run_seconds_ += s.seconds, ++run_steps_;
    const int64_t done = state_.step;
    float val = -1;
    if (done == opt_.steps || (opt_.eval_every > 0 && done % opt_.eval_every == 0)) val = evaluate();
    if (val >= 0) r.val_loss = val;
    report_step(s, val);
    append_metrics(s, val);
    if (val >= 0 && done < opt_.steps && sample && opt_.sample_tokens > 0 && reporting())
      emit({.kind = ProgressEvent::Kind::Sample, .text = sample(std::min(opt_.sample_tokens, 32))});
    if (run_steps_ == 1) r.first_loss = s.loss;
    r.last_loss = s.loss;
    if (opt_.checkpoint_every > 0 && done % opt_.checkpoint_every == 0 && done < opt_.steps) save();
  }
  std::signal(SIGINT, previous);
  std::signal(SIGUSR1, previous_usr1);
  if (g_interrupted) emit({.kind = ProgressEvent::Kind::Interrupted});
  r.checkpoint = save();
  r.steps_done = state_.step;
  r.skipped_steps = state_.skipped_steps;
  r.seconds = total.seconds();
  const double tokens_per_step = double(opt_.batch) * opt_.seq * opt_.accum * comm_.world();  // every rank's rows
  r.tokens_per_second = run_seconds_ > 0 ? tokens_per_step * double(run_steps_) / run_seconds_ : 0;
  r.world = comm_.world();
  if (run_steps_ > 0) r.bytes_reduced_per_step = comm_.stats.bytes_reduced / uint64_t(run_steps_);
  r.comm_share = run_seconds_ > 0 ? comm_seconds / run_seconds_ : 0;
  r.tokenizer = state_.tokenizer;
  if (state_.step >= opt_.steps) {
    r.model = trained_.export_result();
    if (sample && opt_.sample_tokens > 0 && reporting())
      emit({.kind = ProgressEvent::Kind::Sample, .text = sample(opt_.sample_tokens), .final = true});
  }
  ProgressEvent done{.kind = ProgressEvent::Kind::Done};
  done.run_steps = run_steps_, done.world = r.world, done.result = &r;
  emit(std::move(done));
  return r;
}

}  // namespace orion::train
