#include "serve/server.h"

#include <httplib.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <random>

#include "base/error.h"
#include "serve/openai_api.h"
#include "serve/runs.h"
#include "serve/web_assets.h"

namespace orion::serve {
namespace {

using nlohmann::json;

void reply(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump_json(body), "application/json");
}

void reply_error(httplib::Response& res, int status, const std::string& message, const std::string& param = {},
                 const std::string& code = {}) {
  const char* type = status == 401   ? "authentication_error"
                     : status == 404 ? "not_found_error"
                     : status >= 500 ? "server_error"
                                     : "invalid_request_error";
  reply(res, status, error_json(message, type, param, code));
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

const char* status_message(int status) {
  switch (status) {
    case 404: return "no such endpoint";
    case 405: return "method not allowed";
    case 413: return "the request body is too large";
    case 400: return "bad request";
    default: return "request failed";
  }
}

}  // namespace

struct Server::Impl {
  Engine& engine;
  ServedModel model;
  ServerOptions opt;
  httplib::Server http;
  std::atomic<int64_t> next_id{1};

  Impl(Engine& e, ServedModel m, ServerOptions o) : engine(e), model(std::move(m)), opt(std::move(o)) {}

  void routes();
  bool authorized(const httplib::Request& req) const {
    return opt.api_key.empty() || req.path == "/health" || req.path == "/" ||
           req.get_header_value("Authorization") == "Bearer " + opt.api_key;
  }
  std::vector<int> prompt_ids(const CompletionRequest& r) const;
  GenerationParams generation_params(const CompletionRequest& r, std::vector<int> prompt) const;
  void complete(const httplib::Request& req, httplib::Response& res, bool chat);
  void stream(httplib::Response& res, const CompletionRequest& r, std::shared_ptr<Job> job, const std::string& id);
  void add_adapter(const httplib::Request& req, httplib::Response& res);
};

// The prompt's ids: the chat template's rendering of the messages (or the messages joined by
// newlines for a model without one), or the completion prompt after BOS.
std::vector<int> Server::Impl::prompt_ids(const CompletionRequest& r) const {
  const Tokenizer& tok = *model.tokenizer;
  if (!r.chat) return tok.encode(r.prompt, true);
  if (model.chat_template) {
    const std::string rendered = model.chat_template->render(r.messages);
    model.chat_template->check_special_tokens(rendered, tok);
    return tok.encode(rendered, false);
  }
  std::string text;
  for (const chat::Message& m : r.messages) text += m.content + "\n";
  return tok.encode(text, true);
}

GenerationParams Server::Impl::generation_params(const CompletionRequest& r, std::vector<int> prompt) const {
  GenerationParams p;
  p.prompt = std::move(prompt);
  p.adapter = r.model;
  p.max_tokens = r.max_tokens.value_or(r.chat ? engine.context() : 16);
  p.sampler.temperature = r.temperature;
  p.sampler.top_p = r.top_p;
  p.sampler.top_k = r.top_k;
  p.sampler.seed = r.seed ? *r.seed : std::random_device{}() | (uint64_t(std::random_device{}()) << 32);
  p.stop_ids = model.stop_ids;
  if (r.chat) p.stop_ids.insert(p.stop_ids.end(), model.chat_stop_ids.begin(), model.chat_stop_ids.end());
  p.stop_strings = r.stop;
  return p;
}

void Server::Impl::complete(const httplib::Request& req, httplib::Response& res, bool chat) {
  CompletionRequest r;
  std::shared_ptr<Job> job;
  try {
    r = parse_completion_request(req.body, chat);
    if (!engine.has_model(r.model))
      return reply_error(res, 404, fmt::format("the model '{}' does not exist (GET /v1/models lists them)", r.model),
                         "model", "model_not_found");
    job = engine.submit(generation_params(r, prompt_ids(r)));
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::Runtime) return reply_error(res, 503, e.message());
    const std::string& field = e.context().field;
    return reply_error(res, 400, e.message(), field, field == "prompt" ? "context_length_exceeded" : "");
  }
  const std::string id = fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", next_id++);
  if (r.stream) return stream(res, r, std::move(job), id);
  CompletionResult result{job->wait_all(), job->finish_reason, job->prompt_tokens, job->completion_tokens};
  if (result.finish_reason == "error") return reply_error(res, 500, job->error);
  if (result.finish_reason == "cancelled") return reply_error(res, 503, "the request was cancelled: the server is shutting down");
  reply(res, 200, completion_json(r, id, unix_now(), result));
}

