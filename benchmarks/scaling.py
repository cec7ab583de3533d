"""Workload 6: the gradient of large straight-line programs, srcgrad vs JAX.

Two programs of N ops: a chain of elementwise ops (sin, cos, tanh, ...) then a sum, and an
MLP stack (`tanh(h @ w + b)`, three ops a layer, 8 wide, its own weights per layer) then a
sum of squares. Two figures per size, srcgrad and JAX alternating, fresh functions each run:

- transform: srcgrad's trace + append_backward, emission, Python's `compile()` of the source
  and releasing the IR (`Transformed.lower`'s pipeline, phase by phase) against
  `jax.make_jaxpr(jax.grad(f))`;
- first gradient: from a fresh function to its first result, compilation included:
  `sg.grad(f)(*args)` against `jax.jit(jax.grad(f))(*args)`, with the phases of each (for
  srcgrad: its transform, then JAX's trace of the emitted function, lowering, XLA's compile
  and the first run; for JAX: trace, lowering, compile, run).

Figures include the garbage collections that happen while they run: srcgrad pauses Python's
cyclic collector while it transforms and while JAX first traces, lowers and compiles the
emitted function (`collection_paused`), JAX's own functions run with it on, as they do.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

import srcgrad as sg
from srcgrad.transforms.loading import collection_paused, load, short_locations
from srcgrad.transforms.lower_jax import emit_program

from .workload import fresh

_SG_OPS = (sg.sin, sg.cos, sg.tanh)
_JAX_OPS = (jnp.sin, jnp.cos, jnp.tanh)
#: The MLP stack's width and batch.
WIDTH, BATCH = 8, 4


def chain_sg(x: Any, n: int) -> Any:
    """srcgrad: n elementwise ops (sin, cos, tanh, ...) then a sum."""
    for i in range(n):
        x = _SG_OPS[i % 3](x)
    return sg.sum(x)


def chain_jax(x: Any, n: int) -> Any:
    """The jax.numpy twin of `chain_sg`."""
    for i in range(n):
        x = _JAX_OPS[i % 3](x)
    return jnp.sum(x)


def mlp_sg(params: Any, x: Any, n: int) -> Any:
    """srcgrad: `tanh(h @ w + b)` for each (w, b) in params, then the sum of squares."""
    h = x
    for w, b in params:
        h = sg.tanh(h @ w + b)
    return sg.sum(h * h)


def mlp_jax(params: Any, x: Any, n: int) -> Any:
    """The jax.numpy twin of `mlp_sg`."""
    h = x
    for w, b in params:
        h = jnp.tanh(h @ w + b)
    return jnp.sum(h * h)


@dataclass
class Program:
    """One scaling program: its srcgrad and JAX functions and example arguments."""

    name: str
    sg_fn: Callable[..., Any]
    jax_fn: Callable[..., Any]
    args: Callable[[int], tuple]


def _chain_args(n: int) -> tuple:
    return (np.linspace(0.1, 0.9, 4).astype(np.float32),)


def _mlp_args(n: int) -> tuple:
    rng = np.random.default_rng(0)
    params = [
        (
            jnp.asarray(rng.standard_normal((WIDTH, WIDTH), np.float32) * WIDTH**-0.5),
            jnp.zeros(WIDTH, np.float32),
        )
        for _ in range(max(1, n // 3))
    ]
    return params, jnp.asarray(rng.standard_normal((BATCH, WIDTH), np.float32))


PROGRAMS = {
    "chain": Program("chain", chain_sg, chain_jax, _chain_args),
    "mlp": Program("mlp", mlp_sg, mlp_jax, _mlp_args),
}

TRANSFORM_PHASES = ("trace+backward", "emit", "Python compile()", "release")
SG_PHASES = TRANSFORM_PHASES + ("JAX trace", "lower", "XLA compile", "run")
JAX_PHASES = ("JAX trace", "lower", "XLA compile", "run")


def _grad_of(fn: Callable[..., Any], n: int, grad: Callable[..., Any]) -> Callable[..., Any]:
    f = fresh(fn)
    return grad(lambda *a: f(*a, n))


def srcgrad_phases(p: Program, n: int, args: tuple, compile_too: bool = True) -> dict[str, float]:
    """Seconds per phase of srcgrad's first gradient of a fresh `p` (what `sg.grad(f)(*args)`
    runs: `Transformed.lower`'s pipeline, then `jax.jit` of the emitted function); without
    `compile_too`, up to lowering."""
    g = _grad_of(p.sg_fn, n, sg.grad)
    with collection_paused():  # as Transformed._lower runs, and Lowered.jitted's first call
        t = [time.perf_counter()]
        prog, ins, outs, _ = g.trace(*args)
        t.append(time.perf_counter())
        source = emit_program(prog, ins + prog.captures, outs)
        t.append(time.perf_counter())
        lowered = load(source)
        t.append(time.perf_counter())
        prog.dispose()
        t.append(time.perf_counter())
        with short_locations():
            return _jax_phases(
                jax.jit(lowered.fn), jax.tree_util.tree_leaves(args), t, SG_PHASES, compile_too
            )


def jax_phases(p: Program, n: int, args: tuple, compile_too: bool = True) -> dict[str, float]:
    """Seconds per phase of `jax.jit(jax.grad(f))(*args)` on a fresh `p` (without
    `compile_too`, up to lowering)."""
    g = jax.jit(_grad_of(p.jax_fn, n, jax.grad))
    return _jax_phases(g, args, [time.perf_counter()], JAX_PHASES, compile_too)


def _jax_phases(
    jitted: Any, args: Sequence[Any], t: list[float], names: Sequence[str], compile_too: bool
) -> dict[str, float]:
    """Seconds per phase (`names`): the times in `t`, then JAX's trace and lowering of
    `jitted` on `args` and, with `compile_too`, XLA's compile and the first run."""
    traced = jitted.trace(*args)
    t.append(time.perf_counter())
    low = traced.lower()
    t.append(time.perf_counter())
    if compile_too:
        compiled = low.compile()
        t.append(time.perf_counter())
        jax.block_until_ready(compiled(*args))
        t.append(time.perf_counter())
    return dict(zip(names, np.diff(t)))


