// Data-parallel training over MPI (train/dist/), run with `mpirun --oversubscribe -np 2`:
//   mpi_comm.*   the collectives and the per-rank gradient weighting, in this test program
//                relaunched under mpirun (ORION_MPI_CHILD=1 selects the rank's half of the test);
//   mpi_train.*  `orion train` under mpirun against one process: 2 ranks × batch B give the losses
//                and weights of 1 rank × batch 2B; a resumed 2-rank run continues bit for bit; a
//                rank killed mid-run ends the run and leaves a resumable checkpoint; ranks started
//                with different options stop with a clear message.
// Every test is skipped, with the reason, when Orion was built without MPI or mpirun is missing.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "data/token_dataset.h"
#include "model/io/model_io.h"
#include "model/lora/lora_io.h"
#include "support.h"
#include "train/loop/checkpoint.h"
#include "train/dist/communicator.h"
#include "train/dist/data_parallel.h"
#include "train/model/params.h"
#include "train/model/trainer_api.h"

using namespace orion;
using namespace orion::train;
namespace fs = std::filesystem;

namespace {

bool in_child() { return std::getenv("ORION_MPI_CHILD") != nullptr; }

// "" when the tests can run, else why not.
std::string why_no_mpi() {
  if (!dist::built_with_mpi())
    return "this Orion was built without MPI (install openmpi-bin libopenmpi-dev: scripts/setup.sh)";
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0) return "mpirun is not on PATH";
#ifdef ORION_SANITIZED
  return "sanitizer build: Open MPI is uninstrumented and keeps allocations past MPI_Finalize (LeakSanitizer); the Release suite runs these";
#endif
  return "";
}

#define SKIP_WITHOUT_MPI()                                                 \
  do {                                                                     \
    if (std::string why = why_no_mpi(); !why.empty()) GTEST_SKIP() << why; \
  } while (0)

// mpirun with what CI needs: more ranks than cores, root, shared memory without ptrace
// (containers), a time limit so a hung collective fails the test instead of the CI job.
std::string mpirun(int np) {
  std::string cmd = fmt::format(
      "mpirun --oversubscribe -np {} --timeout 120 --mca btl self,vader "
      "--mca btl_vader_single_copy_mechanism none -x OMP_WAIT_POLICY=passive",
      np);
  if (geteuid() == 0) cmd += " --allow-run-as-root";
  return cmd;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs a shell command; its stdout+stderr in *log; returns the exit code.
int shell(const std::string& cmd, std::string* log) {
  const std::string out = test::temp_dir() + "/log";
  const int rc = std::system((cmd + " >" + out + " 2>&1 </dev/null").c_str());
  if (log) *log = slurp(out);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
}

// This test's own body on 2 ranks: the program relaunched under mpirun, filtered to this test.
void run_self_on_two_ranks() {
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string log;
  const int rc = shell(fmt::format("{} -x ORION_MPI_CHILD=1 {} --gtest_color=no --gtest_filter={}.{}", mpirun(2), self,
                                   info->test_suite_name(), info->name()),
                       &log);
  EXPECT_EQ(rc, 0) << log;
  size_t passed = 0;
  for (size_t at = log.find("[  PASSED  ] 1 test"); at != std::string::npos; at = log.find("[  PASSED  ] 1 test", at + 1))
    ++passed;
  EXPECT_EQ(passed, 2u) << "both ranks ran the test and passed it:\n" << log;
}

std::string tiny_config(const std::string& dir) {
  const std::string path = dir + "/tiny.json";
  std::ofstream(path) << R"({"arch": "llama", "dim": 32, "hidden_dim": 64, "n_layers": 2, "n_heads": 4,
                            "n_kv_heads": 2, "vocab_size": 300, "seq_len": 64})";
  return path;
}

// Per step: the loss and the validation loss (−1 when none) from a run's metrics.jsonl, and the
// line without its timing (what must repeat bit for bit).
struct StepLine {
  double loss = 0, val = -1;
  std::string numbers;
};
std::vector<StepLine> read_metrics(const std::string& run) {
  std::vector<StepLine> steps;
  std::stringstream in(slurp(run + "/metrics.jsonl"));
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    const double loss = j.at("loss").get<double>(), val = j.value("val_loss", -1.0);
    j.erase("ms");
    steps.push_back({loss, val, j.dump()});
  }
  return steps;
}

double rel(double a, double b) { return std::fabs(a - b) / std::max(1e-12, std::fabs(b)); }

}  // namespace

