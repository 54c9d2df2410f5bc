// Classifier kernels: logits = classifier·x over a range of the vocabulary, and the softmax over
// the vocabulary. DESIGN.md §3 keeps the 32000-token classifier and the loss on the CPU, because
// the ANE rejects convolutions over ~32K channels (C12): these are for small vocabularies (or row
// ranges of a large one), and validate-ane refuses the rest with a message naming the node.
#include "base/error.h"
#include "model/family/family.h"
#include "model/frontends/frontends.h"
#include "model/frontends/kernel_builder.h"

namespace orion::frontends {

ir::Graph classifier_fwd(const ModelWeights& w, int S, int v_begin, int v_end, KernelOptions opt) {
  check_kernel_args(w, 0, S, "classifier_fwd", nullptr);
  const ModelConfig& c = w.config;
  if (v_end < 0) v_end = c.vocab_size;  // the real vocabulary (llm.c's padding rows are skipped)
  if (v_begin < 0 || v_begin >= v_end || v_end > int(w.classifier.shape.at(0)))
    throw_usage_error(fmt::format("classifier_fwd: vocabulary rows [{}, {}) are out of range", v_begin, v_end), "vocab");
  // The rows [v_begin, v_end) of the classifier [Vp, C] as a view (no copy).
  Tensor rows = w.classifier;
  rows.data = w.classifier.row(v_begin);
  rows.shape = {v_end - v_begin, c.dim};
  KernelBuilder b("classifier_fwd", opt.dtype);
  Value x = b.act("x", c.dim, S);                     // final-normed residual   [1, C, 1, S]
  b.output(b.linear(x, "wcls", rows, {}, "logits"));  // logits[v, s] = Σ_c W[v, c]·x[c, s]
  return std::move(b.g);
}

ir::Graph vocab_softmax(int V, int S, KernelOptions opt) {
  if (V < 1 || S < 1) throw_usage_error(fmt::format("vocab_softmax: bad shape V={} S={}", V, S), "vocab");
  KernelBuilder b("vocab_softmax", opt.dtype);
  Value logits = b.act("logits", V, S);  // [1, V, 1, S]
  // probs[v, s] = exp(logits[v, s] − max) / Σ_v' exp(logits[v', s] − max): over the channels.
  b.output(b.op(ir::Op::Softmax, {logits}, {{"axis", int64_t(1)}}, "probs"));
  return std::move(b.g);
}

// The final norm of any family: its norm kind, named ln_f (LayerNorm) or norm_f (RMSNorm).
ir::Graph final_norm(const ModelWeights& w, int S, KernelOptions opt) {
  check_kernel_args(w, 0, S, "final_norm", nullptr);
  const ModelConfig& c = w.config;
  KernelBuilder b("final_norm", opt.dtype);
  Value x = b.act("x", c.dim, S);
  if (model_family(c.arch).anatomy().norm == NormKind::LayerNorm)
    b.output(b.layernorm(x, "ln_f", w.final_norm, w.final_norm_b, c.norm_eps, "y"));
  else b.output(b.rmsnorm(x, "norm_f", w.final_norm, c.norm_eps, "y"));
  return std::move(b.g);
}

}  // namespace orion::frontends
