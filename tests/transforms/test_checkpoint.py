"""sg.checkpoint (remat) and checkpointed loops (`checkpoints=k`)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import srcgrad as sg
from support.util import assert_tree_close, normal_arrays

arr = normal_arrays(np.random.default_rng(5))


def _stack_lengths(fn: Any, *args: Any) -> set[int]:
    """Leading sizes of the per-iteration records (`...@STACK`) of fn's program."""
    prog = sg.trace(fn, *args)
    return {
        v.shape[0]
        for blk in prog.blocks
        for op in blk.ops
        for v in op.outputs
        if v.name.endswith("@STACK")
    }


def test_checkpoint_gradient_matches_jax_and_recomputes() -> None:
    def f(x: Any, w: Any) -> Any:
        y = sg.checkpoint(lambda a, b: sg.sin(a * b) * sg.tanh(a))(x, w)
        return sg.sum(y**2)

    def twin(x: Any, w: Any) -> Any:
        return jnp.sum((jnp.sin(x * w) * jnp.tanh(x)) ** 2)

    x, w = arr(4), arr(4)
    assert_tree_close(sg.grad(f, argnums=(0, 1))(x, w), jax.grad(twin, argnums=(0, 1))(x, w))
    src = sg.source(sg.grad(f), x, w)
    assert "lax.optimization_barrier" in src and src.count("lax.sin(") == 2
    assert_tree_close(
        sg.grad(lambda x: sg.sum(sg.grad(f)(x, w) ** 2))(x),
        jax.grad(lambda x: jnp.sum(jax.grad(twin)(x, w) ** 2))(x),
    )


def test_checkpoint_pytrees_and_repeated_inputs() -> None:
    def f(x: Any) -> Any:
        out = sg.checkpoint(lambda p, q: {"s": p["a"] * q, "t": sg.exp(q)})({"a": x}, x)
        return sg.sum(out["s"] + out["t"])

    x = arr(3)
    np.testing.assert_allclose(sg.grad(f)(x), 2 * x + np.exp(x), rtol=1e-12)


def newton_like(np_: Any, **kw: Any) -> Any:
    def f(x: Any, w: Any) -> Any:
        body = lambda s: s * 1.1 + np_.sin(s) * w
        return sg.while_loop(lambda s: s < 5.0, body, x, **kw)

    return f


@pytest.mark.parametrize("k", [1, 3, 16, 500])
def test_checkpointed_while_matches_the_plain_loop(k: int) -> None:
    f = newton_like(sg, max_iters=200, checkpoints=k)
    plain = newton_like(sg, max_iters=200)
    for x, w in ((0.5, 0.3), (0.01, 0.05), (6.0, 0.3)):  # the last runs no iteration
        np.testing.assert_allclose(sg.jit(f)(x, w), sg.jit(plain)(x, w), rtol=1e-13)
        assert_tree_close(sg.grad(f, argnums=(0, 1))(x, w), sg.grad(plain, argnums=(0, 1))(x, w))
    # the same gradient as JAX's reverse mode through the unrolled twin (a fori-style loop)
    fx = lambda x, w: lax.fori_loop(
        0, 200, lambda i, s: jnp.where(s < 5.0, s * 1.1 + jnp.sin(s) * w, s), x
    )
    np.testing.assert_allclose(
        sg.grad(f, argnums=1)(0.01, 0.05), jax.grad(fx, argnums=1)(0.01, 0.05), rtol=1e-10
    )


def fixed_point(max_iters: int | None, k: int | None) -> Any:
    """z <- tanh(W z + x) until max|z_new - z| <= 1e-6, the error carried (as the benchmark's)."""

    def f(w: Any, x: Any) -> Any:
        def body(c: Any) -> Any:
            z_new = sg.tanh(w @ c[0] + x)
            return z_new, sg.max(sg.abs(z_new - c[0]))

        z, _ = sg.while_loop(
            lambda c: c[1] > 1e-6,
            body,
            (x * 0.0, np.float64(1.0)),
            max_iters=max_iters,
            checkpoints=k,
        )
        return sg.sum(sg.sin(z))

    return f


def _temp_bytes(fn: Any, *args: Any) -> int:
    return jax.jit(fn).lower(*args).compile().memory_analysis().temp_size_in_bytes


def test_checkpointed_loop_keeps_k_snapshots_whatever_the_trip_count() -> None:
    w, x = 0.6 * np.eye(8) + arr(8, 8, scale=0.05), arr(8)

    def twin(w: Any, x: Any, n: int) -> Any:
        z = lax.fori_loop(0, n, lambda i, z: jnp.tanh(w @ z + x), x * 0.0)
        return jnp.sum(jnp.sin(z))

    z, n = np.zeros(8), 0
    while True:
        z_new = np.tanh(w @ z + x)
        n, err, z = n + 1, np.max(np.abs(z_new - z)), z_new
        if err <= 1e-6:
            break
    for k in (2, 5, 64):
        assert_tree_close(
            sg.grad(fixed_point(None, k), argnums=(0, 1))(w, x),
            jax.grad(twin, argnums=(0, 1))(w, x, n),
        )
    # no per-iteration records, and temp memory does not grow with max_iters
    g = lambda m: sg.grad(fixed_point(m, 4), argnums=(0, 1))
    assert _stack_lengths(g(100), w, x) == set()
    assert _temp_bytes(g(100), w, x) == _temp_bytes(g(100_000), w, x)
    plain = lambda m: sg.grad(fixed_point(m, None), argnums=(0, 1))
    assert _temp_bytes(plain(100_000), w, x) > 100 * _temp_bytes(g(100_000), w, x)