def srcgrad_first(p: Program, n: int, args: tuple) -> float:
    """Seconds from a fresh function to `sg.grad(f)(*args)`'s result."""
    t0 = time.perf_counter()
    jax.block_until_ready(_grad_of(p.sg_fn, n, sg.grad)(*args))
    return time.perf_counter() - t0


def jax_first(p: Program, n: int, args: tuple) -> float:
    """Seconds from a fresh function to `jax.jit(jax.grad(f))(*args)`'s result."""
    t0 = time.perf_counter()
    jax.block_until_ready(jax.jit(_grad_of(p.jax_fn, n, jax.grad))(*args))
    return time.perf_counter() - t0


def srcgrad_transform(p: Program, n: int, args: tuple) -> dict[str, float]:
    """Seconds per phase of srcgrad's transform of a fresh `p`, `compile()` included."""
    g = _grad_of(p.sg_fn, n, sg.grad)
    with collection_paused():  # as Transformed._lower runs
        t = [time.perf_counter()]
        prog, ins, outs, _ = g.trace(*args)
        t.append(time.perf_counter())
        source = emit_program(prog, ins + prog.captures, outs)
        t.append(time.perf_counter())
        load(source)
        t.append(time.perf_counter())
        prog.dispose()
        t.append(time.perf_counter())
    return dict(zip(TRANSFORM_PHASES, np.diff(t)))


def jax_transform(p: Program, n: int, args: tuple) -> float:
    """Seconds of `jax.make_jaxpr(jax.grad(f))(*args)` on a fresh `p`."""
    g = _grad_of(p.jax_fn, n, jax.grad)
    t0 = time.perf_counter()
    jax.make_jaxpr(g)(*args)
    return time.perf_counter() - t0


