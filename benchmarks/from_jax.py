"""The gradient of a JAX fixed-point solver (lax.while_loop) through `sg.from_jax`.

The solver of the "while" workload written in plain JAX: z <- tanh(W z + x) from z = 0 until
max|z_new - z| <= TOL, loss = 0.5 |z* - target|^2, gradient with respect to W and x. jax.grad
refuses it (a while loop). Variants:

- srcgrad from_jax: `sg.value_and_grad` of `sg.from_jax(loss)`, with `max_iters` (inside
  jax.jit) and without (capacity search, called on arrays);
- srcgrad while_loop: the same loss written with sg ops (the "while" workload's), to show
  what the translation costs;
- eqx checkpointed: equinox's checkpointed while loop, same max_steps, its default number of
  checkpoints (what JAX users run);
- implicit by hand: the forward solve without a tape, and the gradient from the implicit
  function theorem (one dense linear solve with I - J^T at z*), a jax.custom_vjp;
- from_jax checkpoints=K against eqx checkpoints=K: both keep K snapshots of the state.

Run: `python -m benchmarks.from_jax [--quick] [--reps N]`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable

import jax
import jax.numpy as jnp
from jax import lax

import srcgrad as sg

from .checkpointed import loss_eqx as loss_eqx_k
from .fixed_point import TOL, _body_jax, _cond_jax, capacity_memory, loss_eqx, loss_sg, problem
from .harness import Settings, run_workload
from .report import text_table
from .workload import Pair, Variant, Workload, fresh

#: Snapshots kept by the checkpointed variants (srcgrad's and equinox's alike).
K = 16


def loss_jax(w: Any, x: Any, target: Any) -> Any:
    """The solver and loss as a JAX user writes them (lax.while_loop to the tolerance)."""
    init = (jnp.zeros(x.shape, x.dtype), jnp.asarray(1.0, x.dtype))
    z, _ = lax.while_loop(_cond_jax, _body_jax(w, x), init)
    return 0.5 * jnp.sum(jnp.square(z - target))


@jax.custom_vjp
def _solve(w: Any, x: Any) -> Any:
    init = (jnp.zeros(x.shape, x.dtype), jnp.asarray(1.0, x.dtype))
    return lax.while_loop(_cond_jax, _body_jax(w, x), init)[0]


def _solve_fwd(w: Any, x: Any) -> tuple:
    z = _solve(w, x)
    return z, (w, z)


def _solve_bwd(res: tuple, g: Any) -> tuple:
    """z = tanh(W z + x): with s = 1 - z^2 and J = diag(s) W, u = (I - J^T)^-1 g gives
    dz/dx^T g = s * u and dz/dW^T g = (s * u) z^T."""
    w, z = res
    s = 1.0 - z * z
    u = jnp.linalg.solve(jnp.eye(z.shape[0], dtype=z.dtype) - (s[:, None] * w).T, g)
    su = s * u
    return jnp.outer(su, z), su


_solve.defvjp(_solve_fwd, _solve_bwd)


def loss_implicit(w: Any, x: Any, target: Any) -> Any:
    """The loss with the implicit-function-theorem gradient written by hand."""
    return 0.5 * jnp.sum(jnp.square(_solve(w, x) - target))


def _from_jax(max_iters: int | None, checkpoints: int | None = None) -> Callable[..., Any]:
    f = sg.from_jax(fresh(loss_jax), max_iters=max_iters, checkpoints=checkpoints)
    vg = sg.value_and_grad(lambda w, x, t: f(w, x, t), argnums=(0, 1))
    return jax.jit(vg) if max_iters is not None else vg


def _native(max_steps: int) -> Callable[..., Any]:
    f = fresh(loss_sg)
    return jax.jit(sg.value_and_grad(lambda w, x, t: f(w, x, t, max_steps), argnums=(0, 1)))


def _jax(loss: Callable[..., Any], **kw: Any) -> Callable[..., Any]:
    f = fresh(loss)
    return jax.jit(jax.value_and_grad(lambda w, x, t: f(w, x, t, **kw), argnums=(0, 1)))


def build(quick: bool) -> Workload:
    max_steps, args, trips = problem(quick)
    variants = [
        Variant("from_jax max_iters", lambda: _from_jax(max_steps)),
        Variant(
            "from_jax capacity search",
            lambda: _from_jax(None),
            capacity_memory(lambda: _from_jax(None), trips),
        ),
        Variant("srcgrad while_loop", lambda: _native(max_steps)),
        Variant(
            "eqx checkpointed", lambda: _jax(loss_eqx, kind="checkpointed", max_steps=max_steps)
        ),
        Variant("implicit by hand", lambda: _jax(loss_implicit)),
        Variant(f"from_jax checkpoints={K}", lambda: _from_jax(max_steps, K)),
        Variant(
            f"eqx checkpoints={K}", lambda: _jax(loss_eqx_k, max_steps=max_steps, checkpoints=K)
        ),
    ]
    pairs = [
        Pair(s, p)
        for s in ("from_jax max_iters", "from_jax capacity search")
        for p in ("eqx checkpointed", "implicit by hand", "srcgrad while_loop")
    ]
    pairs.append(Pair(f"from_jax checkpoints={K}", f"eqx checkpoints={K}"))
    return Workload(
        "from_jax",
        f"JAX fixed point z = tanh(Wz + x) to tol {TOL:g} through "
        f"sg.from_jax, dim {args[1].shape[0]}, {trips} iterations, max_steps {max_steps}",
        args,
        variants,
        pairs,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.from_jax", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="tiny sizes, 1-2 repetitions")
    ap.add_argument("--reps", type=int, help="steady-state samples per variant (default 21)")
    args = ap.parse_args(argv)
    s = Settings(reps=2, first_reps=1, sample_s=0.0) if args.quick else Settings()
    if args.reps:
        s.reps = args.reps
    w = build(args.quick)
    print(w.title, file=sys.stderr)
    print(text_table(run_workload(w, s)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
