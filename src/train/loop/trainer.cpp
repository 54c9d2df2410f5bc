// The training loop proper: guarded steps, evaluation, progress, metrics, checkpoints, export.
#include "train/loop/trainer.h"

#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/file.h"
#include "base/timer.h"
#include "data/progress.h"
#include "data/rng.h"
#include "data/token_dataset.h"
#include "infer/generate.h"
#include "model/family/family.h"
#include "model/io/model_io.h"
#include "model/tokenizer/tokenizer.h"
#include "model/transformer.h"
#include "train/dist/data_parallel.h"
#include "train/model/guards.h"

namespace orion::train {
namespace fs = std::filesystem;

namespace {

// Ctrl-C during run(): finish the current step, write a checkpoint, stop.
std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted = true; }

std::string format_rate(double tok_s) {
  return tok_s >= 1e6 ? fmt::format("{:.2f}M", tok_s / 1e6) : tok_s >= 1e3 ? fmt::format("{:.1f}k", tok_s / 1e3)
                                                                             : fmt::format("{:.0f}", tok_s);
}

}  // namespace

StepStats Trainer::step() {
  Timer timer;
  StepStats s;
  s.step = state_.step;
  s.lr = opt_.lr_at(state_.step);
  model_->zero_grad();
  // This rank's rows of the step's micro-batches; with several ranks each micro-batch's loss and
  // gradient are weighted by this rank's share of its counted targets (dist/data_parallel.h).
  std::vector<data::Batch> batches;
  std::vector<int64_t> counts;
  for (int a = 0; a < opt_.accum; ++a)
    batches.push_back(train_->next()), counts.push_back(dist::counted_targets(batches.back().targets));
  const std::vector<double> weight = dist::micro_batch_weights(*comm_, counts);
  double loss_sum = 0;
  bool finite = true;
  for (int a = 0; a < opt_.accum; ++a) {  // gradient accumulation: grads average over the micro-batches
    const data::Batch& b = batches[size_t(a)];
    const float loss = model_->forward(b.inputs.data(), b.targets.data());
    loss_sum += weight[size_t(a)] * loss;
    finite = finite && std::isfinite(loss);
    if (finite) model_->backward(float(weight[size_t(a)]) * (1.0f / float(opt_.accum)));
  }
  if (comm_->world() > 1) {  // the global loss (a NaN on any rank makes every rank skip the step)
    Timer comm_timer;
    double total[2] = {loss_sum, finite ? 0.0 : 1.0};
    comm_->allreduce_sum(total, 2);
    loss_sum = total[0] / comm_->world(), finite = total[1] == 0;
    s.comm_seconds += comm_timer.seconds();
  }
  s.loss = float(loss_sum / opt_.accum);
  if (after_backward) after_backward(state_.step, *grads_);
  if (comm_->world() > 1 && finite) {  // every rank ends with the same mean gradient
    Timer comm_timer;
    dist::allreduce_mean(*comm_, grads_->data(), grads_->size());
    s.comm_seconds += comm_timer.seconds();
  }
  if (finite && opt_.sanitize_grads) s.sanitized = sanitize_fp16(grads_->data(), grads_->size());
  // The guard: a non-finite loss or gradient never reaches the parameters or AdamW's moments.
  const double gnorm = finite ? grad_norm(*grads_) : NAN;
  s.grad_norm = float(gnorm);
  s.skipped = !std::isfinite(s.loss) || !std::isfinite(s.grad_norm);
  if (!s.skipped) {
    opt_adam_->step(*params_, *grads_, s.lr, gnorm);  // the same sum AdamW would take (one pass, not two)
    model_->weights_updated();
    consecutive_bad_ = 0;
  } else {
    ++state_.skipped_steps;
    ++consecutive_bad_;
  }
  ++state_.step;
  state_.data_position = train_->position();
  state_.adam_steps = opt_adam_->step_count();
  s.seconds = timer.seconds();
  if (s.skipped && opt_.progress)
    std::fprintf(stderr, "train: step %lld skipped: loss %g, gradient norm %g (%lld skipped so far)\n",
                 (long long)state_.step, s.loss, s.grad_norm, (long long)state_.skipped_steps);
  if (consecutive_bad_ >= opt_.max_bad_steps)
    throw_runtime_error(
        fmt::format("{} consecutive steps had a non-finite loss or gradient (the last: step {}, loss {}, gradient norm {}); "
                    "stopped without writing them",
                    consecutive_bad_, state_.step, s.loss, s.grad_norm),
        last_checkpoint_.empty() ? opt_.out : last_checkpoint_,
        "lower --lr, keep --clip on, or check the data; --resume continues from the last good checkpoint");
  return s;
}

