"""Forward mode: `sg.hessian` against `jax.hessian`, and a loop derivative forward vs reverse.

- "hessian": the 256 x 256 Hessian of a softmax cross-entropy MLP loss in its 256
  parameters (one flat vector: an 8-16-7 MLP, batch 32), `jax.jit(sg.hessian(loss))` against
  `jax.jit(jax.hessian(loss))`. Both are forward over reverse, batched over the basis.
- "forward_loop": d loss / d s through the fixed-point loop of the "while" workload with its
  input scaled by s (z <- tanh(W z + s x) to a tolerance): srcgrad's forward mode
  (`sg.jacfwd(loss, 3)`, tangents carried through the loop, no records) against its reverse
  mode (`sg.grad(loss, 3)`, which records every iteration) and against `jax.jacfwd`.

    python -m benchmarks.hessian [--quick] [--reps N] [--only hessian|forward_loop]
    (or as part of `python -m benchmarks`: --only hessian --only forward_loop)
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import srcgrad as sg

from .fixed_point import TOL, trip_count
from .harness import Settings, run_workload
from .report import text_table
from .workload import Init, Pair, Variant, Workload, fresh

IN, HIDDEN, CLASSES = 8, 16, 7
N_PARAMS = IN * HIDDEN + HIDDEN + HIDDEN * CLASSES  # 256


def _unpack(theta: Any, reshape: Any) -> tuple[Any, Any, Any]:
    a, b = IN * HIDDEN, IN * HIDDEN + HIDDEN
    return reshape(theta[:a], (IN, HIDDEN)), theta[a:b], reshape(theta[b:], (HIDDEN, CLASSES))


def mlp_sg(theta: Any, x: Any, y: Any) -> Any:
    """srcgrad: mean softmax cross-entropy of a tanh MLP with flat parameters."""
    w1, b1, w2 = _unpack(theta, sg.reshape)
    return -sg.mean(sg.sum(sg.log_softmax(sg.tanh(x @ w1 + b1) @ w2, axis=-1) * y, axis=-1))


def mlp_jax(theta: Any, x: Any, y: Any) -> Any:
    """The jax.numpy twin of `mlp_sg`."""
    w1, b1, w2 = _unpack(theta, jnp.reshape)
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(jnp.tanh(x @ w1 + b1) @ w2, axis=-1) * y, axis=-1))


def build_hessian(quick: bool) -> Workload:
    init = Init(7)
    batch = 32 if not quick else 4
    theta = init.normal(N_PARAMS, scale=0.3)
    args = (theta, init.normal(batch, IN), init.one_hot(batch, CLASSES))
    variants = [
        Variant("srcgrad", lambda: jax.jit(sg.hessian(fresh(mlp_sg)))),
        Variant("jax", lambda: jax.jit(jax.hessian(fresh(mlp_jax)))),
    ]
    return Workload(
        "hessian",
        f"Hessian of an MLP loss in its {N_PARAMS} parameters "
        f"({IN}-{HIDDEN}-{CLASSES}, batch {batch}), forward over reverse",
        args,
        variants,
        [Pair("srcgrad", "jax", {"step": 1.05})],
    )


def loop_sg(w: Any, x: Any, target: Any, s: Any, max_iters: int) -> Any:
    """srcgrad: the fixed point of z <- tanh(W z + s x), reached to TOL."""

    def body(c: Any) -> Any:
        z_new = sg.tanh(w @ c[0] + s * x)
        return z_new, sg.max(sg.abs(z_new - c[0]))

    z, _ = sg.while_loop(
        lambda c: c[1] > TOL,
        body,
        (sg.zeros(x.shape, np.float32), np.float32(1.0)),
        max_iters=max_iters,
    )
    return 0.5 * sg.sum(sg.square(z - target))


def loop_jax(w: Any, x: Any, target: Any, s: Any) -> Any:
    """The jax.numpy twin (lax.while_loop: forward mode only in JAX)."""

    def body(c: Any) -> Any:
        z_new = jnp.tanh(w @ c[0] + s * x)
        return z_new, jnp.max(jnp.abs(z_new - c[0]))

    z, _ = lax.while_loop(
        lambda c: c[1] > TOL, body, (jnp.zeros(x.shape, np.float32), jnp.float32(1.0))
    )
    return 0.5 * jnp.sum(jnp.square(z - target))


def build_forward_loop(quick: bool) -> Workload:
    dim, max_iters = (64, 1000) if not quick else (4, 40)
    init = Init(5)
    q, _ = np.linalg.qr(np.random.default_rng(5).standard_normal((dim, dim)))
    w = jax.device_put(((0.98 if not quick else 0.6) * q).astype(np.float32))
    args = (
        w,
        init.normal(dim, scale=0.1),
        init.normal(dim, scale=0.5),
        jax.device_put(np.float32(1.0)),
    )
    trips = trip_count(*args[:2])

    def ours(transform: Any) -> Any:
        f = fresh(loop_sg)
        return jax.jit(transform(lambda w, x, t, s: f(w, x, t, s, max_iters), 3))

    variants = [
        Variant("sg.jacfwd", lambda: ours(sg.jacfwd)),
        Variant("sg.grad", lambda: ours(sg.grad)),
        Variant("jax.jacfwd", lambda: jax.jit(jax.jacfwd(fresh(loop_jax), 3))),
    ]
    return Workload(
        "forward_loop",
        f"d loss / d s through a fixed-point while loop (dim {dim}, "
        f"{trips} iterations, max_iters {max_iters}): forward vs reverse mode",
        args,
        variants,
        [Pair("sg.jacfwd", "sg.grad"), Pair("sg.jacfwd", "jax.jacfwd")],
        rtol=1e-3,
    )


WORKLOADS = {"hessian": build_hessian, "forward_loop": build_forward_loop}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.hessian", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="tiny sizes, 2 repetitions")
    ap.add_argument("--reps", type=int, help="steady-state samples per variant (default 21)")
    ap.add_argument("--only", choices=list(WORKLOADS), help="run one of the two workloads")
    args = ap.parse_args(argv)
    settings = Settings(reps=2, first_reps=1, sample_s=0.0) if args.quick else Settings()
    if args.reps:
        settings.reps = args.reps
    rows = []
    for name, build in WORKLOADS.items():
        if args.only not in (None, name):
            continue
        w = build(args.quick)
        print(f"{name}: {w.title}", file=sys.stderr, flush=True)
        rows += run_workload(w, settings)
    print(text_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
