// What `orion chat` and `orion generate --chat` share: the model folder's chat template and
// end-of-turn ids, a conversation turned into prompt ids, and a streamed token made printable.
#pragma once
#include <string>
#include <vector>

#include "model/chat/chat_template.h"
#include "model/tokenizer/tokenizer.h"

namespace orion::tools {

struct ChatSetup {
  chat::ChatTemplate chat_template;
  std::vector<int> stop_ids;  // end of the assistant's turn (generation_config.json, eos)
};

// The chat template of the folder holding `model_path` (or the folder itself) and its end-of-turn
// ids; a GGUF model's own tokenizer.chat_template when it has one. A folder without a chat template: Input error whose hint is `orion generate` without --chat.
ChatSetup load_chat_setup(const std::string& model_path, const Tokenizer& tokenizer);

// The rendered prompt's token ids. The text carries the special tokens as text ("<|im_start|>"):
// the tokenizer must map each to its id (checked first: Input error naming the token). No BOS is
// added: a template that wants one writes bos_token itself.
std::vector<int> encode_chat_prompt(const ChatSetup& setup, const std::string& rendered, const Tokenizer& tokenizer);

// One streamed token's text: a lone ASCII control byte (a raw-byte token such as <0x10>) would
// garble the terminal and is dropped, as llama2.c does; bytes ≥ 0x80 are parts of UTF-8 characters.
std::string printable_piece(std::string piece);

}  // namespace orion::tools
