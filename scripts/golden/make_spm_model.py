#!/usr/bin/env python3
"""Trains the small SentencePiece model the tests use and exports it to llama2.c's tokenizer.bin.

1. Writes a few hundred lines of simple English stories from templates (seeded, reproducible) to a
   temporary corpus.
2. Trains tests/testdata/tokenizer/spm_stories/tokenizer.model with the spm_train binary: BPE, 512
   pieces, byte fallback, Llama's settings (no normalisation, extra whitespace kept, digits split).
3. Exports it as tests/testdata/tokenizer/spm_stories/tokenizer.bin the way llama2.c's tokenizer.py
   does: each piece with ▁ replaced by ' ', <s> and </s> written as "\\n<s>\\n" and "\\n</s>\\n", the
   piece's score; file = uint32 max_token_length, then per piece float32 score, uint32 length, bytes.
   The .model file is a protobuf (ModelProto); the few fields needed are read by hand below, so
   neither the sentencepiece nor the protobuf Python package is required.
4. Writes golden.json: ids from the spm_encode binary for a few test texts.

Usage (from the repo root): python3 scripts/golden/make_spm_model.py
"""
import json
import os
import random
import struct
import subprocess
import tempfile

OUT = "tests/testdata/tokenizer/spm_stories"

NAMES = ["Lily", "Tom", "Sam", "Mia", "Ben", "Anna", "Max", "Lucy", "Tim", "Sara"]
ANIMALS = ["cat", "dog", "bird", "fish", "frog", "bunny", "duck", "bear"]
THINGS = ["ball", "kite", "book", "hat", "box", "cake", "toy", "tree", "boat", "flower"]
ADJ = ["big", "small", "red", "blue", "happy", "sad", "little", "shiny", "soft", "funny"]
PLACES = ["park", "garden", "house", "forest", "beach", "school", "lake", "town"]
VERBS = ["played", "jumped", "ran", "walked", "sang", "laughed", "looked", "smiled"]
TEMPLATES = [
    "Once upon a time, there was a {adj} {animal} named {name}.",
    "{name} liked to play with a {adj} {thing} in the {place}.",
    "One day, {name} saw a {adj} {thing} near the {place}.",
    "{name} {verb} with the {animal} all day long.",
    "\"Can I have your {thing}?\" asked {name}.",
    "\"Yes, you can!\" said {name2}. They were very happy.",
    "The {animal} was {adj} because it lost its {thing}.",
    "{name} and {name2} went to the {place} to find the {thing}.",
    "They found {n} {thing}s under a {adj} tree.",
    "At the end of the day, {name} went home and slept.",
    "{name} said, \"I love you, {name2}!\" and gave a hug.",
    "It was {n} o'clock when the {animal} came back.",
]


def story_lines(count, rng):
    for _ in range(count):
        words = dict(adj=rng.choice(ADJ), animal=rng.choice(ANIMALS), name=rng.choice(NAMES),
                     name2=rng.choice(NAMES), thing=rng.choice(THINGS), place=rng.choice(PLACES),
                     verb=rng.choice(VERBS), n=rng.randint(2, 12))
        yield " ".join(t.format(**words) for t in rng.sample(TEMPLATES, 4))


def varint(buf, pos):
    value, shift = 0, 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, pos


def fields(buf):
    """Yields (field number, wire type, value) of one protobuf message."""
    pos = 0
    while pos < len(buf):
        key, pos = varint(buf, pos)
        num, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            n, pos = varint(buf, pos)
            value, pos = buf[pos:pos + n], pos + n
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        yield num, wire, value


def read_pieces(model_path):
    """ModelProto field 1 = repeated SentencePiece {1: piece, 2: float score, 3: type}."""
    pieces = []
    for num, _, value in fields(open(model_path, "rb").read()):
        if num == 1:
            piece, score, kind = "", 0.0, 1
            for n, _, v in fields(value):
                if n == 1:
                    piece = v.decode("utf-8")
                elif n == 2:
                    score = struct.unpack("<f", v)[0]
                elif n == 3:
                    kind = v
            pieces.append((piece, score, kind))
    return pieces


def export_llama2c(model_path, out_path, bos_id=1, eos_id=2):
    tokens, scores = [], []
    for i, (piece, score, _) in enumerate(read_pieces(model_path)):
        if i == bos_id:
            piece = "\n<s>\n"
        elif i == eos_id:
            piece = "\n</s>\n"
        tokens.append(piece.replace("\u2581", " ").encode("utf-8"))
        scores.append(score)
    with open(out_path, "wb") as f:
        f.write(struct.pack("I", max(len(t) for t in tokens)))
        for b, s in zip(tokens, scores):
            f.write(struct.pack("fI", s, len(b)))
            f.write(b)
    return len(tokens)


GOLDEN_TEXTS = [
    "Once upon a time, there was a little cat named Lily.",
    "Tom and Sam went to the park to find the red ball.",
    "\"Can I have your kite?\" asked Mia.",
    "It was 12 o'clock when the dog came back.",
    "Zebras quietly juxtapose vexing words!",
    "A cat sat. 😀 Café?",
]


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = random.Random(1234)
    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "stories.txt")
        with open(corpus, "w") as f:
            f.write("\n".join(story_lines(400, rng)) + "\n")
        subprocess.run(["spm_train", f"--input={corpus}", f"--model_prefix={OUT}/tokenizer", "--model_type=bpe",
                        "--vocab_size=512", "--byte_fallback=true", "--character_coverage=1.0",
                        "--normalization_rule_name=identity", "--remove_extra_whitespaces=false",
                        "--add_dummy_prefix=true", "--split_digits=true", "--num_threads=1",
                        "--minloglevel=2"], check=True)
    os.remove(f"{OUT}/tokenizer.vocab")
    n = export_llama2c(f"{OUT}/tokenizer.model", f"{OUT}/tokenizer.bin")
    golden = []
    for text in GOLDEN_TEXTS:
        out = subprocess.run(["spm_encode", f"--model={OUT}/tokenizer.model", "--output_format=id"],
                             input=text + "\n", capture_output=True, text=True, check=True).stdout
        golden.append({"text": text, "ids": [int(x) for x in out.split()]})
    with open(f"{OUT}/golden.json", "w", encoding="utf-8") as f:
        f.write("[" + ",\n".join(json.dumps(g, ensure_ascii=False) for g in golden) + "]\n")
    print(f"wrote {OUT}: {n} pieces, {len(golden)} golden pairs")


if __name__ == "__main__":
    main()
