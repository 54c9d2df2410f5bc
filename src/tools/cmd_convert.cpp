// `orion convert`: read a model in any supported format and write it in another — or, with
// --config, write random weights of a preset (to benchmark or try the tools with no download).
#include <cstdio>
#include <filesystem>
#include <memory>

#include "base/error.h"
#include "base/file.h"
#include "model/chat/chat_template.h"
#include "model/io/gguf_file.h"
#include "model/io/model_io.h"
#include "model/tokenizer/gguf_tokenizer.h"
#include "tools/command.h"

namespace orion::tools {
namespace {

struct ConvertArgs {
  std::string in, out, to, from, dtype, config, tokenizer;
  uint64_t seed = 1;
};

std::optional<DType> dtype_arg(const std::string& s) {
  if (s.empty()) return std::nullopt;
  auto d = parse_dtype(s);
  if (!d) throw_usage_error(fmt::format("unknown dtype '{}'", s), "--dtype", "use f32, f16, bf16 or q8_0");
  return d;
}

std::optional<ModelFormat> format_arg(const std::string& s, const char* flag) {
  if (s.empty()) return std::nullopt;
  auto f = parse_format(s);
  if (!f)
    throw_usage_error(fmt::format("unknown format '{}'", s), flag, "use llama2c, llama2c-v1, safetensors, llmc or gguf");
  return f;
}

// The tokenizer a GGUF output carries, so that `orion generate --model x.gguf` needs nothing else:
// a GGUF input's own tokenizer.* keys, else the tokenizer.json given (--tokenizer) or beside the
// input, with the chat template of its folder. None (and a note saying why) when there is no such
// tokenizer or GGUF cannot hold it.
std::vector<io::GgufOutValue> tokenizer_keys(const ConvertArgs& a) {
  namespace fs = std::filesystem;
  std::vector<io::GgufOutValue> keys;
  if (a.tokenizer.empty() && !a.in.empty() && is_gguf_file(a.in)) {
    const io::GgufFile in = io::GgufFile::open(a.in);
    for (const auto& [key, value] : in.metadata())
      if (key.starts_with("tokenizer.")) keys.push_back({key, value});
    return keys;
  }
  std::string tok = a.tokenizer;
  if (tok.empty() && !a.in.empty()) {
    const fs::path dir = is_directory(a.in) ? fs::path(a.in) : fs::path(a.in).parent_path();
    if (fs::exists(dir / "tokenizer.json")) tok = (dir / "tokenizer.json").string();
  }
  if (tok.empty()) return keys;
  std::string why_not;
  keys = gguf_tokenizer_metadata(tok, &why_not);
  if (keys.empty()) {
    std::fprintf(stderr, "note: %s is not stored in the GGUF file: %s; pass --tokenizer to orion generate\n", tok.c_str(),
                 why_not.c_str());
    return keys;
  }
  std::string dir = fs::path(tok).parent_path().string();
  if (dir.empty()) dir = ".";
  if (chat::ChatTemplate::folder_has_template(dir))
    keys.push_back({"tokenizer.chat_template",
                    {io::GgufValueType::String, {}, chat::ChatTemplate::from_model_folder(dir).source()}});
  return keys;
}

void run_convert(const ConvertArgs& a) {
  std::optional<DType> dtype = dtype_arg(a.dtype);
  std::optional<ModelFormat> to = format_arg(a.to, "--to");
  LoadOptions load;
  load.format = format_arg(a.from, "--from");
  if (a.in.empty() == a.config.empty())
    throw_usage_error("give the model to read (--in) or a preset to make (--config)", "--in", "run `orion convert --help`");
  // A preset's random weights are drawn straight in the dtype asked for (no fp32 copy of a 1B model).
  ModelWeights w = !a.config.empty() ? random_weights(config_preset(a.config), a.seed, dtype.value_or(DType::F32))
                                     : load_model(a.in, load);
  if (!to) to = format_for_output(a.out, w.config.arch);
  if (!to)
    throw_usage_error(
        fmt::format("cannot tell the output format from the name '{}'", a.out), "--to",
        "add --to llama2c|llama2c-v1|safetensors|llmc|gguf, or name the output *.bin / *.safetensors / *.gguf / a folder");
  if (*to == ModelFormat::Gguf) save_gguf_model(w, a.out, dtype, tokenizer_keys(a));
  else save_model(w, a.out, *to, dtype);
  const bool keeps_dtype = *to == ModelFormat::Safetensors || *to == ModelFormat::Gguf;
  DType written = dtype ? *dtype : (keeps_dtype ? w.matrix_dtype() : DType::F32);
  std::printf("wrote %s: %s, %s, %s\n", a.out.c_str(), format_description(*to).c_str(), w.config.describe().c_str(),
              dtype_name(written));
}

}  // namespace

void add_convert_command(CLI::App& app) {
  auto args = std::make_shared<ConvertArgs>();
  auto* cmd = app.add_subcommand("convert", "Convert a model file between formats");
  cmd->footer(
      "Formats:\n"
      "  llama2c      llama2.c .bin, legacy version 0 (what run.c reads), fp32, Llama only\n"
      "  llama2c-v1   llama2.c .bin, version 1 (\"ak42\" header), fp32, Llama only\n"
      "  safetensors  Hugging Face model.safetensors + config.json (a folder), f32/f16/bf16, every family\n"
      "  llmc         llm.c gpt2_124M.bin, fp32 (version 3) or bf16 (version 5), GPT-2 only\n"
      "  gguf         llama.cpp .gguf (version 3; reads 2 and 3), f32/f16/bf16/q8_0, every family; with the\n"
      "               tokenizer.json beside --in (or --tokenizer: also a tokenizer.bin or .model) and its chat\n"
      "               template in its metadata\n"
      "q8_0 is llama.cpp's Q8_0 (blocks of 32 int8 weights with an fp16 scale); only gguf stores it.\n"
      "Without --to the output name decides: *.safetensors or a folder → safetensors; *.gguf → gguf;\n"
      "*.bin → llama2c for Llama models, llmc for GPT-2. The input format is detected from the file.\n"
      "Examples:\n"
      "  orion convert --in stories15M.bin --out stories15M-hf/ --dtype bf16\n"
      "  orion convert --in gpt2_124M.bin --out gpt2-hf --to safetensors\n"
      "  orion convert --in TinyLlama/ --out tiny.bin\n"
      "  orion convert --in stories15M.bin --out stories15M.gguf --dtype f16 --tokenizer tokenizer.bin\n"
      "  orion convert --in stories15M.bin --out stories15M-q8.gguf --dtype q8_0\n"
      "  orion convert --config llama3.2-1b --out llama1b-random/ --dtype bf16   (random weights, for benchmarks)");
  auto* in = cmd->add_option("--in", args->in, "Input model: a .bin file, a model.safetensors, or its folder");
  cmd->add_option("--config", args->config, "Instead of --in: random weights of this preset (benchmarks, trying the tools)")
      ->check(CLI::IsMember(config_preset_names()))
      ->excludes(in);
  cmd->add_option("--seed", args->seed, "Random seed for --config's weights")->capture_default_str();
  cmd->add_option("--out", args->out, "Output file or folder (existing files are replaced atomically)")->required();
  cmd->add_option("--tokenizer", args->tokenizer, "gguf output: the tokenizer to store: a tokenizer.json (default: the one beside --in), GPT-2's encoder.json + vocab.bpe (either file, or their folder), a llama2.c tokenizer.bin or a SentencePiece .model");
  cmd->add_option("--to", args->to, "Output format: llama2c, llama2c-v1, safetensors, llmc, gguf");
  cmd->add_option("--from", args->from, "Input format, to skip detection: llama2c, llama2c-v1, safetensors, llmc, gguf");
  cmd->add_option("--dtype", args->dtype, "Matrix dtype to write: f32, f16, bf16, q8_0 (gguf only) (default: as loaded; f32 for .bin)");
  cmd->callback([args] { run_convert(*args); });
}

}  // namespace orion::tools
