"""Training through Python: Trainer.fit gives the losses of `orion train` bit for bit, resume
continues bit for bit, Ctrl-C leaves a checkpoint, errors carry the CLI's messages, step() on
NumPy tokens, parameters and gradients."""
import os
import signal
import time

import numpy as np
import pytest

import orion
from conftest import TINY_TRAIN, cli_error_line, metrics_losses, run_cli


def cli_flags(options):
    return orion.Trainer(None, **options).flags


def test_fit_losses_equal_cli(tmp_path, tiny_config_file):
    options = dict(TINY_TRAIN, steps=8)
    cli_out, py_out = str(tmp_path / "cli"), str(tmp_path / "py")
    run_cli("train", "--config", tiny_config_file, *cli_flags(options), "--no-progress", "--out", cli_out)
    seen = []
    t = orion.Trainer(tiny_config_file, progress=False, out=py_out, **options)
    result = t.fit(callbacks=[seen.append])
    assert [m["loss"] for m in seen] == metrics_losses(cli_out)  # bit for bit
    assert metrics_losses(py_out) == metrics_losses(cli_out)
    assert [m["step"] for m in seen] == list(range(8)) and "val_loss" in seen[4]
    assert result["steps_done"] == 8 and os.path.exists(result["model"])
    with open(os.path.join(cli_out, "model.bin"), "rb") as a, open(result["model"], "rb") as b:
        assert a.read() == b.read()


def test_resume_through_python_is_bit_identical(tmp_path, tiny_config_file):
    straight, chained = str(tmp_path / "straight"), str(tmp_path / "chained")
    orion.Trainer(tiny_config_file, progress=False, out=straight, steps=6, **TINY_TRAIN).fit()
    orion.Trainer(tiny_config_file, progress=False, out=chained, steps=6, stop_after=2, **TINY_TRAIN).fit()
    orion.Trainer.resume(chained, progress=False, stop_after=2).fit()
    orion.Trainer.resume(chained, progress=False).fit()
    assert metrics_losses(chained) == metrics_losses(straight)


def test_ctrl_c_stops_fit_with_a_valid_checkpoint(tmp_path, tiny_config_file):
    out = str(tmp_path / "run")

    def interrupt(metrics):
        if metrics["step"] == 2:
            os.kill(os.getpid(), signal.SIGINT)

    t = orion.Trainer(tiny_config_file, progress=False, out=out, steps=50, **TINY_TRAIN)
    with pytest.raises(KeyboardInterrupt, match="checkpoint"):
        t.fit(callbacks=[interrupt])
    assert t.step_index == 3
    ckpt = os.path.join(out, "checkpoints", "ckpt_00000003.ckpt")
    assert os.path.exists(ckpt)
    resumed = orion.Trainer.resume(ckpt, progress=False, steps=5)
    assert resumed.fit()["steps_done"] == 5
    with pytest.raises(KeyboardInterrupt):  # Python's handler is back: Ctrl-C raises again at once
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(2)


@pytest.mark.parametrize("bad", [dict(batch=0), dict(schedule="linear"), dict(vocab=10), dict(lr=-1.0)])
def test_option_errors_carry_the_cli_message(tmp_path, tiny_config_file, bad):
    options = dict(TINY_TRAIN, steps=2, out=str(tmp_path / "x"), **bad)
    with pytest.raises(orion.Error) as e:
        orion.Trainer(tiny_config_file, progress=False, **options).fit()
    assert str(e.value) == cli_error_line("train", "--config", tiny_config_file, *cli_flags(options), "--no-progress")


def test_unknown_option_is_a_usage_error():
    with pytest.raises(orion.UsageError, match="--no-such-option"):
        orion.Trainer("stories260k", no_such_option=3).step()


def test_step_on_numpy_tokens_and_gradients(tmp_path, tiny_config_file):
    t = orion.Trainer(tiny_config_file, progress=False, out=str(tmp_path / "run"), steps=10, clip=0.0, **TINY_TRAIN)
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 300, size=(4, 33), dtype=np.int64)
    before = t.parameters()
    m = t.step(tokens)
    assert m["step"] == 0 and np.isfinite(m["loss"]) and abs(m["loss"] - np.log(300)) < 0.5
    grads, after = t.gradients(), t.parameters()
    assert set(grads) == set(before) and grads["layers.0.wq"].shape == (32, 32)
    norm = np.sqrt(sum(float((g.astype(np.float64) ** 2).sum()) for g in grads.values()))
    assert abs(norm - m["grad_norm"]) <= 1e-4 * norm
    assert not np.array_equal(before["layers.0.wq"], after["layers.0.wq"])  # AdamW moved them
    with pytest.raises(orion.UsageError, match="4 rows of 32 tokens"):
        t.step(tokens[:, :20])
    with pytest.raises(orion.UsageError, match="token id 300 is outside"):
        t.step(np.full((4, 33), 300))
    assert t.step()["step"] == 1  # the data's own next batch
    assert t.evaluate() > 0 and os.path.exists(t.save())
    assert t.fit(steps=4)["steps_done"] == 4  # a new total after hand-written steps
    run = str(tmp_path / "run")
    exported = orion.load(t.export(str(tmp_path / "exported.bin")), tokenizer=os.path.join(run, "tokenizer.bin"))
    final = orion.load(os.path.join(run, "model.bin"))  # what fit() exported at its end
    np.testing.assert_array_equal(exported.logits([1, 5, 9]), final.logits([1, 5, 9]))


def test_lora_fit_and_adapter_generation(tmp_path, tiny_run):
    base = os.path.join(tiny_run, "model.bin")
    out = str(tmp_path / "lora")
    t = orion.Trainer(base, lora=dict(rank=4, targets=["q", "v"]), progress=False, data="builtin:200", batch=4, seq=32,
                      steps=4, out=out)
    seen = []
    r = t.fit(callbacks=[seen.append])
    assert len(seen) == 4 and os.path.exists(r["model"])
    params = t.parameters()
    assert params["layers.0.q.lora_A"].shape == (4, 32) and params["layers.1.v.lora_B"].shape == (16, 4)
    m = orion.load(base)
    name = m.load_adapter(out)
    assert name == "lora" and m.adapters == ["lora"]
    assert m.generate("Once upon a time", max_tokens=8, seed=1, adapter="lora")


def test_lora_resume_through_python_is_bit_identical(tmp_path, tiny_run):
    base = os.path.join(tiny_run, "model.bin")
    options = dict(lora=dict(rank=4, targets=["q", "v"]), progress=False, data="builtin:200", batch=4, seq=32, steps=4)
    straight, chained = str(tmp_path / "straight"), str(tmp_path / "chained")
    orion.Trainer(base, out=straight, **options).fit()
    orion.Trainer(base, out=chained, stop_after=2, **options).fit()
    assert orion.Trainer.resume(chained, lora_base=base, out=chained, progress=False).fit()["steps_done"] == 4
    assert metrics_losses(chained) == metrics_losses(straight)
