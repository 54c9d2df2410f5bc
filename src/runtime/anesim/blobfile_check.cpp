// BLOBFILE constants against the weight files, read by anesim's own storage reader.
#include "runtime/anesim/blobfile_check.h"

#include <map>
#include <memory>
#include <regex>

#include <fmt/format.h>

#include "runtime/anesim/milblob_storage.h"

namespace orion::runtime::anesim {
namespace {

// One BLOBFILE constant as spelled in the text.
struct BlobRef {
  std::string type, dims, path;
  uint64_t offset = 0;
};

// Element count of "16, 32, 1, 1" ("" is a scalar).
uint64_t element_count(const std::string& dims) {
  uint64_t n = 1;
  for (size_t at = 0; at < dims.size();) {
    size_t end = dims.find(',', at);
    if (end == std::string::npos) end = dims.size();
    n *= std::stoull(dims.substr(at, end - at));
    at = end + 1;
  }
  return n;
}

// Checks one constant against its file; returns "" or what is wrong.
std::string check_ref(const BlobRef& ref, const MilBlobStorage& file) {
  const MilBlobRecord* r = nullptr;
  try {
    r = &file.at(ref.offset);
  } catch (const Error& e) {
    return e.message();
  }
  const char* stored = milblob_dtype_name(r->dtype);
  if (ref.type != stored) return fmt::format("the blob at offset {} holds {}, the constant is {}", ref.offset, stored, ref.type);
  const uint64_t bits = element_count(ref.dims) * uint64_t(milblob_dtype_bits(r->dtype));
  const uint64_t bytes = (bits + 7) / 8;
  if (r->size != bytes)
    return fmt::format("the blob at offset {} has {} bytes, a {} [{}] constant needs {}", ref.offset, r->size, ref.type,
                       ref.dims, bytes);
  return "";
}

}  // namespace

void check_blobfile_constants(std::string_view mil_text, const WeightDict& weights, const std::string& source) {
  static const std::regex kRef(
      R"re(tensor<(\w+),\s*\[([0-9,\s]*)\]>\(BLOBFILE\(path\s*=\s*string\("([^"]*)"\),\s*offset\s*=\s*uint64\((\d+)\)\)\))re");
  std::map<std::string, std::unique_ptr<MilBlobStorage>> files;
  int line_no = 0;
  for (size_t at = 0; at < mil_text.size();) {
    size_t end = mil_text.find('\n', at);
    if (end == std::string_view::npos) end = mil_text.size();
    const std::string_view line = mil_text.substr(at, end - at);
    line_no++;
    at = end + 1;
    if (line.find("BLOBFILE") == std::string_view::npos) continue;
    auto fail = [&](const std::string& msg, const std::string& hint) {
      throw_input_error(source, fmt::format("line {}: {}", line_no, msg), "BLOBFILE", -1, hint);
    };
    std::match_results<std::string_view::const_iterator> m;
    if (!std::regex_search(line.begin(), line.end(), m, kRef))
      fail("a BLOBFILE constant not spelled tensor<T, [dims]>(BLOBFILE(path = string(\"…\"), offset = uint64(N)))",
           "MIL weights are const tensors read from a weight file");
    BlobRef ref{m[1].str(), m[2].str(), m[3].str(), std::stoull(m[4].str())};
    auto w = weights.find(ref.path);
    if (w == weights.end()) fail(fmt::format("weight file '{}' is not in the weight dictionary", ref.path), "");
    auto& file = files[ref.path];
    try {
      if (!file) file = std::make_unique<MilBlobStorage>(w->second, ref.path);
    } catch (const Error& e) {
      fail(format_error_line(e.kind(), e.message(), e.context()), e.context().hint);
    }
    if (std::string why = check_ref(ref, *file); !why.empty())
      fail(fmt::format("'{}': {}", ref.path, why), "a BLOBFILE offset names a reachable 64-byte metadata record (C8)");
  }
}

}  // namespace orion::runtime::anesim
