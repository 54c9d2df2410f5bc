#!/usr/bin/python3
"""Tiny random Hugging Face checkpoints and their expected logits, from an independent numpy forward.

For each case this writes <out>/<case>/ with
  config.json                      as the Hugging Face repository of that architecture would hold it
  model.safetensors                (or model-0000N-of-00002.safetensors + model.safetensors.index.json)
  expected.safetensors             "tokens" I32 [T], "logits" F32 [T, V]: the reference forward

The forward below is written from the published architectures (transformers' modeling_llama,
modeling_qwen2, modeling_qwen3, modeling_mistral), on the weights exactly as stored in the checkpoint:
rotate-half RoPE (x·cos + rotate_half(x)·sin) on the un-permuted HF q/k rows, llama3 RoPE frequency
scaling (_compute_llama3_parameters), grouped-query attention by repeating kv heads, q/k/v biases
(Qwen2), per-head RMSNorm on q and k before RoPE (Qwen3), a sliding window (Mistral: a query at i
sees keys j with i - window < j <= i) and a tied or separate lm_head. It computes in float64.
The safetensors files are written here too (8-byte header length, JSON header, raw data); bf16
is float32 rounded to nearest even, and the reference then runs on the rounded values.

Usage: /usr/bin/python3 make_tiny_hf_models.py OUT_DIR      (needs python3-numpy)
"""
import json
import math
import os
import sys

import numpy as np

T = 24  # prompt length


# ---- safetensors -------------------------------------------------------------------------------

