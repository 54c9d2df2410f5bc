// MILBlob storage reader following the public coremltools layout (see milblob_storage.h).
#include "runtime/anesim/milblob_storage.h"

#include <cstring>

#include <fmt/format.h>

#include "base/error.h"

namespace orion::runtime::anesim {
namespace {

constexpr uint64_t kAlignment = 64;  // coremltools' DefaultStorageAlignment
constexpr uint64_t kHeaderSize = 64;
constexpr uint64_t kRecordSize = 64;
constexpr uint32_t kSentinel = 0xDEADBEEF;

struct DtypeInfo {
  uint32_t code;
  const char* name;
  int bits;
};
constexpr DtypeInfo kDtypes[] = {{1, "fp16", 16},    {2, "fp32", 32},    {3, "uint8", 8},  {4, "int8", 8},
                                 {5, "bf16", 16},    {6, "int16", 16},   {7, "uint16", 16}, {8, "int4", 4},
                                 {9, "uint1", 1},    {10, "uint2", 2},   {11, "uint4", 4}, {12, "uint3", 3},
                                 {13, "uint6", 6},   {14, "int32", 32},  {15, "uint32", 32}, {16, "fp8e4m3", 8},
                                 {17, "fp8e5m2", 8}};

const DtypeInfo* dtype_info(uint32_t code) {
  for (const DtypeInfo& d : kDtypes)
    if (d.code == code) return &d;
  return nullptr;
}

template <typename T>
T load(std::span<const uint8_t> image, uint64_t at) {
  T v;
  std::memcpy(&v, image.data() + at, sizeof v);
  return v;
}

uint64_t round_up(uint64_t x) { return (x + kAlignment - 1) / kAlignment * kAlignment; }

}  // namespace

const char* milblob_dtype_name(uint32_t code) {
  const DtypeInfo* d = dtype_info(code);
  return d ? d->name : nullptr;
}

int milblob_dtype_bits(uint32_t code) {
  const DtypeInfo* d = dtype_info(code);
  return d ? d->bits : 0;
}

// The storage reader's walk: the header, then the first record right after it, then each next
// record at the end of the previous data rounded up to 64.
MilBlobStorage::MilBlobStorage(std::span<const uint8_t> image, std::string source)
    : image_(image), source_(std::move(source)) {
  if (image_.size() < kHeaderSize)
    throw_input_error(source_, fmt::format("{} bytes cannot hold the 64-byte storage header", image_.size()), "header",
                      0, "the file is truncated or not a MILBlob file");
  const uint32_t count = load<uint32_t>(image_, 0), version = load<uint32_t>(image_, 4);
  if (version != 2)
    throw_input_error(source_, fmt::format("storage version {}; the storage reader expects version 2", version),
                      "version", 4, "version 1 is the older Espresso blob format");
  uint64_t at = kHeaderSize;
  for (uint32_t i = 0; i < count; i++) {
    if (at + kRecordSize > image_.size())
      throw_input_error(source_,
                        fmt::format("the header counts {} blobs but record {} would start at {}, past the end ({} bytes)",
                                    count, i, at, image_.size()),
                        "count", 0, "the file is truncated, or its count is wrong");
    records_.push_back(read_record(at));
    at = round_up(records_.back().data_offset + records_.back().size);
  }
}

MilBlobRecord MilBlobStorage::read_record(uint64_t at) const {
  auto fail = [&](const char* field, uint64_t where, const std::string& msg, const char* hint) {
    throw_input_error(source_, msg, field, int64_t(where), hint);
  };
  MilBlobRecord r;
  r.metadata_offset = at;
  const uint32_t sentinel = load<uint32_t>(image_, at);
  if (sentinel != kSentinel)
    fail("sentinel", at,
         fmt::format("no blob metadata at offset {}, where the storage reader looks for it (found 0x{:08X}, not the "
                     "sentinel 0xDEADBEEF)",
                     at, sentinel),
         "records follow each other: the first right after the 64-byte header, each next one at the end of the "
         "previous blob's data rounded up to 64 bytes");
  r.dtype = load<uint32_t>(image_, at + 4);
  r.size = load<uint64_t>(image_, at + 8);
  r.data_offset = load<uint64_t>(image_, at + 16);
  r.padding_bits = load<uint64_t>(image_, at + 24);
  const DtypeInfo* d = dtype_info(r.dtype);
  if (!d) fail("mil_dtype", at + 4, fmt::format("unknown blob data type code {}", r.dtype), "codes are 1 to 17");
  if (r.data_offset < at + kRecordSize || r.data_offset % kAlignment)
    fail("offset", at + 16,
         fmt::format("data offset {} is not a 64-byte aligned offset after its record at {}", r.data_offset, at),
         "the file is corrupt");
  if (r.data_offset > image_.size() || r.size > image_.size() - r.data_offset)
    fail("sizeInBytes", at + 8,
         fmt::format("data [{}, {}) runs past the end of the file ({} bytes)", r.data_offset, r.data_offset + r.size,
                     image_.size()),
         "the file is truncated");
  // Whole bytes hold whole elements, less the padding bits of a sub-byte type's last byte.
  if (d->bits < 8 ? r.padding_bits >= 8 || (r.size * 8 - r.padding_bits) % uint64_t(d->bits)
                  : r.padding_bits != 0 || r.size % uint64_t(d->bits / 8))
    fail("sizeInBytes", at + 8,
         fmt::format("{} bytes with {} padding bits is not a whole number of {} elements", r.size, r.padding_bits,
                     d->name),
         "the file is corrupt");
  return r;
}

const MilBlobRecord& MilBlobStorage::at(uint64_t metadata_offset) const {
  for (const MilBlobRecord& r : records_)
    if (r.metadata_offset == metadata_offset) return r;
  std::string reachable;
  for (const MilBlobRecord& r : records_) reachable += fmt::format("{}{}", reachable.empty() ? "" : ", ", r.metadata_offset);
  throw_input_error(source_,
                    fmt::format("offset {} is not a blob record the storage reader reaches from the header (records "
                                "at: {})",
                                metadata_offset, reachable.empty() ? "none" : reachable),
                    "offset", int64_t(metadata_offset),
                    "a BLOBFILE offset names a 64-byte metadata record (C8); the first is at 64");
}

}  // namespace orion::runtime::anesim
