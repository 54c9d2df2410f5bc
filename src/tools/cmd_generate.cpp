// orion generate: text from a model file and its tokenizer, streamed to stdout; speed to stderr.
#include <algorithm>
#include <cctype>
#include <optional>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "base/error.h"
#include "base/file.h"
#include "base/timer.h"
#include "infer/ane_model.h"
#include "infer/generate.h"
#include "model/io/model_io.h"
#include "model/lora/lora_io.h"
#include "model/tokenizer/tokenizer.h"
#include "tools/chat_prompt.h"
#include "tools/command.h"
#include "tools/options.h"

namespace orion::tools {
namespace {

struct GenerateArgs {
  std::string model, tokenizer, prompt = "Once upon a time";
  int n = 256;
  bool no_echo = false, no_bos = false, verbose = false, chat = false;
  std::string backend = "cpu", chip = "m4";
  int max_seq = 0;
  std::vector<std::string> loras;  // adapters loaded at once, switched per prompt
  float lora_scale = 1.0f;
  std::string prompts;  // a file (or - for stdin) of prompts, one a line, "@NAME text" picks an adapter
  SamplerOptions sampler{1.0f, 0.9f, 0, 0};
  ThreadOptions threads;
  DTypeOption dtype;
  KvCacheOption kv_cache;
};

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
                fmt::format("the tokenizer has {} tokens but the model only {}", tokenizer->vocab_size(),
                            w.config.vocab_size),
                {tok_path, "--tokenizer", -1, "use the tokenizer the model was trained with"});
  // cpu: every layer on the CPU. anesim / ane: the transformer blocks as compiled ANE programs,
  // embedding, classifier and sampling on the CPU (infer/ane_model.h).
  std::unique_ptr<Transformer> tf;
  std::unique_ptr<AneRuntime> rt;
  std::unique_ptr<LanguageModel> model;
  AneModel* ane = nullptr;
  // LoRA adapters, all loaded up front; switching between them moves no weights and compiles
  // nothing (CPU: the blocks add s·B·A·x; ANE: the adapter matrices are program inputs).
  std::vector<std::pair<std::string, LoraAdapter>> adapters;
  int max_rank = 0;
  for (const std::string& path : a.loras) {
    std::string name = std::filesystem::path(path).filename().string();
    if (name.empty() || name == "adapter.olora" || name.ends_with(".safetensors") || name.ends_with(".json"))
      name = std::filesystem::path(path).parent_path().filename().string();
    if (name.ends_with(".olora")) name = std::filesystem::path(name).stem().string();
    adapters.emplace_back(name, load_lora(path, w.config));
    max_rank = std::max(max_rank, adapters.back().second.rank());
  }
  if (a.backend != "cpu" && a.kv_cache.get() != DType::F32)
    throw_usage_error("--kv-cache f16 is for the CPU backend", "--kv-cache",
                      "the ANE path keeps its own f32 cache: drop --kv-cache or use --backend cpu");
  if (a.backend == "cpu") {
    tf = std::make_unique<Transformer>(w, a.max_seq, a.kv_cache.get());
    model = std::make_unique<CpuLanguageModel>(*tf);
  } else {
    rt = std::make_unique<AneRuntime>(a.backend, a.chip);
    auto m =
        std::make_unique<AneModel>(w, rt->cache, AneModelOptions{std::filesystem::path(a.model).stem().string(), a.max_seq});
    if (max_rank > 0) m->enable_lora(max_rank);
    ane = m.get();
    model = std::move(m);
  }
  // Switches to adapter i (−1: the base model); returns the milliseconds it took.
  auto use_adapter = [&](int i) {
    Timer t;
    const LoraAdapter* ad = i >= 0 ? &adapters[size_t(i)].second : nullptr;
    if (tf) tf->set_lora(ad, a.lora_scale);
    if (ane) ane->set_lora(ad, a.lora_scale);
    return t.seconds() * 1e3;
  };

  GenerateOptions go;
  go.max_new_tokens = a.n;
  go.sampler = a.sampler;
  for (int id : {tokenizer->eos_id(), tokenizer->bos_id()})
    if (id >= 0) go.stop_ids.push_back(id);
  // --chat: each prompt is one user turn of the model's chat template; the reply ends at the end of
  // the model's turn too.
  std::optional<ChatSetup> chat;
  if (a.chat) {
    chat.emplace(load_chat_setup(a.model, *tokenizer));
    for (int id : chat->stop_ids)
      if (std::find(go.stop_ids.begin(), go.stop_ids.end(), id) == go.stop_ids.end()) go.stop_ids.push_back(id);
  }

