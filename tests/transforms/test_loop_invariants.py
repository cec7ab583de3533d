"""Loop-invariant values in a loop body: computed once before the loop, and read (not recorded
every iteration) by the gradient, as the same value computed before the loop by hand."""

from __future__ import annotations

import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import srcgrad as sg
from srcgrad.testing import check_grads

RNG = np.random.default_rng(3)
X, A = np.array([0.3, 0.4, 0.1]), np.array([0.2, -0.1, 0.05])
M = RNG.standard_normal((3, 3)) + 3.0 * np.eye(3)


def _stacks(src: str) -> list[str]:
    """The record stacks of an emitted program, as `name: shape`."""
    return sorted(re.findall(r"^    (\w+)_stack_init = lax\.full\(\((\d+(?:, \d+)*)\)", src, re.M))


def in_body(x: Any, a: Any) -> Any:
    def body(c: Any) -> Any:
        ea = sg.exp(a)  # the same every iteration
        return c * 0.9 + sg.sin(c) * ea

    return sg.sum(sg.while_loop(lambda c: sg.sum(c) < 7.0, body, x, max_iters=60) ** 2)


def hoisted_by_hand(x: Any, a: Any) -> Any:
    ea = sg.exp(a)
    return sg.sum(
        sg.while_loop(
            lambda c: sg.sum(c) < 7.0, lambda c: c * 0.9 + sg.sin(c) * ea, x, max_iters=60
        )
        ** 2
    )


def _trips(x: np.ndarray, a: np.ndarray) -> int:
    c, n = x, 0
    while np.sum(c) < 7.0:
        c, n = c * 0.9 + np.sin(c) * np.exp(a), n + 1
    return n


def unrolled_jnp(x: Any, a: Any, trips: int) -> Any:
    c = x
    for _ in range(trips):
        c = c * 0.9 + jnp.sin(c) * jnp.exp(a)
    return jnp.sum(c**2)


def test_an_invariant_value_gets_no_record_stack() -> None:
    src = sg.source(sg.grad(in_body, (0, 1)), X, A)
    stacks = _stacks(src)
    assert stacks and not [s for s in stacks if s[0].startswith("exp")], stacks
    assert stacks == _stacks(sg.source(sg.grad(hoisted_by_hand, (0, 1)), X, A))
    assert src.count("lax.exp(") == 1  # once, before the loop


def test_gradient_with_an_invariant_value_matches_jax_and_finite_differences() -> None:
    trips = _trips(X, A)
    assert trips > 3
    got = sg.grad(in_body, (0, 1))(X, A)
    want = jax.grad(lambda x, a: unrolled_jnp(x, a, trips), (0, 1))(X, A)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
    check_grads(in_body, (X, A), order=2)


def solve_in_body(x: Any, m: Any, b: Any) -> Any:
    def body(i: Any, c: Any) -> Any:
        return c * 0.5 + sg.linalg.solve(m, b) * sg.tanh(c)  # solve of arrays from outside

    return sg.sum(sg.fori_loop(0, 6, body, x) ** 2)


def solve_in_body_jnp(x: Any, m: Any, b: Any) -> Any:
    def body(i: Any, c: Any) -> Any:
        return c * 0.5 + jnp.linalg.solve(m, b) * jnp.tanh(c)

    return jnp.sum(lax.fori_loop(0, 6, body, x) ** 2)


def test_a_solve_of_outer_arrays_is_solved_once_and_not_recorded() -> None:
    src = sg.source(sg.grad(solve_in_body, (0, 1, 2)), X, M, A)
    assert not [s for s in _stacks(src) if "solve" in s[0]], _stacks(src)
    got = sg.grad(solve_in_body, (0, 1, 2))(X, M, A)
    want = jax.grad(solve_in_body_jnp, (0, 1, 2))(X, M, A)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
    check_grads(solve_in_body, (X, M, A), jax_fun=solve_in_body_jnp)


def test_a_value_that_changes_in_the_loop_is_still_recorded() -> None:
    def f(x: Any, a: Any) -> Any:
        def body(i: Any, c: Any) -> Any:
            return c * 0.9 + sg.sin(c) * sg.exp(a * sg.astype(i, a.dtype))  # varies with i

        return sg.sum(sg.fori_loop(0, 5, body, x))

    def f_jnp(x: Any, a: Any) -> Any:
        return jnp.sum(lax.fori_loop(0, 5, lambda i, c: c * 0.9 + jnp.sin(c) * jnp.exp(a * i), x))

    assert [s for s in _stacks(sg.source(sg.grad(f, (0, 1)), X, A)) if s[0].startswith("exp")]
    check_grads(f, (X, A), jax_fun=f_jnp)


def test_one_invariance_rule_keeps_effects_barriers_and_carried_work_in_the_loop() -> None:
    """The rule both the tracer and the emitter use (ir.analysis.loop_invariant_ops): a
    transpose of an outer array may leave the loop; a print (an effect: once per iteration),
    an optimization barrier (it orders work inside its block) and work on the carried value
    stay. The emitted body still holds the barrier and the print."""
    from srcgrad.ir.analysis import loop_invariant_ops
    from srcgrad.ops.remat import barrier

    def f(x: Any, w: Any) -> Any:
        def body(i: Any, c: Any) -> Any:
            wt = w.T
            sg.debug.print("w = {w}", w=w)
            return c @ wt + sg.sum(barrier(w))

        return sg.sum(sg.fori_loop(0, 3, body, x))

    x, w = np.ones((2, 3), np.float32), np.ones((3, 3), np.float32)
    loop = next(op for op in sg.trace(f, x, w).blocks[0].ops if op.type == "while")
    body = loop.attrs["body"]
    moved = loop_invariant_ops(body.ops, body.params)
    assert [op.type for op in moved if op.inputs] == ["transpose"]  # (and the constant 1)
    src = sg.source(sg.jit(f), x, w)
    body_src = src[src.index("def body_") :]
    assert "optimization_barrier" in body_src and "debug.print" in body_src
