// Pieces shared by the format readers and writers in src/model/io. Not part of the public API
// (model_io.h); the tests include it to exercise the pieces one by one.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/file.h"
#include "model/io/model_io.h"
#include "model/weights.h"

namespace orion::io {

// ---- building tensors from mapped bytes -------------------------------------------------------

// A tensor over `data` (memory kept alive by w.keep). Zero-copy when `data` is aligned for its
// dtype; otherwise copied into an aligned buffer owned by w (same dtype, same bits).
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

// ---- writing -------------------------------------------------------------------------------------

// Writes the tensor's elements converted to `dtype` (in chunks; no whole-tensor copy).
void write_as(FileWriter& out, const Tensor& t, DType dtype);
// Bytes write_as would write.
inline size_t bytes_as(const Tensor& t, DType dtype) { return size_t(t.numel()) * dtype_size(dtype); }

// ---- safetensors container -------------------------------------------------------------------------

struct SafetensorsEntry {
  std::string name;
  std::string dtype_name;        // as stored: "F32", "BF16", "I64", ...
  std::optional<DType> dtype;    // set for the dtypes Orion computes with (F32, F16, BF16)
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // into the mapping
  size_t nbytes = 0;
  size_t file_offset = 0;        // absolute offset of the data in the file
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

// ---- config.json -----------------------------------------------------------------------------------

// Reads a Hugging Face config.json (model_type "llama" or "gpt2") into a ModelConfig; missing,
// zero or unsupported fields are Input errors naming the file and the field.
ModelConfig read_hf_config(const std::string& json_path);
std::string hf_config_json(const ModelConfig& c, DType torch_dtype);

// ---- the formats -------------------------------------------------------------------------------------

ModelWeights read_llama2c(const std::string& path);  // version 0 and version 1 ("ak42")
void write_llama2c(const ModelWeights& w, const std::string& path, int version);
ModelWeights read_llmc(const std::string& path);
void write_llmc(const ModelWeights& w, const std::string& path, DType dtype);
ModelWeights read_hf(const std::string& path);  // folder, model.safetensors or config.json
void write_hf(const ModelWeights& w, const std::string& path, std::optional<DType> dtype);

// RoPE frequency tables as llama2.c's legacy files carry them: [T, HS/2] each,
// real[t][i] = cos(t · θ^(−2i/HS)), imag[t][i] = sin(...).
void rope_tables(const ModelConfig& c, std::vector<float>* real, std::vector<float>* imag);

}  // namespace orion::io
