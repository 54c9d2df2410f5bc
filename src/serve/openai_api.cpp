#include "serve/openai_api.h"

#include <set>

#include "base/error.h"

namespace orion::serve {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& param, const std::string& message) { throw_usage_error(message, param); }

const char* type_name(const json& v) {
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "null";
}

double number(const json& v, const std::string& param, double lo, double hi) {
  if (!v.is_number()) bad(param, fmt::format("'{}' must be a number, not {}", param, type_name(v)));
  const double x = v.get<double>();
  if (!(x >= lo && x <= hi)) bad(param, fmt::format("'{}' is {}; it must be between {} and {}", param, x, lo, hi));
  return x;
}

int64_t integer(const json& v, const std::string& param, int64_t lo, int64_t hi) {
  if (!v.is_number_integer() && !v.is_number_unsigned())
    bad(param, fmt::format("'{}' must be an integer, not {}", param, v.is_number() ? "a fraction" : type_name(v)));
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))
    bad(param, fmt::format("'{}' is out of range", param));
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) bad(param, fmt::format("'{}' is {}; it must be between {} and {}", param, x, lo, hi));
  return x;
}

std::string string(const json& v, const std::string& param) {
  if (!v.is_string()) bad(param, fmt::format("'{}' must be a string, not {}", param, type_name(v)));
  return v.get<std::string>();
}

// A message's content: a string, or an array of {"type": "text", "text": …} parts (joined).
std::string message_content(const json& v, const std::string& param) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) bad(param, fmt::format("'{}' must be a string or an array of text parts", param));
  std::string text;
  for (const json& part : v) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text"))
      bad(param, "only text parts ({\"type\": \"text\", \"text\": ...}) are supported");
    text += string(part["text"], param + ".text");
  }
  return text;
}

std::vector<chat::Message> messages(const json& v) {
  if (!v.is_array() || v.empty()) bad("messages", "'messages' must be a non-empty array");
  std::vector<chat::Message> out;
  for (size_t i = 0; i < v.size(); i++) {
    const std::string p = fmt::format("messages[{}]", i);
    const json& m = v[i];
    if (!m.is_object()) bad(p, fmt::format("'{}' must be an object", p));
    for (const auto& [key, value] : m.items())
      if (key != "role" && key != "content" && key != "name") bad(p + "." + key, fmt::format("unknown field '{}' in {}", key, p));
    if (!m.contains("role") || !m.contains("content")) bad(p, fmt::format("'{}' needs a role and a content", p));
    const std::string role = string(m["role"], p + ".role");
    if (role != "system" && role != "user" && role != "assistant" && role != "developer")
      bad(p + ".role", fmt::format("unknown role '{}' (system, developer, user or assistant)", role));
    out.push_back({role == "developer" ? "system" : role, message_content(m["content"], p + ".content")});
  }
  return out;
}

std::vector<std::string> stop_strings(const json& v) {
  std::vector<std::string> out;
  if (v.is_null()) return out;
  if (v.is_string()) out.push_back(v.get<std::string>());
  else if (v.is_array())
    for (const json& s : v) out.push_back(string(s, "stop"));
  else
    bad("stop", "'stop' must be a string or an array of strings");
  if (out.size() > 4) bad("stop", "'stop' holds at most 4 strings");
  for (const std::string& s : out)
    if (s.empty()) bad("stop", "a stop string must not be empty");
  return out;
}

// The prompt of /v1/completions: a string, or an array of one string.
std::string prompt_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array() && v.size() == 1 && v[0].is_string()) return v[0].get<std::string>();
  bad("prompt", "'prompt' must be a string (or an array of one string)");
}

}  // namespace

