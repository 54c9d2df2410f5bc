// Readers for the files GPT-2 byte-level BPE comes in:
//   vocab.json + merges.txt   (Hugging Face names)   — {"token": id, ...} and "left right" lines
//   encoder.json + vocab.bpe  (OpenAI's names)       — the same content; vocab.bpe starts "#version"
// (A tokenizer.json, GPT-2's included, is read by hf_tokenizer_json.cpp.)
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/json_error.h"
#include "base/file.h"
#include "model/tokenizer/gpt2_bpe.h"
#include "model/tokenizer/tokenizer_json.h"

namespace orion {

using nlohmann::json;

json parse_json_file(const std::string& path) {
  std::string text = read_text_file(path);
  if (text.empty()) throw_input_error(path, "the file is empty", {}, -1, "expected a JSON document");
  try {
    return json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers like 1e7777 (fuzz_hf_config)
    throw_input_error(path, fmt::format("invalid JSON: {}", e.what()), {}, int64_t(json_error_byte(e)));
  }
}

// {"token": id, ...} → (token, id) pairs.
std::vector<std::pair<std::string, int>> read_vocab_object(const json& obj, const std::string& path,
                                                           const std::string& field) {
  if (!obj.is_object()) throw_input_error(path, "expected an object mapping each token to its id", field);
  std::vector<std::pair<std::string, int>> vocab;
  vocab.reserve(obj.size());
  for (const auto& [token, id] : obj.items()) {
    if (!id.is_number_integer())
      throw_input_error(path, fmt::format("the id of token '{}' is not an integer", token), field);
    if (id.is_number_unsigned() ? id.get<uint64_t>() > uint64_t(INT32_MAX) : id.get<int64_t>() < 0)
      throw_input_error(path, fmt::format("the id of token '{}' is out of range: {}", token, id.dump()), field);
    vocab.emplace_back(token, id.get<int>());
  }
  return vocab;
}

namespace {

// merges.txt / vocab.bpe: an optional "#version" line, then one "left right" pair per line.
void read_merges_text(const std::string& path, Gpt2BpeSpec& spec) {
  std::string text = read_text_file(path);
  int line_no = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
    size_t space = line.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string::npos)
      throw_input_error(path, fmt::format("expected two tokens separated by one space, found '{}'", line),
                        fmt::format("line {}", line_no));
    spec.merges.push_back({line.substr(0, space), line.substr(space + 1)});
    spec.merge_lines.push_back(line_no);
  }
}

}  // namespace

Gpt2BpeSpec read_gpt2_bpe_spec(const std::string& vocab_path, const std::string& merges_path) {
  Gpt2BpeSpec spec;
  spec.vocab_file = vocab_path;
  spec.merges_file = merges_path;
  if (!file_exists(merges_path))
    throw_input_error(merges_path, "the merges file is missing", {}, -1,
                      fmt::format("byte-level BPE needs the merges beside {} (merges.txt or vocab.bpe)", vocab_path));
  spec.vocab = read_vocab_object(parse_json_file(vocab_path), vocab_path, {});
  read_merges_text(merges_path, spec);
  // Without a tokenizer.json there is no list of special tokens; GPT-2 has exactly one.
  for (const auto& [token, id] : spec.vocab)
    if (token == "<|endoftext|>") spec.special.emplace_back(token, id);
  return spec;
}

std::unique_ptr<Tokenizer> load_gpt2_bpe(const std::string& vocab_path, const std::string& merges_path) {
  return std::make_unique<Gpt2BpeTokenizer>(read_gpt2_bpe_spec(vocab_path, merges_path));
}

}  // namespace orion
