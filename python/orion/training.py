"""Training: ``Trainer`` — ``orion train`` and ``orion lora train`` with a PyTorch-like API."""
from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Callable, Iterable, Optional

import numpy as np

from . import _core
from ._core import UsageError

Callback = Callable[[dict], Any]


def _flags(options: dict) -> list[str]:
    """Keyword options as the CLI's flags: lr=1e-3 → --lr 0.001, eval_every → --eval-every,
    True → the bare flag (plain=True → --plain), False / None → left out, a list → comma-separated."""
    out: list[str] = []
    for key, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            out.append(flag)
        elif isinstance(value, (list, tuple)):
            out += [flag, ",".join(str(v) for v in value)]
        elif isinstance(value, float):
            out += [flag, repr(value)]  # the shortest text that reads back as the same number
        else:
            out += [flag, os.fspath(value) if isinstance(value, os.PathLike) else str(value)]
    return out


class Trainer:
    """Train a model (every parameter) or a LoRA adapter, from Python.

    Options are the flags of ``orion train`` (or, with ``lora=``, ``orion lora train``) written as
    keywords — ``lr``, ``batch``, ``seq``, ``steps``, ``data``, ``out``, ``eval_every``,
    ``checkpoint_every``, ``backend``, ``plain=True``, ... — with the CLI's defaults, checks and
    error messages (``orion.UsageError``). See ``orion train --help``.

    model: a preset name ("stories260k"), a config dict or JSON file of dimensions (a fresh model),
    or a model file / ``orion.Model`` (fine-tune it: ``--init``; with ``lora=`` the frozen base).
    lora: ``dict(rank=16, alpha=16, targets=["q", "v"])`` trains an adapter instead.
    progress: print the CLI's progress lines to stderr (False: quiet; callbacks still run).

        t = orion.Trainer("stories260k", data="builtin:300", vocab=300, steps=50, out="run")
        t.fit(callbacks=[lambda m: print(m["step"], m["loss"])])
        t2 = orion.Trainer.resume("run", steps=100)

    The run is built on first use (fit, step, evaluate, ...): until then ``fit(data=..., steps=...)``
    may still set the data and the total number of steps.
    """

    def __init__(self, model: Any = "stories260k", *, lora: Optional[dict] = None, progress: bool = True,
                 **options: Any):
        self._lora = lora is not None
        self._options = dict(options)
        self._temp: Optional[tempfile.TemporaryDirectory] = None
        self._callbacks: list = []
        self._core: Optional[_core.Trainer] = None
        if not progress:
            self._options["no_progress"] = True
        if model is not None:
            self._set_model(model)
        if lora is not None:
            self._options.update(lora)

    @classmethod
    def resume(cls, path: str | os.PathLike, *, lora_base: Any = None, **options: Any) -> "Trainer":
        """Continue a run bit for bit from its folder or a checkpoint (``--resume``); ``steps``
        sets a new total. For a LoRA run pass its base model as ``lora_base``."""
        t = cls(lora_base, lora={} if lora_base is not None else None, resume=os.fspath(path), **options)
        return t

    def _set_model(self, model: Any) -> None:
        path = getattr(model, "path", model)  # an orion.Model: its file
        if isinstance(path, dict):
            self._temp = tempfile.TemporaryDirectory(prefix="orion-config-")
            config = os.path.join(self._temp.name, "config.json")
            with open(config, "w") as f:
                json.dump(path, f)
            self._options["config"] = config
        elif self._lora:
            self._options["model"] = os.fspath(path)
        elif isinstance(path, os.PathLike) or (os.path.exists(path) and not str(path).endswith(".json")):
            self._options["init"] = os.fspath(path)
        else:
            self._options["config"] = path

    def _ensure(self) -> _core.Trainer:
        if self._core is None:
            self._core = _core.Trainer(_flags(self._options), self._lora, self._on_step)
        return self._core

    def _on_step(self, metrics: dict) -> None:
        for cb in self._callbacks:
            (cb.on_step if hasattr(cb, "on_step") else cb)(metrics)

    @property
    def flags(self) -> list[str]:
        """The CLI flags these options stand for (``orion train`` + these gives the same run)."""
        return _flags(self._options)

    def fit(self, data: Optional[str] = None, steps: Optional[int] = None,
            callbacks: Iterable[Callback] = ()) -> dict:
        """Run until ``steps`` steps in total (the CLI's ``--steps``; default the options'), with
        evaluations, the metrics log, checkpoints and the final export, exactly as ``orion train``.

        callbacks: functions (or objects with ``on_step``) called after every step with its metrics:
        step, loss, lr, grad_norm, ms, skipped, val_loss (at evaluations), phases (ANE phase times).
        Ctrl-C finishes the step, writes a checkpoint and raises KeyboardInterrupt.
        Returns the result: steps_done, first_loss, last_loss, val_loss, checkpoint, model, ...
        """
        if data is not None:
            if self._core is not None and self._options.get("data") != data:
                raise UsageError("the data is set when the run is built: pass data= to the first fit() or to Trainer()")
            self._options["data"] = data
        if steps is not None and self._core is None:
            self._options["steps"] = steps
            steps = None
        core = self._ensure()
        self._callbacks = list(callbacks)
        try:
            return core.fit(steps)
        finally:
            self._callbacks = []

    def step(self, tokens: Optional[np.ndarray] = None) -> dict:
        """One optimisation step; returns its metrics (step, loss, lr, grad_norm, ms, skipped).

        tokens: int array [batch, seq+1] (or [accum, batch, seq+1]) — inputs are ``tokens[..., :-1]``,
        targets ``tokens[..., 1:]``; None: the data's next batches.
        """
        return self._ensure().step(None if tokens is None else np.asarray(tokens))

    def evaluate(self) -> float:
        """Mean validation loss over ``eval_batches`` batches (-1 without validation data)."""
        return self._ensure().evaluate()

    def save(self) -> str:
        """Write a checkpoint of the current state; returns its path."""
        return self._ensure().save()

    def export(self, path: Optional[str | os.PathLike] = None) -> str:
        """Write the model (full training: to ``path`` or the run folder) or the adapter (LoRA:
        into the run folder); returns what was written."""
        return self._ensure().export(os.fspath(path) if path else "")

    @property
    def step_index(self) -> int:
        """Steps of the run done so far."""
        return self._ensure().step_index

    def parameters(self) -> dict[str, np.ndarray]:
        """The trained values by name, float32 copies: every parameter ("tok_emb",
        "layers.0.wq", ...; [out, in] matrices) or the adapter's "layers.0.q.lora_A" / "lora_B"."""
        return self._ensure().parameters()

    def gradients(self) -> dict[str, np.ndarray]:
        """The gradients of the last step by the same names (before clipping)."""
        return self._ensure().gradients()

