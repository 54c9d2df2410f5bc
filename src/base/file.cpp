#include "base/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace orion {

std::shared_ptr<MappedFile> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw_input_error(path, fmt::format("cannot open: {}", std::strerror(errno)), {}, -1,
                      "check the path and its permissions");
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw_input_error(path, "not a regular file", {}, -1, "pass the path of a file, not a folder");
  }
  auto m = std::shared_ptr<MappedFile>(new MappedFile());
  m->path_ = path;
  m->size_ = size_t(st.st_size);
  if (m->size_ > 0) {
    void* p = mmap(nullptr, m->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      throw_input_error(path, fmt::format("cannot map {} bytes: {}", m->size_, std::strerror(e)));
    }
    madvise(p, m->size_, MADV_WILLNEED);
    m->data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return m;
}

MappedFile::~MappedFile() {
  if (data_) munmap(const_cast<uint8_t*>(data_), size_);
}

void ByteReader::seek(size_t off, const char* field) {
  if (off > n_)
    throw_input_error(file_, fmt::format("offset {} is past the end of the file ({} bytes)", off, n_), field,
                      int64_t(off), "the file is truncated or corrupt");
  off_ = off;
}

const uint8_t* ByteReader::bytes(size_t count, const char* field) {
  if (count > n_ - off_)
    throw_input_error(file_,
                      fmt::format("needs {} bytes but only {} remain of {}", count, n_ - off_, n_),
                      field, int64_t(off_), "the file is truncated; download or export it again");
  const uint8_t* p = p_ + off_;
  off_ += count;
  return p;
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_input_error(path, fmt::format("cannot open: {}", std::strerror(errno)), {}, -1,
                             "check the path and its permissions");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool file_exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

bool is_directory(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec);
}

void FileWriter::write(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd_, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw_runtime_error(fmt::format("write failed: {}", std::strerror(errno)), path_,
                          errno == ENOSPC ? "the disk is full; free some space and try again" : "");
    }
    p += w;
    n -= size_t(w);
    pos_ += size_t(w);
  }
}

void FileWriter::pad_to(size_t alignment) {
  static const char zeros[256] = {};
  while (pos_ % alignment) write(zeros, std::min(sizeof zeros, alignment - pos_ % alignment));
}

void write_file_atomic(const std::string& path, const std::function<void(FileWriter&)>& fill) {
  std::string tmp = fmt::format("{}.tmp.{}", path, getpid());
  FileWriter w;
  w.path_ = path;
  w.fd_ = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (w.fd_ < 0)
    throw_runtime_error(fmt::format("cannot create {}: {}", tmp, std::strerror(errno)), path,
                        "check that the folder exists and is writable");
  try {
    fill(w);
    if (fsync(w.fd_) != 0) throw_runtime_error(fmt::format("fsync failed: {}", std::strerror(errno)), path);
    ::close(w.fd_);
    w.fd_ = -1;
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
      throw_runtime_error(fmt::format("cannot rename {} into place: {}", tmp, std::strerror(errno)), path);
  } catch (...) {
    if (w.fd_ >= 0) ::close(w.fd_);
    ::unlink(tmp.c_str());
    throw;
  }
  std::string dir = std::filesystem::path(path).parent_path().string();
  int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace orion
