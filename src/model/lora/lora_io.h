// LoRA adapter files: Orion's own format and the Hugging Face PEFT layout.
//
// Orion's format, adapter.olora (little-endian):
//   offset  0  char[8]  magic "ORIONLRA"
//           8  uint32   version (1)
//          12  uint32   J: bytes of the JSON header
//          16  uint64   N: floats of the adapter buffer
//          24  uint64   checksum (FNV-1a over 8-byte words) of every byte from offset 32 to the end
//          32  char[J]  JSON {"base": {arch, dim, hidden_dim, n_layers, n_heads, n_kv_heads},
//                             "rank", "alpha", "targets": ["q", "v"], "tensors": [{"name", "shape", "offset"}]}
//              zeros up to the next multiple of 64
//              float[N] the buffer (LoraAdapter layout: layer by layer, target by target, A then B)
//              (a training checkpoint, whose header has "training": then float[N] m, float[N] v)
//
// PEFT layout (a folder; what `peft.PeftModel.save_pretrained` writes and `from_pretrained` reads):
//   adapter_config.json        {"peft_type": "LORA", "r", "lora_alpha", "target_modules", "fan_in_fan_out", …}
//   adapter_model.safetensors  tensors lora_A.weight [r, in] and lora_B.weight [out, r] per module:
//     Llama  base_model.model.model.layers.{i}.self_attn.{q,k,v,o}_proj.lora_{A,B}.weight
//            base_model.model.model.layers.{i}.mlp.{gate,up,down}_proj.lora_{A,B}.weight
//            Hugging Face stores wq/wk with their rows permuted for rotate-half RoPE
//            (io_internal.h), so B of q_proj/k_proj has its rows permuted the same way (A is
//            untouched: the permutation acts on the output rows of ΔW = B·A only).
//     GPT-2  base_model.model.transformer.h.{i}.attn.c_attn.lora_{A,B}.weight    (q, k, v FUSED)
//            base_model.model.transformer.h.{i}.attn.c_proj / mlp.c_fc / mlp.c_proj.lora_{A,B}.weight
//            GPT-2's projections are Conv1D ([in, out] storage), so fan_in_fan_out is true; the
//            LoRA matrices still have PEFT's Linear shapes A [r, in], B [out, r].
//   c_attn is one module holding q, k and v ([3C, C] as [out, in]). Orion's separate adapters on
//   q, k, v (each rank r, own A) are written EXACTLY as one c_attn adapter of rank m·r (m = how many
//   of q, k, v are adapted): A = [A_q; A_v] stacked [m·r, C], B [3C, m·r] block-diagonal (rows of q
//   use only the columns of A_q, rows of k, when not adapted, are zero), and alpha m·alpha so that
//   the scale alpha/r is unchanged. rank_pattern / alpha_pattern in adapter_config.json carry the
//   c_attn rank and alpha (PEFT applies them per module). Orion also records its own split in
//   "orion" inside adapter_config.json, so its own files read back into the same q/k/v adapters;
//   a foreign c_attn adapter (shared A) is read as q, k and v adapters that share that A.
//   Modules with different ranks or alphas are read into one rank (the largest; smaller ones padded
//   with zero rows of A and zero columns of B) with each module's scale folded into its B.
//
// Every malformed file (bad magic, version, JSON, missing tensor, wrong shape, NaN, a PEFT feature
// Orion does not implement: DoRA, bias training, modules_to_save) is an Input error naming the
// file and the field, with a hint.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/lora/lora.h"

namespace orion {

enum class LoraFormat { Orion, Peft };

// Writes adapter.olora (Orion) or the two PEFT files into folder `dir` (created if needed).
// A path ending in .olora writes that one file.
void save_lora(const LoraAdapter& a, const std::string& path, LoraFormat format, const std::string& base_model_name = "");
// Reads an adapter from a .olora file, a PEFT folder (or its adapter_model.safetensors /
// adapter_config.json), or a folder holding adapter.olora (preferred when both are there), and
// checks it fits `base` (the model it will be applied to; PEFT files need its dimensions).
LoraAdapter load_lora(const std::string& path, const ModelConfig& base);

// FNV-1a over 8-byte words, then the tail: the checksum adapter.olora stores for its bytes 32..end.
uint64_t lora_file_checksum(const uint8_t* p, size_t n);
std::string lora_file_name(LoraFormat f);  // "adapter.olora", "adapter_model.safetensors"

// A LoRA training checkpoint is an adapter.olora whose header carries "training" (the trainer's
// state and options) and whose adapter floats are followed by AdamW's m and v (N floats each); it
// loads as an adapter too. Written atomically.
struct LoraTrainingState {
  nlohmann::json json;
  std::vector<float> m, v;  // the adapter buffer's layout
};
void save_lora_checkpoint(const LoraAdapter& a, const std::string& path, const LoraTrainingState& training);
LoraAdapter read_lora_checkpoint(const std::string& path, LoraTrainingState* training);
// The same from bytes already in memory (a checkpoint rank 0 read and broadcast); `name` is its path.
LoraAdapter parse_lora_checkpoint(const uint8_t* data, size_t size, const std::string& name, LoraTrainingState* training);

}  // namespace orion
