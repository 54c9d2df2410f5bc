// orion generate end to end: model files written here, tokenizers from tests/testdata.
#include <gtest/gtest.h>

#include <filesystem>

#include "model/io/model_io.h"
#include "support.h"

namespace orion {
namespace {

using test::run_orion;

ModelConfig llama_512() {
  ModelConfig c = config_preset("stories260k");  // V = 512, as the shipped SentencePiece tokenizer
  c.seq_len = 128;
  return c;
}

std::string spm_bin() { return test::data_path("tokenizer/spm_stories/tokenizer.bin"); }

TEST(CliGenerate, GreedyLlama2cIsDeterministicAcrossThreadCounts) {
  std::string dir = test::temp_dir();
  save_model(random_weights(llama_512(), 31), dir + "/m.bin", ModelFormat::Llama2c);
  std::string base = "generate --model " + dir + "/m.bin --tokenizer " + spm_bin() +
                     " --prompt 'Once upon a time' --temperature 0 -n 24 --threads ";
  std::string out1, out2, err;
  ASSERT_EQ(run_orion(base + "1", &out1, &err), 0) << err;
  ASSERT_EQ(run_orion(base + "2", &out2, &err), 0) << err;
  EXPECT_EQ(out1, out2);
  EXPECT_EQ(out1.rfind("Once upon a time", 0), 0u) << out1;
  EXPECT_GT(out1.size(), std::string("Once upon a time\n").size());
  EXPECT_NE(err.find("decode:"), std::string::npos) << err;
  EXPECT_NE(err.find("tok/s"), std::string::npos) << err;
}

// --kv-cache f16 generates (its numerics: tests/model/test_transformer.cpp, F16KvCache…); values it
// does not know, or the ANE backend, are refused with the flag named.
TEST(CliGenerate, F16KvCacheGeneratesAndBadValuesAreRefused) {
  std::string dir = test::temp_dir();
  save_model(random_weights(llama_512(), 36), dir + "/m.bin", ModelFormat::Llama2c);
  std::string base = "generate --model " + dir + "/m.bin --tokenizer " + spm_bin() + " --prompt 'Once upon a time' --temperature 0 -n 8";
  std::string f16, err;
  ASSERT_EQ(run_orion(base + " --kv-cache f16", &f16, &err), 0) << err;
  EXPECT_EQ(f16.rfind("Once upon a time", 0), 0u) << f16;
  EXPECT_GT(f16.size(), std::string("Once upon a time\n").size());
  std::string out;
  EXPECT_EQ(run_orion(base + " --kv-cache q8_0", &out, &err), 2);
  EXPECT_NE(err.find("--kv-cache"), std::string::npos) << err;
  EXPECT_EQ(run_orion(base + " --kv-cache f16 --backend anesim", &out, &err), 2);
  EXPECT_NE(err.find("--kv-cache f16 is for the CPU backend"), std::string::npos) << err;
}

TEST(CliGenerate, SameSeedSameTextOtherSeedOtherText) {
  std::string dir = test::temp_dir();
  ModelWeights w = random_weights(llama_512(), 32);
  save_model(w, dir + "/hf", ModelFormat::Safetensors);
  std::string base = "generate --model " + dir + "/hf --tokenizer " +
                     test::data_path("tokenizer/spm_stories/tokenizer.model") +
                     " --prompt 'The cat' --temperature 1 --top-p 0.95 -n 40 --seed ";
  std::string a, b, c, err;
  ASSERT_EQ(run_orion(base + "5", &a, &err), 0) << err;
  ASSERT_EQ(run_orion(base + "5", &b, &err), 0) << err;
  ASSERT_EQ(run_orion(base + "6", &c, &err), 0) << err;
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(CliGenerate, Gpt2WithTokenizerFoundBesideTheModel) {
  std::string dir = test::temp_dir();
  ModelConfig c = config_preset("gpt2-tiny");
  c.vocab_size = c.padded_vocab = 1257;  // the shipped small GPT-2 vocabulary
  save_model(random_weights(c, 33), dir + "/hf", ModelFormat::Safetensors);
  for (const char* f : {"vocab.json", "merges.txt"})
    std::filesystem::copy_file(test::data_path(std::string("tokenizer/small_gpt2/") + f), dir + "/hf/" + f);
  std::string out, err;
  ASSERT_EQ(run_orion("generate --model " + dir + "/hf --prompt 'Hello world' --temperature 0 -n 10 --dtype f16", &out,
                      &err),
            0)
      << err;
  EXPECT_EQ(out.rfind("Hello world", 0), 0u) << out;
}

TEST(CliGenerate, TokenizerLargerThanModelIsRefused) {
  std::string dir = test::temp_dir();
  ModelConfig c = llama_512();
  c.vocab_size = c.padded_vocab = 300;
  save_model(random_weights(c, 34), dir + "/m.bin", ModelFormat::Llama2c);
  std::string out, err;
  EXPECT_EQ(run_orion("generate --model " + dir + "/m.bin --tokenizer " + spm_bin() + " -n 4", &out, &err), 2);
  EXPECT_NE(err.find("512 tokens but the model only 300"), std::string::npos) << err;
}

TEST(CliGenerate, NoTokenizerAnywhereSaysHowToFix) {
  std::string dir = test::temp_dir();
  save_model(random_weights(llama_512(), 35), dir + "/m.bin", ModelFormat::Llama2c);
  std::string out, err;
  EXPECT_EQ(run_orion("generate --model " + dir + "/m.bin -n 4", &out, &err), 2);
  EXPECT_NE(err.find("--tokenizer"), std::string::npos) << err;
}

}  // namespace
}  // namespace orion
