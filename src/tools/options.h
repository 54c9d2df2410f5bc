// Option groups shared by several commands (model loading, threads, sampling), so every command
// spells and checks them the same way.
#pragma once
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "base/dtype.h"
#include "infer/sampler.h"

namespace orion::tools {

struct ThreadOptions {
  int threads = 0;  // 0: all cores
  void add(CLI::App* cmd);
  void apply() const;  // sets the kernels' thread count
};

struct DTypeOption {
  std::string name;  // empty: keep the stored precision
  void add(CLI::App* cmd, const std::string& help);
  std::optional<DType> get() const;  // Usage error naming --dtype for an unknown name
};

void add_sampler_options(CLI::App* cmd, SamplerOptions& s);

// The tokenizer that sits beside a model file (llama2.c and Hugging Face layouts); Usage error
// naming --tokenizer when there is none.
std::string find_tokenizer_beside(const std::string& model_path);

}  // namespace orion::tools
