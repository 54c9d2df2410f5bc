// Format detection and dispatch: the one door through which model files come in and go out.
#include "model/io/model_io.h"

#include <cstring>
#include <filesystem>

#include "base/error.h"
#include "base/file.h"
#include "model/family/family.h"
#include "model/io/gguf_file.h"
#include "model/io/io_internal.h"

namespace orion {
namespace fs = std::filesystem;

namespace {
constexpr int32_t kLlmcMagic = 20240326;
constexpr uint32_t kAk42Magic = 0x616b3432;  // "ak42" read as a little-endian uint32
constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF"

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

const char* format_name(ModelFormat f) {
  switch (f) {
    case ModelFormat::Llama2c: return "llama2c";
    case ModelFormat::Llama2cV1: return "llama2c-v1";
    case ModelFormat::Safetensors: return "safetensors";
    case ModelFormat::LlmC: return "llmc";
    case ModelFormat::Gguf: return "gguf";
  }
  return "?";
}

std::optional<ModelFormat> parse_format(const std::string& name) {
  for (ModelFormat f : {ModelFormat::Llama2c, ModelFormat::Llama2cV1, ModelFormat::Safetensors, ModelFormat::LlmC,
                        ModelFormat::Gguf})
    if (name == format_name(f)) return f;
  return std::nullopt;
}

std::string format_description(ModelFormat f) {
  switch (f) {
    case ModelFormat::Llama2c: return "llama2.c .bin (legacy version 0, fp32)";
    case ModelFormat::Llama2cV1: return "llama2.c .bin (version 1 \"ak42\", fp32)";
    case ModelFormat::Safetensors: return "Hugging Face safetensors + config.json";
    case ModelFormat::LlmC: return "llm.c .bin (gpt2_124M.bin layout)";
    case ModelFormat::Gguf: return "llama.cpp GGUF (f32, f16, bf16, q8_0 tensors)";
  }
  return "?";
}

ModelFormat detect_format(const std::string& path) {
  if (is_directory(path) || ends_with(path, ".safetensors") || fs::path(path).filename() == "config.json")
    return ModelFormat::Safetensors;
  auto file = MappedFile::open(path);
  const uint8_t* p = file->data();
  if (file->size() >= 4) {
    int32_t first;
    std::memcpy(&first, p, 4);
    if (first == kLlmcMagic) return ModelFormat::LlmC;
    if (uint32_t(first) == kAk42Magic) return ModelFormat::Llama2cV1;
    if (uint32_t(first) == kGgufMagic) return ModelFormat::Gguf;
  }
  // safetensors: u64 header length, then a JSON object.
  if (file->size() >= 10) {
    uint64_t n;
    std::memcpy(&n, p, 8);
    if (n + 8 <= file->size() && p[8] == '{') return ModelFormat::Safetensors;
  }
  return ModelFormat::Llama2c;
}

ModelWeights load_model(const std::string& path, const LoadOptions& options) {
  ModelFormat format = options.format ? *options.format : detect_format(path);
  ModelWeights w;
  switch (format) {
    case ModelFormat::Llama2c:
    case ModelFormat::Llama2cV1: w = io::read_llama2c(path); break;
    case ModelFormat::Safetensors: w = io::read_hf(path); break;
    case ModelFormat::LlmC: w = io::read_llmc(path); break;
    case ModelFormat::Gguf: w = io::read_gguf(path); break;
  }
  w.validate(path);
  if (options.dtype && *options.dtype != w.matrix_dtype()) {
    w.convert_matrices(*options.dtype);
    // Narrowing can overflow (|x| > 65504 in f16): check again so Inf never reaches the kernels.
    if (*options.dtype == DType::F16) w.validate(path + " (after conversion to f16)");
  }
  return w;
}

namespace {
void check_can_save(const ModelWeights& w, ModelFormat format, std::optional<DType> dtype) {
  const ModelConfig& c = w.config;
  const char* name = format_name(format);
  bool fp32_only = format == ModelFormat::Llama2c || format == ModelFormat::Llama2cV1;
  if (fp32_only && dtype && *dtype != DType::F32)
    throw_usage_error(fmt::format("{} files hold fp32 weights only, not {}", name, dtype_name(*dtype)), "dtype",
                      "drop --dtype, or convert to safetensors, which stores f16 and bf16");
  // Of Orion's formats only GGUF has a q8_0 tensor type (a q8_0 model goes to the others as f32 or
  // as --dtype says; safetensors keeps the loaded dtype, so it needs a --dtype then).
  const bool q8_0 = dtype.value_or(format == ModelFormat::Safetensors ? w.matrix_dtype() : DType::F32) == DType::Q8_0;
  if (q8_0 && format != ModelFormat::Gguf)
    throw_usage_error(fmt::format("{} files have no q8_0 tensors", name), "dtype",
                      "write gguf (--to gguf), or add --dtype f32, f16 or bf16");
  if (q8_0) w.check_fits_q8_0();
  if (format == ModelFormat::LlmC && dtype && *dtype == DType::F16)
    throw_usage_error("llm.c files hold fp32 (version 3) or bf16 (version 5), not f16", "dtype",
                      "use --dtype f32 or --dtype bf16");
  // A ".bin" format holds one family: the one whose bin_format it is.
  const ModelFamily& family = model_family(c.arch);
  auto holds = [&](ModelFormat bin) { return family.bin_format() == bin; };
  auto instead = [&] {
    return family.bin_format() ? fmt::format("write {} models as safetensors or {}", family.display_name(),
                                             format_name(*family.bin_format()))
                               : fmt::format("write {} models as safetensors", family.display_name());
  };
  if (fp32_only && !holds(ModelFormat::Llama2c))
    throw_usage_error(fmt::format("a {} model cannot be written as {}: llama2.c files hold Llama-architecture "
                                  "models only (RMSNorm, RoPE, SwiGLU, no biases)",
                                  arch_name(c.arch), name),
                      "to", instead());
  // A .bin header records the dimensions only: none of the newer block features fit in it.
  if (fp32_only || format == ModelFormat::LlmC) c.require_plain_blocks({}, fmt::format("the {} format", name));
  if (fp32_only && c.rope_theta != 10000.0f)
    throw_usage_error(fmt::format("llama2.c files cannot record rope_theta = {} (llama2.c assumes 10000)", c.rope_theta),
                      "to", "keep this model in safetensors");
  if (format == ModelFormat::LlmC) {
    if (!holds(ModelFormat::LlmC))
      throw_usage_error(fmt::format("a {} model cannot be written as llmc: llm.c files hold GPT-2 models only",
                                    arch_name(c.arch)),
                        "to", instead());
    if (c.hidden_dim != 4 * c.dim || c.n_kv_heads != c.n_heads || !c.tied_embeddings)
      throw_usage_error("llm.c files need H = 4·C, NKV = NH and a tied classifier", "to", "write safetensors instead");
  }
}
}  // namespace

void save_model(const ModelWeights& w, const std::string& path, ModelFormat format, std::optional<DType> dtype) {
  check_can_save(w, format, dtype);
  // Shapes and finiteness before a byte is written: never produce a file that load_model refuses.
  w.validate(fmt::format("the weights to write to {}", path));
  switch (format) {
    case ModelFormat::Llama2c: io::write_llama2c(w, path, 0); break;
    case ModelFormat::Llama2cV1: io::write_llama2c(w, path, 1); break;
    case ModelFormat::Safetensors: io::write_hf(w, path, dtype); break;
    case ModelFormat::LlmC: io::write_llmc(w, path, dtype.value_or(DType::F32)); break;
    case ModelFormat::Gguf: io::write_gguf_model(w, path, dtype); break;
  }
}

void save_gguf_model(const ModelWeights& w, const std::string& path, std::optional<DType> dtype,
                     const std::vector<io::GgufOutValue>& metadata) {
  check_can_save(w, ModelFormat::Gguf, dtype);
  w.validate(fmt::format("the weights to write to {}", path));
  io::write_gguf_model(w, path, dtype, metadata);
}

std::optional<ModelFormat> format_for_output(const std::string& path, Arch arch) {
  if (ends_with(path, ".safetensors") || is_directory(path) || ends_with(path, "/")) return ModelFormat::Safetensors;
  if (ends_with(path, ".bin")) return model_family(arch).bin_format();
  if (ends_with(path, ".gguf")) return ModelFormat::Gguf;
  if (fs::path(path).extension().empty()) return ModelFormat::Safetensors;  // a new folder
  return std::nullopt;
}

}  // namespace orion