  auto generate_one = [&](const std::string& text) {
    std::vector<int> prompt = chat ? encode_chat_prompt(*chat, chat->chat_template.render({{"user", text}}), *tokenizer)
                                   : tokenizer->encode(text, !a.no_bos);
    if (prompt.empty() && tokenizer->bos_id() < 0 && tokenizer->eos_id() >= 0)
      prompt.push_back(tokenizer->eos_id());  // GPT-2 starts an empty prompt from <|endoftext|>
    if (!a.no_echo && !chat) std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
    int prev = prompt.back();
    GenerateStats st = generate(*model, prompt, go, [&](int id) {
      const std::string piece = printable_piece(tokenizer->decode_token(prev, id));
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
      prev = id;
    });
    std::fputc('\n', stdout);
    std::fflush(stdout);
    std::fprintf(stderr, "prefill: %d tokens, %.1f tok/s | decode: %d tokens, %.1f tok/s%s\n", st.prompt_tokens,
                 st.prefill_tok_per_s(), st.generated_tokens, st.decode_tok_per_s(),
                 st.stopped_at_eos ? " | stopped at end of sequence" : "");
  };
  auto run_with = [&](int i, const std::string& text) {
    if (!adapters.empty()) {
      const double ms = use_adapter(i);
      std::fprintf(stderr, "[lora: %s] (switch %.3f ms%s)\n", i >= 0 ? adapters[size_t(i)].first.c_str() : "base", ms,
                   rt ? fmt::format(", compiles so far {}", rt->driver->counters().compiles).c_str() : "");
    }
    generate_one(text);
    if (a.verbose && rt) std::fprintf(stderr, "%s\n", rt->summary().c_str());
  };

  if (a.prompts.empty()) {  // the prompt once per adapter (or once, without adapters)
    if (adapters.empty()) run_with(-1, a.prompt);
    for (size_t i = 0; i < adapters.size(); i++) run_with(int(i), a.prompt);
    return;
  }
  // Requests, one a line, as they arrive: "@NAME text" switches to adapter NAME (@base: none), a
  // line without it keeps the current adapter (the first one at the start).
  std::ifstream file;
  if (a.prompts != "-") {
    file.open(a.prompts);
    if (!file) throw_input_error(a.prompts, "cannot open the prompts file", "--prompts");
  }
  std::istream& in = a.prompts == "-" ? std::cin : file;
  int current = adapters.empty() ? -1 : 0;
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("@")) {
      const size_t sp = line.find(' ');
      const std::string name = line.substr(1, sp == std::string::npos ? std::string::npos : sp - 1);
      line = sp == std::string::npos ? "" : line.substr(sp + 1);
      int found = name == "base" ? -1 : -2;
      for (size_t i = 0; i < adapters.size(); i++)
        if (adapters[i].first == name) found = int(i);
      if (found == -2) {
        std::string names = "base";
        for (auto& [n, ad] : adapters) names += ", " + n;
        throw_usage_error(fmt::format("no adapter named '{}'", name), "--prompts", "the adapters loaded are: " + names);
      }
      current = found;
    }
    if (!line.empty()) run_with(current, line);
  }
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  CLI::App* cmd =
      app.add_subcommand("generate", "generate text from a model (llama2.c .bin, safetensors folder, llm.c .bin)");
  cmd->add_option("--model,-m", a->model, "model file or Hugging Face folder")->required();
  cmd->add_option("--tokenizer", a->tokenizer, "tokenizer file (default: the one a GGUF model carries, or one found beside the model)");
  cmd->add_option("--prompt,-p", a->prompt, "text to continue")->capture_default_str();
  cmd->add_option("--lora", a->loras,
                  "LoRA adapter (adapter.olora, or a folder from `orion lora train` or PEFT); repeat to load several: "
                  "the prompt runs once per adapter, or --prompts picks one per line");
  cmd->add_option("--lora-scale", a->lora_scale, "multiplies every adapter's update alpha/r")->capture_default_str();
  cmd->add_option(
      "--prompts", a->prompts,
      "file of prompts, one a line (- reads stdin line by line: interactive); \"@NAME text\" switches to adapter "
      "NAME (@base: none) for this and later lines");
  cmd->add_option("-n,--max-new-tokens", a->n, "number of new tokens to generate (stops earlier at end of sequence)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--max-seq", a->max_seq, "context length to allocate (0 = the model's)")->check(CLI::NonNegativeNumber);
  a->kv_cache.add(cmd);
  cmd->add_flag("--no-echo", a->no_echo, "do not print the prompt before the generated text");
  cmd->add_flag("--no-bos", a->no_bos, "do not start the prompt with the beginning-of-sequence token");
  cmd->add_flag("--chat", a->chat,
                "the prompt is one user turn of the model's chat template (tokenizer_config.json); the reply alone is "
                "printed and ends at the model's end of turn (see also `orion chat`)");
  cmd->add_option("--backend", a->backend,
                  "cpu, or the transformer blocks as ANE programs on anesim (any machine) or ane (macOS)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "anesim", "ane"}));
  cmd->add_option("--chip", a->chip, "ANE generation anesim models (m1 … m5)")->capture_default_str();
  cmd->add_flag("--verbose", a->verbose, "print program-cache statistics, the compile budget and predicted ANE time");
  add_sampler_options(cmd, a->sampler);
  a->threads.add(cmd);
  a->dtype.add(cmd, "convert the weights to this precision at load (default: as stored)");
  cmd->callback([a] { run_generate(*a); });
}

}  // namespace orion::tools
