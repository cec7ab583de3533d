"""One function with Python control flow on traced values through every entry point that
traces: each converts it as `sg.grad` does (check_grads, the checkpoint and custom-rule
functions used to fail with "no Python truth value").

`f` has a Python `if` and a data-dependent Python `while`; at a given point its branch and
trip count are fixed, so its derivatives there are those of `reference` (the same
computation with that branch and count), which jax.grad / jax.jvp differentiate.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import srcgrad as sg
from srcgrad.testing import check_grads, settings

X = np.array([0.3, 0.5, -0.2])
V = np.array([1.0, -0.5, 2.0])


def f(x):
    if sg.sum(x) > 0:
        y = sg.sin(x) * x
    else:
        y = x * x * x
    while sg.sum(y * y) < 4.0:
        y = y * 1.5
    return sg.sum(y)


def reference(x0: np.ndarray):
    """f near x0, as jax.numpy: the branch and the trip count f takes at x0."""
    positive = x0.sum() > 0
    y = np.sin(x0) * x0 if positive else x0**3
    trips = 0
    while np.sum(y * y) < 4.0:
        y, trips = y * 1.5, trips + 1

    def g(x):
        y = jnp.sin(x) * x if positive else x**3
        return jnp.sum(y * 1.5**trips)

    return g


G = reference(X)


def _close(got, want) -> None:
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("x", [X, -X], ids=["if", "else"])
def test_grad_and_value_and_grad(x: np.ndarray) -> None:
    g = reference(x)
    _close(sg.grad(f)(x), jax.grad(g)(x))
    value, grad = sg.value_and_grad(f)(x)
    _close(value, g(x))
    _close(grad, jax.grad(g)(x))


def test_vjp_and_jit() -> None:
    out, pullback = sg.vjp(f, X)
    _close(out, G(X))
    _close(pullback(2.0)[0], 2.0 * jax.grad(G)(X))
    _close(sg.jit(f)(X), G(X))


def test_trace_and_source_hold_the_converted_ops() -> None:
    ops = {op.type for block in sg.trace(f, X).blocks for op in block.ops}
    assert {"cond", "while"} <= ops, ops
    src = sg.source(f, X)
    assert "lax.cond" in src and "lax.while_loop" in src


def test_forward_mode() -> None:
    primal, tangent = sg.jvp(f, (X,), (V,))
    want_p, want_t = jax.jvp(G, (X,), (V,))
    _close(primal, want_p)
    _close(tangent, want_t)
    out, lin = sg.linearize(f, X)
    _close(out, want_p)
    _close(lin(V), want_t)


def test_jacobians_hessian_hvp() -> None:
    _close(sg.jacfwd(f)(X), jax.jacfwd(G)(X))
    _close(sg.jacrev(f)(X), jax.jacrev(G)(X))
    _close(sg.hessian(f)(X), jax.hessian(G)(X))
    _close(sg.hvp(f, (X,), (V,)), jax.jvp(jax.grad(G), (X,), (V,))[1])


def test_check_grads_converts_like_grad() -> None:
    check_grads(f, (X,), order=2, jax_fun=G)


def test_checkpoint_converts_its_function() -> None:
    _close(sg.grad(lambda x: sg.checkpoint(f)(x) * 2.0)(X), 2.0 * jax.grad(G)(X))


def test_checkpointed_while_converts_its_body() -> None:
    def h(x):
        def body(y):
            if sg.sum(y) > 0:
                return y * 1.5
            return y * 0.5

        return sg.sum(sg.while_loop(lambda y: sg.sum(y * y) < 4.0, body, x, checkpoints=2))

    x = np.array([0.3, 0.5])
    y, trips = x, 0
    while np.sum(y * y) < 4.0:
        y, trips = y * 1.5, trips + 1
    _close(sg.grad(h)(x), np.full(2, 1.5**trips))


@sg.custom_vjp
def scaled(x):
    if sg.sum(x) > 0:
        return x * 2.0
    return x * 3.0


def _scaled_fwd(x):
    if sg.sum(x) > 0:
        return x * 2.0, x
    return x * 3.0, x


def _scaled_bwd(x, g):
    if sg.sum(x) > 0:
        return (g * 5.0,)  # not fwd's derivative: the rule is what the gradient must follow
    return (g * 7.0,)


scaled.defvjp(_scaled_fwd, _scaled_bwd)


@sg.custom_jvp
def shifted(x):
    if sg.sum(x) > 0:
        return x + 1.0
    return x - 1.0


@shifted.defjvp
def _shifted_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    if sg.sum(x) > 0:
        return x + 1.0, t * 4.0
    return x - 1.0, t * 6.0


@pytest.mark.parametrize(
    "x,vjp_scale,jvp_scale", [(X, 5.0, 4.0), (-X, 7.0, 6.0)], ids=["if", "else"]
)
def test_custom_rules_convert_fun_and_rules(x, vjp_scale, jvp_scale) -> None:
    _close(sg.grad(lambda x: sg.sum(scaled(x)))(x), np.full(3, vjp_scale))
    _close(sg.grad(lambda x: sg.sum(shifted(x)))(x), np.full(3, jvp_scale))
    _close(sg.jvp(lambda x: sg.sum(shifted(x)), (x,), (V,))[1], jvp_scale * V.sum())


@settings(max_examples=3)
@given(st.sampled_from([X, -X, np.array([1.0, 2.0, 0.5])]))
def test_a_property_test_over_check_grads(x: np.ndarray) -> None:
    check_grads(f, (x,), jax_fun=reference(x))
