// Chat templates: a conversation [{role, content}] → the prompt text an instruction-tuned model was
// trained on, as the model's tokenizer_config.json says (its Jinja `chat_template`, rendered with
// model/chat/jinja.h the way transformers' apply_chat_template does), and the token ids that end
// the model's turn (generation_config.json's eos_token_id).
#pragma once
#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include "model/chat/jinja.h"

namespace orion {
class Tokenizer;
}

namespace orion::chat {

struct Message {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

struct RenderOptions {
  bool add_generation_prompt = true;  // end with the header of the assistant's turn
  jinja::Dict extra;                  // more variables (enable_thinking, tools, date_string, …)
  std::optional<std::tm> now;         // the date strftime_now() formats (default: the local time)
};

// transformers' strftime_now(format): `now` formatted with strftime in the C locale.
jinja::Value strftime_now_function(const std::tm& now);

class ChatTemplate {
 public:
  // `name` is what errors name (a file, or "DIR/tokenizer_config.json").
  ChatTemplate(const std::string& source, std::string name, std::string bos_token = {}, std::string eos_token = {});

  // The template of a Hugging Face model folder: tokenizer_config.json's chat_template (a string,
  // or a list of {name, template}: the one named "default"), else a chat_template.jinja beside it;
  // its bos_token and eos_token (strings, or {"content": …} objects) and special tokens. A folder
  // with neither: Input error with a hint (use `orion generate` without --chat).
  static ChatTemplate from_model_folder(const std::string& dir);
  // Whether the folder has a chat template (from_model_folder would succeed in finding one).
  static bool folder_has_template(const std::string& dir);

  // The prompt for `messages`, with tools=none, bos_token and eos_token (when the model has them),
  // strftime_now and options.extra as variables.
  std::string render(const std::vector<Message>& messages, const RenderOptions& options = {}) const;

  // Refuses a tokenizer that cannot encode the special tokens the rendered text contains (the
  // tokenizer_config.json's special tokens, bos and eos) as single ids: Input error naming the token.
  void check_special_tokens(const std::string& rendered, const Tokenizer& tokenizer) const;

  const std::string& bos_token() const { return bos_; }
  const std::string& eos_token() const { return eos_; }
  const std::string& name() const { return template_.name(); }
  const std::string& source() const { return source_; }  // the Jinja text

 private:
  jinja::Template template_;
  std::string source_, bos_, eos_;
  std::vector<std::string> special_;  // special tokens' text (tokenizer_config added_tokens_decoder)
};

// The ids that end the assistant's turn: generation_config.json's eos_token_id in `dir` (an int or
// a list; absent: none), the tokenizer's eos id, and the id of the template's eos_token text.
std::vector<int> end_of_turn_ids(const std::string& dir, const Tokenizer& tokenizer, const std::string& eos_token);

}  // namespace orion::chat
