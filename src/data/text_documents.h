// Plain text files as documents. The rule:
//   * If the file has a line that is exactly "<|endoftext|>" (spaces and a '\r' around it allowed),
//     those lines separate documents — the format of TinyStories' .txt releases, whose stories
//     contain blank lines between paragraphs.
//   * Otherwise one or more blank lines (empty or only spaces/tabs/'\r') separate documents, so a
//     file of one-paragraph stories separated by empty lines, or a file holding one document with
//     no blank line, both read naturally.
// Each document is trimmed of surrounding whitespace; empty ones are dropped. A folder is read file
// by file (document_stream.h), so "one document per file" is the same rule applied per file.
// The text must be UTF-8 without NUL bytes; anything else is an Input error naming the byte
// offset (it is usually a binary file passed by mistake).
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include "base/file.h"

namespace orion::data {

class TextDocumentReader {
 public:
  explicit TextDocumentReader(const std::string& path);
  bool next(std::string& doc);  // false at the end
  size_t offset() const { return pos_; }
  size_t size() const { return text_.size(); }
  bool endoftext_separated() const { return eot_mode_; }

 private:
  bool at_separator(size_t line_start, size_t line_end) const;
  void check_utf8(size_t begin, size_t end) const;

  std::shared_ptr<MappedFile> file_;
  std::string_view text_;
  size_t pos_ = 0;
  bool eot_mode_ = false;
};

// The byte offset of the first NUL or invalid UTF-8 sequence in s, or npos when s is clean.
size_t find_invalid_utf8(std::string_view s);

}  // namespace orion::data
