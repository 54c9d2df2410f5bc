// Pieces shared by the format readers and writers in src/model/io. Not part of the public API
// (model_io.h); the tests include it to exercise the pieces one by one.
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/file.h"
#include "model/io/gguf_file.h"
#include "model/io/model_io.h"
#include "model/weights.h"

namespace orion::io {

// ---- building tensors from mapped bytes -------------------------------------------------------

// A tensor over `data` (memory kept alive by w.keep). Zero-copy when `data` is aligned for its
// dtype's kernels (f32: a 64-byte line; others: their element); otherwise copied into an aligned
// buffer owned by w (same dtype, same bits), and the mapped pages it came from let go
// (release_mapped_pages). `data` must be a read-only file mapping or memory no one writes.
Tensor view_or_copy(ModelWeights& w, const void* data, DType dtype, std::vector<int64_t> shape);
// A 1-D f32 tensor of n elements read from data of `dtype`: a view when already aligned f32,
// otherwise converted into a buffer owned by w. (Vectors are always f32 in memory.)
Tensor vector_f32(ModelWeights& w, const void* data, DType dtype, int64_t n);
// The transpose of a 2-D [rows, cols] tensor as a new [cols, rows] tensor owned by w, same dtype.
Tensor transposed(ModelWeights& w, const Tensor& t);
// Rows [begin, begin + count) of a 2-D tensor, as a view.
Tensor row_slice(const Tensor& t, int64_t begin, int64_t count);
// Elements [begin, begin + count) of a 1-D tensor, as a view.
Tensor vec_slice(const Tensor& t, int64_t begin, int64_t count);

// ---- Hugging Face Llama q/k row permutation ------------------------------------------------------
// llama2.c (Orion) rotates interleaved pairs (x[2i], x[2i+1]) of each head; Hugging Face rotates
// halves (x[i], x[i + HS/2]). To make the same weights work, HF checkpoints store the rows of wq/wk
// permuted, per head of HS rows:
//   hf_row(h, j, i) = h·HS + j·HS/2 + i   holds   orig_row(h, i, j) = h·HS + 2i + j
// for i in [0, HS/2), j in {0, 1}. (In PyTorch: w.view(NH, HS/2, 2, C).transpose(1, 2).reshape(NH·HS, C).)
// Both return a new tensor owned by w, same dtype; n_heads is NH for wq and NKV for wk.
Tensor hf_permute_rows(ModelWeights& w, const Tensor& orion_layout, int n_heads);
Tensor hf_unpermute_rows(ModelWeights& w, const Tensor& hf_layout, int n_heads);
// The same permutation of a vector of NH·HS (or HS, n_heads 1) elements: the q/k biases (Qwen2) and
// the per-head q/k norm gains (Qwen3), which follow the rows of wq/wk.
Tensor hf_permute_vector(ModelWeights& w, const Tensor& orion_layout, int n_heads);
Tensor hf_unpermute_vector(ModelWeights& w, const Tensor& hf_layout, int n_heads);

// ---- writing -------------------------------------------------------------------------------------

// Writes the tensor's elements converted to `dtype` (in chunks; no whole-tensor copy).
void write_as(FileWriter& out, const Tensor& t, DType dtype);
// Bytes write_as would write.
inline size_t bytes_as(const Tensor& t, DType dtype) { return dtype_bytes(dtype, size_t(t.numel())); }

// ---- safetensors container -------------------------------------------------------------------------

struct SafetensorsEntry {
  std::string name;
  std::string dtype_name;      // as stored: "F32", "BF16", "I64", ...
  std::optional<DType> dtype;  // set for the dtypes Orion computes with (F32, F16, BF16)
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // into the mapping
  size_t nbytes = 0;
  size_t file_offset = 0;  // absolute offset of the data in the file
};

// A parsed and fully checked safetensors file: header length, JSON, every entry's dtype, shape,
// offsets inside the file and not overlapping. Keeps the mapping alive.
class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::string& path);
  const std::string& path() const { return path_; }
  std::shared_ptr<MappedFile> mapping() const { return file_; }
  const SafetensorsEntry* find(const std::string& name) const;
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  std::string path_;
  std::shared_ptr<MappedFile> file_;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// Writes named tensors (each converted to its paired dtype) as one safetensors file.
struct SafetensorsOut {
  std::string name;
  const Tensor* tensor;
  DType dtype;
};
void write_safetensors(const std::string& path, const std::vector<SafetensorsOut>& tensors,
                       const std::map<std::string, std::string>& metadata);

// ---- Hugging Face checkpoints: what a family's reader and writer use (model/family/) -----------------

// Several same-width matrices (or vectors) stacked along their first dimension into one new
// tensor of dtype dt: [Σ rows, cols] (or [Σ n]).
Tensor stack_rows(ModelWeights& scratch, const std::vector<const Tensor*>& parts, DType dt);

