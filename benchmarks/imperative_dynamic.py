"""Define-by-run on structures never seen: imperative mode against PyTorch eager, the rows of
`python -m benchmarks.imperative_torch` that change structure every step.

- a recursive network over random binary trees (DyNet's home case; every tree new):
  leaves `emb[word]`, a node `tanh(h_l @ Wl + h_r @ Wr + b)`, loss
  `sum((h_root @ Wo - y) ** 2)`, SGD; 5 to 30 leaves, width 48;
- an Elman RNN over sentences (one embedding row per word, a tanh cell per word), each
  sentence of a length never seen, with no warm-up beyond the one four-word sentence both
  sides get;
- a whole first epoch of that RNN on a fresh model: 2,000 steps of lengths drawn from
  5..50, compiles included, the two sides interleaved by blocks of steps;
- the first training step of an LSTM cell unrolled over 1,000 time steps (a fresh model:
  what a user's first step costs, compiles included).

Every model exists twice, the same ops on the same weights: `sg` and `torch`. Each figure
is taken side by side in one process, the trees and sentences alternating between the
sides one by one; ratios are medians of per-round ratios (the epoch: its total over the
blocks). Process CPU time is reported beside wall time where the two
sides are timed in alternation, since the machine may be shared.
"""

from __future__ import annotations

import gc
import os
import time
from typing import Any, Callable

import numpy as np

import srcgrad as sg

from .harness import Row, block

LR = 0.01

try:
    import torch
except ImportError:  # the PyTorch columns are optional
    torch = None


# ---------------------------------------------------------------- trees


def random_tree(rng: np.random.Generator, leaves: int, vocab: int) -> Any:
    """A random binary tree of `leaves` words: a word (int) or a pair of subtrees."""
    if leaves == 1:
        return int(rng.integers(0, vocab))
    left = int(rng.integers(1, leaves))
    return (random_tree(rng, left, vocab), random_tree(rng, leaves - left, vocab))


