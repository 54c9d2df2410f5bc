// Continuous batching: B sequences decoded together give, row for row, what each gets alone.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "base/error.h"
#include "infer/batched_decode.h"
#include "infer/generate.h"
#include "infer/sampler.h"
#include "runtime/cpu/kernels.h"

namespace orion {
namespace {

// Greedy tokens of `prompt` alone through the Transformer (the reference), with an adapter or not.
std::vector<int> alone(const ModelWeights& w, const std::vector<int>& prompt, int n, const LoraAdapter* ad,
                       DType kv = DType::F32) {
  Transformer tf(w, 64, kv);
  tf.set_lora(ad);
  GenerateOptions o;
  o.max_new_tokens = n;
  o.sampler.temperature = 0;
  std::vector<int> out;
  generate(tf, prompt, o, [&](int id) { out.push_back(id); });
  return out;
}

LoraAdapter random_adapter(const ModelConfig& c, uint64_t seed) {
  LoraAdapter ad(c, 4, 8.0f, {LoraTarget::Q, LoraTarget::V, LoraTarget::O, LoraTarget::W1, LoraTarget::W2});
  ad.init(seed);
  for (size_t i = 0; i < ad.size(); i++) ad.data()[i] += 0.02f * float(int((i * 2654435761u) % 101) - 50) / 50.0f;
  return ad;
}

void check_batch_equals_alone(const ModelConfig& c, DType kv = DType::F32) {
  ModelWeights w = random_weights(c, 5);
  LoraAdapter a1 = random_adapter(c, 1), a2 = random_adapter(c, 2);
  const std::vector<std::vector<int>> prompts = {{1, 5, 6, 7}, {1, 9}, {1, 30, 31, 32, 33, 34}, {1, 5, 6, 7}};
  const std::vector<const LoraAdapter*> adapters = {nullptr, &a1, &a2, &a1};
  // The sequences join at different steps and stop after different numbers of tokens.
  const std::vector<int> joins = {0, 0, 3, 5}, lengths = {12, 7, 9, 6};
  BatchedDecoder dec(w, 4, 64, kv);
  const int V = dec.vocab_size();
  std::vector<std::vector<int>> got(prompts.size());
  std::vector<int> pos(prompts.size(), 0);
  for (int step = 0; step < 20; step++) {
    for (size_t s = 0; s < prompts.size(); s++)
      if (joins[s] == step) {
        const float* lg = dec.prefill(int(s), prompts[s].data(), int(prompts[s].size()), adapters[s]);
        got[s].push_back(argmax(lg, V));
        pos[s] = int(prompts[s].size());
      }
    std::vector<BatchedDecoder::Row> rows;
    for (size_t s = 0; s < prompts.size(); s++)
      if (!got[s].empty() && int(got[s].size()) < lengths[s]) rows.push_back({int(s), got[s].back(), pos[s], adapters[s]});
    if (rows.empty()) continue;
    const float* lg = dec.decode(rows);
    for (size_t b = 0; b < rows.size(); b++) {
      got[size_t(rows[b].slot)].push_back(argmax(lg + b * size_t(V), V));
      pos[size_t(rows[b].slot)]++;
    }
  }
  for (size_t s = 0; s < prompts.size(); s++) {
    EXPECT_EQ(got[s], alone(w, prompts[s], lengths[s], adapters[s], kv))
        << "sequence " << s << ", KV cache " << dtype_name(kv);
  }
  EXPECT_NE(got[0], got[3]) << "the adapter changes the output (the test can fail)";
}

TEST(BatchedDecode, LlamaRowsEqualEachSequenceAloneWithTheirOwnAdapters) {
  check_batch_equals_alone(config_preset("stories260k"));
}

TEST(BatchedDecode, Gpt2RowsEqualEachSequenceAlone) {
  ModelConfig c = config_preset("gpt2-tiny");
  check_batch_equals_alone(c);
}

// With f16 KV caches (`orion serve --kv-cache f16`) likewise: each slot's cache rounds as the
// Transformer's does.
TEST(BatchedDecode, F16KvCacheRowsEqualEachSequenceAlone) {
  check_batch_equals_alone(config_preset("stories260k"), DType::F16);
  check_batch_equals_alone(config_preset("gpt2-tiny"), DType::F16);
}

// A prompt fed as rows of decode steps (two chunks, beside another sequence's decoding row) gives
// its last token the logits prefill() gives, bit for bit, and then the same greedy continuation.
void check_prompt_rows_equal_prefill(const ModelConfig& c) {
  ModelWeights w = random_weights(c, 7);
  LoraAdapter a1 = random_adapter(c, 1);
  const std::vector<int> prompt = {1, 30, 31, 32, 33, 34, 35, 36, 37}, other = {1, 5, 6, 7};
  const int V = c.vocab_size;
  BatchedDecoder ref(w, 1, 64);
  const float* want = ref.prefill(0, prompt.data(), int(prompt.size()), &a1);
  const std::vector<float> prefilled(want, want + V);

  BatchedDecoder dec(w, 2, 64);
  int tok = argmax(dec.prefill(1, other.data(), int(other.size()), nullptr), V), pos = int(other.size());
  auto step = [&](int from, int to) {  // slot 1 decodes one token; prompt tokens [from, to) ride along
    std::vector<BatchedDecoder::Row> rows = {{1, tok, pos, nullptr}};
    for (int i = from; i < to; i++) rows.push_back({0, prompt[size_t(i)], i, &a1, 1.0f, i + 1 == int(prompt.size())});
    const float* lg = dec.decode(rows);
    tok = argmax(lg, V), pos++;
    return lg;
  };
  step(0, 5);
  const float* lg = step(5, int(prompt.size()));
  const std::vector<float> fed(lg + V, lg + 2 * V);  // the second wanted row: the prompt's last token
  EXPECT_EQ(0, std::memcmp(fed.data(), prefilled.data(), sizeof(float) * size_t(V)))
      << "prompt rows and prefill() disagree; first logit " << fed[0] << " vs " << prefilled[0];

  std::vector<int> got = {argmax(fed.data(), V)};  // then slot 0 decodes alone
  for (int p = int(prompt.size()); got.size() < 6; p++) got.push_back(argmax(dec.decode({{0, got.back(), p, &a1}}), V));
  EXPECT_EQ(got, alone(w, prompt, 6, &a1));
}

TEST(BatchedDecode, LlamaPromptRowsInADecodeStepEqualPrefill) {
  check_prompt_rows_equal_prefill(config_preset("stories260k"));
}
TEST(BatchedDecode, Gpt2PromptRowsInADecodeStepEqualPrefill) { check_prompt_rows_equal_prefill(config_preset("gpt2-tiny")); }

// Steps of rows without adapters run every layer in one parallel region (batched_step.cpp): each
// row's logits are, bit for bit, the ones its sequence gets decoding alone (the Transformer's own
// decode step), on 1 and 2 threads — for each kind of block (GQA, biases, q/k norms, GELU and
// learned positions, a sliding window), f32 / f16 / q8_0 weights and f32 / f16 caches, rows at different positions,
// and a step carrying two more tokens of one sequence.
ModelConfig small_config(Arch arch) {
  ModelConfig c;
  c.arch = arch;
  c.dim = 64, c.hidden_dim = 96, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = arch == Arch::GPT2 ? 4 : 2;
  c.vocab_size = c.padded_vocab = 97, c.seq_len = 64, c.tied_embeddings = true;
  return c;
}

size_t rows_differing_from_alone(const ModelConfig& c, DType wt, DType kv, int threads) {
  const ModelWeights w = random_weights(c, 11, wt);
  const int S = 4, V = c.vocab_size;
  cpu::set_num_threads(threads);
  BatchedDecoder dec(w, S, 48, kv);
  std::vector<std::unique_ptr<Transformer>> alone;
  std::vector<int> tok(S), pos(S);
  size_t differing = 0;
  auto compare = [&](const float* got, const float* want) {
    for (int i = 0; i < V; i++) differing += std::memcmp(&got[i], &want[i], sizeof(float)) != 0;
  };
  for (int s = 0; s < S; s++) {  // prompts of 2 .. 5 tokens
    std::vector<int> prompt(size_t(2 + s));
    for (size_t i = 0; i < prompt.size(); i++) prompt[i] = int(1 + (7 * s + 3 * i) % (V - 1));
    alone.push_back(std::make_unique<Transformer>(w, 48, kv));
    const float* want = alone.back()->forward(prompt.data(), int(prompt.size()), 0);
    const float* got = dec.prefill(s, prompt.data(), int(prompt.size()), nullptr);
    compare(got, want);
    tok[size_t(s)] = argmax(got, V), pos[size_t(s)] = int(prompt.size());
  }
  for (int step = 0; step < 5; step++) {
    std::vector<BatchedDecoder::Row> rows;
    for (int s = 0; s < S; s++) {
      rows.push_back({s, tok[size_t(s)], pos[size_t(s)]});
      if (step == 2 && s == 1)  // two more tokens of sequence 1 ride along
        for (int i = 1; i <= 2; i++) rows.push_back({s, 10 + i, pos[size_t(s)] + i});
    }
    const float* lg = dec.decode(rows);
    for (size_t b = 0; b < rows.size(); b++) {
      const BatchedDecoder::Row& r = rows[b];
      compare(lg + b * size_t(V), alone[size_t(r.slot)]->forward(&r.token, 1, r.pos));
      tok[size_t(r.slot)] = argmax(lg + b * size_t(V), V), pos[size_t(r.slot)] = r.pos + 1;
    }
  }
  cpu::set_num_threads(0);
  return differing;
}

TEST(BatchedDecode, RowsWithoutAdaptersEqualEachSequenceDecodingAloneBitForBit) {
  ModelConfig mistral = small_config(Arch::Llama);
  mistral.sliding_window = 4;  // rows attend to their last 4 positions only
  for (const ModelConfig& c :
       {small_config(Arch::Llama), small_config(Arch::GPT2), small_config(Arch::Qwen2), small_config(Arch::Qwen3), mistral})
    for (DType wt : {DType::F32, DType::F16, DType::Q8_0})
      for (DType kv : {DType::F32, DType::F16})
        for (int threads : {1, 2})
          EXPECT_EQ(rows_differing_from_alone(c, wt, kv, threads), 0u)
              << "arch " << int(c.arch) << ", window " << c.sliding_window << ", weights " << dtype_name(wt) << ", KV cache "
              << dtype_name(kv) << ", " << threads << " threads";
}

TEST(BatchedDecode, RefusesPromptRowsOutOfOrder) {
  ModelWeights w = random_weights(config_preset("stories260k"), 5);
  BatchedDecoder dec(w, 2, 16);
  const std::vector<BatchedDecoder::Row> gap = {{0, 1, 0}, {0, 1, 2}}, backwards = {{0, 1, 1}, {0, 1, 0}};
  EXPECT_THROW(dec.decode(gap), Error);
  EXPECT_THROW(dec.decode(backwards), Error);
}

TEST(BatchedDecode, RefusesAPositionPastTheContext) {
  ModelWeights w = random_weights(config_preset("stories260k"), 5);
  BatchedDecoder dec(w, 2, 16);
  const std::vector<BatchedDecoder::Row> past_end = {{0, 1, 16, nullptr}}, same_slot = {{0, 1, 3}, {0, 1, 3}};
  EXPECT_THROW(dec.decode(past_end), Error);
  EXPECT_THROW(dec.decode(same_slot), Error);
}

}  // namespace
}  // namespace orion
