// orion tokenizer train: learn a BPE vocabulary of a chosen size from text.
#include <cstdio>
#include <filesystem>

#include "base/error.h"
#include "base/timer.h"
#include "data/bpe_trainer.h"
#include "data/document_stream.h"
#include "model/tokenizer/tokenizer.h"
#include "tools/command.h"

namespace orion::tools {
namespace {
namespace fs = std::filesystem;

struct TrainArgs {
  int vocab = 512;
  std::vector<std::string> inputs;
  std::string out;
  std::string format = "llama2c";
  int threads = 0;
  bool progress = true;
};

// Encodes a sample of the training text with the written file, as a check and a figure to show.
void report(const std::string& path, const std::vector<std::string>& inputs) {
  auto tok = load_tokenizer(path);
  data::DocumentStream docs(data::resolve_text_inputs(inputs));
  uint64_t bytes = 0, tokens = 0;
  std::string doc;
  for (int i = 0; i < 200 && docs.next(doc); ++i) {
    bytes += doc.size();
    tokens += tok->encode(doc, false).size();
  }
  std::printf("wrote %s: %d tokens (%s), %.2f bytes per token on the first documents\n", path.c_str(), tok->vocab_size(),
              tok->name().c_str(), tokens ? double(bytes) / double(tokens) : 0.0);
}

void run_train(const TrainArgs& a) {
  Timer timer;
  data::DocumentStream docs(data::resolve_text_inputs(a.inputs));
  data::WordCounts counts = data::count_words(docs, a.threads, a.progress);
  if (counts.documents == 0) throw_input_error(a.inputs.front(), "the inputs hold no documents");
  std::fprintf(stderr, "tokenizer: %llu documents, %zu distinct words; learning merges…\n",
               (unsigned long long)counts.documents, counts.words.size());
  fs::create_directories(a.out);
  data::BpeTrainOptions opt;
  opt.vocab_size = a.vocab;
  if (a.format == "llama2c" || a.format == "both") {
    const std::string path = (fs::path(a.out) / "tokenizer.bin").string();
    data::write_llama2c_tokenizer(path, data::train_bpe(counts, data::TokenizerFormat::Llama2c, opt));
    report(path, a.inputs);
  }
  if (a.format == "hf" || a.format == "both") {
    const std::string path = (fs::path(a.out) / "tokenizer.json").string();
    data::write_hf_tokenizer_json(path, data::train_bpe(counts, data::TokenizerFormat::HfJson, opt));
    report(path, a.inputs);
  }
  std::fprintf(stderr, "tokenizer: done in %.1f s\n", timer.seconds());
}

}  // namespace

void add_tokenizer_command(CLI::App& app) {
  auto* tokenizer = app.add_subcommand("tokenizer", "Tokenizer tools: train a BPE vocabulary.");
  tokenizer->require_subcommand(1);
  auto a = std::make_shared<TrainArgs>();
  auto* cmd = tokenizer->add_subcommand(
      "train",
      "Learn a byte-pair-encoding vocabulary of --vocab tokens from text and write it to --out:\n"
      "  llama2c  tokenizer.bin: <unk> <s> </s>, 256 byte-fallback pieces, merged pieces scored in\n"
      "           training order, frequent single characters (as Llama's SentencePiece BPE)\n"
      "  hf       tokenizer.json: GPT-2 style byte-level BPE (256 bytes, merges, <|endoftext|>)\n"
      "  both     the two files\n"
      "Inputs as for `orion data prepare`: TinyStories *.json, text files, folders, builtin[:N[:SEED]].\n"
      "Example: orion tokenizer train --vocab 512 --in builtin --out tok512");
  cmd->add_option("--vocab", a->vocab, "vocabulary size, special and byte tokens included")
      ->capture_default_str()
      ->check(CLI::Range(256, 32000));
  cmd->add_option("--in", a->inputs, "input file, folder, or builtin[:N[:SEED]] (repeatable)")->required();
  cmd->add_option("--out", a->out, "output folder")->required();
  cmd->add_option("--format", a->format, "llama2c, hf or both")
      ->capture_default_str()
      ->check(CLI::IsMember({"llama2c", "hf", "both"}));
  cmd->add_option("--threads", a->threads, "word-counting threads (0 = all cores)")->check(CLI::Range(0, 1024));
  cmd->add_flag("!--no-progress", a->progress, "no progress line on stderr");
  cmd->callback([a] { run_train(*a); });
}

}  // namespace orion::tools
