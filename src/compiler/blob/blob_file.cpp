// MILBlob v2 writer and validating reader (layout in blob_file.h).
#include "compiler/blob/blob_file.h"

#include <sys/mman.h>

#include <cstring>

#include <fmt/format.h>

#include "base/error.h"
#include "base/file.h"

namespace orion::compiler::blob {

const char* blob_dtype_name(BlobDType t) {
  switch (t) {
    case BlobDType::F16: return "fp16";
    case BlobDType::F32: return "fp32";
    case BlobDType::U8: return "uint8";
    case BlobDType::I8: return "int8";
    case BlobDType::BF16: return "bf16";
    case BlobDType::I16: return "int16";
    case BlobDType::U16: return "uint16";
    case BlobDType::I4: return "int4";
    case BlobDType::I32: return "int32";
    case BlobDType::U32: return "uint32";
  }
  return "?";
}

std::optional<BlobDType> blob_dtype_from_code(uint32_t code) {
  for (BlobDType t : {BlobDType::F16, BlobDType::F32, BlobDType::U8, BlobDType::I8, BlobDType::BF16, BlobDType::I16,
                      BlobDType::U16, BlobDType::I4, BlobDType::I32, BlobDType::U32})
    if (uint32_t(t) == code) return t;
  return std::nullopt;
}

double blob_dtype_bytes(BlobDType t) {
  switch (t) {
    case BlobDType::U8:
    case BlobDType::I8: return 1;
    case BlobDType::F16:
    case BlobDType::BF16:
    case BlobDType::I16:
    case BlobDType::U16: return 2;
    case BlobDType::F32:
    case BlobDType::I32:
    case BlobDType::U32: return 4;
    case BlobDType::I4: return 0.5;
  }
  return 1;
}

std::optional<BlobDType> blob_dtype_of(ir::ElemType t) {
  switch (t) {
    case ir::ElemType::F16: return BlobDType::F16;
    case ir::ElemType::F32: return BlobDType::F32;
    case ir::ElemType::I32: return BlobDType::I32;
    case ir::ElemType::Bool: return std::nullopt;
  }
  return std::nullopt;
}

namespace {

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

// Fresh memory costs a page fault per 4 KB page on first touch; for the hundreds of MB of a
// model's weights the faults cost more than copying the bytes. On Linux, for a large buffer: ask
// for transparent huge pages (2 MB, one fault each) over the part that covers whole huge pages,
// then fault the rest in with one call instead of one trap per page. Both are advice: on an older
// kernel they fail harmlessly and the copy faults the pages in as before.
void prefault(void* p, size_t size) {
#if defined(MADV_HUGEPAGE) && defined(MADV_POPULATE_WRITE)
  constexpr uintptr_t kPage = 4096;
  if (size < (256u << 10)) return;
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  advise_huge_pages(p, size);
  const uintptr_t begin = (at + kPage - 1) & ~(kPage - 1), end = (at + size) & ~(kPage - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
#else
  (void)p, (void)size;
#endif
}

bool all_zero(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i]) return false;
  return true;
}

}  // namespace

// Writes header, then per blob: the record, zeros up to aligned data, the data, zeros up to the
// next 64-byte boundary. Records sit where coremltools' storage reader looks for them — the first
// right after the header, each next one at the previous data's end rounded up to 64 — whatever
// the data alignment; only the data moves to a larger alignment (with 64 or 128 the first record
// is at 64 and its data at 128).
std::vector<uint8_t> write_blob_file(const std::vector<BlobIn>& blobs, size_t alignment,
                                     std::vector<uint64_t>* record_offsets) {
  ORION_CHECK(alignment >= 64 && alignment % 64 == 0, "blob alignment {} is not a multiple of 64", alignment);
  // The layout first, so the image is allocated once and every byte is written once: weight data
  // is copied straight into place, never zero-filled first (an image is mostly weights, hundreds of
  // MB for a model, so a second pass over it would double the cost of a compile).
  std::vector<uint64_t> records;
  uint64_t end = kHeaderBytes;
  for (const BlobIn& b : blobs) {
    records.push_back(align_up(end, kRecordBytes));
    end = align_up(records.back() + kRecordBytes, alignment) + b.size;
  }
  std::vector<uint8_t> out;
  out.reserve(align_up(end, alignment));
  prefault(out.data(), out.capacity());
  auto zeros_to = [&](uint64_t offset) { out.insert(out.end(), offset - out.size(), uint8_t(0)); };
  auto append = [&](const void* p, size_t n) {
    const uint8_t* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  };
  uint8_t block[kHeaderBytes] = {};  // the header, then each record (both 64 bytes, zero padded)
  static_assert(kHeaderBytes == kRecordBytes);
  const uint32_t count = uint32_t(blobs.size()), version = kVersion;
  std::memcpy(block, &count, 4);
  std::memcpy(block + 4, &version, 4);
  append(block, kHeaderBytes);
  for (size_t i = 0; i < blobs.size(); i++) {
    const BlobIn& b = blobs[i];
    const uint64_t data_offset = align_up(records[i] + kRecordBytes, alignment);
    const uint32_t sentinel = kSentinel, dtype = uint32_t(b.dtype);
    const uint64_t size = b.size, padding = b.padding_bits;
    std::memset(block, 0, sizeof block);
    std::memcpy(block + 0, &sentinel, 4);
    std::memcpy(block + 4, &dtype, 4);
    std::memcpy(block + 8, &size, 8);
    std::memcpy(block + 16, &data_offset, 8);
    std::memcpy(block + 24, &padding, 8);
    zeros_to(records[i]);
    append(block, kRecordBytes);
    zeros_to(data_offset);
    if (b.size) append(b.data, b.size);
  }
  zeros_to(align_up(out.size(), alignment));
  if (record_offsets) *record_offsets = records;
  return out;
}

