"""Imperative mode, DyNet-on-Fluid style: two Linear layers, a mean loss, SGD, a fresh tape
every iteration; then the picture of a forward and backward tape (docs/imperative.svg).

    python examples/imperative.py [--picture docs/imperative.svg]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

import srcgrad as sg


def train(steps: int = 50) -> list[float]:
    """The seed's training loop: the tape is reset (a new record() scope) every iteration."""
    rng = np.random.default_rng(0)
    x = sg.tensor(rng.standard_normal((16, 3)).astype(np.float32), name="input")
    target = sg.tensor(np.tanh(x.numpy() @ rng.standard_normal((3, 3))).astype(np.float32))
    linear1 = sg.nn.Linear(3, 3, act="relu", name="linear1")
    linear2 = sg.nn.Linear(3, 3, act="tanh", name="linear2")
    sgd = sg.optim.SGD(0.1)
    losses = []
    for _ in range(steps):
        with sg.autograd.record():
            loss = sg.mean((linear2(linear1(x)) - target) ** 2)
        losses.append(loss.item())  # DyNet's loss.value()
        loss.backward()  # gradients in linear1.weight.grad, ...
        sgd(linear1.params())
        sgd(linear2.params())
    print(
        f"loss {losses[0]:.4f} -> {losses[-1]:.4f} in {steps} steps, "
        f"{sg.autograd.compile_count()} backward compiled"
    )
    return losses


def picture(path: str) -> None:
    """One Linear layer and its backward, as the seed draws its forward and backward tapes:
    backward(create_graph=True) records the grad ops onto the tape."""
    x = sg.tensor(np.ones((2, 3), np.float32), name="input")
    linear1 = sg.nn.Linear(3, 3, act="relu", seed=0, name="linear1")
    with sg.autograd.record():
        loss = sg.mean(linear1(x))
    loss.backward(create_graph=True)
    tape = sg.autograd.tape()
    Path(path).with_suffix(".dot").write_text(sg.to_dot(tape, "imperative"))
    print(f"wrote {sg.render(tape, path)} and its DOT text")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--picture", help="write the tape's picture here (needs Graphviz's dot)")
    args = ap.parse_args()
    train()
    if args.picture:
        picture(args.picture)
