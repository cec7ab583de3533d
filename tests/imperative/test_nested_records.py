"""Records of nested loops: sized per level (a sum over the nest), not multiplied down it.

The grad body of a loop runs the loops nested in its body again from their recorded inputs
(transforms/replay.py) instead of recording their stacks once per outer iteration, so 10
nested unbounded loops (64 slots per loop, 64^10 before) compile to a program of kilobytes,
and bounded loops' memory is the sum of their `max_iters`, not the product. Gradients are
checked against jax.grad of the loops unrolled in Python at the trip counts they take, and
against float64 finite differences.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

import srcgrad as sg
from srcgrad.testing import check_grads


def temp_bytes(g: Any, *args: Any) -> int:
    """XLA's temp memory of the program `g` (an sg.grad) runs at its first capacities."""
    lowered = g.lower(*args)[0]
    return jax.jit(lowered.fn).lower(*args).compile().memory_analysis().temp_size_in_bytes


def nest(
    depth: int, trips: int, np_: Any = sg, max_iters: int | None = None
) -> Callable[[Any, Any], Any]:
    """`depth` nested while loops of `trips` iterations each; the innermost updates the state.
    With `np_=jnp` the same function unrolled in Python (the twin)."""

    def level(s: Any, w: Any, d: int) -> Any:
        def body(c: Any) -> Any:
            t, i = c
            t = np_.sin(t) * w + 0.1 * t if d == depth - 1 else level(t * 0.9, w, d + 1)
            return t, i + 1.0

        if np_ is jnp:
            c = (s, 0.0)
            for _ in range(trips):
                c = body(c)
            return c[0]
        return sg.while_loop(lambda c: c[1] < trips, body, (s, 0.0), max_iters=max_iters)[0]

    return lambda x, w: np_.sum(level(x, w, 0) * w)


X, W = np.linspace(0.2, 0.6, 3), np.float64(0.8)


def test_10_nested_unbounded_loops_compile_to_kilobytes_and_match_jax() -> None:
    f, twin = nest(10, 2), nest(10, 2, jnp)
    g = sg.grad(f, (0, 1))
    assert temp_bytes(g, X, W) < 2**20  # 64^10 slots per recorded value before
    got = g(X, W)
    want = jax.grad(twin, (0, 1))(X, W)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-10)
    assert g.compilations == 1


def test_bounded_nest_records_the_sum_of_the_bounds_not_the_product() -> None:
    f = nest(3, 3, max_iters=100)
    g = sg.grad(f, (0, 1))
    # 100^3 slots of f64 per recorded value before (8 MB each); 3 x 100 slots now
    assert temp_bytes(g, X, W) < 2**18
    got = jax.jit(g)(X, W)
    want = jax.grad(nest(3, 3, jnp), (0, 1))(X, W)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-10)
    check_grads(f, (X, W), directions=1)


def loop_cond_loop(x: Any, w: Any) -> Any:
    """An outer loop whose body runs an inner loop in one branch of a cond, and reads the
    inner loop's result after it (the replayed branch's outputs feed later ops)."""

    def outer(c: Any) -> Any:
        v, i = c

        def inner(v: Any) -> Any:
            return sg.while_loop(
                lambda t: t[1] < i + 1.0,
                lambda t: (sg.sin(t[0]) * w + x * 0.5, t[1] + 1.0),
                (v, 0.0),
            )[0]

        v = sg.cond(sg.sum(v) > 0.0, inner, lambda v: v * w, v)
        return v * sg.cos(v) + 0.2, i + 1.0

    return sg.sum(sg.while_loop(lambda c: c[1] < 4.0, outer, (x, 0.0))[0] ** 2)


def loop_cond_loop_twin(x: Any, w: Any) -> Any:
    v = x
    for i in range(4):
        if np.sum(np.asarray(jax.lax.stop_gradient(v))) > 0.0:
            for _ in range(i + 1):
                v = jnp.sin(v) * w + x * 0.5
        else:
            v = v * w
        v = v * jnp.cos(v) + 0.2
    return jnp.sum(v**2)


def test_a_loop_in_a_branch_in_a_loop_is_replayed_and_matches_jax() -> None:
    for x in (np.array([0.3, 0.5]), np.array([-0.9, 0.1])):
        g = sg.grad(loop_cond_loop, (0, 1))
        sg.trace(g, x, 0.7).verify()
        got = g(x, 0.7)
        want = jax.grad(loop_cond_loop_twin, (0, 1))(x, 0.7)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-10)
        check_grads(loop_cond_loop, (x, 0.7), jax_fun=loop_cond_loop_twin, directions=1)


def test_second_order_through_three_nested_loops_reverse_and_forward_over_reverse() -> None:
    f, twin = nest(3, 2), nest(3, 2, jnp)
    g2 = sg.grad(lambda x, w: sg.grad(f, 1)(x, w))
    sg.trace(g2, X, W).verify()
    np.testing.assert_allclose(
        g2(X, W), jax.grad(lambda x, w: jax.grad(twin, 1)(x, w))(X, W), rtol=1e-9
    )
    out, tangent = sg.jvp(sg.grad(f), (X, W), (np.ones(3), 0.5))  # forward over reverse
    want_out, want_tangent = jax.jvp(jax.grad(twin), (X, W), (np.ones(3), 0.5))
    np.testing.assert_allclose(out, want_out, rtol=1e-10)
    np.testing.assert_allclose(tangent, want_tangent, rtol=1e-9)


def inner_reads_outer_values(x: Any, w: Any) -> Any:
    """The inner loop reads values the outer body computes from its carry (recorded per outer
    iteration for the replay) and the outer counter (rebuilt), with a traced trip count."""

    def outer(i: Any, v: Any) -> Any:
        a = sg.exp(-v * v) * w
        return (
            sg.fori_loop(
                0, i + 1, lambda j, u: sg.tanh(u * a + sg.astype(j, "float64")), v, max_iters=4
            )
            + a
        )

    return sg.sum(sg.fori_loop(0, 3, outer, x))


def inner_reads_outer_values_twin(x: Any, w: Any) -> Any:
    v = x
    for i in range(3):
        a = jnp.exp(-v * v) * w
        u = v
        for j in range(i + 1):
            u = jnp.tanh(u * a + float(j))
        v = u + a
    return jnp.sum(v)


def test_inner_loop_reading_outer_values_matches_jax() -> None:
    g = sg.grad(inner_reads_outer_values, (0, 1))
    sg.trace(g, X, W).verify()
    got = jax.jit(g)(X, W)
    want = jax.grad(inner_reads_outer_values_twin, (0, 1))(X, W)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-10)
    check_grads(
        inner_reads_outer_values,
        (X, W),
        jax_fun=inner_reads_outer_values_twin,
        order=2,
        directions=1,
    )
