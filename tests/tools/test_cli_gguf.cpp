// GGUF end to end: `orion convert --to gguf` writes a model together with its tokenizer and chat
// template, and `orion generate --model x.gguf` needs nothing else to give the safetensors
// original's greedy text; a GGUF written by the independent numpy converter (tests/model/
// gguf_reference/hf_to_gguf.py) gives it too, and so does a llama2.c model converted with its
// tokenizer.bin. The model is a tiny random Qwen2 (q/k/v biases, kept in
// Hugging Face's q/k order in GGUF) with a 256-token byte-level tokenizer.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/file.h"
#include "model/io/gguf_file.h"
#include "model/io/model_io.h"
#include "model/tokenizer/tokenizer.h"
#include "support.h"

namespace orion {
namespace {

using nlohmann::json;
using test::run_orion;

// GPT-2's byte → printable character map (bytes_to_unicode), so that 256 tokens spell every byte.
std::string byte_token(int b) {
  const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  int cp = b;
  if (!printable) {
    int n = 0;
    for (int x = 0; x < b; x++) n += !((x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF));
    cp = 256 + n;
  }
  std::string s;
  if (cp < 0x80) s += char(cp);
  else s += char(0xC0 | (cp >> 6)), s += char(0x80 | (cp & 0x3F));
  return s;
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// A Hugging Face folder: random Qwen2 weights, a byte-level tokenizer.json without merges (every
// byte one token) and a tokenizer_config.json with a chat template.
std::string make_folder() {
  const std::string dir = test::temp_dir() + "/hf";
  ModelConfig c;
  c.arch = Arch::Qwen2;
  c.dim = 64, c.hidden_dim = 96, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2;
  c.vocab_size = c.padded_vocab = 256, c.seq_len = 64, c.rope_theta = 1e6f;
  save_model(random_weights(c, 7), dir, ModelFormat::Safetensors);
  json vocab = json::object();
  for (int b = 0; b < 256; b++) vocab[byte_token(b)] = b;
  const json tok = {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}},
                    {"added_tokens", json::array()},
                    {"normalizer", nullptr},
                    {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
                    {"decoder", {{"type", "ByteLevel"}}}};
  write_text(dir + "/tokenizer.json", tok.dump());
  const json cfg = {{"chat_template", "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
                                      "{% if add_generation_prompt %}assistant:{% endif %}"}};
  write_text(dir + "/tokenizer_config.json", cfg.dump());
  return dir;
}

std::string generate(const std::string& args) {
  std::string out, err;
  EXPECT_EQ(run_orion("generate --prompt 'Hello there' --temperature 0 -n 16 " + args, &out, &err), 0) << err;
  return out;
}

TEST(CliGguf, ConvertedFileCarriesItsTokenizerAndGivesTheSameGreedyText) {
  const std::string hf = make_folder(), dir = test::temp_dir();
  std::string out, err;
  ASSERT_EQ(run_orion("convert --in " + hf + " --out " + dir + "/m.gguf", &out, &err), 0) << err;
  const io::GgufFile f = io::GgufFile::open(dir + "/m.gguf");
  EXPECT_EQ(f.find_value("general.architecture")->value, "qwen2");
  EXPECT_EQ(f.find_value("tokenizer.ggml.pre")->value, "gpt-2");
  ASSERT_NE(f.find_value("tokenizer.chat_template"), nullptr);
  const std::string expected = generate("--model " + hf);
  EXPECT_GT(expected.size(), std::string("Hello there\n").size());
  EXPECT_EQ(generate("--model " + dir + "/m.gguf"), expected);  // no --tokenizer: the file's own
  EXPECT_EQ(generate("--chat --model " + dir + "/m.gguf"), generate("--chat --model " + hf));
  // q8_0: the same text as the original quantised at load (the same blocks).
  ASSERT_EQ(run_orion("convert --in " + hf + " --out " + dir + "/q.gguf --dtype q8_0", &out, &err), 0) << err;
  EXPECT_EQ(generate("--model " + dir + "/q.gguf"), generate("--model " + hf + " --dtype q8_0"));
  // A GGUF converted from a GGUF keeps the tokenizer.
  ASSERT_EQ(run_orion("convert --in " + dir + "/m.gguf --out " + dir + "/again.gguf --dtype f16", &out, &err), 0) << err;
  EXPECT_EQ(generate("--model " + dir + "/again.gguf"), generate("--model " + hf + " --dtype f16"));
}

// A llama2.c model with its tokenizer.bin (as run.c takes them) converted to one GGUF file: the same
// greedy text with no --tokenizer, in f32 and f16 (the original's weights rounded the same way).
TEST(CliGguf, Llama2cModelWithItsTokenizerBinGivesTheSameGreedyText) {
  const std::string tok = test::data_path("tokenizer/spm_stories/tokenizer.bin"), dir = test::temp_dir();
  ModelConfig c;
  c.arch = Arch::Llama;
  c.dim = 64, c.hidden_dim = 160, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 4, c.seq_len = 64;
  c.vocab_size = c.padded_vocab = load_tokenizer(tok)->vocab_size();
  save_model(random_weights(c, 11), dir + "/m.bin", ModelFormat::Llama2c);
  std::string out, err;
  for (const char* dtype : {"f32", "f16"}) {
    SCOPED_TRACE(dtype);
    const std::string gguf = dir + "/m-" + dtype + ".gguf";
    ASSERT_EQ(run_orion("convert --in " + dir + "/m.bin --tokenizer " + tok + " --out " + gguf + " --dtype " + dtype, &out, &err),
              0)
        << err;
    EXPECT_EQ(io::GgufFile::open(gguf).find_value("tokenizer.ggml.model")->value, "llama");
    const std::string expected = generate("--model " + dir + "/m.bin --tokenizer " + tok + " --dtype " + dtype);
    EXPECT_GT(expected.size(), std::string("Hello there\n").size());
    EXPECT_EQ(generate("--model " + gguf), expected);
  }
}

TEST(CliGguf, IndependentConvertersFileGivesTheSameGreedyText) {
  if (std::system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") != 0)
    GTEST_SKIP() << "needs /usr/bin/python3 with numpy (Debian: python3-numpy; scripts/setup.sh installs it)";
  const std::string hf = make_folder(), dir = test::temp_dir();
  const std::string script = test::data_path("../model/gguf_reference/hf_to_gguf.py");
  for (const char* dt : {"f32", "f16"}) {
    SCOPED_TRACE(dt);
    const std::string path = dir + "/ref-" + dt + ".gguf";
    ASSERT_EQ(std::system(("/usr/bin/python3 " + script + " " + hf + " " + path + " " + dt).c_str()), 0);
    EXPECT_EQ(generate("--model " + path + " --tokenizer " + hf + "/tokenizer.json"),
              generate("--model " + hf + (std::string(dt) == "f16" ? " --dtype f16" : "")));
  }
}

}  // namespace
}  // namespace orion
