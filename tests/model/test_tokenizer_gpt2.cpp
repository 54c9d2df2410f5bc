// GPT-2 byte-level BPE: golden pairs from independent implementations (js-tiktoken on the real
// vocabulary, a naive Python BPE on the small one), every file layout, special tokens, round trips.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <map>
#include <random>
#include <sstream>

#include "base/file.h"
#include "model/tokenizer/gpt2_bpe.h"
#include "model/tokenizer/gpt2_pretokenize.h"
#include "model/tokenizer/tokenizer.h"
#include "model/tokenizer/unicode.h"
#include "support.h"

namespace orion {
namespace {

using nlohmann::json;

struct Golden {
  std::string text;
  std::vector<int> ids;
};

std::vector<Golden> read_golden(const std::string& path) {
  std::vector<Golden> out;
  for (const auto& g : json::parse(read_text_file(path))) out.push_back({g["text"], g["ids"]});
  return out;
}

void write_file(const std::string& path, const std::string& content) { std::ofstream(path, std::ios::binary) << content; }

// Every golden text encodes to exactly the reference ids and decodes back to itself.
void expect_golden(const Tokenizer& tok, const std::vector<Golden>& golden) {
  ASSERT_GE(golden.size(), 40u);
  for (const auto& g : golden) {
    EXPECT_EQ(tok.encode(g.text, false), g.ids) << "text: " << g.text;
    EXPECT_EQ(tok.decode(g.ids), g.text);
  }
}

std::string small(const std::string& file) { return test::data_path("tokenizer/small_gpt2/" + file); }

// ---- the pre-tokeniser and its Unicode table --------------------------------------------------

std::vector<std::string> pieces(std::string_view text) {
  std::vector<std::string> out;
  for (auto p : gpt2_pretokenize(text)) out.emplace_back(p);
  return out;
}

TEST(Gpt2Pretokenize, SplitsLikeTheRegex) {
  using V = std::vector<std::string>;
  EXPECT_EQ(pieces("Hello world"), (V{"Hello", " world"}));
  EXPECT_EQ(pieces("I'll they're"), (V{"I", "'ll", " they", "'re"}));
  EXPECT_EQ(pieces("a  b"), (V{"a", " ", " b"}));      // the last space joins the word
  EXPECT_EQ(pieces("x \n y"), (V{"x", " \n", " y"}));  // \s+(?!\S) backtracks one character
  EXPECT_EQ(pieces(" \tx"), (V{" ", "\t", "x"}));      // a lone tab cannot prefix a word
  EXPECT_EQ(pieces("end  "), (V{"end", "  "}));        // trailing whitespace stays whole
  EXPECT_EQ(pieces("abc123!!"), (V{"abc", "123", "!!"}));
  EXPECT_EQ(pieces(" 'x"), (V{" '", "x"}));                    // not a contraction
  EXPECT_EQ(pieces("e\xCC\x81t"), (V{"e", "\xCC\x81", "t"}));  // a combining mark is not a letter
}

TEST(Gpt2Pretokenize, PiecesTileAnyBytes) {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::string s;
    for (int i = 0; i < 64; ++i) s += char(rng() % 256);
    std::string joined;
    for (auto p : gpt2_pretokenize(s)) {
      EXPECT_FALSE(p.empty());
      joined += p;
    }
    EXPECT_EQ(joined, s);
  }
}

TEST(UnicodeTable, ClassesOfKnownCodePoints) {
  EXPECT_EQ(char_class('a'), CharClass::Letter);
  EXPECT_EQ(char_class('Z'), CharClass::Letter);
  EXPECT_EQ(char_class('7'), CharClass::Number);
  EXPECT_EQ(char_class(' '), CharClass::Space);
  EXPECT_EQ(char_class('\t'), CharClass::Space);
  EXPECT_EQ(char_class('!'), CharClass::Other);
  EXPECT_EQ(char_class(0x4E2D), CharClass::Letter);  // 中
  EXPECT_EQ(char_class(0x0663), CharClass::Number);  // Arabic-Indic digit three
  EXPECT_EQ(char_class(0x00BD), CharClass::Number);  // ½ (No)
  EXPECT_EQ(char_class(0x216B), CharClass::Number);  // Ⅻ (Nl)
  EXPECT_EQ(char_class(0x3000), CharClass::Space);   // ideographic space
  EXPECT_EQ(char_class(0x00A0), CharClass::Space);   // no-break space
  EXPECT_EQ(char_class(0x0085), CharClass::Space);   // next line (White_Space)
  EXPECT_EQ(char_class(0x200B), CharClass::Other);   // zero-width space is not White_Space
  EXPECT_EQ(char_class(0x0301), CharClass::Other);   // combining acute accent (Mn)
  EXPECT_EQ(char_class(0x1F600), CharClass::Other);  // 😀
  EXPECT_EQ(char_class(0x10FFFF), CharClass::Other);
  EXPECT_EQ(std::string(unicode_table_version()).substr(0, 3), "14.");
}

TEST(UnicodeTable, DecodesUtf8AndRejectsInvalid) {
  EXPECT_EQ(decode_utf8("\xE4\xB8\xAD", 0).cp, 0x4E2Du);
  EXPECT_EQ(decode_utf8("\xF0\x9F\x98\x80", 0).len, 4);
  EXPECT_EQ(decode_utf8("\xC0\x80", 0).cp, kInvalidCodepoint);      // overlong
  EXPECT_EQ(decode_utf8("\xED\xA0\x80", 0).cp, kInvalidCodepoint);  // surrogate
  EXPECT_EQ(decode_utf8("\xE4\xB8", 0).len, 1);                     // truncated
}

TEST(Gpt2Bpe, ByteTableMatchesGpt2) {
  const auto& t = gpt2_byte_to_codepoint();
  EXPECT_EQ(t['a'], uint32_t('a'));
  EXPECT_EQ(t[' '], 0x120u);   // 'Ġ', the familiar prefix of GPT-2 tokens
  EXPECT_EQ(t['\n'], 0x10Au);  // 'Ċ'
  EXPECT_EQ(t[0], 0x100u);
  EXPECT_EQ(t[0xAD], 0x143u);  // soft hyphen is the last shifted byte
}

// ---- the small vocabulary in tests/testdata (no ../shared needed) -----------------------------

TEST(Gpt2Bpe, SmallVocabJsonAndMergesMatchNaiveReference) {
  auto tok = load_tokenizer(small("vocab.json"));
  EXPECT_EQ(tok->name(), "gpt2-bpe");
  EXPECT_EQ(tok->vocab_size(), 1257);
  EXPECT_EQ(tok->eos_id(), 1256);
  EXPECT_EQ(tok->bos_id(), -1);
  expect_golden(*tok, read_golden(small("golden.json")));
}

TEST(Gpt2Bpe, SmallTokenizerJsonMatchesNaiveReference) {
  auto tok = load_tokenizer(small("tokenizer.json"));
  EXPECT_EQ(tok->eos_id(), 1256);
  expect_golden(*tok, read_golden(small("golden.json")));
}

TEST(Gpt2Bpe, TokenizerJsonWithStringMerges) {
  json j = json::parse(read_text_file(small("tokenizer.json")));
  json merges = json::array();
  for (const auto& m : j["model"]["merges"]) merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
  j["model"]["merges"] = merges;
  std::string path = test::temp_dir() + "/tokenizer.json";
  write_file(path, j.dump());
  expect_golden(*load_tokenizer(path), read_golden(small("golden.json")));
}

TEST(Gpt2Bpe, FolderAndOpenAiNames) {
  // A folder holding vocab.json + merges.txt, and one holding encoder.json + vocab.bpe.
  auto golden = read_golden(small("golden.json"));
  expect_golden(*load_tokenizer(test::data_path("tokenizer/small_gpt2")), golden);
  std::string dir = test::temp_dir();
  write_file(dir + "/encoder.json", read_text_file(small("vocab.json")));
  write_file(dir + "/vocab.bpe", read_text_file(small("merges.txt")));
  expect_golden(*load_tokenizer(dir), golden);
  expect_golden(*load_tokenizer(dir + "/encoder.json"), golden);
  expect_golden(*load_tokenizer(dir + "/vocab.bpe"), golden);
}

TEST(Gpt2Bpe, SpecialTokenInTextIsOneToken) {
  auto tok = load_tokenizer(small("vocab.json"));
  std::vector<int> a = tok->encode("a", false), b = tok->encode("b", false);
  std::vector<int> expected = a;
  expected.push_back(tok->eos_id());
  expected.insert(expected.end(), b.begin(), b.end());
  EXPECT_EQ(tok->encode("a<|endoftext|>b", false), expected);
  EXPECT_EQ(tok->decode(expected), "a<|endoftext|>b");
  // A partial special token is ordinary text.
  auto partial = tok->encode("<|endoftext|", false);
  EXPECT_EQ(std::count(partial.begin(), partial.end(), tok->eos_id()), 0);
}

TEST(Gpt2Bpe, RoundTripsArbitraryBytes) {
  auto tok = load_tokenizer(small("vocab.json"));
  std::mt19937 rng(11);
  for (int round = 0; round < 100; ++round) {
    std::string s;
    int n = int(rng() % 200);
    for (int i = 0; i < n; ++i) s += char(rng() % 256);
    EXPECT_EQ(tok->decode(tok->encode(s, false)), s);
  }
  // A long word without spaces goes through BPE in one piece.
  std::string word(20000, 'a');
  for (size_t i = 0; i < word.size(); i += 7) word[i] = 'b';
  EXPECT_EQ(tok->decode(tok->encode(word, false)), word);
}

TEST(Gpt2Bpe, DecodeRejectsUnknownIds) {
  auto tok = load_tokenizer(small("vocab.json"));
  EXPECT_THROW(tok->decode({5, 99999}), Error);
  EXPECT_THROW(tok->decode({-1}), Error);
}

// encoder.py's BPE loop, literally: find the lowest-rank adjacent pair, merge every occurrence of
// it left to right, repeat. The tokenizer's heap-based loop must give the same tokens.
class NaiveBpe {
 public:
  NaiveBpe(const std::string& vocab_path, const std::string& merges_path) {
    const json vocab = json::parse(read_text_file(vocab_path));
    for (const auto& [k, v] : vocab.items()) vocab_[k] = v.get<int>();
    std::istringstream in(read_text_file(merges_path));
    std::string line;
    for (int rank = 0; std::getline(in, line);) {
      if (line.empty() || line[0] == '#') continue;
      size_t sp = line.find(' ');
      ranks_[{line.substr(0, sp), line.substr(sp + 1)}] = rank++;
    }
  }
  std::vector<int> encode(std::string_view text) const {
    std::vector<int> ids;
    for (auto piece : gpt2_pretokenize(text)) {
      std::vector<std::string> parts;
      for (unsigned char b : piece) parts.push_back(utf8(gpt2_byte_to_codepoint()[b]));
      while (parts.size() > 1) {
        int best = INT32_MAX;
        std::pair<std::string, std::string> best_pair;
        for (size_t i = 0; i + 1 < parts.size(); ++i) {
          auto it = ranks_.find({parts[i], parts[i + 1]});
          if (it != ranks_.end() && it->second < best) best = it->second, best_pair = it->first;
        }
        if (best == INT32_MAX) break;
        std::vector<std::string> merged;
        for (size_t i = 0; i < parts.size(); ++i) {
          if (i + 1 < parts.size() && parts[i] == best_pair.first && parts[i + 1] == best_pair.second)
            merged.push_back(parts[i] + parts[i + 1]), ++i;
          else merged.push_back(parts[i]);
        }
        parts = merged;
      }
      for (const auto& p : parts) ids.push_back(vocab_.at(p));
    }
    return ids;
  }

