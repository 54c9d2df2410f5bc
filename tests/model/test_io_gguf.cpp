// GGUF files (llama.cpp): Orion's writer and reader round-trip both families in every dtype; a GGUF
// written by an independent converter (tests/model/gguf_reference/hf_to_gguf.py, python3 + numpy
// from the published spec) reads as the same weights; a tokenizer.bin stored beside the weights
// reads back piece for piece; malformed files are Input errors naming the
// file and field, for every truncation of a valid file.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "base/file.h"
#include "model/io/gguf_file.h"
#include "model/io/model_io.h"
#include "model/tokenizer/gguf_tokenizer.h"
#include "model/tokenizer/llama2c_tokenizer.h"
#include "support.h"
#include "test_io_util.h"

namespace orion {
namespace {

using test::expect_input_error;
using test::expect_same_weights;
using test::random_model;
using test::rewrite_gguf_with;
using test::tiny_gpt2;
using test::tiny_llama;

std::string write_gguf_file(const ModelWeights& w, const std::string& name, std::optional<DType> dt = {}) {
  std::string path = test::temp_dir() + "/" + name;
  save_model(w, path, ModelFormat::Gguf, dt);
  return path;
}

TEST(ModelIoGguf, LlamaRoundTripsInEveryDtype) {
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (bool tied : {true, false}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + (tied ? " tied" : " untied"));
      ModelWeights w = random_model(tiny_llama(tied), 31, dt);
      std::string path = write_gguf_file(w, "m.gguf");
      EXPECT_EQ(detect_format(path), ModelFormat::Gguf);
      ModelWeights r = load_model(path);
      EXPECT_EQ(r.config.describe(), w.config.describe());
      EXPECT_EQ(r.matrix_dtype(), dt);
      expect_same_weights(w, r);
    }
}

// GPT-2's tied classifier is written twice, as token_embd.weight and output.weight (llama.cpp's
// converter does so and its gpt2 loader requires output.weight), and reads back tied: the
// classifier is the embedding, not a second copy in memory.
TEST(ModelIoGguf, Gpt2RoundTripsWithoutThePaddingRows) {
  ModelWeights w = random_model(tiny_gpt2(320), 32);
  const std::string path = write_gguf_file(w, "g.gguf", DType::F16);
  io::GgufFile f = io::GgufFile::open(path);
  ASSERT_NE(f.find("output.weight"), nullptr);
  EXPECT_EQ(f.find("output.weight")->shape, f.find("token_embd.weight")->shape);
  ModelWeights r = load_model(path);
  EXPECT_EQ(r.config.arch, Arch::GPT2);
  EXPECT_EQ(r.config.vocab_size, 300);
  EXPECT_TRUE(r.config.tied_embeddings);
  EXPECT_EQ(r.classifier.data, r.tok_emb.data);
  expect_same_weights(w, r, DType::F16, DType::F32, /*tok_rows=*/300);
}

TEST(ModelIoGguf, MatricesAreViewsIntoTheMapping) {
  ModelWeights w = random_model(tiny_llama(false), 33, DType::F16);
  std::string path = write_gguf_file(w, "v.gguf");
  io::GgufFile f = io::GgufFile::open(path);
  ModelWeights r = load_model(path);
  // Same distances in memory as in the file: views, not copies.
  auto at = [](const void* p) { return static_cast<const uint8_t*>(p); };
  const uint8_t* emb = at(f.find("token_embd.weight")->data);
  EXPECT_EQ(at(r.layers[1].wq.data) - at(r.tok_emb.data), at(f.find("blk.1.attn_q.weight")->data) - emb);
  EXPECT_EQ(at(r.classifier.data) - at(r.tok_emb.data), at(f.find("output.weight")->data) - emb);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.find_value("general.architecture")->value, "llama");
  EXPECT_EQ(f.find("token_embd.weight")->shape, (std::vector<int64_t>{300, 64}));  // ne = {64, 300}
}

// A llama2.c model and its tokenizer.bin in one GGUF file (what llama.cpp's tools load): the
// weights and the tokenizer read back as they were.
TEST(ModelIoGguf, LlamaWithItsTokenizerBinRoundTripsInOneFile) {
  const std::string bin = test::data_path("tokenizer/spm_stories/tokenizer.bin");
  const Llama2cTokenizer ref(bin);
  ModelConfig c = tiny_llama();
  c.vocab_size = c.padded_vocab = ref.vocab_size();
  const ModelWeights w = random_model(c, 35);
  std::string why;
  const std::vector<io::GgufOutValue> keys = gguf_tokenizer_metadata(bin, &why);
  ASSERT_FALSE(keys.empty()) << why;
  const std::string path = test::temp_dir() + "/with_tokenizer.gguf";
  save_gguf_model(w, path, DType::F16, keys);
  expect_same_weights(w, load_model(path), DType::F16);
  ASSERT_TRUE(gguf_has_tokenizer(path));
  const std::unique_ptr<Tokenizer> tok = load_tokenizer(path);
  test::expect_same_pieces(*tok, ref);
  const std::string text = "Once upon a time, there was a little cat named Lily.";
  EXPECT_EQ(tok->encode(text, true), ref.encode(text, true));
}

