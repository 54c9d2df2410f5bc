// The regular expressions of tokenizer.json files (Split pre-tokenizers, Replace normalizers and
// decoders, ByteLevel's built-in GPT-2 pattern), run by PCRE2 in UTF mode with Unicode properties
// (UCP), so \p{L}, \p{N}, \s, (?i:...) and look-ahead mean what they mean in the Oniguruma engine
// Hugging Face's Rust library uses. Hand-writing each model's pattern (as gpt2_pretokenize does for
// GPT-2) does not scale: Llama 3 and Qwen2 each ship their own.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace orion {

class HfRegex {
 public:
  // Compiles pattern; a pattern PCRE2 rejects throws std::invalid_argument with PCRE2's message and
  // the offset of the problem (the reader turns it into an Input error naming the JSON field).
  explicit HfRegex(const std::string& pattern);
  // A regex that matches the text literally (a {"String": ...} pattern).
  static HfRegex literal(const std::string& text);
  ~HfRegex();
  HfRegex(HfRegex&&) noexcept;
  HfRegex& operator=(HfRegex&&) noexcept;

  // Calls on_match(begin, end) for each non-empty, non-overlapping match, left to right, as
  // JavaScript's matchAll and Rust's find_iter do. Invalid UTF-8 bytes never match: the text is
  // searched one valid run at a time. A search that exceeds PCRE2's match limit (a pattern that
  // backtracks catastrophically) throws a Runtime error rather than hang.
  void for_each_match(std::string_view text, const std::function<void(size_t, size_t)>& on_match) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  HfRegex() = default;
};

// Calls fn(begin, end, valid) for the maximal runs of valid UTF-8 and the single invalid bytes
// between them, in order; they tile the text.
void for_each_utf8_run(std::string_view text, const std::function<void(size_t, size_t, bool)>& fn);

}  // namespace orion
