"""Imperative mode against PyTorch eager (and jax.jit), one CPU thread each, side by side.

    python -m benchmarks.imperative_torch [--quick] [--reps N] [--steps N] [--sync-dispatch]

PyTorch is optional (`pip install torch`); without it the PyTorch columns are left out and
the JAX comparisons still run. Rows, each the median of interleaved samples:

- steady training step (forward, backward, SGD) of 3 Linear layers, small (batch 32,
  hidden 64) and medium (batch 256, hidden 512): srcgrad and jax.jit(jax.value_and_grad)
  + SGD, each against PyTorch; srcgrad against the jitted JAX step;
- the first training step of a fresh model (shapes never seen by any cache in the process),
  and that model's building (layers and optimizer from the weights) with its first step;
- define-by-run on structures never seen (benchmarks/imperative_dynamic.py): a tree
  network over new trees, an Elman RNN over sentences of new lengths with no warm-up that
  PyTorch does not also get, a fresh RNN's whole first epoch (2,000 steps of lengths 5..50,
  compiles included), the first step of an LSTM cell unrolled over 1,000 time steps, and
  the resident set over `--steps` steps of new trees;
- recording one op (`tanh` of a 64x64 Tensor, 200 in a row in an open `record()` scope)
  against `jnp.tanh` of the same array and PyTorch's `tanh` of a tensor that requires grad;
- memory (Python heap by tracemalloc, and the process's resident set) after `--steps`
  recorded steps with a new learning rate each, past a warm-up.

JAX runs CPU programs on a thread of its own by default (asynchronous dispatch), so each
tiny program of the op-by-op tier is handed from thread to thread. `--sync-dispatch` runs
them on the calling thread (`jax_cpu_enable_async_dispatch=False`, which must be set before
JAX makes its first array), as PyTorch runs its ops: one thread each side, for every row.
"""

from __future__ import annotations

import os

os.environ.setdefault(
    "XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
)

import sys

import jax

if "--sync-dispatch" in sys.argv:  # before the first array: `import srcgrad` makes one
    jax.config.update("jax_cpu_enable_async_dispatch", False)

import argparse
import gc
import time
import tracemalloc
from typing import Any, Callable

import jax.numpy as jnp
import numpy as np

import srcgrad as sg

from . import imperative_dynamic as dynamic
from .harness import Row, block, interleaved
from .report import text_table

LR = 0.01

try:
    import torch

    torch.set_num_threads(1)
except ImportError:  # the PyTorch columns are optional
    torch = None


def _weights(sizes: list[int], seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [
        ((rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32), np.zeros(b, np.float32))
        for a, b in zip(sizes[:-1], sizes[1:])
    ]


# ---------------------------------------------------------------- the MLP step, three ways


def sg_layers(weights: list, last_act: str | None = None) -> tuple[list, list]:
    """The MLP as sg.nn.Linear layers (tanh, then `last_act`) holding `weights`, and their
    parameters."""
    layers = []
    for i, (w, b) in enumerate(weights):
        layer = sg.nn.Linear(*w.shape, act="tanh" if i < len(weights) - 1 else last_act)
        layer.weight.assign(w.T)  # sg.nn.Linear's weight is (out, in)
        layer.bias.assign(b)
        layers.append(layer)
    return layers, [p for layer in layers for p in layer.params()]


def sg_mlp(weights: list, x: np.ndarray) -> Callable[[], Any]:
    layers, params = sg_layers(weights)
    sgd, xt = sg.optim.SGD(LR), sg.tensor(x)

    def step() -> Any:
        with sg.autograd.record():
            h = xt
            for layer in layers:
                h = layer(h)
            loss = sg.mean(h * h)
        loss.backward()
        sgd(params)
        return loss.value()

    return step


def _mlp_loss(ps: list, x: Any) -> Any:
    h = x
    for i, (w, b) in enumerate(ps):
        h = h @ w + b
        h = jnp.tanh(h) if i < len(ps) - 1 else h
    return jnp.mean(h * h)


def jit_mlp(weights: list, x: np.ndarray) -> Callable[[], Any]:
    @jax.jit
    def update(ps: list, x: Any) -> tuple:
        loss, g = jax.value_and_grad(_mlp_loss)(ps, x)
        return loss, jax.tree_util.tree_map(lambda p, d: p - LR * d, ps, g)

    state = {"p": [(jnp.asarray(w), jnp.asarray(b)) for w, b in weights]}
    xa = jnp.asarray(x)

    def step() -> Any:
        loss, state["p"] = update(state["p"], xa)
        return loss

    return step


def torch_mlp(weights: list, x: np.ndarray) -> Callable[[], Any]:
    ps = [
        (torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True))
        for w, b in weights
    ]
    flat = [p for pair in ps for p in pair]
    opt, xt = torch.optim.SGD(flat, lr=LR), torch.tensor(x)

    def step() -> Any:
        opt.zero_grad()
        h = xt
        for i, (w, b) in enumerate(ps):
            h = h @ w + b
            h = torch.tanh(h) if i < len(ps) - 1 else h
        loss = torch.mean(h * h)
        loss.backward()
        opt.step()
        return loss.detach().numpy()

    return step


