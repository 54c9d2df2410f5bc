"""Fine-tune a LoRA adapter on a frozen model, then talk to the base and the adapted model in turn.

    PYTHONPATH=build/python /usr/bin/python3 examples/lora_chat.py BASE_MODEL TEXT_FILE_OR_FOLDER
    (default: the tiny model of examples/train_from_scratch.py and the built-in stories)
"""
import sys

import orion

base = sys.argv[1] if len(sys.argv) > 1 else "orion-scratch/model.bin"
data = sys.argv[2] if len(sys.argv) > 2 else "builtin:200"

# The flags of `orion lora train`, as keywords: rank 8 on the attention's q and v projections.
t = orion.Trainer(base, lora=dict(rank=8, alpha=16, targets=["q", "v"]), data=data, steps=60, lr=2e-3,
                  out="orion-lora-example", progress=False)
result = t.fit(callbacks=[lambda m: m["step"] % 10 == 0 and print(f"step {m['step']:3d}  loss {m['loss']:.4f}")])
print("adapter:", result["model"])

model = orion.load(base)
model.load_adapter("orion-lora-example", name="mine")
while True:
    try:
        prompt = input("you> ")
    except EOFError:
        break
    for name in (None, "mine"):
        reply = model.generate(prompt, max_tokens=60, temperature=0.7, seed=1, adapter=name)
        print(f"[{name or 'base'}] {prompt}{reply}")