float Trainer::evaluate() {
  if (!val_) return -1;
  const uint64_t n = std::min<uint64_t>(uint64_t(std::max(1, opt_.eval_batches)), val_->batches_per_epoch());
  std::vector<float> losses;
  std::vector<int64_t> counts;
  for (uint64_t i = 0; i < n; ++i) {  // always the same first batches: comparable across steps and runs
    data::Batch b = val_->batch(i);   // with several ranks: this rank's rows of the global batch i
    losses.push_back(model_->forward(b.inputs.data(), b.targets.data()));
    counts.push_back(dist::counted_targets(b.targets));
  }
  const std::vector<double> weight = dist::micro_batch_weights(*comm_, counts);  // as in step()
  double sum = 0;
  for (uint64_t i = 0; i < n; ++i) sum += weight[i] * losses[i];
  comm_->allreduce_sum(&sum, 1);
  return float(sum / comm_->world() / double(n));
}

std::string Trainer::save() {
  // Collective: the ranks' parameters must still be the same bits (dist/communicator.h).
  if (comm_->world() > 1)
    dist::check_ranks_agree(*comm_, {{fmt::format("parameters after step {}", state_.step),
                                      checkpoint_hash(params_->data(), params_->size() * sizeof(float))}});
  if (comm_->rank() != 0) return "";  // rank 0 alone writes
  last_checkpoint_ = save_checkpoint(checkpoint_dir(), state_, opt_.numeric_json(),
                                     *params_, *opt_adam_, opt_.keep);
  return last_checkpoint_;
}

std::string Trainer::export_model(const std::string& path_or_empty) {
  const Arch arch = params_->config().arch;
  std::string fmt_name = opt_.export_format.empty() ? format_name(model_family(arch).bin_format().value_or(ModelFormat::Safetensors)) : opt_.export_format;
  if (fmt_name == "none") return "";
  auto format = parse_format(fmt_name);
  if (!format)
    throw_usage_error(fmt::format("unknown model format '{}'", fmt_name), "--export-format", "use llama2c, llama2c-v1, safetensors or llmc");
  std::string path = path_or_empty;
  if (path.empty()) path = (fs::path(opt_.out) / (*format == ModelFormat::Safetensors ? "model" : "model.bin")).string();
  save_model(params_->view(), path, *format);
  return path;
}

std::string Trainer::sample(const std::string& prompt, int tokens) {
  if (!tokenizer_ || tokens <= 0) return "";
  ModelWeights w = params_->view();
  Transformer tf(w);
  std::vector<int> ids = tokenizer_->encode(prompt, true);
  if (ids.empty()) ids.push_back(std::max(0, tokenizer_->eos_id()));
  GenerateOptions go;
  go.max_new_tokens = tokens;
  go.sampler.temperature = 0;  // greedy: the same text for the same weights
  for (int id : {tokenizer_->eos_id(), tokenizer_->bos_id()})
    if (id >= 0) go.stop_ids.push_back(id);
  std::vector<int> out = ids;
  generate(tf, ids, go, [&](int id) { out.push_back(id); });
  return tokenizer_->decode(out);
}

double Trainer::unigram_entropy() const {
  std::vector<uint64_t> counts(size_t(params_->config().vocab_size) + 1, 0);
  uint64_t n = 0;
  for (const auto& f : train_->files())
    for (size_t i = 0; i < f.count; ++i) ++counts[std::min<size_t>(f.tokens[i], counts.size() - 1)], ++n;
  double h = 0;
  for (uint64_t k : counts)
    if (k) h -= double(k) / double(n) * std::log(double(k) / double(n));
  return h;
}

