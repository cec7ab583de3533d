"""A value read two levels up inside nested control flow (an inner `cond`'s branch reading
the function's `x` and the outer branch's operand, which is `x` too) takes its gradient
once in every order of differentiation: the second-order gradient through two nested
`cond`s was twice jax.grad's (found by the fuzzer), because a substitution made two of the
grad `cond`'s captured inputs one value and each position took the whole gradient."""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import srcgrad as sg

X = np.array([-1.0, 0.5, -0.8])  # sum(x) < 0: the false branches run
V = np.array([0.3, -0.7, 1.1])


def _cond_in_cond(x: Any) -> Any:
    return sg.sum(
        sg.cond(
            sg.sum(x) > 0,
            lambda a: a,
            lambda a: sg.cond(sg.sum(x) > 0, lambda u: u, lambda u: x * u, a),
            x,
        )
    )


def _loop_in_cond(x: Any) -> Any:
    return sg.sum(
        sg.cond(
            sg.sum(x) > 0,
            lambda a: a,
            lambda a: sg.fori_loop(0, 2, lambda i, u: sg.sin(u) * x + a, a),
            x,
        )
    )


def _cond_in_loop(x: Any) -> Any:
    body = lambda i, u: sg.cond(sg.sum(x) > 0, lambda a: a, lambda a: sg.sin(a) * x, u)
    return sg.sum(sg.fori_loop(0, 2, body, x))


def _twin(name: str) -> Callable[[Any], Any]:
    """The same function in jax.numpy, on the branches these inputs take."""

    def cond_in_cond(x: Any) -> Any:
        return jnp.sum(x * x)

    def loop_in_cond(x: Any) -> Any:
        u = x
        for _ in range(2):
            u = jnp.sin(u) * x + x
        return jnp.sum(u)

    def cond_in_loop(x: Any) -> Any:
        u = x
        for _ in range(2):
            u = jnp.sin(u) * x
        return jnp.sum(u)

    return {
        "cond_in_cond": cond_in_cond,
        "loop_in_cond": loop_in_cond,
        "cond_in_loop": cond_in_loop,
    }[name]


CASES = {
    "cond_in_cond": _cond_in_cond,
    "loop_in_cond": _loop_in_cond,
    "cond_in_loop": _cond_in_loop,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_second_order_counts_a_twice_captured_value_once(name: str) -> None:
    f, fj = CASES[name], _twin(name)
    np.testing.assert_allclose(sg.grad(f)(X), jax.grad(fj)(X), rtol=1e-12)
    hvp = sg.grad(lambda x: sg.sum(sg.grad(f)(x) * V))(X)
    want = jax.grad(lambda x: jnp.sum(jax.grad(fj)(x) * V))(X)
    np.testing.assert_allclose(hvp, want, rtol=1e-10, atol=1e-12)
