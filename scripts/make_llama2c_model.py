#!/usr/bin/env python3
"""Write a random-weight llama2.c model (legacy .bin) and a matching synthetic tokenizer.bin.

These files let us run llama2.c's run.c and Orion side by side on the shapes of the real
TinyStories checkpoints (same config, same byte count per token) without downloading anything.
The output is a pure function of --config, --seed and --std (for a given numpy version: the
weights come from numpy's default_rng(seed), PCG64 + standard_normal in float32).

Model file, llama2.c "legacy" (version 0) layout, little-endian:
    7 x int32 header   dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len
                       (vocab_size < 0 means "unshared classifier": wcls follows at the end)
    fp32 tensors, in this order (shapes row-major; a matmul weight is [out, in]):
        token_embedding [V, C]
        rms_att         [L, C]
        wq              [L, NH*HS, C]
        wk              [L, NKV*HS, C]
        wv              [L, NKV*HS, C]
        wo              [L, C, NH*HS]
        rms_ffn         [L, C]
        w1              [L, H, C]
        w2              [L, C, H]
        w3              [L, H, C]
        rms_final       [C]
        freq_cis_real   [T, HS/2]   cos(t * theta^(-2i/HS)), theta = 10000
        freq_cis_imag   [T, HS/2]   sin(...)
        wcls            [V, C]      only when the header's vocab_size is negative

Tokenizer file, llama2.c tokenizer.bin:
    int32 max_token_length, then per token: fp32 score, int32 byte length, bytes (no NUL).
    ids 0..2 are "<unk>", "\\n<s>\\n", "\\n</s>\\n" (as llama2.c's tokenizer.py exports them),
    3..258 are the byte pieces "<0x00>".."<0xFF>", then printable pieces: " ", single printable
    ASCII characters, common English words (plain, with a leading space, capitalised), then letter
    pairs and triples (with and without a leading space) until vocab_size is reached.
    Scores: 0 for ids 0..258, then 0, -1, -2, ... for the pieces (earlier = merged first).
    " " must exist: run.c's encoder looks it up for SentencePiece's dummy prefix.

Usage:
    scripts/make_llama2c_model.py --config stories110m --out /tmp/m.bin --tokenizer-out /tmp/tok.bin
"""

import argparse
import itertools
import os
import struct
import sys

try:
    import numpy as np
except ImportError:
    sys.exit("make_llama2c_model.py: numpy is missing; install it with `apt-get install -y python3-numpy` "
             "(and run /usr/bin/python3 if another python3 comes first on PATH)")

# name: (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len) as in llama2.c's checkpoints
CONFIGS = {
    "stories260k": (64, 172, 5, 8, 4, 512, 512),
    "stories15m": (288, 768, 6, 6, 6, 32000, 256),
    "stories110m": (768, 2048, 12, 12, 12, 32000, 1024),
}

# Default std of the normal weights, about 1.5 / sqrt(dim). With the usual 0.02 the greedy text of a
# random model falls into a loop of one or two tokens within a few steps ("timeeeee An An An ...");
# these scales give long non-repeating greedy text (about 120 distinct words in 256 steps for 15M and
# 110M), which is a stronger check when comparing two implementations token for token.
DEFAULT_STD = {"stories260k": 0.2, "stories15m": 0.1, "stories110m": 0.05}

# Words for the synthetic vocabulary: enough of children's-story English that the prompt
# "Once upon a time" and typical text merge into word pieces.
WORDS = """
the a an and to was he she it they i you we his her their of in on at with for from up
down once upon time there little girl boy named lily tim ben sue mom dad day one big small
happy sad play played went saw said look looked see like liked love loved friend friends park
tree house dog cat bird ball toy toys sun sky water fun very so but then after when what who
is are be been have had has do did not no yes all can could would will should go going came
come run ran jump jumped walk walked home help helped good bad new old red blue green yellow
this that these those here where how why because find found make made take took give gave get
got put want wanted know knew think thought feel felt say tell told ask asked back out over
under into about again too also just only some many more most other each every any way
mother father sister brother baby man woman king queen princess dragon bear bunny fish duck
car truck boat train box cake apple flower garden forest river sea beach school room bed door
window table chair book story night morning sky star moon rain snow wind hat shoe dress
smile smiled laugh laughed cry cried hug hugged share shared learn learned lesson together
always never sometimes soon now today tomorrow yesterday before while until as if or than
nice kind brave strong fast slow tall short long hot cold warm soft hard loud quiet
""".split()

