"""Inference through Python: the same text as `orion generate`, streaming, logits, the tokenizer,
adapters, and the CLI's error messages."""
import json
import os
import signal
import threading

import numpy as np
import pytest

import orion
from conftest import cli_error_line, run_cli


@pytest.fixture(scope="module")
def model(tiny_run):
    return orion.load(os.path.join(tiny_run, "model.bin"))


@pytest.mark.parametrize("seed,temperature", [(7, 1.0), (3, 0.8), (0, 0.0)])
def test_generate_equals_cli(model, tiny_run, seed, temperature):
    prompt = "Once upon a time"
    cli = run_cli("generate", "--model", os.path.join(tiny_run, "model.bin"), "--prompt", prompt, "-n", "24", "--seed",
                  str(seed), "--temperature", str(temperature)).stdout
    text = model.generate(prompt, max_tokens=24, seed=seed, temperature=temperature)
    assert cli == prompt + text + "\n"
    assert model.last_stats["generated_tokens"] >= 1


def test_f16_kv_cache_equals_cli(tiny_run):
    path = os.path.join(tiny_run, "model.bin")
    cli = run_cli("generate", "--model", path, "--prompt", "Once", "-n", "16", "--temperature", "0",
                  "--kv-cache", "f16").stdout
    assert cli == "Once" + orion.load(path, kv_cache="f16").generate("Once", max_tokens=16, temperature=0) + "\n"
    with pytest.raises(orion.UsageError) as e:
        orion.load(path, kv_cache="q8_0")
    assert "unknown KV cache type 'q8_0'" in str(e.value)


def test_stream_yields_the_generated_pieces(model):
    pieces = list(model.stream("Once upon a time", max_tokens=16, seed=5))
    assert len(pieces) > 1
    assert "".join(pieces) == model.generate("Once upon a time", max_tokens=16, seed=5)
    for _ in model.stream("The cat", max_tokens=16, seed=5):  # leaving early stops the generation
        break
    assert model.generate("The cat", max_tokens=4, seed=5)  # and the model is free again


def test_logits_are_the_greedy_choice_and_positionwise(model):
    ids = model.tokenizer.encode("Once upon a time", add_bos=True)
    logits = model.logits(ids)
    assert logits.shape == (len(ids), model.config["vocab_size"]) and logits.dtype == np.float32
    greedy = model.generate("Once upon a time", max_tokens=1, temperature=0)
    assert model.tokenizer.decode([int(np.argmax(logits[-1]))]).strip() == greedy.strip()
    # Causal: the logits of a prefix do not depend on what follows it.
    np.testing.assert_array_equal(model.logits(ids[:3]), logits[:3])


def test_tokenizer_equals_cli_and_round_trips(model, tiny_run):
    tok = model.tokenizer
    ids = tok.encode("the little dog", add_bos=False)
    cli = run_cli("tokenize", "--tokenizer", os.path.join(tiny_run, "tokenizer.bin"), "--text", "the little dog").stdout
    assert ids == json.loads(cli)
    assert tok.decode(ids).strip() == "the little dog"  # llama2.c's pieces carry a leading space
    assert tok.vocab_size == 300


def test_errors_carry_the_cli_message(tmp_path, model):
    missing = str(tmp_path / "missing.bin")
    with pytest.raises(orion.InputError) as e:
        orion.load(missing)
    assert str(e.value) == cli_error_line("generate", "--model", missing)
    assert e.value.exit_code == 3 and e.value.file == missing
    with pytest.raises(orion.UsageError) as e:
        model.generate("x", adapter="nope")
    assert "no adapter named 'nope'" in str(e.value)
    with pytest.raises(orion.UsageError):
        orion.load(os.path.join(os.path.dirname(model.path), "model.bin"), dtype="f12")


def test_ctrl_c_interrupts_generation(model):
    threading.Timer(0.05, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    with pytest.raises(KeyboardInterrupt):
        for _ in range(200):  # long enough to still be generating when the signal arrives
            model.generate("Once upon a time", max_tokens=60, seed=1)


@pytest.mark.skipif(not os.environ.get("ORION_SLOW_TESTS"), reason="minutes on anesim (the tiny model's attention "
                    "programs need the 1024-token bucket); ORION_SLOW_TESTS=1 runs it")
def test_anesim_backend_follows_the_cpu(model, tiny_run):
    ane = orion.load(os.path.join(tiny_run, "model.bin"), backend="anesim")
    ids = model.tokenizer.encode("Once upon a time", add_bos=True)
    np.testing.assert_allclose(ane.logits(ids), model.logits(ids), atol=5e-3)  # fp16 programs
    cli = run_cli("generate", "--model", os.path.join(tiny_run, "model.bin"), "--backend", "anesim", "-n", "6",
                  "--seed", "2").stdout
    assert cli == "Once upon a time" + ane.generate("Once upon a time", max_tokens=6, seed=2) + "\n"
