"""Orion from Python: run, train, fine-tune (LoRA) and compile small language models.

The same C++ core as the ``orion`` command line, through a compiled extension (``orion._core``):
the same options, defaults, error messages and bits.

    import orion
    m = orion.load("stories15M.bin")                  # tokenizer found beside the model
    print(m.generate("Once upon a time", max_tokens=40, seed=1))

    t = orion.Trainer("stories260k", steps=200, out="run1")   # the flags of `orion train`
    t.fit(callbacks=[lambda s: print(s["step"], s["loss"])])

Errors are ``orion.Error`` (``UsageError``, ``InputError``) carrying the CLI's message.
PyTorch interop (``orion.interop``) imports torch only when it returns torch tensors.
"""
from . import _core
from ._core import Error, InputError, UsageError
from . import interop
from .compiler import Programs, compile, mil_check
from .interop import from_state_dict, lora_state_dict, to_state_dict
from .model import Model, Tokenizer, load
from .training import Trainer

__version__ = _core.__version__

__all__ = [
    "Error", "InputError", "UsageError", "Model", "Tokenizer", "load", "Trainer", "Programs", "compile",
    "mil_check", "from_state_dict", "to_state_dict", "lora_state_dict",
]

