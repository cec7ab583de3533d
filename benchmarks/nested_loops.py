"""Nested loops: the gradient's memory and time against the depth of the nest and against
`max_iters`, where they should follow the iterations that ran.

    python -m benchmarks.nested_loops [--depths 1,2,...] [--max-iters 20,50,...] [--reps N]

Table 1: `depth` nested `sg.while_loop`s without `max_iters`, each running 3 iterations
(the innermost updates the state), `sg.grad` called on concrete arrays: XLA's temp memory
of the gradient program (the capacity search's first program, 64 slots per loop), the
first call (trace and compile) and the step time (median of `--reps` calls).

Table 2: `jax.scipy.optimize.minimize(method="BFGS")` (a while loop with a line-search
loop and two zoom loops inside) through `sg.from_jax(max_iters=N)`, its gradient with
respect to the objective's parameter inside `jax.jit`, against `jax.jit(jax.jacfwd)` of the
same function: step time (median of `--reps` calls) and temp memory.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import jax.scipy.optimize
import numpy as np

import srcgrad as sg

TRIPS = 3
N_BFGS = 8


def nested(depth: int) -> Callable[[Any, Any], Any]:
    """`depth` nested unbounded while loops of TRIPS iterations each."""

    def level(s: Any, w: Any, d: int) -> Any:
        def body(c: Any) -> Any:
            t, i = c
            t = sg.sin(t) * w + 0.1 if d == depth - 1 else level(t, w, d + 1)
            return t, i + 1.0

        return sg.while_loop(lambda c: c[1] < TRIPS, body, (s, 0.0))[0]

    return lambda x, w: sg.sum(level(x, w, 0))


def _median_ms(fn: Callable[..., Any], args: tuple, reps: int) -> float:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def depth_row(depth: int, reps: int) -> str:
    x, w = np.linspace(0.1, 0.3, 4), np.float64(0.7)
    g = sg.grad(nested(depth), argnums=(0, 1))
    lowered = g.lower(x, w)[0]
    mem = jax.jit(lowered.fn).lower(x, w).compile().memory_analysis().temp_size_in_bytes
    start = time.perf_counter()
    jax.block_until_ready(g(x, w))
    first = time.perf_counter() - start
    return (
        f"| {depth} | {TRIPS**depth} | {mem / 2**20:.3f} | {first:.2f} | "
        f"{_median_ms(g, (x, w), reps):.3f} |"
    )


def _objective(x: Any, p: Any) -> Any:
    return jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (p[:-1] - x[:-1]) ** 2)


def bfgs_loss(max_iters: int) -> Callable[[Any], Any]:
    def loss(p: Any) -> Any:
        res = jax.scipy.optimize.minimize(
            _objective, jnp.zeros(N_BFGS), args=(p,), method="BFGS", options={"maxiter": max_iters}
        )
        return jnp.sum(res.x**2)

    return loss


def bfgs_row(max_iters: int, reps: int) -> str:
    p = jnp.linspace(0.5, 1.5, N_BFGS)
    ours = jax.jit(sg.grad(sg.from_jax(bfgs_loss(max_iters), max_iters=max_iters)))
    theirs = jax.jit(jax.jacfwd(bfgs_loss(max_iters)))
    jax.block_until_ready((ours(p), theirs(p)))
    mem = ours.lower(p).compile().memory_analysis().temp_size_in_bytes
    return (
        f"| {max_iters} | {_median_ms(ours, (p,), reps):.3f} | "
        f"{_median_ms(theirs, (p,), reps):.3f} | {mem / 2**20:.3f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--depths", default="1,2,3,4,5,6,8,10")
    parser.add_argument("--max-iters", default="20,50,100,200")
    parser.add_argument("--reps", type=int, default=21)
    args = parser.parse_args()
    jax.config.update("jax_enable_x64", True)
    print("| depth | innermost iterations | temp memory MiB | first call s | step ms |")
    print("|---|---|---|---|---|")
    for d in (int(s) for s in args.depths.split(",") if s):
        print(depth_row(d, args.reps), flush=True)
    jax.config.update("jax_enable_x64", False)
    print()
    print("| max_iters | sg.grad (from_jax) ms | jax.jacfwd ms | sg temp memory MiB |")
    print("|---|---|---|---|")
    for m in (int(s) for s in args.max_iters.split(",") if s):
        print(bfgs_row(m, args.reps), flush=True)


if __name__ == "__main__":
    main()
