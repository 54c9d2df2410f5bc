// GPT-2 byte-level BPE (OpenAI's encoder.py; Hugging Face's "BPE" model with a ByteLevel
// pre-tokeniser).
//
// How text becomes ids:
//   1. Special tokens (<|endoftext|> and the added_tokens of a tokenizer.json) written literally in
//      the text are cut out first and encoded as their own id, as Hugging Face does; so the text
//      "a<|endoftext|>b" gives [64, 50256, 65] with the GPT-2 vocabulary. (OpenAI's tiktoken
//      instead refuses such text unless told to allow it.)
//   2. The rest is split by GPT-2's regex (gpt2_pretokenize.h) into words.
//   3. Each word's UTF-8 bytes start as one token per byte. The vocabulary spells byte b as one
//      printable code point (bytes_to_unicode: printable Latin-1 bytes stand for themselves, the
//      others are shifted to U+0100…), so every byte has a token and no text is ever unknown.
//   4. BPE: the adjacent pair with the lowest merge rank (its line in merges.txt) is merged into one
//      token, until no adjacent pair has a rank. Words repeat a lot, so results are cached.
// Decoding maps each token back through the byte table to the raw bytes.
#pragma once
#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/tokenizer/bpe_merge.h"
#include "model/tokenizer/tokenizer.h"

namespace orion {

// The byte → code point table of GPT-2's bytes_to_unicode().
const std::array<uint32_t, 256>& gpt2_byte_to_codepoint();
// Raw bytes in GPT-2's byte-level spelling: each byte becomes the one printable character that
// stands for it in vocabulary files (gpt2_byte_to_codepoint), UTF-8 encoded.
std::string gpt2_byte_level(std::string_view bytes);

// Everything a byte-level BPE tokenizer is built from, as read from its files.
struct Gpt2BpeSpec {
  std::string vocab_file;                            // named in errors about the vocabulary
  std::string merges_file;                           // named in errors about merges
  std::vector<std::pair<std::string, int>> vocab;    // byte-level token string → id
  std::vector<std::array<std::string, 2>> merges;    // in rank order
  std::vector<int> merge_lines;                      // where each merge was read (for errors)
  std::vector<std::pair<std::string, int>> special;  // literal text → id, matched before BPE
  bool add_prefix_space = false;                     // tokenizer.json ByteLevel option
};

class Gpt2BpeTokenizer final : public Tokenizer {
 public:
  // Validates the spec: every byte has a token, every merge names two tokens of the vocabulary and
  // its result is one too. Problems are Input errors naming the file.
  explicit Gpt2BpeTokenizer(const Gpt2BpeSpec& spec);

  std::vector<int> encode(std::string_view text, bool add_bos) const override;
  std::string decode_token(int prev, int id) const override;
  int vocab_size() const override { return static_cast<int>(token_bytes_.size()); }
  int bos_id() const override { return -1; }
  int eos_id() const override { return eos_id_; }
  std::string name() const override { return "gpt2-bpe"; }

  // Encodes text with no special-token handling (what the regex and BPE alone give).
  void encode_ordinary(std::string_view text, std::vector<int>& out) const;

 private:
  void encode_word(std::string_view word, std::vector<int>& out) const;
  void bpe(std::string_view word, std::vector<int>& out) const;

  std::string file_;
  std::array<int, 256> byte_token_{};                 // byte → id of its one-byte token
  BpeMergeTable merges_;                              // (left id, right id) → rank and merged id
  std::vector<std::string> token_bytes_;              // id → raw bytes it decodes to
  std::vector<bool> has_token_;                       // ids that exist (vocabularies may have holes)
  std::vector<std::pair<std::string, int>> special_;  // literal text → id
  bool add_prefix_space_ = false;
  int eos_id_ = -1;

  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int>> cache_;  // word → ids
};

// Readers (gpt2_bpe_files.cpp).
// vocab.json / encoder.json (token → id) with merges.txt / vocab.bpe ("left right" per line): the
// spec as the files hold it (<|endoftext|> its one special token when the vocabulary has it), and
// the tokenizer built from it.
Gpt2BpeSpec read_gpt2_bpe_spec(const std::string& vocab_path, const std::string& merges_path);
// The vocabulary and merges files load_tokenizer(path) reads as a GPT-2 BPE pair (tokenizer.cpp):
// path is one of them (vocab.json, encoder.json, *-vocab.json, merges.txt, vocab.bpe) or a folder
// holding a pair and no tokenizer.json; nullopt otherwise. The merges file may not exist (reading
// it then says so).
struct Gpt2BpeFiles {
  std::string vocab, merges;
};
std::optional<Gpt2BpeFiles> gpt2_bpe_files(const std::string& path);
std::unique_ptr<Tokenizer> load_gpt2_bpe(const std::string& vocab_path, const std::string& merges_path);

}  // namespace orion
