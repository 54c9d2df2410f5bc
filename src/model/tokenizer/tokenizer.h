// Tokenizers: text ⇄ token ids. One interface, several formats (GPT-2 byte-level BPE, llama2.c
// tokenizer.bin, SentencePiece .model); load_tokenizer() picks the reader from the path.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace orion {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Token ids of text. add_bos prepends the beginning-of-sequence id where the format has one
  // (llama2.c / SentencePiece: id 1; GPT-2 has none and ignores it).
  virtual std::vector<int> encode(std::string_view text, bool add_bos) const = 0;
  // The bytes of one token as it appears in decoded text. prev is the previous token id (-1 at the
  // start): llama2.c strips the leading space of a piece that follows BOS.
  virtual std::string decode_token(int prev, int id) const = 0;
  // Whole-sequence decode (concatenation of decode_token).
  std::string decode(const std::vector<int>& ids) const;
  virtual int vocab_size() const = 0;
  virtual int bos_id() const = 0;        // -1 when none
  virtual int eos_id() const = 0;        // -1 when none (GPT-2: <|endoftext|> 50256)
  virtual std::string name() const = 0;  // "gpt2-bpe", "llama2c", "sentencepiece", "hf-bpe-bytelevel", "hf-bpe-sentencepiece"
  // The id of one token given by its text, e.g. token_id("<|im_end|>") for a special token of a chat
  // model; nullopt when there is no such token. Formats with a table of token texts (tokenizer.json)
  // look it up there; the default encodes the text without BOS and answers when that gives exactly
  // one id.
  virtual std::optional<int> token_id(std::string_view text) const {
    const std::vector<int> ids = encode(text, false);
    return ids.size() == 1 ? std::optional<int>(ids[0]) : std::nullopt;
  }
};

// Loads a tokenizer from a file or folder (the format readers themselves are load_gpt2_bpe in
// gpt2_bpe.h, load_hf_tokenizer_json in hf_tokenizer.h, load_llama2c_tokenizer in
// llama2c_tokenizer.h and load_sentencepiece in sentencepiece_tokenizer.h):
//   *.model                                 → SentencePiece
//   a GGUF model file (magic "GGUF")        → the tokenizer in its metadata (gguf_tokenizer.h)
//   tokenizer.json (+ tokenizer_config.json beside it)
//                                           → Hugging Face BPE: byte-level (GPT-2, Llama 3, Qwen2,
//                                             SmolLM2) or SentencePiece-style (Llama 2, Mistral)
//   vocab.json (+ merges.txt beside it), encoder.json (+ vocab.bpe), or a folder holding either
//                                           → GPT-2 byte-level BPE
//   merges.txt / vocab.bpe                  → GPT-2 byte-level BPE with the vocabulary beside it
//   anything else (*.bin)                   → llama2.c tokenizer.bin
// A folder is searched in the order tokenizer.json, vocab.json, encoder.json, tokenizer.model,
// tokenizer.bin. GPT-2 special tokens (<|endoftext|>, and a tokenizer.json's added_tokens) written
// literally in the text encode as their own id, as Hugging Face does.
// Malformed input gives an orion::Error (kind Input) naming the file and the problem.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

}  // namespace orion
