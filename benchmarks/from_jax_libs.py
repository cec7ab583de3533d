"""The library corpus of tests/from_jax/test_from_jax_libs.py: `jax.jit(sg.grad(sg.from_jax(f)))`
against
`jax.jit(jax.grad(f))`, one row per function (custom-adjoint rows included: diffrax,
optimistix, lineax run their rules as sg.jax_op).

Each gradient is compiled and warmed up, then both are timed in alternation (`--reps`
rounds of up to `--calls` calls each, fewer for slow steps: rounds of about 0.3 ms). Prints a
markdown table: the fastest round of each (the
figure least disturbed by other load on a shared machine: steps take tens of microseconds),
their ratio, and the median of the per-round ratios.

Run: `python -m benchmarks.from_jax_libs [--quick] [--reps N] [--calls N] [--only NAME]`.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import jax

import srcgrad as sg


def corpus() -> list[Any]:
    """The test module's LIBS (loaded from its file: tests/ is not a package)."""
    path = Path(__file__).resolve().parents[1] / "tests" / "from_jax" / "test_from_jax_libs.py"
    spec = importlib.util.spec_from_file_location("test_from_jax_libs", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module.LIBS


def _time(fn: Callable[..., Any], args: tuple, calls: int) -> float:
    t = time.perf_counter()
    for _ in range(calls):
        out = fn(*args)
    jax.block_until_ready(out)
    return (time.perf_counter() - t) / calls


def measure(
    fn: Callable[..., Any], args: tuple, reps: int, calls: int
) -> tuple[float, float, float]:
    """(srcgrad seconds, jax seconds, median ratio) of the jitted gradients: the fastest
    round of each, and the median of the per-round ratios."""
    argnums = tuple(range(len(args)))
    ours = jax.jit(sg.grad(sg.from_jax(fn), argnums=argnums))
    theirs = jax.jit(jax.grad(fn, argnums=argnums))
    jax.block_until_ready((ours(*args), theirs(*args)))
    # Rounds of about 0.3 ms (at most `calls` calls): short enough that some escape the
    # other load of a shared machine, whose fastest rounds are then the figure.
    calls = max(1, min(calls, round(3e-4 / max(_time(ours, args, 3), _time(theirs, args, 3)))))
    ratios, ts, tj = [], [], []
    for _ in range(reps):
        a, b = _time(ours, args, calls), _time(theirs, args, calls)
        ts.append(a)
        tj.append(b)
        ratios.append(a / b)
    return min(ts), min(tj), statistics.median(ratios)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=40)
    p.add_argument("--calls", type=int, default=10)
    p.add_argument("--only", default=None)
    p.add_argument("--quick", action="store_true", help="the default test slice only")
    a = p.parse_args(argv)
    jax.config.update("jax_enable_x64", True)
    print("| function | srcgrad step (ms) | jax.grad step (ms) | ratio | median ratio |")
    print("| --- | --- | --- | --- | --- |")
    for case in corpus():
        if (a.only and a.only not in case.name) or (a.quick and case.slow) or " " in case.name:
            continue  # names with a space are test variants (fd, second order) of a row
        fn, args = case.built()
        s, j, r = measure(fn, args, a.reps, a.calls)
        print(f"| {case.name} | {s * 1e3:.3f} | {j * 1e3:.3f} | {s / j:.2f} | {r:.2f} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
