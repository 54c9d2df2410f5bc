// `orion convert` and `orion info` through the real binary.
#include <gtest/gtest.h>

#include <filesystem>

#include "../model/test_io_util.h"
#include "base/file.h"
#include "model/io/model_io.h"
#include "support.h"

namespace orion {
namespace {

std::string llama_bin(const std::string& dir, bool tied = false) {
  std::string p = dir + "/stories.bin";
  save_model(test::random_model(test::tiny_llama(tied), 41), p, ModelFormat::Llama2c);
  return p;
}

TEST(CliConvert, Llama2cToSafetensorsAndBack) {
  std::string dir = test::temp_dir(), in = llama_bin(dir), out, err;
  ASSERT_EQ(test::run_orion("convert --in " + in + " --out " + dir + "/hf --dtype bf16", &out, &err), 0) << err;
  EXPECT_NE(out.find("safetensors"), std::string::npos) << out;
  EXPECT_NE(out.find("bf16"), std::string::npos) << out;
  ModelWeights hf = load_model(dir + "/hf");
  EXPECT_EQ(hf.matrix_dtype(), DType::BF16);
  test::expect_same_weights(load_model(in), hf, DType::BF16, DType::F32);
  // Back to llama2.c (guessed from ".bin" and the Llama architecture), exactly the first file when f32.
  ASSERT_EQ(test::run_orion("convert --in " + dir + "/hf --out " + dir + "/back.bin", &out, &err), 0) << err;
  EXPECT_EQ(detect_format(dir + "/back.bin"), ModelFormat::Llama2c);
  ASSERT_EQ(test::run_orion("convert --in " + in + " --out " + dir + "/hf32 --to safetensors", &out, &err), 0) << err;
  ASSERT_EQ(test::run_orion("convert --in " + dir + "/hf32 --out " + dir + "/again.bin --to llama2c", &out, &err), 0);
  EXPECT_EQ(test::slurp(in), test::slurp(dir + "/again.bin"));
}

TEST(CliConvert, LlmcToSafetensorsAndV1) {
  std::string dir = test::temp_dir(), in = dir + "/gpt2_124M.bin", out, err;
  ModelWeights w = test::random_model(test::tiny_gpt2(), 42);
  save_model(w, in, ModelFormat::LlmC);
  ASSERT_EQ(test::run_orion("convert --in " + in + " --out " + dir + "/gpt2.safetensors", &out, &err), 0) << err;
  EXPECT_TRUE(file_exists(dir + "/config.json"));
  test::expect_same_weights(w, load_model(dir + "/gpt2.safetensors"), DType::F32, DType::F32, 300);
  ASSERT_EQ(test::run_orion("convert --in " + dir + "/gpt2.safetensors --out " + dir + "/bf16.bin --dtype bf16", &out, &err),
            0)
      << err;
  EXPECT_EQ(test::peek<int32_t>(dir + "/bf16.bin", 4), 5);  // llm.c version 5 = bf16
  std::string l = llama_bin(dir, true);
  ASSERT_EQ(test::run_orion("convert --in " + l + " --out " + dir + "/v1.bin --to llama2c-v1", &out, &err), 0) << err;
  EXPECT_EQ(detect_format(dir + "/v1.bin"), ModelFormat::Llama2cV1);
  test::expect_same_weights(load_model(l), load_model(dir + "/v1.bin"));
}

TEST(CliConvert, RefusesImpossibleConversionsClearly) {
  std::string dir = test::temp_dir(), in = dir + "/gpt2.bin", out, err;
  save_model(test::random_model(test::tiny_gpt2(), 43), in, ModelFormat::LlmC);
  EXPECT_EQ(test::run_orion("convert --in " + in + " --out " + dir + "/x.bin --to llama2c", &out, &err), 2);
  EXPECT_NE(err.find("gpt2 model cannot be written as llama2c"), std::string::npos) << err;
  EXPECT_FALSE(file_exists(dir + "/x.bin"));
  EXPECT_EQ(test::run_orion("convert --in " + in + " --out " + dir + "/x.onnx", &out, &err), 2);
  EXPECT_NE(err.find("--to"), std::string::npos) << err;
  EXPECT_EQ(test::run_orion("convert --in " + in + " --out " + dir + "/y --dtype f8", &out, &err), 2);
  EXPECT_NE(err.find("unknown dtype 'f8'"), std::string::npos) << err;
  EXPECT_EQ(test::run_orion("convert --in " + in + " --out " + dir + "/y --to onnx", &out, &err), 2);
  EXPECT_NE(err.find("unknown format 'onnx'"), std::string::npos) << err;
}

TEST(CliConvert, BadInputIsOneLineNamingTheFile) {
  std::string dir = test::temp_dir(), in = llama_bin(dir), out, err;
  std::filesystem::resize_file(in, 1000);
  EXPECT_EQ(test::run_orion("convert --in " + in + " --out " + dir + "/hf", &out, &err), 3);
  EXPECT_NE(err.find(in), std::string::npos) << err;
  EXPECT_NE(err.find("the file has 1000 bytes"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_FALSE(file_exists(dir + "/hf"));
}

TEST(CliInfo, DescribesModel) {
  std::string dir = test::temp_dir(), in = llama_bin(dir), out, err;
  ASSERT_EQ(test::run_orion("info --model " + in + " --tensors", &out, &err), 0) << err;
  ModelConfig c = test::tiny_llama(false);
  EXPECT_NE(out.find("format:     llama2c"), std::string::npos) << out;
  EXPECT_NE(out.find(c.describe()), std::string::npos) << out;
  EXPECT_NE(out.find("f32 matrices"), std::string::npos) << out;
  EXPECT_NE(out.find(std::to_string(c.num_params())), std::string::npos) << out;
  EXPECT_NE(out.find(std::to_string(std::filesystem::file_size(in)) + " on disk"), std::string::npos) << out;
  EXPECT_NE(out.find("layers.1.wk"), std::string::npos) << out;
  EXPECT_EQ(test::run_orion("info --model " + dir + "/missing.bin", &out, &err), 3);
  EXPECT_NE(err.find("missing.bin"), std::string::npos) << err;
}

// A Qwen3 model (q/k norms, head_dim 32 with C/NH = 16) converts to safetensors and back to the same
// weights; .bin formats refuse it; info describes its features, and those of a preset.
TEST(CliConvert, NewerFamiliesRoundTripAndAreDescribed) {
  std::string dir = test::temp_dir(), out, err;
  ModelConfig c = test::tiny_llama(true);
  c.arch = Arch::Qwen3, c.head_size = 32;
  ModelWeights w = test::random_model(c, 43);
  save_model(w, dir + "/qwen3", ModelFormat::Safetensors);
  ASSERT_EQ(test::run_orion("convert --in " + dir + "/qwen3 --out " + dir + "/copy", &out, &err), 0) << err;
  test::expect_same_weights(w, load_model(dir + "/copy"));
  EXPECT_NE(test::run_orion("convert --in " + dir + "/qwen3 --out " + dir + "/q.bin --to llama2c", &out, &err), 0);
  EXPECT_NE(err.find("qwen3"), std::string::npos) << err;
  ASSERT_EQ(test::run_orion("info --model " + dir + "/copy", &out, &err), 0) << err;
  EXPECT_NE(out.find("q/k norms"), std::string::npos) << out;
  EXPECT_NE(out.find("head_dim 32"), std::string::npos) << out;
  ASSERT_EQ(test::run_orion("info --config llama3.2-1b", &out, &err), 0) << err;
  EXPECT_NE(out.find("llama3 RoPE scaling (factor 32)"), std::string::npos) << out;
  EXPECT_NE(out.find("1235.8"), std::string::npos) << out;  // Llama 3.2 1B: 1,235,814,400 parameters, tied
}

// --config writes a preset's random weights, drawn in the dtype asked for: what `orion bench` uses,
// as a file the other commands read.
TEST(CliConvert, ConfigWritesAPresetsRandomWeights) {
  std::string dir = test::temp_dir(), out, err;
  ASSERT_EQ(test::run_orion("convert --config stories260k --seed 7 --out " + dir + "/r --dtype bf16", &out, &err), 0) << err;
  ModelWeights w = load_model(dir + "/r");
  EXPECT_EQ(w.matrix_dtype(), DType::BF16);
  EXPECT_EQ(w.config.dim, config_preset("stories260k").dim);
  test::expect_same_weights(random_weights(config_preset("stories260k"), 7, DType::BF16), w, DType::BF16, DType::BF16);
  EXPECT_EQ(test::run_orion("convert --config stories260k --in x.bin --out " + dir + "/s", &out, &err), 2);
  EXPECT_EQ(test::run_orion("convert --out " + dir + "/s", &out, &err), 2);
  EXPECT_NE(err.find("--config"), std::string::npos) << err;
}

TEST(CliConvert, HelpExplainsFormats) {
  std::string out;
  EXPECT_EQ(test::run_orion("convert --help", &out), 0);
  for (const char* s : {"--in", "--out", "--to", "--dtype", "llama2c-v1", "safetensors", "llmc"})
    EXPECT_NE(out.find(s), std::string::npos) << s;
  EXPECT_EQ(test::run_orion("info --help", &out), 0);
  EXPECT_NE(out.find("--model"), std::string::npos);
}

}  // namespace
}  // namespace orion