// ---- the data: the global batch does not depend on the number of ranks (no MPI needed) ----

TEST(DataParallel, RanksTakeTheRowsOfTheGlobalBatchOfOneRank) {
  const std::string path = test::temp_dir() + "/tokens.bin";  // llama2.c layout: raw uint16 ids
  std::vector<uint16_t> ids(5000);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = uint16_t((i * 7919) % 1000);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(ids.data()), std::streamsize(ids.size() * 2));
  for (bool shuffle : {true, false}) {
    const int B = 2, T = 16, world = 3;
    data::DatasetOptions one{.B = world * B, .T = T, .shuffle = shuffle, .seed = 5};
    const data::TokenDataset whole = data::TokenDataset::open(path, "train", one);
    for (int r = 0; r < world; ++r) {
      data::DatasetOptions o{.B = B, .T = T, .shuffle = shuffle, .seed = 5, .rank = r, .world = world};
      const data::TokenDataset part = data::TokenDataset::open(path, "train", o);
      ASSERT_EQ(part.batches_per_epoch(), whole.batches_per_epoch());
      for (uint64_t j :
           {uint64_t(0), uint64_t(1), whole.batches_per_epoch() - 1, whole.batches_per_epoch() + 2}) {  // two epochs
        const data::Batch g = whole.batch(j), p = part.batch(j);
        const std::vector<int> rows(g.tokens.begin() + r * B * (T + 1), g.tokens.begin() + (r + 1) * B * (T + 1));
        EXPECT_EQ(p.tokens, rows) << (shuffle ? "shuffled" : "sequential") << ", rank " << r << ", batch " << j;
      }
    }
  }
}

// ---- the communicator ----

TEST(mpi_comm, collectives_agree_on_every_rank) {
  SKIP_WITHOUT_MPI();
  if (!in_child()) return run_self_on_two_ranks();
  auto comm = dist::make_communicator();
  ASSERT_EQ(comm->world(), 2);
  const int r = comm->rank();
  // Sum and mean of 2.5 M floats: more than two buckets.
  std::vector<float> x(dist::kBucketFloats * 2 + 12345);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 1000) * (r == 0 ? 1.0f : 3.0f);
  dist::allreduce_mean(*comm, x.data(), x.size());
  for (size_t i = 0; i < x.size(); i += 997) ASSERT_EQ(x[i], float(i % 1000) * 2.0f) << i;
  EXPECT_EQ(comm->stats.calls, 3u);
  EXPECT_EQ(comm->stats.bytes_reduced, x.size() * sizeof(float));
  double d[2] = {0.25 + r, -1.0};
  comm->allreduce_sum(d, 2);
  EXPECT_EQ(d[0], 1.5);
  EXPECT_EQ(d[1], -2.0);
  EXPECT_EQ(comm->allgather(uint64_t(100 + r)), (std::vector<uint64_t>{100, 101}));
  std::vector<uint8_t> bytes;
  if (r == 0) bytes = {1, 2, 3, 4, 5};
  comm->broadcast(bytes, 0);
  EXPECT_EQ(bytes, (std::vector<uint8_t>{1, 2, 3, 4, 5}));
  comm->barrier();
}

