"""Workload 5: the gradient through a fixed-point iteration run to a tolerance.

z <- tanh(W z + x) from z = 0 until max|z_new - z| <= TOL (a few hundred iterations for a
64-dim state); loss = 0.5 |z* - target|^2, differentiated with respect to W and x through
every iteration. Peers: equinox's checkpointed and bounded while loops with the same
max_steps, and lax.fori_loop at the trip count (known in advance, which srcgrad does not need).
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import srcgrad as sg
from srcgrad.transforms.control_grad import INITIAL_CAPACITY

from .workload import Init, Pair, Variant, Workload, fresh

TOL = 1e-5


def loss_sg(
    w: Any, x: Any, target: Any, max_iters: int | None = None, checkpoints: int | None = None
) -> Any:
    """srcgrad: sg.while_loop to the tolerance (bounded by `max_iters` if given, keeping
    `checkpoints` snapshots if given)."""

    def cond(c: Any) -> Any:
        return c[1] > TOL

    def body(c: Any) -> Any:
        z_new = sg.tanh(w @ c[0] + x)
        return z_new, sg.max(sg.abs(z_new - c[0]))

    z, _ = sg.while_loop(
        cond,
        body,
        (sg.zeros(x.shape, np.float32), np.float32(1.0)),
        max_iters=max_iters,
        checkpoints=checkpoints,
    )
    return 0.5 * sg.sum(sg.square(z - target))


def loss_sg_fori(w: Any, x: Any, target: Any, trips: int) -> Any:
    """srcgrad's twin of `loss_fori`: sg.fori_loop over the same body at the known trip
    count (no convergence test): what the recorded loop costs without the stopping test."""

    def body(i: Any, c: Any) -> Any:
        z_new = sg.tanh(w @ c[0] + x)
        return z_new, sg.max(sg.abs(z_new - c[0]))

    z, _ = sg.fori_loop(0, trips, body, (sg.zeros(x.shape, np.float32), np.float32(1.0)))
    return 0.5 * sg.sum(sg.square(z - target))


def _cond_jax(c: Any) -> Any:
    return c[1] > TOL


def _body_jax(w: Any, x: Any) -> Callable[[Any], Any]:
    def body(c: Any) -> Any:
        z_new = jnp.tanh(w @ c[0] + x)
        return z_new, jnp.max(jnp.abs(z_new - c[0]))

    return body


def loss_eqx(w: Any, x: Any, target: Any, kind: str, max_steps: int) -> Any:
    """The jax.numpy twin of `loss_sg` with equinox.internal.while_loop."""
    import equinox.internal as eqxi  # the optional `bench` extra: imported when used

    init = (jnp.zeros(x.shape, np.float32), jnp.float32(1.0))
    z, _ = eqxi.while_loop(_cond_jax, _body_jax(w, x), init, max_steps=max_steps, kind=kind)
    return 0.5 * jnp.sum(jnp.square(z - target))


def loss_fori(w: Any, x: Any, target: Any, trips: int) -> Any:
    """The twin unrolled as lax.fori_loop at the known trip count (a scan under reverse mode)."""
    body = _body_jax(w, x)
    init = (jnp.zeros(x.shape, np.float32), jnp.float32(1.0))
    z, _ = lax.fori_loop(0, trips, lambda i, c: body(c), init)
    return 0.5 * jnp.sum(jnp.square(z - target))


def trip_count(w: Any, x: Any) -> int:
    """Iterations the loop takes on these inputs (a forward run)."""

    def cond(c: Any) -> Any:
        return c[1][1] > TOL

    def body(c: Any) -> Any:
        return c[0] + 1, _body_jax(w, x)(c[1])

    n, _ = jax.jit(
        lambda: lax.while_loop(cond, body, (0, (jnp.zeros(x.shape, np.float32), jnp.float32(1.0))))
    )()
    return int(n)


def _grad_jax(loss: Callable[..., Any], **kw: Any) -> Callable[..., Any]:
    f = fresh(loss)
    return jax.jit(jax.value_and_grad(lambda w, x, t: f(w, x, t, **kw), argnums=(0, 1)))


def _bounded_sg(max_steps: int) -> Callable[..., Any]:
    f = fresh(loss_sg)
    return jax.jit(sg.value_and_grad(lambda w, x, t: f(w, x, t, max_steps), argnums=(0, 1)))


def _fori_sg(trips: int) -> Callable[..., Any]:
    f = fresh(loss_sg_fori)
    return jax.jit(sg.value_and_grad(lambda w, x, t: f(w, x, t, trips), argnums=(0, 1)))


def _unbounded_sg() -> Callable[..., Any]:
    f = fresh(loss_sg)
    return sg.value_and_grad(lambda w, x, t: f(w, x, t), argnums=(0, 1))


def capacity_memory(make: Callable[[], Any], trips: int) -> Callable[[tuple], Any]:
    """Memory of the program the capacity search of `make()` (a srcgrad Transformed with one
    loop, loop_id 0) settles on: the next power of two above the trip count."""

    def memory(args: tuple) -> Any:
        caps = {0: max(INITIAL_CAPACITY, 1 << (trips - 1).bit_length())}
        lowered = make().lower(*args, capacities=caps)[0]
        return jax.jit(lowered.fn).lower(*args).compile().memory_analysis()

    return memory


def problem(quick: bool) -> tuple[int, tuple, int]:
    """The benchmark's loop: max_steps, the arguments (W, x, target) and the trip count."""
    dim, max_steps = (64, 1000) if not quick else (4, 40)
    init = Init(5)
    q, _ = np.linalg.qr(np.random.default_rng(5).standard_normal((dim, dim)))
    contraction = 0.98 if not quick else 0.6
    w = jax.device_put((contraction * q).astype(np.float32))
    args = (w, init.normal(dim, scale=0.1), init.normal(dim, scale=0.5))
    trips = trip_count(*args[:2])
    if trips >= max_steps:
        raise ValueError(
            f"the fixed-point loop takes {trips} iterations, over max_steps {max_steps}"
        )
    return max_steps, args, trips


def build(quick: bool) -> Workload:
    max_steps, args, trips = problem(quick)
    variants = [
        Variant("srcgrad max_iters", lambda: _bounded_sg(max_steps)),
        Variant("srcgrad capacity search", _unbounded_sg, capacity_memory(_unbounded_sg, trips)),
        Variant(
            "eqx checkpointed",
            lambda: _grad_jax(loss_eqx, kind="checkpointed", max_steps=max_steps),
        ),
        Variant("eqx bounded", lambda: _grad_jax(loss_eqx, kind="bounded", max_steps=max_steps)),
        Variant("jax fori_loop", lambda: _grad_jax(loss_fori, trips=trips)),
        Variant("srcgrad fori_loop", lambda: _fori_sg(trips)),
    ]
    pairs = [
        Pair(s, p, {"step": 1.0, "first gradient": 1.0} if p == "eqx checkpointed" else {})
        for s in ("srcgrad max_iters", "srcgrad capacity search")
        for p in ("eqx checkpointed", "eqx bounded", "jax fori_loop")
    ]
    pairs.append(Pair("srcgrad fori_loop", "jax fori_loop", {"step": 1.1}))
    return Workload(
        "while",
        f"fixed point z = tanh(Wz + x) to tol {TOL:g}, "
        f"dim {args[1].shape[0]}, {trips} iterations, max_steps {max_steps}",
        args,
        variants,
        pairs,
    )
