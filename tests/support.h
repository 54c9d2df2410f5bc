// Helpers shared by the tests: paths to test data and to ../shared, temporary folders, running the
// orion binary.
#pragma once
#include <map>
#include <string>

#include "model/config.h"
#include "model/lora/lora.h"

namespace orion::test {

std::string data_path(const std::string& rel);  // tests/testdata/<rel>
// ../shared/<rel>, or "" when ../shared is absent (callers GTEST_SKIP with the reason).
std::string shared_path(const std::string& rel);
// A fresh empty folder under the system temp dir, removed at process exit.
std::string temp_dir();
// A file's bytes ("" when it cannot be read), and its non-empty lines.
std::string read_text(const std::string& path);
int count_lines(const std::string& path);
// Runs the orion binary with args (a shell-quoted string); returns the exit code and fills out/err.
int run_orion(const std::string& args, std::string* out = nullptr, std::string* err = nullptr);

// step → loss from a run folder's metrics.jsonl (doubles printed to round-trip the floats); a
// non-finite or skipped step is a test failure.
std::map<int, double> run_losses(const std::string& run);

// The small GPT-2 and GQA Llama of the anesim LoRA and batched-decode tests: wide enough to be
// real, small enough for anesim (their attention kernels reach the C7 minimum at buckets 128 / 256).
ModelConfig small_anesim_config(Arch arch);
// An adapter initialised as training would (on q, v unless `targets` says), with random B
// (N(0, b_std²)) so that it changes outputs.
LoraAdapter trained_like_adapter(const ModelConfig& c, int rank, float alpha, uint64_t seed,
                                 const std::vector<LoraTarget>& targets = {LoraTarget::Q, LoraTarget::V},
                                 float b_std = 0.3f);

}  // namespace orion::test
