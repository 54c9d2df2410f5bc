// The GPT-2 family's own functions, shared by its files (model/family/gpt2/).
#pragma once
#include "model/family/family.h"

namespace orion {

const ModelFamily& gpt2_family();

// One GPT-2 block for n tokens (gpt2_block.cpp): as llama_block_forward (llama/llama.h).
void gpt2_block_forward(const ModelConfig& c, const LayerWeights& l, Transformer::Activations& a, int n, int pos,
                        KvCache& cache, int layer, const LoraLayerRef* lora = nullptr);

}  // namespace orion
