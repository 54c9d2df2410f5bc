// The small part of Unicode the tokenizers need: decoding UTF-8 one code point at a time, and the
// character classes of GPT-2's pre-tokeniser regex (letter \p{L}, number \p{N}, whitespace \s).
// The class table is generated from Python's unicodedata by scripts/golden/gen_unicode_tables.py.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace orion {

enum class CharClass : uint8_t { Other = 0, Letter = 1, Number = 2, Space = 3 };

// The class of one code point (binary search in the range table; ASCII through a small array).
CharClass char_class(uint32_t cp);

// One decoded code point: its value and how many bytes of the text it spans. Invalid UTF-8 (a stray
// continuation byte, a truncated or overlong sequence, a surrogate) decodes as one byte whose value
// is kInvalidCodepoint, which is class Other — the bytes are still encoded, byte-level, unchanged.
struct Utf8Char {
  uint32_t cp;
  int len;
};
inline constexpr uint32_t kInvalidCodepoint = 0xFFFFFFFF;
Utf8Char decode_utf8(std::string_view s, size_t pos);

// Appends the UTF-8 encoding of code point cp (< 0x110000) to s.
void append_utf8(std::string& s, uint32_t cp);

// The Unicode version the class table was generated from ("14.0.0").
const char* unicode_table_version();

namespace unicode_detail {
struct CodepointRange {
  uint32_t first, last;  // inclusive
  uint8_t cls;           // CharClass
};
extern const char* const kUnicodeVersion;
extern const int kRangeCount;
extern const CodepointRange kRanges[];
}  // namespace unicode_detail

}  // namespace orion