@dataclass
class Timing:
    """Medians for one program at one size: srcgrad's phases and JAX's figure."""

    program: str
    n: int
    srcgrad: dict[str, float]
    jax: dict[str, float]
    ratio: float  # median of the per-round srcgrad / JAX ratios of the totals
    cpu_ratio: float  # the same for the process's CPU time (all threads)


def _alternate(
    sg_once: Callable[[], Any], jax_once: Callable[[], Any], reps: int
) -> tuple[list[Any], list[Any], list[float]]:
    """`reps` rounds of both, the order flipping every round; srcgrad's caches cleared first.
    Also the per-round ratios of CPU time."""
    a: list[Any] = []
    b: list[Any] = []
    cpu: list[list[float]] = [[], []]
    for r in range(reps):
        for which in (0, 1) if r % 2 == 0 else (1, 0):
            c0 = time.process_time()
            if which == 0:
                sg.clear_caches()
                a.append(sg_once())
            else:
                b.append(jax_once())
            cpu[which].append(time.process_time() - c0)
    return a, b, [x / y for x, y in zip(*cpu)]


def _total(x: Any) -> float:
    return sum(x.values()) if isinstance(x, dict) else float(x)


def _medians(samples: list[Any]) -> dict[str, float]:
    if isinstance(samples[0], dict):
        return {k: float(np.median([s[k] for s in samples])) for k in samples[0]}
    return {"total": float(np.median(samples))}


def measure(kind: str, program: str, n: int, reps: int, phases: bool = False) -> Timing:
    """Medians over `reps` alternating rounds after a small warm-up (each on fresh functions).

    `kind` is "transform", "first gradient" or "lowering" (a first gradient's phases up to
    XLA's compile); with `phases`, a first gradient is timed phase by phase (the same work,
    split with JAX's ahead-of-time API).
    """
    p = PROGRAMS[program]
    args = p.args(n)
    if kind == "transform":
        sg_once, jax_once = srcgrad_transform, jax_transform
    elif kind == "lowering":
        sg_once, jax_once = (
            functools.partial(srcgrad_phases, compile_too=False),
            functools.partial(jax_phases, compile_too=False),
        )
    elif phases:
        sg_once, jax_once = srcgrad_phases, jax_phases
    else:
        sg_once, jax_once = srcgrad_first, jax_first
    warm = p.args(10)
    sg_once(p, 10, warm)
    jax_once(p, 10, warm)
    a, b, cpu = _alternate(lambda: sg_once(p, n, args), lambda: jax_once(p, n, args), reps)
    ratio = float(np.median([_total(x) / _total(y) for x, y in zip(a, b)]))
    return Timing(program, n, _medians(a), _medians(b), ratio, float(np.median(cpu)))


def main(argv: list[str]) -> int:
    """`python -m benchmarks.scaling KIND PROGRAM N [REPS] [--phases]`: print one Timing.

    KIND is transform, first or lowering; PROGRAM chain or mlp.
    """
    ph = "--phases" in argv
    args = [a for a in argv if a != "--phases"]
    kind = {"transform": "transform", "first": "first gradient", "lowering": "lowering"}[args[0]]
    n, reps = int(args[2]), int(args[3]) if len(args) > 3 else 3
    t = measure(kind, args[1], n, reps, ph)
    us = 1e6 / n
    print(
        f"{kind} {t.program} N={n:,}: srcgrad {_total(t.srcgrad):.3f} s, jax "
        f"{_total(t.jax):.3f} s, ratio {t.ratio:.3f} (CPU time: {t.cpu_ratio:.3f})"
    )
    for side, d in (("srcgrad", t.srcgrad), ("jax", t.jax)):
        print(f"  {side}: " + ", ".join(f"{k} {v * us:.1f}" for k, v in d.items()) + " µs/op")
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
