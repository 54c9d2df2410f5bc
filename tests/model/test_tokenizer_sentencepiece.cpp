// SentencePiece .model through libsentencepiece: ids equal spm_encode's (golden.json), decoding
// equals the library's DecodeIds, token by token as generation streams it.
#include <gtest/gtest.h>
#include <sentencepiece_processor.h>

#include <nlohmann/json.hpp>

#include "base/file.h"
#include "model/tokenizer/sentencepiece_tokenizer.h"
#include "model/tokenizer/tokenizer.h"
#include "support.h"

namespace orion {
namespace {

std::string model_path() { return test::data_path("tokenizer/spm_stories/tokenizer.model"); }

TEST(SentencePiece, LoadsTheModel) {
  auto tok = load_tokenizer(model_path());
  EXPECT_EQ(tok->name(), "sentencepiece");
  EXPECT_EQ(tok->vocab_size(), 512);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
}

TEST(SentencePiece, MatchesSpmEncode) {
  auto tok = load_tokenizer(model_path());
  auto golden = nlohmann::json::parse(read_text_file(test::data_path("tokenizer/spm_stories/golden.json")));
  ASSERT_GE(golden.size(), 5u);
  for (const auto& g : golden) {
    const std::string text = g["text"];
    EXPECT_EQ(tok->encode(text, false), g["ids"].get<std::vector<int>>()) << text;
    auto with_bos = tok->encode(text, true);
    ASSERT_FALSE(with_bos.empty());
    EXPECT_EQ(with_bos[0], 1);
  }
}

TEST(SentencePiece, StreamedDecodeEqualsDecodeIds) {
  SentencePieceTokenizer tok(model_path());
  for (std::string text :
       {"Once upon a time, Lily saw a big dog.", "Zebras are 42 times  faster!", "A é 😀 b", "  two leading spaces"}) {
    auto ids = tok.encode(text, true);
    std::string expected;
    ASSERT_TRUE(tok.processor().Decode(ids, &expected).ok());
    EXPECT_EQ(tok.decode(ids), expected) << text;
    EXPECT_EQ(tok.decode(ids), text);
  }
}

TEST(SentencePiece, FolderWithTokenizerModel) {
  // A folder holding tokenizer.bin and tokenizer.model: the .model wins (it is the reference).
  EXPECT_EQ(load_tokenizer(test::data_path("tokenizer/spm_stories"))->name(), "sentencepiece");
}

TEST(SentencePiece, ModelWithAnEmptyPieceIsAnInputError) {
  // Found by fuzz_sentencepiece: libsentencepiece throws a darts-clone exception (not a status)
  // for a zero-length piece; the reader must answer with an input error naming the file.
  const std::string path = test::data_path("../../fuzz/regressions/sentencepiece/zero_length_piece.model");
  try {
    load_tokenizer(path);
    FAIL() << "expected an input error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Input);
    EXPECT_EQ(e.context().file, path);
    EXPECT_NE(e.message().find("not a valid SentencePiece model"), std::string::npos) << e.message();
  }
}

}  // namespace
}  // namespace orion
