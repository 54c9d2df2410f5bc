#include "serve/text_stream.h"

#include <algorithm>

namespace orion::serve {

size_t incomplete_utf8_tail(const std::string& s) {
  // Walk back over at most 3 continuation bytes (10xxxxxx) to the lead byte of the last character.
  size_t n = 0;
  while (n < s.size() && n < 3 && (uint8_t(s[s.size() - 1 - n]) & 0xC0) == 0x80) n++;
  if (n == s.size()) return 0;
  const uint8_t lead = uint8_t(s[s.size() - 1 - n]);
  const size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
  return need > n + 1 ? n + 1 : 0;
}

bool TextStream::append(const std::string& piece) {
  if (stopped_) return true;
  const size_t from = text_.size();
  text_ += piece;
  // Only a match that ends inside the new piece is new: search from where such a match could start.
  size_t cut = std::string::npos;
  for (const std::string& s : stops_) {
    const size_t start = from >= s.size() ? from - s.size() + 1 : 0;
    const size_t at = text_.find(s, start);
    if (at != std::string::npos) cut = std::min(cut, at);
  }
  if (cut == std::string::npos) return false;
  text_.resize(std::max(cut, sent_));
  stopped_ = true;
  return true;
}

// The longest end of the text that is a proper prefix of a stop string, or an incomplete character.
size_t TextStream::held_back() const {
  size_t hold = incomplete_utf8_tail(text_);
  if (stopped_) return hold;
  for (const std::string& s : stops_)
    for (size_t n = std::min(s.size() - 1, text_.size()); n > hold; n--)
      if (text_.compare(text_.size() - n, n, s, 0, n) == 0) {
        hold = n;
        break;
      }
  return hold;
}

std::string TextStream::take_ready() {
  const size_t end = std::max(sent_, text_.size() - held_back());
  std::string out = text_.substr(sent_, end - sent_);
  sent_ = end;
  return out;
}

std::string TextStream::take_rest() {
  std::string out = text_.substr(sent_);
  sent_ = text_.size();
  return out;
}

}  // namespace orion::serve
