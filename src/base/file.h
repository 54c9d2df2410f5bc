// Files: read-only memory maps, a bounds-checked cursor for binary headers, and crash-safe writes
// (write to a temporary file in the same folder, fsync, rename) so that data already on disk is
// never damaged by a failed or interrupted write.
#pragma once
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace orion {

// A read-only mapping of a whole file. Empty files map to size 0 with a null data pointer.
class MappedFile {
 public:
  // Throws an Input error naming the path when the file is missing or unreadable.
  static std::shared_ptr<MappedFile> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  std::string_view text() const { return {reinterpret_cast<const char*>(data_), size_}; }

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  void* fault_slot_ = nullptr;  // this mapping's entry for the SIGBUS handler
};

// Takes the whole pages inside [p, p + bytes) out of this process's resident memory when the range
// lies inside a MappedFile's mapping (nothing happens otherwise): they stay in the page cache, and
// a later read maps them again from the file. For bytes copied out that will not be read here
// again. (A hint: no effect where the system has no such advice.)
void release_mapped_pages(const void* p, size_t bytes);

// Called once by the CLI: a SIGBUS in a mapped file (truncated or on a vanished disk while being
// read) prints "orion: error: <path>: the file shrank ..." and exits with the Runtime code 4, and
// SIGXFSZ is ignored so that exceeding a file-size limit is a write error naming the file.
void install_file_fault_handlers();

// Sequential little-endian reads from a byte range; running past the end is an Input error that
// names the file, the field being read and its offset.
class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size, std::string file) : p_(data), n_(size), file_(std::move(file)) {}
  size_t offset() const { return off_; }
  size_t remaining() const { return n_ - off_; }
  const std::string& file() const { return file_; }
  void seek(size_t off, const char* field);
  const uint8_t* bytes(size_t count, const char* field);  // returns a pointer into the data
  template <typename T>
  T read(const char* field) {
    T v;
    std::memcpy(&v, bytes(sizeof(T), field), sizeof(T));
    return v;
  }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t off_ = 0;
  std::string file_;
};

std::string read_text_file(const std::string& path);  // Input error if missing
bool file_exists(const std::string& path);
bool is_directory(const std::string& path);

// Writes the file crash-safely: path + ".tmp.<pid>", fsync, rename over path, fsync the folder.
// The callback writes the content through the given writer; on any failure the temporary file
// is removed and the old file at path is left untouched.
class FileWriter {
 public:
  void write(const void* data, size_t n);
  void write_str(std::string_view s) { write(s.data(), s.size()); }
  template <typename T>
  void write_pod(const T& v) {
    write(&v, sizeof(T));
  }
  void pad_to(size_t alignment);  // zero bytes up to the next multiple of alignment
  size_t position() const { return pos_; }

 private:
  friend void write_file_atomic(const std::string&, const std::function<void(FileWriter&)>&);
  int fd_ = -1;
  size_t pos_ = 0;
  std::string path_;
};
void write_file_atomic(const std::string& path, const std::function<void(FileWriter&)>& fill);

}  // namespace orion
