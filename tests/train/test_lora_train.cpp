// LoRA training: the adapter gradient (dA = s·Bᵀ·dW', dB = s·dW'·Aᵀ from the merged weight's)
// against finite differences; fine-tuning on a corpus the base has never seen lowers the
// validation loss there while the base weights stay bit-identical; a resumed run equals a straight
// one bit for bit; the CLI writes an adapter that `orion generate --lora` and `orion lora merge` use.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "model/io/model_io.h"
#include "runtime/cpu/bf16_weight_packs.h"
#include "runtime/cpu/train_kernels.h"
#include "model/lora/lora_io.h"
#include "model/transformer.h"
#include "support.h"
#include "train/loop/checkpoint.h"
#include "train/loop/loss_scaler.h"
#include "train/lora/lora_base16.h"
#include "train/lora/lora_train.h"

namespace orion::train {
namespace {
namespace fs = std::filesystem;

ModelConfig tiny(Arch arch) {
  ModelConfig c;
  c.arch = arch;
  c.dim = 32, c.hidden_dim = 64, c.n_layers = 2, c.n_heads = 4;
  c.n_kv_heads = arch == Arch::GPT2 ? 4 : 2;
  c.vocab_size = c.padded_vocab = 64, c.seq_len = 32;
  c.validate("test");
  return c;
}

// The Llama relatives' block features, each in a tiny config: llama3 RoPE scaling (HS = 8: pairs 1..3
// of 4 are scaled) with GQA and an untied classifier; Qwen2's q/k/v biases; Qwen3's q/k head norms
// with HS = 16 ≠ C/NH = 8; Mistral's sliding window of 3 tokens, shorter than the 8 of a sequence.
struct FeatureCase {
  const char* name;
  ModelConfig config;
};
void PrintTo(const FeatureCase& f, std::ostream* os) { *os << f.name << ": " << f.config.describe(); }

std::vector<FeatureCase> feature_cases() {
  ModelConfig llama3 = tiny(Arch::Llama);
  llama3.tied_embeddings = false;
  llama3.rope_scaling = {RopeScaling::Kind::Llama3, 8, 1, 4, 32};
  ModelConfig qwen3 = tiny(Arch::Qwen3);
  qwen3.head_size = 16;
  ModelConfig mistral = tiny(Arch::Mistral);
  mistral.sliding_window = 3;
  std::vector<FeatureCase> cases = {{"llama", tiny(Arch::Llama)}, {"gpt2", tiny(Arch::GPT2)}, {"llama3_gqa", llama3},
                                    {"qwen2", tiny(Arch::Qwen2)}, {"qwen3", qwen3},           {"mistral", mistral}};
  for (FeatureCase& f : cases) f.config.validate(f.name);
  return cases;
}

// init_params leaves biases 0 and norm gains 1, which would hide the q/k/v biases and q/k norms:
// give them values a trained model could have.
void randomize_block_extras(Params& p, uint64_t seed) {
  std::mt19937 rng{uint32_t(seed)};
  std::normal_distribution<float> n(0.0f, 0.3f);
  for (const ParamInfo& t : p.tensors()) {
    const bool bias = t.name.ends_with(".bq") || t.name.ends_with(".bk") || t.name.ends_with(".bv");
    const bool head_norm = t.name.ends_with(".q_norm") || t.name.ends_with(".k_norm");
    if (!bias && !head_norm) continue;
    for (size_t i = 0; i < t.numel; i++) p.data()[t.offset + i] = (head_norm ? 1.0f : 0.0f) + n(rng);
  }
}

// With the reference init (std 0.02) every attention score is near 0 and the attention near uniform,
// whatever RoPE or the window do: larger q and k projections (std 0.2) make the positions matter.
// Only for the feature cases, so the Llama and GPT-2 cases run as they always have.
void sharpen_attention(Params& p) {
  if (p.config().cpu_only_features().empty()) return;
  for (const ParamInfo& t : p.tensors())
    if (t.name.ends_with(".wq") || t.name.ends_with(".wk"))
      for (size_t i = 0; i < t.numel; i++) p.data()[t.offset + i] *= 10.0f;
}

class lora_train_grad : public ::testing::TestWithParam<FeatureCase> {};

// Central differences of the loss in single entries of A and B, every target of every layer, for
// both ways to the gradient: from dW' (full backward) and direct from X, dY (the LoRA-only backward).
TEST_P(lora_train_grad, AdapterGradientMatchesFiniteDifferences) {
  const ModelConfig c = GetParam().config;
  Params base(c);
  init_params(base, 3);
  randomize_block_extras(base, 8);
  sharpen_attention(base);
  Params work = base.clone();
  LoraAdapter a(c, 3, 6.0f, parse_lora_targets("all", c.arch));
  a.init(4);
  std::mt19937 rng(5);
  std::normal_distribution<float> n(0.0f, 0.2f);
  for (const LoraTensor& t : a.tensors())
    for (int64_t i = 0; i < t.out * a.rank(); i++) a.B(t)[i] = n(rng);  // B ≠ 0: dA must see it
  LoraTraining lt(work, a.clone());
  Grads g(c);
  const int B = 2, T = 8;
  TrainModel m(work, &g, B, T);
  std::vector<int> tokens(B * T), targets(B * T);
  for (int i = 0; i < B * T; i++) tokens[i] = (i * 7 + 3) % c.vocab_size, targets[i] = (i * 5 + 1) % c.vocab_size;
  m.zero_grad();
  m.forward(tokens.data(), targets.data());
  m.backward();
  lt.gather(g);  // from dW' (the full backward)
  const std::vector<float> from_dw(lt.grads(), lt.grads() + lt.adapter().size());
  // The LoRA-only backward: no dW of the frozen base; dA, dB from each projection's X and dY.
  ASSERT_TRUE(m.freeze_base(&lt));
  lt.zero_grads();
  m.zero_grad();
  m.forward(tokens.data(), targets.data());
  m.backward();
  double gmax = 0, gdiff = 0;
  for (size_t i = 0; i < from_dw.size(); i++)
    gmax = std::max(gmax, double(std::fabs(from_dw[i]))),
    gdiff = std::max(gdiff, double(std::fabs(from_dw[i] - lt.grads()[i])));
  EXPECT_LE(gdiff, 1e-5 * gmax) << "direct and dW'-derived adapter gradients differ";
  EXPECT_GT(gmax, 0.0);
  // The frozen backward wrote no weight gradient of the matrices (the buffer stays zero there).
  for (const ParamInfo& pi : g.tensors()) {
    if (pi.name.find(".w") == std::string::npos && pi.name != "tok_emb") continue;
    for (size_t i = 0; i < pi.numel; i++) ASSERT_EQ(g.data()[pi.offset + i], 0.0f) << pi.name;
  }
  auto loss_at = [&]() {
    lt.merge_into_work();
    return double(m.forward(tokens.data(), targets.data()));
  };
  const float h = 1e-2f;
  int checked = 0;
  for (const LoraTensor& t : lt.adapter().tensors()) {
    for (bool is_b : {false, true}) {
      float* p = is_b ? lt.adapter().B(t) : lt.adapter().A(t);
      const size_t off = is_b ? t.b_offset : t.a_offset;
      const int64_t count = is_b ? t.out * a.rank() : a.rank() * t.in;
      for (int64_t i : {int64_t(0), count / 2, count - 1}) {
        const float keep = p[i];
        p[i] = keep + h;
        const double up = loss_at();
        p[i] = keep - h;
        const double down = loss_at();
        p[i] = keep;
        const double fd = (up - down) / (2 * h);
        for (const float* grad : {from_dw.data() + off, (const float*)lt.grads() + off})
          EXPECT_NEAR(grad[i], fd, 2e-3 + 2e-2 * std::fabs(fd))
              << "layer " << t.layer << " " << lora_target_name(t.target) << (is_b ? " B" : " A") << "[" << i << "]"
              << (grad == lt.grads() + off ? " (direct)" : " (from dW')");
        checked++;
      }
    }
  }
  EXPECT_EQ(checked, int(lt.adapter().tensors().size()) * 6);
  lt.merge_into_work();
  // The unadapted tensors of the working parameters are the base's, bit for bit.
  for (const ParamInfo& pi : base.tensors()) {
    bool adapted = false;
    for (LoraTarget tg : a.targets()) {
      const std::string n = lora_target_name(tg);  // "q" → layers.L.wq, "w1" → layers.L.w1
      adapted |= pi.name.ends_with(n.size() == 1 ? ".w" + n : "." + n);
    }
    if (adapted) continue;
    EXPECT_EQ(0, std::memcmp(base.data() + pi.offset, work.data() + pi.offset, pi.numel * 4)) << pi.name;
  }
}

// The training forward computes what the inference block does (model/family/llama/llama_block.cpp,
// checked against transformers in tests/model/test_hf_families.cpp), each feature included.
TEST_P(lora_train_grad, TrainingForwardEqualsTheInferenceBlock) {
  const ModelConfig c = GetParam().config;
  Params p(c);
  init_params(p, 3);
  randomize_block_extras(p, 8);
  sharpen_attention(p);
  for (size_t i = 0; i < p.tensor("tok_emb").numel; i++) p.tok_emb[i] *= 30.0f;  // logits of a useful size
  const int T = 8;
  std::vector<int> tokens(T);
  for (int i = 0; i < T; i++) tokens[size_t(i)] = (i * 7 + 3) % c.vocab_size;
  TrainModel m(p, nullptr, 1, T);
  m.forward(tokens.data(), nullptr);
  const ModelWeights w = p.view();  // Transformer keeps a reference
  Transformer tf(w);
  const float* want = tf.forward(tokens.data(), T, 0, /*all_logits=*/true);
  double worst = 0, scale = 0;
  for (size_t i = 0; i < size_t(T) * c.vocab_size; i++)
    worst = std::max(worst, double(std::fabs(m.logits()[i] - want[i]))), scale = std::max(scale, double(std::fabs(want[i])));
  EXPECT_GT(scale, 0.1);
  EXPECT_LT(worst, 1e-4 * scale) << c.describe();
}

INSTANTIATE_TEST_SUITE_P(Arch, lora_train_grad, ::testing::ValuesIn(feature_cases()),
                         [](const auto& i) { return std::string(i.param.name); });

// A base model (random init, so it has seen nothing) and a target corpus with structure to learn:
// 8 of the 64 tokens in a fixed cycle, restarting at a random point of it every 16 tokens (the
// unigram entropy is ln 8 = 2.08; knowing the cycle, only the restarts are uncertain).
struct Rig {
  std::string dir = test::temp_dir();
  std::string model;
  std::string data = dir + "/data";
  explicit Rig(const ModelConfig& c) {
    Params p(c);
    init_params(p, 9);
    // Embedding norms like a trained model's (std 0.6): with the reference init (0.02) the frozen,
    // tied classifier caps every logit near ±0.6, and no adapter could make a prediction sharp.
    for (size_t i = 0; i < p.tensor("tok_emb").numel; i++) p.tok_emb[i] *= 30.0f;
    randomize_block_extras(p, 10);  // q/k/v biases, q/k norms (none in Llama, GPT-2)
    // A Hugging Face folder for GPT-2 and Llama's relatives (their features need it), llama2.c's .bin for Llama.
    const bool bin = c.arch == Arch::Llama && c.cpu_only_features().empty();
    model = dir + (c.arch == Arch::GPT2 ? "/base-gpt2" : bin ? "/base.bin" : "/base-hf");
    save_model(p.view(), model, bin ? ModelFormat::Llama2c : ModelFormat::Safetensors);
    fs::create_directories(data);
    for (auto [name, n, seed] : {std::tuple{"target_train.bin", 6000, 1u}, std::tuple{"target_val.bin", 1200, 2u}}) {
      std::vector<uint16_t> toks(static_cast<size_t>(n));
      uint32_t s = seed;
      int at = 0;  // position in the cycle
      for (int i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        at = i % 16 == 0 ? int((s >> 10) % 8) : (at + 1) % 8;
        toks[size_t(i)] = uint16_t((at * 23 + 5) % c.vocab_size);  // 8 of the 64 tokens, in a fixed cycle
      }
      std::ofstream(data + "/" + name, std::ios::binary).write(reinterpret_cast<const char*>(toks.data()), n * 2);
    }
  }
  LoraTrainOptions options(int steps) const {
    LoraTrainOptions o;
    o.model = model, o.train.data = data, o.train.out = dir + "/run";
    o.rank = 8, o.alpha = 16, o.targets = "q,v,o,w2";
    o.train.steps = steps, o.train.batch = 4, o.train.seq = 32, o.train.lr = 2e-2f, o.train.warmup = 0;
    o.train.eval_every = 0, o.train.checkpoint_every = 0, o.train.progress = false;
    return o;
  }
};

TEST(lora_train, FineTuningLowersValidationLossAndLeavesTheBaseBitIdentical) {
  const ModelConfig c = tiny(Arch::Llama);
  Rig rig(c);
  const uint64_t file_before = hash_file(rig.model);
  LoraTrainer t(rig.options(60));
  const float before = t.evaluate();
  TrainResult r = t.run();
  std::printf("  val loss %.4f -> %.4f (ln V = %.4f), %.0f tok/s\n", before, r.val_loss, std::log(double(c.vocab_size)),
              r.tokens_per_second);
  EXPECT_LT(r.val_loss, 2.0f) << "the adapter did not learn the target corpus beyond its unigrams (ln 8 = 2.08)";
  EXPECT_GT(before, 3.5f) << "the base must not know the corpus";
  // The base: the file, the frozen copies of the adapted matrices, every unadapted tensor.
  EXPECT_EQ(file_before, hash_file(rig.model));
  const Params base = Params::from_weights(load_model(rig.model));
  for (size_t i = 0; i < t.adapter().tensors().size(); i++) {
    const LoraTensor& lt = t.adapter().tensors()[i];
    const float* W = nullptr;
    const LayerParams& l = base.layers[size_t(lt.layer)];
    switch (lt.target) {
      case LoraTarget::Q: W = l.wq; break;
      case LoraTarget::V: W = l.wv; break;
      case LoraTarget::O: W = l.wo; break;
      case LoraTarget::W2: W = l.w2; break;
      default: FAIL();
    }
    EXPECT_EQ(0, std::memcmp(W, t.lora().base_matrix(i), size_t(lt.out * lt.in) * 4));
  }
  for (const char* name : {"tok_emb", "layers.0.wk", "layers.1.w1", "layers.1.w3", "layers.0.attn_norm", "final_norm"}) {
    const ParamInfo& pi = base.tensor(name);
    EXPECT_EQ(0, std::memcmp(base.data() + pi.offset, t.work().data() + pi.offset, pi.numel * 4)) << name;
  }
  // The adapter written at the end reads back, and applied unmerged to the base it gives the
  // trained model's validation behaviour (merge_lora of the file == the working weights).
  const LoraAdapter saved = load_lora(rig.dir + "/run", c);
  EXPECT_EQ(0, std::memcmp(saved.data(), t.adapter().data(), saved.size() * 4));
  const ModelWeights merged = merge_lora(load_model(rig.model), saved);
  const ParamInfo& wq = base.tensor("layers.1.wq");
  double diff = 0;
  for (size_t i = 0; i < wq.numel; i++)
    diff = std::max(diff, double(std::fabs(merged.layers[1].wq.f32()[i] - t.work().data()[wq.offset + i])));
  EXPECT_EQ(diff, 0.0) << "merge_lora and the trainer's merge are the same sum";
}

// --precision bf16 keeps bf16 packs of the weights the products multiply
// (runtime/cpu/bf16_weight_packs.h). An adapter update changes only the adapted matrices
// (W' = W + s·B·A), and only they are repacked: after the first step, which packs every weight
// once, each step packs exactly as many weights as the adapter has tensors. Every use of a pack is
// checked against a fresh one (ORION_VERIFY_WEIGHT_PACKS), and the losses are those of a run that
// keeps no packs, bit for bit.
TEST(lora_train, Bf16RepacksOnlyTheAdaptedMatrices) {
  if (!cpu::bf16_dot_available()) GTEST_SKIP() << "no AVX512-BF16 (vdpbf16ps) on this CPU: packs are never kept";
  const ModelConfig c = tiny(Arch::Llama);
  Rig rig(c);
  setenv("ORION_VERIFY_WEIGHT_PACKS", "1", 1);
  size_t adapted = 0;
  auto run = [&](bool packs, std::vector<size_t>& packed) {
    setenv("ORION_WEIGHT_PACKS", packs ? "1" : "0", 1);
    LoraTrainOptions o = rig.options(5);
    o.train.precision = "bf16";
    LoraTrainer t(o);
    adapted = t.adapter().tensors().size();
    std::vector<float> losses;
    for (int s = 0; s < 5; s++) {
      const size_t before = cpu::weights_packed_by_refresh();
      losses.push_back(t.step().loss);
      packed.push_back(cpu::weights_packed_by_refresh() - before);
    }
    return losses;
  };
  std::vector<size_t> kept, none;
  const std::vector<float> with = run(true, kept), without = run(false, none);
  unsetenv("ORION_WEIGHT_PACKS");
  unsetenv("ORION_VERIFY_WEIGHT_PACKS");
  ASSERT_GT(adapted, 0u);
  EXPECT_GT(kept[0], adapted) << "the first step packs every weight the products noted";
  for (size_t s = 1; s < kept.size(); s++) EXPECT_EQ(kept[s], adapted) << "step " << s << ": the adapted matrices only";
  for (size_t n : none) EXPECT_EQ(n, 0u) << "ORION_WEIGHT_PACKS=0 keeps none";
  EXPECT_TRUE(with == without) << "losses bit-identical with and without kept packs";
}

// --base-dtype f16 / bf16: the frozen block matrices held once in 16 bits (exactly half the fp32
// bytes; plus one fp32 layer buffer), the loss still falls as with the fp32 base, and the adapter
// learns the same thing (the base differs only by its 16-bit rounding).
TEST(lora_train, Base16KeepsLearningWithHalfTheBaseMemory) {
  ModelConfig c = tiny(Arch::Llama);
  c.dim = 64, c.hidden_dim = 128, c.n_layers = 4;
  Rig rig(c);
  const uint64_t file_before = hash_file(rig.model);
  size_t matrices = 0;  // fp32 bytes of the block matrices
  const Params full(c);
  for (const ParamInfo& pi : full.tensors())
    if (pi.matrix() && pi.name.starts_with("layers.")) matrices += pi.numel * 4;
  std::map<std::string, float> start, val;
  std::map<std::string, size_t> bytes;
  for (const char* dt : {"f32", "f16", "bf16"}) {
    LoraTrainOptions o = rig.options(40);
    o.base_dtype = dt, o.train.out = rig.dir + "/" + dt;
    LoraTrainer t(o);
    EXPECT_TRUE(t.direct_gradients()) << dt;
    start[dt] = t.evaluate();
    val[dt] = t.run().val_loss;
    bytes[dt] = t.base_bytes();
    std::printf("  base %-4s: val loss %.4f -> %.4f | base matrices held: %zu bytes\n", dt, start[dt], val[dt], bytes[dt]);
    EXPECT_LT(val[dt], 0.2f * start[dt]) << dt << ": the loss did not fall";
  }
  EXPECT_GT(bytes["f32"], matrices) << "the fp32 path also keeps copies of the adapted matrices";
  // 16 bits: exactly half of the fp32 matrices, plus one layer of fp32 (matrices / L). The model
  // before training is the fp32 one up to the base's rounding (the training paths then diverge as
  // any two runs with different rounding do, so only the falling loss is asserted there).
  for (const char* dt : {"f16", "bf16"}) {
    EXPECT_EQ(bytes[dt], matrices / 2 + matrices / size_t(c.n_layers)) << dt;
    EXPECT_NEAR(start[dt], start["f32"], (dt[0] == 'f' ? 1e-3 : 1e-2) * start["f32"]) << dt;
    EXPECT_NE(start[dt], start["f32"]) << dt << ": the base was not rounded to 16 bits";
  }
  EXPECT_EQ(file_before, hash_file(rig.model));
  // The option is refused where it does not apply, with a hint.
  LoraTrainOptions bad = rig.options(1);
  bad.base_dtype = "f16", bad.train.backend = "anesim";
  EXPECT_THROW(LoraTrainer{bad}, Error);
  bad.base_dtype = "f8", bad.train.backend = "cpu";
  EXPECT_THROW(LoraTrainer{bad}, Error);
}

// A base stored in the 16-bit dtype asked for (a bf16 file, memory-mapped) is used where it lies —
// the same bytes, not a copy — and stays readable after the loaded model is let go (the trainer
// drops it); any other dtype is converted into buffers of its own.
TEST(lora_train, Base16UsesAMatchingBaseInPlace) {
  ModelConfig c = tiny(Arch::Llama);
  const std::string dir = test::temp_dir();
  save_model(random_weights(c, 3, DType::BF16), dir + "/bf16", ModelFormat::Safetensors);
  auto loaded = std::make_unique<ModelWeights>(load_model(dir + "/bf16"));
  const void* wq0 = loaded->layers[0].wq.data;
  Base16Weights in_place(*loaded, DType::BF16), converted(*loaded, DType::F16);
  EXPECT_EQ(in_place.w.layers[0].wq.data, wq0);
  EXPECT_NE(converted.w.layers[0].wq.data, wq0);
  EXPECT_EQ(converted.w.layers[0].wq.dtype, DType::F16);
  EXPECT_EQ(in_place.bytes, converted.bytes);
  loaded.reset();
  const ModelWeights fresh = load_model(dir + "/bf16");
  const Tensor& a = in_place.w.layers[c.n_layers - 1].w2;
  EXPECT_EQ(std::memcmp(a.data, fresh.layers[c.n_layers - 1].w2.data, a.nbytes()), 0);
}

TEST(lora_train, ResumedRunEqualsAStraightRunBitForBit) {
  const ModelConfig c = tiny(Arch::GPT2);
  Rig rig(c);
  LoraTrainOptions straight = rig.options(8);
  straight.train.out = rig.dir + "/straight";
  LoraTrainer a(straight);
  a.run();
  LoraTrainOptions first = rig.options(8);
  first.train.out = rig.dir + "/resumed";
  {
    LoraTrainer b(first);
    for (int i = 0; i < 3; i++) b.step();
    b.save();
  }
  first.resume = true;
  LoraTrainer b(first);
  EXPECT_EQ(b.step_index(), 3);
  b.run();
  ASSERT_EQ(a.adapter().size(), b.adapter().size());
  EXPECT_EQ(0, std::memcmp(a.adapter().data(), b.adapter().data(), a.adapter().size() * 4));
}

// A dynamic loss scale (growing after every 2 clean steps) goes on after a resume from where the
// checkpoint left it, not from its initial value.
TEST(lora_train, ResumedRunContinuesTheDynamicLossScale) {
  const ModelConfig c = tiny(Arch::Llama);
  Rig rig(c);
  auto options = [&](const std::string& out) {
    LoraTrainOptions o = rig.options(7);
    o.train.loss_scale = "dynamic", o.train.loss_scale_window = 2, o.train.out = rig.dir + out;
    return o;
  };
  LoraTrainer a(options("/straight"));
  a.run();
  LoraTrainOptions first = options("/resumed");
  {
    LoraTrainer b(first);
    for (int i = 0; i < 3; i++) b.step();
    b.save();
  }
  first.resume = true;
  LoraTrainer b(first);
  EXPECT_EQ(b.state().loss_scale, 2 * LossScaler::kInitialScale) << "one doubling in the first 3 steps";
  EXPECT_EQ(b.state().loss_scale_clean_steps, 1);
  b.run();
  EXPECT_EQ(b.state().loss_scale, a.state().loss_scale);
  EXPECT_EQ(a.state().loss_scale, 8 * LossScaler::kInitialScale) << "7 clean steps: three doublings";
  EXPECT_EQ(0, std::memcmp(a.adapter().data(), b.adapter().data(), a.adapter().size() * 4));
}

// Gradient accumulation: 2 micro-batches of B rows are one batch of 2B rows (the same rows — the
// shuffle is over windows, whatever B), so the losses and the adapter agree up to float summation
// order; and the loss of the 2-micro-batch step is not just its first micro-batch's.
TEST(lora_train, AccumulatingTwoMicroBatchesEqualsTwiceTheBatch) {
  const ModelConfig c = tiny(Arch::Llama);
  Rig rig(c);
  LoraTrainOptions twice = rig.options(4), accum = rig.options(4), half = rig.options(4);
  twice.train.batch = 8, twice.train.out = rig.dir + "/twice";
  accum.train.batch = 4, accum.train.accum = 2, accum.train.out = rig.dir + "/accum";
  half.train.batch = 4, half.train.out = rig.dir + "/half";
  LoraTrainer a(twice), b(accum), h(half);
  for (int s = 0; s < 4; s++) {
    const StepStats x = a.step(), y = b.step(), z = h.step();
    EXPECT_NEAR(y.loss, x.loss, 1e-5 * x.loss) << "step " << s;
    EXPECT_NEAR(y.grad_norm, x.grad_norm, 1e-4 * x.grad_norm + 1e-7) << "step " << s;
    if (s == 0) EXPECT_NE(y.loss, z.loss) << "the accumulated step saw its second micro-batch";
  }
  double max_diff = 0, max_b = 0;
  for (size_t i = 0; i < a.adapter().size(); ++i)
    max_diff = std::max(max_diff, double(std::fabs(a.adapter().data()[i] - b.adapter().data()[i])));
  for (const LoraTensor& t : a.adapter().tensors())
    for (int64_t i = 0; i < t.out * a.adapter().rank(); ++i) max_b = std::max(max_b, double(std::fabs(a.adapter().B(t)[i])));
  EXPECT_GT(max_b, 1e-3) << "the adapter learned something";
  EXPECT_LE(max_diff, 1e-3 * max_b);
}

// run() with stop_after writes a checkpoint and stops; a resumed run() finishes the run with the
// adapter and the logged losses of an uninterrupted one, bit for bit; the metrics log has one line
// per step, the redone steps not twice.
TEST(lora_train, StoppedAndResumedRunEqualsAStraightRunWithItsMetrics) {
  const ModelConfig c = tiny(Arch::Llama);
  Rig rig(c);
  LoraTrainOptions straight = rig.options(6);
  straight.train.out = rig.dir + "/straight", straight.train.eval_every = 2, straight.train.accum = 2;
  LoraTrainer a(straight);
  const TrainResult ra = a.run();
  LoraTrainOptions stopped = straight;
  stopped.train.out = rig.dir + "/stopped", stopped.train.stop_after = 4;
  int events = 0;
  stopped.train.progress = true;  // events, not lines: nothing is printed
  stopped.train.on_progress = [&](const ProgressEvent& e) { events += e.kind == ProgressEvent::Kind::Step; };
  {
    LoraTrainer b(stopped);
    const TrainResult rb = b.run();
    EXPECT_EQ(rb.steps_done, 4);
    EXPECT_EQ(rb.model, "") << "no adapter before the run is complete";
    EXPECT_TRUE(fs::exists(rig.dir + "/stopped/checkpoints/lora_00000004.olora"));
  }
  EXPECT_EQ(events, 4) << "one Step event per step";
  stopped.train.stop_after = 0, stopped.resume = true;
  LoraTrainer b(stopped);
  EXPECT_EQ(b.step_index(), 4);
  const TrainResult rb = b.run();
  EXPECT_EQ(rb.steps_done, 6);
  EXPECT_EQ(ra.val_loss, rb.val_loss);
  EXPECT_EQ(0, std::memcmp(a.adapter().data(), b.adapter().data(), a.adapter().size() * 4));
  auto losses = [](const std::string& path) {
    std::vector<std::pair<int64_t, double>> out;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
      const auto j = nlohmann::json::parse(line);
      out.emplace_back(j.at("step").get<int64_t>(), j.at("loss").get<double>());
    }
    return out;
  };
  const auto la = losses(rig.dir + "/straight/metrics.jsonl"), lb = losses(rig.dir + "/stopped/metrics.jsonl");
  ASSERT_EQ(la.size(), 6u);
  EXPECT_EQ(la, lb);
  EXPECT_TRUE(fs::exists(rig.dir + "/stopped/adapter.olora"));
}

// The ANE tests' model (test_anesim_train.cpp's, whose attention kernels meet C7 at T = 128) and
// their options: one sequence of 128 tokens a step on `backend`.
ModelConfig anesim_config(int n_kv_heads, Arch arch = Arch::Llama) {
  ModelConfig c = tiny(arch);
  c.dim = 192, c.hidden_dim = 256, c.n_heads = 6, c.n_kv_heads = n_kv_heads, c.vocab_size = c.padded_vocab = 128,
  c.seq_len = 128;
  return c;
}
LoraTrainOptions on_backend(const Rig& rig, const char* backend, int steps) {
  LoraTrainOptions o = rig.options(steps);
  o.train.backend = backend, o.train.batch = 1, o.train.seq = 128, o.train.lr = 5e-3f, o.train.out = rig.dir + "/" + backend;
  return o;
}

// The ANE path for adapters the adapter-input kernels do not cover (here o and w2 besides q, v): the
// blocks as programs on anesim over the merged W'. The adapter follows the CPU run within fp16
// tolerance, the base stays bit-identical, and the weight updates after each step compile nothing
// (weights as inputs).
TEST(lora_train, AnesimPathFollowsTheCpuAndCompilesOnce) {
  Rig rig(anesim_config(6));
  LoraTrainer cpu(on_backend(rig, "cpu", 3)), ane(on_backend(rig, "anesim", 3));
  EXPECT_TRUE(ane.lora().merged());
  std::vector<int> compiles;
  for (int i = 0; i < 3; i++) {
    const StepStats a = cpu.step(), b = ane.step();
    compiles.push_back(ane.ane_blocks()->driver().counters().compiles);
    std::printf("  step %d: loss cpu %.5f anesim %.5f | adapter gradient norm cpu %.5f anesim %.5f | compiles %d\n", i,
                a.loss, b.loss, a.grad_norm, b.grad_norm, compiles.back());
    EXPECT_NEAR(b.loss, a.loss, 1e-2 * std::fabs(a.loss));
    EXPECT_NEAR(b.grad_norm, a.grad_norm, 2e-2 * a.grad_norm);  // dA, dB from the ANE's activations
  }
  EXPECT_GT(compiles[0], 0);
  EXPECT_EQ(compiles[2], compiles[0]) << "weight updates after each step must not compile";
  const ParamInfo& wk = ane.work().tensor("layers.1.wk");
  const Params base = Params::from_weights(load_model(rig.model));
  EXPECT_EQ(0, std::memcmp(base.data() + wk.offset, ane.work().data() + wk.offset, wk.numel * 4));
}

// GPT-2 on the ANE path (merged W'): its runner's LoRA-only backward reports X and dY of the
// adapted projections from the programs' outputs, and the adapter gradients follow the CPU's.
TEST(lora_anesim_train, Gpt2MergedPathFollowsTheCpu) {
  Rig rig(anesim_config(6, Arch::GPT2));
  LoraTrainer cpu(on_backend(rig, "cpu", 2)), ane(on_backend(rig, "anesim", 2));
  EXPECT_TRUE(ane.direct_gradients() && ane.lora().merged());
  for (int i = 0; i < 2; i++) {
    const StepStats a = cpu.step(), b = ane.step();
    std::printf("  step %d: loss cpu %.5f anesim %.5f | adapter gradient norm cpu %.5f anesim %.5f\n", i, a.loss, b.loss,
                a.grad_norm, b.grad_norm);
    EXPECT_NEAR(b.loss, a.loss, 1e-2 * std::fabs(a.loss));
    EXPECT_NEAR(b.grad_norm, a.grad_norm, 2e-2 * a.grad_norm);
    EXPECT_GT(a.grad_norm, 0.0f);
  }
}

// The ANE path as designed for adapters (adapters on q and v): the base baked into the programs once,
// A and s·B program inputs, dA and dB on the CPU from the ANE's xnorm, dq (before RoPE) and dv. Over
// `steps` steps the losses and adapter gradients follow the CPU run within fp16 tolerance, the compile
// count after the first step never moves (the adapter changes every step, and a swapped-in adapter
// compiles nothing either), no program is ever updated, and the working parameters are the base
// file's bit for bit — nothing is merged.
void adapter_inputs_follow_the_cpu(Arch arch, int n_kv_heads, int steps) {
  Rig rig(anesim_config(n_kv_heads, arch));
  auto options = [&](const char* backend) {
    LoraTrainOptions o = on_backend(rig, backend, steps);
    o.targets = "q,v", o.rank = 8, o.alpha = 16;
    return o;
  };
  LoraTrainer cpu(options("cpu")), ane(options("anesim"));
  EXPECT_TRUE(cpu.direct_gradients() && ane.direct_gradients());
  EXPECT_TRUE(cpu.lora().merged());
  EXPECT_FALSE(ane.lora().merged()) << "the ANE path must apply the adapter in its programs, not merge it";
  const std::vector<float> start(ane.adapter().data(), ane.adapter().data() + ane.adapter().size());
  std::vector<int> compiles;
  for (int i = 0; i < steps; i++) {
    const StepStats a = cpu.step(), b = ane.step();
    compiles.push_back(ane.ane_blocks()->driver().counters().compiles);
    std::printf("  step %2d: loss cpu %.5f anesim %.5f | adapter gradient norm cpu %.5f anesim %.5f | compiles %d\n", i,
                a.loss, b.loss, a.grad_norm, b.grad_norm, compiles.back());
    EXPECT_NEAR(b.loss, a.loss, 1e-2 * std::fabs(a.loss)) << "step " << i;
    EXPECT_NEAR(b.grad_norm, a.grad_norm, 3e-2 * a.grad_norm) << "step " << i;
    EXPECT_GT(a.grad_norm, 0.0f) << "step " << i;
  }
  EXPECT_GT(compiles[0], 0);
  for (int n : compiles) EXPECT_EQ(n, compiles[0]) << "an adapter step compiled";
  EXPECT_EQ(ane.ane_blocks()->updates().updates, 0) << "the frozen base's programs are never updated";
  // The adapters trained on both paths agree (fp16 programs vs fp32), and training moved them.
  double diff = 0, norm = 0, moved = 0;
  for (size_t i = 0; i < cpu.adapter().size(); i++) {
    diff += std::pow(double(cpu.adapter().data()[i]) - ane.adapter().data()[i], 2),
        norm += std::pow(double(cpu.adapter().data()[i]), 2);
    moved += std::pow(double(ane.adapter().data()[i]) - start[i], 2);
  }
  std::printf("  adapter after %d steps: |anesim − cpu| / |cpu| = %.3g, |anesim − start| / |cpu| = %.3g\n", steps,
              std::sqrt(diff / norm), std::sqrt(moved / norm));
  EXPECT_LT(std::sqrt(diff / norm), 2e-2);
  EXPECT_GT(moved, 10 * diff) << "the adapter barely moved: the comparison would prove nothing";
  // The base: every parameter of the working buffer equals the file's, bit for bit.
  const Params base = Params::from_weights(load_model(rig.model));
  ASSERT_EQ(base.size(), ane.work().size());
  EXPECT_EQ(0, std::memcmp(base.data(), ane.work().data(), base.size() * 4));
  // Swapping in another adapter (the CPU's) is a host-side input change: the validation loss follows
  // the CPU's with it, and nothing compiles.
  std::memcpy(ane.adapter().data(), cpu.adapter().data(), cpu.adapter().size() * 4);
  ane.adapter_changed();
  const float cpu_val = cpu.evaluate(), ane_val = ane.evaluate();
  std::printf("  validation with the CPU's adapter: cpu %.5f anesim %.5f\n", cpu_val, ane_val);
  EXPECT_NEAR(ane_val, cpu_val, 1e-2 * std::fabs(cpu_val));
  EXPECT_EQ(ane.ane_blocks()->driver().counters().compiles, compiles[0]);
}

TEST(lora_anesim_train, AdapterInputsFollowTheCpuCompileOnceAndKeepTheBaseBitIdentical) {
  adapter_inputs_follow_the_cpu(Arch::Llama, 3, 10);  // grouped-query attention
}

// GPT-2 (biases, LayerNorm, no RoPE): gpt2_lora_fwd_attn / gpt2_lora_qkv_bwd in the GPT-2 runner.
TEST(lora_anesim_train, Gpt2AdapterInputsFollowTheCpuCompileOnceAndKeepTheBaseBitIdentical) {
  adapter_inputs_follow_the_cpu(Arch::GPT2, 6, 6);
}

TEST(lora_train, CliTrainInfoMergeAndErrors) {
  const ModelConfig c = tiny(Arch::Llama);
  Rig rig(c);
  // A llama2.c tokenizer is needed by generate: the byte-level one from `orion tokenizer train`.
  std::string out, err;
  const std::string run = rig.dir + "/cli";
  ASSERT_EQ(
      0, test::run_orion(fmt::format("lora train --model {} --data {} --rank 4 --targets q,v --steps 6 --batch 2 --seq 16 "
                                     "--out {} --threads 1",
                                     rig.model, rig.data, run),
                         &out, &err))
      << err;
  EXPECT_NE(out.find("adapter:"), std::string::npos) << out;
  EXPECT_TRUE(fs::exists(run + "/adapter.olora"));
  EXPECT_TRUE(fs::exists(run + "/adapter_model.safetensors"));
  EXPECT_TRUE(fs::exists(run + "/adapter_config.json"));
  ASSERT_EQ(0, test::run_orion(fmt::format("lora info --model {} --lora {}", rig.model, run), &out, &err)) << err;
  EXPECT_NE(out.find("LoRA r=4"), std::string::npos) << out;
  ASSERT_EQ(0, test::run_orion(fmt::format("lora merge --model {} --lora {} --out {}/merged.bin", rig.model, run, rig.dir),
                               &out, &err))
      << err;
  const ModelWeights merged = load_model(rig.dir + "/merged.bin");
  const ModelWeights want = merge_lora(load_model(rig.model), load_lora(run, c));
  EXPECT_EQ(0, std::memcmp(merged.layers[0].wq.data, want.layers[0].wq.data, want.layers[0].wq.nbytes()));
  // Clear errors: a bad adapter path, a bad target.
  EXPECT_EQ(3, test::run_orion(fmt::format("lora merge --model {} --lora {}/nothing --out {}/x.bin", rig.model, rig.dir,
                                           rig.dir),
                               &out, &err));
  EXPECT_NE(err.find("nothing"), std::string::npos) << err;
  EXPECT_EQ(2, test::run_orion(fmt::format("lora train --model {} --data {} --targets q,zz --steps 1 --seq 16 --out {}/y",
                                           rig.model, rig.data, rig.dir),
                               &out, &err));
  EXPECT_NE(err.find("unknown LoRA target 'zz'"), std::string::npos) << err;
  // --base-dtype: bf16 trains; with the ANE backend it is refused with a hint.
  ASSERT_EQ(0,
            test::run_orion(
                fmt::format("lora train --model {} --data {} --targets q,v --steps 2 --batch 2 --seq 16 --base-dtype bf16 "
                            "--out {}/b16 --threads 1",
                            rig.model, rig.data, rig.dir),
                &out, &err))
      << err;
  EXPECT_TRUE(fs::exists(rig.dir + "/b16/adapter.olora"));
  EXPECT_EQ(
      2, test::run_orion(fmt::format("lora train --model {} --data {} --steps 1 --seq 16 --base-dtype f16 --backend anesim "
                                     "--out {}/z",
                                     rig.model, rig.data, rig.dir),
                         &out, &err));
  EXPECT_NE(err.find("--base-dtype"), std::string::npos) << err;
}

std::vector<float> all_logits(const ModelWeights& w, const LoraAdapter* a) {
  Transformer tf(w);
  tf.set_lora(a);
  const int tokens[] = {5, 28, 51, 10, 33, 56, 15, 38};  // on the corpus' cycle
  const float* l = tf.forward(tokens, 8, 0, /*all_logits=*/true);
  return std::vector<float>(l, l + 8 * w.config.vocab_size);
}

class lora_train_hf : public ::testing::TestWithParam<FeatureCase> {};

// `orion lora train` on a Hugging Face folder of a Llama relative: the PEFT adapter it writes reads
// back bit for bit as the Orion one, and the merged model (`orion lora merge`, written as a Hugging
// Face folder and read back) gives the logits of the base with the adapter applied unmerged.
TEST_P(lora_train_hf, PeftAdapterReadsBackAndMergesAsApplied) {
  const ModelConfig c = GetParam().config;
  Rig rig(c);
  std::string out, err;
  const std::string run = rig.dir + "/run";
  ASSERT_EQ(0, test::run_orion(fmt::format("lora train --model {} --data {} --rank 4 --targets all --steps 4 --batch 2 "
                                           "--seq 16 --lr 0.02 --out {} --threads 1",
                                           rig.model, rig.data, run),
                               &out, &err))
      << err;
  const ModelWeights base = load_model(rig.model);
  const LoraAdapter orion = load_lora(run + "/adapter.olora", c);
  const LoraAdapter peft = load_lora(run + "/adapter_model.safetensors", c);
  ASSERT_EQ(orion.size(), peft.size());
  EXPECT_EQ(orion.targets(), peft.targets());
  EXPECT_EQ(0, std::memcmp(orion.data(), peft.data(), orion.size() * sizeof(float))) << "the PEFT tensors differ";
  double bmax = 0;  // trained: B moved off zero
  for (const LoraTensor& t : orion.tensors())
    for (int64_t i = 0; i < t.out * orion.rank(); i++) bmax = std::max(bmax, double(std::fabs(orion.B(t)[i])));
  EXPECT_GT(bmax, 1e-4);

  ASSERT_EQ(0, test::run_orion(fmt::format("lora merge --model {} --lora {} --out {}/merged", rig.model,
                                           run + "/adapter_model.safetensors", rig.dir),
                               &out, &err))
      << err;
  const std::vector<float> plain = all_logits(base, nullptr), unmerged = all_logits(base, &peft);
  const std::vector<float> merged = all_logits(load_model(rig.dir + "/merged"), nullptr);
  double moved = 0, diff = 0;
  for (size_t i = 0; i < plain.size(); i++)
    moved = std::max(moved, double(std::fabs(unmerged[i] - plain[i]))),
    diff = std::max(diff, double(std::fabs(unmerged[i] - merged[i])));
  EXPECT_GT(moved, 1e-3) << "the adapter must change the logits";
  EXPECT_LT(diff, 1e-5);

  // A 16-bit base trains too, and so does the whole model (full-parameter training on the CPU);
  // the ANE path refuses the model's feature, for both.
  ASSERT_EQ(0, test::run_orion(fmt::format("lora train --model {} --data {} --rank 4 --targets q,v --steps 2 --batch 2 "
                                           "--seq 16 --base-dtype bf16 --out {}/b16 --threads 1",
                                           rig.model, rig.data, rig.dir),
                               &out, &err))
      << err;
  EXPECT_TRUE(fs::exists(rig.dir + "/b16/adapter.olora"));
  ASSERT_EQ(0,
            test::run_orion(fmt::format("train --init {} --data {} --steps 2 --batch 2 --seq 16 --out {}/full --threads 1",
                                        rig.model, rig.data, rig.dir),
                            &out, &err))
      << err;
  const ModelWeights full = load_model(rig.dir + "/full/model");  // a Hugging Face folder: a .bin cannot hold the feature
  EXPECT_EQ(full.config.describe(), c.describe());
  EXPECT_NE(0, std::memcmp(full.layers[0].wq.data, base.layers[0].wq.data, base.layers[0].wq.nbytes())) << "not trained";
  const std::string feature = c.cpu_only_features().at(0);
  EXPECT_NE(0, test::run_orion(fmt::format("train --init {} --data {} --steps 1 --batch 2 --seq 16 --backend anesim "
                                           "--out {}/full-ane",
                                           rig.model, rig.data, rig.dir),
                               &out, &err));
  EXPECT_NE(err.find("training on the ANE path does not implement " + feature), std::string::npos) << err;
  EXPECT_NE(0, test::run_orion(fmt::format("lora train --model {} --data {} --steps 1 --batch 2 --seq 16 --backend anesim "
                                           "--out {}/ane",
                                           rig.model, rig.data, rig.dir),
                               &out, &err));
  EXPECT_NE(err.find("LoRA training on the ANE path does not implement " + feature), std::string::npos) << err;
}

INSTANTIATE_TEST_SUITE_P(Arch, lora_train_hf,
                         ::testing::ValuesIn(std::vector<FeatureCase>{feature_cases()[2], feature_cases()[3],
                                                                      feature_cases()[4], feature_cases()[5]}),
                         [](const auto& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace orion::train
