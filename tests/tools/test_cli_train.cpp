// orion train / bench train / demo through the binary: the 5 × 5 stability chain (25 steps, each a
// fresh process resuming from the last checkpoint) equals one straight 25-step run bit for bit;
// damaged checkpoints give one clear line and exit code 3; the demo runs end to end.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "support.h"

using orion::test::run_losses;
using orion::test::run_orion;
using orion::test::temp_dir;

namespace {

const char* kTinyConfig =
    R"({"arch": "llama", "dim": 32, "hidden_dim": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "vocab_size": 300, "seq_len": 64})";

std::string common_flags(const std::string& dir) {
  const std::string config = dir + "/tiny.json";
  if (!std::filesystem::exists(config)) std::ofstream(config) << kTinyConfig;
  return "--config " + config + " --data builtin:300 --vocab 300 --batch 4 --seq 32 --lr 1e-2 --eval-every 5 --no-progress";
}

}  // namespace

TEST(CliTrain, FiveChainsOfFiveFreshProcessesEqualOneStraightRun) {
  const std::string work = temp_dir(), straight = work + "/straight", chained = work + "/chained";
  const std::string flags = common_flags(work);
  std::string err;
  ASSERT_EQ(run_orion("train " + flags + " --steps 25 --out " + straight, nullptr, &err), 0) << err;
  for (int chain = 0; chain < 5; ++chain) {
    for (int s = 0; s < 5; ++s) {
      const bool first = chain == 0 && s == 0;
      const std::string args = first ? "train " + flags + " --steps 25 --stop-after 1 --out " + chained
                                     : "train --resume " + chained + " --stop-after 1 --no-progress --threads " +
                                           std::to_string(1 + (s % 2));  // thread count must not matter
      ASSERT_EQ(run_orion(args, nullptr, &err), 0) << "chain " << chain << " step " << s << ": " << err;
    }
  }
  auto a = run_losses(straight), b = run_losses(chained);
  ASSERT_EQ(a.size(), 25u);
  ASSERT_EQ(b.size(), 25u);
  for (int step = 1; step <= 25; ++step) EXPECT_EQ(a[step], b[step]) << "step " << step;
  for (int chain = 0; chain < 5; ++chain)  // the loss falls within every chain of 5 steps
    EXPECT_LT(b[chain * 5 + 5], b[chain * 5 + 1]) << "chain " << chain;
  EXPECT_TRUE(std::filesystem::exists(chained + "/model.bin")) << "the last step exports the model";
  auto bytes = [](const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_EQ(bytes(straight + "/model.bin"), bytes(chained + "/model.bin")) << "the final weights differ";
}

// --checkpoint-activations recomputes blocks in the backward instead of keeping their activations:
// the run is the same run — every loss and the exported model bit for bit — and the summary line
// reports the peak memory. The ANE path refuses the flag naming it.
TEST(CliTrain, ActivationCheckpointingTrainsTheSameModel) {
  const std::string work = temp_dir(), flags = common_flags(work);
  std::string err;
  ASSERT_EQ(run_orion("train " + flags + " --steps 6 --out " + work + "/none", nullptr, &err), 0) << err;
  for (const char* mode : {"blocks", "every-2"}) {
    const std::string out = work + "/" + mode;
    ASSERT_EQ(run_orion("train " + flags + " --steps 6 --checkpoint-activations " + mode + " --out " + out, nullptr, &err),
              0)
        << err;
    EXPECT_EQ(run_losses(work + "/none"), run_losses(out)) << mode;
    EXPECT_EQ(orion::test::read_text(work + "/none/model.bin"), orion::test::read_text(out + "/model.bin")) << mode;
  }
  ASSERT_EQ(run_orion("train --config " + work +
                          "/tiny.json --data builtin:300 --vocab 300 --batch 2 --seq 16 --steps 2 "
                          "--checkpoint-activations blocks --out " +
                          work + "/p",
                      nullptr, &err),
            0)
      << err;
  EXPECT_NE(err.find("peak memory"), std::string::npos) << err;
  EXPECT_EQ(run_orion("train " + flags + " --steps 2 --checkpoint-activations sometimes --out " + work + "/bad", nullptr,
                      &err),
            2);
  EXPECT_NE(err.find("--checkpoint-activations"), std::string::npos) << err;
  EXPECT_EQ(run_orion("train " + flags + " --steps 2 --backend anesim --checkpoint-activations blocks --out " + work +
                          "/ane",
                      nullptr, &err),
            2);
  EXPECT_NE(err.find("CPU backend"), std::string::npos) << err;
}

// Each metrics.jsonl row says how many tokens its step trained on (batch × seq × accum × ranks), so a
// reader (orion serve's runs view) can plot tokens/s.
TEST(CliTrain, MetricsRecordTheTokensOfEachStep) {
  const std::string work = temp_dir(), flags = common_flags(work);
  std::string err;
  ASSERT_EQ(run_orion("train " + flags + " --steps 2 --accum 2 --out " + work + "/r", nullptr, &err), 0) << err;
  std::istringstream in(orion::test::read_text(work + "/r/metrics.jsonl"));
  int rows = 0;
  for (std::string line; std::getline(in, line); rows++)
    EXPECT_EQ(nlohmann::json::parse(line)["tokens"].get<int64_t>(), 4 * 32 * 2) << line;
  EXPECT_EQ(rows, 2);
}

TEST(CliTrain, DamagedCheckpointIsOneClearLine) {
  const std::string work = temp_dir(), run = work + "/run";
  std::string err;
  ASSERT_EQ(run_orion("train " + common_flags(work) + " --steps 2 --out " + run, nullptr, &err), 0) << err;
  const std::string ckpt = run + "/checkpoints/ckpt_00000002.ckpt";
  ASSERT_TRUE(std::filesystem::exists(ckpt));
  std::filesystem::resize_file(ckpt, 100);
  EXPECT_EQ(run_orion("train --resume " + ckpt, nullptr, &err), 3);
  EXPECT_NE(err.find(ckpt), std::string::npos) << err;
  EXPECT_NE(err.find("truncated"), std::string::npos) << err;
  const std::string junk = work + "/junk.ckpt";
  std::ofstream(junk) << "hello";
  EXPECT_EQ(run_orion("train --resume " + junk, nullptr, &err), 3);
  EXPECT_NE(err.find("not an Orion checkpoint"), std::string::npos) << err;
  EXPECT_EQ(run_orion("train --resume " + work + "/missing", nullptr, &err), 3) << err;
}

TEST(CliTrain, HelpAndUsageErrors) {
  std::string out, err;
  ASSERT_EQ(run_orion("train --help", &out), 0);
  for (const char* flag :
       {"--config", "--data", "--resume", "--init", "--checkpoint-every", "--eval-every", "--plain", "--accum"})
    EXPECT_NE(out.find(flag), std::string::npos) << flag;
  EXPECT_EQ(run_orion("train --config stories260k --seq 4096 --data builtin:100 --out " + temp_dir() + "/x", nullptr, &err),
            2);
  EXPECT_NE(err.find("--seq"), std::string::npos) << err;
  EXPECT_EQ(run_orion("train --config nosuch --out " + temp_dir(), nullptr, &err), 2) << err;
}

TEST(CliTrain, BenchTrainJson) {
  std::string out, err;
  ASSERT_EQ(run_orion("bench train --config stories260k --batch 2 --seq 16 --steps 2 --json --threads 1", &out, &err), 0)
      << err;
  auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["config"], "stories260k");
  EXPECT_GT(j["ms_per_step"].get<double>(), 0.0);
  EXPECT_GT(j["tok_per_s"].get<double>(), 0.0);
  EXPECT_GT(j["peak_rss_bytes"].get<double>(), 1e6);  // at least the binary and the parameters
  // The fp32 step against its compute bound. stories260k: C 64, H 172, 5 layers, 8 heads of 8, 4 kv
  // heads, V 512 — matrix weights 5·(2·64·64 + 2·64·32 + 3·64·172) + 512·64 = 259,328, 6 FLOPs each
  // per token over 2·16 tokens, plus causal attention 6·B·T²·C·L = 983,040.
  EXPECT_NEAR(j["step_gflop"].get<double>(), (6.0 * 259328 * 32 + 983040) / 1e9, 1e-9);
  EXPECT_GT(j["gemm_peak_gflops"].get<double>(), 0.0);
  const double bound = j["compute_bound_ms"].get<double>();
  EXPECT_NEAR(bound, 1000 * j["step_gflop"].get<double>() / j["gemm_peak_gflops"].get<double>(), 1e-6 * bound);
  const double median = j["median_ms"].get<double>();  // printed to 0.001 ms
  EXPECT_NEAR(j["compute_efficiency"].get<double>(), bound / median, 0.001 * bound / (median * median));
  ASSERT_EQ(run_orion("bench train --config stories260k --batch 2 --seq 16 --steps 1 --json --threads 1 "
                      "--checkpoint-activations blocks",
                      &out, &err),
            0)
      << err;
  EXPECT_EQ(nlohmann::json::parse(out)["checkpoint_activations"], "blocks");
  ASSERT_EQ(run_orion("bench train --config stories260k --batch 2 --seq 16 --steps 1 --json --threads 1 --precision bf16",
                      &out, &err),
            0)
      << err;
  EXPECT_EQ(nlohmann::json::parse(out)["precision"], "bf16");
  EXPECT_EQ(nlohmann::json::parse(out)["compute_bound_ms"].get<double>(), 0.0) << "bf16 products pass the fp32 peak";
}

