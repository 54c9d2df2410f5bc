// Hugging Face tokenizer.json tokenizers with a BPE model: the byte-level kind (GPT-2, Llama 3,
// Qwen2/2.5/3, SmolLM2) and the SentencePiece kind (Llama 2, Mistral, TinyLlama), giving the ids
// Hugging Face gives (tests/model/tokenizer_goldens holds the reference's ids).
//
// How text becomes ids (the order of Hugging Face's encode):
//   1. Added tokens ("<|im_end|>", "<s>", ...) written in the text are cut out first, the longest
//      at the leftmost position winning, and become their own ids. lstrip/rstrip tokens also eat
//      the whitespace before/after them. Tokens marked "normalized" are looked for again after
//      step 2, in the normalized text.
//   2. Each remaining section is normalized, then pre-tokenized into words (hf_pipeline.h).
//   3. BPE encodes each word: one symbol per character, then merges (bpe_merge.h). With
//      ignore_merges (Llama 3) a word that is itself in the vocabulary is that one token. A
//      character the vocabulary lacks becomes, with byte_fallback, the tokens "<0xNN>" of its
//      UTF-8 bytes (so SentencePiece vocabularies with 256 byte tokens never need <unk>), else
//      unk_token (consecutive ones fused into one with fuse_unk).
//   4. With add_bos (add_special_tokens in Hugging Face's words) the post_processor's
//      TemplateProcessing wraps the ids (Llama 3 puts <|begin_of_text|> first, Llama 2 <s>). The
//      template is authoritative when the file has one, as in Hugging Face's tokenizers library
//      (the @huggingface/transformers reference reads no add_bos_token); only a file without
//      a template takes tokenizer_config.json's add_bos_token / add_eos_token, as transformers'
//      Python tokenizers do.
// Decoding runs each token through the decoder steps on its own (hf_decode_token), so
// decode_token(prev, id) streams: the bytes of a character split over several byte tokens are
// returned as they come, in order, and the concatenation is exactly decode(ids). (decode_token has
// no state to hold an incomplete character back; a printer that writes the bytes in order, as
// `orion generate` does, still shows whole characters.)
//
// Where Hugging Face's two libraries differ, Orion follows the Rust one (what transformers runs):
// \s is Unicode White_Space (PCRE2 = Oniguruma; JavaScript adds U+FEFF), Metaspace's split cuts
// before each "▁" (JavaScript ignores split), fuse_unk fuses within a word. Not done: Strip from the
// end (refused), single_word added tokens (matched like others), clean_up_tokenization_spaces (a
// display option of transformers' decode), and byte tokens that do not form UTF-8 decode to their
// raw bytes rather than U+FFFD.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <array>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/tokenizer/bpe_merge.h"
#include "model/tokenizer/hf_pipeline.h"
#include "model/tokenizer/tokenizer.h"

namespace orion {

struct HfAddedToken {
  std::string content;
  int id = -1;
  bool special = false;     // a control token (skipped by Hugging Face's skip_special_tokens)
  bool lstrip = false;      // also takes the whitespace before it
  bool rstrip = false;      // also takes the whitespace after it
  bool normalized = false;  // matched in the normalized text instead of the raw text
};

// Everything a tokenizer.json (and the tokenizer_config.json beside it) says, as read.
struct HfTokenizerSpec {
  std::string file;                                // named in errors
  std::vector<std::pair<std::string, int>> vocab;  // model.vocab
  std::vector<std::array<std::string, 2>> merges;  // model.merges, in rank order
  std::vector<HfAddedToken> added;
  std::vector<HfNormalizerStep> normalizer;
  std::vector<HfPreTokenizerStep> pre_tokenizer;
  std::vector<HfDecoderStep> decoder;
  std::optional<std::string> unk_token;
  bool byte_fallback = false, fuse_unk = false, ignore_merges = false;
  bool byte_level = false;  // a ByteLevel pre-tokenizer or decoder: the GPT-2 family
  bool gpt2 = false;        // exactly GPT-2's pipeline: ByteLevel with its regex alone, nothing else
  // The post_processor's TemplateProcessing for one sequence: the tokens before and after $A.
  bool has_template = false;
  std::vector<int> template_before, template_after;
  // tokenizer_config.json
  bool add_bos_token = false, add_eos_token = false;
  std::optional<std::string> bos_token, eos_token;
  bool has_config = false;
  std::string config_file;  // its path, named in errors
};

class HfBpeTokenizer final : public Tokenizer {
 public:
  // Checks the spec: ids unique and in range, every merge names two tokens of the vocabulary and
  // its result is one too. Problems are Input errors naming the file and the JSON field.
  explicit HfBpeTokenizer(HfTokenizerSpec spec);

  std::vector<int> encode(std::string_view text, bool add_bos) const override;
  std::string decode_token(int prev, int id) const override;
  int vocab_size() const override { return static_cast<int>(tokens_.size()); }
  int bos_id() const override { return bos_id_; }
  int eos_id() const override { return eos_id_; }
  // "gpt2-bpe" for a tokenizer.json that is GPT-2's tokenizer exactly (the same ids as vocab.json +
  // merges.txt; `orion data prepare` picks llm.c's token format by that name), else the kind.
  std::string name() const override {
    return spec_.gpt2 ? "gpt2-bpe" : spec_.byte_level ? "hf-bpe-bytelevel" : "hf-bpe-sentencepiece";
  }
  std::optional<int> token_id(std::string_view token) const override;

 private:
  void encode_section(const std::string& text, int section_index, std::vector<int>& out) const;
  void encode_word(const std::string& word, std::vector<int>& out) const;
  void bpe(const std::string& word, std::vector<int>& out) const;
  void resolve_bos_eos();

  HfTokenizerSpec spec_;
  std::unordered_map<std::string, int> ids_;        // vocabulary token → id
  std::unordered_map<std::string, int> added_ids_;  // added token content → id (wins over ids_)
  std::vector<std::string> tokens_;           // id → token string (vocabulary or added content)
  std::vector<bool> has_token_, is_added_;
  BpeMergeTable merges_;
  std::array<int, 256> byte_tokens_{};  // byte → id of "<0xNN>" (-1 where missing)
  int unk_id_ = -1, bos_id_ = -1, eos_id_ = -1;
  std::shared_ptr<struct HfMatchers> matchers_;  // finds added tokens in raw and normalized text

  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int>> cache_;  // word → ids
};

// Reads a tokenizer.json (hf_tokenizer_json.cpp), and tokenizer_config.json when one is beside it.
std::unique_ptr<Tokenizer> load_hf_tokenizer_json(const std::string& path);
// The same in two steps, for a tokenizer.json document made elsewhere (a GGUF file's tokenizer):
// what the document says (errors name `source`), then the tokenizer — after the caller has filled
// in what a tokenizer_config.json would say (add_bos_token, bos_token, …).
HfTokenizerSpec hf_tokenizer_spec(const nlohmann::json& root, const std::string& source);
std::unique_ptr<Tokenizer> make_hf_tokenizer(HfTokenizerSpec spec);

}  // namespace orion
