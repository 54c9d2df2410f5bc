// Batched decode on anesim (AneModel::decode_batch, AneSlotDecoder::decode): the rows of a step are
// the columns of one evaluation per program. Each row's logits equal that row decoded alone —
// bit for bit, since every column is computed exactly as a lone token in column 0 is — also with
// rows at different positions and with different adapters in one step; and the compiles are the
// programs of the buckets used, however requests and adapters come and go.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "infer/ane_model.h"
#include "infer/ane_slot_decoder.h"
#include "model/lora/lora.h"
#include "runtime/cpu/kernels.h"
#include "support.h"

namespace orion {
namespace {

ModelConfig small(Arch arch) { return test::small_anesim_config(arch); }

LoraAdapter adapter(const ModelConfig& c, int rank, uint64_t seed) {
  return test::trained_like_adapter(c, rank, 2.0f * rank, seed);
}

int argmax(const float* l, int V) { return int(std::max_element(l, l + V) - l); }

bool same_bits(const float* a, const float* b, int V) { return std::memcmp(a, b, size_t(V) * sizeof(float)) == 0; }

// Rows of different lengths (so different positions) decoded together for `steps` greedy steps,
// each row checked against its twin decoded alone with forward(): same logits bit for bit.
void expect_batch_equals_rows_alone(Arch arch, int lora_slot, int rows, int steps) {
  cpu::set_num_threads(1);
  const ModelConfig c = small(arch);
  const ModelWeights w = random_weights(c, 17);
  const int V = c.vocab_size;
  const LoraAdapter a = adapter(c, 4, 5);
  AneRuntime rt("anesim");
  std::vector<std::unique_ptr<AneModel>> batched, alone;
  std::vector<int> tok(static_cast<size_t>(rows)), pos(static_cast<size_t>(rows));
  for (int b = 0; b < rows; b++) {
    for (auto* set : {&batched, &alone}) {
      set->push_back(std::make_unique<AneModel>(w, rt.cache, AneModelOptions{"batch-test"}));
      if (lora_slot > 0) set->back()->set_lora(&a);
    }
    // A prompt of 1 + b tokens: the rows sit at positions 1, 2, 3, … (1 token: the decode path).
    std::vector<int> prompt;
    for (int i = 0; i <= b; i++) prompt.push_back((i * 37 + 11 * b + 3) % V);
    batched.back()->forward(prompt.data(), int(prompt.size()), 0);
    tok[size_t(b)] = argmax(alone.back()->forward(prompt.data(), int(prompt.size()), 0), V);
    pos[size_t(b)] = int(prompt.size());
  }
  std::vector<AneModel*> m;
  for (auto& p : batched) m.push_back(p.get());
  std::vector<float> logits(size_t(rows) * V);
  for (int s = 0; s < steps; s++) {
    AneModel::decode_batch(m, tok.data(), pos.data(), logits.data());
    for (int b = 0; b < rows; b++) {
      const float* ref = alone[size_t(b)]->forward(&tok[size_t(b)], 1, pos[size_t(b)]);
      EXPECT_TRUE(same_bits(logits.data() + size_t(b) * V, ref, V)) << "row " << b << " step " << s;
      tok[size_t(b)] = argmax(ref, V), pos[size_t(b)]++;
    }
  }
}

TEST(AneBatchDecode, Gpt2RowsEqualEachRowAlone) { expect_batch_equals_rows_alone(Arch::GPT2, 0, 5, 3); }
TEST(AneBatchDecode, Gpt2WithAnAdapterRowsEqualEachRowAlone) { expect_batch_equals_rows_alone(Arch::GPT2, 4, 4, 2); }
// Llama without an adapter slot projects row by row (fwd_attn attends across columns); the FFN
// and final norm are batched.
TEST(AneBatchDecode, LlamaRowsEqualEachRowAlone) { expect_batch_equals_rows_alone(Arch::Llama, 0, 4, 2); }
TEST(AneBatchDecode, LlamaWithAnAdapterRowsEqualEachRowAlone) { expect_batch_equals_rows_alone(Arch::Llama, 4, 4, 2); }
// 17 rows: past the 16 columns of the FFN's single-row bucket, so a 32-wide bucket runs.
TEST(AneBatchDecode, ABatchWiderThanTheSingleRowBucketStillEqualsEachRowAlone) {
  expect_batch_equals_rows_alone(Arch::GPT2, 0, 17, 1);
}

// The compile count is the programs of the buckets used: a batch that fits the single row's
// buckets compiles nothing beyond a single row's programs; a wider one compiles each wider
// bucket once; batches coming and going after that compile nothing.
TEST(AneBatchDecode, CompilesAreTheBucketsUsedOnce) {
  cpu::set_num_threads(1);
  const ModelConfig c = small(Arch::GPT2);
  const ModelWeights w = random_weights(c, 17);
  AneRuntime rt("anesim");
  std::vector<std::unique_ptr<AneModel>> models;
  std::vector<AneModel*> m;
  for (int b = 0; b < 20; b++) models.push_back(std::make_unique<AneModel>(w, rt.cache, AneModelOptions{"batch-test"}));
  for (auto& p : models) m.push_back(p.get());
  std::vector<int> tok(20, 7), pos(20, 0);
  std::vector<float> logits(size_t(20) * c.vocab_size);
  auto step = [&](int rows) {
    const std::vector<AneModel*> some(m.begin(), m.begin() + rows);
    AneModel::decode_batch(some, tok.data(), pos.data(), logits.data());
    for (int b = 0; b < rows; b++) pos[size_t(b)]++;
    return rt.driver->counters().compiles;
  };
  const int one_row = int(models[0]->programs(1).size());
  EXPECT_EQ(step(1), one_row);
  EXPECT_EQ(step(16), one_row);
  const int wide = int(models[0]->programs(1, 20).size());
  EXPECT_EQ(wide, one_row + 2 * c.n_layers + 1);  // decode_qkv and decode_ffn per layer, final_norm at 32
  EXPECT_EQ(step(20), wide);
  EXPECT_EQ(step(3), wide);
  EXPECT_EQ(step(17), wide);
}

// The serving decoder: three slots with the base model and two adapters decode in one step; each
// row equals its request decoded alone with its adapter, and switching adapters, adding and
// dropping rows compiles nothing.
TEST(AneBatchDecode, SlotDecoderRowsWithDifferentAdaptersEachEqualTheirSingleRequest) {
  cpu::set_num_threads(1);
  const ModelConfig c = small(Arch::Llama);
  const ModelWeights w = random_weights(c, 23);
  const int V = c.vocab_size;
  const LoraAdapter a1 = adapter(c, 4, 1), a2 = adapter(c, 2, 2);
  const LoraAdapter* adapters[3] = {nullptr, &a1, &a2};
  AneRuntime rt("anesim");
  AneSlotDecoder dec(w, rt.cache, 3, 64, 4, "served");
  std::vector<std::unique_ptr<AneModel>> alone;
  std::vector<SlotDecoder::Row> rows;
  for (int s = 0; s < 3; s++) {
    alone.push_back(std::make_unique<AneModel>(w, rt.cache, AneModelOptions{"served", 64}));
    alone.back()->enable_lora(4);
    alone.back()->set_lora(adapters[s]);
    const int prompt[2] = {5 + s, 9 + 2 * s};
    const float* lg = dec.prefill(s, prompt, 2, adapters[s], 1.0f);
    const float* ref = alone.back()->forward(prompt, 2, 0);
    EXPECT_TRUE(same_bits(lg, ref, V)) << "prefill " << s;
    rows.push_back({s, argmax(ref, V), 2, adapters[s], 1.0f});
  }
  int compiles = -1;
  for (int step = 0; step < 4; step++) {
    // Step 2 drops slot 1 (a request leaving), step 3 brings it back with slot 0's adapter.
    std::vector<SlotDecoder::Row> now = rows;
    if (step == 2) now.erase(now.begin() + 1);
    if (step == 3) {
      rows[1].adapter = nullptr;
      alone[1]->set_lora(nullptr);
      now = rows;
    }
    const float* lg = dec.decode(now);
    for (size_t i = 0; i < now.size(); i++) {
      const int s = now[i].slot;
      const float* ref = alone[size_t(s)]->forward(&now[i].token, 1, now[i].pos);
      EXPECT_TRUE(same_bits(lg + i * V, ref, V)) << "slot " << s << " step " << step;
      rows[size_t(s)].token = argmax(ref, V), rows[size_t(s)].pos++;
    }
    if (step == 0) compiles = dec.program_compiles();
    EXPECT_EQ(dec.program_compiles(), compiles) << "step " << step;
  }
  // The adapters change the logits: the equalities above tell the rows' adapters apart.
  const int probe = 3;
  const float* l0 = alone[0]->forward(&probe, 1, 10);
  const std::vector<float> base(l0, l0 + V);
  alone[0]->set_lora(&a1);
  EXPECT_FALSE(same_bits(base.data(), alone[0]->forward(&probe, 1, 10), V));
}

}  // namespace
}  // namespace orion

