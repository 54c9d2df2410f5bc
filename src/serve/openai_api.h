// The OpenAI HTTP API as Orion serves it: request bodies of /v1/completions and
// /v1/chat/completions parsed and checked field by field, and the JSON of responses, stream chunks
// and errors. A bad request is an orion::Error of kind Usage whose context field names the
// offending parameter; the server answers it with status 400 and an OpenAI-style error body.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "model/chat/chat_template.h"

namespace orion::serve {

struct CompletionRequest {
  bool chat = false;                   // /v1/chat/completions: messages; else prompt
  std::string model;                   // "base" or an adapter's name
  std::string prompt;                  // completions
  std::vector<chat::Message> messages;  // chat
  std::optional<int> max_tokens;       // absent: completions 16 (as OpenAI), chat until the context is full
  float temperature = 1.0f;            // 0: greedy
  float top_p = 1.0f;
  int top_k = 0;                       // an extension (llama.cpp's server has it too); 0: off
  std::optional<uint64_t> seed;        // absent: a random seed
  std::vector<std::string> stop;       // up to 4 strings that end the text (not included)
  bool stream = false;
  bool include_usage = false;          // stream_options.include_usage: a last chunk with usage
};

// Parses and checks a request body. Usage error (field = the parameter) for malformed JSON, an
// unknown field, a wrong type or a value out of range.
CompletionRequest parse_completion_request(const std::string& body, bool chat);

// {"error": {"message", "type", "param", "code"}}; param null when empty.
nlohmann::json error_json(const std::string& message, const std::string& type, const std::string& param = {},
                          const std::string& code = {});

struct CompletionResult {
  std::string text, finish_reason;  // "stop" or "length"
  int prompt_tokens = 0, completion_tokens = 0;
};

// A whole response (non-streaming): text_completion or chat.completion.
nlohmann::json completion_json(const CompletionRequest& r, const std::string& id, int64_t created,
                               const CompletionResult& result);
// One streamed chunk: a piece of text (finish_reason empty), or the last chunk (finish_reason set).
// The first chat chunk (first = true) carries the assistant role.
nlohmann::json chunk_json(const CompletionRequest& r, const std::string& id, int64_t created, const std::string& text,
                          const std::string& finish_reason, bool first);
nlohmann::json usage_json(int prompt_tokens, int completion_tokens);
// JSON text that never throws on bytes that are not UTF-8 (they become U+FFFD).
std::string dump_json(const nlohmann::json& j);

}  // namespace orion::serve