// −1 targets: the ranks' rows count different numbers of targets. The weights of
// data_parallel.h make the all-reduced gradient the gradient of the whole batch; the plain mean of
// the two ranks' mean gradients does not.
TEST(mpi_comm, weighted_gradients_equal_the_whole_batch_with_ignored_targets) {
  SKIP_WITHOUT_MPI();
  if (!in_child()) return run_self_on_two_ranks();
  auto comm = dist::make_communicator();
  ASSERT_EQ(comm->world(), 2);
  const int r = comm->rank();
  ModelConfig c = config_preset("stories260k");
  c.vocab_size = c.padded_vocab = 64, c.n_layers = 2, c.dim = 32, c.hidden_dim = 64, c.n_heads = 4, c.n_kv_heads = 4;
  Params params(c);
  init_params(params, 7);
  const int B = 2, T = 16;  // per rank; the whole batch is 2B rows
  std::vector<int> tokens(size_t(2 * B * T)), targets(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int((i * 37 + 11) % 64), targets[i] = int((i * 53 + 5) % 64);
  // Rank 0's rows keep 3 targets each, rank 1's all of theirs.
  for (int b = 0; b < B; ++b)
    for (int t = 3; t < T; ++t) targets[size_t(b * T + t)] = -1;

  Grads whole(c);  // the reference: the whole batch on this rank alone
  TrainModel full(params, &whole, 2 * B, T);
  full.zero_grad();
  full.forward(tokens.data(), targets.data());
  full.backward();

  Grads mine(c);
  TrainModel part(params, &mine, B, T);
  const std::vector<int> my_tokens(tokens.begin() + r * B * T, tokens.begin() + (r + 1) * B * T);
  const std::vector<int> my_targets(targets.begin() + r * B * T, targets.begin() + (r + 1) * B * T);
  const std::vector<double> w = dist::micro_batch_weights(*comm, {dist::counted_targets(my_targets)});
  EXPECT_NEAR(w[0], r == 0 ? 2.0 * 6 / (6 + 32) : 2.0 * 32 / (6 + 32), 1e-12);
  part.zero_grad();
  part.forward(my_tokens.data(), my_targets.data());
  std::vector<float> unweighted;
  part.backward(float(w[0]));
  dist::allreduce_mean(*comm, mine.data(), mine.size());
  {  // the plain mean of means, for contrast
    Grads plain(c);
    TrainModel again(params, &plain, B, T);
    again.zero_grad();
    again.forward(my_tokens.data(), my_targets.data());
    again.backward();
    dist::allreduce_mean(*comm, plain.data(), plain.size());
    unweighted.assign(plain.data(), plain.data() + plain.size());
  }
  double err = 0, err_plain = 0, norm = 0;
  for (size_t i = 0; i < mine.size(); ++i) {
    err = std::max(err, double(std::fabs(mine.data()[i] - whole.data()[i])));
    err_plain = std::max(err_plain, double(std::fabs(unweighted[i] - whole.data()[i])));
    norm = std::max(norm, double(std::fabs(whole.data()[i])));
  }
  if (r == 0)
    std::printf("  max |grad error| weighted %.3g, plain mean of means %.3g (max |grad| %.3g)\n", err, err_plain, norm);
  EXPECT_LT(err, 1e-5 * norm);
  EXPECT_GT(err_plain, 1e-2 * norm) << "the counts differ enough that the plain mean is wrong";
}

// ---- orion train under mpirun ----

namespace {
std::string train_args(const std::string& dir, const std::string& out, int batch, int steps) {
  return fmt::format(
      "train --config {} --data builtin:300 --vocab 300 --batch {} --seq 32 --accum 2 --steps {} --lr 1e-2 "
      "--eval-every 3 --eval-batches 2 --checkpoint-every 3 --keep 0 --sample 0 --threads 1 --no-progress --out {}",
      tiny_config(dir), batch, steps, out);
}
}  // namespace

TEST(mpi_train, two_ranks_match_one_rank_with_twice_the_batch) {
  SKIP_WITHOUT_MPI();
  const std::string dir = test::temp_dir();
  std::string log;
  ASSERT_EQ(shell(fmt::format("{} {}", ORION_BINARY, train_args(dir, dir + "/one", 4, 9)), &log), 0) << log;
  ASSERT_EQ(shell(fmt::format("{} {} {}", mpirun(2), ORION_BINARY, train_args(dir, dir + "/two", 2, 9)), &log), 0) << log;
  const auto one = read_metrics(dir + "/one"), two = read_metrics(dir + "/two");
  ASSERT_EQ(one.size(), 9u);
  ASSERT_EQ(two.size(), 9u) << "rank 0 alone writes metrics.jsonl";
  double worst = 0;
  for (size_t s = 0; s < one.size(); ++s) {
    EXPECT_LE(rel(two[s].loss, one[s].loss), 1e-5) << "step " << s + 1 << ": " << two[s].loss << " vs " << one[s].loss;
    EXPECT_EQ(two[s].val >= 0, one[s].val >= 0);
    if (one[s].val >= 0) EXPECT_LE(rel(two[s].val, one[s].val), 1e-5) << "validation after step " << s + 1;
    worst = std::max(worst, rel(two[s].loss, one[s].loss));
  }
  EXPECT_GT(one.front().loss - one.back().loss, 0.3) << "the runs learn something, so equal losses mean something";
  // The exported models (fp32 llama2.c files): the same weights.
  const ModelWeights a = load_model(dir + "/one/model.bin"), b = load_model(dir + "/two/model.bin");
  const Params pa = Params::from_weights(a), pb = Params::from_weights(b);
  ASSERT_EQ(pa.size(), pb.size());
  double max_diff = 0, max_w = 0;
  for (size_t i = 0; i < pa.size(); ++i)
    max_diff = std::max(max_diff, double(std::fabs(pa.data()[i] - pb.data()[i]))),
    max_w = std::max(max_w, double(std::fabs(pa.data()[i])));
  std::printf("  9 steps: worst relative loss difference %.2g, max |Δweight| %.2g (max |weight| %.2g)\n", worst, max_diff,
              max_w);
  EXPECT_LE(max_diff, 1e-5 * max_w);
  EXPECT_FALSE(fs::exists(dir + "/two/checkpoints/ckpt_00000009.ckpt.tmp")) << "no leftovers";
  EXPECT_EQ(list_checkpoints(dir + "/two/checkpoints").size(), 3u) << "rank 0 alone writes checkpoints (3, 6, 9)";
}

TEST(mpi_train, resumed_two_rank_run_continues_bit_for_bit) {
  SKIP_WITHOUT_MPI();
  const std::string dir = test::temp_dir();
  std::string log;
  ASSERT_EQ(shell(fmt::format("{} {} {}", mpirun(2), ORION_BINARY, train_args(dir, dir + "/straight", 2, 9)), &log), 0)
      << log;
  ASSERT_EQ(shell(fmt::format("{} {} {} --stop-after 4", mpirun(2), ORION_BINARY, train_args(dir, dir + "/resumed", 2, 9)),
                  &log),
            0)
      << log;
  EXPECT_FALSE(fs::exists(dir + "/resumed/model.bin")) << "stopped before the end";
  ASSERT_EQ(shell(fmt::format("{} {} train --resume {}/resumed --eval-every 3 --eval-batches 2 --threads 1 --no-progress",
                              mpirun(2), ORION_BINARY, dir),
                  &log),
            0)
      << log;
  const auto straight = read_metrics(dir + "/straight"), resumed = read_metrics(dir + "/resumed");
  ASSERT_EQ(resumed.size(), straight.size());
  for (size_t s = 0; s < straight.size(); ++s) EXPECT_EQ(resumed[s].numbers, straight[s].numbers) << "step " << s + 1;
  EXPECT_EQ(slurp(dir + "/resumed/model.bin"), slurp(dir + "/straight/model.bin"));
}

// ---- orion lora train under mpirun: only the adapter's gradients are all-reduced ----

namespace {
// A tiny base model (orion train, a few steps) with its tokenizer beside it.
std::string lora_base(const std::string& dir) {
  std::string log;
  EXPECT_EQ(shell(fmt::format("{} {}", ORION_BINARY, train_args(dir, dir + "/base", 4, 6)), &log), 0) << log;
  return dir + "/base/model.bin";
}
std::string lora_args(const std::string& base, const std::string& out, int batch, int steps) {
  return fmt::format(
      "lora train --model {} --data builtin:300 --rank 4 --alpha 8 --targets q,v,w2 --batch {} --seq 32 --steps {} "
      "--lr 3e-2 --schedule constant --eval-every 3 --checkpoint-every 3 --log-every 1 --threads 1 --out {}",
      base, batch, steps, out);
}
// Per step, the loss of the progress lines "lora: step k/N | loss X[ | val V] | ..." (rank 0's).
std::vector<StepLine> lora_losses(const std::string& log) {
  std::vector<StepLine> steps;
  std::stringstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    int k = 0, n = 0;
    double loss = 0, val = -1;
    if (std::sscanf(line.c_str(), "lora: step %d/%d | loss %lf | val %lf", &k, &n, &loss, &val) < 3) continue;
    if (k == int(steps.size()) + 1) steps.push_back({loss, val, ""});
  }
  return steps;
}
std::vector<float> adapter_floats(const std::string& run, const std::string& base) {
  const LoraAdapter a = load_lora(run + "/adapter.olora", load_model(base).config);
  return {a.data(), a.data() + a.size()};
}
}  // namespace

