// Readers for the files GPT-2 byte-level BPE comes in:
//   vocab.json + merges.txt   (Hugging Face names)   — {"token": id, ...} and "left right" lines
//   encoder.json + vocab.bpe  (OpenAI's names)       — the same content; vocab.bpe starts "#version"
//   tokenizer.json            (Hugging Face)         — model {type "BPE", vocab, merges}, added_tokens
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/json_error.h"
#include "base/file.h"
#include "model/tokenizer/gpt2_bpe.h"

namespace orion {
namespace {

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
    vocab.emplace_back(token, id.get<int>());
  }
  return vocab;
}

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

// tokenizer.json "merges": ["left right", ...] (older files) or [["left", "right"], ...] (newer).
void read_merges_json(const json& merges, const std::string& path, Gpt2BpeSpec& spec) {
  if (!merges.is_array()) throw_input_error(path, "expected an array of merges", "model.merges");
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    std::string field = fmt::format("model.merges[{}]", i);
    if (m.is_string()) {
      const std::string& s = m.get_ref<const std::string&>();
      size_t space = s.find(' ');
      if (space == std::string::npos || space == 0 || space + 1 == s.size())
        throw_input_error(path, fmt::format("expected \"left right\", found \"{}\"", s), field);
      spec.merges.push_back({s.substr(0, space), s.substr(space + 1)});
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      spec.merges.push_back({m[0].get<std::string>(), m[1].get<std::string>()});
    } else {
      throw_input_error(path, "expected a string \"left right\" or an array [left, right]", field);
    }
    spec.merge_lines.push_back(int(i));
  }
}

// Only GPT-2's byte-level pre-tokeniser is implemented; other regexes (Llama 3, GPT-4) would
// silently give different tokens, so they are refused.
void check_pre_tokenizer(const json& root, const std::string& path, Gpt2BpeSpec& spec) {
  auto it = root.find("pre_tokenizer");
  if (it == root.end() || it->is_null())
    throw_input_error(path, "no pre_tokenizer: only GPT-2 style byte-level BPE is supported", "pre_tokenizer");
  const json& pre = *it;
  std::string type = pre.value("type", "");
  if (type != "ByteLevel" || !pre.value("use_regex", true))
    throw_input_error(path, fmt::format("pre_tokenizer type '{}' is not supported", type), "pre_tokenizer", -1,
                      "only GPT-2 style byte-level BPE (pre_tokenizer ByteLevel) is supported; for "
                      "SentencePiece models pass the tokenizer.model file");
  spec.add_prefix_space = pre.value("add_prefix_space", false);
}

}  // namespace

std::unique_ptr<Tokenizer> load_gpt2_bpe(const std::string& vocab_path, const std::string& merges_path) {
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
  return std::make_unique<Gpt2BpeTokenizer>(spec);
}

std::unique_ptr<Tokenizer> load_hf_tokenizer_json(const std::string& path) {
  json root = parse_json_file(path);
  if (!root.is_object()) throw_input_error(path, "expected a JSON object at the top level");
  auto model = root.find("model");
  if (model == root.end() || !model->is_object()) throw_input_error(path, "no \"model\" object", "model");
  std::string type = model->value("type", "BPE");
  if (type != "BPE")
    throw_input_error(path, fmt::format("model type '{}' is not supported", type), "model.type", -1,
                      "only byte-level BPE tokenizer.json files are supported");
  Gpt2BpeSpec spec;
  spec.vocab_file = path;
  spec.merges_file = path;
  check_pre_tokenizer(root, path, spec);
  if (!model->contains("vocab")) throw_input_error(path, "no vocabulary", "model.vocab");
  if (!model->contains("merges")) throw_input_error(path, "no merges", "model.merges");
  spec.vocab = read_vocab_object((*model)["vocab"], path, "model.vocab");
  read_merges_json((*model)["merges"], path, spec);

  auto added = root.find("added_tokens");
  if (added != root.end() && !added->is_null()) {
    if (!added->is_array()) throw_input_error(path, "expected an array", "added_tokens");
    for (size_t i = 0; i < added->size(); ++i) {
      const json& t = (*added)[i];
      if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() || !t.contains("content") ||
          !t["content"].is_string())
        throw_input_error(path, "expected {\"id\": integer, \"content\": string, ...}", fmt::format("added_tokens[{}]", i));
      spec.special.emplace_back(t["content"].get<std::string>(), t["id"].get<int>());
    }
  }
  return std::make_unique<Gpt2BpeTokenizer>(spec);
}

}  // namespace orion