// fp16 with a dynamic loss scale: a resumed run continues with the checkpoint's scale (and its
// count of clean steps), so the chain's scales and losses are the straight run's.
TEST(CliTrain, Fp16LossScaleSurvivesAResume) {
  const std::string work = temp_dir(), flags = common_flags(work) + " --steps 6 --precision fp16 --loss-scale-window 2";
  std::string err;
  ASSERT_EQ(run_orion("train " + flags + " --out " + work + "/straight", nullptr, &err), 0) << err;
  ASSERT_EQ(run_orion("train " + flags + " --stop-after 3 --out " + work + "/chain", nullptr, &err), 0) << err;
  ASSERT_EQ(run_orion("train --resume " + work + "/chain --no-progress", nullptr, &err), 0) << err;
  auto scales = [](const std::string& run) {
    std::vector<double> v;
    std::istringstream in(orion::test::read_text(run + "/metrics.jsonl"));
    for (std::string line; std::getline(in, line);) v.push_back(nlohmann::json::parse(line).at("loss_scale"));
    return v;
  };
  EXPECT_EQ(scales(work + "/straight"), (std::vector<double>{65536, 65536, 131072, 131072, 262144, 262144}));
  EXPECT_EQ(scales(work + "/chain"), scales(work + "/straight"));
  EXPECT_EQ(run_losses(work + "/chain"), run_losses(work + "/straight"));
}

