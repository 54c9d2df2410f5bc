// The safetensors container (Hugging Face):
//   [0, 8)        uint64 little-endian N: length of the JSON header
//   [8, 8 + N)    JSON object: { "<tensor name>": {"dtype": "F32", "shape": [rows, cols],
//                                                  "data_offsets": [begin, end]}, ...,
//                                "__metadata__": {"<key>": "<string>", ...} (optional) }
//                 (writers pad it with spaces so that the data starts 8-byte aligned)
//   [8 + N, end)  the data; offsets are relative to its start, tensors are row-major, little-endian
// Everything in the header is checked before any tensor is used: a file that passes open() can be
// read without touching a byte outside the mapping.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/json_error.h"
#include "model/io/io_internal.h"

namespace orion::io {
namespace {

using json = nlohmann::json;
constexpr uint64_t kMaxHeader = uint64_t(100) << 20;  // safetensors' own limit is 100 MB

// Element sizes of every dtype the safetensors format defines (Orion computes with three of them).
size_t st_dtype_size(const std::string& d) {
  static const std::pair<const char*, size_t> table[] = {{"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1},
                                                         {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
                                                         {"U32", 4},  {"F32", 4}, {"F64", 8}, {"I64", 8},     {"U64", 8}};
  for (auto& [name, size] : table)
    if (d == name) return size;
  return 0;
}

json parse_header(const std::string& path, const uint8_t* p, size_t n) {
  try {
    return json::parse(p, p + n);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers like 1e7777 (fuzz_hf_config)
    throw_input_error(path, fmt::format("the JSON header is not valid JSON: {}", e.what()), "header",
                      int64_t(8 + (json_error_byte(e) > 0 ? json_error_byte(e) - 1 : 0)),
                      "the file is corrupt or truncated; download it again");
  }
}

// One header entry → a checked SafetensorsEntry (dtype known, shape × size == byte range, in bounds).
SafetensorsEntry parse_entry(const std::string& path, const std::string& name, const json& v, const uint8_t* data,
                             size_t data_size, size_t data_start) {
  auto bad = [&](const std::string& msg) { throw_input_error(path, msg, name, -1, "the safetensors header is corrupt"); };
  if (!v.is_object()) bad("header entry is not an object");
  if (!v.contains("dtype") || !v["dtype"].is_string()) bad("missing or non-string \"dtype\"");
  if (!v.contains("shape") || !v["shape"].is_array()) bad("missing or non-array \"shape\"");
  if (!v.contains("data_offsets") || !v["data_offsets"].is_array() || v["data_offsets"].size() != 2)
    bad("\"data_offsets\" must be an array [begin, end]");
  SafetensorsEntry e;
  e.name = name;
  e.dtype_name = v["dtype"].get<std::string>();
  const size_t es = st_dtype_size(e.dtype_name);
  if (es == 0) bad(fmt::format("unknown dtype \"{}\"", e.dtype_name));
  e.dtype = dtype_spelled(e.dtype_name, DTypeSpelling::Safetensors);
  uint64_t numel = 1;
  for (const json& d : v["shape"]) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t(1) << 40))
      bad("shape entries must be non-negative integers");
    numel *= d.get<uint64_t>();
    if (numel > (uint64_t(1) << 40)) bad("shape is too large");
    e.shape.push_back(int64_t(d.get<uint64_t>()));
  }
  const json& off = v["data_offsets"];
  if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned()) bad("data_offsets must be non-negative integers");
  const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
  if (begin > end) bad(fmt::format("data_offsets [{}, {}] end before they begin", begin, end));
  if (end > data_size)
    throw_input_error(path,
                      fmt::format("data_offsets [{}, {}] run past the end of the data ({} bytes)", begin, end, data_size),
                      name, int64_t(data_start + begin), "the file is truncated or its header is corrupt");
  if (numel * es != end - begin)
    bad(fmt::format("shape [{}] of {} needs {} bytes but data_offsets [{}, {}] hold {}", fmt::join(e.shape, ", "),
                    e.dtype_name, numel * es, begin, end, end - begin));
  e.data = data + begin;
  e.nbytes = size_t(end - begin);
  e.file_offset = data_start + size_t(begin);
  return e;
}

}  // namespace

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  SafetensorsFile f;
  f.path_ = path;
  f.file_ = MappedFile::open(path);
  ByteReader r(f.file_->data(), f.file_->size(), path);
  const uint64_t n = r.read<uint64_t>("header length");
  if (n > kMaxHeader || n > r.remaining())
    throw_input_error(path, fmt::format("header length {} does not fit in the file ({} bytes)", n, f.file_->size()),
                      "header length", 0, "the file is truncated or not a safetensors file");
  const uint8_t* text = r.bytes(size_t(n), "header");
  json header = parse_header(path, text, size_t(n));
  if (!header.is_object()) throw_input_error(path, "the JSON header is not an object", "header", 8);
  const size_t data_start = 8 + size_t(n);
  const uint8_t* data = f.file_->data() + data_start;
  const size_t data_size = f.file_->size() - data_start;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (it.value().is_object())
        for (auto m = it.value().begin(); m != it.value().end(); ++m)
          if (m.value().is_string()) f.metadata_[m.key()] = m.value().get<std::string>();
      continue;
    }
    f.index_[it.key()] = f.entries_.size();
    f.entries_.push_back(parse_entry(path, it.key(), it.value(), data, data_size, data_start));
  }
  // No two tensors may share bytes: sort by begin and compare each with the one before it.
  std::vector<const SafetensorsEntry*> by_offset;
  for (auto& e : f.entries_)
    if (e.nbytes > 0) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->file_offset < b->file_offset; });
  for (size_t i = 1; i < by_offset.size(); i++) {
    const SafetensorsEntry *a = by_offset[i - 1], *b = by_offset[i];
    if (b->file_offset < a->file_offset + a->nbytes)
      throw_input_error(path,
                        fmt::format("overlaps tensor '{}' (bytes {}..{} and {}..{})", a->name, a->file_offset,
                                    a->file_offset + a->nbytes, b->file_offset, b->file_offset + b->nbytes),
                        b->name, int64_t(b->file_offset), "the safetensors header is corrupt");
  }
  return f;
}

const SafetensorsEntry* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

void write_safetensors(const std::string& path, const std::vector<SafetensorsOut>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  // 4-byte tensors first, then 2-byte ones, from a data start on a 64-byte line (the header padded
  // with spaces): every tensor is then aligned for its dtype — f32 ones on a line too when the
  // sizes before them are whole lines (dims of multiples of 16) — so readers use the bytes in place
  // (io/tensor_views.cpp).
  std::vector<const SafetensorsOut*> order;
  for (auto& t : tensors) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](auto* a, auto* b) { return dtype_size(a->dtype) > dtype_size(b->dtype); });
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  size_t at = 0;
  for (const SafetensorsOut* t : order) {
    size_t n = bytes_as(*t->tensor, t->dtype);
    header[t->name] = {{"dtype", dtype_name(t->dtype, DTypeSpelling::Safetensors)}, {"shape", t->tensor->shape}, {"data_offsets", {at, at + n}}};
    at += n;
  }
  std::string text = header.dump();
  text.append((64 - (8 + text.size()) % 64) % 64, ' ');
  write_file_atomic(path, [&](FileWriter& out) {
    out.write_pod(uint64_t(text.size()));
    out.write_str(text);
    for (const SafetensorsOut* t : order) write_as(out, *t->tensor, t->dtype);
  });
}

}  // namespace orion::io
