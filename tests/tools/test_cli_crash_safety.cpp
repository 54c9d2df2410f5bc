// Crash safety: `orion train`, `orion data prepare` and `orion convert` are killed with SIGKILL at
// random moments, many times, and after every kill what is on disk must be whole:
//   * train: every ckpt_*.ckpt in the run folder reads and validates (magic, sizes, checksum); the
//     newest never goes backwards; the next process resumes from it (or starts afresh when none was
//     written yet); and when the run finally completes, its loss at every step and its exported
//     model equal, bit for bit, those of a run that was never interrupted.
//   * data prepare / convert: every output file present under its final name is byte-identical to
//     the output of an uninterrupted run (a half-written file only ever exists as *.tmp.<pid>).
// ORION_TEST_WRITE_DELAY_MS (base/file.cpp) holds every crash-safe write open between chunks, so
// that many kills land in the middle of a checkpoint, shard or model write; the tests count those
// (a *.tmp.<pid> file left behind) and print the figures. ctest runs a handful of kills per command;
// scripts/kill_test.sh sets ORION_KILL_TEST_KILLS for a long campaign (docs/reliability.md).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "data/token_files.h"
#include "support.h"
#include "train/loop/checkpoint.h"

namespace fs = std::filesystem;
using orion::test::run_orion;
using orion::test::temp_dir;

