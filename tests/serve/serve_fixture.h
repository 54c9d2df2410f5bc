// A server started in-process on a free loopback port: a tiny random Llama (stories260k shape,
// V = 512 as the SentencePiece tokenizer in testdata), one LoRA adapter "a1", and an httplib
// client; plus the reference outputs the tests compare against (generate() on the Transformer).
// With `anesim` the engine decodes through ANE programs on anesim (infer/ane_slot_decoder.h): the
// Llama is the small GQA one of tests/infer/test_anesim_generate.cpp (its attention fits a
// 256-column bucket, where stories260k's needs 1024), "a1" adapts q and v only (what the ANE path
// runs) with a rank slot of 4, and the references are generate() on an AneModel with that slot.
#pragma once
#include <httplib.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "infer/ane_slot_decoder.h"
#include "infer/batched_decode.h"
#include "infer/generate.h"
#include "model/lora/lora_io.h"
#include "model/tokenizer/tokenizer.h"
#include "serve/server.h"
#include "support.h"

namespace orion::test {

struct ServeFixtureOptions {
  int parallel = 4, ctx = 96;
  std::string api_key, runs_dir;
  size_t max_body = 64 << 10;
  double timeout_s = 30;
  bool anesim = false;
  int step_delay_ms = 0;  // CPU: each decode step also sleeps this long (a model slower than the client)
};

// The CPU's BatchedDecoder with a pause after each decode step: a stream then still has tokens to
// send after its client has left, whatever the speed of the machine the tests run on.
class SlowSlotDecoder final : public SlotDecoder {
 public:
  SlowSlotDecoder(const ModelWeights& w, int slots, int max_seq, int delay_ms) : inner_(w, slots, max_seq), delay_ms_(delay_ms) {}
  const float* prefill(int slot, const int* tokens, int n, const LoraAdapter* adapter, float scale_mult) override {
    return inner_.prefill(slot, tokens, n, adapter, scale_mult);
  }
  const float* decode(const std::vector<Row>& rows) override {
    const float* logits = inner_.decode(rows);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
    return logits;
  }
  int prompt_rows() const override { return inner_.prompt_rows(); }
  int slots() const override { return inner_.slots(); }
  int max_seq() const override { return inner_.max_seq(); }
  int vocab_size() const override { return inner_.vocab_size(); }

 private:
  BatchedDecoder inner_;
  int delay_ms_;
};

// The rank slot of the anesim fixture's programs (a1's rank).
constexpr int kFixtureLoraRank = 4;

inline ModelConfig fixture_config(bool anesim) {
  ModelConfig c = config_preset("stories260k");
  if (anesim) c.dim = 192, c.hidden_dim = 512, c.n_heads = 6, c.n_kv_heads = 3, c.n_layers = 2, c.seq_len = 128;
  return c;
}

// A rank-4 adapter with weights large enough to change the greedy text (`shift` varies their pattern).
inline std::shared_ptr<LoraAdapter> fixture_adapter(const ModelConfig& c, std::vector<LoraTarget> targets, uint64_t seed,
                                                    size_t shift = 0) {
  auto a = std::make_shared<LoraAdapter>(c, kFixtureLoraRank, 8.0f, std::move(targets));
  a->init(seed);
  for (size_t i = 0; i < a->size(); i++) a->data()[i] += 0.5f * float(int((i + shift) % 13) - 6) / 6.0f;
  return a;
}

// `text` as a JSON reply carries it: bytes that are not UTF-8 (a random model's raw-byte tokens)
// arrive as U+FFFD.
inline std::string as_json_text(const std::string& text) {
  const std::string dumped = nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return nlohmann::json::parse(dumped).get<std::string>();
}

class ServeFixture {
 public:
  explicit ServeFixture(ServeFixtureOptions o = {}) : ctx(o.ctx) {
    ModelConfig c = fixture_config(o.anesim);
    weights = random_weights(c, 21);
    tokenizer = load_tokenizer(data_path("tokenizer/spm_stories/tokenizer.bin"));
    adapter = o.anesim ? fixture_adapter(c, {LoraTarget::Q, LoraTarget::V}, 3)
                       : fixture_adapter(c, {LoraTarget::Q, LoraTarget::V, LoraTarget::W2}, 3);
    serve::EngineOptions eo;
    eo.parallel = o.parallel, eo.ctx = o.ctx, eo.timeout_s = o.timeout_s;
    std::unique_ptr<SlotDecoder> decoder;
    if (o.anesim) {
      runtime = std::make_unique<AneRuntime>("anesim");
      reference_runtime = std::make_unique<AneRuntime>("anesim");
      decoder = std::make_unique<AneSlotDecoder>(weights, runtime->cache, o.parallel, o.ctx, kFixtureLoraRank, "served");
    } else if (o.step_delay_ms > 0) {
      decoder = std::make_unique<SlowSlotDecoder>(weights, o.parallel, o.ctx, o.step_delay_ms);
    }
    engine = std::make_unique<serve::Engine>(weights, *tokenizer, eo, std::move(decoder));
    engine->add_adapter("a1", adapter);
    serve::ServedModel served;
    served.tokenizer = tokenizer.get();
    served.stop_ids = {tokenizer->eos_id(), tokenizer->bos_id()};
    const ModelConfig cfg = c;
    served.load_adapter = [cfg](const std::string& path) { return std::make_shared<const LoraAdapter>(load_lora(path, cfg)); };
    serve::ServerOptions so;
    so.port = 0, so.api_key = o.api_key, so.runs_dir = o.runs_dir, so.max_body_bytes = o.max_body;
    server = std::make_unique<serve::Server>(*engine, std::move(served), so);
    port = server->bind();
    thread = std::thread([this] { server->listen(); });
  }
  ~ServeFixture() {
    server->stop();
    thread.join();
  }

