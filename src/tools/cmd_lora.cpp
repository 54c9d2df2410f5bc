// orion lora train | merge | convert | info: LoRA adapters (model/lora/lora.h, train/lora/lora_train.h).
#include <cstdio>
#include <filesystem>

#include "base/error.h"
#include "base/file.h"
#include "model/io/model_io.h"
#include "model/lora/lora_io.h"
#include "tools/command.h"
#include "tools/options.h"
#include "train/dist/communicator.h"
#include "train/lora/lora_train.h"

namespace orion::tools {
namespace {
namespace fs = std::filesystem;

struct LoraArgs {
  train::LoraTrainOptions train;
  TrainingFlags train_flags;  // shared with orion train (options.h)
  std::string model, lora, out, to, format = "both";
  float scale = 1.0f;
  ThreadOptions threads;
  DTypeOption dtype;
};

// After parsing, on every rank: threads, progress, what --resume continues, the data and its tokenizer.
void resolve_lora_train_args(LoraArgs& a, CLI::App* cmd) {
  train::LoraTrainOptions& o = a.train;
  a.train_flags.apply(o.train, ProgressStyle::Lora);
  o.resume = cmd->count("--resume") > 0;  // bare: the newest checkpoint of --ckpt-dir (default OUT/checkpoints)
  if (!file_exists(o.model)) throw_input_error(o.model, "no such file or folder", {}, -1, "pass the base model (--model)");
  if (o.resume) {  // the checkpoint's numeric options and data continue the run (lora_train.h)
    note_flags_ignored_on_resume(cmd, "lora");
    if (cmd->count("--steps") == 0) o.train.steps = 0;  // 0: the checkpoint's total
    if (cmd->count("--data") == 0) o.train.data.clear();
  } else if (cmd->count("--data") == 0) {
    throw_usage_error("--data is required", "--data", "give a prepared folder, a token file or text (builtin:N, files)");
  }
  // Text data is tokenized with the base's tokenizer (on a resume the data comes from the checkpoint:
  // the tokenizer beside the model when there is one).
  if (o.train.tokenizer.empty()) {
    if (o.train.data.empty()) o.train.tokenizer = tokenizer_beside(o.model).value_or("");
    else if (!fs::is_directory(o.train.data) && !o.train.data.ends_with(".bin"))
      o.train.tokenizer = find_tokenizer_beside(o.model);
  }
}

void run_lora_train(LoraArgs& a, CLI::App* cmd, train::dist::Communicator& comm) {
  resolve_lora_train_args(a, cmd);
  train::LoraTrainer t(a.train, &comm);
  train::TrainResult r = t.run();
  if (comm.rank() == 0)
    std::printf("adapter: %s (%s)\nloss %.4f -> %.4f%s | %.0f tok/s\n", r.model.c_str(), t.adapter().describe().c_str(),
                r.first_loss, r.last_loss, r.val_loss >= 0 ? fmt::format(" | val {:.4f}", r.val_loss).c_str() : "",
                r.tokens_per_second);
}

void run_lora_merge(const LoraArgs& a) {
  a.threads.apply();
  LoadOptions lo;
  ModelWeights base = load_model(a.model, lo);
  const LoraAdapter ad = load_lora(a.lora, base.config);
  ModelWeights merged = merge_lora(base, ad, a.scale);
  std::optional<ModelFormat> f = a.to.empty() ? format_for_output(a.out, base.config.arch) : parse_format(a.to);
  if (!f)
    throw_usage_error(fmt::format("unknown model format '{}'", a.to), "--to",
                      "use llama2c, llama2c-v1, safetensors or llmc");
  save_model(merged, a.out, *f, a.dtype.get());
  std::printf("merged %s into %s → %s (%s)\n", ad.describe().c_str(), a.model.c_str(), a.out.c_str(), format_name(*f));
}

void run_lora_convert(const LoraArgs& a) {
  const ModelConfig c = load_model(a.model).config;
  const LoraAdapter ad = load_lora(a.lora, c);
  if (a.format != "orion" && a.format != "peft") throw_usage_error("--format must be orion or peft", "--format");
  save_lora(ad, a.out, a.format == "orion" ? LoraFormat::Orion : LoraFormat::Peft, a.model);
  std::printf("%s → %s (%s)\n", a.lora.c_str(), a.out.c_str(), a.format.c_str());
}

void run_lora_info(const LoraArgs& a) {
  const ModelConfig c = load_model(a.model).config;
  std::printf("%s\n", load_lora(a.lora, c).describe().c_str());
}

// The subcommand `train` of `lora` with every flag of `orion lora train`, parsed into a.
CLI::App* add_lora_train_flags(CLI::App& lora, LoraArgs& a) {
  train::TrainOptions& t = a.train.train;
  CLI::App* tr = lora.add_subcommand(
      "train",
      "train a LoRA adapter on a frozen base model (CPU, or the ANE path with --backend).\n"
      "The adapter (A random, B = 0, so training starts from the base model exactly) learns the data; the base weights are "
      "never changed. Checkpoints go to OUT/checkpoints (--resume continues bit for bit; Ctrl-C or SIGUSR1 writes one and stops); the adapter is written to OUT as "
      "adapter.olora and/or the Hugging Face PEFT files (adapter_model.safetensors + adapter_config.json).\n"
      "Data parallel: mpirun -np 2 orion lora train … (--batch is per rank; only the adapter's gradients are all-reduced).");
  tr->add_option("--model,-m", a.train.model, "base model (any format `orion generate` reads)")->required();
  tr->add_option("--rank,-r", a.train.rank, "adapter rank r")->capture_default_str()->check(CLI::Range(1, 4096));
  tr->add_option("--alpha", a.train.alpha, "adapter alpha (the update is scaled by alpha/r)")->capture_default_str();
  tr->add_option("--targets", a.train.targets, "projections to adapt: q,k,v,o,w1 (gate),w2 (down),w3 (up) or all")
      ->capture_default_str();
  tr->add_option("--format", a.train.format, "adapter files written at the end: orion, peft or both")
      ->capture_default_str()
      ->check(CLI::IsMember({"orion", "peft", "both"}));
  tr->add_option("--base-dtype", a.train.base_dtype,
                 "keep the frozen base's block matrices in f16 or bf16 (half the memory; CPU backend), or f32")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "f16", "bf16"}));
  a.train_flags.add(
      tr, t,
      {.data = "a folder from `orion data prepare`, a token file, or text (files, folders, builtin:N) to tokenize",
       .out = "output folder: the adapter, checkpoints/, metrics.jsonl, data/ (text data tokenized)",
       .resume = "continue from the newest checkpoint of a folder or a lora_*.olora file (bare: --ckpt-dir, "
                 "else OUT/checkpoints) with the run's data and numeric options, bit for bit (--steps: a new total)"});
  tr->get_option("--data")->default_str("");  // no default: the data to fine-tune on (required unless --resume)
  tr->get_option("--out")->capture_default_str();
  return tr;
}

}  // namespace

