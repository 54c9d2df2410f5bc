// `orion info`: what a model file holds — format, config, dtype, parameters, bytes; or, with
// --config, what a preset describes (no weights are made: llama3.2-1b would need 5 GB).
#include <cstdio>
#include <filesystem>
#include <memory>

#include "base/error.h"
#include "model/family/family.h"
#include "model/io/model_io.h"
#include "tools/command.h"

namespace orion::tools {
namespace {

struct InfoArgs {
  std::string model, config;
  bool tensors = false;
};

// The config line and the family line, shared by files and presets.
void print_config(const ModelConfig& c) {
  std::printf("config:     %s\n", c.describe().c_str());
  std::printf("arch:       %s, norm_eps=%g%s, %s classifier\n", arch_name(c.arch), c.norm_eps,
              model_family(c.arch).anatomy().positions == Positions::Rope
                  ? fmt::format(", rope_theta={:g}", c.rope_theta).c_str()
                  : "",
              c.tied_embeddings ? "tied" : "untied");
}

void run_info_preset(const std::string& name) {
  const ModelConfig c = config_preset(name);
  std::printf("preset:     %s\n", name.c_str());
  print_config(c);
  std::printf("parameters: %zu (%.2fM)\n", c.num_params(), c.num_params() / 1e6);
  std::printf("bytes:      %.0f MB in f32, %.0f MB in bf16\n", c.num_params() * 4 / 1e6, c.num_params() * 2 / 1e6);
}

// Bytes on disk: the file, or every regular file of a folder.
uint64_t disk_bytes(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return fs::file_size(path, ec);
  uint64_t n = 0;
  for (auto& e : fs::directory_iterator(path, ec))
    if (e.is_regular_file()) n += e.file_size();
  return n;
}

void run_info(const InfoArgs& a) {
  if (!a.config.empty()) return run_info_preset(a.config);
  if (a.model.empty()) throw_usage_error("--model or --config is required", "model", "run `orion info --help`");
  ModelFormat format = detect_format(a.model);
  ModelWeights w = load_model(a.model);
  size_t memory = 0, stored_params = 0;
  for (auto& [name, t] : w.named_tensors()) memory += t->nbytes(), stored_params += size_t(t->numel());
  std::printf("model:      %s\n", a.model.c_str());
  std::printf("format:     %s — %s\n", format_name(format), format_description(format).c_str());
  print_config(w.config);
  std::printf("dtype:      %s matrices, f32 vectors\n", dtype_name(w.matrix_dtype()));
  std::printf("parameters: %zu (%.2fM)\n", w.config.num_params(), w.config.num_params() / 1e6);
  std::printf("bytes:      %zu in memory, %llu on disk, %zu read per decoded token\n", memory,
              (unsigned long long)disk_bytes(a.model), w.matrix_bytes());
  if (a.tensors)
    for (auto& [name, t] : w.named_tensors())
      std::printf("  %-28s %-5s [%s]\n", name.c_str(), dtype_name(t->dtype),
                  fmt::format("{}", fmt::join(t->shape, ", ")).c_str());
}

}  // namespace

void add_info_command(CLI::App& app) {
  auto args = std::make_shared<InfoArgs>();
  auto* cmd = app.add_subcommand("info", "Describe a model file: format, config, dtype, parameters, bytes");
  cmd->footer(
      "Reads llama2.c .bin (versions 0 and 1), llm.c .bin, llama.cpp .gguf, and Hugging Face safetensors folders (model.safetensors\n"
      "or shards + model.safetensors.index.json, and config.json). The model is fully loaded and validated\n"
      "(shapes, NaN/Inf), so `orion info` is also the quickest check that a file is intact. --config describes a\n"
      "preset's dimensions instead.\n"
      "Example: orion info --model stories15M.bin --tensors;  orion info --config qwen3-0.6b");
  auto* model = cmd->add_option("--model", args->model, "Model file or safetensors folder");
  cmd->add_option("--config", args->config, "A preset to describe instead of a file")
      ->check(CLI::IsMember(config_preset_names()))
      ->excludes(model);
  cmd->add_flag("--tensors", args->tensors, "Also list every tensor with its dtype and shape");
  cmd->callback([args] { run_info(*args); });
}

}  // namespace orion::tools
