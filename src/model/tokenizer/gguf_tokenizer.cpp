#include "model/tokenizer/gguf_tokenizer.h"

#include <fmt/format.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/file.h"
#include "model/io/gguf_file.h"
#include "model/tokenizer/hf_tokenizer.h"
#include "model/tokenizer/llama2c_tokenizer.h"

namespace orion {
using json = nlohmann::json;
using io::GgufFile;
using io::GgufValue;
using io::GgufValueType;

namespace {

constexpr int kControlToken = 3, kUserDefinedToken = 4;

// The pipelines of the byte-level models llama.cpp names in tokenizer.ggml.pre, as the models'
// own tokenizer.json files have them.
constexpr const char* kLlama3Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";
constexpr const char* kQwen2Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";

json split_then_byte_level(const char* regex) {
  return {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}},
            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
}

// tokenizer.json's normalizer and pre_tokenizer for a tokenizer.ggml.pre value; model.ignore_merges.
struct ByteLevelPipeline {
  json normalizer, pre_tokenizer;
  bool ignore_merges = false;
};
std::optional<ByteLevelPipeline> pipeline_for(const std::string& pre) {
  const json gpt2_byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  if (pre == "default" || pre == "gpt-2" || pre == "gpt2") return ByteLevelPipeline{nullptr, gpt2_byte_level};
  if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3")
    return ByteLevelPipeline{nullptr, split_then_byte_level(kLlama3Regex), true};
  if (pre == "qwen2") return ByteLevelPipeline{{{"type", "NFC"}}, split_then_byte_level(kQwen2Regex)};
  if (pre == "smollm")
    return ByteLevelPipeline{
        nullptr, {{"type", "Sequence"}, {"pretokenizers", {{{"type", "Digits"}, {"individual_digits", true}}, gpt2_byte_level}}}};
  return std::nullopt;
}

// Typed reads of the tokenizer.ggml.* keys; errors name the file and the key.
class Keys {
 public:
  explicit Keys(const GgufFile& f) : f_(f) {}
  const GgufValue* find(const std::string& key) const { return f_.find_value("tokenizer.ggml." + key); }
  [[noreturn]] void fail(const std::string& key, const std::string& msg) const {
    throw_input_error(f_.path(), msg, "tokenizer.ggml." + key, -1, "the file's tokenizer is not one Orion reads; pass --tokenizer");
  }
  std::string string(const std::string& key) const {
    const GgufValue* v = find(key);
    if (!v || v->type != GgufValueType::String) fail(key, "expected a string");
    return v->value.get<std::string>();
  }
  // An array of `type` elements of length n (or any length when n < 0).
  const json& array(const std::string& key, GgufValueType type, int64_t n = -1) const {
    const GgufValue* v = find(key);
    if (!v || v->type != GgufValueType::Array) fail(key, "expected an array");
    if (v->element_type != type) fail(key, "the array's elements have another type than expected");
    if (n >= 0 && int64_t(v->value.size()) != n)
      fail(key, fmt::format("{} elements, expected one per token ({})", v->value.size(), n));
    return v->value;
  }
  std::optional<int> id(const std::string& key, size_t vocab) const {
    const GgufValue* v = find(key);
    if (!v) return std::nullopt;
    if (!v->value.is_number_integer() || v->value.get<int64_t>() < 0 || v->value.get<uint64_t>() >= vocab)
      fail(key, fmt::format("expected a token id below {}", vocab));
    return int(v->value.get<int64_t>());
  }
  bool flag(const std::string& key, bool fallback) const {
    const GgufValue* v = find(key);
    if (!v) return fallback;
    if (v->type != GgufValueType::Bool) fail(key, "expected a bool");
    return v->value.get<bool>();
  }

