#include "model/tokenizer/gguf_tokenizer.h"

#include <fmt/format.h>

#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <sentencepiece_processor.h>

#include "base/error.h"
#include "base/file.h"
#include "model/io/gguf_file.h"
#include "model/tokenizer/gpt2_bpe.h"
#include "model/tokenizer/hf_tokenizer.h"
#include "model/tokenizer/llama2c_tokenizer.h"
#include "model/tokenizer/sentencepiece_tokenizer.h"

namespace orion {
using json = nlohmann::json;
using io::GgufFile;
using io::GgufValue;
using io::GgufValueType;

namespace {

// tokenizer.ggml.token_type values.
constexpr int kNormalToken = 1, kUnknownToken = 2, kControlToken = 3, kUserDefinedToken = 4, kUnusedToken = 5,
              kByteToken = 6;
const std::string kSpaceMark = "\xE2\x96\x81";  // ▁ U+2581, SentencePiece's spelling of a space

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
  std::string out;
  for (size_t i = 0; i < piece.size();) {
    if (piece.compare(i, kSpaceMark.size(), kSpaceMark) == 0) out += ' ', i += kSpaceMark.size();
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
  return is_gguf_file(path) && io::GgufFile::open(path, io::GgufArrays::Skip).find_value("tokenizer.ggml.model") != nullptr;
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

// ---- writing -------------------------------------------------------------------------------------

namespace {

// What decides how a pipeline tokenizes, without the fields that do not (trim_offsets, …): two
// pipelines with equal signatures split text the same way.
json signature(const json& j) {
  if (j.is_array()) {
    json out = json::array();
    for (const json& e : j) out.push_back(signature(e));
    return out;
  }
  if (!j.is_object()) return j;
  json out = json::object();
  for (const char* k : {"type", "pattern", "Regex", "String", "behavior", "invert", "use_regex", "individual_digits",
                        "add_prefix_space", "pretokenizers", "normalizers"})
    if (j.contains(k)) out[k] = signature(j[k]);
  return out;
}

// The tokenizer.ggml.pre name whose pipeline a tokenizer.json has; empty when none.
std::string pre_tokenizer_name(const json& doc) {
  const json model = doc.value("model", json::object());
  const bool ignore_merges = model.is_object() && model.value("ignore_merges", false);
  for (const char* name : {"gpt-2", "llama-bpe", "qwen2", "smollm"}) {
    const ByteLevelPipeline p = *pipeline_for(name);
    if (signature(doc.value("pre_tokenizer", json())) == signature(p.pre_tokenizer) &&
        signature(doc.value("normalizer", json())) == signature(p.normalizer) && ignore_merges == p.ignore_merges)
      return name;
  }
  return {};
}

io::GgufOutValue string_array(const std::string& key, json values) {
  return {key, {GgufValueType::Array, GgufValueType::String, std::move(values)}};
}

// A SentencePiece-kind vocabulary as GGUF's "llama" tokenizer holds it: pieces spelling a space ▁.
struct ScoredPieces {
  std::vector<std::string> pieces;
  std::vector<float> scores;
  std::vector<int> types;  // tokenizer.ggml.token_type
  int bos = -1, eos = -1, unk = -1;
};

// llama2.c's tokenizer.bin in Llama 2's layout: <unk>, BOS, EOS, then the 256 byte pieces.
std::optional<ScoredPieces> pieces_of(const Llama2cTokenizer& t, std::string* why_not) {
  ScoredPieces p;
  p.bos = t.bos_id(), p.eos = t.eos_id(), p.unk = 0;
  for (int id = 0; id < t.vocab_size(); id++) {
    const std::string& piece = t.piece(id);
    if (piece.find(kSpaceMark) != std::string::npos) {
      *why_not = fmt::format("token {} holds the character ▁, which GGUF's llama tokenizer reads as a space", id);
      return std::nullopt;
    }
    std::string spelled;
    for (char c : piece) spelled += c == ' ' ? kSpaceMark : std::string(1, c);
    const bool byte = id >= 3 && id < 3 + 256 && piece == fmt::format("<0x{:02X}>", id - 3);
    p.pieces.push_back(std::move(spelled));
    p.scores.push_back(t.score(id));
    p.types.push_back(id == p.unk ? kUnknownToken
                      : id == p.bos || id == p.eos ? kControlToken
                      : byte                       ? kByteToken
                                                   : kNormalToken);
  }
  return p;
}

// A SentencePiece .model: its own pieces, scores and piece kinds.
ScoredPieces pieces_of(const SentencePieceTokenizer& t) {
  const sentencepiece::SentencePieceProcessor& sp = t.processor();
  ScoredPieces p;
  p.bos = sp.bos_id(), p.eos = sp.eos_id(), p.unk = sp.unk_id();
  for (int id = 0; id < sp.GetPieceSize(); id++) {
    p.pieces.push_back(sp.IdToPiece(id));
    p.scores.push_back(sp.GetScore(id));
    p.types.push_back(sp.IsUnknown(id) ? kUnknownToken
                      : sp.IsControl(id) ? kControlToken
                      : sp.IsByte(id)    ? kByteToken
                      : sp.IsUnused(id)  ? kUnusedToken
                                         : kNormalToken);
  }
  return p;
}

// tokenizer.ggml.model "llama": what sentencepiece_scores reads back, so only Llama 2's layout of
// the special and byte ids (which run.c's encoder, and so Orion's reader, assume).
std::vector<io::GgufOutValue> llama_metadata(const ScoredPieces& p, std::string* why_not) {
  bool llama2_layout = p.bos == 1 && p.eos == 2 && p.pieces.size() >= 3 + 256;
  for (int b = 0; llama2_layout && b < 256; b++) llama2_layout = p.pieces[size_t(3 + b)] == fmt::format("<0x{:02X}>", b);
  if (!llama2_layout) {
    *why_not = "its special and byte ids are not Llama 2's (BOS 1, EOS 2, <0x00>..<0xFF> at 3..258)";
    return {};
  }
  std::vector<io::GgufOutValue> out = {
      {"tokenizer.ggml.model", {GgufValueType::String, {}, "llama"}},
      string_array("tokenizer.ggml.tokens", json(p.pieces)),
      {"tokenizer.ggml.scores", {GgufValueType::Array, GgufValueType::F32, json(p.scores)}},
      {"tokenizer.ggml.token_type", {GgufValueType::Array, GgufValueType::I32, json(p.types)}},
      {"tokenizer.ggml.bos_token_id", {GgufValueType::U32, {}, p.bos}},
      {"tokenizer.ggml.eos_token_id", {GgufValueType::U32, {}, p.eos}},
      {"tokenizer.ggml.add_bos_token", {GgufValueType::Bool, {}, true}},
      {"tokenizer.ggml.add_eos_token", {GgufValueType::Bool, {}, false}},
  };
  if (p.unk >= 0) out.push_back({"tokenizer.ggml.unknown_token_id", {GgufValueType::U32, {}, p.unk}});
  return out;
}

// A byte-level BPE vocabulary as GGUF's "gpt2" tokenizer holds it: every id's token (byte-level
// spelling) and type, the merges "left right" in rank order, the pre-tokenizer's name; BOS, EOS and
// whether encoding adds them as Orion's reader of the source (tok) has them.
using TokensById = std::map<int64_t, std::pair<std::string, int>>;  // id → (token, token type)

std::vector<io::GgufOutValue> byte_level_gguf(const TokensById& by_id, json merges, const std::string& pre,
                                              const Tokenizer& tok, std::string* why_not) {
  if (by_id.empty() || by_id.rbegin()->first > (1 << 24)) {
    *why_not = "its token ids are not 0 … n − 1";
    return {};
  }
  json tokens = json::array(), types = json::array();
  for (int64_t id = 0; id <= by_id.rbegin()->first; id++) {
    auto it = by_id.find(id);
    tokens.push_back(it != by_id.end() ? it->second.first : fmt::format("[PAD{}]", id));  // a gap: llama.cpp's filler
    types.push_back(it != by_id.end() ? it->second.second : kUnusedToken);
  }
  const std::vector<int> plain = tok.encode("a", false), with = tok.encode("a", true);
  std::vector<io::GgufOutValue> out = {
      {"tokenizer.ggml.model", {GgufValueType::String, {}, "gpt2"}},
      {"tokenizer.ggml.pre", {GgufValueType::String, {}, pre}},
      string_array("tokenizer.ggml.tokens", std::move(tokens)),
      {"tokenizer.ggml.token_type", {GgufValueType::Array, GgufValueType::I32, std::move(types)}},
      string_array("tokenizer.ggml.merges", std::move(merges)),
  };
  auto id_key = [&](const char* key, int id) {
    if (id >= 0) out.push_back({key, {GgufValueType::U32, {}, id}});
  };
  id_key("tokenizer.ggml.bos_token_id", tok.bos_id());
  id_key("tokenizer.ggml.eos_token_id", tok.eos_id());
  const bool adds_bos = !with.empty() && with.front() == tok.bos_id() && (plain.empty() || plain.front() != tok.bos_id());
  const bool adds_eos = !with.empty() && with.back() == tok.eos_id() && (plain.empty() || plain.back() != tok.eos_id());
  out.push_back({"tokenizer.ggml.add_bos_token", {GgufValueType::Bool, {}, adds_bos}});
  out.push_back({"tokenizer.ggml.add_eos_token", {GgufValueType::Bool, {}, adds_eos}});
  return out;
}

std::vector<io::GgufOutValue> byte_level_metadata(const std::string& tokenizer_json, std::string* why_not) {
  json doc;
  try {
    doc = json::parse(read_text_file(tokenizer_json));
  } catch (const json::exception& e) {
    throw_input_error(tokenizer_json, std::string("not valid JSON: ") + e.what());
  }
  const json model = doc.value("model", json::object());
  if (!model.is_object() || model.value("type", "") != "BPE" || !model.contains("vocab") || !model["vocab"].is_object()) {
    *why_not = "its model is not a BPE with a vocab (GGUF's gpt2 tokenizer)";
    return {};
  }
  const std::string pre = pre_tokenizer_name(doc);
  if (pre.empty()) {
    *why_not = "its pre-tokenizer is none of those GGUF files name that Orion reads (gpt-2, llama-bpe, qwen2, smollm)";
    return {};
  }
  // Orion's reader checks the file (an Input error for a broken one) before its fields are used.
  const std::unique_ptr<Tokenizer> tok = load_tokenizer(tokenizer_json);
  // Every id: the vocab, then the added tokens (control when special, else user-defined).
  TokensById by_id;
  for (const auto& [text, id] : model["vocab"].items())
    if (id.is_number_integer() && id.get<int64_t>() >= 0) by_id[id.get<int64_t>()] = {text, kNormalToken};
  for (const json& t : doc.value("added_tokens", json::array()))
    if (t.is_object() && t.value("id", json(-1)).is_number_integer() && t["id"].get<int64_t>() >= 0)
      by_id[t["id"].get<int64_t>()] = {t.value("content", ""), t.value("special", false) ? kControlToken : kUserDefinedToken};
  json merges = json::array();
  for (const json& m : model.value("merges", json::array()))
    merges.push_back(m.is_array() && m.size() == 2 ? json(m[0].get<std::string>() + " " + m[1].get<std::string>()) : m);
  return byte_level_gguf(by_id, std::move(merges), pre, *tok, why_not);
}

// OpenAI's encoder.json + vocab.bpe (or vocab.json + merges.txt): GPT-2's regex ("gpt-2"), its one
// special token <|endoftext|> a control token.
std::vector<io::GgufOutValue> bpe_pair_metadata(const Gpt2BpeFiles& files, std::string* why_not) {
  const Gpt2BpeSpec spec = read_gpt2_bpe_spec(files.vocab, files.merges);
  const Gpt2BpeTokenizer tok(spec);  // checks the spec (an Input error for a broken one)
  TokensById by_id;
  for (const auto& [text, id] : spec.vocab) by_id[id] = {text, kNormalToken};
  for (const auto& [text, id] : spec.special) by_id[id] = {text, kControlToken};
  json merges = json::array();
  for (const auto& [left, right] : spec.merges) merges.push_back(left + " " + right);
  return byte_level_gguf(by_id, std::move(merges), "gpt-2", tok, why_not);
}

}  // namespace

std::vector<io::GgufOutValue> gguf_tokenizer_metadata(const std::string& path, std::string* why_not) {
  if (auto pair = gpt2_bpe_files(path)) return bpe_pair_metadata(*pair, why_not);
  if (path.ends_with(".json")) return byte_level_metadata(path, why_not);
  const std::unique_ptr<Tokenizer> tok = load_tokenizer(path);
  if (const auto* t = dynamic_cast<const SentencePieceTokenizer*>(tok.get())) return llama_metadata(pieces_of(*t), why_not);
  if (const auto* t = dynamic_cast<const Llama2cTokenizer*>(tok.get())) {
    const std::optional<ScoredPieces> p = pieces_of(*t, why_not);
    return p ? llama_metadata(*p, why_not) : std::vector<io::GgufOutValue>{};
  }
  *why_not = fmt::format("GGUF holds {} tokenizers only from their tokenizer.json", tok->name());
  return {};
}

}  // namespace orion
