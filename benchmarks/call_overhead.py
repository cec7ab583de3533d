"""The fixed cost of calling a compiled gradient: `sg.grad(f)(x)` against
`jax.jit(jax.grad(f))(x)` on small functions, where the call, not the work, is the time.

    python -m benchmarks.call_overhead [--rounds N] [--calls N]

Functions: a scalar polynomial, the sum of tanh over 10 elements, and a small MLP loss
(64-32-10, batch 8), each called on NumPy inputs and on the same values as JAX arrays (a
NumPy input is copied to the device on every call, by either). Each figure is the best over
interleaved rounds (srcgrad's and JAX's in turn: the round least disturbed by other load) of
the time per call in a Python loop of `--calls` calls (microseconds); the ratio is
srcgrad's over JAX's. The last row makes `sg.grad(poly)` afresh on every call (JAX's peer is
the cached `jax.jit` call: a fresh `jax.jit(jax.grad(f))` traces again, milliseconds per
call).
"""

from __future__ import annotations

import argparse
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

import srcgrad as sg


def poly(x: Any) -> Any:
    return 3.0 * x**3 + 2.0 * x * x - x + 1.0


def tanh_sum(x: Any, np_: Any = sg) -> Any:
    return np_.sum(np_.tanh(x))


def mlp(params: Any, x: Any, y: Any, np_: Any = sg) -> Any:
    (w1, b1), (w2, b2) = params
    h = np_.tanh(x @ w1 + b1)
    return np_.mean((h @ w2 + b2 - y) ** 2)


def cases() -> list[tuple[str, Callable[..., Any], Callable[..., Any], tuple]]:
    rng = np.random.default_rng(0)
    f32 = np.float32
    params = [
        (rng.standard_normal((64, 32)).astype(f32) / 8, np.zeros(32, f32)),
        (rng.standard_normal((32, 10)).astype(f32) / 6, np.zeros(10, f32)),
    ]
    batch = (rng.standard_normal((8, 64)).astype(f32), rng.standard_normal((8, 10)).astype(f32))
    return [
        ("scalar polynomial", sg.grad(poly), jax.jit(jax.grad(poly)), (np.float32(0.5),)),
        (
            "tanh sum, 10 elements",
            sg.grad(tanh_sum),
            jax.jit(jax.grad(lambda x: tanh_sum(x, jnp))),
            (np.linspace(-1, 1, 10).astype(f32),),
        ),
        (
            "MLP loss 64-32-10, batch 8",
            sg.grad(mlp),
            jax.jit(jax.grad(lambda p, x, y: mlp(p, x, y, jnp))),
            (params, *batch),
        ),
        (
            "scalar polynomial, sg.grad made on every call",
            lambda x: sg.grad(poly)(x),
            jax.jit(jax.grad(poly)),
            (np.float32(0.5),),
        ),
    ]


def per_call(fn: Callable[..., Any], args: tuple, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        out = fn(*args)
    jax.block_until_ready(out)
    return (time.perf_counter() - start) / calls * 1e6


def _on_device(xs: tuple) -> tuple:
    """The arguments as JAX arrays (pytrees kept)."""
    return jax.tree_util.tree_map(jnp.asarray, xs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args()
    print("| function | inputs | sg.grad(f)(x) us | jax.jit(jax.grad(f))(x) us | ratio |")
    print("|---|---|---|---|---|")
    for name, ours, theirs, xs in cases():
        for kind, inputs in (("NumPy", xs), ("JAX", _on_device(xs))):
            for fn in (ours, theirs):
                for _ in range(50):
                    jax.block_until_ready(fn(*inputs))
            a, b = [], []
            for _ in range(args.rounds):
                a.append(per_call(ours, inputs, args.calls))
                b.append(per_call(theirs, inputs, args.calls))
            ma, mb = min(a), min(b)
            print(f"| {name} | {kind} | {ma:.1f} | {mb:.1f} | {ma / mb:.2f} |")


if __name__ == "__main__":
    main()
