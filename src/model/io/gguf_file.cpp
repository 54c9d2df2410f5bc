#include "model/io/gguf_file.h"

#include <fmt/format.h>

#include <cstring>

#include "base/error.h"
#include "model/io/io_internal.h"

namespace orion::io {
using json = nlohmann::json;

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint64_t kDefaultAlignment = 32;  // what a file without general.alignment uses
// What Orion writes (as general.alignment): every tensor on a 64-byte line, so that f32 ones are
// used in place (io/tensor_views.cpp: an f32 view must start on a line).
constexpr uint32_t kWriteAlignment = 64;
constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS

// ggml's type numbers and names (ggml.h), for the errors that name a type Orion does not read.
struct GgmlTypeInfo {
  uint32_t id;
  const char* name;
};
constexpr GgmlTypeInfo kGgmlTypes[] = {
    {0, "F32"},     {1, "F16"},      {2, "Q4_0"},     {3, "Q4_1"},   {6, "Q5_0"},   {7, "Q5_1"},   {8, "Q8_0"},
    {9, "Q8_1"},    {10, "Q2_K"},    {11, "Q3_K"},    {12, "Q4_K"},  {13, "Q5_K"},  {14, "Q6_K"},  {15, "Q8_K"},
    {16, "IQ2_XXS"}, {17, "IQ2_XS"}, {18, "IQ3_XXS"}, {19, "IQ1_S"}, {20, "IQ4_NL"}, {21, "IQ3_S"}, {22, "IQ2_S"},
    {23, "IQ4_XS"}, {24, "I8"},      {25, "I16"},     {26, "I32"},   {27, "I64"},   {28, "F64"},   {29, "IQ1_M"},
    {30, "BF16"},   {34, "TQ1_0"},   {35, "TQ2_0"},
};

// Reads the file front to back; every read is checked against the bytes left.
class Cursor {
 public:
  Cursor(const std::string& path, const uint8_t* p, size_t n) : path_(path), p_(p), n_(n) {}
  size_t pos() const { return pos_; }
  size_t left() const { return n_ - pos_; }

