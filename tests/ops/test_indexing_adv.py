"""Advanced indexing and `x.at[...]` updates against jax.numpy (forward) and jax.grad.

Index forms: Python lists, several integer arrays at once (NumPy's broadcasting and result
axis placement, "advanced indices separated by a slice go first"), concrete bool masks,
traced index arrays (in and out of range). Updates: set/add/multiply/min/max/get with the
same forms, duplicate indices and ties included; gradients w.r.t. `x` and the values.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import srcgrad as sg
from srcgrad.testing import check_grads

from support.util import sliced

X = np.arange(4 * 5 * 6, dtype=np.float64).reshape(4, 5, 6) / 7.0 - 8.0
A = np.array  # a NumPy index array (jax.numpy takes no bare list as the whole index)

#: getitem forms with concrete indices: (label, index for srcgrad, the same index for jnp).
STATIC = [
    ("x[[0, 1, 2], :, :]", ([0, 1, 2], slice(None), slice(None)), (A([0, 1, 2]),)),
    ("x[3, 2:, [1, 3]]", (3, slice(2, None), [1, 3]), None),
    ("x[[0, 2], [1, 3]]", ([0, 2], [1, 3]), None),
    ("x[:, [0, 2], [1, 3]]", (slice(None), [0, 2], [1, 3]), None),
    ("x[[0, 2], :, [1, 3]]", ([0, 2], slice(None), [1, 3]), None),
    ("x[[[0], [2]], [1, 3, 4]]", ([[0], [2]], [1, 3, 4]), None),
    ("x[None, [0, 2], None, [1, 3]]", (None, [0, 2], None, [1, 3]), None),
    ("x[..., [0, -1]]", (Ellipsis, [0, -1]), None),
    ("x[1, [0, 2], ::-2]", (1, [0, 2], slice(None, None, -2)), None),
    ("x[0, [1, 2], [[3], [4]]]", (0, [1, 2], [[3], [4]]), None),
    ("x[[1], None, 2, ...]", ([1], None, 2, Ellipsis), None),
    ("x[[-1, 0, -1]] repeated", [-1, 0, -1], (A([-1, 0, -1]),)),
    ("x[[]] empty", A([], int), None),
    ("x[mask0]", A([True, False, True, True]), None),
    ("x[:, mask1, 1]", (slice(None), np.arange(5) % 2 == 0, 1), None),
    ("x[mask01]", np.add.outer(np.arange(4), np.arange(5)) % 3 == 0, None),
    ("x[1:, mask2d12]", (slice(1, None), np.add.outer(np.arange(5), np.arange(6)) % 4 == 1), None),
]


@pytest.mark.parametrize("label,index,jindex", sliced(STATIC, 2, unpack=True))
def test_static_advanced_index_matches_jax(label: str, index: Any, jindex: Any) -> None:
    jindex = index if jindex is None else jindex
    ours = sg.jit(lambda x: x[index])(X)
    want = jnp.asarray(X)[jindex]
    assert ours.shape == want.shape and ours.dtype == want.dtype, label
    np.testing.assert_array_equal(ours, want)
    np.testing.assert_array_equal(ours, X[index if not isinstance(index, list) else A(index)])
    ct = np.random.default_rng(0).standard_normal(want.shape)
    got = sg.grad(lambda x: sg.sum(x[index] * ct))(X)
    np.testing.assert_allclose(got, jax.grad(lambda x: jnp.sum(x[jindex] * ct))(X))


def _listed(x: Any, i: Any, j: Any) -> Any:
    """x[[j[1], 2, i[0, 0]]]: a list of traced scalars and a number (jnp: an array of them)."""
    items = [j[1], 2, i[0, 0]]
    return x[items] if isinstance(x, sg.Variable) else x[jnp.array(items)]


TRACED: list[tuple[str, Callable[..., Any]]] = [
    ("x[i, :, j]", lambda x, i, j: x[i, :, j]),
    ("x[i, j]", lambda x, i, j: x[i, j]),
    ("x[:, j, i]", lambda x, i, j: x[:, j, i]),
    ("x[1, i, [0, 1]]", lambda x, i, j: x[1, i, [0, 1]]),
    ("x[j[0], 1:, j]", lambda x, i, j: x[j[0], 1:, j]),
    ("x[[j[1], 2, i[0, 0]]]", _listed),
]
I_IN = np.array([[0, -1], [2, 3]], np.int32)
I_OUT = np.array([[0, -1], [2, 7]], np.int32)  # 7 is out of range: clamped, no gradient
J = np.array([1, -5], np.int64)


@pytest.mark.parametrize("i", [I_IN, I_OUT], ids=["in range", "out of range"])
@pytest.mark.parametrize("label,fn", TRACED, ids=[t[0] for t in TRACED])
def test_traced_advanced_index_matches_jax(label: str, fn: Callable, i: np.ndarray) -> None:
    ours = sg.jit(fn)(X, i, J)
    want = jax.jit(fn)(X, i, J)
    assert ours.shape == want.shape, label
    np.testing.assert_array_equal(ours, want)
    got = sg.grad(lambda x, i, j: sg.sum(fn(x, i, j) ** 2))(X, i, J)
    np.testing.assert_allclose(got, jax.grad(lambda x, i, j: jnp.sum(fn(x, i, j) ** 2))(X, i, J))


def test_advanced_index_second_order_and_finite_differences() -> None:
    def f(x: Any) -> Any:
        return x[[0, 2, 2], :, [1, 3, 1]] ** 3

    def jf(x: Any) -> Any:
        return x[A([0, 2, 2]), :, A([1, 3, 1])] ** 3

    check_grads(f, (X[:3, :2, :4],), order=2, jax_fun=jf)


def test_index_errors_are_clear() -> None:
    with pytest.raises(sg.ShapeError, match="out of bounds for axis 1 of size 5"):
        sg.jit(lambda x: x[:, [0, 5]])(X)
    with pytest.raises(sg.ShapeError, match="traced bool mask"):
        sg.jit(lambda x: x[x > 0])(X)
    with pytest.raises(sg.ShapeError, match="integers or bools"):
        sg.jit(lambda x: x[np.array([0.5])])(X)
    with pytest.raises(sg.ShapeError, match="single ellipsis"):
        sg.jit(lambda x: x[..., 0, ...])(X)


# ---------------------------------------------------------------- x.at[...]

#: Which of two colliding writes (x.at[i].set with repeated i) a GPU keeps is unspecified,
#: and differs between programs (srcgrad's and jax.numpy's, even JAX's value and jax.grad):
#: there only the gradient's agreement with srcgrad's own value is checked.
ON_CPU = jax.default_backend() == "cpu"


def _self_consistent(fn: Callable[..., Any], *args: Any) -> None:
    """The gradient of `fn` agrees with finite differences of its own value."""
    check_grads(fn, args, directions=2)


M = np.array(
    [
        [3.0, 1.0, 4.0, 1.0, 5.0],
        [9.0, 2.0, 6.0, 5.0, 3.0],
        [5.0, 8.0, 9.0, 7.0, 9.0],
        [3.0, 2.0, 3.0, 8.0, 4.0],
    ]
)
#: (label, srcgrad index, jnp index, unique): updates at repeated indices and ties included.
AT_INDICES = [
    ("[1]", 1, 1, True),
    ("[[0, 2], :3]", ([0, 2], slice(None, 3)), (A([0, 2]), slice(None, 3)), True),
    ("[1, [0, 0, 3]] repeated", (1, [0, 0, 3]), (1, A([0, 0, 3])), False),
    (
        "[[3, 3, 0], 1:4] repeated rows",
        ([3, 3, 0], slice(1, 4)),
        (A([3, 3, 0]), slice(1, 4)),
        False,
    ),
    ("[[1, 2], [[4], [0]]]", ([1, 2], [[4], [0]]), (A([1, 2]), A([[4], [0]])), True),
    ("[mask]", M > 4.5, M > 4.5, True),
    ("[..., ::2]", (Ellipsis, slice(None, None, 2)), (Ellipsis, slice(None, None, 2)), True),
]
KINDS = ["set", "add", "multiply", "min", "max"]


def _values(index: Any, scalar: bool) -> np.ndarray:
    """Update values on M's grid of small integers, so that min/max meet ties."""
    shape = np.shape(M[index if not isinstance(index, list) else A(index)])
    if scalar:
        return np.asarray(4.0)
    return (np.arange(int(np.prod(shape))) * 5 % 9 + 1.0).reshape(shape)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("label,index,jindex,unique", AT_INDICES, ids=[a[0] for a in AT_INDICES])
