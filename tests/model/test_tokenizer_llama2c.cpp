// llama2.c tokenizer.bin: run.c's encode/decode rules on a hand-built vocabulary, the fast merge
// loop against a literal O(n²) transcription of run.c's, and agreement with SentencePiece on the
// model it was exported from.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "base/file.h"
#include "model/tokenizer/llama2c_tokenizer.h"
#include "model/tokenizer/sentencepiece_tokenizer.h"
#include "model/tokenizer/tokenizer.h"
#include "support.h"

namespace orion {
namespace {

struct Piece {
  std::string text;
  float score;
};

// The 259 pieces every llama2.c vocabulary starts with: <unk>, BOS, EOS, then <0x00>..<0xFF>.
std::vector<Piece> base_pieces() {
  std::vector<Piece> p = {{"<unk>", 0}, {"\n<s>\n", 0}, {"\n</s>\n", 0}};
  for (int b = 0; b < 256; ++b) p.push_back({fmt::format("<0x{:02X}>", b), 0});
  return p;
}

void write_tokenizer_bin(const std::string& path, const std::vector<Piece>& pieces) {
  std::ofstream out(path, std::ios::binary);
  int32_t max_len = 0;
  for (const auto& p : pieces) max_len = std::max<int32_t>(max_len, int32_t(p.text.size()));
  out.write(reinterpret_cast<const char*>(&max_len), 4);
  for (const auto& p : pieces) {
    int32_t len = int32_t(p.text.size());
    out.write(reinterpret_cast<const char*>(&p.score), 4);
    out.write(reinterpret_cast<const char*>(&len), 4);
    out.write(p.text.data(), len);
  }
}

// A tiny vocabulary whose merges are easy to follow by hand. Ids: 259 " ", 260 "a", 261 "b",
// 262 "c", 263 "ab", 264 "bc", 265 " a", 266 "aa", 267 "cc".
class Llama2cTiny : public ::testing::Test {
 protected:
  void SetUp() override {
    auto pieces = base_pieces();
    for (Piece p : std::vector<Piece>{
             {" ", -1}, {"a", -2}, {"b", -3}, {"c", -4}, {"ab", 5}, {"bc", 10}, {" a", 1}, {"aa", 5}, {"cc", -2e10f}})
      pieces.push_back(p);
    path_ = test::temp_dir() + "/tokenizer.bin";
    write_tokenizer_bin(path_, pieces);
    tok_ = std::make_unique<Llama2cTokenizer>(path_);
  }
  std::vector<int> enc(std::string_view s, bool bos = false) { return tok_->encode(s, bos); }
  std::string path_;
  std::unique_ptr<Llama2cTokenizer> tok_;
};

TEST_F(Llama2cTiny, ReadsTheFile) {
  EXPECT_EQ(tok_->vocab_size(), 268);
  EXPECT_EQ(tok_->max_token_length(), 6);
  EXPECT_EQ(tok_->piece(264), "bc");
  EXPECT_FLOAT_EQ(tok_->score(264), 10.0f);
  EXPECT_EQ(tok_->bos_id(), 1);
  EXPECT_EQ(tok_->eos_id(), 2);
  EXPECT_EQ(load_tokenizer(path_)->name(), "llama2c");
}

TEST_F(Llama2cTiny, HighestScoreMergesFirst) {
  // " a b c": "bc" (10) beats "ab" (5); then " a" (1); " abc" is no piece.
  EXPECT_EQ(enc("abc"), (std::vector<int>{265, 264}));
}

TEST_F(Llama2cTiny, TiesGoToTheLeftmostPair) {
  // " a a a": both "aa" pairs score 5; the left one merges, leaving " " "aa" "a".
  EXPECT_EQ(enc("aaa"), (std::vector<int>{259, 266, 260}));
}

TEST_F(Llama2cTiny, DummyPrefixBosAndEmptyText) {
  EXPECT_EQ(enc(""), (std::vector<int>{}));
  EXPECT_EQ(enc("", true), (std::vector<int>{1}));
  EXPECT_EQ(enc("a", true), (std::vector<int>{1, 265}));
}

TEST_F(Llama2cTiny, ByteFallbackAndScoreFloor) {
  // "é" is no piece: its two UTF-8 bytes become ids byte + 3.
  EXPECT_EQ(enc("\xC3\xA9"), (std::vector<int>{259, 0xC3 + 3, 0xA9 + 3}));
  // "cc" has a score below -1e10, which run.c never merges.
  EXPECT_EQ(enc("cc"), (std::vector<int>{259, 262, 262}));
}

TEST_F(Llama2cTiny, DecodeFollowsRunC) {
  EXPECT_EQ(tok_->decode_token(1, 265), "a");  // leading space stripped after BOS
  EXPECT_EQ(tok_->decode_token(260, 265), " a");
  EXPECT_EQ(tok_->decode_token(-1, 'A' + 3), "A");  // <0x41>
  EXPECT_EQ(tok_->decode(enc("abc \xC3\xA9", true)), "abc \xC3\xA9");
  EXPECT_THROW(tok_->decode_token(-1, 268), Error);
}

// run.c's merge loop transcribed literally: rescan every pair after each merge.
std::vector<int> run_c_encode(const Llama2cTokenizer& t, const std::string& text, bool bos) {
  std::map<std::string, int> ids;
  for (int i = t.vocab_size() - 1; i >= 0; --i) ids[t.piece(i)] = i;
  auto lookup = [&](const std::string& s) {
    auto it = ids.find(s);
    return it == ids.end() ? -1 : it->second;
  };
  std::vector<int> tokens;
  if (bos) tokens.push_back(1);
  if (!text.empty()) tokens.push_back(lookup(" "));
  for (size_t i = 0; i < text.size();) {
    size_t n = 1;
    while (i + n < text.size() && n < 4 && (uint8_t(text[i + n]) & 0xC0) == 0x80) ++n;
    int id = lookup(text.substr(i, n));
    if (id >= 0) tokens.push_back(id);
    else
      for (size_t k = 0; k < n; ++k) tokens.push_back(uint8_t(text[i + k]) + 3);
    i += n;
  }
  while (true) {
    float best_score = -1e10f;
    int best_id = -1, best_idx = -1;
    for (size_t i = 0; i + 1 < tokens.size(); ++i) {
      int id = lookup(t.piece(tokens[i]) + t.piece(tokens[i + 1]));
      if (id != -1 && t.score(id) > best_score) best_score = t.score(id), best_id = id, best_idx = int(i);
    }
    if (best_idx < 0) break;
    tokens[best_idx] = best_id;
    tokens.erase(tokens.begin() + best_idx + 1);
  }
  return tokens;
}

std::string stories(const std::string& f) { return test::data_path("tokenizer/spm_stories/" + f); }

TEST(Llama2c, FastMergeLoopEqualsRunCOnRandomText) {
  Llama2cTokenizer tok(stories("tokenizer.bin"));
  const std::vector<std::string> words = {"the", " cat", "Lily", " ran", " to",     "park", ".",   " ",    "  ",
                                          "\n",  "é",    "😀",    "12",   "o'clock", "\"",   "aaa", "\xFF", "Zq"};
  std::mt19937 rng(3);
  for (int round = 0; round < 300; ++round) {
    std::string text;
    int n = int(rng() % 30);
    for (int i = 0; i < n; ++i) text += words[rng() % words.size()];
    bool bos = rng() % 2;
    EXPECT_EQ(tok.encode(text, bos), run_c_encode(tok, text, bos)) << text;
  }
}

TEST(Llama2c, AgreesWithSentencePieceOnPlainText) {
  auto bin = load_tokenizer(stories("tokenizer.bin"));
  auto spm = load_tokenizer(stories("tokenizer.model"));
  EXPECT_EQ(bin->vocab_size(), spm->vocab_size());
  EXPECT_EQ(bin->bos_id(), spm->bos_id());
  EXPECT_EQ(bin->eos_id(), spm->eos_id());
  auto golden = nlohmann::json::parse(read_text_file(stories("golden.json")));
  ASSERT_GE(golden.size(), 5u);
  for (const auto& g : golden) {
    const std::string text = g["text"];
    auto ids = bin->encode(text, true);
    EXPECT_EQ(ids, spm->encode(text, true)) << text;
    EXPECT_EQ(bin->decode(ids), text);
    EXPECT_EQ(spm->decode(ids), text);
  }
}

}  // namespace
}  // namespace orion