# ---------------------------------------------------------------- rows


def _pair(
    figure: str,
    a: str,
    b: str,
    samples: dict[str, list[float]],
    target: float | None = None,
    unit: str = "ms",
    scale: float = 1e3,
) -> Row:
    x, y = np.asarray(samples[a]), np.asarray(samples[b])
    return Row(
        "imperative",
        figure,
        unit,
        float(np.median(x)) * scale,
        float(np.median(y)) * scale,
        a,
        b,
        target,
        paired_ratio=float(np.median(x / y)),
    )


def steady_rows(
    name: str, sizes: list[int], batch: int, reps: int, sample_s: float, jit_target: float | None
) -> list[Row]:
    weights = _weights(sizes, 0)
    x = np.random.default_rng(1).standard_normal((batch, sizes[0])).astype(np.float32)
    fns = {"srcgrad": sg_mlp(weights, x), "jax.jit": jit_mlp(weights, x)}
    if torch is not None:
        fns["pytorch"] = torch_mlp(weights, x)
    s = interleaved(fns, reps, sample_s)
    fig = f"steady step, {name} (batch {batch}, hidden {sizes[1]})"
    rows = [_pair(fig, "srcgrad", "jax.jit", s, jit_target)]
    if torch is not None:
        rows += [
            _pair(fig, "srcgrad", "pytorch", s, 1.5 if name == "small" else None),
            _pair(fig, "jax.jit", "pytorch", s),
        ]
    return rows


def first_step_rows(reps: int) -> list[Row]:
    """The first step of a model whose shapes no cache in the process has seen; and that
    model's building (its layers and optimizer, from the weights) and first step, the figure
    a user feels (its target: no slower than jax.jit's)."""
    names = ["srcgrad", "jax.jit"] + (["pytorch"] if torch is not None else [])
    step_s: dict[str, list[float]] = {name: [] for name in names}
    built_s: dict[str, list[float]] = {name: [] for name in names}
    for r in range(reps):
        hidden = 40 + 3 * r  # a new shape every round, for every framework
        weights = _weights([hidden, hidden + 1, hidden + 2, 10], r)
        x = np.random.default_rng(r).standard_normal((8 + r, hidden)).astype(np.float32)
        makers = {"srcgrad": sg_mlp, "jax.jit": jit_mlp, "pytorch": torch_mlp}
        for name in names if r % 2 == 0 else names[::-1]:
            t0 = time.perf_counter()
            step = makers[name](weights, x)
            t1 = time.perf_counter()
            block(step())
            step_s[name].append(time.perf_counter() - t1)
            built_s[name].append(time.perf_counter() - t0)
    rows = []
    for fig, s in (
        ("first step of a fresh model", step_s),
        ("fresh model: building it and its first step", built_s),
    ):
        rows.append(_pair(fig, "srcgrad", "jax.jit", s, 1.0 if s is built_s else None))
        if torch is not None:
            rows.append(_pair(fig, "srcgrad", "pytorch", s))
    return rows