 private:
  static std::string utf8(uint32_t cp) {
    std::string s;
    if (cp < 0x80) s += char(cp);
    else s += char(0xC0 | (cp >> 6)), s += char(0x80 | (cp & 0x3F));  // the table stays below U+0800
    return s;
  }
  std::map<std::string, int> vocab_;
  std::map<std::pair<std::string, std::string>, int> ranks_;
};

// Random text from fragments that make long words, repeats and unusual byte sequences.
std::string random_text(std::mt19937& rng) {
  static const std::vector<std::string> frags = {"th", "e",  " ",  "in",  "er", "an",   "re", "on",   "at", "aaa", "ing",
                                                 "\n", "  ", "'s", "123", "é",  "中文", "😀",  "\xFF", ".",  "!?",  "ation"};
  std::string s;
  int n = int(rng() % 40);
  for (int i = 0; i < n; ++i) s += frags[rng() % frags.size()];
  return s;
}

void expect_same_as_naive(const std::string& vocab, const std::string& merges) {
  NaiveBpe naive(vocab, merges);
  auto tok = load_gpt2_bpe(vocab, merges);
  std::mt19937 rng(17);
  for (int round = 0; round < 500; ++round) {
    std::string text = random_text(rng);
    EXPECT_EQ(tok->encode(text, false), naive.encode(text)) << text;
  }
}

TEST(Gpt2Bpe, HeapMergeLoopEqualsEncoderPyLoop) { expect_same_as_naive(small("vocab.json"), small("merges.txt")); }

// ---- the real GPT-2 vocabulary from ../shared (skipped when absent) ----------------------------

std::string real_gpt2_encoder() { return test::shared_path("tokenizers/gpt2/encoder.json"); }

TEST(Gpt2BpeReal, MatchesJsTiktoken) {
  std::string encoder = real_gpt2_encoder();
  if (encoder.empty()) GTEST_SKIP() << "../shared/tokenizers/gpt2 is absent";
  auto tok = load_tokenizer(encoder);
  EXPECT_EQ(tok->vocab_size(), 50257);
  EXPECT_EQ(tok->eos_id(), 50256);
  expect_golden(*tok, read_golden(test::data_path("tokenizer/gpt2_golden.json")));
}

TEST(Gpt2BpeReal, FolderGivesTheSameTokens) {
  std::string encoder = real_gpt2_encoder();
  if (encoder.empty()) GTEST_SKIP() << "../shared/tokenizers/gpt2 is absent";
  auto tok = load_tokenizer(std::filesystem::path(encoder).parent_path().string());
  EXPECT_EQ(tok->encode("Hello world", false), (std::vector<int>{15496, 995}));
  EXPECT_EQ(tok->decode({15496, 995, 50256}), "Hello world<|endoftext|>");
}

TEST(Gpt2BpeReal, RoundTripsLongText) {
  std::string encoder = real_gpt2_encoder();
  if (encoder.empty()) GTEST_SKIP() << "../shared/tokenizers/gpt2 is absent";
  auto tok = load_tokenizer(encoder);
  std::string text;
  for (const auto& g : read_golden(test::data_path("tokenizer/gpt2_golden.json"))) text += g.text + "\n";
  for (int i = 0; i < 5; ++i) text += text;
  auto ids = tok->encode(text, false);
  EXPECT_LT(ids.size(), text.size());  // BPE compresses
  EXPECT_EQ(tok->decode(ids), text);
}

TEST(Gpt2BpeReal, HeapMergeLoopEqualsEncoderPyLoop) {
  std::string encoder = real_gpt2_encoder();
  if (encoder.empty()) GTEST_SKIP() << "../shared/tokenizers/gpt2 is absent";
  expect_same_as_naive(encoder, test::shared_path("tokenizers/gpt2/vocab.bpe"));
}

}  // namespace
}  // namespace orion
