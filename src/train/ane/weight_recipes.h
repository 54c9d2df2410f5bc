// Weight updates without building a graph: the parameters written straight into a training
// program's fp16 weight inputs (the weights-as-inputs fast path of the ANE block runner).
//
// Every weight input of a training program is a layout of some of its layer's fp32 parameters —
// a matrix as it is (W [out, in] → the conv weight [out, in, 1, 1]), transposed (Wᵀ for an input
// gradient), a norm's vector, several vectors one after another (channel_vectors) — or does not
// depend on the parameters at all (a RoPE table, a causal mask). A WeightRecipe says which, and
// write_weights converts the parameters into the program's resident weight surfaces
// (UpdatableKernel::weight_data): F16C conversions, transposes in cache-sized tiles, all threads.
// The bytes are those the graph path writes (build the graph → fp16 constants →
// weight_input_tensor → surface), since both round each fp32 parameter to fp16 once, to nearest
// even (runtime/fp16_span.h matches the scalar conversion bit for bit).
//
// The recipes are found, not declared, so no frontend has to describe its constants: RecipeFinder
// builds the program's graph twice more, from two copies of the layer's parameters filled with
// different patterns (every other tensor of the model filled with one value, another in each
// build, or absent when larger than a layer's matrices), and matches each weight constant against
// the patterns, part by part. A constant equal in both builds depends on no parameter; one that is
// no plain layout of the layer's tensors (scaled, mixed, from another layer) has no recipe, and
// its program keeps the graph path. Each recipe is checked once against the graph built from the
// real parameters: written through the recipe, the bytes must be the graph path's.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/frontends/program_set.h"
#include "runtime/weight_update.h"

namespace orion::train::ane {

// One run of a weight input's values: a parameter tensor [rows, cols] (row-major fp32) as it is,
// or transposed ([cols, rows]).
struct WeightPart {
  const float* src = nullptr;
  int64_t rows = 0, cols = 0;
  bool transposed = false;
};

// A weight input's values: its parts one after another from element 0 (the zeros after them stay
// as the first write left them). No parts: values that do not depend on the parameters.
struct WeightRecipe {
  std::vector<WeightPart> parts;
};
using ProgramRecipes = std::vector<WeightRecipe>;  // by weight input, in UpdatableKernel::weight_inputs() order

class RecipeFinder {
 public:
  // Two patterned copies of one layer's tensors (every layer of view has the same shapes).
  explicit RecipeFinder(const ModelWeights& view);

  // The recipes of the program `build` makes for layer `layer` at bucket S, whose weight inputs are
  // `inputs` — or nullopt, with the reason in *why, when some input has none.
  std::optional<ProgramRecipes> find(const frontends::GraphBuilder& build, int layer, int S,
                                     const std::vector<runtime::WeightInput>& inputs, std::string* why) const;

 private:
  struct LayerTensor {
    std::string suffix;  // "wq", "attn_norm", ... (the name after "layers.<l>.")
    int64_t rows = 0, cols = 0;
    std::vector<float> pattern[2];  // the two fills
  };
  ModelWeights patterned(int which, int layer) const;
  std::optional<WeightRecipe> match(const ir::Tensor32 (&built)[2], const ModelWeights& real, int layer) const;

  ModelWeights view_;
  std::vector<LayerTensor> tensors_;
  std::vector<float> background_[2];  // the other tensors' fills: one value each, as large as the largest
};

// Writes every weight input that has parts from the parameters into k's resident weight surfaces.
void write_weights(runtime::UpdatableKernel& k, const ProgramRecipes& recipes);

}  // namespace orion::train::ane
