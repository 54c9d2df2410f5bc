// Resource failures give one clear error naming the file or the allocation, never a crash:
// a write that hits a size limit (the same path as a full disk), a folder that does not exist, a
// mapped file truncated while being read (SIGBUS), and an allocation larger than the machine.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/file.h"
#include "support.h"

namespace fs = std::filesystem;
using namespace orion;

namespace {
std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
bool has_tmp_file(const std::string& dir) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) return true;
  return false;
}
}  // namespace

// RLIMIT_FSIZE makes write() fail with EFBIG part-way, exactly where a full disk fails with ENOSPC.
void write_past_the_size_limit(const std::string& dir, const std::string& path) {
  install_file_fault_handlers();  // SIGXFSZ ignored: the write fails instead of killing us
  rlimit small{16384, 16384};
  setrlimit(RLIMIT_FSIZE, &small);
  std::vector<char> big(1 << 20, 'x');
  try {
    write_file_atomic(path, [&](FileWriter& w) { w.write(big.data(), big.size()); });
    std::fprintf(stderr, "no error\n");
  } catch (const Error& e) {
    std::fprintf(stderr, "%s|kind=%d|tmp=%d|old=%s\n", e.what(), int(e.kind()), int(has_tmp_file(dir)), slurp(path).c_str());
  }
  std::exit(0);
}

TEST(FileFaults, WriteBeyondTheSizeLimitNamesTheFileAndKeepsTheOldOne) {
  const std::string dir = test::temp_dir(), path = dir + "/model.bin";
  std::ofstream(path) << "the previous model";
  EXPECT_EXIT(write_past_the_size_limit(dir, path), testing::ExitedWithCode(0),
              "model.bin: write failed: File too large.*ulimit.*\\|kind=2\\|tmp=0\\|old=the previous model");
}

TEST(FileFaults, WriteIntoAMissingFolderNamesThePath) {
  const std::string path = test::temp_dir() + "/no/such/folder/out.bin";
  try {
    write_file_atomic(path, [](FileWriter& w) { w.write_str("x"); });
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Runtime);
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

void read_after_truncation(const std::string& path) {
  install_file_fault_handlers();
  auto f = MappedFile::open(path);
  fs::resize_file(path, 0);
  volatile uint8_t sum = 0;
  for (size_t i = 0; i < f->size(); i += 512) sum += f->data()[i];
  std::exit(0);
}

// A file truncated while mapped: reading past the new end raises SIGBUS; the handler names the file
// and exits with the Runtime code instead of a silent crash.
TEST(FileFaults, TruncatedWhileMappedIsOneLineAndExitCode4) {
#if defined(ORION_SANITIZED)
  GTEST_SKIP() << "AddressSanitizer owns SIGBUS in the sanitizer build";
#endif
  const std::string path = test::temp_dir() + "/shard.bin";
  std::ofstream(path) << std::string(3 * 4096, 'a');
  EXPECT_EXIT(read_after_truncation(path), testing::ExitedWithCode(4),
              "orion: error: .*shard.bin: the file shrank or became unreadable");
}

TEST(FileFaults, AllocationBeyondTheMachineNamesWhatAndHowMuch) {
  try {
    allocate_zeroed(size_t(1) << 60, "the parameters of a huge model");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Runtime);
    EXPECT_NE(std::string(e.what()).find("cannot allocate 1152921504.6 GB for the parameters of a huge model"),
              std::string::npos)
        << e.what();
  }
  void* small = allocate_zeroed(100, "a small buffer");
  EXPECT_EQ(static_cast<unsigned char*>(small)[99], 0);
  std::free(small);
}