def test_at_update_matches_jax(
    label: str, index: Any, jindex: Any, unique: bool, kind: str
) -> None:
    for scalar in (False, True):
        u = _values(jindex, scalar)
        if kind == "set" and not unique and not ON_CPU:
            _self_consistent(lambda x, u: x.at[index].set(u), M, u)
            continue
        ours = sg.jit(lambda x, u: getattr(x.at[index], kind)(u))(M, u)
        want = getattr(jnp.asarray(M).at[jindex], kind)(u)
        np.testing.assert_array_equal(ours, want, err_msg=f"{label} {kind}")
        ct = np.random.default_rng(1).standard_normal(M.shape)
        argnums = (0, 1) if kind != "multiply" or unique else (0,)
        kw = {"unique_indices": True} if kind == "multiply" and unique else {}
        got = sg.grad(lambda x, u: sg.sum(getattr(x.at[index], kind)(u, **kw) * ct), argnums)(M, u)
        ref = jax.jit(
            jax.grad(lambda x, u: jnp.sum(getattr(x.at[jindex], kind)(u, **kw) * ct), argnums)
        )(M, u)
        for g, w in zip(got, ref):
            np.testing.assert_allclose(g, w, err_msg=f"{label} {kind} scalar={scalar}")


@pytest.mark.parametrize("kind", KINDS)
def test_at_traced_indices_match_jax(kind: str) -> None:
    """Traced index arrays: repeated, negative and out of range (those updates are dropped)."""
    i = np.array([2, -1, 2, 9, -7], np.int32)
    u = np.array([[7.0, 1.0], [2.0, 2.0], [9.0, 0.5], [4.0, 4.0], [1.0, 3.0]])
    ct = np.random.default_rng(2).standard_normal(M.shape)
    if kind == "set" and not ON_CPU:
        # (the indices are constants here: the in-range ones)
        _self_consistent(lambda x, u: x.at[i[:3], 1:3].set(u), M, u[:3])
        return

    def ours(x: Any, u: Any, i: Any) -> Any:
        return sg.sum(getattr(x.at[i, 1:3], kind)(u) * ct)

    def theirs(x: Any, u: Any, i: Any) -> Any:
        return jnp.sum(getattr(x.at[i, 1:3], kind)(u) * ct)

    np.testing.assert_allclose(sg.jit(ours)(M, u, i), jax.jit(theirs)(M, u, i))
    argnums = (0,) if kind == "multiply" else (0, 1)
    got = sg.grad(ours, argnums)(M, u, i)
    for g, w in zip(got, jax.grad(theirs, argnums)(M, u, i)):
        np.testing.assert_allclose(g, w, err_msg=kind)
    j = np.int32(3)
    np.testing.assert_allclose(
        sg.grad(lambda x, j: sg.sum(getattr(x.at[j], kind)(2.5) * ct))(M, j),
        jax.grad(lambda x, j: jnp.sum(getattr(x.at[j], kind)(2.5) * ct))(M, j),
    )


