// `orion info`: what a model file holds — format, config, dtype, parameters, bytes.
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
  std::string model;
  bool tensors = false;
};

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
  ModelFormat format = detect_format(a.model);
  ModelWeights w = load_model(a.model);
  size_t memory = 0, stored_params = 0;
  for (auto& [name, t] : w.named_tensors()) memory += t->nbytes(), stored_params += size_t(t->numel());
  std::printf("model:      %s\n", a.model.c_str());
  std::printf("format:     %s — %s\n", format_name(format), format_description(format).c_str());
  std::printf("config:     %s\n", w.config.describe().c_str());
  std::printf("arch:       %s, norm_eps=%g%s, %s classifier\n", arch_name(w.config.arch), w.config.norm_eps,
              model_family(w.config.arch).anatomy().positions == Positions::Rope
                  ? fmt::format(", rope_theta={:g}", w.config.rope_theta).c_str()
                  : "",
              w.config.tied_embeddings ? "tied" : "untied");
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
      "Reads llama2.c .bin (versions 0 and 1), llm.c .bin, and Hugging Face safetensors folders (model.safetensors\n"
      "+ config.json). The model is fully loaded and validated (shapes, NaN/Inf), so `orion info` is also the\n"
      "quickest check that a file is intact.\n"
      "Example: orion info --model stories15M.bin --tensors");
  cmd->add_option("--model", args->model, "Model file or safetensors folder")->required();
  cmd->add_flag("--tensors", args->tensors, "Also list every tensor with its dtype and shape");
  cmd->callback([args] { run_info(*args); });
}

}  // namespace orion::tools
