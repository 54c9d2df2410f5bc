// orion lora train as a user drives it, as test_train_interrupt.cpp does for orion train (both run
// the one training loop): SIGUSR1 (or Ctrl-C) in the middle of a run finishes the step, writes a
// checkpoint and exits cleanly, and --resume continues to exactly the adapter and the losses of an
// uninterrupted run; --accum 2 over B rows matches one batch of 2B rows; --metrics FILE.csv writes
// one row per step. The interrupted run is a real subprocess of the built orion binary.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "support.h"

namespace fs = std::filesystem;

namespace {

using orion::test::count_lines;
std::string slurp(const std::string& path) { return orion::test::read_text(path); }

// A tiny base model with its tokenizer beside it (orion train, two steps).
std::string base_model(const std::string& dir) {
  const std::string config = dir + "/tiny.json";
  std::ofstream(config) << R"({"arch": "llama", "dim": 32, "hidden_dim": 64, "n_layers": 2, "n_heads": 4,
                              "n_kv_heads": 2, "vocab_size": 300, "seq_len": 64})";
  std::string err;
  EXPECT_EQ(orion::test::run_orion("train --config " + config +
                                       " --data builtin:300 --vocab 300 --batch 2 --seq 32 --steps 2 "
                                       "--sample 0 --threads 1 --no-progress --out " +
                                       dir + "/base",
                                   nullptr, &err),
            0)
      << err;
  return dir + "/base/model.bin";
}

// The flags of every run here: a constant learning rate, so a run's steps do not depend on its total.
std::string lora_flags(const std::string& base) {
  return "lora train --model " + base +
         " --data builtin:300 --rank 4 --alpha 8 --targets q,v,w2 --seq 32 --lr 3e-2 "
         "--schedule constant --warmup 0 --eval-every 0 --checkpoint-every 0 --threads 1";
}

}  // namespace

TEST(LoraTrainInterrupt, Sigusr1WritesACheckpointAndResumeIsBitIdentical) {
  const std::string dir = orion::test::temp_dir(), run = dir + "/run";
  const std::string base = base_model(dir);
  const std::string log = dir + "/stderr";
  const std::string args = lora_flags(base) + " --batch 2 --out " + run + " --steps 1000000";
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // the child: far more steps than the test will wait for
    setenv("OMP_NUM_THREADS", "1", 1);
    setenv("OMP_WAIT_POLICY", "passive", 1);
    if (!freopen(log.c_str(), "w", stderr) || !freopen("/dev/null", "w", stdout)) _exit(97);
    execl("/bin/sh", "sh", "-c", (std::string("exec ") + ORION_BINARY + " " + args).c_str(), (char*)nullptr);
    _exit(98);
  }
  const std::string metrics = run + "/metrics.jsonl";  // the default metrics log, one line per step
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (count_lines(metrics) < 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_GE(count_lines(metrics), 3) << "training did not start: " << slurp(log);
  ASSERT_EQ(kill(pid, SIGUSR1), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "orion lora train died of the signal instead of checkpointing: " << slurp(log);
  EXPECT_EQ(WEXITSTATUS(status), 0) << slurp(log);
  EXPECT_NE(slurp(log).find("lora: interrupted; writing a checkpoint"), std::string::npos) << slurp(log);
  const int stopped = count_lines(metrics);
  EXPECT_TRUE(fs::exists(run + "/checkpoints/lora_" + fmt::format("{:08d}", stopped) + ".olora"))
      << "the checkpoint of step " << stopped;
  EXPECT_FALSE(fs::exists(run + "/adapter.olora")) << "no adapter before the run is complete";

  // --resume continues to a total two steps further; a straight run to the same total agrees bit for bit.
  const int total = stopped + 2;
  std::string err;
  ASSERT_EQ(orion::test::run_orion(lora_flags(base) + " --batch 2 --out " + run + " --steps " + std::to_string(total) +
                                       " --resume",
                                   nullptr, &err),
            0)
      << err;
  EXPECT_NE(err.find("resuming from"), std::string::npos) << err;
  ASSERT_EQ(orion::test::run_orion(lora_flags(base) + " --batch 2 --out " + dir + "/straight --steps " +
                                       std::to_string(total),
                                   nullptr, &err),
            0)
      << err;
  const auto resumed = orion::test::run_losses(run), straight = orion::test::run_losses(dir + "/straight");
  ASSERT_EQ(resumed.size(), size_t(total)) << "the resumed run logs the new steps once";
  EXPECT_EQ(resumed, straight);
  EXPECT_EQ(slurp(run + "/adapter.olora"), slurp(dir + "/straight/adapter.olora"));
}

TEST(LoraTrainInterrupt, AccumMatchesTwiceTheBatchAndCsvMetrics) {
  const std::string dir = orion::test::temp_dir();
  const std::string base = base_model(dir);
  std::string err;
  ASSERT_EQ(orion::test::run_orion(lora_flags(base) + " --batch 2 --accum 2 --steps 4 --out " + dir + "/accum --metrics " +
                                       dir + "/accum.csv",
                                   nullptr, &err),
            0)
      << err;
  ASSERT_EQ(orion::test::run_orion(lora_flags(base) + " --batch 4 --steps 4 --out " + dir + "/twice --metrics " + dir +
                                       "/twice.csv",
                                   nullptr, &err),
            0)
      << err;
  const std::string csv = slurp(dir + "/accum.csv");
  EXPECT_EQ(csv.rfind("step,loss,lr,grad_norm,ms,skipped,val_loss\n", 0), 0u) << csv;
  ASSERT_EQ(count_lines(dir + "/accum.csv"), 1 + 4) << csv;
  EXPECT_FALSE(fs::exists(dir + "/accum/metrics.jsonl")) << "--metrics replaces the default log";
  auto losses = [&](const std::string& path) {
    std::vector<double> out;
    std::stringstream in(slurp(path));
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) out.push_back(std::stod(line.substr(line.find(',') + 1)));
    return out;
  };
  const auto a = losses(dir + "/accum.csv"), b = losses(dir + "/twice.csv");
  ASSERT_EQ(a.size(), b.size());
  for (size_t s = 0; s < a.size(); ++s) EXPECT_NEAR(a[s], b[s], 1e-5 * b[s]) << "step " << s + 1;
}

