// Reading and writing model files. Every format Orion knows comes in here and leaves as a
// ModelWeights in the canonical layout (model/weights.h), memory-mapped and zero-copy wherever the
// file's layout already is the canonical one, and validated before it is returned.
//
//   format        files                                   matrices on disk     notes
//   Llama2c       llama2.c .bin, "version 0" (legacy)     f32                  7 × int32 header
//   Llama2cV1     llama2.c .bin, magic "ak42", version 1  f32                  256-byte header
//   Safetensors   Hugging Face model.safetensors          f32 / f16 / bf16     + config.json (GPT-2, Llama)
//   LlmC          llm.c gpt2_124M.bin                     f32 (v3) / bf16 (v5) 256 × int32 header, GPT-2 only
//   Gguf          llama.cpp .gguf (version 2 and 3)       f32 / f16 / bf16     metadata + tensors (gguf_file.h)
//
// Every problem with a file (truncated, bad magic, sizes that disagree with the header, NaN/Inf,
// unsupported dtype, broken JSON...) is one orion::Error of kind Input naming the file; writes go
// through write_file_atomic, so a failed write never damages a file already on disk.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "model/weights.h"

namespace orion {
namespace io {
struct GgufOutValue;
}

enum class ModelFormat { Llama2c, Llama2cV1, Safetensors, LlmC, Gguf };

const char* format_name(ModelFormat f);                            // "llama2c", "llama2c-v1", "safetensors", "llmc"
std::optional<ModelFormat> parse_format(const std::string& name);  // the names above
std::string format_description(ModelFormat f);                     // "llama2.c .bin (version 0, fp32)", ...

struct LoadOptions {
  std::optional<DType> dtype;         // convert matrices to this dtype after loading
  std::optional<ModelFormat> format;  // skip detection and read the file as this format
};

// What `path` is, by its name and its first bytes: a folder or a *.safetensors / config.json path
// is Safetensors; a file starting with llm.c's magic is LlmC; "ak42" is Llama2cV1; anything else is
// taken for a legacy llama2.c file (whose header is then checked like any other).
ModelFormat detect_format(const std::string& path);

// Loads and validates a model (ModelWeights::validate): the returned weights are ready to run.
// `path` may be a safetensors folder, its model.safetensors, or a .bin file.
ModelWeights load_model(const std::string& path, const LoadOptions& options = {});

// Writes `w` in `format`. dtype converts the matrices on the way out (vectors are always written as
// f32, except in llm.c bf16 files where every parameter is bf16). llama2.c files and llm.c
// version 3 are fp32 only; llm.c with dtype bf16 writes version 5. For Safetensors, `path` is a
// folder (created if needed; model.safetensors + config.json are written into it) or a
// *.safetensors file (config.json is written beside it). Impossible conversions (a GPT-2 model to
// llama2.c, a Llama model to llm.c, f16 into a llama2.c file) are Usage errors.
void save_model(const ModelWeights& w, const std::string& path, ModelFormat format, std::optional<DType> dtype = {});
// save_model to GGUF with more metadata after the model's keys: a tokenizer's (gguf_tokenizer.h).
void save_gguf_model(const ModelWeights& w, const std::string& path, std::optional<DType> dtype,
                     const std::vector<io::GgufOutValue>& metadata);

// The format a file name asks for, for `orion convert --out` without --to: *.safetensors or a
// name without extension (a folder) → Safetensors; *.bin → llama2.c for Llama, llm.c for GPT-2.
std::optional<ModelFormat> format_for_output(const std::string& path, Arch arch);

}  // namespace orion
