// Batches of tokens for training, read from memory-mapped token files (token_files.h).
//
// A batch is B rows of T+1 consecutive tokens: row b's inputs are its tokens 0..T-1 and its
// targets tokens 1..T (each target is the token after its input).
//
// Two orders, both pure functions of the batch number (so a checkpoint only stores position()):
//   sequential (llm.c's plain DataLoader): each file is read front to back in blocks of B·T+1
//     tokens starting every B·T tokens (consecutive rows share one token, as in llm.c); with
//     world > 1, rank r takes block r of every group of `world` consecutive blocks (llm.c's
//     B·T·rank start and B·T·world stride); a file's last partial group is skipped; after the last
//     file the order starts again.
//   shuffled: every file is cut into windows of T+1 tokens starting every T tokens; each epoch
//     permutes all windows with Rng(seed, epoch) (the same order on every machine), and rank r's
//     batch j takes the B windows at permuted positions (j·world + r)·B … +B−1.
// Either way the ranks of one world read disjoint data, and together they read all of it except
// the remainder that does not fill a batch for every rank.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/token_files.h"

namespace orion::data {

struct DatasetOptions {
  int B = 4;             // batch size (rows)
  int T = 64;            // sequence length
  bool shuffle = false;  // false: llm.c's sequential order
  uint64_t seed = 0;     // shuffle seed
  int rank = 0, world = 1;
  int vocab_size = -1;  // > 0: every file is checked for ids below it
};

struct Batch {
  int B = 0, T = 0;
  uint64_t index = 0;        // batch number this is (position before next())
  std::vector<int> tokens;   // [B, T+1]
  std::vector<int> inputs;   // [B, T]
  std::vector<int> targets;  // [B, T]
};

class TokenDataset {
 public:
  TokenDataset(const std::vector<std::string>& files, DatasetOptions opt);

  // The files of one split of a folder: names holding `split` ("train" or "val") — as written by
  // `orion data prepare` (train_000.bin, val_000.bin) and llm.c (*_train.bin, *_val.bin). When no
  // name holds "train" or "val" (llama2.c's data00.bin …), the first file in sorted order is the
  // validation split and the rest train, as llama2.c does. A file path is used as it is.
  static TokenDataset open(const std::string& path, const std::string& split, DatasetOptions opt);
  static std::vector<std::string> split_files(const std::string& dir, const std::string& split);

  // The same data as rank `rank` of `world` (disjoint from the other ranks, deterministic).
  TokenDataset shard(int rank, int world) const;

  uint64_t batches_per_epoch() const { return batches_per_epoch_; }
  Batch batch(uint64_t index) const;  // batch `index` of this rank (epochs follow each other)
  Batch next() { return batch(position_++); }
  uint64_t position() const { return position_; }
  void seek(uint64_t position) { position_ = position; }

  const DatasetOptions& options() const { return opt_; }
  uint64_t total_tokens() const;
  const std::vector<TokenFile>& files() const { return files_; }

 private:
  struct Span {  // B·T+1 (sequential) or T+1 (shuffled) tokens
    size_t file;
    size_t offset;
  };
  void index_units();
  Span unit(uint64_t global) const;  // the global-th block or window
  const std::vector<uint64_t>& permutation(uint64_t epoch) const;

  DatasetOptions opt_;
  std::vector<TokenFile> files_;
  std::vector<uint64_t> units_before_;  // per file: units (rounds or windows) in earlier files
  uint64_t units_ = 0, batches_per_epoch_ = 0, position_ = 0;
  mutable uint64_t perm_epoch_ = UINT64_MAX;
  mutable std::vector<uint64_t> perm_;
};

}  // namespace orion::data
