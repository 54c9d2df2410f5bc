// orion train as a user drives it: Ctrl-C (SIGINT) in the middle of a run finishes the step,
// writes a checkpoint and exits cleanly, and --resume continues from it; --ckpt-dir puts the
// checkpoints where asked (a bare --resume finds them); --metrics FILE.csv writes one CSV row per
// step. The interrupted run is a real subprocess of the built orion binary.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "support.h"

namespace fs = std::filesystem;

namespace {

std::string tiny_config(const std::string& dir) {
  const std::string path = dir + "/tiny.json";
  std::ofstream(path) << R"({"arch": "llama", "dim": 32, "hidden_dim": 64, "n_layers": 2, "n_heads": 4,
                            "n_kv_heads": 2, "vocab_size": 300, "seq_len": 64})";
  return path;
}

using orion::test::count_lines;
std::string slurp(const std::string& path) { return orion::test::read_text(path); }

}  // namespace

TEST(TrainInterrupt, SigintWritesACheckpointAndResumeContinues) {
  const std::string dir = orion::test::temp_dir(), run = dir + "/run";
  const std::string config = tiny_config(dir);
  const std::string log = dir + "/stderr";
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // the child: orion train for far more steps than the test will wait for
    setenv("OMP_NUM_THREADS", "1", 1);
    setenv("OMP_WAIT_POLICY", "passive", 1);
    if (!freopen(log.c_str(), "w", stderr) || !freopen("/dev/null", "w", stdout)) _exit(97);
    execl(ORION_BINARY, ORION_BINARY, "train", "--config", config.c_str(), "--data", "builtin:300", "--vocab", "300",
          "--steps", "1000000", "--batch", "2", "--seq", "32", "--eval-every", "0", "--checkpoint-every", "0", "--sample",
          "0", "--out", run.c_str(), (char*)nullptr);
    _exit(98);
  }
  // Wait until steps are being logged (the SIGINT handler is in place during the loop).
  const std::string metrics = run + "/metrics.jsonl";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (count_lines(metrics) < 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_GE(count_lines(metrics), 3) << "training did not start: " << slurp(log);
  ASSERT_EQ(kill(pid, SIGINT), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "orion train died of a signal instead of checkpointing: " << slurp(log);
  EXPECT_EQ(WEXITSTATUS(status), 0) << slurp(log);
  EXPECT_NE(slurp(log).find("interrupted; writing a checkpoint"), std::string::npos) << slurp(log);

  // One checkpoint, at the step the run stopped after.
  std::vector<fs::path> ckpts;
  for (const auto& e : fs::directory_iterator(run + "/checkpoints"))
    if (e.path().extension() == ".ckpt") ckpts.push_back(e.path());
  ASSERT_EQ(ckpts.size(), 1u);
  const int stopped = count_lines(metrics);
  EXPECT_NE(ckpts[0].filename().string().find(std::to_string(stopped)), std::string::npos)
      << ckpts[0] << " should be the checkpoint of step " << stopped;

  // --resume continues from it to a new total two steps further.
  std::string err;
  ASSERT_EQ(orion::test::run_orion("train --resume " + run + " --steps " + std::to_string(stopped + 2) +
                                       " --threads 1 --sample 0",
                                   nullptr, &err),
            0)
      << err;
  EXPECT_NE(err.find("resuming from"), std::string::npos) << err;
  EXPECT_EQ(count_lines(metrics), stopped + 2) << "the resumed run logs the two new steps";
}

TEST(TrainInterrupt, CkptDirAndCsvMetrics) {
  const std::string dir = orion::test::temp_dir();
  const std::string base = "train --config " + tiny_config(dir) + " --data builtin:300 --vocab 300 --batch 2 --seq 32 " +
                           "--threads 1 --sample 0 --eval-every 2 --checkpoint-every 2 --out " + dir + "/run --ckpt-dir " +
                           dir + "/ck --metrics " + dir + "/m.csv";
  std::string err;
  ASSERT_EQ(orion::test::run_orion(base + " --steps 4", nullptr, &err), 0) << err;
  EXPECT_TRUE(fs::exists(dir + "/ck/ckpt_00000004.ckpt")) << err;
  EXPECT_FALSE(fs::exists(dir + "/run/checkpoints")) << "checkpoints go to --ckpt-dir only";
  std::string csv = slurp(dir + "/m.csv");
  EXPECT_EQ(csv.rfind("step,loss,lr,grad_norm,ms,skipped,val_loss\n", 0), 0u) << csv;
  EXPECT_EQ(count_lines(dir + "/m.csv"), 1 + 4) << csv;
  // A bare --resume takes the newest checkpoint in --ckpt-dir; the CSV gains the new rows only.
  ASSERT_EQ(orion::test::run_orion(base + " --resume --steps 6", nullptr, &err), 0) << err;
  EXPECT_NE(err.find("ckpt_00000004.ckpt"), std::string::npos) << err;
  EXPECT_TRUE(fs::exists(dir + "/ck/ckpt_00000006.ckpt"));
  csv = slurp(dir + "/m.csv");
  EXPECT_EQ(count_lines(dir + "/m.csv"), 1 + 6) << csv;
  EXPECT_NE(csv.find("\n6,"), std::string::npos) << csv;
}
