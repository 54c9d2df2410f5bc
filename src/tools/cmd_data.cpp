// orion data: prepare training data (text → token shards), fetch TinyStories, inspect token files.
#include <spawn.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>

#include "base/error.h"
#include "data/download.h"
#include "data/prepare.h"
#include "data/token_files.h"
#include "tools/command.h"

extern char** environ;

namespace orion::tools {
namespace {
namespace fs = std::filesystem;

constexpr const char* kTinyStoriesUrl =
    "https://huggingface.co/datasets/roneneldan/TinyStories/resolve/main/TinyStories_all_data.tar.gz";

void run_prepare(const data::PrepareOptions& o) {
  data::PrepareResult r = data::prepare_dataset(o);
  std::printf(
      "%llu documents → %s: train %llu docs, %llu tokens in %zu file(s); val %llu docs, %llu tokens in %zu file(s)\n",
      (unsigned long long)r.documents, o.out_dir.c_str(), (unsigned long long)r.train_documents,
      (unsigned long long)r.train_tokens, r.train_files.size(), (unsigned long long)r.val_documents,
      (unsigned long long)r.val_tokens, r.val_files.size());
  std::printf("format %s, vocabulary %d; meta.json describes the files\n", data::token_format_name(r.format), r.vocab_size);
}

// Unpacks a .tar.gz with the system's tar (always present on Debian and macOS).
void extract_tarball(const std::string& archive, const std::string& dir) {
  fs::create_directories(dir);
  std::vector<std::string> args = {"tar", "-xzf", archive, "-C", dir};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawnp(&pid, "tar", nullptr, nullptr, argv.data(), environ) != 0)
    throw_runtime_error("cannot run tar to unpack the download", archive, "install tar, or unpack the file by hand");
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw_runtime_error("tar could not unpack the download", archive, "delete it and fetch again");
}

struct FetchArgs {
  std::string what = "tinystories";
  std::string out = "data";
  std::string url;
  bool no_extract = false;
  int retries = 3;
};

void run_fetch(const FetchArgs& a) {
  const std::string url = a.url.empty() ? kTinyStoriesUrl : a.url;
  std::string name = url.substr(url.find_last_of('/') + 1);
  if (size_t q = name.find('?'); q != std::string::npos) name.resize(q);
  if (name.empty()) name = "download";
  fs::create_directories(a.out);
  const std::string dest = (fs::path(a.out) / name).string();
  data::DownloadOptions opt;
  opt.retries = a.retries;
  std::fprintf(stderr, "fetch: %s → %s\n", url.c_str(), dest.c_str());
  data::DownloadResult r = data::download_file(url, dest, opt);
  if (r.already_present)
    std::printf("%s is already here (%llu bytes); delete it to fetch again\n", dest.c_str(), (unsigned long long)r.bytes);
  else
    std::printf("downloaded %s (%llu bytes%s)\n", dest.c_str(), (unsigned long long)r.bytes,
                r.resumed_from ? fmt::format(", resumed from {}", r.resumed_from).c_str() : "");
  const bool tarball = name.size() > 7 && (name.ends_with(".tar.gz") || name.ends_with(".tgz"));
  std::string data_dir = dest;
  if (tarball && !a.no_extract) {
    data_dir = (fs::path(a.out) / name.substr(0, name.find(".t"))).string();
    std::fprintf(stderr, "fetch: unpacking into %s\n", data_dir.c_str());
    extract_tarball(dest, data_dir);
  }
  std::printf("next: orion data prepare --tokenizer TOKENIZER --in %s --out %s/tok\n", data_dir.c_str(), a.out.c_str());
}

void run_info(const std::string& path, int vocab, int separator) {
  data::TokenFile f = data::open_token_file(path, vocab);
  uint16_t max_id = 0;
  for (size_t i = 0; i < f.count; ++i) max_id = std::max(max_id, f.tokens[i]);
  const int sep = separator >= 0 ? separator : f.format == data::TokenFormat::Llmc ? 50256 : 1;
  auto seqs = data::split_sequences(f.tokens, f.count, sep);
  std::printf("%s: %s, %zu tokens, %zu sequences (separator %d), largest id %u\n", path.c_str(),
              data::token_format_name(f.format), f.count, seqs.size(), sep, max_id);
}

void add_prepare(CLI::App* data) {
  auto o = std::make_shared<data::PrepareOptions>();
  auto* cmd = data->add_subcommand(
      "prepare",
      "Tokenize text into training shards with a train/validation split.\n"
      "Inputs (--in, repeatable): TinyStories *.json shards, text files (documents separated by blank lines,\n"
      "or by lines '<|endoftext|>' when the file has them), folders of either, or builtin[:N[:SEED]] (the\n"
      "built-in story generator). Each document starts with BOS (llama2.c tokenizers) or <|endoftext|>\n"
      "(GPT-2), is tokenized on --threads threads, and goes to val_*.bin for an evenly spread\n"
      "--val-fraction of documents, else to train_*.bin. meta.json records what was done.\n"
      "Examples:\n"
      "  orion data prepare --tokenizer tokenizer.bin --in builtin:20000 --out data/builtin\n"
      "  orion data prepare --tokenizer gpt2/ --in data/TinyStories_all_data --out data/ts --format llmc");
  cmd->add_option("--tokenizer", o->tokenizer,
                  "tokenizer file or folder (tokenizer.bin, tokenizer.json, vocab.json, *.model)")
      ->required();
  cmd->add_option("--in", o->inputs, "input file, folder, or builtin[:N[:SEED]] (repeatable)")->required();
  cmd->add_option("--out", o->out_dir, "output folder")->required();
  cmd->add_option("--val-fraction", o->val_fraction, "share of documents for validation")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.99));
  cmd->add_option("--threads", o->threads, "tokenizer threads (0 = all cores)")->check(CLI::Range(0, 1024));
  cmd->add_option("--format", o->format, "token file format: llama2c (raw uint16), llmc (with header), auto")
      ->capture_default_str()
      ->check(CLI::IsMember({"llama2c", "llmc", "auto"}));
  cmd->add_option("--shard-tokens", o->shard_tokens, "tokens per shard file at most")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t(1024), uint64_t(INT32_MAX)));
  cmd->add_flag("!--no-progress", o->progress, "no progress line on stderr");
  cmd->callback([o] { run_prepare(*o); });
}

