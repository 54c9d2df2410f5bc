// llama2.c's tokenizer.bin and the encoder of its run.c.
//
// File: int32 max_token_length, then per token: float32 score, int32 length, `length` bytes (the
// piece, with SentencePiece's ▁ already turned into ' '). There is no token count: tokens run to
// the end of the file (run.c takes the count from the model header instead).
//
// Encoding, exactly as run.c does it:
//   1. optional BOS (id 1); then, when the text is not empty, the piece " " (the dummy prefix
//      SentencePiece adds so that the first word looks like every other word);
//   2. each UTF-8 code point becomes the piece spelling it, or — when there is none — one
//      byte-fallback token per byte, id byte + 3 (ids 3..258 are <0x00>..<0xFF>);
//   3. repeatedly merge the adjacent pair whose concatenation is a piece with the highest score
//      (the leftmost pair on ties; scores at or below -1e10 never merge) until none is left.
// Decoding: a piece that follows BOS loses its leading space; a piece <0xXX> is the raw byte XX;
// BOS and EOS themselves decode to nothing (they delimit sequences, run.c never prints them).
#pragma once
#include <string>
#include <unordered_map>
#include <vector>

#include "model/tokenizer/tokenizer.h"

namespace orion {

class Llama2cTokenizer final : public Tokenizer {
 public:
  // expected_vocab_size >= 0 reads exactly that many tokens, as run.c does with the model's vocab
  // size (bytes after them are ignored); -1 reads tokens up to the end of the file.
  explicit Llama2cTokenizer(const std::string& path, int expected_vocab_size = -1);
  // The same tokenizer from pieces (SentencePiece's ▁ already turned into ' ') and scores held in
  // another file (a GGUF model's tokenizer.ggml.tokens / scores); source names it in errors.
  Llama2cTokenizer(std::string source, std::vector<std::string> pieces, std::vector<float> scores);

  std::vector<int> encode(std::string_view text, bool add_bos) const override;
  std::string decode_token(int prev, int id) const override;
  int vocab_size() const override { return static_cast<int>(pieces_.size()); }
  int bos_id() const override { return 1; }
  int eos_id() const override { return 2; }
  std::string name() const override { return "llama2c"; }

  const std::string& piece(int id) const { return pieces_.at(id); }
  float score(int id) const { return scores_.at(id); }
  int max_token_length() const { return max_token_length_; }

 private:
  void index_pieces();  // checks the byte-fallback pieces and builds decoded_ and ids_
  int lookup(const std::string& piece) const;  // -1 when absent
  void check_id(int id) const;

  std::string file_;
  int max_token_length_ = 0;
  std::vector<std::string> pieces_;           // id → piece as stored
  std::vector<std::string> decoded_;          // id → bytes it decodes to (<0xXX> → the byte)
  std::vector<float> scores_;                 // id → merge priority
  std::unordered_map<std::string, int> ids_;  // piece → lowest id spelling it
};

std::unique_ptr<Tokenizer> load_llama2c_tokenizer(const std::string& path, int expected_vocab_size = -1);

}  // namespace orion
