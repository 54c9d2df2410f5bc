#include "model/chat/chat_template.h"

#include <algorithm>
#include <clocale>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/file.h"
#include "base/json_error.h"
#include "model/tokenizer/tokenizer.h"

namespace orion::chat {

using json = nlohmann::json;

namespace {

json read_json(const std::string& path) {
  const std::string text = read_text_file(path);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw_input_error(path, std::string("not valid JSON: ") + e.what(), {}, int64_t(json_error_byte(e)));
  }
}

// A special token in tokenizer_config.json: "<s>", or {"content": "<s>", …} (older files), or null.
std::string token_text(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("content") && j["content"].is_string()) return j["content"].get<std::string>();
  return {};
}

const char* kNoTemplateHint = "this model has no chat template; use `orion generate` without --chat";

}  // namespace

jinja::Value strftime_now_function(const std::tm& now) {
  return jinja::Value(jinja::Function([now](jinja::CallArgs& a) {
    const std::string fmt = a.get(0, "format").str();
    // %b and %A are locale-dependent; Python's strftime in a fresh process uses the C locale too.
    char buf[256];
    const std::tm t = now;
    const size_t n = std::strftime(buf, sizeof buf, fmt.c_str(), &t);
    return jinja::Value(std::string(buf, n));
  }));
}

ChatTemplate::ChatTemplate(const std::string& source, std::string name, std::string bos_token, std::string eos_token)
    : template_(source, std::move(name)), source_(source), bos_(std::move(bos_token)), eos_(std::move(eos_token)) {}

bool ChatTemplate::folder_has_template(const std::string& dir) {
  const std::string cfg = dir + "/tokenizer_config.json";
  if (file_exists(dir + "/chat_template.jinja")) return true;
  if (!file_exists(cfg)) return false;
  const json j = read_json(cfg);
  return j.contains("chat_template") && !j["chat_template"].is_null();
}

ChatTemplate ChatTemplate::from_model_folder(const std::string& dir) {
  const std::string cfg_path = dir + "/tokenizer_config.json";
  json cfg = file_exists(cfg_path) ? read_json(cfg_path) : json::object();
  std::string source, name = cfg_path + ": chat_template";
  const json tpl = cfg.contains("chat_template") ? cfg["chat_template"] : json();
  if (tpl.is_string()) {
    source = tpl.get<std::string>();
  } else if (tpl.is_array()) {  // [{"name": "default", "template": …}, {"name": "tool_use", …}]
    for (const json& t : tpl)
      if (t.is_object() && t.value("name", "") == "default" && t.contains("template") && t["template"].is_string())
        source = t["template"].get<std::string>();
    if (source.empty())
      throw_input_error(cfg_path, "the list of chat templates has none named \"default\"", "chat_template", -1,
                        kNoTemplateHint);
  } else if (!tpl.is_null()) {
    throw_input_error(cfg_path, "expected a string or a list of {name, template}", "chat_template");
  } else if (file_exists(dir + "/chat_template.jinja")) {
    name = dir + "/chat_template.jinja";
    source = read_text_file(name);
  } else {
    throw Error(ErrorKind::Input,
                file_exists(cfg_path) ? "tokenizer_config.json has no chat_template"
                                      : "no tokenizer_config.json (where a model's chat template is)",
                {file_exists(cfg_path) ? cfg_path : dir, {}, -1, kNoTemplateHint});
  }
  ChatTemplate ct(source, name, cfg.contains("bos_token") ? token_text(cfg["bos_token"]) : "",
                  cfg.contains("eos_token") ? token_text(cfg["eos_token"]) : "");
  if (cfg.contains("added_tokens_decoder") && cfg["added_tokens_decoder"].is_object())
    for (const auto& [id, t] : cfg["added_tokens_decoder"].items())
      if (t.is_object() && t.value("special", false)) ct.special_.push_back(token_text(t));
  return ct;
}

std::string ChatTemplate::render(const std::vector<Message>& messages, const RenderOptions& options) const {
  jinja::List msgs;
  for (const Message& m : messages) msgs.emplace_back(jinja::Dict{{"role", m.role}, {"content", m.content}});
  jinja::Dict vars = {{"messages", jinja::Value(std::move(msgs))},
                      {"tools", jinja::Value::none()},
                      {"add_generation_prompt", options.add_generation_prompt}};
  if (!bos_.empty()) vars.emplace_back("bos_token", bos_);
  if (!eos_.empty()) vars.emplace_back("eos_token", eos_);
  std::tm now{};
  if (options.now) {
    now = *options.now;
  } else {
    const std::time_t t = std::time(nullptr);
    localtime_r(&t, &now);
  }
  vars.emplace_back("strftime_now", strftime_now_function(now));
  for (const auto& extra : options.extra) {  // a named pair, not a structured binding: clang 14's lambdas cannot capture those
    auto it = std::find_if(vars.begin(), vars.end(), [&](const auto& kv) { return kv.first == extra.first; });
    if (it != vars.end()) it->second = extra.second;
    else vars.emplace_back(extra.first, extra.second);
  }
  return template_.render(vars);
}

void ChatTemplate::check_special_tokens(const std::string& rendered, const Tokenizer& tokenizer) const {
  std::vector<std::string> tokens = special_;
  tokens.push_back(bos_);
  tokens.push_back(eos_);
  // The one written first is named.
  std::erase_if(tokens, [&](const std::string& t) { return t.empty() || rendered.find(t) == std::string::npos; });
  std::sort(tokens.begin(), tokens.end(), [&](const auto& x, const auto& y) { return rendered.find(x) < rendered.find(y); });
  for (const std::string& t : tokens) {
    if (!tokenizer.token_id(t))
      throw Error(ErrorKind::Input,
                  fmt::format("the chat template writes the special token '{}', which the {} tokenizer cannot encode as "
                              "one token",
                              t, tokenizer.name()),
                  {name(), {}, -1, "use the model's own tokenizer.json (--tokenizer), which lists its special tokens"});
  }
}

std::vector<int> end_of_turn_ids(const std::string& dir, const Tokenizer& tokenizer, const std::string& eos_token) {
  std::vector<int> ids;
  auto add = [&](int id) {
    if (id >= 0 && std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  };
  const std::string path = dir + "/generation_config.json";
  if (file_exists(path)) {
    const json g = read_json(path);
    const json e = g.contains("eos_token_id") ? g["eos_token_id"] : json();
    try {
      if (e.is_array())
        for (const json& id : e) add(json_number<int>(id));
      else if (!e.is_null())
        add(json_number<int>(e));
    } catch (const json::exception&) {
      throw_input_error(path, "expected an integer or a list of integers", "eos_token_id");
    }
  }
  add(tokenizer.eos_id());
  if (!eos_token.empty())
    if (auto id = tokenizer.token_id(eos_token)) add(*id);
  return ids;
}

}  // namespace orion::chat
