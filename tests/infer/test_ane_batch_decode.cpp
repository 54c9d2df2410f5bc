// Batched decode on anesim (AneModel::decode_batch, AneSlotDecoder::decode): the rows of a step are
// the columns of one evaluation per program. Each row's logits equal that row decoded alone —
// bit for bit, since every column is computed exactly as a lone token in column 0 is — also with
// rows at different positions and with different adapters in one evaluation (stacked adapters, a
// mask per column: the other adapters' terms are exact zeros); and the compiles are the programs
// of the buckets used, however requests and adapters come and go.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
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
    const int64_t evaluations = rt.driver->counters().evaluations;
    AneModel::decode_batch(m, tok.data(), pos.data(), logits.data());
    // One evaluation per program for every row: the projections and the FFN of each layer, the final norm.
    EXPECT_EQ(rt.driver->counters().evaluations - evaluations, 2 * c.n_layers + 1) << "step " << s;
    for (int b = 0; b < rows; b++) {
      const float* ref = alone[size_t(b)]->forward(&tok[size_t(b)], 1, pos[size_t(b)]);
      EXPECT_TRUE(same_bits(logits.data() + size_t(b) * V, ref, V)) << "row " << b << " step " << s;
      tok[size_t(b)] = argmax(ref, V), pos[size_t(b)]++;
    }
  }
}

TEST(AneBatchDecode, Gpt2RowsEqualEachRowAlone) { expect_batch_equals_rows_alone(Arch::GPT2, 0, 5, 3); }
TEST(AneBatchDecode, Gpt2WithAnAdapterRowsEqualEachRowAlone) { expect_batch_equals_rows_alone(Arch::GPT2, 4, 4, 2); }
// Llama without an adapter slot: a single row projects with fwd_attn (its token at position 0),
// a batch with llama_decode_qkv, fwd_attn's projection nodes without its RoPE and attention.
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

// Rows mixing the base model and three adapters (one of them twice) in one decode_batch with
// adapter slots: each row's logits equal that row decoded alone with its adapter — within fp16
// tolerance as the contract, bit for bit on anesim — and the greedy tokens agree over the steps.
// With 4 adapter slots the projections are one evaluation per layer; with 2 they split in two.
void expect_mixed_adapters_equal_rows_alone(Arch arch, int adapter_slots) {
  cpu::set_num_threads(1);
  const ModelConfig c = small(arch);
  const ModelWeights w = random_weights(c, 29);
  const int V = c.vocab_size;
  const LoraAdapter a1 = adapter(c, 4, 1), a2 = adapter(c, 2, 2), a3 = adapter(c, 3, 3);
  const std::vector<const LoraAdapter*> of_row = {nullptr, &a1, &a2, nullptr, &a3, &a1};
  const int rows = int(of_row.size());
  AneRuntime rt("anesim"), ref("anesim");
  std::vector<std::unique_ptr<AneModel>> batched, alone;
  std::vector<int> tok(of_row.size()), pos(of_row.size());
  for (int b = 0; b < rows; b++) {
    for (auto [set, cache] : {std::pair{&batched, &rt.cache}, std::pair{&alone, &ref.cache}}) {
      set->push_back(std::make_unique<AneModel>(w, *cache, AneModelOptions{"mixed-test"}));
      set->back()->enable_lora(4);
      set->back()->set_lora(of_row[size_t(b)], b == 5 ? 0.5f : 1.0f);  // row 5: a1 at another scale
    }
    const int prompt[2] = {3 + b, 7 * b + 1};
    batched.back()->forward(prompt, 2, 0);
    tok[size_t(b)] = argmax(alone.back()->forward(prompt, 2, 0), V), pos[size_t(b)] = 2;
  }
  std::vector<AneModel*> m;
  for (auto& p : batched) m.push_back(p.get());
  const int distinct = 4;  // a1, a2, a3, a1 at scale 0.5
  const int projection_evaluations = (distinct + adapter_slots - 1) / adapter_slots;
  std::vector<float> logits(size_t(rows) * V);
  for (int s = 0; s < 3; s++) {
    const int64_t evaluations = rt.driver->counters().evaluations;
    AneModel::decode_batch(m, tok.data(), pos.data(), logits.data(), adapter_slots);
    EXPECT_EQ(rt.driver->counters().evaluations - evaluations, c.n_layers * (projection_evaluations + 1) + 1);
    for (int b = 0; b < rows; b++) {
      const float* got = logits.data() + size_t(b) * V;
      const float* want = alone[size_t(b)]->forward(&tok[size_t(b)], 1, pos[size_t(b)]);
      float scale = 0, worst = 0;
      for (int i = 0; i < V; i++)
        scale = std::max(scale, std::fabs(want[i])), worst = std::max(worst, std::fabs(got[i] - want[i]));
      EXPECT_LE(worst, 1e-2f * scale) << "row " << b << " step " << s;
      EXPECT_EQ(argmax(got, V), argmax(want, V)) << "row " << b << " step " << s;
      EXPECT_TRUE(same_bits(got, want, V)) << "row " << b << " step " << s;
      tok[size_t(b)] = argmax(want, V), pos[size_t(b)]++;
    }
  }
  // The adapters (and the scale) change the logits, so the equalities tell the rows' adapters apart.
  const int probe = 3;
  std::vector<std::vector<float>> probed;
  for (int b : {0, 1, 2, 4, 5}) {
    const float* l = alone[size_t(b)]->forward(&probe, 1, pos[size_t(b)]);
    probed.emplace_back(l, l + V);
  }
  for (size_t i = 0; i < probed.size(); i++)
    for (size_t j = i + 1; j < probed.size(); j++)
      EXPECT_FALSE(same_bits(probed[i].data(), probed[j].data(), V)) << i << " " << j;
}

