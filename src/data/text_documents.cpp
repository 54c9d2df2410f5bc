#include "data/text_documents.h"

#include "base/error.h"

namespace orion::data {
namespace {

constexpr std::string_view kEndOfText = "<|endoftext|>";

std::string_view trim(std::string_view s) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

// True when some line of text is exactly <|endoftext|> (after trimming).
bool has_endoftext_line(std::string_view text) {
  for (size_t at = text.find(kEndOfText); at != std::string_view::npos; at = text.find(kEndOfText, at + 1)) {
    size_t b = text.rfind('\n', at);
    b = b == std::string_view::npos ? 0 : b + 1;
    size_t e = text.find('\n', at);
    if (e == std::string_view::npos) e = text.size();
    if (trim(text.substr(b, e - b)) == kEndOfText) return true;
  }
  return false;
}

}  // namespace

size_t find_invalid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const uint8_t c = uint8_t(s[i]);
    if (c == 0) return i;
    int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > s.size()) return i;
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < len; ++k) {
      const uint8_t cc = uint8_t(s[i + k]);
      if ((cc & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Overlong forms, UTF-16 surrogates and code points beyond U+10FFFF are not UTF-8.
    static constexpr uint32_t kMinForLength[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMinForLength[len] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return i;
    i += len;
  }
  return std::string_view::npos;
}

TextDocumentReader::TextDocumentReader(const std::string& path) : file_(MappedFile::open(path)) {
  text_ = file_->text();
  eot_mode_ = has_endoftext_line(text_);
}

bool TextDocumentReader::at_separator(size_t b, size_t e) const {
  std::string_view line = trim(text_.substr(b, e - b));
  return eot_mode_ ? line == kEndOfText : line.empty();
}

void TextDocumentReader::check_utf8(size_t begin, size_t end) const {
  size_t bad = find_invalid_utf8(text_.substr(begin, end - begin));
  if (bad == std::string_view::npos) return;
  const uint8_t byte = uint8_t(text_[begin + bad]);
  throw_input_error(file_->path(),
                    byte == 0 ? "NUL byte in a text file" : fmt::format("invalid UTF-8 (byte 0x{:02X})", byte), {},
                    int64_t(begin + bad), "expected UTF-8 text; is this a binary or token file?");
}

bool TextDocumentReader::next(std::string& doc) {
  while (pos_ < text_.size()) {
    // Collect lines until a separator line (or the end); [start, end) is the document's span.
    const size_t start = pos_;
    size_t end = pos_;
    while (pos_ < text_.size()) {
      size_t nl = text_.find('\n', pos_);
      size_t line_end = nl == std::string_view::npos ? text_.size() : nl;
      const bool sep = at_separator(pos_, line_end);
      pos_ = nl == std::string_view::npos ? text_.size() : nl + 1;
      if (sep) break;
      end = line_end;
    }
    check_utf8(start, end);
    std::string_view d = trim(text_.substr(start, end - start));
    if (!d.empty()) {
      doc.assign(d);
      return true;
    }
  }
  return false;
}

}  // namespace orion::data
