// A model trained on the built-in corpus loses almost nothing when its weights become q8_0: the
// validation loss computed by the inference path (prefill, all logits) with q8_0 matrices is
// within 1% of the same model's loss in fp32.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "data/token_dataset.h"
#include "model/io/model_io.h"
#include "model/transformer.h"
#include "support.h"
#include "train/loop/trainer.h"

using namespace orion;

namespace {

// Mean cross-entropy of predicting each next token of the batches' rows, in nats.
double validation_loss(const ModelWeights& w, const data::TokenDataset& val, int batches) {
  Transformer tf(w);
  double sum = 0;
  size_t count = 0;
  for (int i = 0; i < batches; i++) {
    const data::Batch b = val.batch(uint64_t(i));
    for (int r = 0; r < b.B; r++) {
      const int* in = b.inputs.data() + size_t(r) * b.T;
      const float* logits = tf.forward(in, b.T, 0, /*all_logits=*/true);
      for (int t = 0; t < b.T; t++) {
        const float* l = logits + size_t(t) * tf.vocab_size();
        double mx = l[0], z = 0;
        for (int v = 1; v < tf.vocab_size(); v++) mx = std::max(mx, double(l[v]));
        for (int v = 0; v < tf.vocab_size(); v++) z += std::exp(l[v] - mx);
        sum += mx + std::log(z) - l[b.targets[size_t(r) * b.T + t]];
        count++;
      }
    }
  }
  return sum / double(count);
}

}  // namespace

TEST(Q8ValidationLoss, TrainedModelWithin1PercentOfFp32) {
  const std::string dir = test::temp_dir();
  std::ofstream(dir + "/tiny.json") << R"({"arch": "llama", "dim": 64, "hidden_dim": 160, "n_layers": 2, "n_heads": 4,
                                          "n_kv_heads": 2, "vocab_size": 300, "seq_len": 64})";
  train::TrainOptions o;
  o.config = dir + "/tiny.json";
  o.data = "builtin:300";
  o.vocab = 300;
  o.batch = 8, o.seq = 64, o.steps = 150;
  o.lr = 1e-2f;
  o.eval_every = 0, o.eval_batches = 4, o.checkpoint_every = 0;
  o.sample_tokens = 0, o.progress = false;
  o.out = dir;
  train::Trainer trainer(o);
  const train::TrainResult r = trainer.run();
  ASSERT_FALSE(r.model.empty());

  // The validation split the trainer prepared (out/data/<corpus key>/val_*.bin).
  std::string data_dir;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/data")) data_dir = e.path().string();
  data::DatasetOptions dopt;
  dopt.B = 4, dopt.T = 64;
  const data::TokenDataset val = data::TokenDataset::open(data_dir, "val", dopt);

  const ModelWeights f32 = load_model(r.model);
  LoadOptions as_q8;
  as_q8.dtype = DType::Q8_0;
  const ModelWeights q8 = load_model(r.model, as_q8);
  ASSERT_EQ(q8.matrix_dtype(), DType::Q8_0);
  const double loss_f32 = validation_loss(f32, val, 4), loss_q8 = validation_loss(q8, val, 4);
  std::printf("  validation loss: fp32 %.4f, q8_0 %.4f (%+.3f%%); trainer's %.4f; uniform %.4f\n", loss_f32, loss_q8,
              100 * (loss_q8 / loss_f32 - 1), r.val_loss, std::log(300.0));
  EXPECT_LT(loss_f32, std::log(300.0) - 2.0) << "the model learned something, so the comparison means something";
  EXPECT_LT(std::fabs(loss_q8 - loss_f32), 0.01 * loss_f32);
  EXPECT_NE(loss_q8, loss_f32) << "the q8_0 path really ran";
}