TEST(AneBatchDecode, LlamaRowsWithDifferentAdaptersInOneEvaluationEqualEachRowAlone) {
  expect_mixed_adapters_equal_rows_alone(Arch::Llama, 4);
}
TEST(AneBatchDecode, Gpt2RowsWithDifferentAdaptersInOneEvaluationEqualEachRowAlone) {
  expect_mixed_adapters_equal_rows_alone(Arch::GPT2, 4);
}
TEST(AneBatchDecode, MoreAdaptersThanSlotsSplitOnlyTheProjections) {
  expect_mixed_adapters_equal_rows_alone(Arch::Llama, 2);
}

// prepare(prompt, rows, adapter_slots) compiles every program decode batches use: after it, batches
// of any width up to `rows` and any mix of adapters (none, one, several, switched) compile nothing.
void expect_prepare_covers_decode_batches(Arch arch, int lora_slot, int adapter_slots) {
  cpu::set_num_threads(1);
  const ModelConfig c = small(arch);
  const ModelWeights w = random_weights(c, 17);
  const LoraAdapter a1 = adapter(c, 4, 1), a2 = adapter(c, 2, 2);
  const LoraAdapter* choices[3] = {nullptr, &a1, &a2};
  AneRuntime rt("anesim");
  std::vector<std::unique_ptr<AneModel>> models;
  std::vector<AneModel*> m;
  for (int b = 0; b < 20; b++) {
    models.push_back(std::make_unique<AneModel>(w, rt.cache, AneModelOptions{"prepare-test"}));
    if (lora_slot > 0) models.back()->enable_lora(lora_slot);
    m.push_back(models.back().get());
  }
  const int programs = models[0]->prepare(1, 20, adapter_slots);
  EXPECT_EQ(rt.driver->counters().compiles, programs);
  std::vector<int> tok(20, 7), pos(20, 0);
  std::vector<float> logits(size_t(20) * c.vocab_size);
  int step = 0;
  for (int rows : {1, 16, 20, 3, 17}) {
    if (lora_slot > 0)  // a different mix each step (one adapter for all rows without adapter slots)
      for (int b = 0; b < rows; b++) m[size_t(b)]->set_lora(choices[adapter_slots > 0 ? (b + step) % 3 : step % 3]);
    const std::vector<AneModel*> some(m.begin(), m.begin() + rows);
    AneModel::decode_batch(some, tok.data(), pos.data(), logits.data(), adapter_slots);
    for (int b = 0; b < rows; b++) pos[size_t(b)]++;
    EXPECT_EQ(rt.driver->counters().compiles, programs) << rows << " rows";
    step++;
  }
}

