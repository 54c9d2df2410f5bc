#!/usr/bin/env python3
"""Golden losses from llm.c's CPU reference (train_gpt2.c) for tests/train/test_llmc_reproduce.cpp.

llm.c is not part of Orion and is never committed. Put a copy of karpathy/llm.c's train_gpt2.c and
the llmc/ headers it includes (utils.h, tokenizer.h, dataloader.h, rand.h) in a folder outside
the repository, patched as follows (all in main(); nothing in the layers, the model or AdamW):
  - the checkpoint, the train/val token files, B, T and the last step come from argv:
        train_gpt2 MODEL.bin TRAIN.bin VAL.bin B T LAST_STEP
  - the train DataLoader is created with should_shuffle = 0 (llm.c's sequential order, which is
    the order of Orion's TrainOptions::plain());
  - the sampling block (every 20 steps) is left out: it does not touch the training numbers;
  - after llm.c's own "step %d: train loss %f" and "val loss %f" lines it also prints
    "ORION train STEP LOSS" and "ORION val STEP LOSS" with %.9g.
/tmp/llmc/ held such a copy when the committed golden was made (llm.c at db2454f8).

What this script does (from the repo root):
  1. writes a random small GPT-2 in llm.c's v3 format (V 256 byte tokens, padded to Vp 320, 2
     layers, 4 heads, C 32, maxT 64) with Python's random module (seed 5), then rewrites it with
     Orion's llm.c writer (`orion convert --to llmc`) — that file is the checkpoint both programs load;
  2. writes llm.c token files (magic 20240520, uint16) of the UTF-8 bytes of a deterministic
     English-like text: tiny_train.bin (11,000 tokens: 42 batches of 4×64, more than the 41 steps —
     the dataloader.h copy used asserts when a single shard wraps around, so the golden run does
     not wrap) and tiny_val.bin (1,500 tokens: the 5 validation batches);
  3. builds llm.c with its Makefile's CPU flags (gcc -Ofast -march=native -fopenmp -DOMP), runs
     steps 0..40 with B=4, T=64, and records every printed loss into golden.json.

Usage: python3 scripts/golden/make_llmc_reference.py --llmc /tmp/llmc [--orion build/orion]
Output: tests/testdata/train/llmc/{model.bin, tiny_train.bin, tiny_val.bin, golden.json}
"""
import argparse
import json
import os
import random
import struct
import subprocess
import sys

OUT = "tests/testdata/train/llmc"
V, VP, L, NH, C, MAXT = 256, 320, 2, 4, 32, 64
B, T, LAST_STEP = 4, 64, 40


def write_random_llmc(path, seed=5):
    """llm.c v3: 256 int32 header, then the 16 tensors in llm.c's order, fp32."""
    rng = random.Random(seed)
    normal = lambda n, std: [rng.gauss(0.0, std) for _ in range(n)]
    proj_std = 0.02 / (2 * L) ** 0.5  # GPT-2's scaled init of the residual projections
    tensors = [
        normal(V * C, 0.02) + [0.0] * ((VP - V) * C),  # wte; llm.c's padding rows are zero
        normal(MAXT * C, 0.01),                        # wpe
        [1.0 + x for x in normal(L * C, 0.1)],         # ln1w
        normal(L * C, 0.02),                           # ln1b
        normal(L * 3 * C * C, 0.02),                   # qkvw
        normal(L * 3 * C, 0.02),                       # qkvb
        normal(L * C * C, proj_std),                   # attprojw
        normal(L * C, 0.02),                           # attprojb
        [1.0 + x for x in normal(L * C, 0.1)],         # ln2w
        normal(L * C, 0.02),                           # ln2b
        normal(L * 4 * C * C, 0.02),                   # fcw
        normal(L * 4 * C, 0.02),                       # fcb
        normal(L * C * 4 * C, proj_std),               # fcprojw
        normal(L * C, 0.02),                           # fcprojb
        [1.0 + x for x in normal(C, 0.1)],             # lnfw
        normal(C, 0.02),                               # lnfb
    ]
    header = [20240326, 3, MAXT, V, L, NH, C, VP] + [0] * 248
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header))
        for t in tensors:
            f.write(struct.pack(f"<{len(t)}f", *t))


