// GPT-2's pre-tokeniser: splits text into the pieces that byte-level BPE then encodes one by one.
// It is the regex of OpenAI's encoder.py, written out by hand so that it needs no regex engine:
//
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// \p{L} and \p{N} are the Unicode letter and number categories and \s the White_Space property
// (unicode_tables.cpp), as in Python's `regex`, Rust's `regex` and Oniguruma. (JavaScript's \s
// differs on two code points, U+0085 and U+FEFF.) Invalid UTF-8 bytes count as "other" characters.
// The pieces tile the text exactly: concatenated they give it back.
#pragma once
#include <string_view>
#include <vector>

namespace orion {

std::vector<std::string_view> gpt2_pretokenize(std::string_view text);

// The end (byte offset) of the one piece that starts at pos (pos < text.size()).
size_t gpt2_piece_end(std::string_view text, size_t pos);

}  // namespace orion