def to_bf16_bits(a):
    """float32 → bfloat16 bit patterns (uint16), rounding to nearest even."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def bf16_round(a):
    """The float values a bf16 store of a holds."""
    return (to_bf16_bits(a).astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def write_safetensors(path, tensors, dtype):
    """tensors: name → numpy array; dtype "F32", "BF16" (floats) — "I32" arrays keep their own."""
    header, blobs, at = {}, [], 0
    for name, a in tensors.items():
        if a.dtype == np.int32:
            raw, dt = a.astype("<i4").tobytes(), "I32"
        elif dtype == "BF16":
            raw, dt = to_bf16_bits(a).astype("<u2").tobytes(), "BF16"
        else:
            raw, dt = a.astype("<f4").tobytes(), "F32"
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for b in blobs:
            f.write(b)


# ---- the reference forward -----------------------------------------------------------------------

def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def inv_frequencies(cfg, hd):
    inv = 1.0 / (cfg["rope_theta"] ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
    rs = cfg.get("rope_scaling")
    if rs and rs.get("rope_type", rs.get("type")) == "llama3":
        factor, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
        old = rs["original_max_position_embeddings"]
        low_wavelen, high_wavelen = old / lo, old / hi
        wavelen = 2 * math.pi / inv
        scaled = np.where(wavelen > low_wavelen, inv / factor, inv)
        smooth = (old / wavelen - lo) / (hi - lo)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
        inv = np.where(medium, smoothed, scaled)
    return inv


def rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)


def forward(cfg, w, tokens):
    C, NH = cfg["hidden_size"], cfg["num_attention_heads"]
    NKV = cfg.get("num_key_value_heads", NH)
    hd = cfg.get("head_dim") or C // NH
    eps, n = cfg["rms_norm_eps"], len(tokens)
    window = cfg.get("sliding_window") if cfg["model_type"] == "mistral" else None
    inv = inv_frequencies(cfg, hd)
    ang = np.outer(np.arange(n, dtype=np.float64), inv)      # [n, hd/2]
    cos = np.cos(np.concatenate([ang, ang], axis=-1))[:, None, :]  # [n, 1, hd]
    sin = np.sin(np.concatenate([ang, ang], axis=-1))[:, None, :]
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    allowed = j <= i
    if window:
        allowed &= j > i - window
    x = w["model.embed_tokens.weight"][tokens]
    for l in range(cfg["num_hidden_layers"]):
        p = lambda s: w[f"model.layers.{l}.{s}"]
        has = lambda s: f"model.layers.{l}.{s}" in w
        h = rms_norm(x, p("input_layernorm.weight"), eps)
        proj = lambda name: h @ p(f"self_attn.{name}.weight").T + (p(f"self_attn.{name}.bias") if has(f"self_attn.{name}.bias") else 0)
        q = proj("q_proj").reshape(n, NH, hd)
        k = proj("k_proj").reshape(n, NKV, hd)
        v = proj("v_proj").reshape(n, NKV, hd)
        if has("self_attn.q_norm.weight"):
            q = rms_norm(q, p("self_attn.q_norm.weight"), eps)
            k = rms_norm(k, p("self_attn.k_norm.weight"), eps)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = np.repeat(k, NH // NKV, axis=1)  # query head h reads kv head h // (NH / NKV)
        v = np.repeat(v, NH // NKV, axis=1)
        scores = np.einsum("ihd,jhd->hij", q, k) / math.sqrt(hd)
        scores = np.where(allowed[None], scores, -np.inf)
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        scores /= scores.sum(axis=-1, keepdims=True)
        att = np.einsum("hij,jhd->ihd", scores, v).reshape(n, NH * hd)
        x = x + att @ p("self_attn.o_proj.weight").T
        h = rms_norm(x, p("post_attention_layernorm.weight"), eps)
        gate, up = h @ p("mlp.gate_proj.weight").T, h @ p("mlp.up_proj.weight").T
        x = x + (gate / (1 + np.exp(-gate)) * up) @ p("mlp.down_proj.weight").T
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") else w["lm_head.weight"]
    return x @ head.T


# ---- the cases -----------------------------------------------------------------------------------

BASE = {"vocab_size": 256, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu"}

CASES = {
    # Llama 3.x: llama3 RoPE scaling (all three frequency bands hit at head_dim 16), GQA, untied.
    "llama3": dict(BASE, architectures=["LlamaForCausalLM"], model_type="llama", tie_word_embeddings=False,
                   attention_bias=False, mlp_bias=False, head_dim=16,
                   rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                 "high_freq_factor": 4.0, "original_max_position_embeddings": 256}),
    # SmolLM2: plain Llama, tied, rope_theta 100000.
    "smollm2": dict(BASE, architectures=["LlamaForCausalLM"], model_type="llama", tie_word_embeddings=True,
                    rope_theta=100000.0, rope_scaling=None),
    # Qwen2 / Qwen2.5: q/k/v biases, tied, rope_theta 1e6, the sliding-window fields off.
    "qwen2": dict(BASE, architectures=["Qwen2ForCausalLM"], model_type="qwen2", tie_word_embeddings=True,
                  rope_theta=1000000.0, rms_norm_eps=1e-6, use_sliding_window=False, sliding_window=32,
                  max_window_layers=2),
    # Qwen3: per-head q/k RMSNorm, head_dim 32 ≠ 64 / 4.
    "qwen3": dict(BASE, architectures=["Qwen3ForCausalLM"], model_type="qwen3", tie_word_embeddings=True,
                  rope_theta=1000000.0, rms_norm_eps=1e-6, head_dim=32, attention_bias=False,
                  use_sliding_window=False, sliding_window=None),
    # Mistral: a sliding window of 8 positions, shorter than the 24-token prompt.
    "mistral": dict(BASE, architectures=["MistralForCausalLM"], model_type="mistral", tie_word_embeddings=False,
                    sliding_window=8),
}
SHARDED = {"llama3_sharded": "llama3"}  # the same architecture, in two shards + index
BF16 = {"qwen3_bf16": "qwen3"}          # stored in bfloat16


def random_weights(cfg, rng):
    C, NH, H, V = cfg["hidden_size"], cfg["num_attention_heads"], cfg["intermediate_size"], cfg["vocab_size"]
    NKV = cfg.get("num_key_value_heads", NH)
    hd = cfg.get("head_dim") or C // NH
    mat = lambda r, c, s=0.15: rng.normal(0, s, (r, c))
    vec = lambda n, m=1.0, s=0.1: m + rng.normal(0, s, n)
    w = {"model.embed_tokens.weight": mat(V, C, 0.25)}
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        w[p + "input_layernorm.weight"] = vec(C)
        w[p + "self_attn.q_proj.weight"] = mat(NH * hd, C)
        w[p + "self_attn.k_proj.weight"] = mat(NKV * hd, C)
        w[p + "self_attn.v_proj.weight"] = mat(NKV * hd, C)
        w[p + "self_attn.o_proj.weight"] = mat(C, NH * hd)
        if cfg["model_type"] == "qwen2":
            w[p + "self_attn.q_proj.bias"] = vec(NH * hd, 0.0, 0.3)
            w[p + "self_attn.k_proj.bias"] = vec(NKV * hd, 0.0, 0.3)
            w[p + "self_attn.v_proj.bias"] = vec(NKV * hd, 0.0, 0.3)
        if cfg["model_type"] == "qwen3":
            w[p + "self_attn.q_norm.weight"] = vec(hd, 1.0, 0.3)
            w[p + "self_attn.k_norm.weight"] = vec(hd, 1.0, 0.3)
        w[p + "post_attention_layernorm.weight"] = vec(C)
        w[p + "mlp.gate_proj.weight"] = mat(H, C)
        w[p + "mlp.up_proj.weight"] = mat(H, C)
        w[p + "mlp.down_proj.weight"] = mat(C, H)
    w["model.norm.weight"] = vec(C)
    if not cfg["tie_word_embeddings"]:
        w["lm_head.weight"] = mat(V, C, 0.25)
    return w


def write_case(out, name, cfg, seed, sharded=False, dtype="F32"):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(seed)
    w = random_weights(cfg, rng)
    if dtype == "BF16":
        w = {k: bf16_round(v) for k, v in w.items()}  # the reference sees what the file holds
    cfg = dict(cfg, torch_dtype="bfloat16" if dtype == "BF16" else "float32")
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    if sharded:
        names = list(w)
        halves = [names[: len(names) // 2], names[len(names) // 2:]]
        weight_map = {}
        for s, part in enumerate(halves):
            file = f"model-{s + 1:05d}-of-00002.safetensors"
            write_safetensors(os.path.join(d, file), {k: w[k] for k in part}, dtype)
            weight_map.update({k: file for k in part})
        with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f, indent=2)
    else:
        write_safetensors(os.path.join(d, "model.safetensors"), w, dtype)
    tokens = rng.integers(0, cfg["vocab_size"], T).astype(np.int32)
    logits = forward(cfg, w, tokens)
    write_safetensors(os.path.join(d, "expected.safetensors"), {"tokens": tokens, "logits": logits}, "F32")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    seed = 1
    for name, cfg in CASES.items():
        write_case(out, name, cfg, seed)
        seed += 1
    for name, base in SHARDED.items():
        write_case(out, name, CASES[base], seed, sharded=True)
        seed += 1
    for name, base in BF16.items():
        write_case(out, name, CASES[base], seed, dtype="BF16")
        seed += 1


if __name__ == "__main__":
    main()