void Trainer::log_step(const StepStats& s, float val) {
  run_seconds_ += s.seconds;
  ++run_steps_;
  const int64_t done = state_.step;
  int every = opt_.log_every > 0 ? opt_.log_every : int(std::max<int64_t>(1, opt_.steps / 40));
  const bool show = done == 1 || done == opt_.steps || done % every == 0 || val >= 0 || run_steps_ == 1;
  if (!opt_.progress || !show) return;
  const double ms = 1000.0 * run_seconds_ / double(run_steps_);
  const double tok_s = double(opt_.batch) * opt_.seq * opt_.accum * comm_->world() * double(run_steps_) / run_seconds_;
  const double eta = (ms / 1000.0) * double(opt_.steps - done);
  std::string line = fmt::format("step {:>{}}/{} | loss {:.4f}", done, int(std::to_string(opt_.steps).size()), opt_.steps, s.loss);
  if (val >= 0) line += fmt::format(" | val {:.4f}", val);
  line += fmt::format(" | lr {:.2e} | gnorm {:.2f} | {} tok/s | {:.0f} ms/step | ETA {}", s.lr, s.grad_norm, format_rate(tok_s),
                      ms, data::format_duration(eta));
  std::fprintf(stderr, "%s\n", line.c_str());
  if (std::string phases = model_->blocks().progress(); !phases.empty()) std::fprintf(stderr, "  %s\n", phases.c_str());
}

std::string Trainer::checkpoint_dir() const {
  return opt_.ckpt_dir.empty() ? (fs::path(opt_.out) / "checkpoints").string() : opt_.ckpt_dir;
}

std::string Trainer::metrics_path() const {
  return opt_.metrics.empty() ? (fs::path(opt_.out) / "metrics.jsonl").string() : opt_.metrics;
}

namespace {
constexpr const char* kCsvHeader = "step,loss,lr,grad_norm,ms,skipped,val_loss";
bool is_csv(const std::string& path) { return path.ends_with(".csv"); }
}  // namespace

void Trainer::append_metrics(const StepStats& s, float val) {
  if (comm_->rank() != 0) return;
  const std::string path = metrics_path();
  if (is_csv(path)) {  // floats in their shortest round-trip form; val_loss empty when not evaluated
    const bool fresh = !file_exists(path) || read_text_file(path).empty();
    std::ofstream f(path, std::ios::app);
    if (fresh) f << kCsvHeader << "\n";
    f << fmt::format("{},{},{},{},{:.3f},{},{}\n", state_.step, s.loss, s.lr, s.grad_norm, s.seconds * 1000.0, s.skipped ? 1 : 0,
                     val >= 0 ? fmt::format("{}", val) : "");
    return;
  }
  nlohmann::json j = {{"step", state_.step}, {"loss", s.loss}, {"lr", s.lr}, {"grad_norm", s.grad_norm},
                      {"ms", s.seconds * 1000.0},  {"skipped", s.skipped}};
  if (val >= 0) j["val_loss"] = val;
  // The floats are stored as doubles and printed to round-trip: losses compare bit for bit after a
  // resume. Non-finite values print as null.
  std::string line = j.dump();
  std::ofstream(path, std::ios::app) << line << "\n";
}