// Typed fields of config.json; every failure is an Input error naming the file and the field
// (a nested object's fields as "rope_scaling.factor").
class HfConfigReader {
 public:
  HfConfigReader(const std::string& path, const nlohmann::json& j, std::string prefix = {})
      : path_(path), j_(j), prefix_(std::move(prefix)) {}
  [[noreturn]] void fail(const std::string& field, const std::string& msg) const;
  bool has(const char* k) const;      // present and not null
  bool present(const char* k) const;  // present, null or not (MistralConfig: absent and null differ)
  int positive_int(const char* k) const;
  int positive_int_or(const char* k, int fallback) const { return has(k) ? positive_int(k) : fallback; }
  int count_or(const char* k, int fallback) const;  // an integer ≥ 0
  float positive_float(const char* k, std::optional<float> fallback) const;
  bool boolean_or(const char* k, bool fallback) const;
  std::string string_or(const char* k, const std::string& fallback) const;
  HfConfigReader object(const char* k) const;  // the fields of a nested object (must be one)

 private:
  const std::string& path_;
  const nlohmann::json& j_;
  std::string prefix_;
};

// A float as JSON the way a person would write it ("1e-05", not 9.999999747378752e-06).
nlohmann::json json_float(float v);

// The safetensors file(s) of a checkpoint: one model.safetensors, or the shards that a
// model.safetensors.index.json names ({"weight_map": {"<tensor>": "model-00001-of-00002.safetensors",
// …}}), each mapped and checked, a tensor found in the shard its weight_map entry names
// (hf_shards.cpp). A shard the index names must exist beside it and hold the tensors it is given.
class SafetensorsCheckpoint {
 public:
  static SafetensorsCheckpoint open_file(const std::string& path);
  static SafetensorsCheckpoint open_index(const std::string& index_path);
  const std::string& path() const { return path_; }  // the file, or the index
  // The entry, and the path of the file holding it in *file; nullptr when the checkpoint lacks it.
  const SafetensorsEntry* find(const std::string& name, const std::string** file = nullptr) const;
  void keep_mappings(ModelWeights& w) const;  // w keeps every file's mapping alive

 private:
  std::string path_;
  std::vector<SafetensorsFile> files_;
  std::map<std::string, size_t> shard_of_;  // sharded: tensor name → index into files_
};

// Looks a checkpoint's tensors up by name with clear errors, and turns them into canonical tensors
// (views into the mapping when no rearranging is needed; owned by w otherwise).
class HfTensorReader {
 public:
  HfTensorReader(const SafetensorsCheckpoint& f, ModelWeights& w) : f_(f), w_(w) {}
  std::string prefix;  // put before every name looked up

  bool has(const std::string& name) const { return f_.find(prefix + name) != nullptr; }
  const SafetensorsEntry& get(const std::string& name, std::vector<int64_t> shape) const;
  Tensor matrix(const std::string& name, int64_t rows, int64_t cols);
  // A Conv1D weight stored [in, out], returned as Orion's [out, in].
  Tensor conv1d(const std::string& name, int64_t in, int64_t out) { return transposed(w_, matrix(name, in, out)); }
  Tensor vector(const std::string& name, int64_t n);

 private:
  const SafetensorsCheckpoint& f_;
  ModelWeights& w_;
};

// ---- config.json -----------------------------------------------------------------------------------

// Reads a Hugging Face config.json (a registered family's model_type) into a ModelConfig; missing,
// zero or unsupported fields are Input errors naming the file and the field.
ModelConfig read_hf_config(const std::string& json_path);
std::string hf_config_json(const ModelConfig& c, DType torch_dtype);

// ---- the formats -------------------------------------------------------------------------------------

ModelWeights read_llama2c(const std::string& path);  // version 0 and version 1 ("ak42")
void write_llama2c(const ModelWeights& w, const std::string& path, int version);
ModelWeights read_llmc(const std::string& path);
void write_llmc(const ModelWeights& w, const std::string& path, DType dtype);
ModelWeights read_hf(const std::string& path);  // folder, model.safetensors or config.json; sharded folders too
void write_hf(const ModelWeights& w, const std::string& path, std::optional<DType> dtype);
ModelWeights read_gguf(const std::string& path);
// `extra`: metadata written after the model's keys (a tokenizer's: gguf_tokenizer.h).
void write_gguf_model(const ModelWeights& w, const std::string& path, std::optional<DType> dtype,
                      const std::vector<GgufOutValue>& extra = {});

// Llama 3's RoPE scaling as GGUF holds it: rope_freqs.weight, a divisor per frequency pair
// (gguf_rope.cpp). The divisors of c's scaling, and the scaling of divisors read from `path`
// (Input error naming `field` when they are not the llama3 rule).
std::vector<float> llama3_rope_divisors(const ModelConfig& c);
RopeScaling llama3_scaling_from_divisors(const ModelConfig& c, const std::vector<float>& divisors, const std::string& path,
                                         const std::string& field);

// RoPE frequency tables as llama2.c's legacy files carry them: [T, HS/2] each,
// real[t][i] = cos(t · θ^(−2i/HS)), imag[t][i] = sin(...).
void rope_tables(const ModelConfig& c, std::vector<float>* real, std::vector<float>* imag);

}  // namespace orion::io