LETTERS = "etaoinshrdlcumwfgypbvkjxqz"  # English letter frequency order


def vocab_pieces(vocab_size):
    """Return vocab_size byte strings and scores, ids 0..vocab_size-1."""
    if vocab_size < 259 + 95:
        raise ValueError(f"vocab_size {vocab_size} is too small (need >= {259 + 95})")
    pieces = [b"<unk>", b"\n<s>\n", b"\n</s>\n"] + [b"<0x%02X>" % b for b in range(256)]
    seen = set(pieces)

    def candidates():
        # the space first (dummy prefix), then every printable ASCII character
        for c in range(0x20, 0x7F):
            yield chr(c)
        for w in WORDS:
            yield w
            yield " " + w
            yield " " + w.capitalize()
            yield w.capitalize()
        for n in itertools.count(2):
            for combo in itertools.product(LETTERS, repeat=n):
                s = "".join(combo)
                yield s
                yield " " + s

    for text in candidates():
        if len(pieces) == vocab_size:
            break
        piece = text.encode("utf-8")
        if piece not in seen:
            seen.add(piece)
            pieces.append(piece)
    scores = [0.0] * 259 + [-float(i) for i in range(vocab_size - 259)]
    return pieces, scores


def write_tokenizer(path, vocab_size):
    pieces, scores = vocab_pieces(vocab_size)
    with open(path, "wb") as f:
        f.write(struct.pack("<i", max(len(p) for p in pieces)))
        for piece, score in zip(pieces, scores):
            f.write(struct.pack("<fi", score, len(piece)))
            f.write(piece)


def write_model(path, config, seed, std, shared):
    C, H, L, NH, NKV, V, T = config
    HS = C // NH  # head size
    rng = np.random.default_rng(seed)

    def normal(*shape):  # a matmul weight or an embedding: N(0, std^2)
        return (rng.standard_normal(shape, dtype=np.float32) * np.float32(std)).astype("<f4")

    def ones(*shape):  # RMSNorm gains start at 1
        return np.ones(shape, dtype="<f4")

    # RoPE tables (unused by current run.c, which recomputes them, but part of the format)
    inv_freq = 1.0 / (10000.0 ** (np.arange(0, HS, 2, dtype=np.float64) / HS))  # [HS/2]
    angles = np.outer(np.arange(T, dtype=np.float64), inv_freq)  # [T, HS/2]

    with open(path, "wb") as f:
        f.write(struct.pack("<7i", C, H, L, NH, NKV, V if shared else -V, T))
        tensors = [
            lambda: normal(V, C),  # token_embedding
            lambda: ones(L, C),  # rms_att
            lambda: normal(L, NH * HS, C),  # wq
            lambda: normal(L, NKV * HS, C),  # wk
            lambda: normal(L, NKV * HS, C),  # wv
            lambda: normal(L, C, NH * HS),  # wo
            lambda: ones(L, C),  # rms_ffn
            lambda: normal(L, H, C),  # w1
            lambda: normal(L, C, H),  # w2
            lambda: normal(L, H, C),  # w3
            lambda: ones(C),  # rms_final
            lambda: np.cos(angles).astype("<f4"),  # freq_cis_real
            lambda: np.sin(angles).astype("<f4"),  # freq_cis_imag
        ]
        if not shared:
            tensors.append(lambda: normal(V, C))  # wcls
        for make in tensors:  # one tensor in memory at a time
            f.write(make().tobytes())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True, choices=sorted(CONFIGS))
    ap.add_argument("--out", required=True, help="model .bin to write")
    ap.add_argument("--tokenizer-out", help="tokenizer.bin to write (optional)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--std", type=float, help="std of the normal weights (default: per config, see DEFAULT_STD)")
    ap.add_argument("--unshared", action="store_true", help="separate classifier (negative vocab_size)")
    args = ap.parse_args()

    config = CONFIGS[args.config]
    if args.std is None:
        args.std = DEFAULT_STD[args.config]
    write_model(args.out, config, args.seed, args.std, shared=not args.unshared)
    print(f"{args.out}: {args.config} {config} seed={args.seed} std={args.std} "
          f"{'unshared' if args.unshared else 'shared'} classifier, {os.path.getsize(args.out)} bytes")
    if args.tokenizer_out:
        write_tokenizer(args.tokenizer_out, config[5])
        print(f"{args.tokenizer_out}: {config[5]} tokens, {os.path.getsize(args.tokenizer_out)} bytes")


if __name__ == "__main__":
    main()
