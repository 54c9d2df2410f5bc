#include "model/tokenizer/gpt2_pretokenize.h"

#include "model/tokenizer/unicode.h"

namespace orion {
namespace {

struct Peek {
  CharClass cls;
  int len;  // bytes
};

Peek peek(std::string_view s, size_t pos) {
  Utf8Char c = decode_utf8(s, pos);
  return {c.cp == kInvalidCodepoint ? CharClass::Other : char_class(c.cp), c.len};
}

// Alternative 1: the English contractions 's 't 're 've 'm 'll 'd (ASCII apostrophe, lower case).
// Returns the length of the match, 0 when there is none.
size_t contraction_length(std::string_view s, size_t pos) {
  if (s[pos] != '\'' || pos + 1 >= s.size()) return 0;
  const char a = s[pos + 1];
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (pos + 2 >= s.size()) return 0;
  const char b = s[pos + 2];
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// End of the run of characters of class cls that starts at pos.
size_t run_end(std::string_view s, size_t pos, CharClass cls) {
  while (pos < s.size()) {
    Peek p = peek(s, pos);
    if (p.cls != cls) break;
    pos += p.len;
  }
  return pos;
}

// Alternatives 5 and 6 for the whitespace run starting at pos. `\s+(?!\S)` takes the whole run when
// it reaches the end of the text; otherwise it backtracks one character so that the last space is
// left to prefix the next word (" ?\p{L}+" etc.). A run of one character followed by a non-space
// cannot backtrack, so `\s+` takes it alone.
size_t whitespace_end(std::string_view s, size_t pos) {
  size_t last_start = pos, end = pos;
  while (end < s.size()) {
    Peek p = peek(s, end);
    if (p.cls != CharClass::Space) break;
    last_start = end;
    end += p.len;
  }
  if (end == s.size()) return end;
  return last_start > pos ? last_start : end;
}

}  // namespace

size_t gpt2_piece_end(std::string_view s, size_t pos) {
  if (size_t n = contraction_length(s, pos)) return pos + n;
  // Alternatives 2–4: an optional single ' ' then a run of letters, of numbers, or of characters
  // that are neither (punctuation, symbols, marks, emoji). Which one applies is decided by the
  // class of the first character after the optional space.
  size_t start = (s[pos] == ' ' && pos + 1 < s.size()) ? pos + 1 : pos;
  CharClass cls = peek(s, start).cls;
  if (cls != CharClass::Space) return run_end(s, start, cls);
  return whitespace_end(s, pos);
}

std::vector<std::string_view> gpt2_pretokenize(std::string_view text) {
  std::vector<std::string_view> pieces;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = gpt2_piece_end(text, pos);
    pieces.push_back(text.substr(pos, end - pos));
    pos = end;
  }
  return pieces;
}

}  // namespace orion
