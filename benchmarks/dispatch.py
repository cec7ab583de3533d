"""Eager and imperative call costs, for comparing two checkouts side by side (the one
dispatch's before and after) and against JAX's own eager calls.

    python -m benchmarks.dispatch                    # this checkout: one JSON line of medians
    python -m benchmarks.dispatch --vs PYTHON_B      # alternate with another interpreter
                                                     # (a venv with the other checkout installed)

Figures (microseconds per call, median of interleaved rounds): eager `sg.tanh(x)`,
`sg.subtract(x, 3.0)` with a new Python number each call, `x * 2.0` on a Tensor, one
imperative training step of an MLP (64-128-128-10, batch 32: record, backward, SGD), and
JAX's eager `jnp.tanh(x)` as the peer. With `--vs`, both interpreters run the same script
in turn, round by round, and the table gives each figure for both and their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

import numpy as np


def _per_call(fn: Callable[[int], Any], n: int) -> float:
    """Microseconds per call after three warm-up calls (imperative mode compiles a tape
    structure's whole backward on its second sighting)."""
    import jax

    for i in range(3):
        jax.block_until_ready(fn(i))
    start = time.perf_counter()
    for i in range(n):
        out = fn(i)
    jax.block_until_ready(out)
    return (time.perf_counter() - start) / n * 1e6


def measure(n: int) -> dict[str, float]:
    """One round of every figure, in microseconds per call."""
    import jax.numpy as jnp

    import srcgrad as sg

    x = jnp.linspace(-1.0, 1.0, 100, dtype=jnp.float32)
    t = sg.tensor(np.linspace(-1.0, 1.0, 100, dtype=np.float32))
    rng = np.random.default_rng(0)
    layers = [
        sg.nn.Linear(a, b, act="tanh" if b != 10 else None, seed=i)
        for i, (a, b) in enumerate([(64, 128), (128, 128), (128, 10)])
    ]
    params = [p for layer in layers for p in layer.params()]
    xb = sg.tensor(rng.standard_normal((32, 64)).astype(np.float32))
    yb = sg.tensor(np.eye(10, dtype=np.float32)[rng.integers(0, 10, 32)])
    sgd = sg.optim.SGD(0.01)

    def step(i: int) -> Any:
        with sg.autograd.record():
            h = xb
            for layer in layers:
                h = layer(h)
            loss = -sg.mean(sg.sum(sg.log_softmax(h, axis=-1) * yb, axis=-1))
        loss.backward()
        sgd(params)
        return loss.value()

    return {
        "eager sg.tanh(x)": _per_call(lambda i: sg.tanh(x), n),
        "eager sg.subtract(x, new float)": _per_call(lambda i: sg.subtract(x, float(i % 7)), n),
        "Tensor * 2.0": _per_call(lambda i: (t * 2.0).value(), n),
        "imperative MLP step": _per_call(step, max(1, n // 10)),
        "jax eager jnp.tanh(x) (peer)": _per_call(lambda i: jnp.tanh(x), n),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vs", help="another Python whose srcgrad is the other checkout")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--one-round", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one_round:
        print(json.dumps(measure(args.calls)))
        return
    pythons = [sys.executable] + ([args.vs] if args.vs else [])
    runs: dict[str, list[dict[str, float]]] = {p: [] for p in pythons}
    for _ in range(args.rounds):
        for py in pythons:
            # By path, from elsewhere: each interpreter imports its own installed srcgrad.
            out = subprocess.run(
                [py, os.path.abspath(__file__), "--one-round", "--calls", str(args.calls)],
                cwd=tempfile.gettempdir(),
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            runs[py].append(json.loads(out.strip().splitlines()[-1]))
    names = list(runs[pythons[0]][0])
    med = {py: {k: statistics.median(r[k] for r in runs[py]) for k in names} for py in pythons}
    head = (
        "| figure (us per call) | "
        + " | ".join(["this checkout"] + (["--vs", "ratio"] if args.vs else []))
        + " |"
    )
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for k in names:
        cells = [f"{med[pythons[0]][k]:.1f}"]
        if args.vs:
            cells += [f"{med[args.vs][k]:.1f}", f"{med[pythons[0]][k] / med[args.vs][k]:.2f}"]
        print(f"| {k} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
