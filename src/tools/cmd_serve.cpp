// orion serve: an OpenAI-compatible HTTP server (serve/server.h) for one model and its LoRA
// adapters, decoding concurrent requests together (serve/engine.h), with a web page at /.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "base/error.h"
#include "base/file.h"
#include "infer/ane_slot_decoder.h"
#include "model/io/model_io.h"
#include "model/lora/lora_io.h"
#include "serve/server.h"
#include "tools/chat_prompt.h"
#include "tools/command.h"
#include "tools/options.h"

namespace orion::tools {
namespace {

struct ServeArgs {
  std::string model, tokenizer, backend = "cpu", chip = "m4", runs;
  int lora_rank = 0;  // the ANE path's adapter rank slot (0: the highest rank of --lora)
  std::vector<std::string> loras;  // NAME=PATH
  float lora_scale = 1.0f;
  serve::ServerOptions server;
  serve::EngineOptions engine;
  ThreadOptions threads;
  DTypeOption dtype;
  KvCacheOption kv_cache;
};

// SIGINT and SIGTERM stop the server: in-flight requests end, listen() returns, the command exits 0.
// The handler (whichever thread the signal lands on) only writes a byte to a pipe; a thread of its
// own reads it and stops the server outside the signal context.
class ShutdownOnSignal {
 public:
  ShutdownOnSignal() {
    if (pipe(pipe_) != 0) throw_runtime_error("cannot create the shutdown pipe");
    write_end() = pipe_[1];
    struct sigaction sa {};
    sa.sa_handler = [](int sig) {
      const char c = char(sig);
      [[maybe_unused]] ssize_t n = ::write(write_end(), &c, 1);
    };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
  }
  ~ShutdownOnSignal() {
    signal(SIGINT, SIG_DFL), signal(SIGTERM, SIG_DFL);
    const char c = 0;  // wakes the watcher if no signal came
    [[maybe_unused]] ssize_t n = ::write(pipe_[1], &c, 1);
    if (thread_.joinable()) thread_.join();
    close(pipe_[0]), close(pipe_[1]);
  }
  void watch(serve::Server& server) {
    thread_ = std::thread([this, &server] {
      char sig = 0;
      if (::read(pipe_[0], &sig, 1) != 1 || sig == 0) return;
      std::fprintf(stderr, "orion serve: %s: stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
      server.stop();
    });
  }

 private:
  static int& write_end() {
    static int fd = -1;
    return fd;
  }
  int pipe_[2] = {-1, -1};
  std::thread thread_;
};

void run_serve(const ServeArgs& a) {
  a.threads.apply();
  if (!file_exists(a.model))
    throw_input_error(a.model, "no such file or folder", {}, -1, "pass the path of a model file (--model)");
  const std::string tok_path = a.tokenizer.empty() ? find_tokenizer_beside(a.model) : a.tokenizer;
  auto tokenizer = load_tokenizer(tok_path);
  LoadOptions lo;
  lo.dtype = a.dtype.get();
  ModelWeights w = load_model(a.model, lo);

  serve::ServedModel served;
  served.tokenizer = tokenizer.get();
  for (int id : {tokenizer->eos_id(), tokenizer->bos_id()})
    if (id >= 0) served.stop_ids.push_back(id);
  const std::string folder = std::filesystem::is_directory(a.model) ? a.model : std::filesystem::path(a.model).parent_path().string();
  if (chat::ChatTemplate::folder_has_template(folder.empty() ? "." : folder)) {
    ChatSetup chat = load_chat_setup(a.model, *tokenizer);
    served.chat_template.emplace(std::move(chat.chat_template));
    served.chat_stop_ids = chat.stop_ids;
  }
  const ModelConfig config = w.config;
  served.load_adapter = [config](const std::string& path) {
    return std::make_shared<const LoraAdapter>(load_lora(path, config));
  };

  std::vector<std::pair<std::string, std::shared_ptr<const LoraAdapter>>> adapters;
  int max_rank = 0;
  for (const std::string& spec : a.loras) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
      throw_usage_error(fmt::format("'{}' is not NAME=PATH", spec), "--lora", "e.g. --lora shakespeare=runs/sh/adapter.olora");
    adapters.emplace_back(spec.substr(0, eq), served.load_adapter(spec.substr(eq + 1)));
    max_rank = std::max(max_rank, adapters.back().second->rank());
  }

