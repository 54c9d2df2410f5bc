// The text stages of a Hugging Face tokenizer.json around its BPE model, each a list of steps read
// from the file (hf_tokenizer_json.cpp) and applied in order:
//
//   normalizer     rewrites the text first: NFC/NFD/NFKC/NFKD (Qwen2 uses NFC, so "e"+U+0301 and
//                  "é" encode alike), Prepend (Llama 2 puts "▁" before the text), Replace (Llama 2
//                  turns every " " into "▁", SentencePiece's visible space), Lowercase.
//   pre-tokenizer  cuts the text into words that BPE encodes one at a time; merges never cross a
//                  word boundary. Split(Regex) cuts by a model's own pattern: Llama 3's
//                    (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//                  keeps contractions apart in any case, glues one leading non-letter (a space, a
//                  quote) to a word, groups digits by three, and leaves a run of spaces before a
//                  word as its own piece except the last space, which the word takes. ByteLevel
//                  maps each UTF-8 byte to one printable character (GPT-2's bytes_to_unicode), and
//                  with use_regex first cuts by GPT-2's pattern. Metaspace turns " " into "▁" and
//                  prepends "▁" (to the first section only for prepend_scheme "first"). Digits
//                  cuts out digit runs (or single digits).
//   decoder        turns each token back into text: ByteLevel undoes the byte mapping,
//                  ByteFallback turns "<0xE4>" into the byte 0xE4, Replace "▁"→" ", Strip drops the
//                  first token's leading space that Prepend or Metaspace added, Fuse joins tokens
//                  (a no-op here: tokens are decoded one at a time and concatenated).
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/tokenizer/hf_regex.h"

namespace orion {

struct HfNormalizerStep {
  enum class Kind { NFC, NFD, NFKC, NFKD, Prepend, Replace, Lowercase };
  Kind kind;
  std::string text;                  // Prepend: what to prepend; Replace: the replacement
  std::shared_ptr<HfRegex> pattern;  // Replace: what to replace
};

struct HfPreTokenizerStep {
  enum class Kind { ByteLevel, Split, Metaspace, Digits };
  // How Split keeps what the pattern matches (the Hugging Face SplitDelimiterBehavior).
  enum class Behavior { Isolated, Removed, MergedWithPrevious, MergedWithNext, Contiguous };
  enum class Prepend { Always, First, Never };
  Kind kind;
  std::shared_ptr<HfRegex> pattern;  // Split; ByteLevel with use_regex (GPT-2's pattern)
  Behavior behavior = Behavior::Isolated;
  bool invert = false;               // Split: the matches are the pieces, the rest is dropped
  bool add_prefix_space = false;     // ByteLevel
  std::string replacement = "\xE2\x96\x81";  // Metaspace: "▁" (U+2581)
  Prepend prepend = Prepend::Always;         // Metaspace
  bool split = false;                        // Metaspace: also cut before each "▁"
  bool individual_digits = false;            // Digits
};

struct HfDecoderStep {
  enum class Kind { ByteLevel, ByteFallback, Replace, Strip, Fuse, Metaspace };
  Kind kind;
  std::string from, to;  // Replace (a literal); Metaspace: from = the replacement character
  std::string content;   // Strip: the character stripped
  int start = 0;         // Strip: how many leading copies of content may go
  bool every_token = false;  // Strip with no Fuse before it strips each token, not just the first
};

// GPT-2's pre-tokenizer regex, which ByteLevel applies when use_regex is true (the default).
const std::string& gpt2_pattern();

// Applies the normalizer steps to text.
std::string hf_normalize(const std::vector<HfNormalizerStep>& steps, std::string text);

// Cuts one section of text (a run between added tokens) into words. section_index counts the
// sections of the whole input, added tokens included (Metaspace's "first" scheme needs it).
std::vector<std::string> hf_pre_tokenize(const std::vector<HfPreTokenizerStep>& steps, const std::string& text,
                                         int section_index);

// The text of one token as the decoder steps give it. first: it is the first token of the
// sequence (Strip and Metaspace drop its leading space). added: an added token, which the
// ByteLevel step passes through unchanged.
std::string hf_decode_token(const std::vector<HfDecoderStep>& steps, const std::string& token, bool first, bool added);

}  // namespace orion