def test_checkpointed_second_order() -> None:
    f = newton_like(sg, max_iters=100, checkpoints=5)
    plain = newton_like(sg, max_iters=100)
    d2 = sg.grad(sg.grad(f, argnums=1), argnums=1)
    np.testing.assert_allclose(
        d2(0.01, 0.05), sg.grad(sg.grad(plain, argnums=1), argnums=1)(0.01, 0.05), rtol=1e-10
    )


def test_checkpointed_unbounded_loop_needs_no_capacity() -> None:
    f = sg.grad(newton_like(sg, checkpoints=4), argnums=(0, 1))
    plain = sg.grad(newton_like(sg), argnums=(0, 1))
    for x, w in ((0.5, 0.3), (0.0001, 0.01)):  # about 10, then more than 64 iterations
        assert_tree_close(f(x, w), plain(x, w))
    assert f.compilations == 1 and plain.compilations >= 2


def test_checkpointed_loops_inside_jax_jit_and_vmap() -> None:
    f = newton_like(sg, max_iters=120, checkpoints=8)
    plain = newton_like(sg, max_iters=120)
    g = jax.jit(sg.grad(f, argnums=1))
    np.testing.assert_allclose(g(0.01, 0.05), sg.grad(plain, argnums=1)(0.01, 0.05), rtol=1e-12)
    ws = np.array([0.05, 0.2, 0.7])
    got = jax.vmap(sg.grad(f, argnums=1), in_axes=(None, 0))(0.01, ws)
    want = jax.vmap(sg.grad(plain, argnums=1), in_axes=(None, 0))(0.01, ws)
    assert_tree_close(got, want)
    # without max_iters too: the snapshots do not depend on the trip count (w = 0.7 never
    # stops: s settles near 2.85, where only max_iters ends the loop)
    g = sg.grad(newton_like(sg, checkpoints=3), argnums=1)
    np.testing.assert_allclose(
        jax.jit(g)(0.01, 0.05), sg.grad(plain, argnums=1)(0.01, 0.05), rtol=1e-12
    )
    assert_tree_close(jax.vmap(g, in_axes=(None, 0))(0.01, ws[:2]), want[:2])


@pytest.mark.parametrize("static", [True, False])
def test_checkpointed_fori_loop(static: bool) -> None:
    w = arr(3, 3, scale=0.4)

    def f(h: Any, w: Any, n: Any) -> Any:
        hi = 37 if static else n
        return sg.sum(
            sg.fori_loop(
                0,
                hi,
                lambda i, h: sg.tanh(h @ w) + 0.01 * i,
                h,
                max_iters=None if static else 40,
                checkpoints=6,
            )
        )

    def twin(h: Any, w: Any) -> Any:
        return jnp.sum(lax.fori_loop(0, 37, lambda i, h: jnp.tanh(h @ w) + 0.01 * i, h))

    h = arr(3)
    n = np.int32(37)
    np.testing.assert_allclose(sg.jit(f)(h, w, n), twin(h, w), rtol=1e-12)
    assert_tree_close(sg.grad(f, argnums=(0, 1))(h, w, n), jax.grad(twin, argnums=(0, 1))(h, w))


@pytest.mark.parametrize("bad", [0, -2, 2.5, True])
def test_checkpoints_must_be_a_positive_int(bad: Any) -> None:
    with pytest.raises(sg.SrcgradError, match="checkpoints must be a positive int"):
        sg.jit(newton_like(sg, max_iters=10, checkpoints=bad))(0.5, 0.3)


def test_checkpointed_loop_nested_in_a_loop_and_a_branch() -> None:
    def f(k: int | None) -> Any:
        def g(x: Any, w: Any) -> Any:
            def outer(i: Any, s: Any) -> Any:
                inner = sg.while_loop(
                    lambda c: c[0] < 6,
                    lambda c: (c[0] + 1, sg.sin(c[1] * w) + s),
                    (i * 0, s),
                    max_iters=10,
                    checkpoints=k,
                )[1]
                return sg.cond(i % 2 == 0, lambda v: v * w, lambda v: sg.cos(v), inner)

            return sg.sum(sg.fori_loop(0, 3, outer, x))

        return g

    def twin(x: Any, w: Any) -> Any:
        def outer(i: Any, s: Any) -> Any:
            inner = lax.fori_loop(0, 6, lambda j, c: jnp.sin(c * w) + s, s)
            return lax.cond(i % 2 == 0, lambda v: v * w, lambda v: jnp.cos(v), inner)

        return jnp.sum(lax.fori_loop(0, 3, outer, x))

    x, w = arr(3), arr(3)
    want = jax.grad(twin, argnums=(0, 1))(x, w)
    for k in (None, 2, 3):
        assert_tree_close(sg.grad(f(k), argnums=(0, 1))(x, w), want)
