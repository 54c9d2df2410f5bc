// orion train --backend anesim through the binary: the stability chain of the CPU trainer
// (tests/tools/test_cli_train.cpp) on the ANE path — chains × steps steps, each a fresh process that
// resumes from the last checkpoint and compiles its programs only after loading it, equal one
// straight run bit for bit (anesim is deterministic, and the programs are rebuilt from the resumed
// parameters); no NaN/Inf, the loss falls. Also: the progress output names the weight-update
// strategy and the per-phase times.
//
// The full 5 × 5 chain (24 s on an idle machine: every fresh process compiles its 13 programs
// and verifies its first update); ORION_ANESIM_CHAIN=CxS another shape (scripts/sanitize.sh: 2x2).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "support.h"

using orion::test::run_losses;
using orion::test::run_orion;
using orion::test::temp_dir;

namespace {

// C = 192 lets the attention buffers reach the C7 minimum at S = 128 (see test_anesim_train.cpp).
const char* kConfig =
    R"({"arch": "llama", "dim": 192, "hidden_dim": 256, "n_layers": 2, "n_heads": 6, "n_kv_heads": 6, "vocab_size": 300, "seq_len": 128})";

std::string common_flags(const std::string& dir) {
  const std::string config = dir + "/tiny.json";
  if (!std::filesystem::exists(config)) std::ofstream(config) << kConfig;
  return "--config " + config +
         " --data builtin:300 --vocab 300 --batch 1 --seq 128 --lr 1e-2 --eval-every 0 "
         "--eval-batches 1 --sample 0 --backend anesim";
}

}  // namespace

TEST(AnesimTrainCli, ChainsOfFreshProcessesEqualOneStraightRun) {
  int chains = 5, per_chain = 5;
  if (const char* spec = std::getenv("ORION_ANESIM_CHAIN")) {
    ASSERT_EQ(std::sscanf(spec, "%dx%d", &chains, &per_chain), 2) << spec;
  }
  const int steps = chains * per_chain;
  std::printf("  %d chains x %d fresh processes\n", chains, per_chain);
  const std::string work = temp_dir(), straight = work + "/straight", chained = work + "/chained";
  const std::string flags = common_flags(work), total = " --steps " + std::to_string(steps);
  std::string err;
  ASSERT_EQ(run_orion("train " + flags + total + " --log-every 1 --out " + straight, nullptr, &err), 0) << err;
  // The progress names the strategy the probe chose and the phases of a step.
  EXPECT_NE(err.find("probe: delta reload stale"), std::string::npos) << err;
  EXPECT_NE(err.find("weights-as-inputs"), std::string::npos) << err;
  EXPECT_NE(err.find("predicted ANE"), std::string::npos) << err;
  for (int chain = 0; chain < chains; ++chain) {
    for (int s = 0; s < per_chain; ++s) {
      const bool first = chain == 0 && s == 0;
      const std::string args = first ? "train " + flags + total + " --stop-after 1 --no-progress --out " + chained
                                     : "train --resume " + chained + " --stop-after 1 --no-progress --backend anesim";
      ASSERT_EQ(run_orion(args, nullptr, &err), 0) << "chain " << chain << " step " << s << ": " << err;
    }
  }
  auto a = run_losses(straight), b = run_losses(chained);
  ASSERT_EQ(a.size(), size_t(steps));
  ASSERT_EQ(b.size(), size_t(steps));
  for (int step = 1; step <= steps; ++step) EXPECT_EQ(a[step], b[step]) << "step " << step;
  // One sequence per step is a noisy loss: the last chain ends below where the first began.
  EXPECT_LT(b[steps], b[1] - 0.5);
  auto bytes = [](const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_EQ(bytes(straight + "/model.bin"), bytes(chained + "/model.bin")) << "the final weights differ";
}

// --loss-scale dynamic on the ANE path: the loss's gradient enters the fp16 programs scaled, the
// gradients are divided back before AdamW; the losses follow the unscaled run's, each step's scale
// is in the metrics. --precision is the CPU's and is refused here.
TEST(AnesimTrainCli, DynamicLossScaling) {
  const std::string work = temp_dir(), plain = work + "/plain", scaled = work + "/scaled";
  const std::string flags = common_flags(work) + " --steps 6 --no-progress";
  std::string err;
  ASSERT_EQ(run_orion("train " + flags + " --out " + plain, nullptr, &err), 0) << err;
  ASSERT_EQ(run_orion("train " + flags + " --loss-scale dynamic --loss-scale-window 4 --out " + scaled, nullptr, &err), 0)
      << err;
  auto a = run_losses(plain), b = run_losses(scaled);
  ASSERT_EQ(b.size(), 6u);
  for (int step = 1; step <= 6; ++step) EXPECT_NEAR(b[step], a[step], 0.02 * a[step]) << "step " << step;
  std::vector<double> scales;
  std::ifstream in(scaled + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) scales.push_back(nlohmann::json::parse(line).at("loss_scale"));
  EXPECT_EQ(scales, (std::vector<double>{65536, 65536, 65536, 65536, 131072, 131072})) << "doubled after 4 clean steps";
  EXPECT_EQ(run_orion("train " + flags + " --precision bf16 --out " + work + "/refused", nullptr, &err), 2);
  EXPECT_NE(err.find("--precision"), std::string::npos) << err;
}