namespace {
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

TrainResult Trainer::run() {
  TrainResult r;
  const ModelConfig& c = params_->config();
  if (comm_->rank() == 0) trim_metrics(metrics_path(), state_.step);
  if (opt_.progress) {
    std::fprintf(stderr, "train: %s\n", c.describe().c_str());
    if (comm_->world() > 1)
      std::fprintf(stderr, "train: data parallel over %s: %d rows per rank, global batch %d rows\n", comm_->describe().c_str(),
                   opt_.batch, opt_.batch * comm_->world());
    std::fprintf(stderr, "train: %llu training tokens (%llu batches/epoch), %s; %d×%d×%d = %d tokens/step; steps %lld→%lld; lr %.2e %s, warmup %d, clip %g\n",
                 (unsigned long long)train_->total_tokens(), (unsigned long long)train_->batches_per_epoch(),
                 val_ ? fmt::format("{} validation tokens", val_->total_tokens()).c_str() : "no validation split",
                 opt_.batch * comm_->world(), opt_.seq, opt_.accum, opt_.batch * comm_->world() * opt_.seq * opt_.accum, (long long)state_.step,
                 (long long)opt_.steps, opt_.lr, opt_.schedule.c_str(), opt_.warmup_steps(), opt_.clip);
  }
  g_interrupted = false;
  auto previous = std::signal(SIGINT, on_sigint);
  // Under mpirun, Ctrl-C ends the job at once; mpirun forwards SIGUSR1 to every rank instead
  // (docs/distributed.md), so SIGUSR1 is the clean stop of a data-parallel run.
  auto previous_usr1 = std::signal(SIGUSR1, on_sigint);
  Timer total;
  bool first = true;
  double comm_seconds = 0;
  auto interrupted = [&] {  // with several ranks, every rank stops after the same step
    double any = g_interrupted ? 1 : 0;
    if (comm_->world() > 1) comm_->allreduce_sum(&any, 1);
    return any > 0;
  };
  while (state_.step < opt_.steps && (opt_.stop_after <= 0 || run_steps_ < opt_.stop_after) && !interrupted()) {
    StepStats s = step();
    comm_seconds += s.comm_seconds;
    const int64_t done = state_.step;
    float val = -1;
    if (done == opt_.steps || (opt_.eval_every > 0 && done % opt_.eval_every == 0)) val = evaluate();
    if (val >= 0) r.val_loss = val;
    log_step(s, val);
    append_metrics(s, val);
    if (val >= 0 && done < opt_.steps && opt_.progress && opt_.sample_tokens > 0 && tokenizer_ && comm_->rank() == 0)
      std::fprintf(stderr, "  sample: %s\n", sample("Once upon a time", std::min(opt_.sample_tokens, 32)).c_str());
    if (first) r.first_loss = s.loss, first = false;
    r.last_loss = s.loss;
    if (opt_.checkpoint_every > 0 && done % opt_.checkpoint_every == 0 && done < opt_.steps) save();
  }
  std::signal(SIGINT, previous);
  std::signal(SIGUSR1, previous_usr1);
  if (g_interrupted && opt_.progress) std::fprintf(stderr, "train: interrupted; writing a checkpoint\n");
  r.checkpoint = save();
  r.steps_done = state_.step;
  r.skipped_steps = state_.skipped_steps;
  r.seconds = total.seconds();
  r.tokens_per_second =
      run_seconds_ > 0 ? double(opt_.batch) * opt_.seq * opt_.accum * comm_->world() * double(run_steps_) / run_seconds_ : 0;
  r.world = comm_->world();
  if (run_steps_ > 0) r.bytes_reduced_per_step = comm_->stats.bytes_reduced / uint64_t(run_steps_);
  r.comm_share = run_seconds_ > 0 ? comm_seconds / run_seconds_ : 0;
  r.tokenizer = state_.tokenizer;
  if (state_.step >= opt_.steps && comm_->rank() == 0) {
    r.model = export_model();
    if (opt_.progress && opt_.sample_tokens > 0 && tokenizer_)
      std::fprintf(stderr, "train: sample: %s\n", sample("Once upon a time", opt_.sample_tokens).c_str());
  }
  if (opt_.progress)
    std::fprintf(stderr, "train: %lld steps in %.1f s (%s tok/s), %lld skipped; checkpoint %s%s%s\n", (long long)run_steps_,
                 r.seconds, format_rate(r.tokens_per_second).c_str(), (long long)r.skipped_steps, r.checkpoint.c_str(),
                 r.model.empty() ? "" : ", model ", r.model.c_str());
  if (opt_.progress && r.world > 1)
    std::fprintf(stderr, "train: %d ranks: %.2f MB all-reduced per step, %.1f%% of the step time in all-reduce\n", r.world,
                 double(r.bytes_reduced_per_step) / 1e6, 100.0 * r.comm_share);
  return r;
}

}  // namespace orion::train