void save_blob_file(const std::string& path, const std::vector<uint8_t>& image) {
  write_file_atomic(path, [&](FileWriter& w) { w.write(image.data(), image.size()); });
}

BlobFile::BlobFile(const uint8_t* data, size_t size, std::string source)
    : data_(data), size_(size), source_(std::move(source)) {
  ByteReader r(data_, size_, source_);
  uint32_t count = r.read<uint32_t>("count");
  uint32_t version = r.read<uint32_t>("version");
  if (version != kVersion)
    throw_input_error(source_, fmt::format("storage version is {}, expected {}", version, kVersion), "version", 4,
                      "only MILBlob storage version 2 files are supported");
  const uint8_t* reserved = r.bytes(kHeaderBytes - 8, "header");
  if (!all_zero(reserved, kHeaderBytes - 8))
    throw_input_error(source_, "reserved header bytes are not zero", "header", 8, "the file is not a MILBlob file");
  // Each blob needs at least a record; refuse absurd counts before looping over them.
  if (count > (size_ - kHeaderBytes) / kRecordBytes)
    throw_input_error(source_,
                      fmt::format("header says {} blobs, but {} bytes hold at most {}", count, size_,
                                  (size_ - kHeaderBytes) / kRecordBytes),
                      "count", 0, "the file is truncated or corrupt");
  uint64_t pos = kHeaderBytes;
  for (uint32_t i = 0; i < count; i++) {
    // The next record is where coremltools' storage reader looks: no padding may precede it.
    if (pos + kRecordBytes > size_)
      throw_input_error(source_, fmt::format("header says {} blobs, found only {}", count, i), "count", int64_t(pos),
                        "the file is truncated");
    pos = align_up(read_record(pos), 64);
  }
  pos = align_up(pos, 64);
  if (pos < size_ && !all_zero(data_ + pos, size_ - pos)) {
    bool sentinel = size_ - pos >= 4 && std::memcmp(data_ + pos, &kSentinel, 4) == 0;
    throw_input_error(source_,
                      sentinel ? fmt::format("more blobs than the header's count ({})", count)
                               : "unexpected non-zero bytes after the last blob",
                      "count", int64_t(pos), "the file is corrupt");
  }
}

uint64_t BlobFile::read_record(uint64_t off) {
  auto fail = [&](const char* field, int64_t at, const std::string& msg, const std::string& hint = "the file is corrupt") {
    throw_input_error(source_, msg, field, at, hint);
  };
  if (off % 64) fail("sentinel", int64_t(off), "metadata record is not 64-byte aligned");
  ByteReader r(data_, size_, source_);
  r.seek(off, "sentinel");
  uint32_t sentinel = r.read<uint32_t>("sentinel");
  if (sentinel != kSentinel)
    fail("sentinel", int64_t(off), fmt::format("expected metadata sentinel 0xDEADBEEF, found 0x{:08X}", sentinel));
  uint32_t code = r.read<uint32_t>("dtype");
  auto dtype = blob_dtype_from_code(code);
  if (!dtype)
    fail("dtype", int64_t(off + 4), fmt::format("unknown dtype code {}", code),
         "known codes: fp16 1, fp32 2, uint8 3, int8 4, bf16 5, int16 6, uint16 7, int4 8, int32 14, uint32 15");
  BlobEntry e{off, *dtype, 0, 0, 0};
  e.size = r.read<uint64_t>("size_in_bytes");
  e.data_offset = r.read<uint64_t>("data_offset");
  e.padding_bits = r.read<uint64_t>("padding_size_in_bits");
  if (!all_zero(r.bytes(32, "reserved"), 32)) fail("reserved", int64_t(off + 32), "reserved record bytes are not zero");
  if (e.data_offset < off + kRecordBytes || e.data_offset % 64)
    fail("data_offset", int64_t(off + 16),
         fmt::format("data offset {} must be 64-byte aligned and after its record at {}", e.data_offset, off));
  if (e.data_offset > size_ || e.size > size_ - e.data_offset)
    fail("size_in_bytes", int64_t(off + 8),
         fmt::format("data [{}, +{}) runs past the end of the file ({} bytes)", e.data_offset, e.size, size_),
         "the file is truncated");
  double esize = blob_dtype_bytes(*dtype);
  if (esize >= 1 && (e.size % uint64_t(esize) || e.padding_bits))
    fail("size_in_bytes", int64_t(off + 8),
         fmt::format("{} bytes of {} with {} padding bits is not a whole number of elements", e.size,
                     blob_dtype_name(*dtype), e.padding_bits));
  if (esize < 1 && e.padding_bits >= 8)
    fail("padding_size_in_bits", int64_t(off + 24), fmt::format("padding of {} bits exceeds a byte", e.padding_bits));
  entries_.push_back(e);
  return e.data_offset + e.size;
}

const BlobEntry& BlobFile::at(uint64_t record_offset) const {
  for (const BlobEntry& e : entries_)
    if (e.record_offset == record_offset) return e;
  std::string have;
  for (const BlobEntry& e : entries_) have += fmt::format("{}{}", have.empty() ? "" : ", ", e.record_offset);
  bool is_data = false;
  for (const BlobEntry& e : entries_) is_data = is_data || e.data_offset == record_offset;
  throw_input_error(source_,
                    fmt::format("offset {} does not point at a blob metadata record{} (records are at: {})", record_offset,
                                is_data ? " but at a blob's data" : "", have.empty() ? "none" : have),
                    "offset", int64_t(record_offset),
                    "a BLOBFILE offset names the 64-byte metadata record before the data, not the data (rule C8)");
}

}  // namespace orion::compiler::blob
