#include "model/tokenizer/unicode.h"

#include <algorithm>
#include <array>

namespace orion {
using unicode_detail::kRangeCount;
using unicode_detail::kRanges;

namespace {

// ASCII is most of real text: answer it from a 128-entry array built once from the same table.
std::array<CharClass, 128> make_ascii_classes() {
  std::array<CharClass, 128> t{};
  for (int i = 0; i < kRangeCount && kRanges[i].first < 128; ++i)
    for (uint32_t cp = kRanges[i].first; cp <= kRanges[i].last && cp < 128; ++cp)
      t[cp] = static_cast<CharClass>(kRanges[i].cls);
  return t;
}

}  // namespace

CharClass char_class(uint32_t cp) {
  static const std::array<CharClass, 128> ascii = make_ascii_classes();
  if (cp < 128) return ascii[cp];
  // The first range whose last code point is >= cp; cp is in it when it starts at or before cp.
  const auto* end = kRanges + kRangeCount;
  const auto* it =
      std::lower_bound(kRanges, end, cp, [](const unicode_detail::CodepointRange& r, uint32_t c) { return r.last < c; });
  if (it != end && it->first <= cp) return static_cast<CharClass>(it->cls);
  return CharClass::Other;
}

Utf8Char decode_utf8(std::string_view s, size_t pos) {
  const auto b0 = static_cast<uint8_t>(s[pos]);
  if (b0 < 0x80) return {b0, 1};
  // The lead byte says how many continuation bytes follow and the smallest value the sequence may
  // encode (anything below it is an overlong encoding, which UTF-8 forbids).
  int len;
  uint32_t cp, min_cp;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2;
    cp = b0 & 0x1F;
    min_cp = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3;
    cp = b0 & 0x0F;
    min_cp = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4;
    cp = b0 & 0x07;
    min_cp = 0x10000;
  } else return {kInvalidCodepoint, 1};
  if (pos + len > s.size()) return {kInvalidCodepoint, 1};
  for (int i = 1; i < len; ++i) {
    const auto b = static_cast<uint8_t>(s[pos + i]);
    if ((b & 0xC0) != 0x80) return {kInvalidCodepoint, 1};
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {kInvalidCodepoint, 1};
  return {cp, len};
}

const char* unicode_table_version() { return unicode_detail::kUnicodeVersion; }

void append_utf8(std::string& s, uint32_t cp) {
  if (cp < 0x80) {
    s += char(cp);
  } else if (cp < 0x800) {
    s += char(0xC0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += char(0xE0 | (cp >> 12));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  } else {
    s += char(0xF0 | (cp >> 18));
    s += char(0x80 | ((cp >> 12) & 0x3F));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  }
}

}  // namespace orion
