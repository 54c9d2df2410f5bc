#include "data/prepare.h"

#include <omp.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/file.h"
#include "data/document_stream.h"
#include "data/progress.h"
#include "model/tokenizer/tokenizer.h"

namespace orion::data {
namespace fs = std::filesystem;

bool is_validation_document(uint64_t i, double f) {
  return f > 0 && std::floor(double(i + 1) * f) > std::floor(double(i) * f);
}

namespace {

constexpr size_t kChunkDocuments = 2048;  // documents read, then tokenized in parallel, per round

// Accumulates one split's tokens and writes a shard whenever it is full.
class ShardWriter {
 public:
  ShardWriter(std::string dir, std::string prefix, TokenFormat format, uint64_t shard_tokens,
              std::vector<std::string>* files)
      : dir_(std::move(dir)), prefix_(std::move(prefix)), format_(format), limit_(shard_tokens), files_(files) {}

  void add(const std::vector<uint16_t>& doc) {
    if (!buf_.empty() && buf_.size() + doc.size() > limit_) flush();
    buf_.insert(buf_.end(), doc.begin(), doc.end());
    total_ += doc.size();
  }
  void flush() {
    if (buf_.empty()) return;
    std::string path = (fs::path(dir_) / fmt::format("{}_{:03}.bin", prefix_, files_->size())).string();
    write_token_file(path, buf_, format_);
    files_->push_back(path);
    buf_.clear();
  }
  uint64_t total() const { return total_; }

 private:
  std::string dir_, prefix_;
  TokenFormat format_;
  uint64_t limit_;
  std::vector<std::string>* files_;
  std::vector<uint16_t> buf_;
  uint64_t total_ = 0;
};

TokenFormat choose_format(const std::string& name, const Tokenizer& tok) {
  if (name == "llama2c") return TokenFormat::Llama2c;
  if (name == "llmc") return TokenFormat::Llmc;
  if (name == "auto") return tok.name() == "gpt2-bpe" ? TokenFormat::Llmc : TokenFormat::Llama2c;
  throw_usage_error(fmt::format("unknown format '{}'", name), "--format", "use llama2c, llmc or auto");
}

// The delimiter each document starts with: BOS, or <|endoftext|> for GPT-2 (which has no BOS).
int document_delimiter(const Tokenizer& tok) { return tok.bos_id() >= 0 ? tok.bos_id() : tok.eos_id(); }

std::vector<uint16_t> encode_document(const Tokenizer& tok, std::string_view text, int delimiter, int vocab) {
  std::vector<int> ids = tok.encode(text, /*add_bos=*/false);
  std::vector<uint16_t> out;
  out.reserve(ids.size() + 1);
  if (delimiter >= 0) out.push_back(uint16_t(delimiter));
  for (int id : ids) {
    ORION_CHECK(id >= 0 && id < vocab, "tokenizer produced id {} outside its vocabulary of {}", id, vocab);
    out.push_back(uint16_t(id));
  }
  return out;
}

std::string_view strip(std::string_view s) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

void write_meta(const PrepareOptions& opt, const PrepareResult& r, const Tokenizer& tok) {
  nlohmann::json meta = {{"format", token_format_name(r.format)},
                         {"tokenizer", opt.tokenizer},
                         {"tokenizer_kind", tok.name()},
                         {"vocab_size", r.vocab_size},
                         {"delimiter", document_delimiter(tok)},
                         {"val_fraction", opt.val_fraction},
                         {"documents", r.documents},
                         {"train_documents", r.train_documents},
                         {"val_documents", r.val_documents},
                         {"train_tokens", r.train_tokens},
                         {"val_tokens", r.val_tokens},
                         {"inputs", opt.inputs}};
  std::vector<std::string> train, val;
  for (const auto& f : r.train_files) train.push_back(fs::path(f).filename().string());
  for (const auto& f : r.val_files) val.push_back(fs::path(f).filename().string());
  meta["train_files"] = train;
  meta["val_files"] = val;
  write_file_atomic((fs::path(opt.out_dir) / "meta.json").string(),
                    [&](FileWriter& w) { w.write_str(meta.dump(2) + "\n"); });
}

}  // namespace

PrepareResult prepare_dataset(const PrepareOptions& opt) {
  if (!(opt.val_fraction >= 0 && opt.val_fraction < 1))
    throw_usage_error(fmt::format("validation fraction {} is outside [0, 1)", opt.val_fraction), "--val-fraction");
  const int threads = opt.threads > 0 ? opt.threads : omp_get_num_procs();
  // One tokenizer per thread: encoders cache words per instance, under a lock.
  std::vector<std::unique_ptr<Tokenizer>> toks;
  for (int t = 0; t < threads; ++t) toks.push_back(load_tokenizer(opt.tokenizer));
  const Tokenizer& tok = *toks[0];
  PrepareResult r;
  r.vocab_size = tok.vocab_size();
  r.format = choose_format(opt.format, tok);
  if (r.vocab_size > 65536)
    throw_usage_error(fmt::format("the vocabulary has {} tokens; token files store uint16 ids (at most 65536)",
                                  r.vocab_size),
                      "--tokenizer");
  const int delimiter = document_delimiter(tok);

  DocumentStream docs(resolve_text_inputs(opt.inputs));
  std::error_code ec;
  fs::create_directories(opt.out_dir, ec);
  if (!is_directory(opt.out_dir)) throw_runtime_error("cannot create the output folder", opt.out_dir);
  ShardWriter train(opt.out_dir, "train", r.format, opt.shard_tokens, &r.train_files);
  ShardWriter val(opt.out_dir, "val", r.format, opt.shard_tokens, &r.val_files);
  Progress progress("prepare", "docs", docs.bytes_total(), opt.progress);

  std::vector<std::string> chunk;
  std::vector<std::vector<uint16_t>> encoded;
  for (bool more = true; more;) {
    chunk.clear();
    std::string doc;
    while (chunk.size() < kChunkDocuments && (more = docs.next(doc))) chunk.push_back(std::move(doc));
    encoded.assign(chunk.size(), {});
    std::exception_ptr failure;  // an exception must not leave an OpenMP region: keep the first, rethrow
#pragma omp parallel for num_threads(threads) schedule(dynamic, 16)
    for (size_t i = 0; i < chunk.size(); ++i) {
      try {
        encoded[i] = encode_document(*toks[omp_get_thread_num()], strip(chunk[i]), delimiter, r.vocab_size);
      } catch (...) {
#pragma omp critical
        if (!failure) failure = std::current_exception();
      }
    }
    if (failure) std::rethrow_exception(failure);
    for (auto& e : encoded) {
      const bool is_val = is_validation_document(r.documents++, opt.val_fraction);
      (is_val ? val : train).add(e);
      ++(is_val ? r.val_documents : r.train_documents);
    }
    progress.update(r.documents, docs.bytes_done());
  }
  train.flush();
  val.flush();
  r.train_tokens = train.total();
  r.val_tokens = val.total();
  if (r.documents == 0) throw_input_error(opt.inputs.front(), "the inputs hold no documents");
  write_meta(opt, r, tok);
  progress.finish(r.documents, docs.bytes_done());
  r.seconds = progress.seconds();
  return r;
}

}  // namespace orion::data