  httplib::Client client() const {
    httplib::Client cli("127.0.0.1", port);
    cli.set_read_timeout(120);  // anesim on a loaded machine is slow
    return cli;
  }
  // POSTs a JSON body; returns the status and the parsed body (null when it is not JSON).
  std::pair<int, nlohmann::json> post(const std::string& path, const std::string& body,
                                      const httplib::Headers& headers = {}) const {
    auto res = client().Post(path.c_str(), headers, body, "application/json");
    if (!res) return {0, nullptr};
    return {res->status, nlohmann::json::parse(res->body, nullptr, false)};
  }
  std::pair<int, nlohmann::json> get(const std::string& path, const httplib::Headers& headers = {}) const {
    auto res = client().Get(path.c_str(), headers);
    if (!res) return {0, nullptr};
    return {res->status, nlohmann::json::parse(res->body, nullptr, false)};
  }

  // What `orion generate` prints for prompt (greedy, n tokens, stopping at eos/bos), with an adapter
  // or not: on the Transformer, or (anesim) on one AneModel with the served rank slot.
  std::string reference(const std::string& prompt, int n, const LoraAdapter* ad = nullptr) const {
    Transformer tf(weights, 96);
    tf.set_lora(ad);
    std::unique_ptr<AneModel> ane;
    if (reference_runtime) {
      ane = std::make_unique<AneModel>(weights, reference_runtime->cache, AneModelOptions{"reference", ctx});
      ane->enable_lora(kFixtureLoraRank);
      ane->set_lora(ad);
    }
    CpuLanguageModel cpu(tf);
    LanguageModel& model = ane ? static_cast<LanguageModel&>(*ane) : cpu;
    GenerateOptions go;
    go.max_new_tokens = n;
    go.sampler.temperature = 0;
    go.stop_ids = {tokenizer->eos_id(), tokenizer->bos_id()};
    const std::vector<int> ids = tokenizer->encode(prompt, true);
    std::string text;
    int prev = ids.back();
    generate(model, ids, go, [&](int id) {
      text += tokenizer->decode_token(prev, id);
      prev = id;
    });
    return text;
  }

  int ctx;
  ModelWeights weights;
  std::unique_ptr<AneRuntime> runtime, reference_runtime;  // anesim: the server's, the references'
  std::unique_ptr<Tokenizer> tokenizer;
  std::shared_ptr<LoraAdapter> adapter;
  std::unique_ptr<serve::Engine> engine;
  std::unique_ptr<serve::Server> server;
  int port = 0;
  std::thread thread;
};

}  // namespace orion::test
