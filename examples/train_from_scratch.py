"""Train a small model from scratch on the built-in stories, watching the loss with a callback;
the curve is plotted with matplotlib when it is installed (loss.png), printed otherwise.

    PYTHONPATH=build/python /usr/bin/python3 examples/train_from_scratch.py [STEPS]
"""
import sys

import orion


class LossPlot:
    """A callback: collects each step's loss (and the validation loss at evaluations)."""

    def __init__(self):
        self.steps, self.losses, self.val = [], [], []

    def on_step(self, m):
        self.steps.append(m["step"] + 1)
        self.losses.append(m["loss"])
        if "val_loss" in m:
            self.val.append((m["step"] + 1, m["val_loss"]))
            print(f"step {m['step'] + 1:4d}  loss {m['loss']:.4f}  val {m['val_loss']:.4f}  {m['ms']:.0f} ms/step")

    def save(self, path="loss.png"):
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("matplotlib not installed: losses", [round(x, 3) for x in self.losses[::10]])
            return
        plt.plot(self.steps, self.losses, label="train")
        if self.val:
            plt.plot(*zip(*self.val), "o-", label="validation")
        plt.xlabel("step"), plt.ylabel("loss"), plt.legend()
        plt.savefig(path)
        print("wrote", path)


steps = int(sys.argv[1]) if len(sys.argv) > 1 else 200
# The flags of `orion train`: stories260k on the built-in stories with a 512-token BPE tokenizer.
trainer = orion.Trainer("stories260k", data="builtin", steps=steps, eval_every=20, out="orion-scratch", progress=False)
plot = LossPlot()
result = trainer.fit(callbacks=[plot])
plot.save()
print(f"loss {result['first_loss']:.3f} -> {result['last_loss']:.3f}; model: {result['model']}")
print(orion.load(result["model"]).generate("Once upon a time", max_tokens=40, temperature=0))
