#!/usr/bin/python3
"""An independent Hugging Face → GGUF converter for the GGUF reader's tests (python3 + numpy only).

Written from the published GGUF specification (ggml's docs/gguf.md) and llama.cpp's naming of
tensors and keys, not from Orion's C++: it reads config.json + model.safetensors (F32/F16/BF16) and
writes a version-3 GGUF the way llama.cpp's convert_hf_to_gguf.py lays a model out:
  - Llama (and SmolLM2, Llama 3.x, Mistral, which llama.cpp writes as "llama"): q_proj/k_proj rows
    are turned back from Hugging Face's rotate-half order into the interleaved-pair order of the
    original checkpoints; names token_embd, blk.N.attn_q, ... ; Llama 3's rope_scaling becomes the
    tensor rope_freqs.weight, one divisor per frequency pair (llama.cpp's rule, written out below);
    a config.json head_dim becomes attention.key_length / value_length; Mistral's sliding_window
    becomes llama.attention.sliding_window (Orion's key: llama.cpp keeps no window for "llama");
  - Qwen2 / Qwen2.5 ("qwen2") and Qwen3 ("qwen3"): llama.cpp runs these with NEOX (rotate-half)
    RoPE, so q/k rows stay in Hugging Face's order; Qwen2's q/k/v biases are attn_q.bias, ...;
    Qwen3's per-head norms attn_q_norm.weight / attn_k_norm.weight;
  - GPT-2: Conv1D weights ([in, out]) are transposed to [out, in]; c_attn becomes attn_qkv.
Matrices are written in the dtype given on the command line (f32, f16, bf16 or q8_0); vectors as f32.
q8_0 is ggml's Q8_0 (type 8), from the spec's block definition: each run of 32 elements of a row is
one 34-byte block, an fp16 scale d = max|x| / 127 then 32 int8 q = round(x / d), rounding half away
from zero (ggml's reference quantiser, roundf), with 1/d computed in fp32 before the scale is
rounded to fp16.

usage: hf_to_gguf.py HF_FOLDER OUT.gguf [f32|f16|bf16|q8_0]
"""
import json
import math
import struct
import sys

import numpy as np