namespace {

int kills_wanted(int fallback) {
  const char* v = std::getenv("ORION_KILL_TEST_KILLS");
  return v ? std::max(1, std::atoi(v)) : fallback;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

// Starts `orion args` (shell words) with the write delay; stdout/stderr go to log.
pid_t spawn_orion(const std::string& args, int write_delay_ms, const std::string& log) {
  const std::string cmd = "exec " + std::string(ORION_BINARY) + " " + args + " >>" + log + " 2>&1 </dev/null";
  pid_t pid = fork();
  if (pid == 0) {
    setenv("ORION_TEST_WRITE_DELAY_MS", std::to_string(write_delay_ms).c_str(), 1);
    setenv("OMP_WAIT_POLICY", "passive", 1);
    execl("/bin/sh", "sh", "-c", cmd.c_str(), (char*)nullptr);
    _exit(127);
  }
  return pid;
}

// Waits up to ms for pid; kills it with SIGKILL if it is still running. Returns true when it was
// killed, false when it had exited by itself (its exit code in *code).
bool kill_after(pid_t pid, double ms, int* code) {
  const double end = now_ms() + ms;
  int status = 0;
  while (now_ms() < end) {
    if (waitpid(pid, &status, WNOHANG) == pid) {
      *code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  if (WIFEXITED(status)) {  // it finished in the last instant
    *code = WEXITSTATUS(status);
    return false;
  }
  return true;
}

int wait_exit(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Files of a folder tree whose names mark an interrupted crash-safe write.
int count_tmp_files(const std::string& dir) {
  int n = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); it != fs::recursive_directory_iterator(); it.increment(ec))
    if (it->path().filename().string().find(".tmp.") != std::string::npos) ++n;
  return n;
}

// step → loss of a run folder's metrics.jsonl.
std::map<int, double> losses(const std::string& run) {
  std::ifstream in(run + "/metrics.jsonl");
  std::map<int, double> out;
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    EXPECT_TRUE(j.is_object()) << "a damaged line in metrics.jsonl: " << line;
    if (j.is_object()) out[j["step"].get<int>()] = j["loss"].is_null() ? NAN : j["loss"].get<double>();
  }
  return out;
}

const char* kTinyConfig =
    R"({"arch": "llama", "dim": 32, "hidden_dim": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "vocab_size": 300, "seq_len": 64})";

}  // namespace

TEST(CliCrashSafety, TrainKilledAtRandomMomentsResumesFromAWholeCheckpoint) {
  const int kills = kills_wanted(6), delay = 10, steps = kills >= 30 ? 24 : 8;
  const std::string work = temp_dir(), straight = work + "/straight", log = work + "/log";
  std::ofstream(work + "/tiny.json") << kTinyConfig;
  std::string err;
  ASSERT_EQ(run_orion("data prepare --tokenizer " + orion::test::data_path("tokenizer/spm_stories/tokenizer.bin") +
                          " --in builtin:300 --threads 1 --no-progress --out " + work + "/data",
                      nullptr, &err),
            0)
      << err;
  const std::string flags = "--config " + work + "/tiny.json --data " + work +
                            "/data --batch 4 --seq 32 --lr 1e-2 "
                            "--eval-every 4 --no-progress --threads 1 --checkpoint-every 1 --keep 3 --steps " +
                            std::to_string(steps);
  // The uninterrupted reference, timed with the same write delay: kill times are drawn over it.
  const double t0 = now_ms();
  ASSERT_EQ(wait_exit(spawn_orion("train " + flags + " --out " + straight, delay, log)), 0) << slurp(log);
  const double full_ms = now_ms() - t0;
  const auto reference = losses(straight);
  ASSERT_EQ(reference.size(), size_t(steps));

  // Episodes: a fresh run folder, killed again and again (each restart resumes from its newest
  // checkpoint) until a process completes it; then it must equal the reference. Episodes follow
  // each other until the wanted number of kills is reached.
  std::mt19937_64 rng(1234);
  std::uniform_real_distribution<double> when(0.0, 0.6 * full_ms);
  int killed = 0, mid_write = 0, fresh_starts = 0, resumes = 0, checked = 0, episodes = 0, attempts = 0;
  while (killed < kills) {
    const std::string run = work + "/run" + std::to_string(episodes++);
    int64_t newest = 0;
    for (;;) {
      ASSERT_LT(++attempts, 6 * kills + 30) << "the runs make no progress between kills";
      const auto ckpts = fs::exists(run + "/checkpoints") ? orion::train::list_checkpoints(run + "/checkpoints")
                                                          : std::vector<std::string>{};
      const std::string args =
          ckpts.empty() ? "train " + flags + " --out " + run : "train --resume " + run + " --no-progress --threads 1";
      (ckpts.empty() ? fresh_starts : resumes)++;
      const int tmp_before = count_tmp_files(run);
      pid_t pid = spawn_orion(args, delay, log);
      int code = -1;
      if (killed >= kills || !kill_after(pid, when(rng), &code)) {
        if (code < 0) code = wait_exit(pid);
        ASSERT_EQ(code, 0) << slurp(log);
        break;  // the run completed
      }
      ++killed;
      if (count_tmp_files(run) > tmp_before) ++mid_write;
      // Every file under a checkpoint name is whole, and the newest never goes backwards.
      int64_t step = 0;
      if (fs::exists(run + "/checkpoints"))
        for (const std::string& path : orion::train::list_checkpoints(run + "/checkpoints")) {
          try {
            orion::train::Checkpoint ck = orion::train::read_checkpoint(path);
            step = std::max(step, ck.state.step);
            ++checked;
          } catch (const orion::Error& e) {
            FAIL() << "kill " << killed << " left a damaged checkpoint: " << e.what();
          }
        }
      EXPECT_GE(step, newest) << "kill " << killed << ": the newest checkpoint went backwards";
      newest = std::max(newest, step);
    }
    auto b = losses(run);
    ASSERT_EQ(b.size(), size_t(steps)) << run << ": the killed run's metrics miss steps";
    for (int s = 1; s <= steps; ++s)
      EXPECT_EQ(reference.at(s), b[s]) << run << ": the loss curve differs from the uninterrupted run at step " << s;
    EXPECT_EQ(slurp(straight + "/model.bin"), slurp(run + "/model.bin")) << run << ": the exported models differ";
  }
  EXPECT_GT(mid_write, 0) << "no kill landed inside a crash-safe write; the test proves less than it should";
  std::printf(
      "train kill test: %d kills (%d during a crash-safe write) over %d runs, %d checkpoint files checked, "
      "0 damaged; %d fresh starts, %d resumes; every run's %d losses and model equal the uninterrupted run's "
      "(which took %.0f ms)\n",
      killed, mid_write, episodes, checked, fresh_starts, resumes, steps, full_ms);
}

namespace {
// Kills `orion args` at random moments until it completes; after every kill each file of
// `outputs` must be absent or equal to the reference run's. Returns {kills, kills mid-write}.
std::pair<int, int> kill_until_done(const std::string& args_for, const std::string& reference, const std::string& out,
                                    const std::vector<std::string>& outputs, int kills) {
  const int delay = 10;
  const std::string log = out + ".log";
  const double t0 = now_ms();
  EXPECT_EQ(wait_exit(spawn_orion(args_for + " --out " + reference, delay, log)), 0) << slurp(log);
  double full_ms = now_ms() - t0;
  std::mt19937_64 rng(99);
  int killed = 0, mid_write = 0;
  const std::string folder = fs::path(out).parent_path().string();
  for (int attempt = 0; killed < kills && attempt < 4 * kills + 10; ++attempt) {
    const int tmp_before = count_tmp_files(folder);
    const double start = now_ms();
    pid_t pid = spawn_orion(args_for + " --out " + out, delay, log);
    int code = -1;
    const bool was_killed = kill_after(pid, std::uniform_real_distribution<double>(0.0, full_ms)(rng), &code);
    if (was_killed) {
      ++killed;
      if (count_tmp_files(folder) > tmp_before) ++mid_write;
    } else {
      EXPECT_EQ(code, 0) << slurp(log);
      // A run that finished first sets the window for the next kills: when the reference ran on a
      // busy machine (ctest -j2), the later runs can be several times faster, and kills drawn over
      // its time would mostly come after they ended (too few kills in the attempts allowed).
      full_ms = std::min(full_ms, now_ms() - start);
    }
    for (const std::string& f : outputs) {
      if (!was_killed) EXPECT_TRUE(fs::exists(out + "/" + f)) << "a completed run did not write " << f;
      if (fs::exists(out + "/" + f))
        EXPECT_EQ(slurp(out + "/" + f), slurp(reference + "/" + f))
            << "attempt " << attempt << ": " << f << " is present but not whole";
    }
    if (!was_killed) fs::remove_all(out);  // completed: start the next attempt from nothing
  }
  for (const std::string& f : outputs) EXPECT_TRUE(fs::exists(reference + "/" + f)) << f;
  return {killed, mid_write};
}
}  // namespace

TEST(CliCrashSafety, DataPrepareAndConvertKilledLeaveOnlyWholeFiles) {
  const int kills = kills_wanted(4) / 2 + 1;
  const std::string work = temp_dir(), tok = orion::test::data_path("tokenizer/spm_stories/tokenizer.bin");
  // data prepare: shards, validation file and meta.json (written last).
  auto [k1, w1] =
      kill_until_done("data prepare --tokenizer " + tok + " --in builtin:200 --threads 1 --no-progress --shard-tokens 8000",
                      work + "/ref_data", work + "/data", {"meta.json", "train_000.bin", "train_001.bin", "val_000.bin"},
                      kills);
  // convert (model export): a llama2.c model to safetensors and back.
  std::string err;
  std::ofstream(work + "/tiny.json") << kTinyConfig;
  ASSERT_EQ(run_orion("train --config " + work +
                          "/tiny.json --data builtin:100 --vocab 300 --batch 2 --seq 16 --steps 1 "
                          "--no-progress --out " +
                          work + "/t --export-format llama2c",
                      nullptr, &err),
            0)
      << err;
  ASSERT_TRUE(fs::exists(work + "/t/model.bin")) << "no exported model";
  auto [k2, w2] = kill_until_done("convert --in " + work + "/t/model.bin --to safetensors --dtype f16", work + "/ref_st",
                                  work + "/st", {"model.safetensors", "config.json"}, kills);
  std::printf(
      "data prepare: %d kills (%d during a write); convert: %d kills (%d during a write); every file present was whole\n",
      k1, w1, k2, w2);
  EXPECT_EQ(k1, kills);
  EXPECT_EQ(k2, kills);
}
