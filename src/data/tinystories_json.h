// TinyStories JSON shards (data00.json … data49.json of TinyStories_all_data): one JSON array of
// objects, each with a string field "story" (and others — summary, instruction, source — ignored).
//
// The files are ~100 MB, so they are streamed: the file is memory-mapped, a scanner walks the
// array and finds each object's extent (tracking strings and escapes so braces inside stories do not
// count), and only that one object is parsed. Memory stays at one story, not one DOM of the file.
#pragma once
#include <memory>
#include <string>

#include "base/file.h"

namespace orion::data {

class TinyStoriesReader {
 public:
  explicit TinyStoriesReader(const std::string& path);  // Input error when missing or not an array
  // The next story; false after the last one. Malformed input (truncation, an element that is not an
  // object, no string "story", bad JSON inside an object, text after the array) is an Input error
  // naming the file, the byte offset and what was expected.
  bool next(std::string& story);
  size_t offset() const { return pos_; }  // bytes consumed so far
  size_t size() const { return file_->size(); }
  size_t objects_read() const { return index_; }

 private:
  void skip_space();
  size_t object_end(size_t start) const;  // one past the '}' that closes the object at start
  [[noreturn]] void fail(size_t at, const std::string& what, const std::string& hint = {}) const;

  std::shared_ptr<MappedFile> file_;
  const char* p_ = nullptr;
  size_t n_ = 0, pos_ = 0, index_ = 0;
  bool done_ = false;
};

}  // namespace orion::data
