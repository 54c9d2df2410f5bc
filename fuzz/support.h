// Shared pieces of the fuzz targets (fuzz/fuzz_<reader>.cpp). Each target hands libFuzzer's bytes
// to one reader through the same entry the CLI uses — a path — so the fuzzed code is exactly what
// `orion` runs. Files are written into a private folder on a RAM disk (/dev/shm when present) that
// is removed at exit.
//
// The contract checked: a reader either returns something it has validated or throws
// orion::Error. Anything else — a crash, a sanitizer report, a leak, a hang, an out-of-memory, or
// any other exception escaping (std::terminate → abort) — is a finding.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "base/error.h"
#include "model/io/model_io.h"

namespace orion::fuzz {

// The private folder of this process ("/dev/shm/orion-fuzz.XXXXXX").
const std::string& scratch_dir();

// Writes bytes to scratch_dir()/name (replacing it) and returns the path.
std::string write_scratch(const std::string& name, std::string_view bytes);

// Inputs made of two files: "<first>\n--8<--\n<second>". Without the marker the whole input is
// the second file and the first is `default_first`.
std::pair<std::string_view, std::string_view> split_two(std::string_view input, std::string_view default_first);
constexpr std::string_view kSplitMarker = "\n--8<--\n";

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

[[noreturn]] void internal_error_found(const orion::Error& e);

// Runs a reader; an orion::Error is the expected answer to bad input and is swallowed — except an
// Internal one (a failed ORION_CHECK), which is a bug whatever the input, so it aborts.
template <typename F>
void expect_clean(F&& read) {
  try {
    read();
  } catch (const orion::Error& e) {
    if (e.kind() == ErrorKind::Internal) internal_error_found(e);
  }
}

// The model readers' target: the bytes written as scratch file `name`, loaded the way the CLI loads
// a model — as `format`, or detected from the bytes when none is given.
void expect_clean_model_load(std::string_view bytes, const std::string& name, std::optional<ModelFormat> format);

}  // namespace orion::fuzz
