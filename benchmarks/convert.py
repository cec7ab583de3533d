"""Converted Python control flow vs the same function hand-written with srcgrad's loops.

`python -m benchmarks.convert [--quick]` prints, per workload, the time to the first gradient
(a fresh function object and empty caches, so it includes the failed first trace, the
conversion and the compilation) and the steady-state step time of `sg.grad` of:

- "fixed point": z <- tanh(W z + x) until max|z_new - z| <= tol, as a Python `while` loop
  vs `sg.while_loop`;
- "branchy scan": a `for` over the rows of a traced array with an `if` on each row's value,
  vs `sg.fori_loop` with `sg.cond`.

The converted loop peels the first iteration when its test starts as a Python value
(`err = 1.0`), so its program is one body longer than the hand-written one.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Callable

import numpy as np

import srcgrad as sg
from srcgrad.convert import loader

from .harness import block, interleaved

TOL = 1e-5


def fixed_point_py() -> Callable[..., Any]:
    def loss(w: Any, x: Any, target: Any) -> Any:
        z = sg.zeros(x.shape, np.float32)
        err = 1.0
        while err > TOL:
            z_new = sg.tanh(w @ z + x)
            err = sg.max(sg.abs(z_new - z))
            z = z_new
        return 0.5 * sg.sum(sg.square(z - target))

    return loss


def fixed_point_hand() -> Callable[..., Any]:
    def loss(w: Any, x: Any, target: Any) -> Any:
        def body(c: Any) -> Any:
            z_new = sg.tanh(w @ c[0] + x)
            return z_new, sg.max(sg.abs(z_new - c[0]))

        z, _ = sg.while_loop(
            lambda c: c[1] > TOL, body, (sg.zeros(x.shape, np.float32), np.float32(1.0))
        )
        return 0.5 * sg.sum(sg.square(z - target))

    return loss


def branchy_py() -> Callable[..., Any]:
    def loss(w: Any, xs: Any, target: Any) -> Any:
        h = sg.zeros(w.shape[0], np.float32)
        for x in xs:
            if sg.sum(x) > 0:
                h = sg.tanh(w @ h + x)
            else:
                h = 0.5 * h - x
        return 0.5 * sg.sum(sg.square(h - target))

    return loss


def branchy_hand() -> Callable[..., Any]:
    def loss(w: Any, xs: Any, target: Any) -> Any:
        def body(i: Any, h: Any) -> Any:
            x = xs[i]
            return sg.cond(sg.sum(x) > 0, lambda h: sg.tanh(w @ h + x), lambda h: 0.5 * h - x, h)

        h = sg.fori_loop(0, xs.shape[0], body, sg.zeros(w.shape[0], np.float32))
        return 0.5 * sg.sum(sg.square(h - target))

    return loss


def _args(dim: int, steps: int) -> tuple[tuple, tuple]:
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((dim, dim)) * 0.3 / np.sqrt(dim)).astype(np.float32)
    x = rng.standard_normal(dim).astype(np.float32)
    xs = rng.standard_normal((steps, dim)).astype(np.float32)
    target = rng.standard_normal(dim).astype(np.float32)
    return (w, x, target), (w, xs, target)


def _first(make: Callable[[], Callable[..., Any]], args: tuple) -> float:
    sg.clear_caches()
    loader.clear()
    g = sg.grad(make(), argnums=(0, 1))
    t0 = time.perf_counter()
    block(g(*args))
    return time.perf_counter() - t0


def run(quick: bool = False) -> list[tuple[str, str, float, float]]:
    """(workload, figure, converted, hand-written) rows; times in milliseconds."""
    fixed, branchy = _args(8 if quick else 64, 6 if quick else 200)
    reps = 1 if quick else 7
    rows = []
    for name, py, hand, args in (
        ("fixed point", fixed_point_py, fixed_point_hand, fixed),
        ("branchy scan", branchy_py, branchy_hand, branchy),
    ):
        a = np.asarray(sg.grad(py(), argnums=(0, 1))(*args)[0])
        b = np.asarray(sg.grad(hand(), argnums=(0, 1))(*args)[0])
        assert np.allclose(a, b, rtol=1e-4, atol=1e-6), f"{name}: the gradients differ"
        _first(py, args), _first(hand, args)  # warm what every first call shares
        firsts = {"py": [], "hand": []}
        for r in range(reps):
            for k, make in (
                (("py", py), ("hand", hand)) if r % 2 == 0 else (("hand", hand), ("py", py))
            ):
                firsts[k].append(_first(make, args))
        rows.append(
            (
                name,
                "first gradient",
                statistics.median(firsts["py"]) * 1e3,
                statistics.median(firsts["hand"]) * 1e3,
            )
        )
        gp, gh = sg.grad(py(), argnums=(0, 1)), sg.grad(hand(), argnums=(0, 1))
        steps = interleaved(
            {"py": lambda: gp(*args), "hand": lambda: gh(*args)},
            reps=3 if quick else 21,
            sample_s=0.0 if quick else 0.1,
        )
        rows.append(
            (
                name,
                "step",
                statistics.median(steps["py"]) * 1e3,
                statistics.median(steps["hand"]) * 1e3,
            )
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.convert", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--quick", action="store_true", help="tiny sizes, one repetition")
    args = ap.parse_args(argv)
    print(f"{'workload':<14}{'figure':<16}{'converted ms':>14}{'sg.* loops ms':>15}{'ratio':>8}")
    for name, fig, conv, hand in run(args.quick):
        print(f"{name:<14}{fig:<16}{conv:>14.2f}{hand:>15.2f}{conv / hand:>8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
