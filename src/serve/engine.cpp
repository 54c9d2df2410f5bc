#include "serve/engine.h"

#include <algorithm>
#include <utility>

#include "base/error.h"
#include "infer/batched_decode.h"

namespace orion::serve {

// ---- Job: the reading side (HTTP threads) and the writing side (the scheduler) ----

std::pair<std::string, bool> Job::next(std::chrono::milliseconds wait) {
  std::unique_lock lk(mu_);
  cv_.wait_for(lk, wait, [&] { return !ready_.empty() || finished_; });
  std::string out = std::move(ready_);
  ready_.clear();
  return {out, finished_};
}

std::string Job::wait_all() {
  std::unique_lock lk(mu_);
  cv_.wait(lk, [&] { return finished_; });
  ready_.clear();
  return stream_.text();
}

// Appends a token's text; true when it completed a stop string (the text is cut before it).
bool Job::push(const std::string& piece) {
  std::lock_guard lk(mu_);
  const bool stopped = stream_.append(piece);
  ready_ += stream_.take_ready();
  cv_.notify_all();
  return stopped;
}

void Job::finish(const std::string& reason, const std::string& why) {
  std::lock_guard lk(mu_);
  if (finished_) return;
  ready_ += stream_.take_rest();
  finish_reason = reason, error = why;
  finished_ = true;
  cv_.notify_all();
}

// ---- Engine ----

Engine::Engine(const ModelWeights& weights, const Tokenizer& tokenizer, EngineOptions options,
               std::unique_ptr<SlotDecoder> decoder)
    : w_(weights),
      tok_(tokenizer),
      opt_(options),
      decoder_(decoder ? std::move(decoder) : std::make_unique<BatchedDecoder>(weights, options.parallel, options.ctx, options.kv_cache)) {
  active_.resize(size_t(decoder_->slots()));
  stats_.slots = decoder_->slots();
  thread_ = std::thread([this] { run(); });
}

Engine::~Engine() { shutdown(); }

std::shared_ptr<Job> Engine::submit(GenerationParams p) {
  if (p.prompt.empty()) throw_usage_error("the prompt encodes to no tokens", "prompt", "give a non-empty prompt");
  if (int(p.prompt.size()) >= context())
    throw_usage_error(fmt::format("the prompt has {} tokens; the context is {}", p.prompt.size(), context()), "prompt",
                      "shorten the prompt (or start the server with a larger --ctx)");
  for (int id : p.prompt)
    if (id < 0 || id >= w_.config.vocab_size) throw_usage_error(fmt::format("token id {} is outside the vocabulary", id), "prompt");
  auto job = std::make_shared<Job>(std::move(p));
  job->sampler_ = std::make_unique<Sampler>(job->params.sampler);
  job->deadline_ = std::chrono::steady_clock::now() +
                   std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(opt_.timeout_s));
  std::lock_guard lk(mu_);
  if (stopping_) throw_runtime_error("the server is shutting down");
  const std::string& name = job->params.adapter;
  if (!name.empty() && name != "base") {
    auto it = adapters_.find(name);
    if (it == adapters_.end()) throw_usage_error(fmt::format("no model named '{}'", name), "model", "GET /v1/models lists them");
    job->adapter_ = it->second;  // kept alive for the whole request, even if removed meanwhile
  }
  queue_.push_back(job);
  cv_.notify_all();
  return job;
}

void Engine::shutdown() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

void Engine::add_adapter(const std::string& name, std::shared_ptr<const LoraAdapter> adapter) {
  adapter->check_fits(w_.config, name);
  decoder_->check_adapter(*adapter, name);
  std::lock_guard lk(mu_);
  adapters_[name] = std::move(adapter);
}

bool Engine::remove_adapter(const std::string& name) {
  std::lock_guard lk(mu_);
  return adapters_.erase(name) > 0;
}

std::vector<std::string> Engine::adapter_names() const {
  std::lock_guard lk(mu_);
  std::vector<std::string> names;
  for (const auto& [name, ad] : adapters_) names.push_back(name);
  return names;
}

bool Engine::has_model(const std::string& name) const {
  std::lock_guard lk(mu_);
  return name == "base" || adapters_.count(name) > 0;
}

EngineStats Engine::stats() const {
  std::lock_guard lk(mu_);  // every write of active_ holds it
  EngineStats s = stats_;
  s.active = int(std::count_if(active_.begin(), active_.end(), [](auto& j) { return j != nullptr; }));
  s.queued = int(queue_.size());
  s.compiles = decoder_->program_compiles();
  return s;
}

// The scheduler loop (see engine.h): admit, one batched decode step, retire.
void Engine::run() {
  for (;;) {
    std::vector<std::pair<std::shared_ptr<Job>, int>> admitted;
    {
      std::unique_lock lk(mu_);
      const auto busy = [&] { return std::any_of(active_.begin(), active_.end(), [](auto& j) { return j != nullptr; }); };
      cv_.wait(lk, [&] { return stopping_ || !queue_.empty() || busy(); });
      if (stopping_) break;
      for (int s = 0; s < int(active_.size()) && !queue_.empty(); s++)
        if (!active_[size_t(s)]) {
          admitted.emplace_back(queue_.front(), s);
          active_[size_t(s)] = queue_.front();  // reserved now, released by admit() if it ends at once
          queue_.pop_front();
        }
    }
    // A failure of the model or the tokenizer (an id the tokenizer lacks) ends the jobs it touched
    // with an error; the server goes on.
    try {
      for (auto& [job, slot] : admitted) admit(job, slot);
      decode_step();
    } catch (const std::exception& e) {
      for (auto& job : active_)
        if (job) retire(std::shared_ptr<Job>(job), "error", e.what());
    }
  }
  // Shutting down: what is running or waiting ends as cancelled.
  std::lock_guard lk(mu_);
  for (auto& job : active_)
    if (auto j = std::exchange(job, nullptr)) j->finish("cancelled");  // the slot first, as retire() does
  for (auto& job : queue_) job->finish("cancelled");
  queue_.clear();
}