// Server-sent events: one "data: {chunk}" event per piece of text, a last chunk with finish_reason,
// the usage when asked for, then "data: [DONE]". A write that fails (the client left) ends the
// stream and cancels the job, freeing its slot at the scheduler's next step.
void Server::Impl::stream(httplib::Response& res, const CompletionRequest& r, std::shared_ptr<Job> job,
                          const std::string& id) {
  struct State {
    bool first = true, done = false;
    std::chrono::steady_clock::time_point last_write = std::chrono::steady_clock::now();
  };
  auto st = std::make_shared<State>();
  const int64_t created = unix_now();
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [r, job, id, created, st](size_t, httplib::DataSink& sink) {
        auto send = [&](const std::string& data) {
          st->last_write = std::chrono::steady_clock::now();
          const std::string event = "data: " + data + "\n\n";
          return sink.write(event.data(), event.size());
        };
        if (r.chat && st->first) {  // the assistant's role comes first, before any text
          st->first = false;
          return send(dump_json(chunk_json(r, id, created, "", "", true)));
        }
        auto [text, finished] = job->next(std::chrono::milliseconds(200));
        if (!text.empty() && !send(dump_json(chunk_json(r, id, created, text, "", false)))) return false;
        if (!finished) {
          // A comment line now and then: a client that left makes the write fail even while queued.
          if (std::chrono::steady_clock::now() - st->last_write > std::chrono::seconds(1)) {
            st->last_write = std::chrono::steady_clock::now();
            return sink.write(": waiting\n\n", 11);
          }
          return true;
        }
        if (job->finish_reason == "error" || job->finish_reason == "cancelled") {
          const std::string why = job->finish_reason == "error" ? job->error : "the server is shutting down";
          send(dump_json(error_json(why, "server_error")));
        } else {
          send(dump_json(chunk_json(r, id, created, "", job->finish_reason, false)));
          if (r.include_usage) {
            json usage = chunk_json(r, id, created, "", "", false);
            usage["choices"] = json::array();
            usage["usage"] = usage_json(job->prompt_tokens, job->completion_tokens);
            send(dump_json(usage));
          }
        }
        send("[DONE]");
        sink.done();
        return true;
      },
      [job](bool) { job->cancel(); });  // finished: no effect; broken off: frees the slot
}

void Server::Impl::add_adapter(const httplib::Request& req, httplib::Response& res) {
  json j = json::parse(req.body, nullptr, false);
  if (!j.is_object()) return reply_error(res, 400, "the body must be a JSON object {\"name\", \"path\"}");
  for (const auto& [key, value] : j.items())
    if (key != "name" && key != "path") return reply_error(res, 400, fmt::format("unknown field '{}'", key), key);
  for (const char* key : {"name", "path"})
    if (!j.contains(key) || !j[key].is_string() || j[key].get<std::string>().empty())
      return reply_error(res, 400, fmt::format("'{}' must be a non-empty string", key), key);
  const std::string name = j["name"], path = j["path"];
  if (name == "base" || name.find('/') != std::string::npos)
    return reply_error(res, 400, fmt::format("'{}' cannot name an adapter", name), "name");
  if (engine.has_model(name))
    return reply_error(res, 409, fmt::format("an adapter named '{}' is loaded already (DELETE it first)", name), "name");
  try {
    engine.add_adapter(name, model.load_adapter(path));
  } catch (const Error& e) {
    return reply_error(res, 400, e.what(), "path");
  }
  reply(res, 201, {{"id", name}, {"object", "model"}, {"owned_by", "orion"}, {"path", path}});
}

