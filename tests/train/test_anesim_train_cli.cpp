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