bool Engine::admit(const std::shared_ptr<Job>& job, int slot) {
  job->slot_ = slot;
  if (job->cancelled()) {
    retire(job, "cancelled");
    return false;
  }
  const std::vector<int>& prompt = job->params.prompt;
  job->prompt_tokens = int(prompt.size());
  job->prev_token_ = prompt.back();
  if (decoder_->prompt_rows() > 0) {  // the prompt rides in the next decode steps
    job->fed_ = 0;
    return true;
  }
  const float* lg = nullptr;
  try {
    const auto t0 = std::chrono::steady_clock::now();
    lg = decoder_->prefill(slot, prompt.data(), int(prompt.size()), job->adapter_.get(), opt_.lora_scale);
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - t0;
    std::lock_guard lk(mu_);
    stats_.prefill_seconds += took.count(), stats_.prompt_tokens += int64_t(prompt.size());
  } catch (const Error& e) {
    retire(job, "error", e.message());
    return false;
  }
  return start_token(job, lg);
}

// The prompt is in the cache and `logits` are its last token's: sample the first token.
bool Engine::start_token(const std::shared_ptr<Job>& job, const float* logits) {
  job->pos_ = job->prompt_tokens, job->fed_ = -1;
  return sample(job, logits);
}

// The job's next token from its row's logits (copied: the sampler works in place); retires the
// job when that token ends it.
bool Engine::sample(const std::shared_ptr<Job>& job, const float* logits) {
  logits_.assign(logits, logits + decoder_->vocab_size());
  const std::string end = take_token(*job, logits_.data());
  if (end.empty()) return true;
  retire(job, end);
  return false;
}

// One step: a row for every job that is decoding, then up to prompt_rows() tokens of the prompts
// being fed, in slot order (a prompt longer than what is left goes on in the next step).
void Engine::decode_step() {
  std::vector<SlotDecoder::Row> rows;
  std::vector<std::shared_ptr<Job>> jobs;  // the job of each row that wants logits, in row order
  std::vector<std::shared_ptr<Job>> feeding;
  const auto now = std::chrono::steady_clock::now();
  int decoding = 0, budget = decoder_->prompt_rows();
  for (auto& job : active_) {
    if (!job) continue;
    if (job->cancelled() || now > job->deadline_) {  // the client left, or the time limit passed
      retire(std::shared_ptr<Job>(job), job->cancelled() ? "cancelled" : "length");
      continue;
    }
    if (job->fed_ >= 0) {
      feeding.push_back(job);
      continue;
    }
    rows.push_back({job->slot_, job->last_token_, job->pos_, job->adapter_.get(), opt_.lora_scale});
    jobs.push_back(job);
    decoding++;
  }
  for (auto& job : feeding) {
    const std::vector<int>& prompt = job->params.prompt;
    const int n = std::min(budget, int(prompt.size()) - job->fed_);
    for (int i = job->fed_; i < job->fed_ + n; i++) {
      const bool last = i + 1 == int(prompt.size());
      rows.push_back({job->slot_, prompt[size_t(i)], i, job->adapter_.get(), opt_.lora_scale, last});
      if (last) jobs.push_back(job);
    }
    job->fed_ += n, budget -= n;
  }
  if (rows.empty()) return;
  const auto t0 = std::chrono::steady_clock::now();
  const float* lg = decoder_->decode(rows);
  const size_t V = size_t(decoder_->vocab_size());
  {
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - t0;
    std::lock_guard lk(mu_);
    stats_.decode_steps += decoding > 0, stats_.decoded_rows += decoding, stats_.step_seconds += took.count();
    stats_.prompt_tokens += int64_t(rows.size()) - decoding;
  }
  for (size_t b = 0; b < jobs.size(); b++) {
    const float* row_logits = lg + b * V;
    if (int(b) >= decoding) {  // a prompt ended in this step: its first token
      start_token(jobs[b], row_logits);
    } else {
      jobs[b]->pos_++;
      sample(jobs[b], row_logits);
    }
  }
}

std::string Engine::take_token(Job& job, float* logits) {
  const GenerationParams& p = job.params;
  const int id = job.sampler_->sample(logits, decoder_->vocab_size());
  if (std::find(p.stop_ids.begin(), p.stop_ids.end(), id) != p.stop_ids.end()) return "stop";
  job.completion_tokens++;
  const std::string piece = tok_.decode_token(job.prev_token_, id);
  job.prev_token_ = job.last_token_ = id;
  if (job.push(piece)) return "stop";  // a stop string
  // The token just sampled is fed at pos_: there must be room for it, and for what it would produce.
  if (job.completion_tokens >= p.max_tokens || job.pos_ >= decoder_->max_seq()) return "length";
  return {};
}

// The slot is freed before the job is marked finished: whoever sees the end sees the slot free.
void Engine::retire(const std::shared_ptr<Job>& job, const std::string& reason, const std::string& error) {
  {
    std::lock_guard lk(mu_);
    if (job->slot_ >= 0 && active_[size_t(job->slot_)] == job) active_[size_t(job->slot_)] = nullptr;
    if (reason == "cancelled") stats_.cancelled++;
    else stats_.completed++;
  }
  job->finish(reason, error);
}

}  // namespace orion::serve