TEST(mpi_lora, two_ranks_match_one_rank_with_twice_the_batch) {
  SKIP_WITHOUT_MPI();
  const std::string dir = test::temp_dir(), base = lora_base(dir);
  std::string one_log, two_log;
  ASSERT_EQ(shell(fmt::format("{} {}", ORION_BINARY, lora_args(base, dir + "/one", 4, 6)), &one_log), 0) << one_log;
  ASSERT_EQ(shell(fmt::format("{} {} {}", mpirun(2), ORION_BINARY, lora_args(base, dir + "/two", 2, 6)), &two_log), 0)
      << two_log;
  const auto one = lora_losses(one_log), two = lora_losses(two_log);
  ASSERT_EQ(one.size(), 6u) << one_log;
  ASSERT_EQ(two.size(), 6u) << "rank 0 alone prints:\n" << two_log;
  for (size_t s = 0; s < one.size(); ++s) {
    EXPECT_LE(rel(two[s].loss, one[s].loss), 1e-5) << "step " << s + 1 << ": " << two[s].loss << " vs " << one[s].loss;
    if (one[s].val >= 0) EXPECT_LE(rel(two[s].val, one[s].val), 1e-5) << "validation after step " << s + 1;
  }
  EXPECT_NE(two_log.find("all-reduce"), std::string::npos) << "the communication figures are reported";
  // The same adapter: B starts at 0, so max|B| is what training learned; the two runs differ only by
  // the order of float sums (the all-reduce), far below it.
  const ModelConfig c = load_model(base).config;
  const LoraAdapter a = load_lora(dir + "/one/adapter.olora", c), b = load_lora(dir + "/two/adapter.olora", c);
  ASSERT_EQ(a.size(), b.size());
  double max_diff = 0, max_b = 0;
  for (size_t i = 0; i < a.size(); ++i) max_diff = std::max(max_diff, double(std::fabs(a.data()[i] - b.data()[i])));
  for (const LoraTensor& t : a.tensors())
    for (int64_t i = 0; i < t.out * a.rank(); ++i) max_b = std::max(max_b, double(std::fabs(a.B(t)[i])));
  std::printf("  6 steps: max |adapter difference| %.2g, max |B| learned %.2g\n", max_diff, max_b);
  EXPECT_GT(max_b, 1e-3) << "the adapter learned something, so equal results mean something";
  EXPECT_LE(max_diff, 1e-3 * max_b);
  size_t checkpoints = 0;
  for (const auto& e : fs::directory_iterator(dir + "/two/checkpoints")) checkpoints += e.path().extension() == ".olora";
  EXPECT_EQ(checkpoints, 2u) << "rank 0 alone writes checkpoints (3, 6)";
}