  serve::EngineOptions eo = a.engine;
  eo.lora_scale = a.lora_scale;
  eo.kv_cache = a.kv_cache.get();
  if (a.backend != "cpu" && eo.kv_cache != DType::F32)
    throw_usage_error("--kv-cache f16 is for the CPU backend", "--kv-cache",
                      "the ANE path keeps its own f32 cache: drop --kv-cache or use --backend cpu");
  // anesim / ane: the transformer blocks as ANE programs through the driver, one AneModel per slot
  // over one program cache; the adapter rank slot is fixed now, so adapters come and go without a
  // compile (infer/ane_slot_decoder.h).
  std::unique_ptr<AneRuntime> rt;
  std::unique_ptr<SlotDecoder> decoder;
  if (a.backend != "cpu") {
    rt = std::make_unique<AneRuntime>(a.backend, a.chip);
    const int rank_slot = a.lora_rank > 0 ? a.lora_rank : max_rank;
    decoder = std::make_unique<AneSlotDecoder>(w, rt->cache, eo.parallel, eo.ctx, rank_slot,
                                               std::filesystem::path(a.model).stem().string());
  }
  serve::Engine engine(w, *tokenizer, eo, std::move(decoder));
  for (auto& [name, adapter] : adapters) engine.add_adapter(name, std::move(adapter));
  serve::ServerOptions so = a.server;
  so.runs_dir = a.runs;
  serve::Server server(engine, std::move(served), so);
  ShutdownOnSignal signals;  // after the server: destroyed (watcher joined) before it
  const int port = server.bind();
  std::fprintf(stderr, "orion serve: http://%s:%d/ (%s, %d slots, context %d, %zu adapters%s)\n", so.host.c_str(), port,
               a.backend.c_str(), eo.parallel, engine.context(), a.loras.size(),
               so.api_key.empty() ? "" : ", API key required");
  signals.watch(server);
  server.listen();
  std::fprintf(stderr, "orion serve: stopped%s\n", rt ? (" (" + rt->summary() + ")").c_str() : "");
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "serve",
      "serve a model over HTTP with the OpenAI API (/v1/completions, /v1/chat/completions, /v1/models), LoRA "
      "adapters chosen per request, concurrent requests decoded together, and a web page at /.\n"
      "Example: orion serve --model stories15M.bin --lora sh=runs/sh/adapter.olora --runs runs\n"
      "         curl http://127.0.0.1:8080/v1/completions -d '{\"model\": \"sh\", \"prompt\": \"Once\"}'");
  cmd->add_option("--model,-m", a->model, "model file or Hugging Face folder")->required();
  cmd->add_option("--tokenizer", a->tokenizer, "tokenizer file (default: one found beside the model)");
  cmd->add_option("--lora", a->loras, "NAME=PATH: a LoRA adapter requests pick with \"model\": \"NAME\" (repeat)");
  cmd->add_option("--lora-scale", a->lora_scale, "multiplies every adapter's update alpha/r")->capture_default_str();
  cmd->add_option("--backend", a->backend,
                  "where the model runs: cpu (rows of a step in one pass over the weights), anesim or ane (the blocks "
                  "as ANE programs, the rows of a step one after another; docs/serving.md)")
      ->capture_default_str()->check(CLI::IsMember({"cpu", "anesim", "ane"}));
  cmd->add_option("--chip", a->chip, "anesim / ane: the chip the programs are compiled for")->capture_default_str();
  cmd->add_option("--lora-rank", a->lora_rank,
                  "anesim / ane: the highest adapter rank to serve, fixed at start so that adapters added at run time "
                  "compile nothing (default: the highest rank of --lora; none: no adapters)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--host", a->server.host, "address to listen on (loopback by default; 0.0.0.0: every interface)")->capture_default_str();
  cmd->add_option("--port", a->server.port, "port to listen on (0: any free port)")->capture_default_str()->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", a->server.api_key, "require \"Authorization: Bearer KEY\" on every endpoint but /health and /")
      ->envname("ORION_API_KEY");
  cmd->add_option("--parallel", a->engine.parallel, "requests decoded together (KV-cache slots)")->capture_default_str()->check(CLI::Range(1, 256));
  cmd->add_option("--ctx", a->engine.ctx, "tokens per sequence, prompt included (0: the model's)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--timeout", a->engine.timeout_s, "seconds a request may run; then it ends with finish_reason \"length\"")
      ->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--max-body", a->server.max_body_bytes, "largest request body in bytes (larger: 413)")->capture_default_str();
  cmd->add_option("--runs", a->runs, "folder of training runs (metrics.jsonl) for the web page's runs view");
  a->threads.add(cmd);
  a->dtype.add(cmd, "convert the weights to this precision at load (default: as stored)");
  a->kv_cache.add(cmd);
  cmd->callback([a] { run_serve(*a); });
}

}  // namespace orion::tools
