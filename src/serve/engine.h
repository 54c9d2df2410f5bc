// The scheduler behind `orion serve`: one model in memory, many LoRA adapters, up to `parallel`
// requests decoding together (continuous batching) through a SlotDecoder (infer/slot_decoder.h):
// on the CPU one pass over the weights per step for all rows (infer/batched_decode.h); on the ANE
// path the rows of a step one after another through batch-1 programs (infer/ane_slot_decoder.h).
//
// HTTP threads submit() a Job and read its text as it grows; one scheduler thread owns the model.
// Each turn of its loop
//   1. admits queued jobs into free slots; where the decoder takes prompt rows in its steps (the
//      CPU) the prompt is fed there, otherwise it is prefilled now (with the job's adapter) and
//      its first token sampled;
//   2. runs ONE decode step for every active job (on the CPU one pass over the weights for all of
//      them), each row with its own position, KV-cache slot, adapter and sampler; on the CPU the
//      same pass also carries the next chunk of the prompts still being fed (chunked prefill), and
//      a job whose prompt ends in it samples its first token from that row;
//   3. retires jobs that stopped (stop token or string, max_tokens, context full), ran past their
//      time limit, or were cancelled (the client went away): their slots are free for the next turn.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "infer/slot_decoder.h"
#include "infer/sampler.h"
#include "model/lora/lora.h"
#include "model/tokenizer/tokenizer.h"
#include "serve/text_stream.h"

namespace orion::serve {

struct GenerationParams {
  std::vector<int> prompt;              // token ids, non-empty
  std::string adapter;                  // "" or "base": the base model
  int max_tokens = 16;                  // cut to what the context holds
  SamplerOptions sampler;
  std::vector<int> stop_ids;            // token ids that end the text (not included)
  std::vector<std::string> stop_strings;
};

// One request's progress, shared by the HTTP thread that reads it and the scheduler that writes it.
class Job {
 public:
  explicit Job(GenerationParams p) : params(std::move(p)), stream_(params.stop_strings) {}
  // Waits until there is new text or the job has finished (at most `wait`); returns the text since
  // the last call and whether the job has finished (then nothing more will come).
  std::pair<std::string, bool> next(std::chrono::milliseconds wait);
  // Waits for the end; returns the whole text.
  std::string wait_all();
  // Asks the scheduler to drop the job (the client disconnected); its slot is freed at the next step.
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }

  const GenerationParams params;
  // Valid once finished: "stop", "length", or "cancelled"; the error message when it failed.
  std::string finish_reason, error;
  int prompt_tokens = 0, completion_tokens = 0;

 private:
  friend class Engine;
  bool push(const std::string& piece);  // scheduler side
  void finish(const std::string& reason, const std::string& error = {});

  std::mutex mu_;
  std::condition_variable cv_;
  TextStream stream_;
  std::string ready_;  // text released and not yet read
  bool finished_ = false;
  std::atomic<bool> cancelled_{false};
  // Scheduler state.
  int slot_ = -1, pos_ = 0, last_token_ = 0, prev_token_ = 0;
  int fed_ = -1;  // prompt tokens in the slot's cache while the prompt rides in decode steps; −1: all
  std::chrono::steady_clock::time_point deadline_;
  std::unique_ptr<Sampler> sampler_;
  std::shared_ptr<const LoraAdapter> adapter_;
};

struct EngineOptions {
  int parallel = 4;         // sequences decoding together (KV-cache slots)
  int ctx = 0;              // tokens per sequence (0: the model's seq_len)
  double timeout_s = 300;   // a request running longer than this ends with finish_reason "length"
  float lora_scale = 1.0f;  // multiplies every adapter's alpha/r
  DType kv_cache = DType::F32;  // the CPU slots' KV cache elements: F32 or F16
};

struct EngineStats {
  int slots = 0, active = 0, queued = 0;
  int64_t decode_steps = 0, decoded_rows = 0;  // rows / steps = the mean batch size
  int64_t completed = 0, cancelled = 0;
  int64_t prompt_tokens = 0;  // prompt tokens fed (as prefills or as rows of decode steps)
  // Wall time the scheduler spent in decode steps (with the prompt rows they carried) and in
  // separate prefills: tokens ÷ seconds is what the model reached, whatever the clients and HTTP cost.
  double step_seconds = 0, prefill_seconds = 0;
  int compiles = -1;  // programs compiled in this process (the ANE path); −1: none (the CPU)
};

class Engine {
 public:
  // The weights and tokenizer must outlive the engine. `decoder` runs the model (nullptr: the CPU's
  // BatchedDecoder with options.parallel slots of options.ctx tokens); its slots are the engine's.
  // Starts the scheduler thread.
  Engine(const ModelWeights& weights, const Tokenizer& tokenizer, EngineOptions options,
         std::unique_ptr<SlotDecoder> decoder = nullptr);
  ~Engine();  // cancels what is left and joins the scheduler

  // Queues a job. Usage error (field "prompt") when the prompt leaves no room for a token; an
  // unknown adapter is the caller's to check (has_model) — submit() throws Usage for it too.
  std::shared_ptr<Job> submit(GenerationParams params);
  // Cancels every queued and running job and stops accepting new ones (graceful shutdown).
  void shutdown();

  // Adapters by name, usable by the next request; a running request keeps the adapter it started with.
  // add_adapter() raises a usage error for one the model or the decoder cannot run.
  void add_adapter(const std::string& name, std::shared_ptr<const LoraAdapter> adapter);
  bool remove_adapter(const std::string& name);
  std::vector<std::string> adapter_names() const;
  bool has_model(const std::string& name) const;  // "base" or an adapter

  int context() const { return decoder_->max_seq(); }
  EngineStats stats() const;

 private:
  void run();
  bool admit(const std::shared_ptr<Job>& job, int slot);  // prefill; false when it ended already
  bool start_token(const std::shared_ptr<Job>& job, const float* logits);  // after the prompt; false: it ended
  bool sample(const std::shared_ptr<Job>& job, const float* logits);       // the next token; false: it ended
  void decode_step();
  // Samples from a row's logits and hands the token to the job; "" to go on, else why it ends
  // ("stop", "length").
  std::string take_token(Job& job, float* logits);
  // Frees the job's slot, counts it, and marks it finished.
  void retire(const std::shared_ptr<Job>& job, const std::string& reason, const std::string& error = {});

  const ModelWeights& w_;
  const Tokenizer& tok_;
  EngineOptions opt_;
  std::unique_ptr<SlotDecoder> decoder_;
  mutable std::mutex mu_;  // guards queue_, adapters_, stopping_, stats_
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::map<std::string, std::shared_ptr<const LoraAdapter>> adapters_;
  bool stopping_ = false;
  EngineStats stats_;
  std::vector<std::shared_ptr<Job>> active_;  // [slots]; null: free (scheduler thread only)
  std::vector<float> logits_;
  std::thread thread_;
};

}  // namespace orion::serve
