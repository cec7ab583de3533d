"""Workload 6: transform time for a chain of N elementwise ops, srcgrad vs jax.make_jaxpr(jax.grad).

srcgrad's figure is one run of the pipeline `Transformed.lower` runs, timed phase by phase:
`Transformed.trace` (trace + append_backward), `emit_program` (emit source), `load` (Python's
compile() of the source, reported apart: not part of the transform) and `Program.dispose`
(freeing the IR, counted in the transform). Both figures include the garbage collections
that happen while they run.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

import srcgrad as sg
from srcgrad.transforms.lower_jax import emit_program, load

from .workload import fresh

_SG_OPS = (sg.sin, sg.cos, sg.tanh)
_JAX_OPS = (jnp.sin, jnp.cos, jnp.tanh)


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


@dataclass
class Timing:
    """Seconds for one transform of an N-op chain (medians)."""

    n: int
    trace_backward: float
    emit: float
    compile: float
    release: float
    jax: float

    @property
    def srcgrad(self) -> float:
        return self.trace_backward + self.emit + self.release


def _srcgrad_once(n: int, x: np.ndarray) -> tuple[float, float, float, float]:
    """(trace + backward, emit, compile(), release) seconds for the grad of a fresh n-op chain."""
    f = fresh(chain_sg)
    g = sg.grad(lambda v: f(v, n))
    t0 = time.perf_counter()
    prog, ins, outs, _ = g.trace(x)
    t1 = time.perf_counter()
    source = emit_program(prog, ins + prog.captures, outs)
    t2 = time.perf_counter()
    load(source)
    t3 = time.perf_counter()
    prog.dispose()
    t4 = time.perf_counter()
    return t1 - t0, t2 - t1, t3 - t2, t4 - t3


def _jax_once(n: int, x: np.ndarray) -> float:
    f = fresh(chain_jax)
    t0 = time.perf_counter()
    jax.make_jaxpr(jax.grad(lambda v: f(v, n)))(x)
    return time.perf_counter() - t0


def measure(n: int, reps: int, x: np.ndarray | None = None) -> Timing:
    """Medians over `reps` runs after a small warm-up, srcgrad and JAX alternating (each run on
    fresh functions)."""
    x = np.ones(4, np.float32) if x is None else x
    _srcgrad_once(10, x)  # warm-up: first-call costs (caches of shape rules, JAX's tracing)
    _jax_once(10, x)
    runs: list[tuple[float, float, float, float]] = []
    jax_runs: list[float] = []
    once: list[Callable[[], Any]] = [lambda: runs.append(_srcgrad_once(n, x)),
                                     lambda: jax_runs.append(_jax_once(n, x))]
    for r in range(reps):
        for fn in (once if r % 2 == 0 else once[::-1]):
            fn()
    med = [float(m) for m in np.median(np.array(runs), axis=0)]
    return Timing(n, *med, float(np.median(jax_runs)))
