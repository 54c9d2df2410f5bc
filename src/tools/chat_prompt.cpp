#include "tools/chat_prompt.h"

#include <cctype>
#include <filesystem>
#include <optional>

#include "base/error.h"
#include "model/io/gguf_file.h"
#include "model/tokenizer/gguf_tokenizer.h"

namespace orion::tools {

namespace {

// A GGUF model's tokenizer.chat_template, with its BOS and EOS tokens' text; nullopt without one.
std::optional<ChatSetup> gguf_chat_setup(const std::string& path, const Tokenizer& tokenizer) {
  const io::GgufFile f = io::GgufFile::open(path);
  const io::GgufValue* tpl = f.find_value("tokenizer.chat_template");
  if (!tpl) return std::nullopt;
  if (tpl->type != io::GgufValueType::String) throw_input_error(path, "expected a string", "tokenizer.chat_template");
  auto token_text = [&](const char* key) -> std::string {
    const io::GgufValue* id = f.find_value(key);
    const io::GgufValue* tokens = f.find_value("tokenizer.ggml.tokens");
    if (!id || !tokens || !id->value.is_number_unsigned() || id->value.get<uint64_t>() >= tokens->value.size()) return {};
    return tokens->value[id->value.get<size_t>()].get<std::string>();
  };
  chat::ChatTemplate ct(tpl->value.get<std::string>(), path + ": tokenizer.chat_template",
                        token_text("tokenizer.ggml.bos_token_id"), token_text("tokenizer.ggml.eos_token_id"));
  // A file, not a folder: no generation_config.json; the turn ends at the tokenizer's EOS.
  std::vector<int> stops = chat::end_of_turn_ids(path, tokenizer, ct.eos_token());
  return ChatSetup{std::move(ct), std::move(stops)};
}

}  // namespace

ChatSetup load_chat_setup(const std::string& model_path, const Tokenizer& tokenizer) {
  namespace fs = std::filesystem;
  if (is_gguf_file(model_path))
    if (std::optional<ChatSetup> s = gguf_chat_setup(model_path, tokenizer)) return std::move(*s);
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
