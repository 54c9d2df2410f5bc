// Limits through the binary: a model too big for the machine, a write that cannot complete (size
// limit = full disk), a vocabulary that does not fit the model, and flags out of range or unknown —
// each one line on stderr with its exit code (2 usage, 3 input, 4 runtime), never a crash.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "model/io/model_io.h"
#include "model/weights.h"
#include "support.h"

namespace fs = std::filesystem;
using orion::test::run_orion;
using orion::test::temp_dir;

namespace {
// The error is one line, the last on stderr, starting "orion: " (progress lines may come before it).
void expect_one_line(const std::string& err) {
  ASSERT_FALSE(err.empty());
  ASSERT_EQ(err.back(), '\n') << err;
  const size_t start = err.rfind('\n', err.size() - 2);
  const std::string last = err.substr(start == std::string::npos ? 0 : start + 1);
  EXPECT_EQ(last.rfind("orion: ", 0), 0u) << err;
  EXPECT_EQ(err.find("orion: "), start == std::string::npos ? 0 : start + 1) << "more than one error line:\n" << err;
}

std::string tiny_model(const std::string& dir) {
  orion::ModelConfig c;
  c.arch = orion::Arch::Llama;
  c.dim = 64, c.hidden_dim = 128, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 4;
  c.vocab_size = c.padded_vocab = 300, c.seq_len = 64;
  const std::string path = dir + "/m.bin";
  orion::save_model(orion::random_weights(c, 7), path, orion::ModelFormat::Llama2c);
  return path;
}
}  // namespace

TEST(CliLimits, ModelTooBigForMemoryNamesTheAllocationAndItsSize) {
  const std::string dir = temp_dir();
  std::ofstream(dir + "/huge.json") << R"({"arch": "llama", "dim": 32768, "hidden_dim": 131072, "n_layers": 512,
    "n_heads": 256, "n_kv_heads": 256, "vocab_size": 300, "seq_len": 64})";
  std::string err;
  EXPECT_EQ(run_orion("train --config " + dir +
                          "/huge.json --data builtin:20 --vocab 300 --seq 16 --steps 1 --no-progress --out " + dir + "/run",
                      nullptr, &err),
            4)
      << err;
  EXPECT_NE(err.find("cannot allocate"), std::string::npos) << err;
  EXPECT_NE(err.find("GB for the parameters of llama C=32768"), std::string::npos) << err;
  expect_one_line(err);
}

TEST(CliLimits, WriteThatCannotCompleteNamesTheFileAndLeavesTheOldOne) {
  const std::string dir = temp_dir(), model = tiny_model(dir), out = dir + "/out.bin";
  std::ofstream(out) << "old";
  // ulimit -f (1 KiB blocks in bash): write() fails part-way with EFBIG, as on a full disk (ENOSPC).
  const std::string cmd = "bash -c 'ulimit -f 64; exec " + std::string(ORION_BINARY) + " convert --in " + model + " --out " +
                          out + " --to llama2c' 2>" + dir + "/err";
  const int rc = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(rc));
  EXPECT_EQ(WEXITSTATUS(rc), 4);
  std::ifstream in(dir + "/err");
  std::string err((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(err.find(out + ": write failed: File too large"), std::string::npos) << err;
  expect_one_line(err);
  std::ifstream old(out);
  std::string kept((std::istreambuf_iterator<char>(old)), {});
  EXPECT_EQ(kept, "old") << "the previous file was damaged";
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << "left behind: " << e.path();
}

TEST(CliLimits, VocabularyAndSequenceBeyondTheModel) {
  const std::string dir = temp_dir(), model = tiny_model(dir);
  const std::string spm = orion::test::data_path("tokenizer/spm_stories/tokenizer.bin");  // 512 tokens
  std::string err;
  EXPECT_EQ(run_orion("generate --model " + model + " --tokenizer " + spm + " -n 4", nullptr, &err), 2) << err;
  EXPECT_NE(err.find("512 tokens but the model only 300"), std::string::npos) << err;
  expect_one_line(err);
  std::ofstream(dir + "/tiny.json")
      << R"({"arch": "llama", "dim": 32, "hidden_dim": 64, "n_layers": 1, "n_heads": 4, "vocab_size": 300, "seq_len": 64})";
  EXPECT_EQ(run_orion("train --config " + dir +
                          "/tiny.json --data builtin:20 --vocab 300 --seq 65 --steps 1 --no-progress --out " + dir + "/run2",
                      nullptr, &err),
            2)
      << err;
  EXPECT_NE(err.find("exceeds the model's context of 64"), std::string::npos) << err;
}

TEST(CliLimits, ZeroNegativeAndUnknownValuesAreUsageErrors) {
  const std::string dir = temp_dir(), model = tiny_model(dir);
  const std::string spm = orion::test::data_path("tokenizer/spm_stories/tokenizer.bin");
  const std::string gen = "generate --model " + model + " --tokenizer " + spm + " ";
  const std::string train = "train --config stories260k --data builtin:20 --no-progress --out " + dir + "/r ";
  for (const std::string& args :
       std::vector<std::string>{gen + "-n 0", gen + "-n -3", gen + "--max-seq -1", gen + "--backend tpu",
                                gen + "--temperature -1", train + "--batch 0", train + "--seq 0", train + "--steps 0",
                                train + "--lr 0", train + "--lr -1", train + "--schedule linear", train + "--accum 0",
                                train + "--export-format onnx --steps 1", "train --config stories9000",
                                "data prepare --tokenizer " + spm + " --in builtin:5 --out " + dir + "/d --val-fraction 2",
                                "convert --in " + model + " --out " + dir + "/x --to onnx",
                                "compile --config stories260k --seq 0 --out " + dir + "/c"}) {
    std::string err;
    EXPECT_EQ(run_orion(args, nullptr, &err), 2) << args << "\n" << err;
    expect_one_line(err);
  }
}