def record_rows(reps: int, n: int = 200) -> list[Row]:
    """Per op, `n` ops in a row: `tanh` of a 64x64 Tensor inside an open `record()` scope,
    `jnp.tanh` of the same array, PyTorch's `tanh` of a tensor that requires grad."""
    a = jnp.asarray(np.random.default_rng(2).standard_normal((64, 64)).astype(np.float32))
    t = sg.tensor(a)
    t.attach_grad()

    def recorded() -> Any:
        with sg.autograd.record():
            return [sg.tanh(t) for _ in range(n)][-1].value()

    fns = {"srcgrad record": recorded, "jnp": lambda: [jnp.tanh(a) for _ in range(n)][-1]}
    if torch is not None:
        tt = torch.tensor(np.asarray(a), requires_grad=True)
        fns["pytorch"] = lambda: [torch.tanh(tt) for _ in range(n)][-1].detach()
    s = interleaved(fns, reps, 0.0)
    fig = "record one op (tanh, 64x64)"
    rows = [_pair(fig, "srcgrad record", "jnp", s, 1.5, "us", 1e6 / n)]
    if torch is not None:
        rows.append(_pair(fig, "srcgrad record", "pytorch", s, None, "us", 1e6 / n))
    return rows


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def memory_rows(steps: int) -> list[Row]:
    weights = _weights([32, 32, 32, 4], 3)
    x = np.random.default_rng(3).standard_normal((8, 32)).astype(np.float32)
    layers, params = sg_layers(weights, last_act="tanh")
    xt = sg.tensor(x)

    def step(lr: float) -> None:
        with sg.autograd.record():
            h = xt
            for layer in layers:
                h = layer(h)
            loss = sg.mean(h * h)
        loss.backward()
        with sg.autograd.no_grad():
            for p in params:
                p -= lr * p.grad

    for i in range(1000):
        step(1e-3 / (1 + i))
    gc.collect()
    tracemalloc.start()
    heap0, rss0 = tracemalloc.get_traced_memory()[0], _rss_mb()
    for i in range(steps):
        step(1e-4 / (1 + i))  # a new number every step
    gc.collect()
    heap1, rss1 = tracemalloc.get_traced_memory()[0], _rss_mb()
    tracemalloc.stop()
    return [
        Row(
            "imperative",
            f"heap growth over {steps} steps",
            "MiB",
            (heap1 - heap0) / 2**20,
            1.0,
            "srcgrad",
            "bound",
            1.0,
            "srcgrad",
        ),
        Row(
            "imperative",
            f"RSS growth over {steps} steps",
            "MiB",
            rss1 - rss0,
            float("nan"),
            "srcgrad",
            "-",
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.imperative_torch",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--quick", action="store_true", help="small sizes, few repetitions")
    ap.add_argument("--reps", type=int, default=11, help="samples per variant")
    ap.add_argument("--steps", type=int, default=20_000, help="steps of the memory rows")
    ap.add_argument(
        "--sync-dispatch",
        action="store_true",
        help="run JAX's CPU programs on the calling thread (read before the imports)",
    )
    args = ap.parse_args(argv)
    reps, sample_s = (2, 0.0) if args.quick else (args.reps, 0.2)
    if torch is None:
        print("PyTorch is not installed: its columns are left out", file=sys.stderr)
    rows = steady_rows("small", [64, 64, 64, 10], 32, reps, sample_s, None)
    if not args.quick:
        rows += steady_rows("medium", [512, 512, 512, 10], 256, reps, sample_s, 1.1)
    rows += first_step_rows(2 if args.quick else 5)
    rows += dynamic.tree_rows(1 if args.quick else 3, new=5 if args.quick else 20)
    rows += dynamic.rnn_rows(1 if args.quick else 3)
    rows += dynamic.epoch_rows(200 if args.quick else 2000)
    rows += dynamic.lstm_rows(1 if args.quick else 3, steps=100 if args.quick else 1000)
    rows += record_rows(reps)
    rows += memory_rows(200 if args.quick else args.steps)
    rows += dynamic.memory_rows(200 if args.quick else args.steps, warm=50 if args.quick else 500)
    print(text_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