def _tree_weights(vocab: int, dim: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    s = 1 / np.sqrt(dim)
    return {
        "emb": (rng.standard_normal((vocab, dim)) * 0.3).astype(np.float32),
        "wl": (rng.standard_normal((dim, dim)) * s).astype(np.float32),
        "wr": (rng.standard_normal((dim, dim)) * s).astype(np.float32),
        "b": np.zeros(dim, np.float32),
        "wo": (rng.standard_normal((dim, 1)) * s).astype(np.float32),
    }


class _Model:
    """Parameters by name, in one framework (`lib`: sg or torch), trained by SGD."""

    def __init__(self, lib: Any, weights: dict[str, np.ndarray]):
        self.lib = lib
        if lib is sg:
            self.p = {k: sg.tensor(v, requires_grad=True) for k, v in weights.items()}
            self.opt = sg.optim.SGD(list(self.p.values()), lr=LR)
        else:
            self.p = {k: torch.tensor(v, requires_grad=True) for k, v in weights.items()}
            self.opt = torch.optim.SGD(list(self.p.values()), lr=LR)

    def train(self, loss_of: Callable[[], Any]) -> Any:
        """One step: the loss (recorded under sg), backward, the update; the loss's value."""
        self.opt.zero_grad()
        if self.lib is sg:
            with sg.autograd.record():
                loss = loss_of()
            loss.backward()
            self.opt.step()
            return loss.value()
        loss = loss_of()
        loss.backward()
        self.opt.step()
        return loss.detach().numpy()


class TreeNet(_Model):
    def step(self, sample: tuple[Any, np.ndarray]) -> Any:
        tree, y = sample
        lib, p = self.lib, self.p

        def node(t: Any) -> Any:
            if isinstance(t, int):
                return p["emb"][t]
            return lib.tanh(node(t[0]) @ p["wl"] + node(t[1]) @ p["wr"] + p["b"])

        yt = lib.tensor(y) if lib is sg else torch.tensor(y)
        return self.train(lambda: lib.sum((node(tree) @ p["wo"] - yt) ** 2))


def trees(n: int, seed: int, vocab: int = 100) -> list[tuple[Any, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [
        (
            random_tree(rng, int(rng.integers(5, 31)), vocab),
            rng.standard_normal(1).astype(np.float32),
        )
        for _ in range(n)
    ]


# ---------------------------------------------------------------- RNN


def _rnn_weights(vocab: int, dim: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "emb": (rng.standard_normal((vocab, dim)) * 0.3).astype(np.float32),
        "wh": (rng.standard_normal((dim, dim)) / np.sqrt(dim)).astype(np.float32),
    }


class RNN(_Model):
    def step(self, words: list[int]) -> Any:
        lib, p = self.lib, self.p

        def loss() -> Any:
            h = lib.zeros(p["wh"].shape[0])
            for k in words:
                h = lib.tanh(h @ p["wh"] + p["emb"][k])
            return lib.sum(h * h)

        return self.train(loss)


def sentences(lengths: list[int], vocab: int, seed: int) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [[int(k) for k in rng.integers(0, vocab, n)] for n in lengths]


# ---------------------------------------------------------------- LSTM


def _lstm_weights(n_in: int, dim: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    s = 1 / np.sqrt(dim)
    return {
        "wi": (rng.uniform(-s, s, (n_in, 4 * dim))).astype(np.float32),
        "wh": (rng.uniform(-s, s, (dim, 4 * dim))).astype(np.float32),
        "b": np.zeros(4 * dim, np.float32),
        "wo": (rng.uniform(-s, s, (dim, 1))).astype(np.float32),
    }


class LSTM(_Model):
    """An LSTM cell unrolled over the columns of `x` (batch, steps), predicting the next
    value at each step (PyTorch's time-sequence-prediction, one cell)."""

    def step(self, x: np.ndarray) -> Any:
        lib, p = self.lib, self.p
        batch, steps = x.shape
        dim = p["wh"].shape[0]
        xt = lib.tensor(x) if lib is sg else torch.tensor(x)

        def loss() -> Any:
            h = lib.zeros((batch, dim))
            c = lib.zeros((batch, dim))
            total = 0.0
            for t in range(steps - 1):
                g = xt[:, t : t + 1] @ p["wi"] + h @ p["wh"] + p["b"]
                i, f = lib.sigmoid(g[:, :dim]), lib.sigmoid(g[:, dim : 2 * dim])
                o, u = lib.sigmoid(g[:, 2 * dim : 3 * dim]), lib.tanh(g[:, 3 * dim :])
                c = f * c + i * u
                h = o * lib.tanh(c)
                total = total + lib.mean((h @ p["wo"] - xt[:, t + 1 : t + 2]) ** 2)
            return total / (steps - 1)

        return self.train(loss)


# ---------------------------------------------------------------- timing


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _timed(fn: Callable[[Any], Any], inputs: list) -> tuple[float, float]:
    """Wall and CPU seconds of `fn` over `inputs`, each call blocked until ready."""
    w0, c0 = _clock()
    for a in inputs:
        block(fn(a))
    w1, c1 = _clock()
    return w1 - w0, c1 - c0


def _sides(make: Callable[[Any], Any]) -> dict[str, Any]:
    out = {"srcgrad": make(sg)}
    if torch is not None:
        out["pytorch"] = make(torch)
    return out


def _alternated(models: dict[str, Any], inputs: list, first: int) -> dict[str, tuple]:
    """Wall and CPU seconds per side over `inputs`, the sides taking turns input by input
    (side `first` first, then the other first, ...): a machine whose speed drifts, as a
    shared one does, slows both sides alike."""
    names = list(models)
    total = {name: [0.0, 0.0] for name in names}
    for i, a in enumerate(inputs):
        for name in names if (i + first) % 2 == 0 else names[::-1]:
            w, c = _timed(models[name].step, [a])
            total[name][0] += w
            total[name][1] += c
    return {name: (w, c) for name, (w, c) in total.items()}


def _rows(
    figure: str,
    samples: dict[str, list[tuple[float, float]]],
    per: int,
    target: float | None,
    unit: str = "ms",
    scale: float = 1e3,
) -> list[Row]:
    """A row of wall time per item and one of CPU time, srcgrad against PyTorch (without
    PyTorch, srcgrad's figures alone)."""
    rows = []
    for k, what in ((0, ""), (1, " (CPU time)")):
        a = np.asarray([s[k] for s in samples["srcgrad"]]) / per
        b = np.asarray([s[k] for s in samples["pytorch"]]) / per if torch is not None else None
        rows.append(
            Row(
                "imperative",
                figure + what,
                unit,
                float(np.median(a)) * scale,
                float(np.median(b)) * scale if b is not None else float("nan"),
                "srcgrad",
                "pytorch" if b is not None else "-",
                target if k == 0 and b is not None else None,
                paired_ratio=float(np.median(a / b)) if b is not None else None,
            )
        )
    return rows


def tree_rows(reps: int, new: int = 20, dim: int = 48) -> list[Row]:
    """Per round a fresh model (both sides): three trees, then `new` trees, each new, the
    sides taking turns tree by tree."""
    samples: dict[str, list] = {"srcgrad": [], "pytorch": []}
    for r in range(reps):
        models = _sides(lambda lib: TreeNet(lib, _tree_weights(100, dim, r)))
        warm, timed = trees(3, 100 + r), trees(new, 200 + r)
        for name in models:
            _timed(models[name].step, warm)
        for name, t in _alternated(models, timed, r).items():
            samples[name].append(t)
    return _rows(f"tree network, {new} new trees of 5..30 leaves (width {dim})", samples, new, 2.0)


def rnn_rows(reps: int, vocab: int = 50, dim: int = 32) -> list[Row]:
    """Per round a fresh model of a new width (both sides): one sentence of four words, then
    sentences of lengths 5..50 in a shuffled order, each a length never seen, the sides
    taking turns sentence by sentence."""
    samples: dict[str, list] = {"srcgrad": [], "pytorch": []}
    lengths = list(np.random.default_rng(7).permutation(np.arange(5, 51)))
    for r in range(reps):
        models = _sides(lambda lib: RNN(lib, _rnn_weights(vocab, dim + r, r)))
        first, timed = sentences([4], vocab, r), sentences(lengths, vocab, r)
        for name in models:
            _timed(models[name].step, first)
        for name, t in _alternated(models, timed, r).items():
            samples[name].append(t)
    return _rows("RNN step, every length new (5..50), no warm-up", samples, len(lengths), 2.0)


def epoch_rows(steps: int, block_steps: int = 100, vocab: int = 50, dim: int = 41) -> list[Row]:
    """A fresh RNN model's first epoch (`steps` sentences of lengths drawn from 5..50): the
    two sides in alternate blocks of `block_steps` steps, the totals compared."""
    rng = np.random.default_rng(9)
    data = sentences([int(n) for n in rng.integers(5, 51, steps)], vocab, 9)
    models = _sides(lambda lib: RNN(lib, _rnn_weights(vocab, dim, 9)))
    total = {name: [0.0, 0.0] for name in models}
    for i, a in enumerate(range(0, steps, block_steps)):
        for name in list(models) if i % 2 == 0 else list(models)[::-1]:
            w, c = _timed(models[name].step, data[a : a + block_steps])
            total[name][0] += w
            total[name][1] += c
    samples = {name: [tuple(t)] for name, t in total.items()}
    return _rows(
        f"first epoch of an RNN, {steps} steps of lengths 5..50 (total)", samples, 1, 1.5, "s", 1.0
    )


def lstm_rows(reps: int, steps: int = 1000, batch: int = 97, dim: int = 51) -> list[Row]:
    """Per round a fresh LSTM of a new width (both sides): its first training step over a
    sequence of `steps` values."""
    samples: dict[str, list] = {"srcgrad": [], "pytorch": []}
    for r in range(reps):
        x = np.sin(np.arange(steps)[None, :] / 8.0 + np.arange(batch)[:, None]).astype(np.float32)
        models = _sides(lambda lib: LSTM(lib, _lstm_weights(1, dim + r, r)))
        for name in list(models) if r % 2 == 0 else list(models)[::-1]:
            samples[name].append(_timed(models[name].step, [x]))
    return _rows(
        f"LSTM cell unrolled over {steps} steps: first step (batch {batch})", samples, 1, 2.0
    )


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def memory_rows(steps: int, warm: int = 500) -> list[Row]:
    """The process's resident set over `steps` training steps of the tree network, each tree
    new (after `warm` of them): what a long define-by-run job keeps."""
    model = TreeNet(sg, _tree_weights(100, 48, 11))
    for sample in trees(warm, 12):
        block(model.step(sample))
    gc.collect()
    rss0, programs = _rss_mb(), sg.cache_info()
    for i in range(0, steps, 1000):
        for sample in trees(min(1000, steps - i), 1000 + i):
            model.step(sample)
    gc.collect()
    grown = {k: v - programs.get(k, 0) for k, v in sg.cache_info().items()}
    made = ", ".join(f"{k} +{v}" for k, v in grown.items() if v) or "no cache grew"
    return [
        Row(
            "imperative",
            f"RSS growth over {steps} steps of new trees ({made})",
            "MiB",
            _rss_mb() - rss0,
            float("nan"),
            "srcgrad",
            "-",
        )
    ]


__all__ = ["epoch_rows", "lstm_rows", "memory_rows", "rnn_rows", "tree_rows"]
