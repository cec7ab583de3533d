"""sg.random gives jax.random's numbers for the same key: eagerly, traced (the key a traced
input) and on Tensors; typed keys are accepted; gradients flow through minval/maxval and
through arithmetic on samples, never into keys."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import srcgrad as sg
from srcgrad.base.errors import SrcgradError

KEY = np.asarray(jax.random.PRNGKey(42))
P = np.array([0.1, 0.5, 0.9, 0.0, 1.0])
LOGITS = np.random.default_rng(0).standard_normal((4, 5))


@dataclass(frozen=True)
class Case:
    """`fn(module, key)` run with module sg.random and jax.random must agree exactly."""

    name: str
    fn: Callable[[Any, Any], Any]


CASES = [
    Case("random.PRNGKey", lambda r, k: r.PRNGKey(7)),
    Case("random.key", lambda r, k: r.key_data(r.key(7)) if r is jax.random else r.key(7)),
    Case("random.split", lambda r, k: r.split(k, 3)),
    Case("random.split default", lambda r, k: r.split(k)),
    Case("random.fold_in", lambda r, k: r.fold_in(k, 11)),
    Case("random.normal", lambda r, k: r.normal(k, (2, 3))),
    Case("random.normal f32", lambda r, k: r.normal(k, (4,), jnp.float32)),
    Case("random.uniform", lambda r, k: r.uniform(k, (5,))),
    Case("random.uniform range", lambda r, k: r.uniform(k, (5,), minval=-2.0, maxval=3.5)),
    Case(
        "random.uniform f32",
        lambda r, k: r.uniform(k, (3,), jnp.float32, np.float32(-1), np.float32(0.25)),
    ),
    Case("random.bernoulli", lambda r, k: r.bernoulli(k, P)),
    Case("random.bernoulli shape", lambda r, k: r.bernoulli(k, 0.3, (2, 4))),
    Case("random.categorical", lambda r, k: r.categorical(k, LOGITS)),
    Case("random.categorical axis", lambda r, k: r.categorical(k, LOGITS, 0, (3, 5))),
    Case("random.randint", lambda r, k: r.randint(k, (6,), 0, 10)),
    Case("random.randint i32", lambda r, k: r.randint(k, (2, 2), -5, 5, jnp.int32)),
    Case("random.permutation", lambda r, k: r.permutation(k, 7)),
    Case("random.permutation array", lambda r, k: r.permutation(k, LOGITS, 1)),
    Case("random.truncated_normal", lambda r, k: r.truncated_normal(k, -1.0, 2.0, (5,))),
]


def _same(ours: Any, theirs: Any, what: str) -> None:
    """The same bits for integers and booleans; floats to 16 ulps (a program fused or
    compiled differently rounds its transcendental functions differently in the last bits;
    another key or another transform of the bits gives other numbers altogether)."""
    a, b = np.asarray(ours), np.asarray(theirs)
    assert (a.dtype, a.shape) == (b.dtype, b.shape), what
    if np.issubdtype(a.dtype, np.inexact):
        np.testing.assert_allclose(a, b, rtol=16 * np.finfo(a.dtype).eps, atol=0, err_msg=what)
    else:
        np.testing.assert_array_equal(a, b, err_msg=what)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_same_numbers_as_jax_random(case: Case) -> None:
    want = case.fn(jax.random, KEY)
    _same(case.fn(sg.random, KEY), want, f"{case.name} eager")
    _same(sg.jit(lambda k: case.fn(sg.random, k))(KEY), want, f"{case.name} traced")


def test_typed_keys_and_tensors() -> None:
    typed = jax.random.key(5)
    raw = jax.random.key_data(typed)
    _same(sg.random.normal(typed, (3,)), jax.random.normal(typed, (3,)), "typed key")
    _same(sg.random.split(typed), jax.random.split(raw), "typed key split")
    _same(sg.random.uniform(sg.tensor(raw), (2,)), jax.random.uniform(raw, (2,)), "Tensor key")


def test_loop_of_keys_in_a_trace() -> None:
    """A key carried through fori_loop, split each step, as a JAX training loop does it."""

    def ours(k: Any) -> Any:
        def body(i: Any, c: Any) -> Any:
            k, acc = c
            k, sub = sg.random.split(k)
            return k, acc + sg.random.normal(sub, (2,))

        return sg.fori_loop(0, 4, body, (k, sg.zeros((2,))))[1]

    def theirs(k: Any) -> Any:
        def body(i: Any, c: Any) -> Any:
            k, acc = c
            k, sub = jax.random.split(k)
            return k, acc + jax.random.normal(sub, (2,))

        return jax.lax.fori_loop(0, 4, body, (k, jnp.zeros((2,))))[1]

    np.testing.assert_allclose(sg.jit(ours)(KEY), theirs(KEY), rtol=1e-15)


def _uniform_loss(r: Any, lo: Any, hi: Any) -> Any:
    u = r.uniform(KEY, (4,), minval=lo, maxval=hi)
    return (u * u).sum()


def _normal_loss(r: Any, loc: Any, scale: Any) -> Any:
    return (jnp.tanh if r is jax.random else sg.tanh)(loc + scale * r.normal(KEY, (4,))).sum()


def _permutation_loss(r: Any, x: Any, w: Any) -> Any:
    return (r.permutation(KEY, x * w, 1) * LOGITS).sum()


@dataclass(frozen=True)
class GradCase:
    """`loss(module, *args)`: sg.grad with sg.random equals jax.grad with jax.random."""

    name: str
    loss: Callable[..., Any]
    args: tuple


GRAD_CASES = [
    GradCase("random.uniform", _uniform_loss, (-1.0, 2.0)),
    GradCase("random.normal loc scale", _normal_loss, (0.5, 1.5)),
    GradCase("random.permutation", _permutation_loss, (LOGITS, 0.5)),
]


@pytest.mark.parametrize("case", GRAD_CASES, ids=lambda c: c.name)
def test_gradients_through_sample_arithmetic(case: GradCase) -> None:
    """Through minval/maxval, loc + scale * sample and a shuffle, first and second order."""
    ours = sg.grad(lambda *a: case.loss(sg.random, *a), (0, 1))(*case.args)
    theirs = jax.grad(lambda *a: case.loss(jax.random, *a), (0, 1))(*case.args)
    for g, w in zip(ours, theirs):
        np.testing.assert_allclose(g, w, rtol=1e-12)
    h = sg.hessian(lambda b: case.loss(sg.random, case.args[0], b))(case.args[1])
    np.testing.assert_allclose(
        h,
        jax.hessian(lambda b: case.loss(jax.random, case.args[0], b))(case.args[1]),
        rtol=1e-10,
        atol=1e-12,
    )


def test_bad_keys_and_arguments_are_named() -> None:
    with pytest.raises(SrcgradError, match=r"random\.normal.*uint32\[2\]"):
        sg.random.normal(np.zeros(2, np.float32), (2,))
    with pytest.raises(SrcgradError, match="float dtype"):
        sg.random.normal(KEY, (2,), jnp.int32)
    with pytest.raises(SrcgradError, match="integer dtype"):
        sg.random.randint(KEY, (2,), 0, 3, jnp.float32)
    with pytest.raises(SrcgradError, match="truncated_normal"):
        sg.grad(lambda lo: sg.sum(sg.random.truncated_normal(KEY, lo, 2.0, (3,))))(-1.0)
