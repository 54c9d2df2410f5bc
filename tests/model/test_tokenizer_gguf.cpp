// The tokenizer a GGUF model carries (tokenizer.ggml.*): the byte-level kinds give the ids of the
// transformers.js goldens (tests/testdata/tokenizer/hf_goldens) when their tokenizer.json is
// written into GGUF metadata the way llama.cpp's converter lays it out; the SentencePiece kind
// ("llama": pieces + scores) encodes like the llama2.c tokenizer.bin it came from, and Orion writes
// tokenizer.bin and .model files as that kind; bad metadata is
// an Input error naming the key.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/file.h"
#include "model/io/gguf_file.h"
#include "model/tokenizer/gguf_tokenizer.h"
#include "model/tokenizer/llama2c_tokenizer.h"
#include "model/tokenizer/tokenizer.h"
#include "support.h"
#include "test_io_util.h"

namespace orion {
namespace {

using io::GgufOutValue;
using io::GgufValueType;
using nlohmann::json;

std::string kind_dir(const std::string& kind) { return test::data_path("tokenizer/hf_goldens/" + kind); }

GgufOutValue str(const std::string& key, const std::string& v) { return {key, {GgufValueType::String, {}, v}}; }
GgufOutValue u32(const std::string& key, int v) { return {key, {GgufValueType::U32, {}, v}}; }
GgufOutValue array(const std::string& key, GgufValueType t, json v) { return {key, {GgufValueType::Array, t, std::move(v)}}; }

// A tokenizer.json written as llama.cpp's converter writes it into GGUF metadata: tokens by id,
// their types (added special tokens are control tokens), merges as "a b", the pre-tokenizer's name.
std::vector<GgufOutValue> gguf_keys_of(const std::string& kind, const std::string& pre, bool add_bos) {
  const json t = json::parse(read_text_file(kind_dir(kind) + "/tokenizer.json"));
  const json golden = json::parse(read_text_file(kind_dir(kind) + "/golden.json"));
  std::map<int, std::pair<std::string, int>> by_id;  // id → text, token_type
  for (auto& [text, id] : t["model"]["vocab"].items()) by_id[id.get<int>()] = {text, 1};
  for (const json& a : t["added_tokens"]) by_id[a["id"].get<int>()] = {a["content"], a["special"].get<bool>() ? 3 : 4};
  json tokens = json::array(), types = json::array(), merges = json::array();
  for (auto& [id, entry] : by_id) {
    EXPECT_EQ(id, int(tokens.size())) << "ids are dense";
    tokens.push_back(entry.first), types.push_back(entry.second);
  }
  for (const json& m : t["model"]["merges"])
    merges.push_back(m.is_string() ? m.get<std::string>() : m[0].get<std::string>() + " " + m[1].get<std::string>());
  std::vector<GgufOutValue> kv = {str("general.architecture", "llama"), str("tokenizer.ggml.model", "gpt2"),
                                  str("tokenizer.ggml.pre", pre), array("tokenizer.ggml.tokens", GgufValueType::String, tokens),
                                  array("tokenizer.ggml.token_type", GgufValueType::I32, types),
                                  array("tokenizer.ggml.merges", GgufValueType::String, merges),
                                  {"tokenizer.ggml.add_bos_token", {GgufValueType::Bool, {}, add_bos}}};
  if (golden["bos_id"].get<int>() >= 0) kv.push_back(u32("tokenizer.ggml.bos_token_id", golden["bos_id"]));
  if (golden["eos_id"].get<int>() >= 0) kv.push_back(u32("tokenizer.ggml.eos_token_id", golden["eos_id"]));
  return kv;
}

std::string write_keys(const std::vector<GgufOutValue>& kv) {
  const std::string path = test::temp_dir() + "/tok.gguf";
  io::write_gguf(path, kv, {});
  return path;
}

struct Kind {
  const char* kind;
  const char* pre;  // llama.cpp's tokenizer.ggml.pre for the model
  bool add_bos;     // Llama 3's template starts each sequence with <|begin_of_text|>
};

class GgufTokenizerGolden : public ::testing::TestWithParam<Kind> {};

// The tokenizer read from `keys` gives the transformers.js goldens of kind k.
void expect_golden_ids(const Kind& k, const std::vector<GgufOutValue>& keys) {
  const json golden = json::parse(read_text_file(kind_dir(k.kind) + "/golden.json"));
  auto tok = load_tokenizer(write_keys(keys));
  EXPECT_EQ(tok->name(), "hf-bpe-bytelevel");
  EXPECT_EQ(tok->bos_id(), golden["bos_id"].get<int>());
  EXPECT_EQ(tok->eos_id(), golden["eos_id"].get<int>());
  int failures = 0;
  for (const json& c : golden["cases"]) {
    const std::string text = c["text"];
    const std::vector<int> ids = c["ids"], plain = c["ids_plain"];
    if (tok->encode(text, true) == ids && tok->encode(text, false) == plain && tok->decode(plain) == c["decoded_plain"])
      continue;
    EXPECT_EQ(tok->encode(text, true), ids) << "text: '" << text << "'";
    EXPECT_EQ(tok->encode(text, false), plain) << "text: '" << text << "'";
    EXPECT_EQ(tok->decode(plain), c["decoded_plain"].get<std::string>());
    if (++failures == 10) FAIL() << "stopping after 10 strings that differ";
  }
}

TEST_P(GgufTokenizerGolden, IdsAndDecodingEqualTheReference) {
  const Kind k = GetParam();
  expect_golden_ids(k, gguf_keys_of(k.kind, k.pre, k.add_bos));
}

// Orion's writer (orion convert --to gguf): the keys it makes from the tokenizer.json name the
// pre-tokenizer llama.cpp names, and the tokenizer read back from them gives the same goldens.
TEST_P(GgufTokenizerGolden, KeysWrittenFromTheTokenizerJsonGiveTheSameIds) {
  const Kind k = GetParam();
  std::string why;
  std::vector<GgufOutValue> keys = gguf_tokenizer_metadata(kind_dir(k.kind) + "/tokenizer.json", &why);
  ASSERT_FALSE(keys.empty()) << why;
  for (const GgufOutValue& kv : keys) {
    if (kv.key == "tokenizer.ggml.pre") {
      EXPECT_EQ(kv.value.value, k.pre);
    }
    if (kv.key == "tokenizer.ggml.add_bos_token") {
      EXPECT_EQ(kv.value.value, k.add_bos);
    }
  }
  expect_golden_ids(k, keys);
}

INSTANTIATE_TEST_SUITE_P(Kinds, GgufTokenizerGolden,
                         ::testing::Values(Kind{"llama3", "llama-bpe", true}, Kind{"qwen25", "qwen2", false},
                                           Kind{"smollm2", "smollm", false}),
                         [](const auto& info) { return std::string(info.param.kind); });

TEST(GgufTokenizer, SentencePieceScoresEncodeLikeTheTokenizerBin) {
  const std::string bin = test::data_path("tokenizer/spm_stories/tokenizer.bin");
  Llama2cTokenizer ref(bin);
  json tokens = json::array(), scores = json::array();
  for (int id = 0; id < ref.vocab_size(); id++) {
    std::string piece = ref.piece(id);
    for (size_t at; (at = piece.find(' ')) != std::string::npos;) piece.replace(at, 1, "\xE2\x96\x81");  // ▁
    tokens.push_back(piece), scores.push_back(ref.score(id));
  }
  auto tok = load_tokenizer(write_keys({str("tokenizer.ggml.model", "llama"),
                                        array("tokenizer.ggml.tokens", GgufValueType::String, tokens),
                                        array("tokenizer.ggml.scores", GgufValueType::F32, scores),
                                        u32("tokenizer.ggml.bos_token_id", 1), u32("tokenizer.ggml.eos_token_id", 2)}));
  for (const char* text : {"Once upon a time, there was a little girl named Lily.", "", "  two  spaces", "émoji 🙂 日本",
                           "\tTabs\nand lines"}) {
    EXPECT_EQ(tok->encode(text, true), ref.encode(text, true)) << text;
    EXPECT_EQ(tok->decode(tok->encode(text, false)), ref.decode(ref.encode(text, false))) << text;
  }
}

std::string spm_stories(const std::string& name) { return test::data_path("tokenizer/spm_stories/" + name); }

// Orion's writer for the SentencePiece kind (orion convert --to gguf --tokenizer tokenizer.bin): the
// pieces and scores read back as they were, spelled and typed as llama.cpp's converter does.
TEST(GgufTokenizer, TokenizerBinWrittenAsTheLlamaKindReadsBackPieceForPiece) {
  Llama2cTokenizer ref(spm_stories("tokenizer.bin"));
  std::string why;
  const std::vector<GgufOutValue> keys = gguf_tokenizer_metadata(spm_stories("tokenizer.bin"), &why);
  ASSERT_FALSE(keys.empty()) << why;
  const std::string path = write_keys(keys);
  const std::unique_ptr<Tokenizer> tok = load_tokenizer(path);
  test::expect_same_pieces(*tok, ref);
  const io::GgufFile f = io::GgufFile::open(path);
  EXPECT_EQ(f.find_value("tokenizer.ggml.model")->value, "llama");
  const json& types = f.find_value("tokenizer.ggml.token_type")->value;
  const json& tokens = f.find_value("tokenizer.ggml.tokens")->value;
  EXPECT_EQ(types[0], 2);  // <unk>: unknown
  EXPECT_EQ(types[1], 3);  // BOS, EOS: control
  EXPECT_EQ(types[2], 3);
  EXPECT_EQ(types[3], 6);  // <0x00> … <0xFF>: byte
  EXPECT_EQ(types[258], 6);
  EXPECT_EQ(tokens[3], "<0x00>");
  const int space = ref.encode(" ", false).at(0);  // the dummy prefix
  EXPECT_EQ(tokens[size_t(space)], "\xE2\x96\x81");
  EXPECT_EQ(types[size_t(space)], 1);
  EXPECT_EQ(f.find_value("tokenizer.ggml.bos_token_id")->value, 1);
  EXPECT_EQ(f.find_value("tokenizer.ggml.eos_token_id")->value, 2);
  for (const json& g : json::parse(read_text_file(spm_stories("golden.json")))) {
    const std::string text = g["text"];
    EXPECT_EQ(tok->encode(text, true), ref.encode(text, true)) << text;
    EXPECT_EQ(tok->decode(tok->encode(text, true)), text);
  }
}

TEST(GgufTokenizer, SentencePieceModelWrittenAsTheLlamaKindEncodesLikeLibsentencepiece) {
  const std::unique_ptr<Tokenizer> ref = load_tokenizer(spm_stories("tokenizer.model"));
  std::string why;
  const std::vector<GgufOutValue> keys = gguf_tokenizer_metadata(spm_stories("tokenizer.model"), &why);
  ASSERT_FALSE(keys.empty()) << why;
  const std::unique_ptr<Tokenizer> tok = load_tokenizer(write_keys(keys));
  EXPECT_EQ(tok->vocab_size(), ref->vocab_size());
  const json golden = json::parse(read_text_file(spm_stories("golden.json")));
  for (const json& g : golden) {
    const std::string text = g["text"];
    EXPECT_EQ(tok->encode(text, true), ref->encode(text, true)) << text;
    EXPECT_EQ(tok->encode(text, false), g["ids"].get<std::vector<int>>()) << text;  // the goldens have no BOS
  }
}

// run.c's encoder, and so Orion's reader of the llama kind, assume Llama 2's special and byte ids:
// a tokenizer.bin without them is declined, not written as a tokenizer that reads back otherwise.
TEST(GgufTokenizer, WriterDeclinesATokenizerBinWithoutLlama2sLayout) {
  const std::string bin = test::temp_dir() + "/no_bytes.bin";
  std::string bytes(4, '\0');
  bytes[0] = 8;  // max_token_length
  for (int id = 0; id < 300; id++) {
    const std::string piece = "p" + std::to_string(id);
    const float score = 0;
    const int32_t len = int32_t(piece.size());
    bytes.append(reinterpret_cast<const char*>(&score), 4).append(reinterpret_cast<const char*>(&len), 4).append(piece);
  }
  test::spit(bin, bytes);
  std::string why;
  EXPECT_TRUE(gguf_tokenizer_metadata(bin, &why).empty());
  EXPECT_NE(why.find("Llama 2"), std::string::npos) << why;
}

// GPT-2's own files (vocab.json + merges.txt, as encoder.json + vocab.bpe) written as the gpt2 kind
// (pre-tokenizer gpt-2, <|endoftext|> a control token): the tokenizer read back from the GGUF keys
// gives the golden ids of the pair (OpenAI's encoder, tests/testdata/tokenizer/small_gpt2).
TEST(GgufTokenizer, Gpt2BpePairWrittenAsTheGpt2KindEncodesLikeThePair) {
  const std::string dir = test::data_path("tokenizer/small_gpt2");
  std::string why;
  const std::vector<GgufOutValue> keys = gguf_tokenizer_metadata(dir + "/vocab.json", &why);
  ASSERT_FALSE(keys.empty()) << why;
  for (const GgufOutValue& kv : keys)
    if (kv.key == "tokenizer.ggml.pre") EXPECT_EQ(kv.value.value, "gpt-2");
  const std::unique_ptr<Tokenizer> pair = load_tokenizer(dir + "/vocab.json");
  const std::unique_ptr<Tokenizer> tok = load_tokenizer(write_keys(keys));
  EXPECT_EQ(tok->vocab_size(), pair->vocab_size());
  EXPECT_EQ(tok->eos_id(), pair->eos_id());
  const json golden = json::parse(read_text_file(dir + "/golden.json"));
  ASSERT_GT(golden.size(), 5u);
  for (const json& c : golden) {
    const std::string text = c["text"];
    EXPECT_EQ(tok->encode(text, false), c["ids"].get<std::vector<int>>()) << "text: '" << text << "'";
    EXPECT_EQ(tok->decode(c["ids"].get<std::vector<int>>()), text);
  }
  // The merges file names the pair too; the same keys.
  EXPECT_EQ(gguf_tokenizer_metadata(dir + "/merges.txt", &why).size(), keys.size());
}

// SentencePiece-style BPE tokenizer.json files (Llama 2, Mistral: Metaspace, byte fallback) are not
// GGUF's gpt2 kind: no keys, and the reason.
TEST(GgufTokenizer, WriterDeclinesTokenizersItCannotHold) {
  for (const char* kind : {"llama2", "mistral"}) {
    std::string why;
    EXPECT_TRUE(gguf_tokenizer_metadata(kind_dir(kind) + "/tokenizer.json", &why).empty()) << kind;
    EXPECT_NE(why.find("pre-tokenizer"), std::string::npos) << why;
  }
}

TEST(GgufTokenizer, MetadataOrionDoesNotReadIsRefusedByKey) {
  auto expect_refused = [](std::vector<GgufOutValue> kv, const std::string& key) {
    const std::string path = write_keys(kv);
    try {
      load_tokenizer(path);
      ADD_FAILURE() << "read a tokenizer with a bad " << key;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Input) << e.what();
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  };
  auto kv = gguf_keys_of("qwen25", "qwen2", false);
  kv[2] = str("tokenizer.ggml.pre", "deepseek-coder");
  expect_refused(kv, "tokenizer.ggml.pre");
  kv = gguf_keys_of("qwen25", "qwen2", false);
  kv[1] = str("tokenizer.ggml.model", "bert");
  expect_refused(kv, "tokenizer.ggml.model");
  kv = gguf_keys_of("qwen25", "qwen2", false);
  kv[4] = array("tokenizer.ggml.token_type", GgufValueType::I32, json::array({1, 1}));
  expect_refused(kv, "tokenizer.ggml.token_type");
  expect_refused({str("general.architecture", "llama")}, "tokenizer.ggml.model");
}

}  // namespace
}  // namespace orion
