// Hugging Face tokenizer.json: Orion's ids equal those of an independent reference
// (@huggingface/transformers, run by tests/testdata/tokenizer/hf_goldens/make_goldens.mjs) for
// small vocabularies wearing the exact configurations of Llama 3, Qwen2.5, SmolLM2, Mistral and
// Llama 2 — several hundred strings each — and decoding gives the reference's text.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "base/file.h"
#include "model/tokenizer/tokenizer.h"
#include "model/tokenizer/unicode.h"
#include "support.h"

namespace orion {
namespace {

using nlohmann::json;

std::string kind_dir(const std::string& kind) { return test::data_path("tokenizer/hf_goldens/" + kind); }
json read_golden(const std::string& kind) { return json::parse(read_text_file(kind_dir(kind) + "/golden.json")); }
void write_text_file(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

bool valid_utf8(const std::string& s) {
  for (size_t pos = 0; pos < s.size(); pos += decode_utf8(s, pos).len)
    if (decode_utf8(s, pos).cp == kInvalidCodepoint) return false;
  return true;
}

class HfGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(HfGolden, IdsAndDecodingEqualTheReference) {
  const json golden = read_golden(GetParam());
  auto tok = load_tokenizer(kind_dir(GetParam()) + "/tokenizer.json");
  EXPECT_EQ(tok->bos_id(), golden["bos_id"].get<int>());
  EXPECT_EQ(tok->eos_id(), golden["eos_id"].get<int>());
  const json& cases = golden["cases"];
  ASSERT_GE(cases.size(), 300u);
  int failures = 0;
  for (const json& c : cases) {
    const std::string text = c["text"];
    const std::vector<int> ids = c["ids"], plain = c["ids_plain"];
    const bool ok = tok->encode(text, true) == ids && tok->encode(text, false) == plain &&
                    tok->decode(ids) == c["decoded"].get<std::string>() &&
                    tok->decode(plain) == c["decoded_plain"].get<std::string>();
    if (ok) continue;
    EXPECT_EQ(tok->encode(text, true), ids) << "text: '" << text << "'";
    EXPECT_EQ(tok->encode(text, false), plain) << "text: '" << text << "'";
    EXPECT_EQ(tok->decode(ids), c["decoded"].get<std::string>()) << "text: '" << text << "'";
    EXPECT_EQ(tok->decode(plain), c["decoded_plain"].get<std::string>()) << "text: '" << text << "'";
    if (++failures == 10) FAIL() << "stopping after 10 strings that differ";
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, HfGolden, ::testing::Values("llama3", "qwen25", "smollm2", "mistral", "llama2"),
                         [](const auto& info) { return info.param; });

TEST(HfTokenizer, NamesSayTheKind) {
  for (const char* kind : {"llama3", "qwen25", "smollm2"})
    EXPECT_EQ(load_tokenizer(kind_dir(kind))->name(), "hf-bpe-bytelevel") << kind;
  for (const char* kind : {"mistral", "llama2"})
    EXPECT_EQ(load_tokenizer(kind_dir(kind))->name(), "hf-bpe-sentencepiece") << kind;
  // GPT-2's own tokenizer.json is GPT-2's tokenizer: the same ids, and the same name.
  EXPECT_EQ(load_tokenizer(test::data_path("tokenizer/small_gpt2/tokenizer.json"))->name(), "gpt2-bpe");
}

TEST(HfTokenizer, FolderPrefersTokenizerJsonOverVocabJson) {
  // Qwen2 folders ship vocab.json + merges.txt beside tokenizer.json; only tokenizer.json has the
  // model's regex, NFC and special tokens, so a folder load must read it.
  const std::string dir = test::temp_dir();
  write_text_file(dir + "/tokenizer.json", read_text_file(kind_dir("qwen25") + "/tokenizer.json"));
  write_text_file(dir + "/tokenizer_config.json", read_text_file(kind_dir("qwen25") + "/tokenizer_config.json"));
  write_text_file(dir + "/vocab.json", read_text_file(test::data_path("tokenizer/small_gpt2/vocab.json")));
  write_text_file(dir + "/merges.txt", read_text_file(test::data_path("tokenizer/small_gpt2/merges.txt")));
  EXPECT_EQ(load_tokenizer(dir)->name(), "hf-bpe-bytelevel");
}

TEST(HfTokenizer, TokenIdOfSpecialTokens) {
  auto qwen = load_tokenizer(kind_dir("qwen25"));
  auto im_end = qwen->token_id("<|im_end|>");
  ASSERT_TRUE(im_end.has_value());
  EXPECT_EQ(qwen->encode("<|im_end|>", false), std::vector<int>{*im_end});
  EXPECT_EQ(qwen->eos_id(), *im_end);  // tokenizer_config.json's eos_token
  EXPECT_FALSE(qwen->token_id("<|no such token|>").has_value());
  auto mistral = load_tokenizer(kind_dir("mistral"));
  EXPECT_EQ(mistral->token_id("<s>"), std::optional<int>(1));
  EXPECT_EQ(mistral->token_id("<0x41>"), std::optional<int>(3 + 0x41));  // byte tokens are tokens too
}

// decode_token streams: bytes of one character spread over several tokens come out in order, and
// the pieces concatenate to decode(ids); only the first token of a sequence loses its leading space.
TEST(HfTokenizer, DecodeTokenStreamsSplitCharacters) {
  for (const char* kind : {"llama3", "mistral"}) {
    auto tok = load_tokenizer(kind_dir(kind));
    const std::string text = "emoji 👨‍👩‍👧 and 你好 end";
    std::vector<int> ids = tok->encode(text, false);
    std::string streamed;
    int prev = -1, split_chars = 0;
    for (int id : ids) {
      std::string piece = tok->decode_token(prev, id);
      if (!valid_utf8(piece)) ++split_chars;  // part of a character: the rest comes with the next tokens
      streamed += piece;
      prev = id;
    }
    EXPECT_EQ(streamed, text) << kind;
    EXPECT_EQ(tok->decode(ids), text) << kind;
    EXPECT_GT(split_chars, 0) << kind << ": the test text should split characters over tokens";
  }
  auto mistral = load_tokenizer(kind_dir("mistral"));
  std::vector<int> ids = mistral->encode("Hello world", false);
  EXPECT_EQ(mistral->decode_token(-1, ids[0]).substr(0, 1), "H");  // the first token's "▁" is dropped
  EXPECT_EQ(mistral->decode_token(1, ids[0]).substr(0, 2), " H");  // after <s> it is a space
}

TEST(HfTokenizer, ConfigAddBosTokenAppliesWithoutTemplate) {
  // Without a post_processor template, tokenizer_config.json's add_bos_token / add_eos_token decide.
  const std::string dir = test::temp_dir();
  json j = json::parse(read_text_file(kind_dir("mistral") + "/tokenizer.json"));
  j["post_processor"] = nullptr;
  write_text_file(dir + "/tokenizer.json", j.dump());
  json config = json::parse(read_text_file(kind_dir("mistral") + "/tokenizer_config.json"));
  config["add_eos_token"] = true;
  write_text_file(dir + "/tokenizer_config.json", config.dump());
  auto tok = load_tokenizer(dir);
  std::vector<int> ids = tok->encode("Hello", true);
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids.front(), 1);
  EXPECT_EQ(ids.back(), 2);
  config["add_bos_token"] = false;
  config["add_eos_token"] = false;
  write_text_file(dir + "/tokenizer_config.json", config.dump());
  EXPECT_EQ(load_tokenizer(dir)->encode("Hello", true), load_tokenizer(dir)->encode("Hello", false));
}

TEST(HfTokenizer, RoundTripsArbitraryValidText) {
  // Byte-level and byte-fallback tokenizers encode any text; decode gives it back.
  const std::string text = "Ünïcödé ✓ \u0007 tabs\t\t  \r\n 🀄 𝔘𝔫𝔦 \xE2\x80\xAE mixed";
  for (const char* kind : {"llama3", "qwen25", "smollm2", "mistral", "llama2"}) {
    auto tok = load_tokenizer(kind_dir(kind));
    EXPECT_EQ(tok->decode(tok->encode(text, false)), text) << kind;
  }
}

}  // namespace
}  // namespace orion