TEST(AneBatchDecode, PrepareCoversLlamaDecodeBatches) { expect_prepare_covers_decode_batches(Arch::Llama, 0, 0); }
TEST(AneBatchDecode, PrepareCoversDecodeBatchesMixingAdapters) {
  expect_prepare_covers_decode_batches(Arch::Llama, 4, 3);
  expect_prepare_covers_decode_batches(Arch::GPT2, 4, 3);
}
TEST(AneBatchDecode, PrepareCoversDecodeBatchesOfOneAdapter) { expect_prepare_covers_decode_batches(Arch::GPT2, 4, 0); }

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
  AneRuntime rt("anesim"), ref("anesim");  // the rows alone compile on their own driver
  AneSlotDecoder dec(w, rt.cache, 3, 64, 4, "served");
  std::vector<std::unique_ptr<AneModel>> alone;
  std::vector<SlotDecoder::Row> rows;
  for (int s = 0; s < 3; s++) {
    alone.push_back(std::make_unique<AneModel>(w, ref.cache, AneModelOptions{"served", 64}));
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
    const int64_t evaluations = rt.driver->counters().evaluations;
    // Step 2 drops slot 1 (a request leaving), step 3 brings it back with slot 0's adapter.
    std::vector<SlotDecoder::Row> now = rows;
    if (step == 2) now.erase(now.begin() + 1);
    if (step == 3) {
      rows[1].adapter = nullptr;
      alone[1]->set_lora(nullptr);
      now = rows;
    }
    const float* lg = dec.decode(now);
    // One evaluation per program whatever the rows' adapters: Llama's 2 layers' projections and FFN, the final norm.
    EXPECT_EQ(rt.driver->counters().evaluations - evaluations, 2 * c.n_layers + 1) << "step " << step;
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

// Not a check, a measurement (run with --gtest_also_run_disabled_tests): 8 rows holding 4 adapters
// (2 rows each) decoded as one decode_batch per adapter (what AneSlotDecoder did before) and as one
// batch with 4 adapter slots, on a GPT-2 of 124M's width (2 layers, rank slot 8).
TEST(AneBatchDecode, DISABLED_MeasureMixedAdapterSteps) {
  ModelConfig c = config_preset("gpt2-124m");
  c.n_layers = 2;
  const ModelWeights w = random_weights(c, 3);
  std::vector<LoraAdapter> adapters;
  for (int i = 0; i < 4; i++) adapters.push_back(adapter(c, 8, uint64_t(i + 1)));
  AneRuntime rt("anesim");
  constexpr int kRows = 8, kSteps = 3;
  std::vector<std::unique_ptr<AneModel>> models;
  for (int b = 0; b < kRows; b++) {
    models.push_back(std::make_unique<AneModel>(w, rt.cache, AneModelOptions{"bench", 64}));
    models.back()->enable_lora(8);
    models.back()->set_lora(&adapters[size_t(b % 4)]);
  }
  models[0]->prepare(1, kRows, 4);
  models[0]->prepare(1, 2, 0);
  for (bool mixed : {false, true, false, true}) {  // twice: the first evaluations of a program warm it up
    std::vector<int> tok(kRows, 11), pos(kRows, 0);
    std::vector<float> logits(size_t(kRows) * c.vocab_size);
    const runtime::DriverCounters before = rt.driver->counters();
    const auto t0 = std::chrono::steady_clock::now();
    for (int s = 0; s < kSteps; s++) {
      if (mixed) {
        std::vector<AneModel*> m;
        for (auto& p : models) m.push_back(p.get());
        AneModel::decode_batch(m, tok.data(), pos.data(), logits.data(), 4);
      } else {
        for (int a = 0; a < 4; a++)
          AneModel::decode_batch({models[size_t(a)].get(), models[size_t(a + 4)].get()}, &tok[0], &pos[0], logits.data());
      }
      for (int& p : pos) p++;
    }
    const double host_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const runtime::DriverCounters& after = rt.driver->counters();
    std::printf(
        "%d rows, 4 adapters, %-22s host %8.2f ms/step  predicted ANE %7.3f ms/step  evaluations %3.0f/step  compiles %d\n",
        kRows, mixed ? "one mixed batch" : "one batch per adapter", host_ms / kSteps,
        (after.predicted_ane_ms - before.predicted_ane_ms) / kSteps, double(after.evaluations - before.evaluations) / kSteps,
        after.compiles - before.compiles);
  }
}

}  // namespace
}  // namespace orion
