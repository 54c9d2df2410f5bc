// Tokenizer training: the vocabulary size asked for is what load_tokenizer() sees, text round-trips
// (any UTF-8, characters never seen in training included), the trained tokenizer compresses the
// corpus far better than bytes, and training is deterministic whatever the thread count.
#include <gtest/gtest.h>

#include "base/error.h"
#include "base/file.h"
#include "data/bpe_trainer.h"
#include "data/builtin_corpus.h"
#include "data/document_stream.h"
#include "model/tokenizer/llama2c_tokenizer.h"
#include "model/tokenizer/tokenizer.h"
#include "support.h"

namespace orion::data {
namespace {

WordCounts counts_of(const std::string& spec, int threads = 2) {
  DocumentStream docs(resolve_text_inputs({spec}));
  return count_words(docs, threads, false);
}

std::string train_to_file(const WordCounts& c, TokenizerFormat f, int vocab) {
  const std::string dir = test::temp_dir();
  BpeTrainOptions o;
  o.vocab_size = vocab;
  TrainedTokenizer t = train_bpe(c, f, o);
  const std::string path = dir + (f == TokenizerFormat::Llama2c ? "/tokenizer.bin" : "/tokenizer.json");
  if (f == TokenizerFormat::Llama2c) write_llama2c_tokenizer(path, t);
  else write_hf_tokenizer_json(path, t);
  return path;
}

const std::vector<std::string>& samples() {
  static const std::vector<std::string> s = {
      "Once upon a time, there was a little girl named Lily.",
      " leading space and trailing space ",
      "Zo\xc3\xab's caf\xc3\xa9 \xe2\x80\x94 na\xc3\xafve \xf0\x9f\x99\x82 \xe4\xbd\xa0\xe5\xa5\xbd",  // unseen characters
      "tabs\tand\nnewlines\n\n  double  spaces",
      "\xf0\x9f\x99\x82 starts with an emoji",
      "<|endoftext|> is only text here? 12345 + 678 = 13023!",
      "x",
  };
  return s;
}

// decode(encode(x)) == x; llama2.c needs the BOS to drop its dummy-prefix space.
void expect_round_trip(const Tokenizer& tok, const std::string& text) {
  const bool llama = tok.name() == "llama2c";
  std::vector<int> ids = tok.encode(text, llama);
  for (int id : ids) ASSERT_LT(id, tok.vocab_size());
  EXPECT_EQ(tok.decode(ids), text) << tok.name();
}

TEST(BpeTrainer, VocabularySizeIsHonouredAndFilesLoad) {
  const WordCounts c = counts_of("builtin:1500");
  for (int vocab : {300, 512, 1000}) {
    auto l = load_tokenizer(train_to_file(c, TokenizerFormat::Llama2c, vocab));
    EXPECT_EQ(l->name(), "llama2c");
    EXPECT_EQ(l->vocab_size(), vocab);
    EXPECT_EQ(l->bos_id(), 1);
    auto h = load_tokenizer(train_to_file(c, TokenizerFormat::HfJson, vocab));
    EXPECT_EQ(h->name(), "gpt2-bpe");
    EXPECT_EQ(h->vocab_size(), vocab);
    EXPECT_EQ(h->eos_id(), vocab - 1);
    EXPECT_EQ(h->decode({vocab - 1}), "<|endoftext|>");
  }
}

TEST(BpeTrainer, Llama2cLayoutAndScoresFollowTrainingOrder) {
  const WordCounts c = counts_of("builtin:800");
  Llama2cTokenizer t(train_to_file(c, TokenizerFormat::Llama2c, 512));
  EXPECT_EQ(t.piece(0), "<unk>");
  EXPECT_EQ(t.piece(1), "\n<s>\n");
  EXPECT_EQ(t.piece(2), "\n</s>\n");
  EXPECT_EQ(t.piece(3), "<0x00>");
  EXPECT_EQ(t.piece(258), "<0xFF>");
  // Merged pieces first, each scored below the one before; single characters last.
  for (int id = 260; id < 512; ++id) EXPECT_LT(t.score(id), t.score(id - 1)) << id;
  EXPECT_GE(t.piece(259).size(), 2u);
  EXPECT_EQ(t.piece(511).size(), 1u);  // the rarest kept character
  std::set<std::string> pieces;
  for (int id = 0; id < 512; ++id) EXPECT_TRUE(pieces.insert(t.piece(id)).second) << "duplicate " << t.piece(id);
}

TEST(BpeTrainer, RoundTripsAnyText) {
  const WordCounts c = counts_of("builtin:1000");
  for (auto f : {TokenizerFormat::Llama2c, TokenizerFormat::HfJson}) {
    auto tok = load_tokenizer(train_to_file(c, f, 600));
    for (const auto& s : samples()) expect_round_trip(*tok, s);
    for (const auto& s : builtin_corpus(50, 99)) expect_round_trip(*tok, s);
  }
}

TEST(BpeTrainer, CompressesTheCorpusFarBetterThanBytes) {
  const WordCounts c = counts_of("builtin:2000");
  const auto held_out = builtin_corpus(200, 12345);  // another seed: not the training text
  size_t bytes = 0;
  for (const auto& s : held_out) bytes += s.size();
  for (auto f : {TokenizerFormat::Llama2c, TokenizerFormat::HfJson}) {
    double prev_tokens = 1e18;
    for (int vocab : {400, 512, 1000}) {  // the built-in corpus has ~900 distinct words: 1000 is near its limit
      auto tok = load_tokenizer(train_to_file(c, f, vocab));
      size_t tokens = 0;
      for (const auto& s : held_out) tokens += tok->encode(s, false).size();
      const double bytes_per_token = double(bytes) / double(tokens);
      EXPECT_GT(bytes_per_token, vocab >= 512 ? 2.0 : 1.5) << tok->name() << " vocab " << vocab;
      std::printf("%s vocab %d: %.2f bytes per token\n", tok->name().c_str(), vocab, bytes_per_token);
      EXPECT_LT(double(tokens), prev_tokens) << "a larger vocabulary must compress better";
      prev_tokens = double(tokens);
    }
  }
}

TEST(BpeTrainer, DeterministicForAnyThreadCount) {
  const WordCounts one = counts_of("builtin:600", 1), two = counts_of("builtin:600", 2);
  EXPECT_EQ(one.words, two.words);
  EXPECT_EQ(one.documents, 600u);
  for (auto f : {TokenizerFormat::Llama2c, TokenizerFormat::HfJson})
    EXPECT_EQ(read_text_file(train_to_file(one, f, 700)), read_text_file(train_to_file(two, f, 700)));
}

TEST(BpeTrainer, ImpossibleSizesAreClearErrors) {
  const WordCounts c = counts_of("builtin:20");
  BpeTrainOptions o;
  o.vocab_size = 259;
  EXPECT_THROW(train_bpe(c, TokenizerFormat::Llama2c, o), Error);
  o.vocab_size = 256;
  EXPECT_THROW(train_bpe(c, TokenizerFormat::HfJson, o), Error);
  o.vocab_size = 30000;  // 20 stories cannot fill 30000 tokens
  try {
    train_bpe(c, TokenizerFormat::HfJson, o);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("only has enough"), std::string::npos) << e.what();
    EXPECT_NE(e.context().hint.find("--vocab"), std::string::npos);
  }
}

}  // namespace
}  // namespace orion::data
