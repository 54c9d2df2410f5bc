"""Inference: ``orion.load`` and ``Model`` (generation, streaming, logits, LoRA adapters)."""
from __future__ import annotations

import os
import queue
import threading
from typing import Iterator, Optional, Sequence

import numpy as np

from . import _core

Tokenizer = _core.Tokenizer


def load(path: str | os.PathLike, dtype: Optional[str] = None, backend: str = "cpu", tokenizer: Optional[str] = None,
         chip: str = "m4", max_seq: int = 0, threads: int = 0, kv_cache: str = "f32") -> "Model":
    """Load a model for inference, as ``orion generate --model PATH`` does.

    path: a llama2.c ``.bin``, a Hugging Face folder (safetensors + config.json), an llm.c ``.bin``
    or a GGUF file. dtype: convert the matrices at load ("f32", "f16", "bf16"; default: as stored).
    backend: "cpu" (every layer on the CPU), "anesim" (the transformer blocks as ANE programs on
    the software ANE) or "ane" (macOS). tokenizer: default the one beside the model.
    max_seq: context to allocate (0: the model's). threads: CPU threads of the kernels (0: all
    cores; like --threads it applies to the whole process). kv_cache: "f32" (the reference) or
    "f16" (half the KV cache's memory; CPU backend), as ``--kv-cache``.
    """
    return Model(_core.Model(os.fspath(path), tokenizer or "", dtype or "", backend, chip, max_seq, threads, kv_cache))


class Model:
    """A model loaded by ``orion.load``; generation runs with the GIL released."""

    def __init__(self, core: _core.Model):
        self._core = core

    @property
    def tokenizer(self) -> Tokenizer:
        """The model's tokenizer: ``encode(text, add_bos=False)``, ``decode(ids)``."""
        return self._core.tokenizer

    @property
    def config(self) -> dict:
        """The model's dimensions (arch, dim, n_layers, vocab_size, seq_len, ...)."""
        return self._core.config

    @property
    def path(self) -> str:
        return self._core.path

    @property
    def adapters(self) -> list[str]:
        """Names of the LoRA adapters loaded with ``load_adapter``."""
        return self._core.adapters

    @property
    def last_stats(self) -> dict:
        """Speed of the last generation: prompt/generated tokens, prefill and decode tok/s."""
        return self._core.last_stats

    def generate(self, prompt: str, max_tokens: int = 256, temperature: float = 1.0, top_p: float = 0.9,
                 top_k: int = 0, seed: int = 0, adapter: Optional[str] = None, add_bos: bool = True,
                 lora_scale: float = 1.0) -> str:
        """The text generated after ``prompt`` (without the prompt), as ``orion generate`` prints it.

        The defaults are the CLI's (``-n 256 --temperature 1 --top-p 0.9 --seed 0``); the same
        arguments give the same text. temperature 0 is greedy. adapter: the name of an adapter
        given to ``load_adapter``. Stops at the end-of-sequence token. Ctrl-C raises
        KeyboardInterrupt at the next token.
        """
        return self._core.generate(prompt, max_tokens, temperature, top_p, top_k, seed, adapter, add_bos, lora_scale)

    def stream(self, prompt: str, max_tokens: int = 256, temperature: float = 1.0, top_p: float = 0.9,
               top_k: int = 0, seed: int = 0, adapter: Optional[str] = None, add_bos: bool = True,
               lora_scale: float = 1.0) -> Iterator[str]:
        """Like ``generate``, yielding each piece of text as soon as its token is chosen.

        The generation runs in a worker thread; leaving the loop early stops it.
        """
        pieces: queue.Queue = queue.Queue()
        stop = threading.Event()
        done = object()
        failure: list[BaseException] = []

        def on_piece(piece: str) -> bool:
            pieces.put(piece)
            return not stop.is_set()

        def work() -> None:
            try:
                self._core.generate(prompt, max_tokens, temperature, top_p, top_k, seed, adapter, add_bos, lora_scale,
                                    on_piece)
            except BaseException as e:  # handed to the consumer
                failure.append(e)
            finally:
                pieces.put(done)

        worker = threading.Thread(target=work, daemon=True)
        worker.start()
        try:
            while True:
                piece = pieces.get()
                if piece is done:
                    break
                yield piece
        finally:
            stop.set()
            worker.join()
        if failure:
            raise failure[0]

    def logits(self, tokens: Sequence[int] | np.ndarray) -> np.ndarray:
        """Logits of every position of ``tokens`` (a fresh sequence): float32 [n, vocab_size]."""
        return self._core.logits(np.asarray(tokens))

    def load_adapter(self, path: str | os.PathLike, name: Optional[str] = None) -> str:
        """Load a LoRA adapter (adapter.olora, a PEFT folder, or an ``orion lora train`` folder).

        It is used by ``generate(..., adapter=name)``; switching adapters moves no weights.
        name: default the file's or folder's name. Returns the name.
        """
        path = os.fspath(path)
        if name is None:
            base = os.path.basename(os.path.normpath(path))
            name = os.path.basename(os.path.dirname(os.path.normpath(path))) if base.startswith("adapter") else base
            name = name.removesuffix(".olora")
        self._core.load_adapter(path, name)
        return name

    def __repr__(self) -> str:
        return f"orion.Model({self.path!r}, {self.config['describe']}, backend={self._core.backend!r})"
