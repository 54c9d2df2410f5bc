// `orion serve`'s HTTP side (cpp-httplib): the OpenAI endpoints, adapters at run time, the training
// runs of --runs, health, and the web page, in front of an Engine (serve/engine.h).
//
//   GET  /health                    {"status": "ok", slots, active, queued}  (no API key needed)
//   GET  /                          the web page (chat playground, training runs)
//   GET  /v1/models                 "base" and every adapter, as OpenAI model ids
//   POST /v1/completions            prompt → text (stream: true → server-sent events)
//   POST /v1/chat/completions       messages → the model's chat template → reply
//   POST /v1/adapters               {"name", "path"}: load a LoRA adapter; DELETE /v1/adapters/NAME
//   GET  /v1/runs, /v1/runs/metrics?run=NAME&from=LINE     training runs under --runs
//   GET  /v1/stats                  the scheduler's counters
// Errors are OpenAI-style JSON bodies {"error": {"message", "type", "param", "code"}} with a 4xx/5xx
// status; with an API key every path but /health and / needs "Authorization: Bearer KEY".
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/chat/chat_template.h"
#include "serve/engine.h"

namespace orion::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";  // loopback unless told otherwise
  int port = 8080;                 // 0: any free port (bind() returns it)
  std::string api_key;             // empty: no key needed
  std::string runs_dir;            // training runs for the web page ("": none)
  size_t max_body_bytes = 1 << 20;
  int http_threads = 32;           // connections served at once (a stream holds one)
};

// What the server needs besides the engine: the tokenizer, the chat template and the adapter loader.
struct ServedModel {
  const Tokenizer* tokenizer = nullptr;
  std::optional<chat::ChatTemplate> chat_template;  // none: a chat's messages are joined by newlines
  std::vector<int> stop_ids;       // ids that end any text (eos; bos for llama2.c stories)
  std::vector<int> chat_stop_ids;  // ids that end the assistant's turn
  // Loads an adapter file or folder (load_lora); throws orion::Error when it cannot.
  std::function<std::shared_ptr<const LoraAdapter>(const std::string& path)> load_adapter;
};

class Server {
 public:
  Server(Engine& engine, ServedModel model, ServerOptions options);
  ~Server();
  // Binds host:port; returns the port (the free one chosen for port 0). Runtime error when it cannot.
  int bind();
  // Serves until stop() (from another thread or a signal watcher).
  void listen();
  // Stops accepting, cancels running requests (their streams end), and makes listen() return.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace orion::serve