// The converter follows llama.cpp's layout; reading its file must give Orion's canonical weights
// back, which checks the q/k row order, the Conv1D transposes and the key names independently of
// Orion's own writer.
TEST(ModelIoGguf, FileFromAnIndependentConverterReadsAsTheSameWeights) {
  const std::string script = std::string(ORION_TEST_DATA) + "/../model/gguf_reference/hf_to_gguf.py";
  if (std::system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") != 0)
    GTEST_SKIP() << "needs /usr/bin/python3 with numpy (Debian: python3-numpy; scripts/setup.sh installs it)";
  struct Case {
    ModelWeights w;
    const char* dtype;
  };
  Case cases[] = {{random_model(tiny_llama(false), 34), "f32"},
                  {random_model(tiny_llama(true), 35), "f16"},
                  {random_model(tiny_gpt2(300), 36), "f32"}};
  for (Case& c : cases) {
    SCOPED_TRACE(std::string(arch_name(c.w.config.arch)) + " " + c.dtype);
    std::string dir = test::temp_dir();
    save_model(c.w, dir + "/hf", ModelFormat::Safetensors);
    ASSERT_EQ(std::system(("/usr/bin/python3 " + script + " " + dir + "/hf " + dir + "/ref.gguf " + c.dtype).c_str()), 0);
    ModelWeights r = load_model(dir + "/ref.gguf");
    EXPECT_EQ(r.config.describe(), c.w.config.describe());
    expect_same_weights(c.w, r, std::string(c.dtype) == "f16" ? DType::F16 : DType::F32);
  }
}

TEST(ModelIoGguf, EveryTruncationIsAnInputError) {
  ModelWeights w = random_model(tiny_llama(), 37);
  std::string path = write_gguf_file(w, "t.gguf");
  const std::string bytes = test::slurp(path);
  const std::string cut = test::temp_dir() + "/cut.gguf";
  LoadOptions as_gguf;
  as_gguf.format = ModelFormat::Gguf;
  // Every length through the header and tensor table (about 1.3 KB), then a sample through the data.
  for (size_t n = 0; n < bytes.size(); n += n < 1600 ? 1 : 977) {
    test::spit(cut, bytes.substr(0, n));
    try {
      load_model(cut, as_gguf);
      ADD_FAILURE() << "a file cut to " << n << " bytes was read";
    } catch (const Error& e) {
      ASSERT_EQ(e.kind(), ErrorKind::Input) << n << ": " << e.what();
      ASSERT_NE(std::string(e.what()).find(cut), std::string::npos) << e.what();
    }
  }
}

TEST(ModelIoGguf, MalformedFilesNameTheFieldAndWhatWasExpected) {
  ModelWeights w = random_model(tiny_llama(), 38);
  std::string path = write_gguf_file(w, "b.gguf");
  const std::string good = test::slurp(path);
  auto with = [&](auto edit) {
    std::string s = good;
    edit(s);
    test::spit(path, s);
  };
  LoadOptions as_gguf;
  as_gguf.format = ModelFormat::Gguf;
  auto load = [&] { load_model(path, as_gguf); };

  with([](std::string& s) { s[0] = 'X'; });
  expect_input_error(load, path, {"magic", "GGUF"});
  with([](std::string& s) { s[4] = 1; });
  expect_input_error(load, path, {"version", "1"});
  with([](std::string& s) { std::memset(&s[8], 0xff, 8); });  // tensor_count 2^64 − 1
  expect_input_error(load, path, {"tensor_count"});
  // Retype a tensor as Q4_K: read as a table entry, refused by name when the model needs it.
  with([](std::string& s) {
    const std::string name = "blk.0.attn_q.weight";
    size_t at = s.find(name) + name.size();  // then u32 n_dims, 2 × u64 ne, u32 type
    uint32_t q4k = 12;
    std::memcpy(&s[at + 4 + 16], &q4k, 4);
  });
  expect_input_error(load, path, {"blk.0.attn_q.weight", "Q4_K", "not supported"});
  // An architecture Orion does not run.
  with([](std::string& s) {
    size_t at = s.find("llama");
    s.replace(at, 5, "mamba");
  });
  expect_input_error(load, path, {"general.architecture", "mamba", "llama, gpt2"});
  // A tensor's offset off the alignment.
  with([](std::string& s) {
    const std::string name = "blk.1.ffn_down.weight";
    size_t at = s.find(name) + name.size() + 4 + 16 + 4;
    uint64_t off;
    std::memcpy(&off, &s[at], 8);
    off += 2;
    std::memcpy(&s[at], &off, 8);
  });
  expect_input_error(load, path, {"blk.1.ffn_down.weight.offset", "alignment"});
}

// What the family's block would silently get wrong is refused: an extra tensor (Qwen3's q norm in a
// Llama file), RoPE scaling other than Llama 3's, value heads of another size than key heads.
TEST(ModelIoGguf, FeaturesAPlainBlockLacksAreRefused) {
  ModelWeights w = random_model(tiny_llama(), 39);
  const float norm[16] = {1};
  std::string path = write_gguf_file(w, "q.gguf");
  rewrite_gguf_with(path, {}, {{"blk.0.attn_q_norm.weight", norm, DType::F32, {16}, DType::F32}});
  expect_input_error([&] { load_model(path); }, path, {"blk.0.attn_q_norm.weight", "does not know"});

  path = write_gguf_file(w, "r.gguf");
  rewrite_gguf_with(path, {{"llama.rope.scaling.type", {io::GgufValueType::String, {}, "linear"}}}, {});
  expect_input_error([&] { load_model(path); }, path, {"llama.rope.scaling.type", "linear", "not supported"});

  // A head size of its own is read (Qwen3's); values of another size than keys are not.
  path = write_gguf_file(w, "k.gguf");
  rewrite_gguf_with(path, {{"llama.attention.value_length", {io::GgufValueType::U32, {}, 32}}}, {});
  expect_input_error([&] { load_model(path); }, path, {"llama.attention.value_length"});
}

TEST(ModelIoGguf, ConvertNamesGgufByExtension) {
  EXPECT_EQ(format_for_output("x.gguf", Arch::Llama), ModelFormat::Gguf);
  EXPECT_EQ(parse_format("gguf"), ModelFormat::Gguf);
}

}  // namespace
}  // namespace orion