void add_fetch(CLI::App* data) {
  auto a = std::make_shared<FetchArgs>();
  auto* cmd = data->add_subcommand(
      "fetch",
      "Download a data set (needs the network). `tinystories` fetches TinyStories_all_data.tar.gz (~1.5 GB,\n"
      "50 JSON shards) and unpacks it. Interrupted downloads resume: the bytes so far stay in FILE.part and\n"
      "the next run asks only for the rest. Only http:// and https:// URLs are accepted.\n"
      "Example: orion data fetch tinystories --out data");
  cmd->add_option("dataset", a->what, "the data set")->capture_default_str()->check(CLI::IsMember({"tinystories"}));
  cmd->add_option("--out", a->out, "output folder")->capture_default_str();
  cmd->add_option("--url", a->url, "download from this URL instead (a mirror, or a local server)");
  cmd->add_option("--retries", a->retries, "further attempts after a failure, each resuming")
      ->capture_default_str()
      ->check(CLI::Range(0, 100));
  cmd->add_flag("--no-extract", a->no_extract, "keep a .tar.gz packed");
  cmd->callback([a] { run_fetch(*a); });
}

void add_info(CLI::App* data) {
  auto path = std::make_shared<std::string>();
  auto vocab = std::make_shared<int>(-1);
  auto sep = std::make_shared<int>(-1);
  auto* cmd =
      data->add_subcommand("info", "Check a token file (llama2.c shard or llm.c file) and print its format and size.");
  cmd->add_option("file", *path, "token file")->required();
  cmd->add_option("--vocab", *vocab, "also check that every id is below this vocabulary size");
  cmd->add_option("--separator", *sep, "the id that starts each sequence (default: 1 for llama2.c, 50256 for llm.c)");
  cmd->callback([path, vocab, sep] { run_info(*path, *vocab, *sep); });
}

}  // namespace

void add_data_command(CLI::App& app) {
  auto* data = app.add_subcommand("data", "Training data: prepare token shards, fetch TinyStories, inspect token files.");
  data->require_subcommand(1);
  add_prepare(data);
  add_fetch(data);
  add_info(data);
}

}  // namespace orion::tools