// With gradient accumulation (the same loop as orion train): 2 ranks × 2 rows × 2 micro-batches
// give the losses and the adapter of 1 rank × 4 rows × 2 micro-batches.
TEST(mpi_lora, two_ranks_with_accum_match_one_rank_with_twice_the_batch) {
  SKIP_WITHOUT_MPI();
  const std::string dir = test::temp_dir(), base = lora_base(dir);
  std::string one_log, two_log;
  ASSERT_EQ(shell(fmt::format("{} {} --accum 2", ORION_BINARY, lora_args(base, dir + "/one", 4, 4)), &one_log), 0)
      << one_log;
  ASSERT_EQ(shell(fmt::format("{} {} {} --accum 2", mpirun(2), ORION_BINARY, lora_args(base, dir + "/two", 2, 4)), &two_log),
            0)
      << two_log;
  const auto one = lora_losses(one_log), two = lora_losses(two_log);
  ASSERT_EQ(one.size(), 4u) << one_log;
  ASSERT_EQ(two.size(), 4u) << two_log;
  for (size_t s = 0; s < one.size(); ++s)
    EXPECT_LE(rel(two[s].loss, one[s].loss), 1e-5) << "step " << s + 1 << ": " << two[s].loss << " vs " << one[s].loss;
  const std::vector<float> a = adapter_floats(dir + "/one", base), b = adapter_floats(dir + "/two", base);
  ASSERT_EQ(a.size(), b.size());
  double max_diff = 0, max_abs = 0;
  for (size_t i = 0; i < a.size(); ++i)
    max_diff = std::max(max_diff, double(std::fabs(a[i] - b[i]))), max_abs = std::max(max_abs, double(std::fabs(a[i])));
  EXPECT_LE(max_diff, 1e-4 * max_abs);
}

