// The text of one completion as it streams: token pieces are appended, and only what can no longer
// change is released — not the start of a stop string that the next tokens may complete, and not
// the first bytes of a UTF-8 character whose last bytes are still to come (a JSON string must hold
// whole characters).
#pragma once
#include <string>
#include <vector>

namespace orion::serve {

class TextStream {
 public:
  explicit TextStream(std::vector<std::string> stop_strings) : stops_(std::move(stop_strings)) {}

  // Appends a token's piece. Returns true when the text now contains a stop string: the text is cut
  // before it, and nothing more may be appended.
  bool append(const std::string& piece);
  // The text safe to send since the last call.
  std::string take_ready();
  // At the end: everything not yet taken (a held-back prefix of a stop string is real text then).
  std::string take_rest();
  const std::string& text() const { return text_; }

 private:
  size_t held_back() const;  // bytes at the end that may still change
  std::vector<std::string> stops_;
  std::string text_;
  size_t sent_ = 0;
  bool stopped_ = false;
};

// The number of bytes at the end of s that start a UTF-8 character not yet complete.
size_t incomplete_utf8_tail(const std::string& s);

}  // namespace orion::serve
