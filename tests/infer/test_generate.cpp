#include <gtest/gtest.h>

#include "infer/generate.h"
#include "runtime/cpu/kernels.h"

namespace orion {
namespace {

ModelConfig small_llama() {
  ModelConfig c = config_preset("stories260k");
  c.seq_len = 96;
  return c;
}

std::vector<int> run(Transformer& tf, const std::vector<int>& prompt, GenerateOptions o, GenerateStats* st = nullptr) {
  std::vector<int> out;
  GenerateStats s = generate(tf, prompt, o, [&](int id) { out.push_back(id); });
  if (st) *st = s;
  return out;
}

TEST(Generate, GreedyIsDeterministicAndSameAcrossThreadCounts) {
  ModelWeights w = random_weights(small_llama(), 11);
  GenerateOptions o;
  o.max_new_tokens = 40;
  o.sampler.temperature = 0;
  std::vector<std::vector<int>> outs;
  for (int threads : {1, 2, 1}) {
    cpu::set_num_threads(threads);
    Transformer tf(w);
    outs.push_back(run(tf, {1, 5, 6, 7}, o));
  }
  cpu::set_num_threads(0);
  EXPECT_EQ(outs[0].size(), 40u);
  EXPECT_EQ(outs[0], outs[1]);
  EXPECT_EQ(outs[0], outs[2]);
}

TEST(Generate, GreedyEqualsArgmaxOfFullRecompute) {
  // Each greedy token is the argmax of logits computed from scratch over the whole sequence.
  ModelWeights w = random_weights(small_llama(), 12);
  GenerateOptions o;
  o.max_new_tokens = 6;
  o.sampler.temperature = 0;
  Transformer tf(w);
  std::vector<int> seq = {1, 9, 8};
  auto out = run(tf, seq, o);
  for (int id : out) {
    Transformer fresh(w);
    const float* lg = fresh.forward(seq.data(), int(seq.size()), 0);
    EXPECT_EQ(argmax(lg, w.config.vocab_size), id);
    seq.push_back(id);
  }
}

TEST(Generate, CachedPromptPrefixContinuesTheSequenceAsAFreshPrefillWould) {
  // A chat's second turn: the KV cache holds turn one (prompt + reply); the new prompt shares only
  // part of it (the cache also holds tokens past the shared prefix, which get overwritten). Feeding
  // just the new suffix gives the tokens a fresh model gives from the whole prompt.
  ModelWeights w = random_weights(small_llama(), 14);
  GenerateOptions o;
  o.max_new_tokens = 8;
  o.sampler.temperature = 0;
  Transformer tf(w);
  std::vector<int> turn1 = {1, 9, 8, 7};
  std::vector<int> reply = run(tf, turn1, o);
  ASSERT_EQ(reply.size(), 8u);
  std::vector<int> turn2 = turn1;
  turn2.insert(turn2.end(), reply.begin(), reply.begin() + 5);  // diverges after 5 reply tokens
  turn2.insert(turn2.end(), {3, 4, 5});
  GenerateOptions cached = o;
  cached.cached_prompt_tokens = int(turn1.size()) + 5;
  GenerateStats st;
  std::vector<int> continued = run(tf, turn2, cached, &st);
  EXPECT_EQ(st.prompt_tokens, 3);  // only the new tokens were fed
  Transformer fresh(w);
  EXPECT_EQ(continued, run(fresh, turn2, o));
}

TEST(Generate, SeededSamplingIsReproducible) {
  ModelWeights w = random_weights(small_llama(), 13);
  GenerateOptions o;
  o.max_new_tokens = 30;
  o.sampler = {1.0f, 0.95f, 40, 1234};
  Transformer a(w), b(w);
  EXPECT_EQ(run(a, {1, 2}, o), run(b, {1, 2}, o));
}

TEST(Generate, StopsAtStopTokenAndAtContextEnd) {
  ModelWeights w = random_weights(small_llama(), 14);
  GenerateOptions o;
  o.sampler.temperature = 0;
  o.max_new_tokens = 5;
  Transformer tf(w);
  auto first = run(tf, {1, 3}, o);
  ASSERT_FALSE(first.empty());
  o.stop_ids = {first[2]};
  GenerateStats st;
  Transformer tf2(w);
  auto cut = run(tf2, {1, 3}, o, &st);
  EXPECT_TRUE(st.stopped_at_eos);
  EXPECT_EQ(cut, std::vector<int>(first.begin(), first.begin() + 2));
  // Asking for more than fits: generation ends at the context length without an error.
  o.stop_ids.clear();
  o.max_new_tokens = 1000;
  Transformer tf3(w);
  auto all = run(tf3, {1, 3}, o);
  EXPECT_EQ(int(all.size()), 96 - 2 + 1);
}

}  // namespace
}  // namespace orion
