// The Llama family's own functions, shared by its files (model/family/llama/) and by the families
// that run the Llama block (llama_like.h: Qwen2, Qwen3, Mistral).
#pragma once
#include "model/family/family.h"

namespace orion {

const ModelFamily& llama_family();

// One Llama block for n tokens (llama_block.cpp): x [n, C] in a.x is updated in place
// (x += attn(x); x += ffn(x)); the tokens' keys and values enter layer `layer` of cache at
// pos .. pos+n−1. lora: the layer's adapter (nullptr: none). The layer's q/k/v biases and q/k
// norms are applied when present; c's rope_scaling and sliding_window are honoured.
void llama_block_forward(const ModelConfig& c, const LayerWeights& l, Transformer::Activations& a, int n, int pos,
                         KvCache& cache, int layer, const LoraLayerRef* lora = nullptr);

// The RoPE frequencies of a config's heads, [HS/2]: θ^(−2i/HS), scaled as rope_scaling says
// (llama_rope.cpp). Unscaled, bit-identical to what cpu::rope turns by.
std::vector<float> llama_rope_frequencies(const ModelConfig& c);

}  // namespace orion