// --resume needs only the base and the run folder: the checkpoint carries the run's data and
// numeric options (as orion train's does), so the continuation equals the straight run bit for bit;
// a flag that would change them is reported as ignored.
TEST(LoraTrainInterrupt, ResumeTakesTheRunsOptionsFromTheCheckpoint) {
  const std::string dir = orion::test::temp_dir(), run = dir + "/run";
  const std::string base = base_model(dir);
  std::string err;
  ASSERT_EQ(orion::test::run_orion(lora_flags(base) + " --batch 2 --steps 6 --stop-after 3 --out " + run, nullptr, &err), 0)
      << err;
  ASSERT_TRUE(fs::exists(run + "/checkpoints/lora_00000003.olora")) << err;
  ASSERT_FALSE(fs::exists(run + "/adapter.olora"));
  ASSERT_EQ(orion::test::run_orion("lora train --model " + base + " --out " + run + " --resume --lr 5 --threads 1", nullptr,
                                   &err),
            0)
      << err;
  EXPECT_NE(err.find("--lr is ignored with --resume"), std::string::npos) << err;
  ASSERT_EQ(orion::test::run_orion(lora_flags(base) + " --batch 2 --steps 6 --out " + dir + "/straight", nullptr, &err), 0)
      << err;
  const auto resumed = orion::test::run_losses(run), straight = orion::test::run_losses(dir + "/straight");
  ASSERT_EQ(resumed.size(), 6u);
  EXPECT_EQ(resumed, straight);
  EXPECT_EQ(slurp(run + "/adapter.olora"), slurp(dir + "/straight/adapter.olora"));
}

TEST(LoraTrainInterrupt, DataIsRequiredForANewRun) {
  const std::string dir = orion::test::temp_dir();
  const std::string base = base_model(dir);
  std::string err;
  EXPECT_NE(orion::test::run_orion("lora train --model " + base + " --out " + dir + "/run --steps 2", nullptr, &err), 0);
  EXPECT_NE(err.find("--data is required"), std::string::npos) << err;
}
