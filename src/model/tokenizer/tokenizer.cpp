#include "model/tokenizer/tokenizer.h"

#include <filesystem>

#include "base/error.h"
#include "base/file.h"
#include "model/tokenizer/gguf_tokenizer.h"
#include "model/tokenizer/gpt2_bpe.h"
#include "model/tokenizer/hf_tokenizer.h"
#include "model/tokenizer/llama2c_tokenizer.h"
#include "model/tokenizer/sentencepiece_tokenizer.h"

namespace orion {
namespace fs = std::filesystem;

std::string Tokenizer::decode(const std::vector<int>& ids) const {
  std::string s;
  int prev = -1;
  for (int id : ids) {
    s += decode_token(prev, id);
    prev = id;
  }
  return s;
}

namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The first of the candidate names that exists in dir, or "" when none does.
std::string first_existing(const fs::path& dir, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (file_exists((dir / n).string())) return (dir / n).string();
  return "";
}

// vocab.json pairs with merges.txt, encoder.json with vocab.bpe; either pairing is accepted.
Gpt2BpeFiles bpe_pair(const fs::path& vocab) {
  const fs::path dir = vocab.parent_path();
  const bool openai_names = vocab.filename() == "encoder.json";
  std::string merges =
      openai_names ? first_existing(dir, {"vocab.bpe", "merges.txt"}) : first_existing(dir, {"merges.txt", "vocab.bpe"});
  if (merges.empty()) merges = (dir / (openai_names ? "vocab.bpe" : "merges.txt")).string();  // named when missing
  return {vocab.string(), merges};
}

// tokenizer.json first: a model folder often holds vocab.json + merges.txt too (Qwen2 does), but
// only tokenizer.json says the model's own pre-tokenizer regex, normalizer and special tokens.
std::unique_ptr<Tokenizer> load_from_folder(const fs::path& dir) {
  if (auto p = first_existing(dir, {"tokenizer.json"}); !p.empty()) return load_hf_tokenizer_json(p);
  if (auto f = gpt2_bpe_files(dir.string())) return load_gpt2_bpe(f->vocab, f->merges);
  if (auto p = first_existing(dir, {"tokenizer.model"}); !p.empty()) return load_sentencepiece(p);
  if (auto p = first_existing(dir, {"tokenizer.bin"}); !p.empty()) return load_llama2c_tokenizer(p);
  throw_input_error(dir.string(), "the folder holds no tokenizer", {}, -1,
                    "expected vocab.json + merges.txt, encoder.json + vocab.bpe, tokenizer.json, "
                    "tokenizer.model or tokenizer.bin");
}

}  // namespace

std::optional<Gpt2BpeFiles> gpt2_bpe_files(const std::string& path) {
  const fs::path p(path);
  if (is_directory(path)) {
    if (!first_existing(p, {"tokenizer.json"}).empty()) return std::nullopt;
    if (auto v = first_existing(p, {"vocab.json", "encoder.json"}); !v.empty()) return bpe_pair(v);
    return std::nullopt;
  }
  const std::string name = p.filename().string();
  if (name == "merges.txt" || name == "vocab.bpe") {  // the merges file of a pair names the pair too
    std::string vocab = first_existing(p.parent_path(), {name == "merges.txt" ? "vocab.json" : "encoder.json",
                                                         name == "merges.txt" ? "encoder.json" : "vocab.json"});
    if (vocab.empty()) throw_input_error(path, "no vocab.json or encoder.json beside this merges file");
    return Gpt2BpeFiles{vocab, path};
  }
  if (name == "vocab.json" || name == "encoder.json" || ends_with(name, "-vocab.json")) return bpe_pair(p);
  return std::nullopt;
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  if (is_directory(path)) return load_from_folder(path);
  if (!file_exists(path)) throw_input_error(path, "no such file", {}, -1, "pass a tokenizer file or a folder holding one");
  const std::string name = fs::path(path).filename().string();
  if (ends_with(name, ".model")) return load_sentencepiece(path);
  if (is_gguf_file(path)) return load_gguf_tokenizer(path);  // the tokenizer a GGUF model carries
  if (auto f = gpt2_bpe_files(path)) return load_gpt2_bpe(f->vocab, f->merges);
  if (ends_with(name, ".json")) return load_hf_tokenizer_json(path);
  return load_llama2c_tokenizer(path);
}

}  // namespace orion
