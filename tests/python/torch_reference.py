"""An independent PyTorch forward of GPT-2 and Llama (Qwen2: Llama + q/k/v biases) over Hugging
Face-named state_dicts, written from the published architectures — not from Orion's code — so that
torch autograd checks Orion's whole backward pass. float64 throughout: the reference is exact to
well below the 1e-4 tolerance of Orion's fp32."""
import math

import torch
import torch.nn.functional as F

# Tiny models: vocabulary 300 (the tokenizer of the tiny CLI run), context 64.
GPT2_CONFIG = {"model_type": "gpt2", "n_embd": 32, "n_inner": 64, "n_layer": 2, "n_head": 4, "vocab_size": 300,
               "n_positions": 64, "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new"}
LLAMA_CONFIG = {"model_type": "llama", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 300, "max_position_embeddings": 64,
                "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False, "hidden_act": "silu"}


def random_gpt2_state(seed=0, std=0.1):
    g = torch.Generator().manual_seed(seed)
    c = GPT2_CONFIG
    C, H, V, T = c["n_embd"], c["n_inner"], c["vocab_size"], c["n_positions"]
    r = lambda *shape: torch.randn(*shape, generator=g) * std  # noqa: E731
    sd = {"transformer.wte.weight": r(V, C), "transformer.wpe.weight": r(T, C)}
    for i in range(c["n_layer"]):
        p = f"transformer.h.{i}."
        sd.update({p + "ln_1.weight": 1 + r(C), p + "ln_1.bias": r(C), p + "attn.c_attn.weight": r(C, 3 * C),
                   p + "attn.c_attn.bias": r(3 * C), p + "attn.c_proj.weight": r(C, C), p + "attn.c_proj.bias": r(C),
                   p + "ln_2.weight": 1 + r(C), p + "ln_2.bias": r(C), p + "mlp.c_fc.weight": r(C, H),
                   p + "mlp.c_fc.bias": r(H), p + "mlp.c_proj.weight": r(H, C), p + "mlp.c_proj.bias": r(C)})
    sd.update({"transformer.ln_f.weight": 1 + r(C), "transformer.ln_f.bias": r(C)})
    return sd


def random_llama_state(seed=0, std=0.1):
    g = torch.Generator().manual_seed(seed)
    c = LLAMA_CONFIG
    C, H, V = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    KV = C // c["num_attention_heads"] * c["num_key_value_heads"]
    r = lambda *shape: torch.randn(*shape, generator=g) * std  # noqa: E731
    sd = {"model.embed_tokens.weight": r(V, C), "model.norm.weight": 1 + r(C), "lm_head.weight": r(V, C)}
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        sd.update({p + "input_layernorm.weight": 1 + r(C), p + "self_attn.q_proj.weight": r(C, C),
                   p + "self_attn.k_proj.weight": r(KV, C), p + "self_attn.v_proj.weight": r(KV, C),
                   p + "self_attn.o_proj.weight": r(C, C), p + "post_attention_layernorm.weight": 1 + r(C),
                   p + "mlp.gate_proj.weight": r(H, C), p + "mlp.up_proj.weight": r(H, C),
                   p + "mlp.down_proj.weight": r(C, H)})
    return sd


QWEN2_CONFIG = dict(LLAMA_CONFIG, model_type="qwen2", tie_word_embeddings=True)


def random_qwen2_state(seed=0, std=0.1):
    """Qwen2: Llama with biases on q, k and v (here with a tied classifier: no lm_head)."""
    sd = random_llama_state(seed, std)
    del sd["lm_head.weight"]
    g = torch.Generator().manual_seed(seed + 1000)
    for i in range(QWEN2_CONFIG["num_hidden_layers"]):
        for proj in ("q_proj", "k_proj", "v_proj"):
            w = sd[f"model.layers.{i}.self_attn.{proj}.weight"]
            sd[f"model.layers.{i}.self_attn.{proj}.bias"] = torch.randn(w.shape[0], generator=g) * std
    return sd


def causal_attention(q, k, v):
    """q [B, NH, T, HS], k/v [B, NKV, T, HS] (groups of NH/NKV query heads share a kv head)."""
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    T = q.shape[2]
    att = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    att = att.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
    return att.softmax(-1) @ v


def gpt2_logits(sd, tokens):
    c = GPT2_CONFIG
    eps, NH = c["layer_norm_epsilon"], c["n_head"]
    B, T = tokens.shape
    x = sd["transformer.wte.weight"][tokens] + sd["transformer.wpe.weight"][:T]
    ln = lambda x, p: F.layer_norm(x, x.shape[-1:], sd[p + ".weight"], sd[p + ".bias"], eps)  # noqa: E731
    conv1d = lambda x, p: x @ sd[p + ".weight"] + sd[p + ".bias"]  # noqa: E731  HF Conv1D: [in, out]
    for i in range(c["n_layer"]):
        p = f"transformer.h.{i}."
        q, k, v = conv1d(ln(x, p + "ln_1"), p + "attn.c_attn").split(c["n_embd"], dim=-1)
        heads = lambda t: t.view(B, T, NH, -1).transpose(1, 2)  # noqa: E731
        y = causal_attention(heads(q), heads(k), heads(v)).transpose(1, 2).reshape(B, T, -1)
        x = x + conv1d(y, p + "attn.c_proj")
        x = x + conv1d(F.gelu(conv1d(ln(x, p + "ln_2"), p + "mlp.c_fc"), approximate="tanh"), p + "mlp.c_proj")
    return ln(x, "transformer.ln_f") @ sd["transformer.wte.weight"].T


def rope_rotate_half(x, theta):
    """Hugging Face Llama's rotary embedding: x [B, NH, T, HS], halves rotated."""
    T, HS = x.shape[2], x.shape[3]
    inv = 1.0 / theta ** (torch.arange(0, HS, 2, dtype=torch.float64) / HS)
    ang = torch.outer(torch.arange(T, dtype=torch.float64), inv)
    cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)
    x1, x2 = x[..., :HS // 2], x[..., HS // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


def llama_logits(sd, tokens, lora=None, lora_scale=1.0):
    """lora: {"layers.{i}.q": (A [r, in], B [out, r]), ...} added as W + s·B·A (PEFT's convention)."""
    c = LLAMA_CONFIG
    eps, NH, NKV = c["rms_norm_eps"], c["num_attention_heads"], c["num_key_value_heads"]
    B, T = tokens.shape
    x = sd["model.embed_tokens.weight"][tokens]
    rms = lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w  # noqa: E731

    def linear(x, i, name, key):
        w = sd[f"model.layers.{i}.{name}.weight"]
        if lora and f"layers.{i}.{key}" in lora:
            A, Bm = lora[f"layers.{i}.{key}"]
            w = w + lora_scale * Bm @ A
        bias = sd.get(f"model.layers.{i}.{name}.bias")  # Qwen2's q, k, v
        return x @ w.T + (bias if bias is not None else 0)

    for i in range(c["num_hidden_layers"]):
        h = rms(x, sd[f"model.layers.{i}.input_layernorm.weight"])
        q = linear(h, i, "self_attn.q_proj", "q").view(B, T, NH, -1).transpose(1, 2)
        k = linear(h, i, "self_attn.k_proj", "k").view(B, T, NKV, -1).transpose(1, 2)
        v = linear(h, i, "self_attn.v_proj", "v").view(B, T, NKV, -1).transpose(1, 2)
        q, k = rope_rotate_half(q, c["rope_theta"]), rope_rotate_half(k, c["rope_theta"])
        y = causal_attention(q, k, v).transpose(1, 2).reshape(B, T, -1)
        x = x + linear(y, i, "self_attn.o_proj", "o")
        h = rms(x, sd[f"model.layers.{i}.post_attention_layernorm.weight"])
        x = x + linear(F.silu(linear(h, i, "mlp.gate_proj", "w1")) * linear(h, i, "mlp.up_proj", "w3"), i,
                       "mlp.down_proj", "w2")
    classifier = sd.get("lm_head.weight", sd["model.embed_tokens.weight"])  # tied when there is no lm_head
    return rms(x, sd["model.norm.weight"]) @ classifier.T


def loss_of(logits, tokens):
    """Mean cross-entropy of predicting tokens[:, 1:] from the logits of tokens[:, :-1]."""
    V = logits.shape[-1]
    return F.cross_entropy(logits.reshape(-1, V), tokens[:, 1:].reshape(-1))