TEST(mpi_lora, resumed_two_rank_run_continues_bit_for_bit) {
  SKIP_WITHOUT_MPI();
  const std::string dir = test::temp_dir(), base = lora_base(dir);
  std::string log;
  ASSERT_EQ(shell(fmt::format("{} {} {}", mpirun(2), ORION_BINARY, lora_args(base, dir + "/straight", 2, 6)), &log), 0)
      << log;
  ASSERT_EQ(shell(fmt::format("{} {} {}", mpirun(2), ORION_BINARY, lora_args(base, dir + "/resumed", 2, 3)), &log), 0)
      << log;
  ASSERT_EQ(shell(fmt::format("{} {} {} --resume", mpirun(2), ORION_BINARY, lora_args(base, dir + "/resumed", 2, 6)), &log),
            0)
      << log;
  EXPECT_NE(log.find("resuming from"), std::string::npos) << log;
  EXPECT_EQ(adapter_floats(dir + "/resumed", base), adapter_floats(dir + "/straight", base));
}

namespace {
// The pid of the process whose environment holds `marker` and OMPI_COMM_WORLD_RANK=rank; 0 if none.
pid_t find_rank(const std::string& marker, int rank) {
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string env = slurp(e.path().string() + "/environ");
    if (env.find(marker) != std::string::npos &&
        env.find("OMPI_COMM_WORLD_RANK=" + std::to_string(rank) + '\0') != std::string::npos)
      return pid_t(std::stol(name));
  }
  return 0;
}
}  // namespace

