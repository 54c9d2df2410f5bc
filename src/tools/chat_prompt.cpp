#include "tools/chat_prompt.h"

#include <cctype>
#include <filesystem>

namespace orion::tools {

ChatSetup load_chat_setup(const std::string& model_path, const Tokenizer& tokenizer) {
  namespace fs = std::filesystem;
  fs::path dir = fs::is_directory(model_path) ? fs::path(model_path) : fs::path(model_path).parent_path();
  if (dir.empty()) dir = ".";
  chat::ChatTemplate tpl = chat::ChatTemplate::from_model_folder(dir.string());
  std::vector<int> stops = chat::end_of_turn_ids(dir.string(), tokenizer, tpl.eos_token());
  return {std::move(tpl), std::move(stops)};
}

std::vector<int> encode_chat_prompt(const ChatSetup& setup, const std::string& rendered, const Tokenizer& tokenizer) {
  setup.chat_template.check_special_tokens(rendered, tokenizer);
  return tokenizer.encode(rendered, false);
}

std::string printable_piece(std::string piece) {
  const bool control = piece.size() == 1 && (uint8_t(piece[0]) < 0x20 || piece[0] == 0x7f) && !std::isspace(uint8_t(piece[0]));
  if (control) piece.clear();
  return piece;
}

}  // namespace orion::tools
