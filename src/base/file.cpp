#include "base/file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace orion {

namespace {
// The mapped files, for the SIGBUS handler: touching a page of a mapping whose file was truncated
// (or whose disk vanished) raises SIGBUS, which would kill the process with no word. The handler
// looks the faulting address up here and prints which file it was. Slots are claimed and released
// with atomics; a handler only reads them.
struct MappedRange {
  std::atomic<const uint8_t*> begin{nullptr};
  std::atomic<size_t> size{0};
  char path[480] = {};
  std::atomic<bool> used{false};
};
MappedRange g_mapped[128];

MappedRange* register_mapping(const uint8_t* begin, size_t size, const std::string& path) {
  for (MappedRange& r : g_mapped) {
    bool expected = false;
    if (!r.used.compare_exchange_strong(expected, true)) continue;
    std::snprintf(r.path, sizeof r.path, "%s", path.c_str());
    r.size.store(size);
    r.begin.store(begin);
    return &r;
  }
  return nullptr;  // more than 128 maps at once: the handler then names no file
}

void say(const char* s) {
  ssize_t ignored = ::write(2, s, std::strlen(s));
  (void)ignored;
}

void on_sigbus(int, siginfo_t* info, void*) {
  const uint8_t* at = static_cast<const uint8_t*>(info->si_addr);
  say("orion: error: ");
  for (MappedRange& r : g_mapped) {
    const uint8_t* b = r.begin.load();
    if (b && at >= b && at < b + r.size.load()) {
      say(r.path);
      say(": ");
      break;
    }
  }
  say("the file shrank or became unreadable while it was being read (hint: do not truncate, rewrite or "
      "delete input files while orion runs; check the disk)\n");
  _exit(4);  // ErrorKind::Runtime
}
}  // namespace

void install_file_fault_handlers() {
  struct sigaction sa {};
  sa.sa_sigaction = on_sigbus;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, nullptr);
  // A file-size limit (ulimit -f) then fails the write with EFBIG, reported like a full disk,
  // instead of killing the process.
  signal(SIGXFSZ, SIG_IGN);
}

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
    m->fault_slot_ = register_mapping(m->data_, m->size_, path);
  }
  ::close(fd);
  return m;
}

void release_mapped_pages(const void* p, size_t bytes) {
  // Only inside a MappedFile's own mapping (private, never written: dropping its pages loses
  // nothing the file does not hold) — on other memory the same advice would zero it.
  const auto* at = static_cast<const uint8_t*>(p);
  for (const MappedRange& r : g_mapped) {
    const uint8_t* b = r.begin.load();
    if (!b || at < b || at + bytes > b + r.size.load()) continue;
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    const uintptr_t begin = (reinterpret_cast<uintptr_t>(at) + page - 1) / page * page;
    const uintptr_t end = (reinterpret_cast<uintptr_t>(at) + bytes) / page * page;
#ifdef MADV_DONTNEED
    if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
#endif
    return;
  }
}

MappedFile::~MappedFile() {
  if (fault_slot_) {
    auto* r = static_cast<MappedRange*>(fault_slot_);
    r->begin.store(nullptr);
    r->used.store(false);
  }
  if (data_) munmap(const_cast<uint8_t*>(data_), size_);
}

void ByteReader::seek(size_t off, const char* field) {
  if (off > n_)
    throw_input_error(file_, fmt::format("offset {} is past the end of the file ({} bytes)", off, n_), field, int64_t(off),
                      "the file is truncated or corrupt");
  off_ = off;
}

const uint8_t* ByteReader::bytes(size_t count, const char* field) {
  if (count > n_ - off_)
    throw_input_error(file_, fmt::format("needs {} bytes but only {} remain of {}", count, n_ - off_, n_), field,
                      int64_t(off_), "the file is truncated; download or export it again");
  const uint8_t* p = p_ + off_;
  off_ += count;
  return p;
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw_input_error(path, fmt::format("cannot open: {}", std::strerror(errno)), {}, -1,
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

namespace {
// Crash-safety tests (tests/tools/test_cli_crash_safety.cpp, scripts/kill_test.sh) set
// ORION_TEST_WRITE_DELAY_MS to hold every crash-safe write open that long before each chunk, so
// that a SIGKILL at a random moment often lands in the middle of one. Unset: no delay.
int write_delay_ms() {
  static const int ms = [] {
    const char* v = std::getenv("ORION_TEST_WRITE_DELAY_MS");
    return v ? std::max(0, std::atoi(v)) : 0;
  }();
  return ms;
}
}  // namespace

void FileWriter::write(const void* data, size_t n) {
  if (write_delay_ms() > 0) usleep(useconds_t(write_delay_ms()) * 1000);
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd_, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      throw_runtime_error(fmt::format("write failed: {}", std::strerror(e)), path_,
                          e == ENOSPC || e == EDQUOT ? "the disk is full; free some space and try again"
                          : e == EFBIG               ? "the file exceeds the size limit (ulimit -f) or the file system's"
                                                     : "");
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
    const int closed = ::close(w.fd_);  // some file systems report a full disk only here
    w.fd_ = -1;
    if (closed != 0) throw_runtime_error(fmt::format("close failed: {}", std::strerror(errno)), path);
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
