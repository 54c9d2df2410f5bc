// The Llama family's own functions, shared by its files (model/family/llama/).
#pragma once
#include "model/family/family.h"

namespace orion {

const ModelFamily& llama_family();

// One Llama block for n tokens (llama_block.cpp): x [n, C] in a.x is updated in place
// (x += attn(x); x += ffn(x)). k_cache / v_cache point at row 0 of this layer's cache
// ([max_seq, NKV·HS]). lora: the layer's adapter (nullptr: none).
void llama_block_forward(const ModelConfig& c, const LayerWeights& l, Transformer::Activations& a, int n, int pos,
                         float* k_cache, float* v_cache, const LoraLayerRef* lora = nullptr);
// A whole Llama decode step in one parallel region (llama_decode.cpp): a.x [C] holds the embedded
// token at pos; it goes through every block (caches [L, max_seq, NKV·HS]), the final norm and the
// classifier into logits [V]. Bit-identical to llama_block_forward + the classifier.
void llama_decode_token(const ModelWeights& w, Transformer::Activations& a, int pos, float* key_cache, float* value_cache,
                        int max_seq, float* logits);

}  // namespace orion
