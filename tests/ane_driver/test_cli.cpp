// `orion generate` and `orion train` with --backend ane on Linux: the real Apple driver
// (ane_driver.mm, ane_core.cpp) against the fake framework, which computes with anesim — so every
// token and every loss must equal the --backend anesim run of the same command.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "fake_framework_env.h"
#include "model/io/model_io.h"
#include "support.h"

namespace orion {
namespace {

using test::run_orion;

TEST(AneDriverCli, GenerateThroughTheDriverEqualsAnesim) {
  ORION_REQUIRE_FAKE_FRAMEWORK();
  const std::string dir = test::temp_dir();
  ModelConfig c = config_preset("gpt2-tiny");
  c.vocab_size = c.padded_vocab = 1257;  // the shipped small GPT-2 vocabulary
  save_model(random_weights(c, 47), dir + "/hf", ModelFormat::Safetensors);
  for (const char* f : {"vocab.json", "merges.txt"})
    std::filesystem::copy_file(test::data_path(std::string("tokenizer/small_gpt2/") + f), dir + "/hf/" + f);
  const std::string base =
      "generate --model " + dir + "/hf --prompt 'Hello world' --temperature 0 -n 12 --threads 1 --verbose --backend ";
  std::string sim_out, ane_out, err;
  ASSERT_EQ(run_orion(base + "anesim", &sim_out, &err), 0) << err;
  ASSERT_EQ(run_orion(base + "ane", &ane_out, &err), 0) << err;
  EXPECT_EQ(err.find("misuse"), std::string::npos) << err;  // the fake says so on stderr
  EXPECT_EQ(ane_out.rfind("Hello world", 0), 0u) << ane_out;
  EXPECT_GT(ane_out.size(), std::string("Hello world\n").size());
  EXPECT_EQ(ane_out, sim_out);

  // The run went through the driver's dlopen of the named framework: another path fails to load.
  const std::string fake = std::getenv("ORION_ANE_FRAMEWORK");
  setenv("ORION_ANE_FRAMEWORK", "/nonexistent/AppleNeuralEngine", 1);
  EXPECT_NE(run_orion(base + "ane", &ane_out, &err), 0);
  setenv("ORION_ANE_FRAMEWORK", fake.c_str(), 1);
  EXPECT_NE(err.find("cannot load /nonexistent/AppleNeuralEngine"), std::string::npos) << err;
}

TEST(AneDriverCli, FiveTrainingStepsThroughTheDriverEqualAnesim) {
  ORION_REQUIRE_FAKE_FRAMEWORK();
  const std::string work = test::temp_dir();
  // C = 192 lets the attention buffers reach the C7 minimum at S = 128 (train/test_anesim_train.cpp).
  std::ofstream(work + "/tiny.json") << R"({"arch": "llama", "dim": 192, "hidden_dim": 256, "n_layers": 2, )"
                                        R"("n_heads": 6, "n_kv_heads": 6, "vocab_size": 300, "seq_len": 128})";
  const std::string flags = "train --config " + work +
                            "/tiny.json --data builtin:300 --vocab 300 --batch 1 --seq 128 --lr 1e-2 --eval-every 0 "
                            "--eval-batches 1 --sample 0 --steps 5 --no-progress --backend ";
  std::string err;
  ASSERT_EQ(run_orion(flags + "anesim --out " + work + "/sim", nullptr, &err), 0) << err;
  ASSERT_EQ(run_orion(flags + "ane --out " + work + "/ane", nullptr, &err), 0) << err;
  EXPECT_EQ(err.find("misuse"), std::string::npos) << err;
  const auto sim = test::run_losses(work + "/sim"), ane = test::run_losses(work + "/ane");
  EXPECT_EQ(sim.size(), 5u);
  EXPECT_EQ(ane, sim);
  EXPECT_EQ(test::read_text(work + "/ane/model.bin"), test::read_text(work + "/sim/model.bin"));
}

// `orion doctor` on Linux: available only through the framework named by ORION_ANE_FRAMEWORK (the
// fake), and saying why not when the driver module is not named.
TEST(AneDriverCli, DoctorSaysWhetherTheNamedFrameworkOpens) {
  ORION_REQUIRE_FAKE_FRAMEWORK();
  std::string out, err;
  ASSERT_EQ(run_orion("doctor", &out, &err), 0) << err;
  EXPECT_NE(out.find("the driver opened the framework named by ORION_ANE_FRAMEWORK (a test fake)"), std::string::npos)
      << out;
  const std::string module = std::getenv("ORION_ANE_DRIVER_MODULE");
  unsetenv("ORION_ANE_DRIVER_MODULE");
  const int status = run_orion("doctor", &out, &err);
  setenv("ORION_ANE_DRIVER_MODULE", module.c_str(), 1);
  ASSERT_EQ(status, 0) << err;
  EXPECT_NE(out.find("ORION_ANE_DRIVER_MODULE names none"), std::string::npos) << out;
}

// The driver's Objective-C++ is a module of its own: the orion binary these tests run links no
// Objective-C runtime and no GNUstep, so a Linux build never depends on them.
TEST(AneDriverCli, OrionLinksNoObjectiveCRuntime) {
  ORION_REQUIRE_FAKE_FRAMEWORK();
  std::string needed;  // every library the dynamic loader would load with it
  FILE* ldd = popen((std::string("ldd '") + ORION_BINARY + "'").c_str(), "r");
  ASSERT_NE(ldd, nullptr);
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, ldd)) > 0;) needed.append(buf, n);
  ASSERT_EQ(pclose(ldd), 0) << needed;
  EXPECT_NE(needed.find("libc.so"), std::string::npos) << needed;
  EXPECT_EQ(needed.find("gnustep"), std::string::npos) << needed;
  EXPECT_EQ(needed.find("libobjc"), std::string::npos) << needed;
}

}  // namespace
}  // namespace orion
