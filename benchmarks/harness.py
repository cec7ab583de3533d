"""Measuring: interleaved steady-state timing, time to first gradient, compiled memory."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import jax
import numpy as np

from . import scaling
from .workload import Pair, Workload


@dataclass
class Row:
    """One figure of one comparison: srcgrad's value, the peer's, and the target ratio."""

    workload: str
    figure: str
    unit: str
    srcgrad: float
    peer: float
    srcgrad_name: str = "srcgrad"
    peer_name: str = "jax"
    target: float | None = None
    target_on: str = "ratio"  # or "srcgrad": the target bounds srcgrad's own value
    paired_ratio: float | None = None  # median of per-round ratios, where rounds pair samples

    @property
    def ratio(self) -> float:
        if self.paired_ratio is not None:
            return self.paired_ratio
        return self.srcgrad / self.peer if self.peer else math.inf

    @property
    def met(self) -> bool | None:
        if self.target is None:
            return None
        return (self.ratio if self.target_on == "ratio" else self.srcgrad) <= self.target


@dataclass
class Settings:
    """How much to measure: samples per variant, first-gradient runs, seconds per sample."""

    reps: int = 21
    first_reps: int = 9
    sample_s: float = 0.1
    scaling_sizes: tuple[int, ...] = (1_000, 10_000, 100_000)
    scaling_reps: tuple[int, ...] = (3, 1, 1)
    figures: tuple[str, ...] = ("step", "first gradient", "memory", "agreement")


def block(x: Any) -> Any:
    return jax.block_until_ready(x)


def interleaved(
    fns: dict[str, Callable[[], Any]], reps: int, sample_s: float
) -> dict[str, list[float]]:
    """Seconds per call of each function, one sample per round, round-robin after a warm-up.

    Each sample times `k` back-to-back calls (each blocked until ready), `k` chosen so that a
    sample lasts about `sample_s`; the order alternates between rounds.
    """
    inner: dict[str, int] = {}
    for name, fn in fns.items():
        block(fn())
        t0 = time.perf_counter()
        block(fn())
        inner[name] = max(1, math.ceil(sample_s / max(time.perf_counter() - t0, 1e-9)))
    samples: dict[str, list[float]] = {name: [] for name in fns}
    names = list(fns)
    for r in range(reps):
        for name in names if r % 2 == 0 else names[::-1]:
            fn, k = fns[name], inner[name]
            t0 = time.perf_counter()
            for _ in range(k):
                block(fn())
            samples[name].append((time.perf_counter() - t0) / k)
    return samples


def first_gradient(w: Workload, reps: int) -> dict[str, list[float]]:
    """Seconds from building a variant (fresh functions) to its first result, one per round.

    One discarded round first warms what every first call shares (JAX's own jitted helpers);
    then the variants alternate.
    """

    def once(name: str) -> float:
        v = w.variant(name)
        t0 = time.perf_counter()
        block(v.make()(*w.args))
        return time.perf_counter() - t0

    names = [v.name for v in w.variants]
    for name in names:
        once(name)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for r in range(reps):
        for name in names if r % 2 == 0 else names[::-1]:
            samples[name].append(once(name))
    return samples


def paired_rows(
    w: Workload, figure: str, unit: str, scale: float, samples: dict[str, list[float]]
) -> list[Row]:
    """One row per pair: medians, and the median of the per-round srcgrad/peer ratios."""
    med = {name: float(np.median(s)) * scale for name, s in samples.items()}
    return [
        Row(
            w.name,
            figure,
            unit,
            med[p.srcgrad],
            med[p.peer],
            p.srcgrad,
            p.peer,
            p.targets.get(figure),
            paired_ratio=float(np.median(np.divide(samples[p.srcgrad], samples[p.peer]))),
        )
        for p in w.pairs
    ]


def max_rel_diff(a: Any, b: Any) -> float:
    """The largest |a - b| / max|b| over the leaves of two output trees."""
    out = 0.0
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        out = max(out, float(np.max(np.abs(x - y))) / max(float(np.max(np.abs(y))), 1e-30))
    return out


def run_workload(w: Workload, s: Settings) -> list[Row]:
    """Every figure of `s.figures` for every pair of `w`."""
    rows: list[Row] = []
    fns = {v.name: v.make() for v in w.variants}
    firsts: dict[str, Pair] = {}  # each srcgrad variant's first pair
    for p in w.pairs:
        firsts.setdefault(p.srcgrad, p)
    if "agreement" in s.figures:
        outs = {name: block(fn(*w.args)) for name, fn in fns.items()}
        for p in firsts.values():
            diff = max_rel_diff(outs[p.srcgrad], outs[p.peer])
            rows.append(
                Row(
                    w.name,
                    "max rel. difference",
                    "",
                    diff,
                    math.nan,
                    p.srcgrad,
                    p.peer,
                    w.rtol,
                    "srcgrad",
                )
            )
    if "step" in s.figures:
        samples = interleaved(
            {name: (lambda f=fn: f(*w.args)) for name, fn in fns.items()}, s.reps, s.sample_s
        )
        rows += paired_rows(w, "step", "ms", 1e3, samples)
    if "first gradient" in s.figures:
        rows += paired_rows(w, "first gradient", "s", 1.0, first_gradient(w, s.first_reps))
    if "memory" in s.figures:
        mem = {v.name: v.memory_analysis(w.args) for v in w.variants}
        for p in w.pairs:
            a, b = mem[p.srcgrad], mem[p.peer]
            rows.append(
                Row(
                    w.name,
                    "temp memory",
                    "MiB",
                    a.temp_size_in_bytes / 2**20,
                    b.temp_size_in_bytes / 2**20,
                    p.srcgrad,
                    p.peer,
                    p.targets.get("temp memory"),
                )
            )
            if firsts[p.srcgrad] is p:
                rows.append(
                    Row(
                        w.name,
                        "argument memory",
                        "MiB",
                        a.argument_size_in_bytes / 2**20,
                        b.argument_size_in_bytes / 2**20,
                        p.srcgrad,
                        p.peer,
                    )
                )
    return rows


def _total(phases: dict[str, float]) -> float:
    return sum(phases.values())


#: Transform targets: srcgrad's transform, Python's compile() included, at least 10x faster
#: than JAX's grad tracing, and linear (µs per op at the largest N within 1.5x of that at
#: the smallest). Time to first gradient: at most JAX's.
TRANSFORM_TARGET = 0.1
LINEAR_TARGET = 1.5
FIRST_TARGET = 1.0


#: Sizes up to which `run_scaling` also splits each first gradient into its phases (a run of
#: its own), and up to which it times whole first gradients: above, XLA's compile of one
#: program takes the better part of an hour on a 2-core CPU, and the figure is the first
#: gradient up to it (srcgrad's transform, JAX's trace and lowering).
PHASES_UP_TO = 1_000
FIRST_UP_TO = 10_000


def run_scaling(
    sizes: Sequence[int], reps: Sequence[int], programs: Sequence[str] = ("chain", "mlp")
) -> list[Row]:
    """Workload 6: the transform (µs per op, against make_jaxpr(grad)) and the time to first
    gradient (s, against jax.jit(jax.grad)) of each program at each size, and their phases."""
    rows: list[Row] = []
    for prog in programs:
        per_op: list[tuple[float, float]] = []
        for n, r in zip(sizes, reps):
            name, us = f"{prog} N={n:,}", 1e6 / n
            t = scaling.measure("transform", prog, n, r)
            sg_total, jax_total = sum(t.srcgrad.values()) * us, t.jax["total"] * us
            per_op.append((sg_total, jax_total))
            rows.append(
                Row(
                    "transform",
                    name,
                    "µs/op",
                    sg_total,
                    jax_total,
                    "trace+backward+emit+compile()+release",
                    "make_jaxpr(grad)",
                    TRANSFORM_TARGET,
                    paired_ratio=t.ratio,
                )
            )
            rows.append(
                Row(
                    "transform",
                    f"{name}, CPU-time ratio",
                    "",
                    t.cpu_ratio,
                    1.0,
                    "srcgrad",
                    "make_jaxpr(grad)",
                    TRANSFORM_TARGET,
                    paired_ratio=t.cpu_ratio,
                )
            )
            rows += [
                Row("transform", f"{name}: {part}", "µs/op", v * us, math.nan, "srcgrad", "—")
                for part, v in t.srcgrad.items()
            ]
            whole = n <= FIRST_UP_TO
            f = scaling.measure("first gradient" if whole else "lowering", prog, n, r)
            what = "first gradient" if whole else "first gradient up to XLA's compile"
            rows.append(
                Row(
                    "transform",
                    f"{name}: {what}",
                    "s",
                    _total(f.srcgrad),
                    _total(f.jax),
                    "sg.grad",
                    "jax.jit(jax.grad)",
                    FIRST_TARGET,
                    paired_ratio=f.ratio,
                )
            )
            rows.append(
                Row(
                    "transform",
                    f"{name}: {what}, CPU-time ratio",
                    "",
                    f.cpu_ratio,
                    1.0,
                    "sg.grad",
                    "jax.jit(jax.grad)",
                    FIRST_TARGET,
                    paired_ratio=f.cpu_ratio,
                )
            )
            if n <= PHASES_UP_TO:
                ph = scaling.measure("first gradient", prog, n, 1, phases=True)
                rows += [
                    Row(
                        "transform",
                        f"{name}: first gradient, {k}",
                        "s",
                        v,
                        ph.jax.get(k, math.nan),
                        "srcgrad",
                        "jax",
                    )
                    for k, v in ph.srcgrad.items()
                ]
        if len(per_op) > 1:
            (s0, j0), (s1, j1) = per_op[0], per_op[-1]
            rows.append(
                Row(
                    "transform",
                    f"{prog} growth µs/op N={sizes[-1]:,} / N={sizes[0]:,}",
                    "x",
                    s1 / s0,
                    j1 / j0,
                    "srcgrad",
                    "jax",
                    LINEAR_TARGET,
                    "srcgrad",
                )
            )
    return rows