TEST(mpi_train, a_killed_rank_ends_the_run_and_the_last_checkpoint_resumes) {
  SKIP_WITHOUT_MPI();
  const std::string dir = test::temp_dir(), run = dir + "/killed";
  const std::string marker = "ORION_TEST_RUN=" + fs::path(dir).filename().string();
  const int steps = 300;
  std::string args = train_args(dir, run, 2, steps);
  std::string log = dir + "/mpirun.log";
  // In the background; rank 1 is killed (SIGKILL) once the first checkpoint exists.
  const std::string cmd =
      fmt::format("{} -x {} {} {} >{} 2>&1 </dev/null; echo $? >{}/rc", mpirun(2), marker, ORION_BINARY, args, log, dir);
  std::thread runner([&] { std::system(cmd.c_str()); });
  pid_t victim = 0;
  for (int i = 0; i < 6000 && !victim; ++i) {
    if (fs::exists(run + "/checkpoints/ckpt_00000003.ckpt")) victim = find_rank(marker, 1);
    if (!victim) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (victim) kill(victim, SIGKILL);
  runner.join();
  ASSERT_NE(victim, 0) << "rank 1 was not found: " << slurp(log);
  const int rc = std::stoi(slurp(dir + "/rc"));
  const std::string text = slurp(log);
  std::printf("  mpirun exit %d; its message:\n%s\n", rc, text.substr(0, 600).c_str());
  EXPECT_NE(rc, 0) << "the run does not end as if nothing happened";
  EXPECT_NE(text.find("rank 1"), std::string::npos) << "the message names the dead rank: " << text;
  EXPECT_FALSE(fs::exists(run + "/model.bin")) << "killed before the end (if this fails, the run was too fast)";
  // Every checkpoint left reads cleanly, and the run resumes from the newest to the end.
  const auto ckpts = list_checkpoints(run + "/checkpoints");
  ASSERT_FALSE(ckpts.empty());
  for (const auto& f : ckpts) EXPECT_NO_THROW(read_checkpoint(f)) << f;
  std::string out;
  const int64_t resumed_at = read_checkpoint(ckpts.back()).state.step;
  ASSERT_EQ(shell(fmt::format("{} {} train --resume {} --steps {} --threads 1 --no-progress", mpirun(2), ORION_BINARY, run,
                              resumed_at + 3),
                  &out),
            0)
      << out;
  EXPECT_EQ(read_metrics(run).size(), size_t(resumed_at + 3)) << "the dead run's later steps were dropped and redone";
  EXPECT_TRUE(fs::exists(run + "/model.bin"));
}

// mpirun forwards SIGUSR1 (not SIGINT) to the ranks: both stop after the same step and rank 0
// writes a checkpoint of it.
namespace {
// Runs `orion ARGS` under mpirun in the background and, once `run` has logged 5 steps, sends SIGUSR1
// to mpirun (which forwards it to every rank). Returns mpirun's pid (0: never found) after the run
// ended; its exit code is in dir/rc and its output in dir/mpirun.log.
pid_t run_and_stop_with_sigusr1(const std::string& args, const std::string& dir, const std::string& run) {
  const std::string cmd =
      fmt::format("{} {} {} >{}/mpirun.log 2>&1 </dev/null; echo $? >{}/rc", mpirun(2), ORION_BINARY, args, dir, dir);
  std::thread runner([&] { std::system(cmd.c_str()); });
  pid_t launcher = 0;
  for (int i = 0; i < 6000 && !launcher && !fs::exists(dir + "/rc"); ++i) {  // mpirun's pid, once a few steps are done
    if (fs::exists(run + "/metrics.jsonl") && read_metrics(run).size() >= 5)
      for (const auto& e : fs::directory_iterator("/proc")) {
        const std::string cmdline = slurp(e.path().string() + "/cmdline");
        if (cmdline.rfind("mpirun", 0) == 0 && cmdline.find(run) != std::string::npos)
          launcher = pid_t(std::stol(e.path().filename().string()));
      }
    if (!launcher) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (launcher) kill(launcher, SIGUSR1);
  runner.join();
  return launcher;
}
}  // namespace

TEST(mpi_train, sigusr1_on_mpirun_stops_every_rank_with_a_checkpoint) {
  SKIP_WITHOUT_MPI();
  const std::string dir = test::temp_dir(), run = dir + "/stopped", log = dir + "/mpirun.log";
  const pid_t launcher = run_and_stop_with_sigusr1(train_args(dir, run, 2, 3000), dir, run);
  ASSERT_NE(launcher, 0) << slurp(log);
  EXPECT_EQ(slurp(dir + "/rc"), "0\n") << slurp(log);
  const auto ckpts = list_checkpoints(run + "/checkpoints");
  ASSERT_FALSE(ckpts.empty());
  const int64_t step = read_checkpoint(ckpts.back()).state.step;
  EXPECT_GE(step, 5);
  EXPECT_LT(step, 3000);
  EXPECT_EQ(read_metrics(run).size(), size_t(step)) << "rank 0 logged every step up to the checkpoint";
}

// The same clean stop for LoRA (one training loop): every rank stops after the same step, rank 0
// writes the adapter's checkpoint of that step, and no adapter is exported before the run is done.
TEST(mpi_lora, sigusr1_on_mpirun_stops_every_rank_with_a_checkpoint) {
  SKIP_WITHOUT_MPI();
  const std::string dir = test::temp_dir(), base = lora_base(dir), run = dir + "/stopped", log = dir + "/mpirun.log";
  const pid_t launcher = run_and_stop_with_sigusr1(lora_args(base, run, 2, 20000), dir, run);
  ASSERT_NE(launcher, 0) << slurp(log);
  EXPECT_EQ(slurp(dir + "/rc"), "0\n") << slurp(log);
  const size_t steps = read_metrics(run).size();
  EXPECT_GE(steps, 5u);
  EXPECT_LT(steps, 20000u);
  EXPECT_TRUE(fs::exists(run + fmt::format("/checkpoints/lora_{:08d}.olora", steps)))
      << "the checkpoint of the last logged step";
  EXPECT_FALSE(fs::exists(run + "/adapter.olora"));
}

TEST(mpi_train, ranks_with_different_options_stop_with_a_clear_message) {
  SKIP_WITHOUT_MPI();
  const std::string dir = test::temp_dir();
  std::string log;
  const std::string launch = mpirun(1);  // two programs (MPMD): "-np 1 A : -np 1 B"
  const int rc = shell(fmt::format("{} {} {} : -np 1 {} {}", launch, ORION_BINARY, train_args(dir, dir + "/a", 2, 4),
                                   ORION_BINARY, train_args(dir, dir + "/a", 3, 4)),
                       &log);
  EXPECT_EQ(rc, 2) << log;
  EXPECT_NE(log.find("training options"), std::string::npos) << log;
  EXPECT_NE(log.find("rank 1 differs from rank 0"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(dir + "/a/metrics.jsonl")) << "no step was taken";
}

TEST(mpi_train, without_mpi_several_processes_are_refused) {
  // The message a build without MPI gives under a launcher (checked through the environment, so it
  // runs in every build): every process would otherwise train alone on the same data.
  if (dist::built_with_mpi()) GTEST_SKIP() << "built with MPI: the mpirun tests cover this build";
  setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  std::string err;
  EXPECT_EQ(test::run_orion("train --steps 1 --no-progress --out " + test::temp_dir(), nullptr, &err), 2);
  EXPECT_NE(err.find("built without MPI"), std::string::npos) << err;
  unsetenv("OMPI_COMM_WORLD_SIZE");
}