  [[noreturn]] void fail(const std::string& field, const std::string& msg, size_t at) const {
    throw_input_error(path_, msg, field, int64_t(at), "the file is corrupt or truncated, or not a GGUF file");
  }
  void need(size_t bytes, const std::string& field) const {
    if (bytes > left())
      fail(field, fmt::format("needs {} more bytes but the file ends {} bytes later", bytes, left()), pos_);
  }
  template <typename T>
  T pod(const std::string& field) {
    need(sizeof(T), field);
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string str(const std::string& field) {
    const size_t at = pos_;
    const uint64_t len = pod<uint64_t>(field);
    if (len > left()) fail(field, fmt::format("a string of {} bytes is longer than the rest of the file", len), at);
    std::string s(reinterpret_cast<const char*>(p_ + pos_), size_t(len));
    pos_ += size_t(len);
    return s;
  }
  // One scalar or string of type t as JSON.
  json scalar(GgufValueType t, const std::string& field) {
    switch (t) {
      case GgufValueType::U8: return pod<uint8_t>(field);
      case GgufValueType::I8: return pod<int8_t>(field);
      case GgufValueType::U16: return pod<uint16_t>(field);
      case GgufValueType::I16: return pod<int16_t>(field);
      case GgufValueType::U32: return pod<uint32_t>(field);
      case GgufValueType::I32: return pod<int32_t>(field);
      case GgufValueType::F32: return pod<float>(field);
      case GgufValueType::Bool: {
        const size_t at = pos_;
        const uint8_t b = pod<uint8_t>(field);
        if (b > 1) fail(field, fmt::format("a bool must be 0 or 1, not {}", b), at);
        return b == 1;
      }
      case GgufValueType::String: return str(field);
      case GgufValueType::U64: return pod<uint64_t>(field);
      case GgufValueType::I64: return pod<int64_t>(field);
      case GgufValueType::F64: return pod<double>(field);
      case GgufValueType::Array: break;
    }
    fail(field, "an array inside an array is not supported", pos_);
  }
  GgufValueType value_type(const std::string& field) {
    const size_t at = pos_;
    const uint32_t t = pod<uint32_t>(field);
    if (t > uint32_t(GgufValueType::F64)) fail(field, fmt::format("unknown value type {} (expected 0 to 12)", t), at);
    return GgufValueType(t);
  }
  // Moves past `count` elements of type t, checking that they lie in the file.
  void skip(GgufValueType t, uint64_t count, const std::string& field) {
    static constexpr size_t kSize[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};  // by GgufValueType
    if (t == GgufValueType::String) {
      for (uint64_t i = 0; i < count; i++) {
        const size_t at = pos_;
        const uint64_t len = pod<uint64_t>(field);
        if (len > left()) fail(field, fmt::format("a string of {} bytes is longer than the rest of the file", len), at);
        pos_ += size_t(len);
      }
      return;
    }
    if (t == GgufValueType::Array) fail(field, "an array inside an array is not supported", pos_);
    need(size_t(count) * kSize[size_t(t)], field);  // count ≤ left() already, so no overflow
    pos_ += size_t(count) * kSize[size_t(t)];
  }
  GgufValue value(const std::string& field, GgufArrays arrays) {
    GgufValue v;
    v.type = value_type(field);
    if (v.type != GgufValueType::Array) {
      v.value = scalar(v.type, field);
      return v;
    }
    v.element_type = value_type(field + "[]");
    const size_t at = pos_;
    const uint64_t count = pod<uint64_t>(field + ".count");
    // Every element takes at least one byte (strings eight): a count beyond that is a lie, not an allocation.
    const uint64_t min_size = v.element_type == GgufValueType::String ? 8 : 1;
    if (count > left() / min_size)
      fail(field, fmt::format("an array of {} elements cannot fit in the {} bytes left", count, left()), at);
    v.count = count;
    if (arrays == GgufArrays::Skip) {
      skip(v.element_type, count, field);
      return v;
    }
    v.value = json::array();
    for (uint64_t i = 0; i < count; i++) v.value.push_back(scalar(v.element_type, field));
    return v;
  }

 private:
  const std::string& path_;
  const uint8_t* p_;
  size_t n_, pos_ = 0;
};

// Bytes of a tensor of this type and element count; nullopt for types Orion does not size.
std::optional<size_t> tensor_bytes(uint32_t type, uint64_t numel) {
  if (auto dt = dtype_of_ggml(type)) return dtype_bytes(*dt, size_t(numel));
  return std::nullopt;
}

}  // namespace

const char* ggml_type_name(uint32_t type) {
  for (const GgmlTypeInfo& t : kGgmlTypes)
    if (t.id == type) return t.name;
  static thread_local std::string unknown;
  unknown = fmt::format("type {}", type);
  return unknown.c_str();
}

std::optional<DType> dtype_of_ggml(uint32_t type) {
  if (type == kGgmlF32) return DType::F32;
  if (type == kGgmlF16) return DType::F16;
  if (type == kGgmlBF16) return DType::BF16;
  if (type == kGgmlQ8_0) return DType::Q8_0;
  return std::nullopt;
}

uint32_t ggml_type_of(DType t) {
  switch (t) {
    case DType::F32: return kGgmlF32;
    case DType::F16: return kGgmlF16;
    case DType::BF16: return kGgmlBF16;
    case DType::Q8_0: return kGgmlQ8_0;
  }
  return kGgmlF32;
}

GgufFile GgufFile::open(const std::string& path, GgufArrays arrays) {
  GgufFile f;
  f.path_ = path;
  f.file_ = MappedFile::open(path);
  Cursor c(path, f.file_->data(), f.file_->size());
  if (c.pod<uint32_t>("magic") != kMagic) c.fail("magic", "does not start with \"GGUF\"", 0);
  f.version_ = c.pod<uint32_t>("version");
  if (f.version_ != 2 && f.version_ != 3)
    throw_input_error(path, fmt::format("GGUF version {} is not supported (Orion reads versions 2 and 3)", f.version_),
                      "version", 4, "convert it again with a current llama.cpp");
  const uint64_t tensor_count = c.pod<uint64_t>("tensor_count");
  const uint64_t kv_count = c.pod<uint64_t>("kv_count");
  // Each entry takes at least 8 bytes (its key or name length): bound the counts by the file.
  if (kv_count > c.left() / 8) c.fail("kv_count", fmt::format("{} metadata entries cannot fit in the file", kv_count), 16);
  for (uint64_t i = 0; i < kv_count; i++) {
    const size_t at = c.pos();
    std::string key = c.str(fmt::format("metadata[{}].key", i));
    GgufValue v = c.value(key, arrays);
    if (!f.metadata_.emplace(key, std::move(v)).second) c.fail(key, "the key appears twice", at);
  }
  if (tensor_count > c.left() / 8)
    c.fail("tensor_count", fmt::format("{} tensors cannot fit in the file", tensor_count), 8);

  uint64_t alignment = kDefaultAlignment;
  if (const GgufValue* a = f.find_value("general.alignment")) {
    if (a->type != GgufValueType::U32 || a->value.get<uint64_t>() == 0 || (a->value.get<uint64_t>() & (a->value.get<uint64_t>() - 1)))
      throw_input_error(path, "general.alignment must be a u32 power of two", "general.alignment");
    alignment = a->value.get<uint64_t>();
  }

  struct Pending {
    size_t info_at;
    uint64_t offset, numel;
  };
  std::vector<Pending> pending;
  for (uint64_t i = 0; i < tensor_count; i++) {
    GgufTensor t;
    const size_t at = c.pos();
    t.name = c.str(fmt::format("tensors[{}].name", i));
    const uint32_t n_dims = c.pod<uint32_t>(t.name + ".n_dims");
    if (n_dims == 0 || n_dims > kMaxDims)
      c.fail(t.name + ".n_dims", fmt::format("{} dimensions (expected 1 to {})", n_dims, kMaxDims), at);
    uint64_t numel = 1;
    t.shape.assign(n_dims, 0);
    for (uint32_t d = 0; d < n_dims; d++) {
      const uint64_t ne = c.pod<uint64_t>(t.name + ".ne");
      if (ne == 0 || ne > (uint64_t(1) << 40) || numel > (uint64_t(1) << 40) / ne)
        c.fail(t.name + ".ne", fmt::format("dimension {} is {} (expected 1 to 2^40, and at most 2^40 elements in all)", d, ne), at);
      numel *= ne;
      t.shape[n_dims - 1 - d] = int64_t(ne);  // ne[0] is innermost: the last row-major axis
    }
    t.ggml_type = c.pod<uint32_t>(t.name + ".type");
    t.dtype = dtype_of_ggml(t.ggml_type);
    if (t.dtype == DType::Q8_0 && t.shape.back() % kQ8Block != 0)  // ggml's rule: rows are whole blocks
      c.fail(t.name + ".ne", fmt::format("a Q8_0 tensor's rows ({} elements) must be a multiple of {}", t.shape.back(),
                                         kQ8Block),
             at);
    const uint64_t offset = c.pod<uint64_t>(t.name + ".offset");
    if (offset % alignment != 0)
      c.fail(t.name + ".offset", fmt::format("offset {} is not a multiple of the alignment {}", offset, alignment), at);
    if (f.index_.count(t.name)) c.fail(t.name, "two tensors have this name", at);
    f.index_[t.name] = f.tensors_.size();
    f.tensors_.push_back(std::move(t));
    pending.push_back({at, offset, numel});
  }

  // The data starts at the next multiple of the alignment.
  const uint64_t data_start = (c.pos() + alignment - 1) / alignment * alignment;
  const uint64_t size = f.file_->size();
  if (data_start > size) c.fail("tensor data", "the file ends before its tensor data starts", c.pos());
  for (size_t i = 0; i < f.tensors_.size(); i++) {
    GgufTensor& t = f.tensors_[i];
    const std::optional<size_t> bytes = tensor_bytes(t.ggml_type, pending[i].numel);
    if (!bytes) continue;  // a type Orion does not read: sized and refused by the model reader
    const uint64_t begin = data_start + pending[i].offset;
    if (pending[i].offset > size || begin > size || *bytes > size - begin)
      throw_input_error(path, fmt::format("tensor data [{}, {}) lies outside the file ({} bytes)", begin, begin + *bytes, size),
                        t.name, int64_t(pending[i].info_at), "the file is truncated; download or convert it again");
    t.file_offset = size_t(begin);
    t.data = f.file_->data() + begin;
    t.nbytes = *bytes;
  }
  return f;
}

const GgufValue* GgufFile::find_value(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const GgufTensor* GgufFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

void write_string(FileWriter& out, const std::string& s) {
  out.write_pod(uint64_t(s.size()));
  out.write_str(s);
}

void write_scalar(FileWriter& out, GgufValueType t, const json& v) {
  switch (t) {
    case GgufValueType::U8: out.write_pod(v.get<uint8_t>()); break;
    case GgufValueType::I8: out.write_pod(v.get<int8_t>()); break;
    case GgufValueType::U16: out.write_pod(v.get<uint16_t>()); break;
    case GgufValueType::I16: out.write_pod(v.get<int16_t>()); break;
    case GgufValueType::U32: out.write_pod(v.get<uint32_t>()); break;
    case GgufValueType::I32: out.write_pod(v.get<int32_t>()); break;
    case GgufValueType::F32: out.write_pod(v.get<float>()); break;
    case GgufValueType::Bool: out.write_pod(uint8_t(v.get<bool>() ? 1 : 0)); break;
    case GgufValueType::String: write_string(out, v.get<std::string>()); break;
    case GgufValueType::U64: out.write_pod(v.get<uint64_t>()); break;
    case GgufValueType::I64: out.write_pod(v.get<int64_t>()); break;
    case GgufValueType::F64: out.write_pod(v.get<double>()); break;
    case GgufValueType::Array: ORION_CHECK(false, "nested GGUF arrays are not written"); break;
  }
}

}  // namespace

void write_gguf(const std::string& path, const std::vector<GgufOutValue>& metadata,
                const std::vector<GgufOutTensor>& tensors) {
  std::vector<GgufOutValue> keys;  // the metadata, with general.alignment (the file's own layout) set here
  for (const GgufOutValue& kv : metadata)
    if (kv.key != "general.alignment") keys.push_back(kv);
  keys.push_back({"general.alignment", GgufValue{GgufValueType::U32, GgufValueType::U32, kWriteAlignment, 0}});
  write_file_atomic(path, [&](FileWriter& out) {
    out.write_pod(kMagic);
    out.write_pod(uint32_t(3));
    out.write_pod(uint64_t(tensors.size()));
    out.write_pod(uint64_t(keys.size()));
    for (const GgufOutValue& kv : keys) {
      write_string(out, kv.key);
      out.write_pod(uint32_t(kv.value.type));
      if (kv.value.type != GgufValueType::Array) {
        write_scalar(out, kv.value.type, kv.value.value);
        continue;
      }
      out.write_pod(uint32_t(kv.value.element_type));
      out.write_pod(uint64_t(kv.value.value.size()));
      for (const json& e : kv.value.value) write_scalar(out, kv.value.element_type, e);
    }
    uint64_t offset = 0;
    auto padded = [](uint64_t n) { return (n + kWriteAlignment - 1) / kWriteAlignment * kWriteAlignment; };
    for (const GgufOutTensor& t : tensors) {
      write_string(out, t.name);
      out.write_pod(uint32_t(t.shape.size()));
      for (size_t d = t.shape.size(); d-- > 0;) out.write_pod(uint64_t(t.shape[d]));  // innermost first
      out.write_pod(ggml_type_of(t.dtype));
      out.write_pod(offset);
      Tensor view{t.data, t.src_dtype, t.shape};
      offset += padded(bytes_as(view, t.dtype));
    }
    out.pad_to(kWriteAlignment);
    for (const GgufOutTensor& t : tensors) {
      write_as(out, Tensor{t.data, t.src_dtype, t.shape}, t.dtype);
      out.pad_to(kWriteAlignment);
    }
  });
}

}  // namespace orion::io