 private:
  const GgufFile& f_;
};

std::unique_ptr<Tokenizer> byte_level_bpe(const GgufFile& f, const Keys& k, const json& tokens) {
  const std::string pre = k.find("pre") ? k.string("pre") : "default";
  std::optional<ByteLevelPipeline> pipeline = pipeline_for(pre);
  if (!pipeline)
    k.fail("pre", fmt::format("pre-tokenizer \"{}\" is not one Orion knows (it knows default, gpt-2, llama-bpe, qwen2, smollm)", pre));
  const int64_t n = int64_t(tokens.size());
  const json* types = k.find("token_type") ? &k.array("token_type", GgufValueType::I32, n) : nullptr;
  json vocab = json::object(), added = json::array();
  for (int64_t id = 0; id < n; id++) {
    const int type = types ? (*types)[size_t(id)].get<int>() : 1;
    const std::string& text = tokens[size_t(id)].get_ref<const std::string&>();
    if (type == kControlToken || type == kUserDefinedToken)
      added.push_back({{"id", id}, {"content", text}, {"special", type == kControlToken}, {"lstrip", false},
                       {"rstrip", false}, {"normalized", type != kControlToken}, {"single_word", false}});
    else
      vocab[text] = id;
  }
  json doc = {{"model",
               {{"type", "BPE"},
                {"vocab", vocab},
                {"merges", k.array("merges", GgufValueType::String)},
                {"ignore_merges", pipeline->ignore_merges}}},
              {"added_tokens", added},
              {"normalizer", pipeline->normalizer},
              {"pre_tokenizer", pipeline->pre_tokenizer},
              {"decoder", {{"type", "ByteLevel"}}}};
  HfTokenizerSpec spec = hf_tokenizer_spec(doc, f.path());
  // What a tokenizer_config.json would say: the BOS/EOS tokens and whether BOS starts a sequence.
  spec.has_config = true;
  spec.config_file = f.path();
  if (auto bos = k.id("bos_token_id", size_t(n))) spec.bos_token = tokens[size_t(*bos)].get<std::string>();
  if (auto eos = k.id("eos_token_id", size_t(n))) spec.eos_token = tokens[size_t(*eos)].get<std::string>();
  spec.add_bos_token = k.flag("add_bos_token", false) && spec.bos_token.has_value();
  spec.add_eos_token = k.flag("add_eos_token", false) && spec.eos_token.has_value();
  return make_hf_tokenizer(std::move(spec));
}

// SentencePiece pieces spell a space as ▁ (U+2581); llama2.c's pieces hold the space itself.
std::string space_for_underline(const std::string& piece) {
  static const std::string underline = "\xE2\x96\x81";
  std::string out;
  for (size_t i = 0; i < piece.size();) {
    if (piece.compare(i, underline.size(), underline) == 0) out += ' ', i += underline.size();
    else out += piece[i++];
  }
  return out;
}

std::unique_ptr<Tokenizer> sentencepiece_scores(const GgufFile& f, const Keys& k, const json& tokens) {
  const int64_t n = int64_t(tokens.size());
  const json& scores = k.array("scores", GgufValueType::F32, n);
  // run.c's encoder assumes Llama 2's layout of the special ids.
  if (k.id("bos_token_id", size_t(n)).value_or(1) != 1) k.fail("bos_token_id", "expected 1 (Llama 2's layout)");
  if (k.id("eos_token_id", size_t(n)).value_or(2) != 2) k.fail("eos_token_id", "expected 2 (Llama 2's layout)");
  std::vector<std::string> pieces;
  std::vector<float> weights;
  for (int64_t id = 0; id < n; id++) {
    pieces.push_back(space_for_underline(tokens[size_t(id)].get<std::string>()));
    weights.push_back(scores[size_t(id)].get<float>());
  }
  for (int b = 0; b < 256; b++)
    if (size_t(3 + b) >= pieces.size() || pieces[size_t(3 + b)] != fmt::format("<0x{:02X}>", b))
      k.fail("tokens", fmt::format("token {} is not the byte-fallback piece <0x{:02X}> (Llama 2's layout)", 3 + b, b));
  return std::make_unique<Llama2cTokenizer>(f.path(), std::move(pieces), std::move(weights));
}

}  // namespace

bool is_gguf_file(const std::string& path) {
  if (!file_exists(path) || is_directory(path)) return false;
  auto file = MappedFile::open(path);
  return file->size() >= 4 && std::memcmp(file->data(), "GGUF", 4) == 0;
}

bool gguf_has_tokenizer(const std::string& path) {
  return is_gguf_file(path) && io::GgufFile::open(path).find_value("tokenizer.ggml.model") != nullptr;
}

std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::string& path) {
  const GgufFile f = GgufFile::open(path);
  const Keys k(f);
  if (!k.find("model"))
    throw_input_error(path, "this GGUF file holds no tokenizer", "tokenizer.ggml.model", -1, "pass --tokenizer");
  const std::string model = k.string("model");
  const json& tokens = k.array("tokens", GgufValueType::String);
  if (tokens.empty()) k.fail("tokens", "no tokens");
  if (model == "gpt2") return byte_level_bpe(f, k, tokens);
  if (model == "llama") return sentencepiece_scores(f, k, tokens);
  k.fail("model", fmt::format("tokenizer kind \"{}\" is not one Orion reads from GGUF (it reads gpt2 and llama)", model));
}

}  // namespace orion
