"""The ANE compiler from Python: ``compile`` (``orion compile``) and ``mil_check`` (``orion mil check``)."""
from __future__ import annotations

import os
import tempfile
from typing import Any, Optional

from . import _core


class Programs(list):
    """The programs of a compile, in the order the runner loads them. Each is a dict: ``name``,
    ``mil`` (the MIL text handed to the ANE), ``blobs`` (weight file → bytes), ``manifest`` (inputs,
    outputs, buffer sizes, SRAM estimate, warnings, ...) and ``dir`` (where it was written).
    ``summary`` holds the whole compile's manifest (chip, seq, compile_ms, warnings)."""

    def __init__(self, result: dict, keep: Optional[tempfile.TemporaryDirectory] = None):
        super().__init__(result.pop("programs"))
        self.summary = result
        self._keep = keep  # the temporary folder the programs were written to, while they are in use

    def __getitem__(self, key):  # also by name: programs["layer00.attn..."]
        if isinstance(key, str):
            for p in self:
                if p["name"] == key:
                    return p
            raise KeyError(key)
        return super().__getitem__(key)

    def __repr__(self) -> str:
        return f"<orion.Programs: {len(self)} program(s) for {self.summary.get('chip')}>"


def compile(model: Any = None, chip: str = "m4", seq: int = 64, use: str = "generate", *, config: Optional[str] = None,
            ir: Optional[str] = None, out: Optional[str | os.PathLike] = None, seed: int = 1) -> Programs:
    """Compile a model's ANE programs, as ``orion compile`` does.

    model: a model file / folder or an ``orion.Model``; or config: a preset name (random weights
    of ``seed``); or ir: Orion IR text of one graph. use: the program set of generation
    ("generate", a prompt of ``seq`` tokens) or of training ("train"). out: where the programs
    are written (default: a temporary folder kept while the result lives). The GIL is released.
    """
    keep = None
    if out is None:
        keep = tempfile.TemporaryDirectory(prefix="orion-compile-")
        out = keep.name
    ir_file = ""
    if ir is not None:
        ir_file = os.path.join(keep.name if keep else os.fspath(out), "input.orion-ir")
        os.makedirs(os.path.dirname(ir_file), exist_ok=True)
        with open(ir_file, "w") as f:
            f.write(ir)
    path = getattr(model, "path", model)
    result = _core.compile(model=os.fspath(path) if path is not None else "", config=config or "", ir_file=ir_file,
                           out=os.fspath(out), chip=chip, seq=seq, use=use, seed=seed)
    return Programs(result, keep)


def mil_check(text: str, chip: str = "m4", weights: Optional[dict[str, bytes]] = None) -> dict:
    """The ANE rules a MIL program breaks, as written (``orion mil check``).

    weights: blob file name → bytes (a program's ``weights/`` folder). Returns ``ok`` (no errors),
    ``nodes`` and ``diagnostics`` (level, rule, node, message, text).
    """
    return _core.mil_check(text, chip, weights or {})
