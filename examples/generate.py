"""Generate text from a model, streaming the pieces as they come.

    PYTHONPATH=build/python /usr/bin/python3 examples/generate.py stories15M.bin "Once upon a time"
"""
import sys

import orion

path = sys.argv[1] if len(sys.argv) > 1 else "stories15M.bin"
prompt = sys.argv[2] if len(sys.argv) > 2 else "Once upon a time"
model = orion.load(path)  # backend="anesim" runs the blocks as ANE programs on the software ANE
print(model)
print(prompt, end="", flush=True)
for piece in model.stream(prompt, max_tokens=100, temperature=0.8, seed=42):
    print(piece, end="", flush=True)
print()
stats = model.last_stats
print(f"decode: {stats['decode_tok_per_s']:.1f} tok/s", file=sys.stderr)
