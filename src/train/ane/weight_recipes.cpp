// Finding and writing the weight recipes of training programs (see weight_recipes.h).
#include "train/ane/weight_recipes.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/error.h"
#include "runtime/fp16_span.h"

namespace orion::train::ane {
namespace {

std::string layer_prefix(int layer) { return fmt::format("layers.{}.", layer); }

// A value of pattern `which` for element e of tensor j: a multiple of 1/8 in [−125, 125], exact in
// fp16, from a hash, so that no two tensors (nor a tensor and its transpose) agree for long.
float pattern_value(int which, size_t j, int64_t e) {
  uint64_t z = (uint64_t(which) + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t(j) << 40) ^ uint64_t(e);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return float(int64_t(z % 2001) - 1000) / 8.0f;
}

// The element of the source tensor that element e of a part's written layout holds.
int64_t source_index(const WeightPart& p, int64_t e) { return p.transposed ? (e % p.rows) * p.cols + e / p.rows : e; }

int64_t numel(const WeightPart& p) { return p.rows * p.cols; }
int64_t written_rows(const WeightPart& p) { return p.transposed ? p.cols : p.rows; }
int64_t written_row_length(const WeightPart& p) { return p.transposed ? p.rows : p.cols; }

// Rows [r0, r1) of part p's written layout into dst (the part's first element). A transpose goes
// through a tile of up to kTileRows written rows × kTileCols of their elements: each source row
// gives a short contiguous run, each tile row one contiguous conversion.
constexpr int64_t kTileRows = 16, kTileCols = 256;
void write_rows(const WeightPart& p, uint16_t* dst, int64_t r0, int64_t r1) {
  const int64_t len = written_row_length(p);
  if (!p.transposed) {
    runtime::f32_to_f16_span(dst + r0 * len, p.src + r0 * len, (r1 - r0) * len);
    return;
  }
  float tile[kTileRows][kTileCols];
  for (int64_t i0 = r0; i0 < r1; i0 += kTileRows) {
    const int64_t ni = std::min(kTileRows, r1 - i0);
    for (int64_t o0 = 0; o0 < len; o0 += kTileCols) {
      const int64_t no = std::min(kTileCols, len - o0);
      for (int64_t o = 0; o < no; o++) {
        const float* row = p.src + (o0 + o) * p.cols + i0;  // source row o0 + o, columns i0 …
        for (int64_t i = 0; i < ni; i++) tile[i][o] = row[i];
      }
      for (int64_t i = 0; i < ni; i++) runtime::f32_to_f16_span(dst + (i0 + i) * len + o0, tile[i], no);
    }
  }
}

// The fp16 bytes the graph path writes for constant c: its values rounded once more (a no-op for
// fp16 values; NaNs made canonical, as the surface conversion makes them).
std::vector<uint16_t> graph_bytes(const ir::Node& c) {
  const ir::Tensor32 v = ir::const_values(c);
  std::vector<uint16_t> out(v.data.size());
  runtime::f32_to_f16_span(out.data(), v.data.data(), int64_t(out.size()));
  return out;
}

const ir::Node* weight_constant(const ir::Graph& g, const runtime::WeightInput& w) {
  const int i = g.find(w.name);
  if (i < 0 || g.node(i).op != ir::Op::Const || g.node(i).results[0].shape != w.original.shape) return nullptr;
  return &g.node(i);
}

}  // namespace

RecipeFinder::RecipeFinder(const ModelWeights& view) : view_(view) {
  const std::string prefix = layer_prefix(0);
  for (const auto& [name, t] : view_.named_tensors()) {
    if (name.rfind(prefix, 0) != 0 || t->dtype != DType::F32 || t->shape.empty() || t->shape.size() > 2) continue;
    LayerTensor lt;
    lt.suffix = name.substr(prefix.size());
    lt.rows = t->shape.size() == 2 ? t->shape[0] : 1;
    lt.cols = t->shape.back();
    for (int which = 0; which < 2; which++) {
      lt.pattern[which].resize(size_t(lt.rows * lt.cols));
      for (int64_t e = 0; e < lt.rows * lt.cols; e++)
        lt.pattern[which][size_t(e)] = pattern_value(which, tensors_.size(), e);
    }
    tensors_.push_back(std::move(lt));
  }
  size_t largest = 0;
  for (const LayerTensor& lt : tensors_) largest = std::max(largest, lt.pattern[0].size());
  background_[0].assign(largest, 0.5f), background_[1].assign(largest, -0.75f);
}

// The view with layer `layer`'s tensors holding fill `which` and every other tensor the
// background's (absent when larger): a constant built from anything but the layer's parameters
// differs between the two builds and matches no pattern.
ModelWeights RecipeFinder::patterned(int which, int layer) const {
  ModelWeights w = view_;
  const std::string prefix = layer_prefix(layer);
  for (auto& [name, t] : w.named_tensors_mut()) {
    const bool fits = t->dtype == DType::F32 && size_t(t->numel()) <= background_[which].size();
    const void* fill = fits ? background_[which].data() : nullptr;
    if (name.rfind(prefix, 0) == 0)
      for (const LayerTensor& lt : tensors_)
        if (lt.suffix == name.substr(prefix.size()) && lt.rows * lt.cols == t->numel()) fill = lt.pattern[which].data();
    t->data = fill;
  }
  return w;
}

// The parts whose patterns give `built` (the constant in the two patterned builds), walking its
// elements from the first: at each offset the first tensor, as it is or transposed, whose two
// patterns both continue there. The parts point at the tensors of `real`'s layer.
std::optional<WeightRecipe> RecipeFinder::match(const ir::Tensor32 (&built)[2], const ModelWeights& real, int layer) const {
  const int64_t n = built[0].numel();
  WeightRecipe r;
  for (int64_t offset = 0; offset < n;) {
    bool found = false;
    for (const LayerTensor& lt : tensors_) {
      if (lt.rows * lt.cols > n - offset) continue;
      for (bool transposed : {false, true}) {
        if (transposed && (lt.rows == 1 || lt.cols == 1)) continue;  // the same order as it is
        const WeightPart shape{nullptr, lt.rows, lt.cols, transposed};
        bool same = true;
        for (int64_t e = 0; e < numel(shape) && same; e++)
          for (int which = 0; which < 2 && same; which++)
            same = built[which].data[size_t(offset + e)] == lt.pattern[which][size_t(source_index(shape, e))];
        if (!same) continue;
        const Tensor* t = nullptr;
        for (const auto& [name, tensor] : real.named_tensors())
          if (name == layer_prefix(layer) + lt.suffix) t = tensor;
        if (!t) return std::nullopt;
        r.parts.push_back({t->f32(), lt.rows, lt.cols, transposed});
        offset += numel(shape), found = true;
        break;
      }
      if (found) break;
    }
    if (!found) return std::nullopt;
  }
  return r;
}

std::optional<ProgramRecipes> RecipeFinder::find(const frontends::GraphBuilder& build, int layer, int S,
                                                 const std::vector<runtime::WeightInput>& inputs, std::string* why) const {
  ir::Graph real, built[2];
  try {
    real = build(view_, layer, S);
    for (int which = 0; which < 2; which++) built[which] = build(patterned(which, layer), layer, S);
  } catch (const Error& e) {
    *why = fmt::format("building it from patterned weights failed: {}", e.message());
    return std::nullopt;
  }
  ProgramRecipes recipes;
  for (const runtime::WeightInput& w : inputs) {
    const ir::Node *c = weight_constant(real, w), *a = weight_constant(built[0], w), *b = weight_constant(built[1], w);
    if (!c || !a || !b) {
      *why = fmt::format("weight '{}' is not a constant of type {} in every build", w.name, w.original.str());
      return std::nullopt;
    }
    const ir::Tensor32 values[2] = {ir::const_values(*a), ir::const_values(*b)};
    std::optional<WeightRecipe> r = values[0].data == values[1].data ? WeightRecipe{} : match(values, view_, layer);
    if (!r) {
      *why = fmt::format("weight '{}' is no layout of layer {}'s parameters", w.name, layer);
      return std::nullopt;
    }
    // Written through the recipe (or, without parts, as the patterned build has it), the bytes
    // must be those of the constant built from the real parameters.
    std::vector<uint16_t> got = r->parts.empty() ? graph_bytes(*a) : std::vector<uint16_t>(size_t(w.original.numel()));
    uint16_t* dst = got.data();
    for (const WeightPart& p : r->parts) write_rows(p, dst, 0, written_rows(p)), dst += numel(p);
    if (got != graph_bytes(*c)) {
      *why = fmt::format("weight '{}': the recipe does not give the graph's bytes", w.name);
      return std::nullopt;
    }
    recipes.push_back(std::move(*r));
  }
  return recipes;
}

void write_weights(runtime::UpdatableKernel& k, const ProgramRecipes& recipes) {
  ORION_CHECK(recipes.size() == k.weight_inputs().size(), "{} weight recipes for a program of {} weight inputs",
              recipes.size(), k.weight_inputs().size());
  // Pieces of about 64K elements (of a transpose: one tile's rows), shared among the threads.
  struct Piece {
    const WeightPart* part;
    uint16_t* dst;
    int64_t r0, r1;
  };
  std::vector<Piece> pieces;
  for (size_t i = 0; i < recipes.size(); i++) {
    uint16_t* dst = k.weight_data(i);
    for (const WeightPart& p : recipes[i].parts) {
      const int64_t rows = written_rows(p);
      const int64_t step = p.transposed ? kTileRows : std::max<int64_t>(1, (int64_t(1) << 16) / written_row_length(p));
      for (int64_t r = 0; r < rows; r += step) pieces.push_back({&p, dst, r, std::min(rows, r + step)});
      dst += numel(p);
    }
  }
#pragma omp parallel for schedule(dynamic) if (pieces.size() > 1)
  for (size_t i = 0; i < pieces.size(); i++) write_rows(*pieces[i].part, pieces[i].dst, pieces[i].r0, pieces[i].r1);
}

}  // namespace orion::train::ane
