// Adapter training on the ANE with the base baked (ane_blocks.h make_lora_ane_blocks): the
// family runners in LoRA mode, and the adapter inputs they share (QvAdapterInputs, ane_blocks_impl.h).
#include <fmt/format.h>

#include "base/error.h"
#include "model/frontends/lora_frontends.h"
#include "train/ane/ane_blocks_impl.h"
#include "train/family/training_family.h"

namespace orion::train {

std::unique_ptr<AneBlocks> make_lora_ane_blocks(const Params& base, const LoraAdapter& adapter, AdapterGradSink& sink, int B,
                                                int T, const AneTrainOptions& o) {
  adapter.check_fits(base.config(), "adapter");
  return training_family(base.config().arch).lora_ane_blocks(base, adapter, sink, B, T, o);
}

namespace ane {

QvAdapterInputs::QvAdapterInputs(const LoraAdapter& adapter, const ModelConfig& c)
    : a_(adapter), c_(c), per_layer_(size_t(c.n_layers)) {
  for (LoraTarget t : adapter.targets())
    if (t != LoraTarget::Q && t != LoraTarget::V)
      throw_usage_error(fmt::format("the ANE adapter-input kernels adapt q and v only, not {}", lora_target_name(t)),
                        "--targets", "use --targets q,v, or --backend cpu");
}

int QvAdapterInputs::slot() const { return a_.rank(); }

void QvAdapterInputs::add(int l, TensorMap& inputs) {
  if (!current_) {  // A [r, C] and s·B [out, r] of every layer, zeros where a projection has none
    const int r = a_.rank();
    for (int i = 0; i < int(per_layer_.size()); i++) {
      const LoraTensor *q = a_.find(i, LoraTarget::Q), *v = a_.find(i, LoraTarget::V);
      per_layer_[size_t(i)] = frontends::lora_qv_inputs(c_, r, r, a_.scale(), q ? a_.A(*q) : nullptr, q ? a_.B(*q) : nullptr,
                                                        v ? a_.A(*v) : nullptr, v ? a_.B(*v) : nullptr);
    }
    current_ = true;
  }
  for (const auto& [name, t] : per_layer_[size_t(l)]) inputs[name] = t;
}

}  // namespace ane
}  // namespace orion::train
