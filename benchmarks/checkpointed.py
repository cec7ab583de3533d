"""Workload 5b: the fixed-point loop of workload 5 with `checkpoints=k`, k in {4, 16, 64}.

srcgrad's `sg.while_loop(..., max_iters=max_steps, checkpoints=k)` against equinox's
checkpointed while loop with the same `max_steps` and `checkpoints=k`: temp memory (the
snapshots and the records of one segment) and step time at equal k.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

import srcgrad as sg

from .fixed_point import _body_jax, _cond_jax, loss_sg, trip_count
from .workload import Init, Pair, Variant, Workload, fresh

CHECKPOINTS = (4, 16, 64)


def loss_eqx(w: Any, x: Any, target: Any, max_steps: int, checkpoints: int) -> Any:
    """The jax.numpy twin with equinox.internal.while_loop(kind="checkpointed")."""
    import equinox.internal as eqxi  # the optional `bench` extra: imported when used

    init = (jnp.zeros(x.shape, np.float32), jnp.float32(1.0))
    z, _ = eqxi.while_loop(
        _cond_jax,
        _body_jax(w, x),
        init,
        max_steps=max_steps,
        kind="checkpointed",
        checkpoints=checkpoints,
    )
    return 0.5 * jnp.sum(jnp.square(z - target))


def _sg(max_steps: int, k: int) -> Callable[..., Any]:
    f = fresh(loss_sg)
    return jax.jit(sg.value_and_grad(lambda w, x, t: f(w, x, t, max_steps, k), argnums=(0, 1)))


def _eqx(max_steps: int, k: int) -> Callable[..., Any]:
    f = fresh(loss_eqx)
    return jax.jit(jax.value_and_grad(lambda w, x, t: f(w, x, t, max_steps, k), argnums=(0, 1)))


def build(quick: bool) -> Workload:
    dim, max_steps = (64, 1000) if not quick else (4, 40)
    init = Init(5)
    q, _ = np.linalg.qr(np.random.default_rng(5).standard_normal((dim, dim)))
    contraction = 0.98 if not quick else 0.6
    w = jax.device_put((contraction * q).astype(np.float32))
    args = (w, init.normal(dim, scale=0.1), init.normal(dim, scale=0.5))
    trips = trip_count(*args[:2])
    ks = CHECKPOINTS if not quick else (4,)
    variants = []
    pairs = []
    for k in ks:
        variants += [
            Variant(f"srcgrad checkpoints={k}", lambda k=k: _sg(max_steps, k)),
            Variant(f"eqx checkpoints={k}", lambda k=k: _eqx(max_steps, k)),
        ]
        pairs.append(
            Pair(
                f"srcgrad checkpoints={k}",
                f"eqx checkpoints={k}",
                {"step": 1.0, "temp memory": 1.1},
            )
        )
    return Workload(
        "checkpointed",
        f"the while workload's fixed point (dim {dim}, {trips} "
        f"iterations, max_steps {max_steps}) with checkpoints k in {list(ks)}",
        args,
        variants,
        pairs,
    )