void Server::Impl::routes() {
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (authorized(req)) return httplib::Server::HandlerResponse::Unhandled;
    reply_error(res, 401, "a valid API key is required (Authorization: Bearer KEY)", {}, "invalid_api_key");
    return httplib::Server::HandlerResponse::Handled;
  });
  http.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.body.empty()) reply_error(res, res.status, status_message(res.status));
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    reply_error(res, 500, what);
  });
  http.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(web_index_html()), "text/html; charset=utf-8");
  });
  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const EngineStats s = engine.stats();
    json body = {{"status", "ok"}, {"slots", s.slots}, {"active", s.active}, {"queued", s.queued}};
    if (s.compiles >= 0) body["compiles"] = s.compiles;  // the ANE path: programs compiled so far
    reply(res, 200, body);
  });
  http.Get("/v1/stats", [this](const httplib::Request&, httplib::Response& res) {
    const EngineStats s = engine.stats();
    json body = {{"slots", s.slots}, {"active", s.active}, {"queued", s.queued}, {"decode_steps", s.decode_steps},
                 {"decoded_rows", s.decoded_rows}, {"prompt_tokens", s.prompt_tokens}, {"step_seconds", s.step_seconds},
                 {"prefill_seconds", s.prefill_seconds}, {"completed", s.completed}, {"cancelled", s.cancelled}};
    if (s.compiles >= 0) body["compiles"] = s.compiles;
    reply(res, 200, body);
  });
  http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    json data = json::array({{{"id", "base"}, {"object", "model"}, {"created", 0}, {"owned_by", "orion"}}});
    for (const std::string& name : engine.adapter_names())
      data.push_back({{"id", name}, {"object", "model"}, {"created", 0}, {"owned_by", "orion"}, {"parent", "base"}});
    reply(res, 200, {{"object", "list"}, {"data", data}});
  });
  http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) { complete(req, res, false); });
  http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) { complete(req, res, true); });
  http.Post("/v1/adapters", [this](const httplib::Request& req, httplib::Response& res) { add_adapter(req, res); });
  http.Delete(R"(/v1/adapters/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string name = req.matches[1];
    if (!engine.remove_adapter(name))
      return reply_error(res, 404, fmt::format("no adapter named '{}'", name), "name", "model_not_found");
    reply(res, 200, {{"id", name}, {"object", "model"}, {"deleted", true}});
  });
  http.Get("/v1/runs", [this](const httplib::Request&, httplib::Response& res) {
    reply(res, 200, {{"dir", opt.runs_dir}, {"runs", list_runs(opt.runs_dir)}});
  });
  http.Get("/v1/runs/metrics", [this](const httplib::Request& req, httplib::Response& res) {
    try {
      const std::string from = req.get_param_value("from");
      reply(res, 200, read_run_metrics(opt.runs_dir, req.get_param_value("run"), from.empty() ? 0 : std::stoul(from)));
    } catch (const Error& e) {
      reply_error(res, 404, e.message(), "run");
    } catch (const std::exception&) {
      reply_error(res, 400, "'from' must be a line number", "from");
    }
  });
}

Server::Server(Engine& engine, ServedModel model, ServerOptions options)
    : impl_(std::make_unique<Impl>(engine, std::move(model), std::move(options))) {
  const int threads = impl_->opt.http_threads;
  impl_->http.new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
  impl_->http.set_payload_max_length(impl_->opt.max_body_bytes);
  impl_->routes();
}

Server::~Server() { stop(); }

int Server::bind() {
  // A client that leaves mid-stream must make the write fail, not kill the process.
  ::signal(SIGPIPE, SIG_IGN);
  const ServerOptions& o = impl_->opt;
  const int port = o.port == 0 ? impl_->http.bind_to_any_port(o.host) : (impl_->http.bind_to_port(o.host, o.port) ? o.port : -1);
  if (port <= 0)
    throw_runtime_error(fmt::format("cannot listen on {}:{}", o.host, o.port), {},
                        "is another server using the port? pick one with --port");
  return port;
}

void Server::listen() { impl_->http.listen_after_bind(); }

void Server::stop() {
  impl_->engine.shutdown();  // running and queued requests end as cancelled; their handlers return
  impl_->http.stop();
}

}  // namespace orion::serve
