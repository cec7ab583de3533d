"""JAX habits fail helpfully: a traced value handed to jax.numpy / jax.nn / NumPy raises a
TraceError naming the srcgrad op to use and the user's line; NumPy operators, reductions and
the functions with an sg twin run the srcgrad op instead."""

from __future__ import annotations

import inspect
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import srcgrad as sg
from test_ops import assert_same

X = np.linspace(-1.0, 1.0, 6).reshape(2, 3)


def _line(fn: Callable[..., Any]) -> str:
    return f"test_habits.py:{inspect.getsourcelines(fn)[1]}"


CALLS = [
    (lambda x: jnp.tanh(x), "jnp.tanh", "use sg.tanh instead of jnp.tanh"),
    (lambda x: jax.nn.relu(x), "jax.nn.relu", "use sg.relu instead of jax.nn.relu"),
    (lambda x: jax.nn.softmax(x, axis=-1), "jax.nn.softmax", "use sg.softmax instead"),
    (lambda x: jnp.sum(x, axis=0), "jnp.sum", "use sg.sum instead of jnp.sum"),
    (lambda x: jnp.dot(x, x.T), "jnp.dot", "use sg.dot instead of jnp.dot"),
    (lambda x: jnp.amax(x), "jnp.amax", "use sg.amax instead of jnp.amax"),
    (lambda x: np.tanh(x), "np.tanh", "use sg.tanh instead of np.tanh"),
    (lambda x: np.cumsum(x), "np.cumsum", "use sg.cumsum instead of np.cumsum"),
    (lambda x: np.median(x), "np.median", "use sg.median instead of np.median"),
    (
        lambda x: np.bitwise_xor(x, x),
        "np.bitwise_xor",
        "use sg.bitwise_xor instead of np.bitwise_xor",
    ),
    (lambda x: np.fix(x), "np.fix", "srcgrad has no fix yet"),
    (lambda x: np.asarray(x), "np.asarray", "use sg.asarray instead of np.asarray"),
    (lambda x: jnp.asarray(x), "jnp.asarray", "use sg.asarray instead of jnp.asarray"),
]


@pytest.mark.parametrize("fn,callee,hint", CALLS, ids=[c[1] for c in CALLS])
def test_jax_and_numpy_functions_name_the_srcgrad_op(fn: Callable, callee: str, hint: str) -> None:
    with pytest.raises(sg.TraceError) as info:
        sg.grad(lambda x: sg.sum(fn(x)))(X)
    msg = str(info.value)
    assert f"was passed to {callee}" in msg and hint in msg, msg
    assert _line(fn) in msg, msg
    assert "not a valid JAX type" not in msg


def test_numpy_scalar_types_say_how_to_cast() -> None:
    def f(x: Any) -> Any:
        y = np.int64(x)  # the only call on its line (Python 3.10 finds the call by its line)
        return sg.sum(y)

    with pytest.raises(sg.TraceError, match=r"use v\.astype\(np\.int64\)"):
        sg.jit(f)(X)


def test_clip_takes_numpys_keywords() -> None:
    want = np.clip(X, a_min=-0.5, a_max=0.5)
    assert_same(sg.clip(X, a_min=-0.5, a_max=0.5), want, "value")
    assert_same(sg.jit(lambda x: x.clip(a_min=-0.5, a_max=0.5))(X), want, "value")
    assert_same(
        sg.grad(lambda x: sg.sum(sg.clip(x, a_max=0.5) ** 2))(X),
        jax.grad(lambda x: jnp.sum(jnp.clip(x, max=0.5) ** 2))(jnp.asarray(X)),
        "gradient",
    )
    with pytest.raises(sg.SrcgradError, match=r"min= and a_min= are the same bound"):
        sg.clip(X, 0.0, a_min=1.0)


def test_the_call_is_found_on_a_multi_line_statement() -> None:
    def f(x: Any) -> Any:
        return sg.sum(
            jnp.cos(x) + 1.0,  # the trailing comma keeps the call on two lines
        )

    with pytest.raises(
        sg.TraceError,
        match=r"use sg\.cos instead of jnp\.cos.*test_habits\.py:"
        + str(inspect.getsourcelines(f)[1] + 2),
    ):
        sg.grad(f)(X)


NUMPY_RUNS = [
    (lambda x: np.sum(x), lambda x: jnp.sum(x)),
    (lambda x: np.sum(x, axis=1, keepdims=True), lambda x: jnp.sum(x, axis=1, keepdims=True)),
    (lambda x: np.mean(x, axis=0), lambda x: jnp.mean(x, axis=0)),
    (lambda x: np.max(x, axis=-1), lambda x: jnp.max(x, axis=-1)),
    (lambda x: np.prod(x), lambda x: jnp.prod(x)),
    (lambda x: np.concatenate([x, x], axis=1), lambda x: jnp.concatenate([x, x], axis=1)),
    (lambda x: np.ones(3) + x, lambda x: jnp.ones(3) + x),
    (lambda x: np.ones((3, 2)) @ x, lambda x: jnp.ones((3, 2)) @ x),
    (lambda x: np.float32(2.0) * x, lambda x: np.float32(2.0) * x),
]


@pytest.mark.parametrize("ours,ref", NUMPY_RUNS)
def test_numpy_operators_and_reductions_run_the_srcgrad_op(ours: Callable, ref: Callable) -> None:
    assert_same(sg.jit(ours)(X), ref(jnp.asarray(X)), "value")
    g = sg.grad(lambda x: sg.sum(ours(x) * 1.5))(X)
    assert_same(g, jax.grad(lambda x: jnp.sum(ref(x) * 1.5))(jnp.asarray(X)), "gradient")
