// SentencePiece .model files, through libsentencepiece (the reference implementation itself, so
// encoding is exact by construction: normalisation, dummy prefix, BPE or unigram, byte fallback).
#pragma once
#include <memory>
#include <string>

#include "model/tokenizer/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace orion {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(const std::string& path);
  ~SentencePieceTokenizer() override;

  std::vector<int> encode(std::string_view text, bool add_bos) const override;
  // The piece with ▁ shown as ' '; the first piece of a text (prev -1 or BOS) loses its leading
  // space, the dummy prefix; <0xXX> byte pieces are the raw byte; control pieces (<s>, </s>) are
  // empty; <unk> is " ⁇ " as SentencePiece prints it.
  std::string decode_token(int prev, int id) const override;
  int vocab_size() const override;
  int bos_id() const override;
  int eos_id() const override;
  std::string name() const override { return "sentencepiece"; }

  const sentencepiece::SentencePieceProcessor& processor() const { return *sp_; }

 private:
  std::string file_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
};

std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& path);

}  // namespace orion