ALIGN = 32
GGML_F32, GGML_F16, GGML_Q8_0, GGML_BF16 = 0, 1, 8, 30
T_U32, T_F32, T_STRING = 4, 6, 8


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack_from("<Q", raw, 0)
    header = json.loads(raw[8 : 8 + n])
    data = raw[8 + n :]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        buf = data[a:b]
        if e["dtype"] == "F32":
            x = np.frombuffer(buf, dtype="<f4")
        elif e["dtype"] == "F16":
            x = np.frombuffer(buf, dtype="<f2").astype(np.float32)
        elif e["dtype"] == "BF16":
            x = (np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise SystemExit(f"{path}: {name}: dtype {e['dtype']} not handled")
        out[name] = x.reshape(e["shape"]).astype(np.float32)
    return out


def unpermute_rotate_half(w, n_head):
    """HF stores q/k rows per head as [first halves | second halves]; the original (and GGUF)
    order interleaves them: row 2i+j of a head is HF row j*HS/2 + i."""
    rows, cols = w.shape
    hs = rows // n_head
    return w.reshape(n_head, 2, hs // 2, cols).swapaxes(1, 2).reshape(rows, cols)


def rope_divisors(cfg, hd):
    """llama.cpp's rope_freqs for rope_scaling llama3: per frequency pair, 1 for wavelengths below
    old/high_freq_factor, factor above old/low_freq_factor, and 1 / ((1 - smooth)/factor + smooth)
    between, smooth = (old/wavelength - low)/(high - low)."""
    rs = cfg["rope_scaling"]
    factor, lo, hi = rs["factor"], rs.get("low_freq_factor", 1.0), rs.get("high_freq_factor", 4.0)
    old = rs.get("original_max_position_embeddings", 8192)
    freqs = 1.0 / (cfg.get("rope_theta", 10000.0) ** (np.arange(0, hd, 2, dtype=np.float32) / hd))
    out = []
    for f in freqs:
        wavelen = 2 * math.pi / f
        if wavelen < old / hi:
            out.append(1.0)
        elif wavelen > old / lo:
            out.append(factor)
        else:
            smooth = (old / wavelen - lo) / (hi - lo)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def llama_like_tensors(cfg, t):
    """llama (Llama, SmolLM2, Llama 3.x, Mistral), qwen2 and qwen3."""
    kind = cfg["model_type"]
    arch = kind if kind in ("qwen2", "qwen3") else "llama"
    nh, nkv = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    hd = cfg.get("head_dim") or cfg["hidden_size"] // nh
    # llama.cpp permutes only for its "llama" architecture (normal RoPE); qwen2/qwen3 use NEOX RoPE.
    qk = (lambda w, n: unpermute_rotate_half(w, n)) if arch == "llama" else (lambda w, n: w)
    out = [("token_embd.weight", t["model.embed_tokens.weight"])]
    rs = cfg.get("rope_scaling") or {}
    if rs.get("rope_type", rs.get("type")) == "llama3":
        out.append(("rope_freqs.weight", rope_divisors(cfg, hd)))
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        b = f"blk.{i}."
        out += [
            (b + "attn_norm.weight", t[p + "input_layernorm.weight"]),
            (b + "attn_q.weight", qk(t[p + "self_attn.q_proj.weight"], nh)),
            (b + "attn_k.weight", qk(t[p + "self_attn.k_proj.weight"], nkv)),
            (b + "attn_v.weight", t[p + "self_attn.v_proj.weight"]),
            (b + "attn_output.weight", t[p + "self_attn.o_proj.weight"]),
            (b + "ffn_norm.weight", t[p + "post_attention_layernorm.weight"]),
            (b + "ffn_gate.weight", t[p + "mlp.gate_proj.weight"]),
            (b + "ffn_up.weight", t[p + "mlp.up_proj.weight"]),
            (b + "ffn_down.weight", t[p + "mlp.down_proj.weight"]),
        ]
        for x in "qkv":
            if p + f"self_attn.{x}_proj.bias" in t:
                out.append((b + f"attn_{x}.bias", t[p + f"self_attn.{x}_proj.bias"]))
        for x in "qk":
            if p + f"self_attn.{x}_norm.weight" in t:
                out.append((b + f"attn_{x}_norm.weight", t[p + f"self_attn.{x}_norm.weight"]))
    out.append(("output_norm.weight", t["model.norm.weight"]))
    if "lm_head.weight" in t and not cfg.get("tie_word_embeddings", False):
        out.append(("output.weight", t["lm_head.weight"]))
    kv = [
        (f"{arch}.context_length", T_U32, cfg["max_position_embeddings"]),
        (f"{arch}.embedding_length", T_U32, cfg["hidden_size"]),
        (f"{arch}.block_count", T_U32, cfg["num_hidden_layers"]),
        (f"{arch}.feed_forward_length", T_U32, cfg["intermediate_size"]),
        (f"{arch}.attention.head_count", T_U32, nh),
        (f"{arch}.attention.head_count_kv", T_U32, nkv),
        (f"{arch}.attention.layer_norm_rms_epsilon", T_F32, cfg.get("rms_norm_eps", 1e-5)),
        (f"{arch}.rope.freq_base", T_F32, cfg.get("rope_theta", 10000.0)),
        (f"{arch}.rope.dimension_count", T_U32, hd),
    ]
    if "head_dim" in cfg:
        kv += [(f"{arch}.attention.key_length", T_U32, hd), (f"{arch}.attention.value_length", T_U32, hd)]
    if kind == "mistral" and cfg.get("sliding_window"):
        kv.append((f"{arch}.attention.sliding_window", T_U32, cfg["sliding_window"]))
    return arch, kv, out


def gpt2_tensors(cfg, t):
    pre = "transformer." if "transformer.wte.weight" in t else ""
    # wte twice: llama.cpp's converter writes GPT-2's tied classifier as output.weight too (its gpt2
    # loader requires the tensor)
    out = [("token_embd.weight", t[pre + "wte.weight"]), ("output.weight", t[pre + "wte.weight"]),
           ("position_embd.weight", t[pre + "wpe.weight"])]
    for i in range(cfg["n_layer"]):
        p = f"{pre}h.{i}."
        b = f"blk.{i}."
        out += [
            (b + "attn_norm.weight", t[p + "ln_1.weight"]),
            (b + "attn_norm.bias", t[p + "ln_1.bias"]),
            (b + "attn_qkv.weight", t[p + "attn.c_attn.weight"].T),
            (b + "attn_qkv.bias", t[p + "attn.c_attn.bias"]),
            (b + "attn_output.weight", t[p + "attn.c_proj.weight"].T),
            (b + "attn_output.bias", t[p + "attn.c_proj.bias"]),
            (b + "ffn_norm.weight", t[p + "ln_2.weight"]),
            (b + "ffn_norm.bias", t[p + "ln_2.bias"]),
            (b + "ffn_up.weight", t[p + "mlp.c_fc.weight"].T),
            (b + "ffn_up.bias", t[p + "mlp.c_fc.bias"]),
            (b + "ffn_down.weight", t[p + "mlp.c_proj.weight"].T),
            (b + "ffn_down.bias", t[p + "mlp.c_proj.bias"]),
        ]
    out += [("output_norm.weight", t[pre + "ln_f.weight"]), ("output_norm.bias", t[pre + "ln_f.bias"])]
    arch = "gpt2"
    kv = [
        (f"{arch}.context_length", T_U32, cfg["n_positions"]),
        (f"{arch}.embedding_length", T_U32, cfg["n_embd"]),
        (f"{arch}.block_count", T_U32, cfg["n_layer"]),
        (f"{arch}.feed_forward_length", T_U32, cfg.get("n_inner") or 4 * cfg["n_embd"]),
        (f"{arch}.attention.head_count", T_U32, cfg["n_head"]),
        (f"{arch}.attention.layer_norm_epsilon", T_F32, cfg.get("layer_norm_epsilon", 1e-5)),
    ]
    return arch, kv, out


def quantize_q8_0(x):
    """Rows of x (a multiple of 32 long) as Q8_0 blocks, in fp32 arithmetic like ggml's C."""
    blocks = x.astype(np.float32).reshape(-1, 32)
    d = np.abs(blocks).max(axis=1, keepdims=True) / np.float32(127)
    with np.errstate(divide="ignore"):
        inv = np.where(d == 0, np.float32(0), np.float32(1) / d).astype(np.float32)
    v = blocks * inv
    # roundf: half away from zero (in float64, where |v| + 0.5 is exact).
    q = (np.sign(v) * np.floor(np.abs(v).astype(np.float64) + 0.5)).astype(np.int8)
    out = np.empty((blocks.shape[0], 34), dtype=np.uint8)
    out[:, :2] = d.astype("<f2").view(np.uint8)
    out[:, 2:] = q.view(np.uint8)
    return out.tobytes()


def gguf_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def gguf_value(vtype, v):
    if vtype == T_U32:
        return struct.pack("<I", v)
    if vtype == T_F32:
        return struct.pack("<f", v)
    if vtype == T_STRING:
        return gguf_string(v)
    raise ValueError(vtype)


def main():
    folder, out_path = sys.argv[1], sys.argv[2]
    dtype = sys.argv[3] if len(sys.argv) > 3 else "f32"
    cfg = json.load(open(f"{folder}/config.json"))
    t = read_safetensors(f"{folder}/model.safetensors")
    arch, kv, tensors = (gpt2_tensors if cfg["model_type"] == "gpt2" else llama_like_tensors)(cfg, t)
    kv = [("general.architecture", T_STRING, arch), ("general.alignment", T_U32, ALIGN)] + kv

    blobs, infos, offset = [], b"", 0
    for name, x in tensors:
        x = np.ascontiguousarray(x)
        matrix = x.ndim == 2
        if matrix and dtype == "f16":
            raw, gtype = x.astype("<f2").tobytes(), GGML_F16
        elif matrix and dtype == "bf16":  # round to nearest even
            bits = x.astype("<f4").view(np.uint32).astype(np.uint64)
            raw, gtype = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2").tobytes(), GGML_BF16
        elif matrix and dtype == "q8_0":
            raw, gtype = quantize_q8_0(x), GGML_Q8_0
        else:
            raw, gtype = x.astype("<f4").tobytes(), GGML_F32
        ne = list(reversed(x.shape))  # ne[0] is the innermost dimension
        infos += gguf_string(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
        infos += struct.pack("<IQ", gtype, offset)
        pad = (-len(raw)) % ALIGN
        blobs.append(raw + b"\0" * pad)
        offset += len(raw) + pad

    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv))
    head += b"".join(gguf_string(k) + struct.pack("<I", vt) + gguf_value(vt, v) for k, vt, v in kv)
    head += infos
    head += b"\0" * ((-len(head)) % ALIGN)
    with open(out_path, "wb") as f:
        f.write(head)
        for b in blobs:
            f.write(b)


if __name__ == "__main__":
    main()
