// Weight recipes (train/ane/weight_recipes.h): the ANE block runner's fast weight update writes the
// fp32 parameters straight into the training programs' fp16 weight surfaces, without building a
// graph. It must write the very bytes the graph path writes (build → constants → surfaces) — after
// every AdamW step, for every training kernel of both families — and the naive conversion of the
// parameters; and it must refuse constants that are no plain layout of the layer's parameters.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "base/dtype.h"
#include "model/frontends/program_set.h"
#include "runtime/anesim_runtime_util.h"
#include "runtime/weights_as_inputs.h"
#include "train/ane/weight_recipes.h"
#include "train/loop/adamw.h"

using namespace orion;
using namespace orion::train;
using runtime::UpdatableKernel;

namespace {

constexpr int kT = 128;

// The tiny models of test_anesim_train.cpp: wide enough for the minimum buffer (C7) at S = 128.
ModelConfig tiny(Arch arch) {
  ModelConfig c;
  c.arch = arch;
  c.dim = 192, c.hidden_dim = arch == Arch::GPT2 ? 384 : 256, c.n_layers = 2, c.n_heads = 6, c.n_kv_heads = 6;
  c.vocab_size = 128, c.padded_vocab = 128, c.seq_len = kT;
  c.validate("test");
  return c;
}

// Random gradients for an AdamW step (the trainer's are as good; these need no forward pass).
void random_grads(Grads& g, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 0.1f);
  for (size_t i = 0; i < g.size(); i++) g.data()[i] = n(rng);
}

size_t weight_index(const UpdatableKernel& k, const std::string& name) {
  for (size_t i = 0; i < k.weight_inputs().size(); i++)
    if (k.weight_inputs()[i].name == name) return i;
  ADD_FAILURE() << "no weight input " << name;
  return 0;
}

// Weight input i of k as the bytes every run reads.
std::vector<uint16_t> weight_bytes(UpdatableKernel& k, size_t i) {
  const int64_t n = k.weight_inputs()[i].declared.numel();
  return std::vector<uint16_t>(k.weight_data(i), k.weight_data(i) + n);
}

// The naive conversion: W [rows, cols] to fp16, element by element, as it is or transposed.
std::vector<uint16_t> naive_f16(const Tensor& w, bool transposed) {
  const int64_t rows = w.shape[0], cols = w.shape[1];
  std::vector<uint16_t> out(size_t(rows * cols));
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++)
      out[size_t(transposed ? c * rows + r : r * cols + c)] = f32_to_f16(w.f32()[r * cols + c]);
  return out;
}

std::vector<uint16_t> first(const std::vector<uint16_t>& v, size_t n) { return {v.begin(), v.begin() + ptrdiff_t(n)}; }

// Every per-layer training kernel of `arch`, at both layers: one kernel updated through recipes,
// one through its rebuilt graph, over three AdamW steps — the same bytes in every weight surface
// and the same outputs, bit for bit.
void expect_recipes_write_the_graph_paths_bytes(Arch arch) {
  const ModelConfig c = tiny(arch);
  Params p(c);
  init_params(p, 3);
  Grads g(c);
  AdamW opt(p, {.weight_decay = 0.1f, .clip_norm = 1.0f});
  const ModelWeights view = p.view();
  auto driver = test::anesim_driver();
  runtime::CompileBudget budget = runtime::CompileBudget::for_driver(*driver);
  const frontends::TrainingBuckets buckets = frontends::training_buckets(view, kT, driver->chip());
  ane::RecipeFinder finder(view);

  struct Pair {
    const frontends::KernelSpec* spec;
    int layer, S;
    std::unique_ptr<UpdatableKernel> direct, graph;
    ane::ProgramRecipes recipes;
  };
  std::vector<Pair> pairs;
  const std::vector<frontends::KernelSpec> specs = frontends::training_kernels(arch);
  int fixed = 0, transposed = 0;
  for (const frontends::KernelSpec& s : specs) {
    if (!s.per_layer) continue;
    for (int l = 0; l < c.n_layers; l++) {
      Pair q{&s, l, s.attention ? buckets.attention : buckets.ffn, nullptr, nullptr, {}};
      const ir::Graph built = s.build(view, l, q.S);
      q.direct = std::make_unique<UpdatableKernel>(*driver, budget, built, UpdatableKernel::Mode::WeightsAsInputs);
      q.graph = std::make_unique<UpdatableKernel>(*driver, budget, built, UpdatableKernel::Mode::WeightsAsInputs);
      std::string why;
      std::optional<ane::ProgramRecipes> r = finder.find(s.build, l, q.S, q.direct->weight_inputs(), &why);
      ASSERT_TRUE(r) << s.kernel << " layer " << l << ": " << why;
      for (const ane::WeightRecipe& w : *r) {
        fixed += w.parts.empty();
        for (const ane::WeightPart& part : w.parts) transposed += part.transposed;
      }
      q.recipes = std::move(*r);
      pairs.push_back(std::move(q));
    }
  }
  EXPECT_GT(fixed, 0) << "masks (and RoPE tables) depend on no parameter";
  EXPECT_GT(transposed, 0) << "the backward kernels read transposed weights";

  for (int step = 1; step <= 3; step++) {
    random_grads(g, uint32_t(step));
    opt.step(p, g, 1e-2f);
    for (Pair& q : pairs) {
      SCOPED_TRACE(q.spec->kernel + " layer " + std::to_string(q.layer) + " step " + std::to_string(step));
      ane::write_weights(*q.direct, q.recipes);
      q.graph->stream_weights(q.spec->build(view, q.layer, q.S));
      for (size_t i = 0; i < q.direct->weight_inputs().size(); i++)
        EXPECT_TRUE(weight_bytes(*q.direct, i) == weight_bytes(*q.graph, i)) << q.direct->weight_inputs()[i].name;
      runtime::TensorMap in;
      uint32_t seed = 100;
      for (int n : q.graph->graph().input_nodes())
        in[q.graph->graph().node(n).name] = test::uniform_tensor(q.graph->graph().node(n).results[0].shape, seed++);
      const runtime::TensorMap a = q.direct->run(in), b = q.graph->run(in);
      for (const auto& [name, t] : b) EXPECT_TRUE(a.at(name).data == t.data) << "output " << name;
    }
  }

  // And the naive conversion of the parameters, for a matrix as it is and one transposed.
  const LayerWeights& l1 = view.layers[1];
  for (Pair& q : pairs) {
    if (q.layer != 1) continue;
    const std::string& k = q.spec->kernel;
    if (k.find("fwd_ffn") != std::string::npos) {
      const std::vector<uint16_t> w1 = weight_bytes(*q.direct, weight_index(*q.direct, "w1"));
      EXPECT_TRUE(first(w1, size_t(l1.w1.numel())) == naive_f16(l1.w1, false)) << k << " w1";
    }
    if (k.find("ffn_bwd") != std::string::npos) {
      const std::vector<uint16_t> w2t = weight_bytes(*q.direct, weight_index(*q.direct, "w2t"));
      EXPECT_TRUE(first(w2t, size_t(l1.w2.numel())) == naive_f16(l1.w2, true)) << k << " w2t";
    }
  }
}

}  // namespace

