#include "support.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

namespace orion::fuzz {

namespace {
struct Scratch {
  std::string dir;
  Scratch() {
    std::string base = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path().string();
    std::string tmpl = base + "/orion-fuzz.XXXXXX";
    if (!mkdtemp(tmpl.data())) {
      std::perror("mkdtemp");
      std::abort();
    }
    dir = tmpl;
  }
  ~Scratch() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};
}  // namespace

const std::string& scratch_dir() {
  static Scratch s;
  return s.dir;
}

std::string write_scratch(const std::string& name, std::string_view bytes) {
  std::string path = scratch_dir() + "/" + name;
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::perror(path.c_str());
    std::abort();
  }
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w <= 0) {
      std::perror("write");
      std::abort();
    }
    done += size_t(w);
  }
  ::close(fd);
  return path;
}

void internal_error_found(const orion::Error& e) {
  std::fprintf(stderr, "fuzz: an internal error (a failed invariant) answered the input: %s\n", e.what());
  std::abort();
}

std::pair<std::string_view, std::string_view> split_two(std::string_view input, std::string_view default_first) {
  size_t at = input.find(kSplitMarker);
  if (at == std::string_view::npos) return {default_first, input};
  return {input.substr(0, at), input.substr(at + kSplitMarker.size())};
}

void expect_clean_model_load(std::string_view bytes, const std::string& name, std::optional<ModelFormat> format) {
  std::string path = write_scratch(name, bytes);
  LoadOptions options;
  options.format = format;
  expect_clean([&] { load_model(path, options); });
}

}  // namespace orion::fuzz
