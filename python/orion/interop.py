"""PyTorch interop: Hugging Face-named state_dicts in and out of Orion.

    sd = hf_model.state_dict()                         # GPT-2, Llama, Qwen2/3, Mistral names
    m = orion.from_state_dict(sd, hf_model.config.to_dict())
    sd2 = orion.to_state_dict(m)                       # the same names and layouts back

The tensors travel as a Hugging Face folder (config.json + model.safetensors) that Orion's own
readers and writers handle — the same code as ``orion convert`` — so every layout detail (GPT-2's
transposed Conv1D weights, Llama's rotate-half RoPE rows) is done once, in C++. torch is imported
only by the functions that return torch tensors; NumPy arrays work as input too.
"""
from __future__ import annotations

import json
import os
import struct
import tempfile
from typing import Any, Mapping, Optional

import numpy as np

from . import _core
from .model import Model, load

_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32}


def _numpy(t: Any) -> np.ndarray:
    if hasattr(t, "detach"):  # a torch tensor (bf16 has no NumPy type: widened to f32)
        t = t.detach().cpu()
        if str(t.dtype) == "torch.bfloat16":
            t = t.float()
        return t.numpy()
    return np.asarray(t)


def write_safetensors(tensors: Mapping[str, Any], path: str) -> None:
    """A .safetensors file of the tensors (f32 / f16 kept, other floats as f32)."""
    header: dict = {"__metadata__": {"format": "pt"}}
    blobs, offset = [], 0
    for name, t in tensors.items():
        a = _numpy(t)
        if a.dtype not in (np.float32, np.float16):
            a = a.astype(np.float32)
        a = np.ascontiguousarray(a)
        header[name] = {"dtype": "F32" if a.dtype == np.float32 else "F16", "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        blobs.append(a.tobytes())
        offset += a.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for b in blobs:
            f.write(b)


def read_safetensors(path: str) -> dict[str, np.ndarray]:
    """The tensors of a .safetensors file as NumPy arrays (bf16 widened to f32)."""
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    base, out = 8 + n, {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        raw = data[base + b:base + e]
        if info["dtype"] == "BF16":
            a = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            a = np.frombuffer(raw, _DTYPES[info["dtype"]])
        out[name] = a.reshape(info["shape"]).copy()
    return out


def save_state_dict(state_dict: Mapping[str, Any], config: Mapping[str, Any], folder: str | os.PathLike,
                    tokenizer: Optional[str] = None) -> str:
    """Write a Hugging Face folder Orion loads: model.safetensors + config.json (the HF config
    dict: model_type "gpt2", "llama", "qwen2", ...), and a copy of ``tokenizer`` when given."""
    folder = os.fspath(folder)
    os.makedirs(folder, exist_ok=True)
    write_safetensors(state_dict, os.path.join(folder, "model.safetensors"))
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(dict(config), f)
    if tokenizer:
        import shutil
        shutil.copy(tokenizer, os.path.join(folder, os.path.basename(tokenizer)))
    return folder


def from_state_dict(state_dict: Mapping[str, Any], config: Any, tokenizer: Optional[str] = None,
                    **load_options: Any) -> Model:
    """An ``orion.Model`` from a PyTorch state_dict with Hugging Face names.

    config: the HF config (a dict or an object with ``to_dict()``). tokenizer: a tokenizer file
    (without one, ``logits`` works and text generation does not). load_options: as ``orion.load``.
    """
    if hasattr(config, "to_dict"):
        config = config.to_dict()
    temp = tempfile.TemporaryDirectory(prefix="orion-state-")
    folder = save_state_dict(state_dict, config, temp.name, tokenizer)
    model = load(folder, **load_options)
    model._state_folder = temp  # the files live as long as the model
    return model


def _torch_dict(arrays: dict[str, np.ndarray], as_torch: bool) -> dict:
    if not as_torch:
        return arrays
    import torch
    return {k: torch.from_numpy(v) for k, v in arrays.items()}


def to_state_dict(source: Any, gradients: bool = False, as_torch: bool = True) -> dict:
    """A Hugging Face-named state_dict of an ``orion.Model`` or a full-training ``orion.Trainer``
    (its current parameters, or with ``gradients=True`` the last step's gradients by the same
    names and layouts). as_torch=False gives NumPy arrays."""
    with tempfile.TemporaryDirectory(prefix="orion-export-") as d:
        folder = os.path.join(d, "model")
        if isinstance(source, Model):
            if gradients:
                raise _core.UsageError("a loaded model has no gradients: use a Trainer")
            source._core.save(folder, "safetensors")
        else:
            source._ensure().write_state(folder, gradients)
        return _torch_dict(read_safetensors(os.path.join(folder, "model.safetensors")), as_torch)


def lora_state_dict(trainer: Any, gradients: bool = False, as_torch: bool = True) -> dict:
    """The adapter of a LoRA ``orion.Trainer`` as a PEFT state_dict (``...q_proj.lora_A.weight``),
    or with ``gradients=True`` its last step's gradients by the same names."""
    with tempfile.TemporaryDirectory(prefix="orion-lora-") as d:
        trainer._ensure().write_state(d, gradients)
        return _torch_dict(read_safetensors(os.path.join(d, "adapter_model.safetensors")), as_torch)