void add_lora_command(CLI::App& app) {
  CLI::App* lora =
      app.add_subcommand("lora", "LoRA adapters: fine-tune one on a frozen model, merge it in, convert to/from PEFT");
  lora->require_subcommand(1);
  auto a = std::make_shared<LoraArgs>();

  CLI::App* tr = add_lora_train_flags(*lora, *a);
  tr->callback([a, tr] {
    run_data_parallel(tr, a->train_flags.threads, [&](train::dist::Communicator& c) { run_lora_train(*a, tr, c); });
  });

  CLI::App* mg = lora->add_subcommand("merge", "fold an adapter into the base weights (W + s·B·A) and write a new model");
  mg->add_option("--model,-m", a->model, "base model")->required();
  mg->add_option("--lora", a->lora, "adapter (adapter.olora or a folder, Orion's or PEFT's)")->required();
  mg->add_option("--out,-o", a->out, "the merged model (a .bin file or a safetensors folder)")->required();
  mg->add_option("--to", a->to, "llama2c, llama2c-v1, safetensors or llmc (default: from --out's name)");
  mg->add_option("--lora-scale", a->scale, "multiplies the adapter's update")->capture_default_str();
  a->dtype.add(mg, "precision of the merged matrices (default: the base's, fp32 for llama2.c files)");
  a->threads.add(mg);
  mg->callback([a] { run_lora_merge(*a); });

  CLI::App* cv = lora->add_subcommand("convert", "rewrite an adapter in Orion's format or the PEFT layout");
  cv->add_option("--model,-m", a->model, "the base model (its dimensions interpret PEFT files)")->required();
  cv->add_option("--lora", a->lora, "adapter to read")->required();
  cv->add_option("--out,-o", a->out, "output folder (or a .olora file)")->required();
  cv->add_option("--format", a->format, "orion or peft")->required()->check(CLI::IsMember({"orion", "peft"}));
  cv->callback([a] { run_lora_convert(*a); });

  CLI::App* in = lora->add_subcommand("info", "rank, alpha, targets and size of an adapter");
  in->add_option("--model,-m", a->model, "the base model")->required();
  in->add_option("--lora", a->lora, "adapter")->required();
  in->callback([a] { run_lora_info(*a); });
}

train::LoraTrainOptions parse_lora_train_flags(const std::vector<std::string>& flags) {
  CLI::App app;
  CLI::App* lora = app.add_subcommand("lora");
  LoraArgs a;
  CLI::App* tr = add_lora_train_flags(*lora, a);
  parse_subcommand_flags(app, "lora train", flags);
  resolve_lora_train_args(a, tr);
  return a.train;
}

}  // namespace orion::tools