@pytest.mark.parametrize("kind", KINDS)
def test_at_second_order_and_finite_differences(kind: str) -> None:
    rng = np.random.default_rng(3)
    x, u = rng.standard_normal((4, 5)), rng.standard_normal((2, 3))
    kw = {"unique_indices": True} if kind == "multiply" else {}

    def f(x: Any, u: Any) -> Any:
        return getattr(x.at[[0, 2], 1:4], kind)(u * u, **kw) ** 2

    def jf(x: Any, u: Any) -> Any:
        return getattr(x.at[A([0, 2]), 1:4], kind)(u * u, **kw) ** 2

    check_grads(f, (x, u), order=2, jax_fun=jf)


def test_at_get_and_dtypes() -> None:
    np.testing.assert_array_equal(sg.jit(lambda x: x.at[[0, 3], 1].get())(M), M[[0, 3], 1])
    xi = np.arange(6, dtype=np.int32)
    got = sg.jit(lambda x: x.at[[1, 4]].set(7))(xi)
    want = jnp.asarray(xi).at[A([1, 4])].set(7)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_at_errors() -> None:
    with pytest.raises(sg.GradientError, match="unique_indices=True"):
        sg.grad(lambda x, u: sg.sum(x.at[[0, 0]].multiply(u)), 1)(np.ones(3), np.ones(2))
    with pytest.raises(sg.ShapeError, match="out of bounds"):
        sg.jit(lambda x: x.at[[0, 3]].set(1.0))(np.ones(3))
    with pytest.raises(sg.ShapeError, match="unsupported arguments"):
        sg.jit(lambda x: x.at[0].set(1.0, mode="clip"))(np.ones(3))


def test_colliding_writes_are_decided_once() -> None:
    """Writes that may collide (x.at[i].set(u) with traced or repeated i, and lax.scatter
    through from_jax) are one scatter of update ids that the value and the gradient both
    read: a GPU may keep either of two colliding writes, so two scatters could disagree on
    the winner and give a gradient of another function than the value."""
    i, u = np.array([2, 2, 0], np.int32), np.arange(6.0).reshape(3, 2)

    def ours(x: Any, u: Any, i: Any) -> Any:
        return sg.sum(x.at[i, 1:3].set(u) * x)

    src = sg.source(sg.grad(ours, (0, 1)), M, u, i)
    assert src.count(".set(") == 1 and "scatter" not in src, src

    def theirs(x: Any, u: Any) -> Any:
        return jnp.sum(x.at[np.array([1, 1, 3])].set(u) * x)

    src = sg.source(sg.grad(sg.from_jax(theirs), (0, 1)), M, np.ones((3, 5)))
    assert src.count("lax.scatter(") == 1, src
    if not ON_CPU:
        _self_consistent(sg.from_jax(theirs), M, np.ones((3, 5)))
        return
    got = sg.grad(sg.from_jax(theirs), (0, 1))(M, np.ones((3, 5)))
    for g, w in zip(got, jax.grad(theirs, (0, 1))(M, np.ones((3, 5)))):
        np.testing.assert_allclose(g, w)
