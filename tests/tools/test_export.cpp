// `orion export`: a training checkpoint becomes a model file `orion generate` runs — llama2.c .bin
// and safetensors — holding exactly the trained weights (greedy text and logits-level agreement
// through generate's output), and bad requests fail with a usage error.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "model/io/model_io.h"
#include "support.h"

namespace fs = std::filesystem;

TEST(Export, CheckpointToLlama2cAndSafetensorsRunsLikeTheTrainedModel) {
  const std::string dir = orion::test::temp_dir();
  std::ofstream(dir + "/tiny.json") << R"({"arch": "llama", "dim": 32, "hidden_dim": 64, "n_layers": 2, "n_heads": 4,
                                         "n_kv_heads": 2, "vocab_size": 300, "seq_len": 64})";
  std::string err, out;
  ASSERT_EQ(orion::test::run_orion("train --config " + dir +
                                       "/tiny.json --data builtin:300 --vocab 300 --steps 5 --batch 2 "
                                       "--seq 32 --lr 1e-2 --threads 1 --sample 0 --out " +
                                       dir + "/run",
                                   nullptr, &err),
            0)
      << err;
  const std::string tok = " --tokenizer " + dir + "/run/tokenizer.bin";
  ASSERT_EQ(orion::test::run_orion("export --ckpt " + dir + "/run --format llama2c --out " + dir + "/e.bin", &out, &err), 0)
      << err;
  EXPECT_NE(out.find("step 5"), std::string::npos) << out;
  ASSERT_EQ(orion::test::run_orion("export --ckpt " + dir + "/run/checkpoints --format safetensors --out " + dir + "/e-hf",
                                   &out, &err),
            0)
      << err;
  EXPECT_TRUE(fs::exists(dir + "/e-hf/model.safetensors"));
  EXPECT_TRUE(fs::exists(dir + "/e-hf/config.json"));

  // The exported weights are the trained ones: the same bits as the model the run wrote at its end.
  const orion::ModelWeights a = orion::load_model(dir + "/run/model.bin"), b = orion::load_model(dir + "/e.bin"),
                            c = orion::load_model(dir + "/e-hf");
  ASSERT_EQ(a.tok_emb.numel(), b.tok_emb.numel());
  EXPECT_EQ(0, std::memcmp(a.tok_emb.data, b.tok_emb.data, a.tok_emb.numel() * 4));
  EXPECT_EQ(0, std::memcmp(a.tok_emb.data, c.tok_emb.data, a.tok_emb.numel() * 4));

  std::string g0, g1, g2;
  const std::string gen = " --prompt \"Once upon a time\" -n 12 --temperature 0 --threads 1" + tok;
  ASSERT_EQ(orion::test::run_orion("generate --model " + dir + "/run/model.bin" + gen, &g0, &err), 0) << err;
  ASSERT_EQ(orion::test::run_orion("generate --model " + dir + "/e.bin" + gen, &g1, &err), 0) << err;
  ASSERT_EQ(orion::test::run_orion("generate --model " + dir + "/e-hf" + gen, &g2, &err), 0) << err;
  EXPECT_EQ(g1, g0);
  EXPECT_EQ(g2, g0);

  // A Llama model cannot become an llm.c (GPT-2) file; an unknown format names the flag.
  EXPECT_EQ(orion::test::run_orion("export --ckpt " + dir + "/run --format llmc --out " + dir + "/x.bin", nullptr, &err), 2)
      << err;
  EXPECT_EQ(orion::test::run_orion("export --ckpt " + dir + "/run --format onnx --out " + dir + "/x.bin", nullptr, &err), 2);
  EXPECT_NE(err.find("--format"), std::string::npos) << err;
  EXPECT_NE(orion::test::run_orion("export --ckpt " + dir + "/nothing --out " + dir + "/x.bin", nullptr, &err), 0);
}
