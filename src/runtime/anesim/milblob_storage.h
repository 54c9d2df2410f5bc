// anesim's own reader of MILBlob weight files, written from the public coremltools storage format
// (MILBlob/Blob/StorageFormat.hpp and StorageReader.cpp) and NOT from the compiler's writer, so a
// layout the compiler gets wrong is caught here instead of being read back by the same mistake.
//
// What the public format says, and what this reader therefore demands:
//   offset 0   storage header, 64 bytes: uint32 count, uint32 version (must be 2), reserved.
//   offset 64  the first metadata record — "just after the file header", always, whatever the
//              alignment the data wants. A record is 64 bytes: uint32 sentinel 0xDEADBEEF,
//              uint32 mil dtype, uint64 size in bytes, uint64 data offset (absolute),
//              uint64 padding in bits (sub-byte types), reserved.
//   next       record k+1 sits at the end of record k's data rounded up to 64 bytes. The storage
//              reader finds every record this way (GetAllOffsets); a record anywhere else — after
//              extra padding, say — cannot be reached, and a BLOBFILE offset naming it is refused.
//   data       64-byte aligned, after its record, inside the file.
// Dtype codes are coremltools' BlobDataType: fp16 1, fp32 2, uint8 3, int8 4, bf16 5, int16 6,
// uint16 7, int4 8, uint1 9, uint2 10, uint4 11, uint3 12, uint6 13, int32 14, uint32 15,
// fp8e4m3 16, fp8e5m2 17.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace orion::runtime::anesim {

// One blob as the storage reader reaches it from the header.
struct MilBlobRecord {
  uint64_t metadata_offset = 0;  // what a MIL BLOBFILE offset must name
  uint32_t dtype = 0;            // BlobDataType code
  uint64_t size = 0;             // bytes of data
  uint64_t data_offset = 0;      // absolute
  uint64_t padding_bits = 0;     // unused bits of the last byte, sub-byte types only
};

// The dtype name a MIL type is spelled with ("fp16", "int32", ...) for a BlobDataType code, or
// nullptr for a code the format does not define.
const char* milblob_dtype_name(uint32_t code);
// Bits per element of a code (16 for fp16, 4 for int4, ...); 0 for an unknown code.
int milblob_dtype_bits(uint32_t code);

// Reads and validates a whole file image (the bytes stay owned by the caller). Every problem is an
// Input error naming `source`, the field and its byte offset.
class MilBlobStorage {
 public:
  MilBlobStorage(std::span<const uint8_t> image, std::string source);

  const std::vector<MilBlobRecord>& records() const { return records_; }
  // The record at `metadata_offset`; an Input error if no record is reachable there.
  const MilBlobRecord& at(uint64_t metadata_offset) const;
  std::span<const uint8_t> data(const MilBlobRecord& r) const { return image_.subspan(r.data_offset, r.size); }
  const std::string& source() const { return source_; }

 private:
  MilBlobRecord read_record(uint64_t at) const;
  std::span<const uint8_t> image_;
  std::string source_;
  std::vector<MilBlobRecord> records_;
};

}  // namespace orion::runtime::anesim
