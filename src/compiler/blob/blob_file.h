// Weight blobs: the coremltools MILBlob storage format, version 2 (DESIGN.md §5, rule C8).
//
// A blob file holds one or many constant tensors:
//
//   offset 0    file header, 64 bytes     uint32 count | uint32 version = 2 | 56 zero bytes
//   offset 64   metadata record, 64 bytes uint32 sentinel 0xDEADBEEF | uint32 dtype
//                                         uint64 size_in_bytes | uint64 data_offset (absolute)
//                                         uint64 padding_size_in_bits | 32 zero bytes
//   offset 128  data (size_in_bytes), then zeros up to the next record
//   ...         next record, its data, ...
//
// Every data start is a multiple of the alignment (64 bytes; 128 when a chip profile asks for it).
// Records are where coremltools' storage reader walks to: the first at 64, right after the
// header, each next one at the end of the previous data rounded up to 64 — a record placed
// anywhere else cannot be reached (the reader refuses it). A MIL constant names its blob by the
// offset of the *metadata record*, not of the data:
//   BLOBFILE(path = string("@model_path/weights/wq.bin"), offset = uint64(64))
// The in-memory form (std::vector<uint8_t>) is what the runtime's weight dictionary holds.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace orion::compiler::blob {

// The MILBlob dtype codes (coremltools' BlobDataType).
enum class BlobDType : uint32_t { F16 = 1, F32 = 2, U8 = 3, I8 = 4, BF16 = 5, I16 = 6, U16 = 7, I4 = 8, I32 = 14, U32 = 15 };
const char* blob_dtype_name(BlobDType t);  // "fp16", "fp32", "uint8", ...
std::optional<BlobDType> blob_dtype_from_code(uint32_t code);
double blob_dtype_bytes(BlobDType t);                    // 0.5 for int4
std::optional<BlobDType> blob_dtype_of(ir::ElemType t);  // fp16, fp32, int32; none for bool

constexpr uint32_t kSentinel = 0xDEADBEEF;
constexpr uint32_t kVersion = 2;
constexpr size_t kHeaderBytes = 64;
constexpr size_t kRecordBytes = 64;

// One blob to write: raw little-endian element bytes. For int4, padding_bits says how many bits of
// the last byte are unused (0 or 4).
struct BlobIn {
  BlobDType dtype = BlobDType::F16;
  const uint8_t* data = nullptr;
  size_t size = 0;
  uint64_t padding_bits = 0;
};

// Serialises the blobs into one file image. `record_offsets` (if given) receives, per blob, the
// offset of its metadata record — the number a MIL BLOBFILE `offset` must carry.
std::vector<uint8_t> write_blob_file(const std::vector<BlobIn>& blobs, size_t alignment = 64,
                                     std::vector<uint64_t>* record_offsets = nullptr);
// The same, written crash-safely to disk (write_file_atomic).
void save_blob_file(const std::string& path, const std::vector<uint8_t>& image);

// One blob as found in a file.
struct BlobEntry {
  uint64_t record_offset = 0;  // what a BLOBFILE offset names
  BlobDType dtype = BlobDType::F16;
  uint64_t data_offset = 0;
  uint64_t size = 0;
  uint64_t padding_bits = 0;
};

// A validated view of a blob file image (it does not own the bytes; keep them alive). Every
// problem — short header, wrong version, bad sentinel, unknown dtype, data outside the file,
// misalignment, a count that does not match the records — is an Input error naming `source`,
// the field and its byte offset.
class BlobFile {
 public:
  BlobFile(const uint8_t* data, size_t size, std::string source);
  explicit BlobFile(const std::vector<uint8_t>& image, std::string source)
      : BlobFile(image.data(), image.size(), std::move(source)) {}

  const std::vector<BlobEntry>& entries() const { return entries_; }
  // The blob whose metadata record starts at `record_offset`; Input error (rule C8) otherwise.
  const BlobEntry& at(uint64_t record_offset) const;
  const uint8_t* data(const BlobEntry& e) const { return data_ + e.data_offset; }
  std::vector<uint8_t> copy(const BlobEntry& e) const { return {data(e), data(e) + e.size}; }
  const std::string& source() const { return source_; }

 private:
  uint64_t read_record(uint64_t off);  // validates one record; returns the end of its data
  const uint8_t* data_;
  size_t size_;
  std::string source_;
  std::vector<BlobEntry> entries_;
};

}  // namespace orion::compiler::blob