def english_like_text(n_bytes, seed):
    rng = random.Random(seed)
    names = ["Lily", "Tom", "Mia", "Ben", "Sam", "Anna", "the old cat", "a small dog", "the king"]
    verbs = ["saw", "found", "liked", "wanted", "lost", "made", "painted", "carried"]
    things = ["a red ball", "the big tree", "a shiny stone", "the blue boat", "a warm cake", "the garden"]
    tails = ["in the park", "by the river", "after lunch", "at night", "with a smile", "one sunny day"]
    out = []
    size = 0
    while size < n_bytes:
        s = f"{rng.choice(names)} {rng.choice(verbs)} {rng.choice(things)} {rng.choice(tails)}."
        s = s[0].upper() + s[1:] + ("\n" if rng.random() < 0.2 else " ")
        out.append(s)
        size += len(s)
    return "".join(out).encode("ascii")[:n_bytes]


def write_tokens(path, ids):
    header = [20240520, 1, len(ids)] + [0] * 253
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(struct.pack(f"<{len(ids)}H", *ids))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llmc", required=True, help="folder with the patched train_gpt2.c and llmc/")
    ap.add_argument("--orion", default="build/orion")
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)

    raw = os.path.join(args.llmc, "random_gpt2_python.bin")
    write_random_llmc(raw)
    model = os.path.join(OUT, "model.bin")
    subprocess.run([args.orion, "convert", "--in", raw, "--out", model, "--to", "llmc"], check=True)
    with open(raw, "rb") as a, open(model, "rb") as b:
        print("orion convert kept every byte:", a.read() == b.read())

    train, val = os.path.join(OUT, "tiny_train.bin"), os.path.join(OUT, "tiny_val.bin")
    write_tokens(train, list(english_like_text(11000, 1)))
    write_tokens(val, list(english_like_text(1500, 2)))

    exe = os.path.join(args.llmc, "train_gpt2")
    subprocess.run(["gcc", "-Ofast", "-Wno-unused-result", "-march=native", "-fopenmp", "-DOMP",
                    os.path.join(args.llmc, "train_gpt2.c"), "-lm", "-o", exe], check=True)
    env = dict(os.environ, OMP_NUM_THREADS="2")
    run = subprocess.run([exe, model, train, val, str(B), str(T), str(LAST_STEP)], check=True,
                         capture_output=True, text=True, env=env)
    train_losses, val_losses, printed = [], {}, []
    for line in run.stdout.splitlines():
        parts = line.split()
        if line.startswith("ORION train"):
            assert int(parts[2]) == len(train_losses)
            train_losses.append(float(parts[3]))
        elif line.startswith("ORION val"):
            val_losses[parts[2]] = float(parts[3])
        elif line.startswith("step ") or line.startswith("val loss"):
            printed.append(line.split(" (took")[0])
    golden = {
        "source": "karpathy/llm.c train_gpt2.c (db2454f8), patched as scripts/golden/make_llmc_reference.py says; "
                  "gcc -Ofast -march=native -fopenmp -DOMP, OMP_NUM_THREADS=2",
        "model": "model.bin", "train": "tiny_train.bin", "val": "tiny_val.bin",
        "B": B, "T": T, "lr": 1e-4, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.0,
        "val_batches": 5, "val_every": 10,
        "train_loss": train_losses, "val_loss": val_losses, "printed": printed,
    }
    with open(os.path.join(OUT, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    print(f"{len(train_losses)} train losses {train_losses[0]:.6f} → {train_losses[-1]:.6f}; val {val_losses}")


if __name__ == "__main__":
    sys.exit(main())
