// GGUF, llama.cpp's single-file model format (versions 2 and 3), as a container: typed metadata
// and named tensors. What the tensors and keys mean for a model is gguf_model.cpp's business.
//
// Layout (all little-endian):
//   "GGUF"  u32 version  u64 tensor_count  u64 kv_count
//   kv_count × { string key, u32 value_type, value }           string = u64 length + UTF-8 bytes
//        value_type: 0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool, 8 string,
//                    9 array (u32 element type, u64 count, elements), 10 u64, 11 i64, 12 f64
//   tensor_count × { string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset }
//   zero padding to `general.alignment` (default 32), then the tensor data; each tensor's offset
//   is relative to the data start and a multiple of the alignment.
// ne[0] is the innermost (fastest-varying) dimension: a row-major [rows, cols] matrix is stored
// with ne = {cols, rows}. GgufTensor::shape gives the row-major order.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/file.h"

namespace orion::io {

enum class GgufValueType : uint32_t { U8, I8, U16, I16, U32, I32, F32, Bool, String, Array, U64, I64, F64 };

// ggml's element types that Orion computes with; every other type is named in errors (ggml_type_name).
constexpr uint32_t kGgmlF32 = 0, kGgmlF16 = 1, kGgmlQ8_0 = 8, kGgmlBF16 = 30;
const char* ggml_type_name(uint32_t type);  // "Q4_K", or "type 77" for a number ggml does not define
std::optional<DType> dtype_of_ggml(uint32_t type);
uint32_t ggml_type_of(DType t);

struct GgufValue {
  GgufValueType type = GgufValueType::U32;
  GgufValueType element_type = GgufValueType::U32;  // arrays only
  nlohmann::json value;                             // number, bool, string, or array of them (null: skipped)
  uint64_t count = 0;                               // arrays only: the number of elements
};

// Whether GgufFile::open turns metadata arrays (a tokenizer's 150 000 tokens and merges) into JSON,
// or only checks that they fit in the file and skips them — all a model reader needs.
enum class GgufArrays { Read, Skip };

struct GgufTensor {
  std::string name;
  uint32_t ggml_type = kGgmlF32;
  std::optional<DType> dtype;   // set for the types Orion computes with
  std::vector<int64_t> shape;   // row-major: ne reversed
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  size_t file_offset = 0;  // absolute
};

// A parsed and fully checked GGUF file: every length, count, dimension and offset is checked against
// the file before it is used, so a malformed file is an Input error naming the file, the offset and
// the field — never a crash. Tensors of types Orion does not compute with are listed (dtype unset);
// reading them is the model reader's error to give. Keeps the mapping alive.
class GgufFile {
 public:
  static GgufFile open(const std::string& path, GgufArrays arrays = GgufArrays::Read);
  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  std::shared_ptr<MappedFile> mapping() const { return file_; }
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufValue* find_value(const std::string& key) const;
  const GgufTensor* find(const std::string& name) const;

 private:
  std::string path_;
  uint32_t version_ = 0;
  std::shared_ptr<MappedFile> file_;
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t> index_;
};

// What a GGUF writer is given: metadata in order, then tensors converted to their dtype.
struct GgufOutTensor {
  std::string name;
  const void* data;  // row-major elements of src_dtype
  DType src_dtype;
  std::vector<int64_t> shape;  // row-major
  DType dtype;                 // as written
};
struct GgufOutValue {
  std::string key;
  GgufValue value;
};
// Writes a version-3 file atomically (temporary file, fsync, rename) with general.alignment 64 (one
// in `metadata` is replaced): every tensor starts on a 64-byte line.
void write_gguf(const std::string& path, const std::vector<GgufOutValue>& metadata,
                const std::vector<GgufOutTensor>& tensors);

}  // namespace orion::io
