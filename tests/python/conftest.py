"""Shared fixtures of the Python package's tests: the orion binary beside the package, a tiny model
trained by the CLI once per session (the tiny config of tests/tools/test_cli_train.cpp), and the
CLI's error line for comparing messages.

Run: PYTHONPATH=build/python /usr/bin/python3 -m pytest -q tests/python   (ctest runs the same)."""
import json
import os
import subprocess

import pytest

pytest.importorskip("numpy", reason="the orion package needs NumPy (Debian python3-numpy)")
try:
    import orion  # noqa: F401
except ImportError as e:  # built without pybind11, or PYTHONPATH not set
    pytest.skip(f"the orion package is not importable ({e}); build with pybind11-dev and set PYTHONPATH=build/python",
                allow_module_level=True)

TINY_CONFIG = {"arch": "llama", "dim": 32, "hidden_dim": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2,
               "vocab_size": 300, "seq_len": 64}
# The options of a tiny, quick training run, as keywords and as the same CLI flags.
TINY_TRAIN = dict(data="builtin:300", vocab=300, batch=4, seq=32, lr=1e-2, eval_every=5)


def orion_binary() -> str:
    here = os.path.dirname(os.path.abspath(orion.__file__))  # build/python/orion
    path = os.environ.get("ORION_BINARY") or os.path.join(here, "..", "..", "orion")
    if not os.path.exists(path):
        pytest.skip(f"the orion binary is not at {path} (set ORION_BINARY)")
    return path


def run_cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """The binary's run; stdout and stderr decoded as Python decodes Orion's text (bytes that are
    not UTF-8, which an untrained model emits, replaced)."""
    r = subprocess.run([orion_binary(), *args], capture_output=True, text=True, errors="replace")
    if check and r.returncode != 0:
        raise AssertionError(f"orion {' '.join(args)} failed: {r.stderr}")
    return r


def cli_error_line(*args: str) -> str:
    """The message of the CLI's one error line for these arguments ("orion: error: " taken off)."""
    r = run_cli(*args, check=False)
    assert r.returncode != 0, r.stdout
    line = r.stderr.strip().splitlines()[-1]
    for prefix in ("orion: usage error: ", "orion: error: "):
        if line.startswith(prefix):
            return line[len(prefix):]
    raise AssertionError(f"not an error line: {line}")


def metrics_losses(run_dir: str) -> list:
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(line)["loss"] for line in f if line.strip()]


@pytest.fixture(scope="session")
def tiny_config_file(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("config") / "tiny.json"
    path.write_text(json.dumps(TINY_CONFIG))
    return str(path)


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory, tiny_config_file) -> str:
    """A run folder of `orion train` (model.bin, tokenizer.bin) after a few steps on the built-in stories."""
    out = str(tmp_path_factory.mktemp("tiny") / "run")
    run_cli("train", "--config", tiny_config_file, "--data", "builtin:300", "--vocab", "300", "--batch", "4", "--seq",
            "32", "--lr", "1e-2", "--steps", "6", "--no-progress", "--out", out)
    return out
