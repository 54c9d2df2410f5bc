// Continuous batching: B sequences decoded together give, row for row, what each gets alone.
#include <gtest/gtest.h>

#include <cstring>

#include "base/error.h"
#include "infer/batched_decode.h"
#include "infer/generate.h"
#include "infer/sampler.h"

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
    EXPECT_EQ(got[s], alone(w, prompts[s], lengths[s], adapters[s], kv)) << "sequence " << s << ", KV cache " << dtype_name(kv);
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

TEST(BatchedDecode, LlamaPromptRowsInADecodeStepEqualPrefill) { check_prompt_rows_equal_prefill(config_preset("stories260k")); }
TEST(BatchedDecode, Gpt2PromptRowsInADecodeStepEqualPrefill) { check_prompt_rows_equal_prefill(config_preset("gpt2-tiny")); }

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
