// orion generate: text from a model file and its tokenizer, streamed to stdout; speed to stderr.
#include <cctype>
#include <cstdio>
#include <filesystem>

#include "base/error.h"
#include "base/file.h"
#include "infer/ane_model.h"
#include "infer/generate.h"
#include "model/io/model_io.h"
#include "model/tokenizer/tokenizer.h"
#include "tools/command.h"
#include "tools/options.h"

namespace orion::tools {
namespace {

struct GenerateArgs {
  std::string model, tokenizer, prompt = "Once upon a time";
  int n = 256;
  bool no_echo = false, no_bos = false, verbose = false;
  std::string backend = "cpu", chip = "m4";
  int max_seq = 0;
  SamplerOptions sampler{1.0f, 0.9f, 0, 0};
  ThreadOptions threads;
  DTypeOption dtype;
};

// The tokenizer that sits beside a model file (llama2.c and Hugging Face layouts).
std::string find_tokenizer_beside(const std::string& model_path) {
  namespace fs = std::filesystem;
  fs::path dir = fs::is_directory(model_path) ? fs::path(model_path) : fs::path(model_path).parent_path();
  if (dir.empty()) dir = ".";
  for (const char* name : {"tokenizer.json", "tokenizer.model", "tokenizer.bin", "vocab.json", "encoder.json"})
    if (fs::exists(dir / name)) return (dir / name).string();
  throw_usage_error(fmt::format("no tokenizer given and none found beside {}", model_path), "--tokenizer",
                    "pass --tokenizer PATH (tokenizer.bin, tokenizer.json, vocab.json, encoder.json or a .model)");
}

void run_generate(const GenerateArgs& a) {
  a.threads.apply();
  if (!file_exists(a.model))
    throw_input_error(a.model, "no such file or folder", {}, -1, "pass the path of a model file (--model)");
  std::string tok_path = a.tokenizer.empty() ? find_tokenizer_beside(a.model) : a.tokenizer;
  auto tokenizer = load_tokenizer(tok_path);
  LoadOptions lo;
  lo.dtype = a.dtype.get();
  ModelWeights w = load_model(a.model, lo);
  if (tokenizer->vocab_size() > w.config.vocab_size)
    throw Error(ErrorKind::Usage,
                fmt::format("the tokenizer has {} tokens but the model only {}", tokenizer->vocab_size(), w.config.vocab_size),
                {tok_path, "--tokenizer", -1, "use the tokenizer the model was trained with"});
  // cpu: every layer on the CPU. anesim / ane: the transformer blocks as compiled ANE programs,
  // embedding, classifier and sampling on the CPU (infer/ane_model.h).
  std::unique_ptr<Transformer> tf;
  std::unique_ptr<AneRuntime> rt;
  std::unique_ptr<LanguageModel> model;
  if (a.backend == "cpu") {
    tf = std::make_unique<Transformer>(w, a.max_seq);
    model = std::make_unique<CpuLanguageModel>(*tf);
  } else {
    rt = std::make_unique<AneRuntime>(a.backend, a.chip);
    model = std::make_unique<AneModel>(w, rt->cache, AneModelOptions{std::filesystem::path(a.model).stem().string(), a.max_seq});
  }

  std::vector<int> prompt = tokenizer->encode(a.prompt, !a.no_bos);
  if (prompt.empty() && tokenizer->bos_id() < 0 && tokenizer->eos_id() >= 0)
    prompt.push_back(tokenizer->eos_id());  // GPT-2 starts an empty prompt from <|endoftext|>
  GenerateOptions go;
  go.max_new_tokens = a.n;
  go.sampler = a.sampler;
  for (int id : {tokenizer->eos_id(), tokenizer->bos_id()})
    if (id >= 0) go.stop_ids.push_back(id);

  if (!a.no_echo) std::fputs(a.prompt.c_str(), stdout);
  std::fflush(stdout);
  int prev = prompt.back();
  GenerateStats st = generate(*model, prompt, go, [&](int id) {
    std::string piece = tokenizer->decode_token(prev, id);
    // A lone ASCII control byte (a raw-byte token such as <0x10>) would garble the terminal; it is
    // dropped, as llama2.c does. Bytes ≥ 0x80 are kept: they are parts of UTF-8 characters.
    bool control = piece.size() == 1 && (uint8_t(piece[0]) < 0x20 || piece[0] == 0x7f) && !std::isspace(uint8_t(piece[0]));
    if (control) piece.clear();
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    prev = id;
  });
  std::fputc('\n', stdout);
  std::fflush(stdout);
  std::fprintf(stderr, "prefill: %d tokens, %.1f tok/s | decode: %d tokens, %.1f tok/s%s\n", st.prompt_tokens,
               st.prefill_tok_per_s(), st.generated_tokens, st.decode_tok_per_s(),
               st.stopped_at_eos ? " | stopped at end of sequence" : "");
  if (a.verbose && rt) std::fprintf(stderr, "%s\n", rt->summary().c_str());
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "generate text from a model (llama2.c .bin, safetensors folder, llm.c .bin)");
  cmd->add_option("--model,-m", a->model, "model file or Hugging Face folder")->required();
  cmd->add_option("--tokenizer", a->tokenizer, "tokenizer file (default: one found beside the model)");
  cmd->add_option("--prompt,-p", a->prompt, "text to continue")->capture_default_str();
  cmd->add_option("-n,--max-new-tokens", a->n, "number of new tokens to generate (stops earlier at end of sequence)")
      ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--max-seq", a->max_seq, "context length to allocate (0 = the model's)")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--no-echo", a->no_echo, "do not print the prompt before the generated text");
  cmd->add_flag("--no-bos", a->no_bos, "do not start the prompt with the beginning-of-sequence token");
  cmd->add_option("--backend", a->backend, "cpu, or the transformer blocks as ANE programs on anesim (any machine) or ane (macOS)")
      ->capture_default_str()->check(CLI::IsMember({"cpu", "anesim", "ane"}));
  cmd->add_option("--chip", a->chip, "ANE generation anesim models (m1 … m5)")->capture_default_str();
  cmd->add_flag("--verbose", a->verbose, "print program-cache statistics, the compile budget and predicted ANE time");
  add_sampler_options(cmd, a->sampler);
  a->threads.add(cmd);
  a->dtype.add(cmd, "convert the weights to this precision at load (default: as stored)");
  cmd->callback([a] { run_generate(*a); });
}

}  // namespace orion::tools
