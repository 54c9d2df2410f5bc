#!/usr/bin/python3
"""The binding's overhead: the same work through `import orion` and through the `orion` binary —
decode tok/s of generate and ms/step of a training run — printed as a table for bench/RESULTS.md.

    PYTHONPATH=build/python /usr/bin/python3 scripts/python_overhead.py [--build build] [--repeat 3]

Both sides use one model trained here by the CLI (stories260k shape, the built-in stories), the same
seed and options; each figure is the best of --repeat runs (the machine may be shared)."""
import argparse
import json
import os
import re
import subprocess
import tempfile

import orion

ap = argparse.ArgumentParser()
ap.add_argument("--build", default="build")
ap.add_argument("--repeat", type=int, default=3)
ap.add_argument("--tokens", type=int, default=200)
ap.add_argument("--steps", type=int, default=20)
a = ap.parse_args()
binary = os.path.join(a.build, "orion")
work = tempfile.mkdtemp(prefix="orion-overhead-")
train = ["--data", "builtin:2000", "--vocab", "512", "--batch", "8", "--seq", "128", "--eval-every", "0",
         "--checkpoint-every", "0", "--sample", "0"]


def cli(*args):
    return subprocess.run([binary, *args], capture_output=True, text=True, check=True)


cli("train", "--steps", "1", "--out", f"{work}/model", "--no-progress", *train)
model = f"{work}/model/model.bin"

best = {}
for r in range(a.repeat):
    err = cli("generate", "--model", model, "-n", str(a.tokens), "--seed", "1", "--temperature", "0").stderr
    best["cli_tok_s"] = max(best.get("cli_tok_s", 0), float(re.search(r"decode: \d+ tokens, ([\d.]+) tok/s", err)[1]))
    m = orion.load(model)
    m.generate("Once upon a time", max_tokens=a.tokens, seed=1, temperature=0)
    best["py_tok_s"] = max(best.get("py_tok_s", 0), m.last_stats["decode_tok_per_s"])

    out = f"{work}/cli{r}"
    cli("train", "--steps", str(a.steps), "--out", out, "--no-progress", *train)
    with open(f"{out}/metrics.jsonl") as f:
        ms = [json.loads(line)["ms"] for line in f][1:]  # the first step warms caches
    best["cli_ms"] = min(best.get("cli_ms", 1e9), sum(ms) / len(ms))
    seen = []
    t = orion.Trainer("stories260k", progress=False, out=f"{work}/py{r}", steps=a.steps,
                      **{k.lstrip("-").replace("-", "_"): v for k, v in zip(train[::2], train[1::2])})
    t.fit(callbacks=[seen.append])
    best["py_ms"] = min(best.get("py_ms", 1e9), sum(s["ms"] for s in seen[1:]) / (len(seen) - 1))

print("| work | CLI | Python | Python / CLI |")
print("|---|---|---|---|")
print(f"| generate, decode tok/s ({a.tokens} tokens, greedy) | {best['cli_tok_s']:.0f} | {best['py_tok_s']:.0f} | "
      f"{best['py_tok_s'] / best['cli_tok_s']:.3f} |")
print(f"| train, ms/step (stories260k, 8 × 128, {a.steps} steps) | {best['cli_ms']:.2f} | {best['py_ms']:.2f} | "
      f"{best['py_ms'] / best['cli_ms']:.3f} |")
