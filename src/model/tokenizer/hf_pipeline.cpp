#include "model/tokenizer/hf_pipeline.h"

#include <utf8proc.h>

#include <cstdlib>

#include "model/tokenizer/gpt2_bpe.h"
#include "model/tokenizer/unicode.h"

namespace orion {
namespace {

using Pre = HfPreTokenizerStep;

// Unicode normalization of one valid UTF-8 run by utf8proc (the forms of Unicode Standard Annex 15).
std::string utf8proc_normalize(std::string_view run, int options) {
  utf8proc_uint8_t* out = nullptr;
  utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(run.data()),
                                    utf8proc_ssize_t(run.size()), &out, utf8proc_option_t(options));
  if (n < 0) return std::string(run);  // cannot happen for valid UTF-8; keep the text as it was
  std::string s(reinterpret_cast<const char*>(out), size_t(n));
  std::free(out);
  return s;
}

// Invalid bytes (which Hugging Face's Rust and JavaScript libraries never see: their strings are
// valid Unicode) pass through unchanged; each valid run is normalized on its own.
std::string normalize_form(const std::string& text, int options) {
  std::string out;
  for_each_utf8_run(text, [&](size_t b, size_t e, bool valid) {
    std::string_view run(text.data() + b, e - b);
    if (valid) out += utf8proc_normalize(run, options | UTF8PROC_STABLE);
    else out += run;
  });
  return out;
}

std::string lowercase(const std::string& text) {
  std::string out;
  for (size_t pos = 0; pos < text.size();) {
    Utf8Char c = decode_utf8(text, pos);
    if (c.cp == kInvalidCodepoint) out += text[pos];
    else append_utf8(out, uint32_t(utf8proc_tolower(utf8proc_int32_t(c.cp))));
    pos += c.len;
  }
  return out;
}

std::string replace_all(const HfRegex& pattern, const std::string& text, const std::string& with) {
  std::string out;
  size_t last = 0;
  pattern.for_each_match(text, [&](size_t b, size_t e) {
    out.append(text, last, b - last);
    out += with;
    last = e;
  });
  out.append(text, last);
  return out;
}

void replace_literal(std::string& s, const std::string& from, const std::string& to) {
  if (from.empty()) return;
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size())) s.replace(pos, from.size(), to);
}

// The pieces of text cut at the pattern's matches, each marked as a match or a gap between matches;
// invalid UTF-8 bytes are gaps. Empty pieces are left out.
std::vector<std::pair<std::string, bool>> cut_by(const HfRegex& pattern, const std::string& text) {
  std::vector<std::pair<std::string, bool>> parts;
  size_t last = 0;
  pattern.for_each_match(text, [&](size_t b, size_t e) {
    if (b > last) parts.emplace_back(text.substr(last, b - last), false);
    parts.emplace_back(text.substr(b, e - b), true);
    last = e;
  });
  if (last < text.size()) parts.emplace_back(text.substr(last), false);
  return parts;
}

// Split: what becomes of the matches depends on the behavior (invert: the matches are the words).
std::vector<std::string> split(const Pre& step, const std::string& text) {
  using B = Pre::Behavior;
  std::vector<std::string> out;
  bool last_was_match = false;
  for (auto& [piece, is_match] : cut_by(*step.pattern, text)) {
    const bool glue =
        !out.empty() && ((step.behavior == B::MergedWithPrevious && is_match) ||
                         (step.behavior == B::MergedWithNext && !is_match && last_was_match) ||
                         (step.behavior == B::Contiguous && is_match && last_was_match));
    if (step.invert ? is_match : !(step.behavior == B::Removed && is_match)) {
      if (glue && !step.invert) out.back() += piece;
      else out.push_back(piece);
    }
    last_was_match = is_match;
  }
  return out;
}

// ByteLevel: each UTF-8 byte becomes the one printable character that stands for it in the vocabulary.
void byte_level(const Pre& step, std::string text, std::vector<std::string>& out) {
  if (step.add_prefix_space && text.rfind(' ', 0) != 0) text.insert(0, " ");
  if (!step.pattern) {
    out.push_back(gpt2_byte_level(text));
    return;
  }
  for (auto& [piece, is_match] : cut_by(*step.pattern, text)) out.push_back(gpt2_byte_level(piece));
}

