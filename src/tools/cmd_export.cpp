// `orion export`: the model of a training checkpoint as a model file others can run — llama2.c's
// .bin (run.c, `orion generate`), Hugging Face safetensors, or llm.c's gpt2 .bin.
//
// The checkpoint's fp32 parameters are written as they are (safetensors may narrow the matrices
// with --dtype); save_model writes atomically (a temporary file, fsync, rename), so an existing
// model at --out is either the old one or the new one, never half of each.
#include <cstdio>
#include <memory>

#include "base/error.h"
#include "model/io/model_io.h"
#include "tools/command.h"
#include "train/loop/checkpoint.h"

namespace orion::tools {
namespace {

struct ExportArgs {
  std::string ckpt, format, out, dtype;
};

void run_export(const ExportArgs& a) {
  std::string used;
  train::Checkpoint ck = train::load_latest_checkpoint(a.ckpt, &used);
  const Arch arch = ck.config.arch;
  std::optional<ModelFormat> format;
  if (!a.format.empty()) {
    format = parse_format(a.format);
    if (!format)
      throw_usage_error(fmt::format("unknown format '{}'", a.format), "--format",
                        "use llama2c, llama2c-v1, safetensors or llmc");
  } else {
    format = format_for_output(a.out, arch);
    if (!format)
      throw_usage_error(fmt::format("cannot tell the output format from the name '{}'", a.out), "--format",
                        "add --format llama2c|safetensors|llmc, or name the output *.bin or a folder");
  }
  std::optional<DType> dtype;
  if (!a.dtype.empty()) {
    dtype = parse_dtype(a.dtype);
    if (!dtype) throw_usage_error(fmt::format("unknown dtype '{}'", a.dtype), "--dtype", "use f32, f16 or bf16");
  }
  save_model(ck.params.view(), a.out, *format, dtype);
  std::printf("wrote %s: %s, %s, from %s (step %lld)\n", a.out.c_str(), format_description(*format).c_str(),
              ck.config.describe().c_str(), used.c_str(), (long long)ck.state.step);
  if (!ck.state.tokenizer.empty())
    std::printf("next: orion generate --model %s --tokenizer %s --prompt \"Once upon a time\"\n", a.out.c_str(),
                ck.state.tokenizer.c_str());
}

}  // namespace

void add_export_command(CLI::App& app) {
  auto args = std::make_shared<ExportArgs>();
  auto* cmd =
      app.add_subcommand("export", "Write the model of a training checkpoint as a llama2.c, safetensors or llm.c file");
  cmd->footer(
      "--ckpt takes a ckpt_*.ckpt file, a checkpoints folder or a run folder (its newest valid checkpoint).\n"
      "Formats: llama2c (run.c's .bin, Llama), llama2c-v1, safetensors (a folder with config.json), llmc (GPT-2).\n"
      "Without --format the output name decides (*.bin: llama2c for Llama, llmc for GPT-2; a folder: safetensors).\n"
      "Examples:\n"
      "  orion export --ckpt run1 --format llama2c --out story.bin\n"
      "  orion export --ckpt run1/checkpoints/ckpt_00000300.ckpt --format safetensors --out story-hf");
  cmd->add_option("--ckpt", args->ckpt, "checkpoint file, checkpoints folder or run folder")->required();
  cmd->add_option("--format", args->format, "llama2c, llama2c-v1, safetensors or llmc");
  cmd->add_option("--out", args->out, "output file (or folder for safetensors), replaced atomically")->required();
  cmd->add_option("--dtype", args->dtype, "matrix dtype for safetensors: f32, f16, bf16 (default f32)");
  cmd->callback([args] { run_export(*args); });
}

}  // namespace orion::tools