CompletionRequest parse_completion_request(const std::string& body, bool chat) {
  json j;
  try {
    j = json::parse(body);
  } catch (const json::parse_error& e) {
    bad("", fmt::format("the body is not valid JSON: {}", e.what()));
  }
  if (!j.is_object()) bad("", "the body must be a JSON object");
  static const std::set<std::string> common = {"model", "max_tokens", "temperature", "top_p", "top_k", "seed",
                                               "stop", "n", "stream", "stream_options", "user"};
  CompletionRequest r;
  r.chat = chat;
  for (const auto& [key, value] : j.items()) {
    const bool own = chat ? key == "messages" || key == "max_completion_tokens" : key == "prompt";
    if (!own && !common.count(key)) bad(key, fmt::format("unknown field '{}'", key));
  }
  if (!j.contains("model")) bad("model", "'model' is required (\"base\" or an adapter's name: GET /v1/models)");
  r.model = string(j["model"], "model");
  if (chat) {
    if (!j.contains("messages")) bad("messages", "'messages' is required");
    r.messages = messages(j["messages"]);
  } else {
    if (!j.contains("prompt")) bad("prompt", "'prompt' is required");
    r.prompt = prompt_text(j["prompt"]);
  }
  for (const char* key : {"max_tokens", "max_completion_tokens"})
    if (j.contains(key) && !j[key].is_null()) r.max_tokens = int(integer(j[key], key, 1, 1 << 20));
  if (j.contains("temperature") && !j["temperature"].is_null()) r.temperature = float(number(j["temperature"], "temperature", 0, 2));
  if (j.contains("top_p") && !j["top_p"].is_null()) {
    r.top_p = float(number(j["top_p"], "top_p", 0, 1));
    if (r.top_p <= 0) bad("top_p", "'top_p' must be greater than 0");
  }
  if (j.contains("top_k") && !j["top_k"].is_null()) r.top_k = int(integer(j["top_k"], "top_k", 0, 1 << 20));
  if (j.contains("seed") && !j["seed"].is_null()) r.seed = uint64_t(integer(j["seed"], "seed", 0, INT64_MAX));
  if (j.contains("stop")) r.stop = stop_strings(j["stop"]);
  if (j.contains("n") && !j["n"].is_null() && integer(j["n"], "n", 1, 128) != 1) bad("n", "only n = 1 is supported");
  if (j.contains("stream") && !j["stream"].is_null()) {
    if (!j["stream"].is_boolean()) bad("stream", fmt::format("'stream' must be a boolean, not {}", type_name(j["stream"])));
    r.stream = j["stream"].get<bool>();
  }
  if (j.contains("stream_options") && !j["stream_options"].is_null()) {
    const json& o = j["stream_options"];
    if (!o.is_object()) bad("stream_options", "'stream_options' must be an object");
    for (const auto& [key, value] : o.items()) {
      if (key != "include_usage") bad("stream_options." + key, fmt::format("unknown field '{}' in stream_options", key));
      if (!value.is_boolean()) bad("stream_options.include_usage", "'include_usage' must be a boolean");
      r.include_usage = value.get<bool>();
    }
  }
  if (j.contains("user")) string(j["user"], "user");
  return r;
}

json error_json(const std::string& message, const std::string& type, const std::string& param, const std::string& code) {
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

json usage_json(int prompt_tokens, int completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

json completion_json(const CompletionRequest& r, const std::string& id, int64_t created, const CompletionResult& res) {
  json choice = {{"index", 0}, {"finish_reason", res.finish_reason}, {"logprobs", nullptr}};
  if (r.chat) choice["message"] = {{"role", "assistant"}, {"content", res.text}};
  else choice["text"] = res.text;
  return {{"id", id},
          {"object", r.chat ? "chat.completion" : "text_completion"},
          {"created", created},
          {"model", r.model},
          {"choices", json::array({choice})},
          {"usage", usage_json(res.prompt_tokens, res.completion_tokens)}};
}

json chunk_json(const CompletionRequest& r, const std::string& id, int64_t created, const std::string& text,
                const std::string& finish_reason, bool first) {
  json choice = {{"index", 0}, {"finish_reason", finish_reason.empty() ? json(nullptr) : json(finish_reason)},
                 {"logprobs", nullptr}};
  if (r.chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || first) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  return {{"id", id},
          {"object", r.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", created},
          {"model", r.model},
          {"choices", json::array({choice})}};
}

std::string dump_json(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace orion::serve