void metaspace(const Pre& step, const std::string& text, int section_index, std::vector<std::string>& out) {
  std::string s = text;
  replace_literal(s, " ", step.replacement);
  const bool prepend = step.prepend == Pre::Prepend::Always || (step.prepend == Pre::Prepend::First && section_index == 0);
  if (prepend && s.rfind(step.replacement, 0) != 0) s.insert(0, step.replacement);
  if (!step.split) {
    out.push_back(s);
    return;
  }
  // split: a new word starts at each "▁" (the Rust library's MergedWithNext on the replacement).
  size_t start = 0;
  for (size_t pos = s.find(step.replacement, 1); pos != std::string::npos; pos = s.find(step.replacement, pos + 1)) {
    out.push_back(s.substr(start, pos - start));
    start = pos;
  }
  out.push_back(s.substr(start));
}

// Digits: runs of ASCII digits (or each digit alone) apart from the rest.
void digits(const Pre& step, const std::string& text, std::vector<std::string>& out) {
  auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
  for (size_t pos = 0; pos < text.size();) {
    size_t end = pos + 1;
    if (is_digit(text[pos])) {
      if (!step.individual_digits)
        while (end < text.size() && is_digit(text[end])) ++end;
    } else {
      while (end < text.size() && !is_digit(text[end])) ++end;
    }
    out.push_back(text.substr(pos, end - pos));
    pos = end;
  }
}

}  // namespace

const std::string& gpt2_pattern() {
  static const std::string p = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
  return p;
}

std::string hf_normalize(const std::vector<HfNormalizerStep>& steps, std::string text) {
  using K = HfNormalizerStep::Kind;
  for (const auto& step : steps) {
    switch (step.kind) {
      case K::NFC: text = normalize_form(text, UTF8PROC_COMPOSE); break;
      case K::NFD: text = normalize_form(text, UTF8PROC_DECOMPOSE); break;
      case K::NFKC: text = normalize_form(text, UTF8PROC_COMPOSE | UTF8PROC_COMPAT); break;
      case K::NFKD: text = normalize_form(text, UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT); break;
      case K::Prepend: if (!text.empty()) text.insert(0, step.text); break;
      case K::Replace: text = replace_all(*step.pattern, text, step.text); break;
      case K::Lowercase: text = lowercase(text); break;
    }
  }
  return text;
}

std::vector<std::string> hf_pre_tokenize(const std::vector<HfPreTokenizerStep>& steps, const std::string& text,
                                         int section_index) {
  std::vector<std::string> words{text};
  for (const auto& step : steps) {
    std::vector<std::string> next;
    for (const std::string& w : words) {
      switch (step.kind) {
        case Pre::Kind::ByteLevel: byte_level(step, w, next); break;
        case Pre::Kind::Split: for (auto& p : split(step, w)) next.push_back(std::move(p)); break;
        case Pre::Kind::Metaspace: metaspace(step, w, section_index, next); break;
        case Pre::Kind::Digits: digits(step, w, next); break;
      }
    }
    words = std::move(next);
  }
  return words;
}

namespace {

// "<0xE4>" → 0xE4; -1 for any other token.
int byte_fallback_value(const std::string& t) {
  auto hex = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; };
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>' || hex(t[3]) < 0 || hex(t[4]) < 0) return -1;
  return hex(t[3]) * 16 + hex(t[4]);
}

// ByteLevel decoding: each character back to the byte it stands for.
std::string from_byte_chars(const std::string& token) {
  static const auto inverse = [] {
    std::vector<int> inv(512, -1);
    const auto& table = gpt2_byte_to_codepoint();
    for (int b = 0; b < 256; ++b) inv[table[b]] = b;
    return inv;
  }();
  std::string bytes;
  for (size_t pos = 0; pos < token.size();) {
    Utf8Char c = decode_utf8(token, pos);
    if (c.cp < inverse.size() && inverse[c.cp] >= 0) bytes += char(inverse[c.cp]);
    else bytes.append(token, pos, c.len);  // not a byte character: kept as it is
    pos += c.len;
  }
  return bytes;
}

}  // namespace

std::string hf_decode_token(const std::vector<HfDecoderStep>& steps, const std::string& token, bool first, bool added) {
  using K = HfDecoderStep::Kind;
  std::string s = token;
  for (const auto& step : steps) {
    switch (step.kind) {
      case K::ByteLevel:
        if (!added) s = from_byte_chars(s);
        break;
      case K::ByteFallback:
        if (int b = byte_fallback_value(s); b >= 0) s = std::string(1, char(b));
        break;
      case K::Replace: replace_literal(s, step.from, step.to); break;
      case K::Strip:
        if (first || step.every_token)
          for (int i = 0; i < step.start && !step.content.empty() && s.rfind(step.content, 0) == 0; ++i)
            s.erase(0, step.content.size());
        break;
      case K::Metaspace:
        replace_literal(s, step.from, " ");
        if (first && !s.empty() && s[0] == ' ') s.erase(0, 1);
        break;
      case K::Fuse: break;
    }
  }
  return s;
}

}  // namespace orion