TEST(AneWeightRecipes, LlamaRecipesWriteTheGraphPathsBytesAfterAdamWSteps) {
  expect_recipes_write_the_graph_paths_bytes(Arch::Llama);
}
TEST(AneWeightRecipes, Gpt2RecipesWriteTheGraphPathsBytesAfterAdamWSteps) {
  expect_recipes_write_the_graph_paths_bytes(Arch::GPT2);
}

// A constant computed from the parameters (a scaled matrix) or from another layer's has no recipe:
// its program keeps the graph path.
TEST(AneWeightRecipes, AConstantThatIsNoLayoutOfTheLayersParametersHasNoRecipe) {
  const ModelConfig c = tiny(Arch::Llama);
  Params p(c);
  init_params(p, 3);
  const ModelWeights view = p.view();
  ane::RecipeFinder finder(view);
  auto projection = [](const char* wname, float scale, int from_layer) -> frontends::GraphBuilder {
    return [=](const ModelWeights& w, int layer, int S) {
      const ModelConfig& mc = w.config;
      ir::Graph g("projection");
      const ir::Value x = g.input("x", {ir::ElemType::F16, {1, mc.dim, 1, S}});
      const Tensor& wq = w.layers[size_t(from_layer < 0 ? layer : from_layer)].wq;
      std::vector<float> v(size_t(wq.numel()));
      for (size_t i = 0; i < v.size(); i++) v[i] = wq.empty() ? 0.0f : scale * wq.f32()[i];
      const ir::Value wv = g.constant_f32(wname, {mc.dim, mc.dim, 1, 1}, v, ir::ElemType::F16);
      g.add_output("y", g.add_node(ir::Op::Conv1x1, {x, wv}, {}, "y"));
      return g;
    };
  };
  auto inputs_of = [&](const frontends::GraphBuilder& b) {
    ir::Graph g = b(view, 1, kT);
    return runtime::weights_to_inputs(g);
  };
  std::string why;
  const frontends::GraphBuilder plain = projection("wq", 1.0f, -1);
  std::optional<ane::ProgramRecipes> r = finder.find(plain, 1, kT, inputs_of(plain), &why);
  ASSERT_TRUE(r) << why;
  ASSERT_EQ(r->size(), 1u);
  ASSERT_EQ((*r)[0].parts.size(), 1u);
  EXPECT_EQ((*r)[0].parts[0].src, view.layers[1].wq.f32()) << "layer 1's wq, where the parameters are";
  EXPECT_FALSE((*r)[0].parts[0].transposed);
  for (const auto& [builder, what] : {std::pair{projection("wq", 2.0f, -1), "a scaled matrix"},
                                      std::pair{projection("wq", 1.0f, 0), "another layer's matrix"}}) {
    why.clear();
    EXPECT_FALSE(finder.find(builder, 1, kT, inputs_of(builder), &why)) << what;
    EXPECT_NE(why.find("'wq'"), std::string::npos) << what << ": " << why;
  }
}
