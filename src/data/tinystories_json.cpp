#include "data/tinystories_json.h"
#include "base/json_error.h"

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace orion::data {

TinyStoriesReader::TinyStoriesReader(const std::string& path) : file_(MappedFile::open(path)) {
  p_ = reinterpret_cast<const char*>(file_->data());
  n_ = file_->size();
  skip_space();
  if (pos_ >= n_) fail(pos_, "the file is empty; expected a JSON array of objects with a \"story\" field");
  if (p_[pos_] != '[') fail(pos_, fmt::format("expected '[' (a JSON array of stories), found '{}'", p_[pos_]));
  ++pos_;
  skip_space();
  if (pos_ < n_ && p_[pos_] == ']') {  // an empty array is a valid (empty) shard
    ++pos_;
    done_ = true;
  }
}

void TinyStoriesReader::fail(size_t at, const std::string& what, const std::string& hint) const {
  throw_input_error(file_->path(), what, fmt::format("story {}", index_), int64_t(at),
                    hint.empty() ? "expected a TinyStories JSON shard: [{\"story\": \"...\", ...}, ...]" : hint);
}

void TinyStoriesReader::skip_space() {
  while (pos_ < n_ && (p_[pos_] == ' ' || p_[pos_] == '\n' || p_[pos_] == '\r' || p_[pos_] == '\t')) ++pos_;
}

size_t TinyStoriesReader::object_end(size_t start) const {
  int depth = 0;
  bool in_string = false;
  for (size_t i = start; i < n_; ++i) {
    const char c = p_[i];
    if (in_string) {
      if (c == '\\') ++i;  // the escaped character cannot end the string
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') ++depth;
    else if ((c == '}' || c == ']') && --depth == 0) return i + 1;
  }
  fail(start, "the file ends inside this object", "the file is truncated");
}

bool TinyStoriesReader::next(std::string& story) {
  if (done_) return false;
  skip_space();
  if (pos_ >= n_) fail(pos_, "the file ends inside the array (no closing ']')", "the file is truncated");
  if (p_[pos_] != '{') fail(pos_, fmt::format("expected an object '{{', found '{}'", p_[pos_]));
  const size_t start = pos_, end = object_end(start);
  nlohmann::json obj;
  try {
    obj = nlohmann::json::parse(p_ + start, p_ + end);
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for numbers like 1e7777
    fail(start + (json_error_byte(e) > 0 ? json_error_byte(e) - 1 : 0), fmt::format("invalid JSON: {}", e.what()));
  }
  auto it = obj.find("story");
  if (it == obj.end() || !it->is_string()) fail(start, "the object has no string field \"story\"");
  story = it->get<std::string>();
  ++index_;
  pos_ = end;
  skip_space();
  if (pos_ >= n_) fail(pos_, "the file ends inside the array (no closing ']')", "the file is truncated");
  if (p_[pos_] == ',') {
    ++pos_;
  } else if (p_[pos_] == ']') {
    ++pos_;
    skip_space();
    if (pos_ < n_) fail(pos_, "unexpected text after the closing ']'");
    done_ = true;
  } else {
    fail(pos_, fmt::format("expected ',' or ']' after the object, found '{}'", p_[pos_]));
  }
  return true;
}

}  // namespace orion::data
