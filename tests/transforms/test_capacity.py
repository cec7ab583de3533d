"""The capacity search for loops without max_iters, and the jax.jit rule.

A loop whose trip count depends on the data records one stack slot per iteration. Called on
concrete arrays, sg.grad runs with a capacity, sees the overflow and reruns with the next
power of two (compiled once per capacity); inside jax.jit the trip count is unknown, so an
unbounded loop is an error that asks for max_iters.
"""

from __future__ import annotations

import inspect
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import srcgrad as sg


def damped(x: Any, n: Any) -> Any:
    """n iterations of s <- sin(s) * 0.5 + x, with n a (float) input: an unbounded loop."""

    def body(c: Any) -> Any:
        s, k = c
        return sg.sin(s) * 0.5 + x, k + 1.0

    return sg.while_loop(lambda c: c[1] < n, body, (x, 0.0))[0]


DAMPED_LINE = inspect.getsourcelines(damped)[1] + next(
    i for i, line in enumerate(inspect.getsourcelines(damped)[0]) if "sg.while_loop" in line
)


def damped_twin(x: Any, n: int) -> Any:
    return jax.lax.fori_loop(0, n, lambda i, s: jnp.sin(s) * 0.5 + x, x)


def bounded(x: Any, n: Any) -> Any:
    def body(c: Any) -> Any:
        s, k = c
        return sg.sin(s) * 0.5 + x, k + 1.0

    return sg.while_loop(lambda c: c[1] < n, body, (x, 0.0), max_iters=16)[0]


def test_3_then_3000_iterations_compile_one_program_per_capacity() -> None:
    g = sg.grad(damped)
    sg.trace(g, 0.3, 3.0).verify()
    for n, compiled in ((3, 1), (3000, 2), (3, 2), (3000, 2)):
        np.testing.assert_allclose(g(0.3, float(n)), jax.grad(damped_twin)(0.3, n), rtol=1e-10)
        assert g.compilations == compiled


def test_capacity_grows_by_powers_of_two() -> None:
    g = sg.grad(damped)
    for n, compiled in ((64, 1), (65, 2), (128, 2), (129, 3), (100, 3)):
        np.testing.assert_allclose(g(0.3, float(n)), jax.grad(damped_twin)(0.3, n), rtol=1e-10)
        assert g.compilations == compiled, n


def test_unbounded_loop_under_jax_jit_names_the_loop_and_asks_for_max_iters() -> None:
    with pytest.raises(sg.SrcgradError, match="max_iters") as err:
        jax.jit(sg.grad(damped))(0.3, 3.0)
    assert f"test_capacity.py:{DAMPED_LINE}" in str(err.value)
    with pytest.raises(sg.SrcgradError, match="max_iters"):
        jax.vmap(sg.grad(damped), (0, None))(jnp.array([0.3, 0.4]), 3.0)


def test_max_iters_works_inside_jax_jit_and_vmap() -> None:
    g = jax.jit(sg.grad(bounded))
    for n in (0, 3, 16):
        np.testing.assert_allclose(g(0.3, float(n)), jax.grad(damped_twin)(0.3, n), rtol=1e-10)
    np.testing.assert_allclose(g(0.3, 40.0), jax.grad(damped_twin)(0.3, 16), rtol=1e-10)
    xs = jnp.array([0.3, -0.2])
    got = jax.vmap(sg.grad(bounded), (0, None))(xs, 5.0)
    np.testing.assert_allclose(got, jax.vmap(jax.grad(damped_twin), (0, None))(xs, 5), rtol=1e-10)
    sg.trace(sg.grad(bounded), 0.3, 3.0).verify()


def test_nested_unbounded_loops_grow_their_capacities_independently() -> None:
    def f(x: Any, m: Any) -> Any:
        def outer(c: Any) -> Any:
            v, i = c
            v = sg.while_loop(
                lambda t: t[1] < i * 30.0, lambda t: (sg.sin(t[0]) * 0.9 + x, t[1] + 1.0), (v, 0.0)
            )[0]
            return v, i + 1.0

        return sg.while_loop(lambda c: c[1] < m, outer, (x, 1.0))[0]

    def twin(x: Any, m: int) -> Any:
        v = x
        for i in range(1, m):
            v = jax.lax.fori_loop(0, i * 30, lambda j, v: jnp.sin(v) * 0.9 + x, v)
        return v

    g = sg.grad(f)
    sg.trace(g, 0.2, 4.0).verify()
    np.testing.assert_allclose(g(0.2, 3.0), jax.grad(twin)(0.2, 3), rtol=1e-10)
    assert g.compilations == 1
    np.testing.assert_allclose(g(0.2, 5.0), jax.grad(twin)(0.2, 5), rtol=1e-10)
    assert g.compilations == 2
    np.testing.assert_allclose(g(0.2, 3.0), jax.grad(twin)(0.2, 3), rtol=1e-10)
    assert g.compilations == 2


def test_unbounded_loop_inside_a_cond_is_sized_too() -> None:
    def f(x: Any, n: Any) -> Any:
        return sg.cond(x > 0.0, lambda x: damped(x, n), lambda x: x * x, x)

    g = sg.grad(f)
    sg.trace(g, 0.3, 100.0).verify()
    np.testing.assert_allclose(g(0.3, 100.0), jax.grad(damped_twin)(0.3, 100), rtol=1e-10)
    np.testing.assert_allclose(g(-0.3, 100.0), -0.6, rtol=1e-12)


def test_second_order_through_an_unbounded_loop_that_overflows() -> None:
    g2 = sg.grad(sg.grad(damped))
    sg.trace(g2, 0.3, 100.0).verify()
    np.testing.assert_allclose(g2(0.3, 100.0), jax.grad(jax.grad(damped_twin))(0.3, 100), rtol=1e-9)
    assert g2.compilations == 2
