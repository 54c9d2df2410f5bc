// A server started in-process on a free loopback port: a tiny random Llama (stories260k shape,
// V = 512 as the SentencePiece tokenizer in testdata), one LoRA adapter "a1", and an httplib
// client; plus the reference outputs the tests compare against (generate() on the Transformer).
#pragma once
#include <httplib.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

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
};

class ServeFixture {
 public:
  explicit ServeFixture(ServeFixtureOptions o = {}) {
    ModelConfig c = config_preset("stories260k");
    weights = random_weights(c, 21);
    tokenizer = load_tokenizer(data_path("tokenizer/spm_stories/tokenizer.bin"));
    adapter = std::make_shared<LoraAdapter>(c, 4, 8.0f, std::vector<LoraTarget>{LoraTarget::Q, LoraTarget::V, LoraTarget::W2});
    adapter->init(3);
    for (size_t i = 0; i < adapter->size(); i++) adapter->data()[i] += 0.5f * float(int(i % 13) - 6) / 6.0f;
    serve::EngineOptions eo;
    eo.parallel = o.parallel, eo.ctx = o.ctx, eo.timeout_s = o.timeout_s;
    engine = std::make_unique<serve::Engine>(weights, *tokenizer, eo);
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
    cli.set_read_timeout(30);
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

  // What `orion generate` prints for prompt (greedy, n tokens, stopping at eos/bos), with an adapter or not.
  std::string reference(const std::string& prompt, int n, const LoraAdapter* ad = nullptr) const {
    Transformer tf(weights, 96);
    tf.set_lora(ad);
    GenerateOptions go;
    go.max_new_tokens = n;
    go.sampler.temperature = 0;
    go.stop_ids = {tokenizer->eos_id(), tokenizer->bos_id()};
    const std::vector<int> ids = tokenizer->encode(prompt, true);
    std::string text;
    int prev = ids.back();
    generate(tf, ids, go, [&](int id) {
      text += tokenizer->decode_token(prev, id);
      prev = id;
    });
    return text;
  }

  ModelWeights weights;
  std::unique_ptr<Tokenizer> tokenizer;
  std::shared_ptr<LoraAdapter> adapter;
  std::unique_ptr<serve::Engine> engine;
  std::unique_ptr<serve::Server> server;
  int port = 0;
  std::thread thread;
};

}  // namespace orion::test