// --precision bf16 through the CLI: it trains, the checkpoint keeps the precision (a resume
// continues in bf16 bit for bit), and the losses differ from fp32's in the last digits only.
TEST(CliTrain, Bf16PrecisionResumesInBf16) {
  const std::string work = temp_dir(), flags = common_flags(work);
  std::string err;
  ASSERT_EQ(run_orion("train " + flags + " --steps 4 --out " + work + "/f32", nullptr, &err), 0) << err;
  ASSERT_EQ(run_orion("train " + flags + " --steps 4 --precision bf16 --out " + work + "/bf16", nullptr, &err), 0) << err;
  ASSERT_EQ(run_orion("train " + flags + " --steps 4 --precision bf16 --stop-after 2 --out " + work + "/chain", nullptr, &err),
            0)
      << err;
  ASSERT_EQ(run_orion("train --resume " + work + "/chain --no-progress", nullptr, &err), 0) << err;
  const auto f32 = run_losses(work + "/f32"), bf16 = run_losses(work + "/bf16");
  EXPECT_EQ(run_losses(work + "/chain"), bf16);
  ASSERT_EQ(bf16.size(), 4u);
  EXPECT_NE(bf16, f32);
  for (int s = 1; s <= 4; s++) EXPECT_NEAR(bf16.at(s), f32.at(s), 0.02 * f32.at(s)) << "step " << s;
}

TEST(CliDemo, ShortDemoRunsEndToEnd) {
  std::string out, err;
  const std::string dir = temp_dir() + "/demo";
  ASSERT_EQ(run_orion("demo --steps 20 --stories 200 --batch 4 --seq 32 -n 20 --threads 1 --out " + dir, &out, &err), 0)
      << err;
  EXPECT_NE(out.find("Once upon a time"), std::string::npos) << out;
  EXPECT_NE(out.find("decode"), std::string::npos) << out;
  EXPECT_NE(err.find("step 20/20"), std::string::npos) << err;
  EXPECT_TRUE(std::filesystem::exists(dir + "/model.bin"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/tokenizer.bin"));
  // The exported model runs in `orion generate`.
  ASSERT_EQ(run_orion("generate --model " + dir + "/model.bin --tokenizer " + dir + "/tokenizer.bin --prompt Once -n 5",
                      &out, &err),
            0)
      << err;
}
