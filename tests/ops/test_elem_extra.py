"""fmod, sinc, fmax/fmin, nan_to_num, arrays built from traced values (array/asarray, eye,
tri/tril/triu, diag/diagonal, linspace, r_/c_) and average: the cases the op tables
(test_ops.py, test_op_grads.py) do not draw, against jax.numpy, jax.grad and float64 finite
differences.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import srcgrad as sg
from srcgrad.testing import check_grads

SPECIALS = np.array([0.0, -1.5, 2.25, np.nan, np.inf, -np.inf, 0.5])


@pytest.mark.parametrize("order", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("x", [0.0, 0.375, -1.25])
def test_sinc_derivatives_match_jax_at_zero_and_elsewhere(order: int, x: float) -> None:
    ours, theirs = sg.sinc, jnp.sinc
    for _ in range(order):
        ours, theirs = sg.grad(ours), jax.grad(theirs)
    np.testing.assert_allclose(ours(x), theirs(x), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ours(np.float32(x)), theirs(np.float32(x)), rtol=1e-5, atol=1e-5)


def test_sinc_of_integers_and_finite_differences() -> None:
    ints = np.array([-2, 0, 1, 3], np.int32)
    got, want = sg.sinc(ints), jnp.sinc(ints)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6)
    check_grads(sg.sinc, (np.array([0.0, 0.3, -2.2]),), order=2, jax_fun=jnp.sinc)


@pytest.mark.parametrize("name", ["fmax", "fmin"])
def test_fmax_fmin_ignore_nan_as_numpy(name: str) -> None:
    a = np.array([1.0, np.nan, np.nan, 2.0, -0.0, np.inf])
    b = np.array([np.nan, 3.0, np.nan, 2.0, 0.0, 1.0])
    for x, y in ((a, b), (b, a), (a, 0.5), (np.float32(0.5), b.astype(np.float32))):
        got = getattr(sg, name)(x, y)
        want = getattr(jnp, name)(x, y)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got, getattr(np, name)(x, y).astype(got.dtype))
    ints = getattr(sg, name)(np.array([1, 5], np.int32), 3)
    np.testing.assert_array_equal(ints, getattr(jnp, name)(np.array([1, 5], np.int32), 3))
    f = lambda m: lambda x, y: m.sum(getattr(m, name)(x, y) * np.arange(1.0, 7.0))
    for got, want in zip(sg.grad(f(sg), (0, 1))(a, b), jax.grad(f(jnp), (0, 1))(a, b)):
        np.testing.assert_array_equal(
            got, want
        )  # NaNs and ties: the gradient goes where jnp's does


@pytest.mark.parametrize(
    "kw",
    [{}, {"nan": 1.5}, {"posinf": 9.0, "neginf": -9.0}, {"nan": -1, "posinf": 2, "neginf": None}],
)
def test_nan_to_num_values_and_gradient(kw: dict) -> None:
    for dt in (np.float32, np.float64):
        x = SPECIALS.astype(dt)
        got, want = sg.nan_to_num(x, **kw), jnp.nan_to_num(x, **kw)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    got = sg.grad(lambda x: sg.sum(sg.nan_to_num(x, **kw) * 3.0))(SPECIALS)
    np.testing.assert_array_equal(
        got, jax.grad(lambda x: jnp.sum(jnp.nan_to_num(x, **kw) * 3.0))(SPECIALS)
    )
    ints = np.array([1, -2], np.int32)
    np.testing.assert_array_equal(sg.nan_to_num(ints), ints)


def test_fmod_sign_zero_divisor_and_gradient() -> None:
    x, y = np.array([5.5, -5.5, 5.5, -5.5]), np.array([2.0, 2.0, -2.0, -2.0])
    np.testing.assert_array_equal(sg.fmod(x, y), np.fmod(x, y))
    ints = (np.array([7, -7, 3]), np.array([3, 3, 0]))
    np.testing.assert_array_equal(sg.fmod(*ints), jnp.fmod(*ints))
    check_grads(sg.fmod, (x, y), order=2, jax_fun=jnp.fmod)


# ---------------------------------------------------------------- arrays from traced values


@pytest.mark.parametrize(
    "make",
    [
        lambda m, a, b: [a, 1.0],
        lambda m, a, b: [[a, b], [2, a]],
        lambda m, a, b: (a, np.float64(1.0)),
        lambda m, a, b: [a, np.int32(2)],
        lambda m, a, b: [True, b],
        lambda m, a, b: [[a], [b]],
    ],
    ids=[
        "[f32, 1.0]",
        "[[f32, i32], [2, f32]]",
        "(f32, np.float64)",
        "[f32, np.int32]",
        "[True, i32]",
        "[[f32], [i32]]",
    ],
)
def test_array_promotes_as_jnp_array(make: Any) -> None:
    a, b = np.float32(1.25), np.int32(3)
    got = sg.jit(lambda a, b: sg.array(make(sg, a, b)))(a, b)
    want = jnp.array(make(jnp, a, b))
    assert (got.dtype, got.shape) == (want.dtype, want.shape)
    np.testing.assert_array_equal(got, want)


def test_array_eager_ndmin_dtype_and_gradients() -> None:
    got = sg.array([[1, 2], [3, 4]], dtype=np.float32, ndmin=3)
    assert isinstance(got, jax.Array) and got.shape == (1, 2, 2) and got.dtype == np.float32
    np.testing.assert_array_equal(sg.asarray(np.arange(3.0)), np.arange(3.0))
    assert sg.array([]).shape == (0,) and sg.array([]).dtype == jnp.array([]).dtype

    def f(m: Any) -> Any:
        return lambda x, y: m.sum(m.array([[x[0] * y, 2.0], [y, x[1] ** 2]]) ** 2)

    x, y = np.array([0.5, -1.5]), 0.75
    for got, want in zip(sg.grad(f(sg), (0, 1))(x, y), jax.grad(f(jnp), (0, 1))(x, y)):
        np.testing.assert_allclose(got, want)
    check_grads(f(sg), (x, y), order=2, jax_fun=f(jnp))
    with pytest.raises(sg.ShapeError):
        sg.jit(lambda x: sg.array([x, x[:1]]))(x)


def test_eye_tri_and_diagonals() -> None:
    np.testing.assert_array_equal(
        sg.eye(3, 4, k=-1, dtype=np.int32), jnp.eye(3, 4, k=-1, dtype=np.int32)
    )
    np.testing.assert_array_equal(sg.identity(2), jnp.identity(2))
    assert sg.tri(2).dtype == jnp.tri(2).dtype
    m = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_array_equal(sg.tril(m, -1), jnp.tril(m, -1))
    np.testing.assert_array_equal(sg.diagonal(m, 1, 2, 0), jnp.diagonal(m, 1, 2, 0))
    np.testing.assert_array_equal(sg.diag(np.arange(3.0), -2), jnp.diag(np.arange(3.0), -2))
    np.testing.assert_array_equal(sg.diag(m[0], 5), jnp.diag(m[0], 5))
    check_grads(
        lambda v: sg.diag(v, 1)[1:, :3] @ sg.triu(sg.diag(v) + 1.0),
        (np.array([1.0, -2.0, 0.5]),),
        order=2,
        jax_fun=lambda v: jnp.diag(v, 1)[1:, :3] @ jnp.triu(jnp.diag(v) + 1.0),
    )
    with pytest.raises(sg.ShapeError, match="rank >= 2"):
        sg.tril(np.ones(3))
    with pytest.raises(sg.ShapeError, match="1-D or 2-D"):
        sg.diag(m)
    with pytest.raises(sg.ShapeError, match="cannot be the same"):
        sg.diagonal(m, 0, 1, -2)


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"num": 4, "endpoint": False, "retstep": True},
        {"num": 3, "axis": -1},
        {"num": 1, "endpoint": False, "retstep": True},
    ],
)
def test_linspace_gradient_in_start_and_stop(kw: dict) -> None:
    start, stop = np.array([0.5, -1.0]), np.array([[2.0], [3.5]])

    def f(m: Any) -> Any:
        def fn(a: Any, b: Any) -> Any:
            out = m.linspace(a, b, **kw)
            if kw.get("retstep"):
                return m.sum(m.sin(out[0])) + out[1].sum() * 3.0
            return m.sum(m.sin(out))

        return fn

    np.testing.assert_allclose(sg.jit(f(sg))(start, stop), f(jnp)(start, stop))
    for got, want in zip(
        sg.grad(f(sg), (0, 1))(start, stop), jax.grad(f(jnp), (0, 1))(start, stop)
    ):
        np.testing.assert_allclose(got, want)
    check_grads(f(sg), (start, stop), order=2, jax_fun=f(jnp))


def test_r_and_c_eager_traced_and_errors() -> None:
    a, b = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    for got, want in (
        (sg.r_[a, 0:3, 9], jnp.r_[a, 0:3, 9]),
        (sg.c_[a, b], jnp.c_[a, b]),
        (sg.r_["-1,2,0", a, b], jnp.r_["-1,2,0", a, b]),
        (sg.r_[0:1:5j], jnp.r_[0:1:5j]),
        (sg.c_[np.ones((2, 2)), a], jnp.c_[np.ones((2, 2)), a]),
    ):
        assert isinstance(got, jax.Array) and got.dtype == want.dtype
        np.testing.assert_allclose(got, want)
    f = lambda m: lambda x: m.sum(m.c_[x, 2.0 * x] @ m.r_[x, -1.0, 0.0:1.0:2j][:2])
    np.testing.assert_allclose(sg.grad(f(sg))(a), jax.grad(f(jnp))(a))
    with pytest.raises(sg.ShapeError, match="static"):
        sg.jit(lambda n: sg.r_[0:n])(np.int32(3))
    with pytest.raises(sg.ShapeError, match="directive"):
        sg.r_["x", a]


def test_average_weights_and_errors() -> None:
    a, w = np.arange(12.0).reshape(3, 4), np.array([1.0, 0.5, 2.0])
    got = sg.average(a, axis=0, weights=w, returned=True)
    want = jnp.average(a, axis=0, weights=w, returned=True)
    for g, v in zip(got, want):
        np.testing.assert_allclose(g, v)

    def f(m: Any) -> Any:
        return lambda a, w: m.sum(m.average(a, axis=0, weights=w) ** 2)

    for g, v in zip(sg.grad(f(sg), (0, 1))(a, w), jax.grad(f(jnp), (0, 1))(a, w)):
        np.testing.assert_allclose(g, v)
    check_grads(f(sg), (a, w), order=2, jax_fun=f(jnp))
    with pytest.raises(sg.ShapeError, match="axis must be given"):
        sg.average(a, weights=w)
    with pytest.raises(sg.ShapeError, match="do not match"):
        sg.average(a, axis=1, weights=w)
