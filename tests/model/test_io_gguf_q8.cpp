// q8_0 models in GGUF files (ggml type Q8_0): Orion writes llama.cpp's block layout byte for byte
// (checked against an independent numpy quantiser), reads it back as views, quantises at load, and
// refuses what cannot hold or fit q8_0 with errors that say so.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "base/file.h"
#include "model/io/gguf_file.h"
#include "model/io/model_io.h"
#include "model/transformer.h"
#include "support.h"
#include "test_io_util.h"

namespace orion {
namespace {

std::string temp_path(const std::string& name) { return test::temp_dir() + "/" + name; }

TEST(ModelIoGgufQ8, BothFamiliesRoundTripAsQ8_0) {
  for (const ModelConfig& c : {test::tiny_llama(false), test::tiny_llama(true), test::tiny_gpt2(300)}) {
    SCOPED_TRACE(c.describe());
    ModelWeights w = test::random_model(c, 41);
    const std::string path = temp_path("q.gguf");
    save_model(w, path, ModelFormat::Gguf, DType::Q8_0);
    io::GgufFile f = io::GgufFile::open(path);
    EXPECT_EQ(f.find("token_embd.weight")->ggml_type, 8u);
    EXPECT_EQ(f.find("output_norm.weight")->ggml_type, 0u);  // vectors stay f32
    EXPECT_EQ(f.find_value("general.file_type")->value, 7);   // LLAMA_FTYPE_MOSTLY_Q8_0
    ModelWeights r = load_model(path);
    EXPECT_EQ(r.matrix_dtype(), DType::Q8_0);
    EXPECT_EQ(r.layers[0].w2.dtype, DType::Q8_0);
    test::expect_same_weights(w, r, DType::Q8_0);
    // A q8_0 model written again is the same file: blocks are copied, never quantised twice.
    const std::string again = temp_path("q2.gguf");
    save_model(r, again, ModelFormat::Gguf);
    EXPECT_EQ(test::slurp(path), test::slurp(again));
  }
}

TEST(ModelIoGgufQ8, QuantisingAtLoadEqualsReadingAQ8File) {
  ModelWeights w = test::random_model(test::tiny_llama(false), 42, DType::F16);
  const std::string f16 = temp_path("h.gguf"), q8 = temp_path("q.gguf");
  save_model(w, f16, ModelFormat::Gguf);
  save_model(w, q8, ModelFormat::Gguf, DType::Q8_0);
  LoadOptions as_q8;
  as_q8.dtype = DType::Q8_0;
  ModelWeights a = load_model(f16, as_q8), b = load_model(q8);
  for (auto [ta, tb] : {std::pair{&a.layers[1].wq, &b.layers[1].wq}, {&a.tok_emb, &b.tok_emb}, {&a.classifier, &b.classifier}}) {
    ASSERT_EQ(ta->dtype, DType::Q8_0);
    ASSERT_EQ(ta->nbytes(), tb->nbytes());
    EXPECT_EQ(std::memcmp(ta->data, tb->data, ta->nbytes()), 0);
  }
}

// The numpy converter quantises from the spec's definition; every Q8_0 tensor it writes must be
// the same bytes as Orion's (same model, through safetensors), which pins the rounding and the
// scale's fp32 → fp16 step to llama.cpp's.
TEST(ModelIoGgufQ8, IndependentConverterWritesTheSameBlocks) {
  const std::string script = std::string(ORION_TEST_DATA) + "/../model/gguf_reference/hf_to_gguf.py";
  if (std::system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") != 0)
    GTEST_SKIP() << "needs /usr/bin/python3 with numpy (Debian: python3-numpy; scripts/setup.sh installs it)";
  for (const ModelConfig& c : {test::tiny_llama(false), test::tiny_gpt2(300)}) {
    SCOPED_TRACE(c.describe());
    ModelWeights w = test::random_model(c, 43);
    const std::string dir = test::temp_dir();
    save_model(w, dir + "/hf", ModelFormat::Safetensors);
    ASSERT_EQ(std::system(("/usr/bin/python3 " + script + " " + dir + "/hf " + dir + "/ref.gguf q8_0").c_str()), 0);
    save_model(w, dir + "/orion.gguf", ModelFormat::Gguf, DType::Q8_0);
    io::GgufFile ref = io::GgufFile::open(dir + "/ref.gguf"), ours = io::GgufFile::open(dir + "/orion.gguf");
    int q8_tensors = 0;
    for (const io::GgufTensor& t : ours.tensors()) {
      const io::GgufTensor* u = ref.find(t.name);
      ASSERT_NE(u, nullptr) << t.name;
      ASSERT_EQ(u->ggml_type, t.ggml_type) << t.name;
      ASSERT_EQ(u->nbytes, t.nbytes) << t.name;
      EXPECT_EQ(std::memcmp(u->data, t.data, t.nbytes), 0) << t.name;
      q8_tensors += t.ggml_type == 8;
    }
    EXPECT_GE(q8_tensors, 8);
    ModelWeights r = load_model(dir + "/ref.gguf");
    EXPECT_EQ(r.matrix_dtype(), DType::Q8_0);
    test::expect_same_weights(w, r, DType::Q8_0);
  }
}

// A q8_0 GGUF runs through the transformer: its logits stay close to the fp32 model's, and a token
// gets the same logits bit for bit whether it went through prefill or decode.
TEST(ModelIoGgufQ8, Q8ModelLogitsCloseToFp32AndPrefillEqualsDecode) {
  for (const ModelConfig& c : {test::tiny_llama(false), test::tiny_gpt2(300)}) {
    SCOPED_TRACE(c.describe());
    const ModelWeights w = test::random_model(c, 48);
    const std::string path = temp_path("r.gguf");
    save_model(w, path, ModelFormat::Gguf, DType::Q8_0);
    const ModelWeights q = load_model(path);
    const int tokens[] = {1, 17, 42, 299, 5, 100, 7, 250};
    const int n = 8, V = c.vocab_size;
    Transformer tf(w), tq(q), td(q);
    const float* pf = tf.forward(tokens, n, 0, true);
    const std::vector<float> ref(pf, pf + size_t(n) * V);
    const float* pq = tq.forward(tokens, n, 0, true);
    double err = 0, norm = 0;
    for (size_t i = 0; i < ref.size(); i++) err += (pq[i] - ref[i]) * (pq[i] - ref[i]), norm += ref[i] * ref[i];
    EXPECT_LT(std::sqrt(err / norm), 0.03) << "relative RMS error of the q8_0 logits";
    EXPECT_GT(err, 0) << "the q8_0 weights were used";
    for (int t = 0; t < n; t++) {
      const float* d = td.forward(tokens + t, 1, t);
      EXPECT_EQ(std::memcmp(d, pq + size_t(t) * V, size_t(V) * 4), 0) << "token " << t;
    }
  }
}

TEST(ModelIoGgufQ8, BrokenQ8FilesAreInputErrors) {
  ModelWeights w = test::random_model(test::tiny_llama(), 44);
  const std::string path = temp_path("b.gguf");
  save_model(w, path, ModelFormat::Gguf, DType::Q8_0);
  const std::string good = test::slurp(path);
  const std::string name = "blk.0.attn_q.weight";
  const size_t data_at = io::GgufFile::open(path).find(name)->file_offset;
  const size_t info = good.find(name) + name.size();  // then u32 n_dims, u64 ne[0], u64 ne[1], u32 type
  auto with = [&](auto edit) {
    std::string s = good;
    edit(s);
    test::spit(path, s);
  };
  auto load = [&] { load_model(path); };
  // Rows of 48 elements cannot be whole blocks.
  with([&](std::string& s) {
    const uint64_t ne0 = 48;
    std::memcpy(&s[info + 4], &ne0, 8);
  });
  test::expect_input_error(load, path, {name + ".ne", "Q8_0", "multiple of 32"});
  // An Inf scale in the first block of the tensor.
  with([&](std::string& s) { s[data_at] = 0, s[data_at + 1] = 0x7c; });
  test::expect_input_error(load, path, {"layers.0.wq", "NaN or Inf"});
  // The file ends inside the last tensor's blocks.
  with([&](std::string& s) { s.resize(s.size() - 40); });
  test::expect_input_error(load, path, {"outside the file"});
}

TEST(ModelIoGgufQ8, FormatsWithoutQ8AndShapesThatDoNotFitAreRefused) {
  ModelWeights w = test::random_model(test::tiny_llama(), 45);
  const std::string dir = test::temp_dir();
  for (ModelFormat f : {ModelFormat::Safetensors, ModelFormat::Llama2c})
    try {
      save_model(w, dir + "/x", f, DType::Q8_0);
      ADD_FAILURE() << format_name(f) << " took q8_0";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Usage);
      EXPECT_NE(std::string(e.what()).find("q8_0"), std::string::npos) << e.what();
    }
  // A q8_0 model goes to safetensors only with a --dtype; to a llama2.c file as f32.
  save_model(w, dir + "/q.gguf", ModelFormat::Gguf, DType::Q8_0);
  ModelWeights q = load_model(dir + "/q.gguf");
  EXPECT_THROW(save_model(q, dir + "/st", ModelFormat::Safetensors), Error);
  save_model(q, dir + "/st", ModelFormat::Safetensors, DType::F16);
  save_model(q, dir + "/m.bin", ModelFormat::Llama2c);
  test::expect_same_weights(q, load_model(dir + "/m.bin"));
  // Rows of 48: not whole blocks.
  ModelConfig c = test::tiny_llama();
  c.dim = 48, c.n_heads = 3, c.n_kv_heads = 3;
  ModelWeights odd = test::random_model(c, 46);
  try {
    odd.convert_matrices(DType::Q8_0);
    ADD_FAILURE() << "rows of 48 were quantised";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Usage);
    EXPECT_NE(std::string(e.what()).find("tok_emb has rows of 48"), std::string::npos) << e.what();
  }
}

// The command line: convert writes q8_0 GGUF and refuses it for safetensors; info shows it.
TEST(ModelIoGgufQ8, ConvertAndInfoOnTheCommandLine) {
  const std::string dir = test::temp_dir();
  save_model(test::random_model(test::tiny_llama(), 47), dir + "/m.bin", ModelFormat::Llama2c);
  std::string out, err;
  ASSERT_EQ(test::run_orion("convert --in " + dir + "/m.bin --out " + dir + "/m.gguf --dtype q8_0", &out, &err), 0) << err;
  EXPECT_NE(out.find("q8_0"), std::string::npos) << out;
  ASSERT_EQ(test::run_orion("info --model " + dir + "/m.gguf --tensors", &out, &err), 0) << err;
  EXPECT_NE(out.find("dtype:      q8_0 matrices"), std::string::npos) << out;
  EXPECT_NE(out.find("q8_0  [300, 64]"), std::string::npos) << out;
  EXPECT_NE(test::run_orion("convert --in " + dir + "/m.bin --out " + dir + "/st --dtype q8_0", &out, &err), 0);
  EXPECT_NE(err.find("no q8_0"), std::string::npos) << err;
}

}  // namespace
}  // namespace orion
