"""PyTorch interop and the independent check of Orion's backward pass: for a tiny GPT-2, Llama and
Qwen2 (q/k/v biases, tied classifier) built from one state_dict, Orion's loss and every parameter gradient equal torch autograd's on
tests/python/torch_reference.py within 1e-4 relative; the same for a LoRA adapter's gradients;
logits equal the torch forward within 1e-5; state_dicts go in and out unchanged."""
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the interop tests need PyTorch (Debian python3-torch)")
import orion  # noqa: E402
import torch_reference as ref  # noqa: E402

FAMILIES = {"gpt2": (ref.GPT2_CONFIG, ref.random_gpt2_state, ref.gpt2_logits),
            "llama": (ref.LLAMA_CONFIG, ref.random_llama_state, ref.llama_logits),
            "qwen2": (ref.QWEN2_CONFIG, ref.random_qwen2_state, ref.llama_logits)}
B, T = 2, 16


def tokens(seed):
    return torch.from_numpy(np.random.default_rng(seed).integers(0, 300, size=(B, T + 1)))


def relative_error(ours, theirs):
    ours, theirs = np.asarray(ours, np.float64), theirs.detach().numpy()
    return float(np.abs(ours - theirs).max() / max(np.abs(theirs).max(), 1e-12))


@pytest.fixture(scope="module")
def tokenizer(tiny_run):
    return os.path.join(tiny_run, "tokenizer.bin")


@pytest.mark.parametrize("family", FAMILIES)
def test_logits_equal_torch_forward(family):
    config, make, forward = FAMILIES[family]
    sd = make(seed=1)
    m = orion.from_state_dict(sd, config)
    ids = tokens(2)[0]
    ours = m.logits(ids.numpy())
    theirs = forward({k: v.double() for k, v in sd.items()}, ids[None])[0]
    assert np.abs(ours - theirs.numpy()).max() <= 1e-5 * max(1.0, float(theirs.abs().max()))


@pytest.mark.parametrize("family", FAMILIES)
def test_state_dict_round_trip(family):
    config, make, _ = FAMILIES[family]
    sd = make(seed=3)
    back = orion.to_state_dict(orion.from_state_dict(sd, config))
    assert set(back) >= set(sd)
    for name, t in sd.items():
        assert torch.equal(back[name], t), name


@pytest.mark.parametrize("family", FAMILIES)
def test_gradients_equal_torch_autograd(tmp_path, tokenizer, family):
    config, make, forward = FAMILIES[family]
    sd = make(seed=4)
    folder = orion.interop.save_state_dict(sd, config, tmp_path / "model", tokenizer)
    t = orion.Trainer(folder, progress=False, data="builtin:200", tokenizer=tokenizer, batch=B, seq=T, clip=0.0,
                      steps=5, out=str(tmp_path / "run"))
    batch = tokens(5)
    metrics = t.step(batch.numpy())
    grads = orion.to_state_dict(t, gradients=True)

    params = {k: v.double().requires_grad_() for k, v in sd.items()}
    loss = ref.loss_of(forward(params, batch[:, :-1]), batch)
    loss.backward()
    assert abs(metrics["loss"] - loss.item()) <= 1e-4 * loss.item()
    for name, p in params.items():
        assert relative_error(grads[name], p.grad) <= 1e-4, name


def test_lora_gradients_equal_torch_autograd(tmp_path, tokenizer):
    sd = ref.random_llama_state(seed=6)
    folder = orion.interop.save_state_dict(sd, ref.LLAMA_CONFIG, tmp_path / "model", tokenizer)
    t = orion.Trainer(folder, lora=dict(rank=4, alpha=8, targets=["q", "v", "w2"]), progress=False,
                      data="builtin:200", batch=B, seq=T, clip=0.0, lr=1e-2, steps=5, out=str(tmp_path / "run"))
    t.step(tokens(7).numpy())  # B moves off zero: both factors get gradients in the next step
    adapter = orion.lora_state_dict(t)
    batch = tokens(8)
    metrics = t.step(batch.numpy())
    grads = orion.lora_state_dict(t, gradients=True)

    modules = {"q": "self_attn.q_proj", "v": "self_attn.v_proj", "w2": "mlp.down_proj"}
    peft = lambda i, key, f: f"base_model.model.model.layers.{i}.{modules[key]}.lora_{f}.weight"  # noqa: E731
    factors = {f"layers.{i}.{key}": tuple(adapter[peft(i, key, f)].double().requires_grad_() for f in "AB")
               for i in range(2) for key in modules}
    base = {k: v.double() for k, v in sd.items()}
    loss = ref.loss_of(ref.llama_logits(base, batch[:, :-1], factors, lora_scale=8 / 4), batch)
    loss.backward()
    assert abs(metrics["loss"] - loss.item()) <= 1e-4 * loss.item()
    for layer_key, (A, Bm) in factors.items():
        i, key = int(layer_key.split(".")[1]), layer_key.split(".")[2]
        assert relative_error(grads[peft(i, key, "A")], A.grad) <= 1e-4, layer_key
        assert relative_error(grads[peft(i, key, "B")], Bm.grad) <= 1e-4, layer_key
