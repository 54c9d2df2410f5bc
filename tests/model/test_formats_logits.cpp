// Every model format round-trips to the same logits: write a random model, read it back, run it.
#include <gtest/gtest.h>

#include "model/io/model_io.h"
#include "model/transformer.h"
#include "support.h"
#include "test_io_util.h"

namespace orion {
namespace {

std::vector<float> logits_of(const ModelWeights& w) {
  std::vector<int> toks;
  for (int i = 0; i < 12; i++) toks.push_back((i * 37 + 5) % w.config.vocab_size);
  Transformer tf(w);
  const float* lg = tf.forward(toks.data(), int(toks.size()), 0, true);
  return std::vector<float>(lg, lg + toks.size() * size_t(w.config.vocab_size));
}

void expect_same_logits(const ModelWeights& w, ModelFormat f, const std::string& path, std::optional<DType> dt, double tol) {
  save_model(w, path, f, dt);
  ModelWeights r = load_model(path);
  auto a = logits_of(w), b = logits_of(r);
  ASSERT_EQ(a.size(), b.size());
  double md = 0;
  for (size_t i = 0; i < a.size(); i++) md = std::max(md, double(std::abs(a[i] - b[i])));
  EXPECT_LE(md, tol) << format_name(f) << " " << path;
}

TEST(FormatsLogits, LlamaThroughEveryFormat) {
  std::string dir = test::temp_dir();
  for (bool tied : {true, false}) {
    ModelWeights w = test::random_model(test::tiny_llama(tied), 21);
    expect_same_logits(w, ModelFormat::Llama2c, dir + "/m.bin", {}, 0.0);
    expect_same_logits(w, ModelFormat::Llama2cV1, dir + "/m1.bin", {}, 0.0);
    expect_same_logits(w, ModelFormat::Safetensors, dir + "/hf", {}, 0.0);
    // Reduced precision on disk: logits move by about the weights' rounding error.
    expect_same_logits(w, ModelFormat::Safetensors, dir + "/hf16", DType::F16, 2e-2);
    expect_same_logits(w, ModelFormat::Safetensors, dir + "/hfbf16", DType::BF16, 1e-1);
  }
}

TEST(FormatsLogits, Gpt2ThroughEveryFormat) {
  std::string dir = test::temp_dir();
  ModelWeights w = test::random_model(test::tiny_gpt2(), 22);
  expect_same_logits(w, ModelFormat::LlmC, dir + "/g.bin", {}, 0.0);
  expect_same_logits(w, ModelFormat::Safetensors, dir + "/hf", {}, 0.0);
  expect_same_logits(w, ModelFormat::Safetensors, dir + "/hf16", DType::F16, 2e-2);
}

TEST(FormatsLogits, DtypeAtLoadMatchesConvertingAfter) {
  std::string dir = test::temp_dir();
  ModelWeights w = test::random_model(test::tiny_llama(), 23);
  save_model(w, dir + "/m.bin", ModelFormat::Llama2c);
  LoadOptions lo;
  lo.dtype = DType::BF16;
  ModelWeights a = load_model(dir + "/m.bin", lo);
  EXPECT_EQ(a.matrix_dtype(), DType::BF16);
  w.convert_matrices(DType::BF16);
  EXPECT_EQ(logits_of(a), logits_of(w));
}

}  // namespace
}  // namespace orion
