#include "data/token_dataset.h"

#include <algorithm>
#include <filesystem>
#include <numeric>

#include "base/error.h"
#include "data/rng.h"

namespace orion::data {
namespace fs = std::filesystem;

TokenDataset::TokenDataset(const std::vector<std::string>& files, DatasetOptions opt) : opt_(opt) {
  if (opt.B < 1 || opt.T < 1) throw_usage_error(fmt::format("batch {}×{} is empty", opt.B, opt.T), "--batch");
  if (opt.world < 1 || opt.rank < 0 || opt.rank >= opt.world)
    throw_usage_error(fmt::format("rank {} is not in 0..world-1 (world {})", opt.rank, opt.world), "rank");
  if (files.empty()) throw_usage_error("no token files given", "--data");
  for (const auto& f : files) files_.push_back(open_token_file(f, opt.vocab_size));
  index_units();
}

void TokenDataset::index_units() {
  const uint64_t B = uint64_t(opt_.B), T = uint64_t(opt_.T), world = uint64_t(opt_.world);
  units_before_.clear();
  units_ = 0;
  for (const auto& f : files_) {
    units_before_.push_back(units_);
    const uint64_t usable = f.count > 0 ? f.count - 1 : 0;  // the last token is only ever a target
    units_ += opt_.shuffle ? usable / T : usable / (B * T * world);
  }
  batches_per_epoch_ = opt_.shuffle ? units_ / (B * world) : units_;
  if (batches_per_epoch_ == 0)
    throw_input_error(files_.front().path,
                      fmt::format("{} tokens in {} file(s) do not fill one batch of {}×{} tokens for each of {} rank(s)",
                                  total_tokens(), files_.size(), opt_.B, opt_.T + 1, opt_.world),
                      {}, -1, "use a smaller --batch or --seq, or more data");
}

uint64_t TokenDataset::total_tokens() const {
  uint64_t n = 0;
  for (const auto& f : files_) n += f.count;
  return n;
}

TokenDataset TokenDataset::shard(int rank, int world) const {
  TokenDataset d = *this;
  if (world < 1 || rank < 0 || rank >= world)
    throw_usage_error(fmt::format("rank {} is not in 0..world-1 (world {})", rank, world), "rank");
  d.opt_.rank = rank;
  d.opt_.world = world;
  d.position_ = 0;
  d.perm_epoch_ = UINT64_MAX;
  d.index_units();
  return d;
}

TokenDataset::Span TokenDataset::unit(uint64_t global) const {
  const size_t f = size_t(std::upper_bound(units_before_.begin(), units_before_.end(), global) - units_before_.begin()) - 1;
  const uint64_t local = global - units_before_[f];
  const uint64_t T = uint64_t(opt_.T);
  if (opt_.shuffle) return {f, size_t(local * T)};
  // Round `local` of this file; this rank's block is number local·world + rank.
  const uint64_t block = local * uint64_t(opt_.world) + uint64_t(opt_.rank);
  return {f, size_t(block * uint64_t(opt_.B) * T)};
}

const std::vector<uint64_t>& TokenDataset::permutation(uint64_t epoch) const {
  if (perm_epoch_ != epoch) {
    perm_.resize(units_);
    std::iota(perm_.begin(), perm_.end(), uint64_t(0));
    Rng rng(opt_.seed, epoch);
    rng.shuffle(perm_);
    perm_epoch_ = epoch;
  }
  return perm_;
}

Batch TokenDataset::batch(uint64_t index) const {
  const int B = opt_.B, T = opt_.T;
  Batch out;
  out.B = B;
  out.T = T;
  out.index = index;
  out.tokens.resize(size_t(B) * (T + 1));
  const uint64_t epoch = index / batches_per_epoch_, j = index % batches_per_epoch_;
  auto copy_row = [&](int b, const TokenFile& f, size_t offset) {
    for (int t = 0; t <= T; ++t) out.tokens[size_t(b) * (T + 1) + t] = f.tokens[offset + t];
  };
  if (opt_.shuffle) {
    const auto& perm = permutation(epoch);
    const uint64_t first = (j * uint64_t(opt_.world) + uint64_t(opt_.rank)) * uint64_t(B);
    for (int b = 0; b < B; ++b) {
      Span s = unit(perm[first + b]);
      copy_row(b, files_[s.file], s.offset);
    }
  } else {
    Span s = unit(j);
    for (int b = 0; b < B; ++b) copy_row(b, files_[s.file], s.offset + size_t(b) * T);
  }
  out.inputs.resize(size_t(B) * T);
  out.targets.resize(size_t(B) * T);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      out.inputs[size_t(b) * T + t] = out.tokens[size_t(b) * (T + 1) + t];
      out.targets[size_t(b) * T + t] = out.tokens[size_t(b) * (T + 1) + t + 1];
    }
  return out;
}

std::vector<std::string> TokenDataset::split_files(const std::string& dir, const std::string& split) {
  if (split != "train" && split != "val")
    throw_usage_error(fmt::format("unknown split '{}'", split), "split", "use train or val");
  std::vector<std::string> all, named, unnamed;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".bin") all.push_back(e.path().string());
  std::sort(all.begin(), all.end());
  for (const auto& f : all) {
    const std::string name = fs::path(f).filename().string();
    const bool train = name.find("train") != std::string::npos, val = name.find("val") != std::string::npos;
    if (train || val) {
      if ((split == "train") == train) named.push_back(f);
    } else {
      unnamed.push_back(f);
    }
  }
  if (!named.empty()) return named;
  if (unnamed.size() >= 2) {  // llama2.c: shard 0 is validation
    if (split == "val") return {unnamed.front()};
    return {unnamed.begin() + 1, unnamed.end()};
  }
  throw_input_error(dir, fmt::format("no {} token files (*.bin) in this folder", split), {}, -1,
                    "run `orion data prepare` to make train_*.bin and val_*.bin");
}

TokenDataset TokenDataset::open(const std::string& path, const std::string& split, DatasetOptions opt) {
  if (fs::is_directory(path)) return TokenDataset(split_files(path, split), opt);
  return TokenDataset(std::vector<std::string>{path}, opt);
}

}  // namespace orion::data