namespace orion {
namespace {

// Not a check, a measurement (run with --gtest_also_run_disabled_tests): host time and anesim's
// predicted ANE time per decode step of `rows` sequences, row by row (forward per model, what
// AneSlotDecoder did before) and batched (decode_batch), on a GPT-2 of 124M's width (2 layers).
TEST(AneBatchDecode, DISABLED_MeasureStepTimes) {
  ModelConfig c = config_preset("gpt2-124m");
  c.n_layers = 2;
  const ModelWeights w = random_weights(c, 3);
  AneRuntime rt("anesim");
  constexpr int kSteps = 4;
  for (int rows : {1, 8}) {
    std::vector<std::unique_ptr<AneModel>> models;
    std::vector<AneModel*> m;
    for (int b = 0; b < rows; b++) models.push_back(std::make_unique<AneModel>(w, rt.cache, AneModelOptions{"bench", 64}));
    for (auto& p : models) m.push_back(p.get());
    models[0]->prepare(1, rows);
    for (bool batched : {false, true}) {
      std::vector<int> tok(size_t(rows), 11), pos(size_t(rows), 0);
      std::vector<float> logits(size_t(rows) * c.vocab_size);
      const runtime::DriverCounters before = rt.driver->counters();
      const auto t0 = std::chrono::steady_clock::now();
      for (int s = 0; s < kSteps; s++) {
        if (batched) AneModel::decode_batch(m, tok.data(), pos.data(), logits.data());
        else
          for (int b = 0; b < rows; b++) m[size_t(b)]->forward(&tok[size_t(b)], 1, pos[size_t(b)]);
        for (int& p : pos) p++;
      }
      const double host_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      const runtime::DriverCounters& after = rt.driver->counters();
      std::printf("rows %d %-10s host %8.2f ms/step  predicted ANE %7.3f ms/step  evaluations %3.0f/step\n", rows,
                  batched ? "batched" : "row-by-row", host_ms / kSteps,
                  (after.predicted_ane_ms - before.predicted_ane_ms) / kSteps,
                  double(after.evaluations - before.evaluations) / kSteps);
    }
  }
}

}  // namespace
}  // namespace orion
