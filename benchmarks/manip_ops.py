"""Gradient step time of the array-manipulation ops against jax.grad of jnp's, side by side.

    python -m benchmarks.manip_ops [--reps N] [--only NAME]

Each row times `grad(sum(op(x) * w))` compiled by srcgrad and by jax.jit(jax.grad(...)) on
the same arrays, interleaved (benchmarks.harness.interleaved), and prints the medians and the
median of the per-round srcgrad/jax ratios.
"""

from __future__ import annotations

import argparse
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

import srcgrad as sg

from .harness import interleaved

Op = tuple[Callable[[Any], Any], Callable[[Any], Any], tuple[int, ...]]

OPS: dict[str, Op] = {
    "sort (256, 1024) axis -1": (lambda x: sg.sort(x), lambda x: jnp.sort(x), (256, 1024)),
    "cumsum (256, 1024) axis 1": (
        lambda x: sg.cumsum(x, 1),
        lambda x: jnp.cumsum(x, 1),
        (256, 1024),
    ),
    "cumprod (256, 1024) axis 1": (
        lambda x: sg.cumprod(x, 1),
        lambda x: jnp.cumprod(x, 1),
        (256, 1024),
    ),
    "cummax (256, 1024) axis 1": (
        lambda x: sg.cummax(x, 1),
        lambda x: jax.lax.cummax(x, 1),
        (256, 1024),
    ),
    "pad reflect 16 (512, 512)": (
        lambda x: sg.pad(x, 16, "reflect"),
        lambda x: jnp.pad(x, 16, "reflect"),
        (512, 512),
    ),
    "roll (7, -3) (512, 512)": (
        lambda x: sg.roll(x, (7, -3), (0, 1)),
        lambda x: jnp.roll(x, (7, -3), (0, 1)),
        (512, 512),
    ),
    "repeat 3 axis 0 (512, 512)": (
        lambda x: sg.repeat(x, 3, 0),
        lambda x: jnp.repeat(x, 3, 0),
        (512, 512),
    ),
    "tile (2, 3) (256, 256)": (
        lambda x: sg.tile(x, (2, 3)),
        lambda x: jnp.tile(x, (2, 3)),
        (256, 256),
    ),
    "kron (32, 32) x itself": (lambda x: sg.kron(x, x), lambda x: jnp.kron(x, x), (32, 32)),
    "tensordot axes 2 (16, 32, 64)": (
        lambda x: sg.tensordot(x, x, ((1, 2), (1, 2))),
        lambda x: jnp.tensordot(x, x, ((1, 2), (1, 2))),
        (16, 32, 64),
    ),
}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.manip_ops", description=__doc__)
    ap.add_argument("--reps", type=int, default=11)
    ap.add_argument("--sample-s", type=float, default=0.05)
    ap.add_argument("--only", help="run the ops whose name starts with this")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"{'op':32} {'srcgrad ms':>11} {'jax ms':>9} {'ratio':>7}")
    for name, (ours, ref, shape) in OPS.items():
        if args.only and not name.startswith(args.only):
            continue
        x = jnp.asarray(rng.uniform(0.5, 1.5, shape), jnp.float32)
        out_shape = jax.eval_shape(ref, x).shape
        w = jnp.asarray(rng.standard_normal(out_shape), jnp.float32)
        g_sg = sg.grad(lambda v, w, f=ours: sg.sum(f(v) * w))
        g_jax = jax.jit(jax.grad(lambda v, w, f=ref: jnp.sum(f(v) * w)))
        np.testing.assert_allclose(g_sg(x, w), g_jax(x, w), rtol=2e-3, atol=2e-3)
        samples = interleaved(
            {"srcgrad": lambda: g_sg(x, w), "jax": lambda: g_jax(x, w)}, args.reps, args.sample_s
        )
        ratio = float(np.median(np.divide(samples["srcgrad"], samples["jax"])))
        print(
            f"{name:32} {np.median(samples['srcgrad']) * 1e3:11.3f} "
            f"{np.median(samples['jax']) * 1e3:9.3f} {ratio:7.2f}"
        )


if __name__ == "__main__":
    main()
