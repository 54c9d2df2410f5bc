// LoRA kernels for generation through ANE programs (infer/ane_model.h) with adapters on q and v
// switched at run time: the adapter matrices are program INPUTS, so one compiled program serves every
// adapter, and changing adapters compiles nothing (C9, C10).
//
// Differences from lora_attention (frontends.h), which they otherwise follow:
//   * the scale is not baked in: the host passes B already multiplied by s = alpha/r (times any
//     --lora-scale), so adapters of any alpha share the program;
//   * the rank is a SLOT: an adapter of rank r ≤ slot fills the first r rows of A and columns of B,
//     the rest zeros (exactly the same product);
//   * every adapter input is declared [1, P, 1, cols] with P ≥ rows padded so that its fp16 buffer
//     reaches the chip's minimum (C7) — an A of [16, 64] alone is 2 KB — and sliced back to its rows
//     inside the program (the layout of runtime/weights_as_inputs.h). The runtime then gives every
//     input the one allocation size (C13), binds them in alphabetical order (C6) and packs data
//     from byte 0 (C14).
// Inputs: x [1, C, 1, S]; lora_a_q [1, Pq, 1, C] (A_q in rows 0..slot), lora_b_q [1, Q', 1, slot]
// (B_q·s in rows 0..Q), lora_a_v, lora_b_v likewise (B_v [KV, slot]).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "ir/interpret.h"
#include "model/frontends/frontends.h"

namespace orion::frontends {

// out y [1, C, 1, S] = x + Wo·attn(norm1(x)) (+ bo), k [1, KV, 1, S] (after RoPE for Llama), v.
ir::Graph lora_prefill_attn(const ModelWeights& w, int layer, int S, int rank_slot, KernelOptions opt = {});
// out q [1, Q, 1, S], k, v [1, KV, 1, S] = W·norm1(x) (+ b) + adapters — plain projections, no RoPE
// (decode puts the token in column 0; the CPU rotates and attends).
ir::Graph lora_decode_qkv(const ModelWeights& w, int layer, int S, int rank_slot, KernelOptions opt = {});
// lora_decode_qkv with `adapter_slots` adapters in one evaluation (batched decode of rows that use
// different adapters): lora_a_q [adapter_slots·slot rows, C] and lora_b_q [Q, adapter_slots·slot]
// stack the adapters (adapter k in rank rows / columns k·slot ..; unused slots zeros), and the
// input lora_mask [1, P, 1, S] (rows adapter_slots·slot used) is 1 in the rank rows of the adapter
// of each column, so column j gets W·x_j + B_k·A_k·x_j for its adapter k, or W·x_j with a zero
// column. The program's shape depends on the slot counts only, never on which adapters fill them.
ir::Graph lora_decode_qkv_mixed(const ModelWeights& w, int layer, int S, int rank_slot, int adapter_slots,
                                KernelOptions opt = {});

// Training with a frozen base (train/ane/ane_blocks.h make_lora_ane_blocks): the Llama
// kernels whose math an adapter on q or v changes, with the same adapter inputs, so the base is baked
// once and A, B change every step without a compile. The adapter gradients themselves are the CPU's,
// from xnorm (the projections' input) and dq_lin, dv (their output gradients), which these output.
// fwd_attn: as llama_fwd_attn with q = rope(Wq·xnorm + B_q·(A_q·xnorm)), v = Wv·xnorm + B_v·(A_v·xnorm);
//   out o, q, k, v, att, xnorm.
ir::Graph llama_lora_fwd_attn(const ModelWeights& w, int layer, int S, int rank_slot, KernelOptions opt = {});
// qkv_bwd: as llama_qkv_bwd with dxnorm += A_qᵀ·(B_qᵀ·dq_lin) + A_vᵀ·(B_vᵀ·dv) (B already times s);
//   out dx, dxnorm, dq_lin, dk_lin.
ir::Graph llama_lora_qkv_bwd(const ModelWeights& w, int layer, int S, int rank_slot, KernelOptions opt = {});

// The GPT-2 counterparts (train/family/gpt2/gpt2_ane_train.cpp in LoRA mode), the same adapter inputs:
// fwd_attn: as gpt2_fwd_attn with q = Wq·xnorm + bq + B_q·(A_q·xnorm), v likewise; out o, q, k, v, att, xnorm.
ir::Graph gpt2_lora_fwd_attn(const ModelWeights& w, int layer, int S, int rank_slot, KernelOptions opt = {});
// qkv_bwd: as gpt2_qkv_bwd with dxnorm += A_qᵀ·(B_qᵀ·dq) + A_vᵀ·(B_vᵀ·dv) (B already times s); out dx, dxnorm.
ir::Graph gpt2_lora_qkv_bwd(const ModelWeights& w, int layer, int S, int rank_slot, KernelOptions opt = {});

// The four adapter inputs of those kernels for one layer: A [r, C] and B [out, r] (row-major fp32;
// null: that projection has no adapter, zeros), r ≤ rank_slot, B multiplied by scale.
std::map<std::string, ir::Tensor32> lora_qv_inputs(const ModelConfig& c, int rank_slot, int r, float scale, const float* a_q,
                                                   const float* b_q, const float* a_v, const float* b_v);
// The inputs of lora_decode_qkv_mixed for one layer, from the lora_qv_inputs of each adapter in use
// (adapter k fills slot k; at most adapter_slots) and the adapter of each column (−1: none), S wide.
std::map<std::string, ir::Tensor32> lora_mixed_inputs(
    const ModelConfig& c, int rank_slot, int adapter_slots,
    const std::vector<const std::map<std::string, ir::Tensor32>*>& adapters, const std::vector<int>& column_adapter, int S);

}  // namespace orion::frontends
