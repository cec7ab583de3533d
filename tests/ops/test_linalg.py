"""sg.linalg and einsum: forward against jax.numpy.linalg / jax.scipy.linalg, gradients
against jax.grad and float64 finite differences (second order for the solves and factorizations).

Inputs are well conditioned: diagonally dominant matrices for solves, SPD matrices for cholesky,
spectra with distinct eigen/singular values (built from random orthogonal factors) for eigh and
svd, whose eigenvector/singular-vector losses are sign (gauge) invariant, as in JAX's own tests.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest

import srcgrad as sg
from srcgrad.testing import check_grads

from support.util import sliced

RNG = np.random.default_rng(0)


def general(*shape: int, seed: int = 0) -> np.ndarray:
    """Well-conditioned square matrices: random plus n on the diagonal."""
    r = np.random.default_rng(seed)
    n = shape[-1]
    return r.standard_normal(shape) + n * np.eye(n)


def spd(*shape: int, seed: int = 0) -> np.ndarray:
    r = np.random.default_rng(seed)
    b = r.standard_normal(shape)
    return b @ np.swapaxes(b, -1, -2) + shape[-1] * np.eye(shape[-1])


def orthogonal(n: int, r: np.random.Generator) -> np.ndarray:
    return np.linalg.qr(r.standard_normal((n, n)))[0]


def spectrum(*shape: int, seed: int = 0) -> np.ndarray:
    """Symmetric matrices with well separated eigenvalues 1, 2, ..., n (shuffled bases)."""
    r = np.random.default_rng(seed)
    *batch, n, _ = shape
    out = np.empty(shape)
    for idx in np.ndindex(*batch):
        q = orthogonal(n, r)
        out[idx] = q @ np.diag(np.arange(1.0, n + 1) * (1 + 0.1 * r.random(n))) @ q.T
    return out


def singular(*shape: int, seed: int = 0) -> np.ndarray:
    """Matrices with distinct singular values 1..k."""
    r = np.random.default_rng(seed)
    *batch, m, n = shape
    k = min(m, n)
    out = np.empty(shape)
    for idx in np.ndindex(*batch):
        u, v = orthogonal(m, r)[:, :k], orthogonal(n, r)[:, :k]
        out[idx] = u @ np.diag(np.arange(1.0, k + 1) * (1 + 0.1 * r.random(k))) @ v.T
    return out


def same(got: Any, want: Any, tol: float = 1e-9) -> None:
    """Equal leaves (named tuples of srcgrad and of jax are different types)."""
    got, want = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert np.shape(g) == np.shape(w)
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


def both(ours: Callable, ref: Callable, *args: Any, order: int = 1) -> None:
    """Forward equals jax; gradient equals jax.grad and finite differences (to `order`)."""
    same(sg.jit(ours)(*args), jax.jit(ref)(*args))
    check_grads(ours, args, order=order, jax_fun=jax.jit(ref), directions=1)


def one_triangle(ours: Callable, ref: Callable, a: np.ndarray, lower: bool) -> None:
    """`ours` reads one triangle of `a` (symmetrize_input=False): its forward equals jax's
    `ref`, its gradient equals jax.grad of `ref` on the symmetric matrix built from that
    triangle, and finite differences (the other triangle's gradient is zero)."""
    same(sg.jit(ours)(a), jax.jit(ref)(a))
    tri = jnp.tril if lower else jnp.triu

    def rebuilt(x: Any) -> Any:
        return ref(tri(x) + jnp.swapaxes(tri(x, -1 if lower else 1), -1, -2))

    check_grads(ours, (a,), jax_fun=jax.jit(rebuilt), directions=2)


def gauge_free_eigh(eigh: Callable) -> Callable:
    """w and the squared eigenvector entries (invariant under each eigenvector's sign),
    weighted per row (each column of v * v sums to 1)."""

    def f(a: Any) -> Any:
        w, v = eigh(a)
        rows = np.arange(1.0, a.shape[-1] + 1)[:, None]
        return w.sum() * 0.3 + (v * v * rows * (1.0 + w[..., None, :])).sum()

    return f


def gauge_free_svd(svd: Callable, full_matrices: bool = False) -> Callable:
    """s and |U|^2, |Vh|^2 (invariant under the joint sign of each singular pair)."""

    def f(a: Any) -> Any:
        u, s, vh = svd(a, full_matrices=full_matrices)
        k = s.shape[-1]
        return (
            (s * s).sum()
            + (u[..., :, :k] * u[..., :, :k] * s[..., None, :]).sum()
            + (vh[..., :k, :] * vh[..., :k, :] * s[..., :, None] ** 2).sum()
        )

    return f


# ---------------------------------------------------------------- solves and determinants


@pytest.mark.parametrize(
    "ashape,bshape,order",
    sliced(
        [
            ((3, 3), (3,), 2),
            ((2, 3, 3), (3, 1), 2),
            ((2, 3, 3), (3,), 1),
            ((1, 3, 3), (2, 3, 2), 1),
        ],
        2,
        unpack=True,
    ),
)
def test_solve(ashape: tuple, bshape: tuple, order: int) -> None:
    a, b = general(*ashape), RNG.standard_normal(bshape)
    both(sg.linalg.solve, jnp.linalg.solve, a, b, order=order)


@pytest.mark.parametrize("shape", sliced([(3, 3), (2, 3, 3)], 2))
def test_inv_det_slogdet(shape: tuple) -> None:
    a = general(*shape, seed=1)
    a[..., 0, :] *= -1  # a negative determinant too
    both(sg.linalg.inv, jnp.linalg.inv, a, order=2)
    both(sg.linalg.det, jnp.linalg.det, a, order=2)
    both(
        lambda x: sg.linalg.slogdet(x).logabsdet * sg.linalg.slogdet(x).sign,
        lambda x: jnp.linalg.slogdet(x).logabsdet * jnp.linalg.slogdet(x).sign,
        a,
        order=2,
    )
    sign, logabsdet = sg.jit(sg.linalg.slogdet)(a)
    want = jnp.linalg.slogdet(a)
    np.testing.assert_allclose(sign, want.sign)
    np.testing.assert_allclose(logabsdet, want.logabsdet, rtol=1e-12)


def _cofactor_matrix(a: np.ndarray) -> np.ndarray:
    """d det(a) / da from its definition: (-1)^(i+j) times the minor without row i, column j."""
    n = a.shape[-1]
    out = np.empty_like(a)
    for i in range(n):
        for j in range(n):
            minor = np.delete(np.delete(a, i, axis=-2), j, axis=-1)
            out[..., i, j] = (-1) ** (i + j) * (np.linalg.det(minor) if n > 1 else 1.0)
    return out


def test_det_gradient_at_singular_matrices() -> None:
    """det's gradient is its cofactor matrix, finite where det(a) = 0: up to 3x3 at any a
    (a zero pivot in the middle of the LU too), larger at rank n - 1 (random factors: the
    zero pivot comes last) and below it (zero); batched with an invertible matrix. Not
    against jax.grad at singular matrices: JAX 0.11's is 0 at diag(1, 0, 1)[1, 1], where
    the cofactor and finite differences give 1."""
    r = np.random.default_rng(5)
    low_rank = lambda n, k: r.standard_normal((n, k)) @ r.standard_normal((k, n))
    cases = [
        np.arange(1.0, 10.0).reshape(3, 3),
        np.diag([1.0, 0.0, 1.0]),
        low_rank(3, 1),
        np.array([[0.0, 1.0], [0.0, 0.0]]),
        low_rank(4, 3),
        low_rank(5, 4),
        low_rank(4, 2),
        np.zeros((3, 3)),
        np.array([[0.0]]),
        np.stack([low_rank(3, 2), general(3, 3)]),
        np.stack([low_rank(4, 3), general(4, 4)]),
    ]
    grad = sg.jit(sg.grad(lambda a: sg.sum(sg.linalg.det(a))))
    for a in cases:
        got = grad(a)
        np.testing.assert_allclose(got, _cofactor_matrix(a), rtol=1e-9, atol=1e-9)
    for a in (cases[1], cases[4]):
        check_grads(sg.linalg.det, (a,), order=1, directions=2)
    both(sg.linalg.det, jnp.linalg.det, general(2, 4, 4, seed=3), order=2)  # the LU rule


@pytest.mark.parametrize(
    "trans,lower,unit_diagonal,order",
    sliced(
        [
            (0, False, False, 2),
            (1, True, False, 1),
            ("T", False, True, 1),
            (2, True, True, 2),
            ("N", True, False, 1),
        ],
        2,
        unpack=True,
    ),
)
def test_solve_triangular(trans: Any, lower: bool, unit_diagonal: bool, order: int) -> None:
    a, b = general(2, 3, 3, seed=2), RNG.standard_normal((3, 2))
    kw = {"trans": trans, "lower": lower, "unit_diagonal": unit_diagonal}
    both(
        lambda a, b: sg.linalg.solve_triangular(a, b, **kw),
        lambda a, b: jsl.solve_triangular(a, b, **kw),
        a,
        b,
        order=order,
    )


def test_solve_triangular_vector_and_broadcast() -> None:
    a, b = general(3, 3, seed=3), RNG.standard_normal((3,))
    both(
        lambda a, b: sg.linalg.solve_triangular(a, b, lower=True),
        lambda a, b: jsl.solve_triangular(a, b, lower=True),
        a,
        b,
    )
    b2 = RNG.standard_normal((2, 3, 4))
    both(lambda a, b: sg.linalg.solve_triangular(a, b), jsl.solve_triangular, a, b2)


# ---------------------------------------------------------------- factorizations


@pytest.mark.parametrize(
    "shape,upper,order", [((3, 3), False, 2), ((2, 4, 4), True, 1), ((1, 1), False, 1)]
)
def test_cholesky(shape: tuple, upper: bool, order: int) -> None:
    a = spd(*shape)
    both(
        lambda x: sg.linalg.cholesky(x, upper=upper),
        lambda x: jnp.linalg.cholesky(x, upper=upper),
        a,
        order=order,
    )


def test_cholesky_without_symmetrizing_reads_the_lower_triangle() -> None:
    a = spd(2, 3, 3) + np.triu(np.ones((3, 3)), 1)  # the upper triangle is ignored
    one_triangle(
        lambda x: sg.linalg.cholesky(x, symmetrize_input=False),
        lambda x: jnp.linalg.cholesky(x, symmetrize_input=False),
        a,
        lower=True,
    )


@pytest.mark.parametrize("shape,order", [((3, 3), 2), ((2, 4, 4), 1)])
def test_eigh(shape: tuple, order: int) -> None:
    a = spectrum(*shape)
    got = sg.jit(sg.linalg.eigh)(a)
    want = jnp.linalg.eigh(a)
    np.testing.assert_allclose(got.eigenvalues, want.eigenvalues, rtol=1e-12)
    np.testing.assert_allclose(got.eigenvectors, want.eigenvectors, atol=1e-10)
    both(gauge_free_eigh(sg.linalg.eigh), gauge_free_eigh(jnp.linalg.eigh), a, order=order)


@pytest.mark.parametrize("uplo", ["U", "L"])
def test_eigh_of_one_triangle(uplo: str) -> None:
    a = spectrum(2, 3, 3) + (np.triu if uplo == "L" else np.tril)(np.ones((3, 3)), 1)
    kw = {"UPLO": uplo, "symmetrize_input": False}
    one_triangle(
        gauge_free_eigh(lambda x: sg.linalg.eigh(x, **kw)),
        gauge_free_eigh(lambda x: jnp.linalg.eigh(x, **kw)),
        a,
        lower=uplo == "L",
    )


@pytest.mark.parametrize(
    "shape,order", sliced([((3, 3), 2), ((4, 2), 1), ((2, 4), 2), ((2, 3, 2), 1)], 4, unpack=True)
)
def test_svd(shape: tuple, order: int) -> None:
    a = singular(*shape)
    both(gauge_free_svd(sg.linalg.svd), gauge_free_svd(jnp.linalg.svd), a, order=order)
    both(
        lambda x: sg.linalg.svd(x, compute_uv=False),
        lambda x: jnp.linalg.svd(x, compute_uv=False),
        a,
    )


def test_svd_full_matrices() -> None:
    a = singular(3, 3)
    both(gauge_free_svd(sg.linalg.svd, True), gauge_free_svd(jnp.linalg.svd, True), a)
    tall = singular(4, 2)
    u, s, vh = sg.jit(lambda x: sg.linalg.svd(x))(tall)
    assert u.shape == (4, 4) and s.shape == (2,) and vh.shape == (2, 2)
    with pytest.raises(sg.GradientError, match="full_matrices"):
        sg.grad(gauge_free_svd(sg.linalg.svd, True))(tall)


@pytest.mark.parametrize(
    "shape,order",
    sliced([((3, 3), 1), ((4, 2), 2), ((2, 4), 2), ((2, 3, 2), 1), ((2, 2, 3), 1)], 4, unpack=True),
)
def test_qr(shape: tuple, order: int) -> None:
    a = general(*shape[:-2], max(shape[-2:]), max(shape[-2:]), seed=4)[
        ..., : shape[-2], : shape[-1]
    ]
    both(lambda x: sg.linalg.qr(x), lambda x: jnp.linalg.qr(x), a, order=order)
    both(lambda x: sg.linalg.qr(x, mode="r"), lambda x: jnp.linalg.qr(x, mode="r"), a)
    if shape[-2] <= shape[-1]:
        both(
            lambda x: sg.linalg.qr(x, mode="complete"),
            lambda x: jnp.linalg.qr(x, mode="complete"),
            a,
        )


@pytest.mark.parametrize(
    "shape,order", sliced([((3, 3), 2), ((4, 2), 1), ((2, 4), 1), ((2, 3, 3), 1)], 4, unpack=True)
)
def test_lu(shape: tuple, order: int) -> None:
    a = RNG.standard_normal(shape)
    both(sg.linalg.lu, jax.vmap(jsl.lu) if len(shape) > 2 else jsl.lu, a, order=order)
    both(
        lambda x: sg.linalg.lu(x, permute_l=True),
        lambda x: jsl.lu(x, permute_l=True),
        a[0] if len(shape) > 2 else a,
    )


# ---------------------------------------------------------------- composites


@pytest.mark.parametrize(
    "shape,order", sliced([((3, 3), 2), ((4, 2), 1), ((2, 3), 2), ((2, 3, 2), 1)], 4, unpack=True)
)
def test_pinv(shape: tuple, order: int) -> None:
    both(sg.linalg.pinv, jnp.linalg.pinv, singular(*shape, seed=5), order=order)


def test_pinv_of_repeated_singular_values_and_rtol() -> None:
    """jax's pinv rule, not the SVD's: finite at an orthogonal matrix (all singular values 1)."""
    q = np.linalg.qr(RNG.standard_normal((3, 3)))[0]
    both(sg.linalg.pinv, jnp.linalg.pinv, q)
    low_rank = singular(4, 3) @ np.diag([1.0, 1.0, 1e-9])
    same(
        sg.jit(lambda x: sg.linalg.pinv(x, rtol=1e-6))(low_rank),
        jnp.linalg.pinv(low_rank, rtol=1e-6),
    )


@pytest.mark.parametrize(
    "n,order", sliced([(0, 1), (1, 1), (3, 1), (5, 2), (-1, 1), (-3, 2)], 3, unpack=True)
)
def test_matrix_power(n: int, order: int) -> None:
    a = general(2, 3, 3, seed=6) / 3
    both(
        lambda x: sg.linalg.matrix_power(x, n),
        lambda x: jnp.linalg.matrix_power(x, n),
        a,
        order=order,
    )


def test_matrix_power_of_ints_stays_int() -> None:
    a = np.arange(9, dtype=np.int32).reshape(3, 3)
    got = sg.jit(lambda x: sg.linalg.matrix_power(x, 3))(a)
    want = jnp.linalg.matrix_power(a, 3)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


VECTOR_ORDS = [None, 2, 1, np.inf, -np.inf, 3, 0.5]
MATRIX_ORDS = [None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf]


VECTOR_AXES = [(-1, False), (0, True), (None, False)]
MATRIX_AXES = [((0, 1), False), ((2, 0), True), (None, False)]


@pytest.mark.parametrize("k,ord", list(enumerate(VECTOR_ORDS)))
def test_vector_norm(k: int, ord: Any) -> None:
    axis, keepdims = VECTOR_AXES[k % 3]
    x = RNG.standard_normal((3, 4)) if axis is not None else RNG.standard_normal(5)
    both(
        lambda x: sg.linalg.norm(x, ord, axis, keepdims),
        lambda x: jnp.linalg.norm(x, ord, axis, keepdims),
        x,
    )


@pytest.mark.parametrize("k,ord", list(enumerate(MATRIX_ORDS)))
def test_matrix_norm(k: int, ord: Any) -> None:
    axis, keepdims = MATRIX_AXES[k % 3]
    x = singular(3, 4) if axis is None else np.moveaxis(singular(2, 3, 4, seed=7), 0, 1)
    both(
        lambda x: sg.linalg.norm(x, ord, axis, keepdims),
        lambda x: jnp.linalg.norm(x, ord, axis, keepdims),
        x,
    )


def test_norm_of_a_higher_rank_array_without_axis() -> None:
    x = RNG.standard_normal((2, 3, 4))
    both(sg.linalg.norm, jnp.linalg.norm, x, order=2)
    both(lambda x: sg.linalg.norm(x, keepdims=True), lambda x: jnp.linalg.norm(x, keepdims=True), x)


@pytest.mark.parametrize(
    "offset,axis1,axis2", [(1, 0, 1), (-1, 1, 0), (0, 2, 0), (2, -1, -2), (5, 0, 1)]
)
def test_trace(offset: int, axis1: int, axis2: int) -> None:
    x = RNG.standard_normal((3, 4, 3))
    both(
        lambda x: sg.linalg.trace(x, offset, axis1, axis2),
        lambda x: jnp.trace(x, offset, axis1, axis2),
        x,
    )
    same(sg.jit(lambda x: x.trace(offset, axis1, axis2))(x), x.trace(offset, axis1, axis2))


def test_trace_of_ints_and_dtype() -> None:
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    for dtype in (None, np.float32, np.int32):
        got = sg.jit(lambda x: sg.linalg.trace(x, dtype=dtype))(x)
        want = jnp.trace(x, dtype=dtype)
        assert got.dtype == want.dtype and got == want


def test_sg_trace_is_numpys_on_arrays_and_the_tracer_on_functions() -> None:
    """Code moved from np.trace / jnp.trace to sg.trace gets the matrix trace; a callable
    first argument still traces it (DESIGN's `sg.trace(fun, *example_args)`)."""
    x = RNG.standard_normal((3, 4, 3))
    for args in [(), (1,), (-1, 1, 0)]:
        want = np.trace(x, *args)
        same(sg.trace(x, *args), want)
        same(sg.jit(lambda x: sg.trace(x, *args))(x), want)
        same(sg.trace(sg.tensor(x), *args).numpy(), want)
        same(
            sg.grad(lambda x: sg.sum(sg.trace(x, *args) ** 2))(x),
            jax.grad(lambda x: jnp.sum(jnp.trace(x, *args) ** 2))(x),
        )
    same(sg.trace(x, offset=1, axis1=2, axis2=0), np.trace(x, offset=1, axis1=2, axis2=0))

    def f(a):
        return sg.sum(a * a)

    prog = sg.trace(f, x)
    assert isinstance(prog, sg.Program) and str(prog) == str(sg.trace_program(f, x))
    with pytest.raises(sg.SrcgradError, match=r"traces the function f .*offset=.*must be an array"):
        sg.trace(f, x, offset=1)


# ---------------------------------------------------------------- namespace, eager, errors


def test_namespace() -> None:
    assert "linalg" in sg.__all__
    assert sg.trace is not sg.linalg.trace  # sg.trace: the tracer too, for a function
    for name in sg.linalg.__all__:
        assert callable(getattr(sg.linalg, name)) and not hasattr(sg, name) or name == "trace"


def test_eager_calls_return_jax_arrays_and_named_tuples() -> None:
    a = spectrum(3, 3)
    w, v = sg.linalg.eigh(a)
    assert isinstance(w, jax.Array)
    np.testing.assert_allclose(w, jnp.linalg.eigh(a).eigenvalues, rtol=1e-12)
    assert sg.linalg.svd(a)._fields == ("U", "S", "Vh")
    assert sg.linalg.qr(a)._fields == ("Q", "R")
    assert sg.linalg.slogdet(a)._fields == ("sign", "logabsdet")


def test_second_order_hessian_of_logdet() -> None:
    """d2 logdet(A) / dA2 against jax.hessian, through slogdet's gradient (a solve)."""
    a = spd(3, 3)
    ours = sg.jit(sg.grad(lambda x: sg.sum(sg.grad(lambda y: sg.linalg.slogdet(y)[1])(x) ** 2)))
    ref = jax.grad(lambda x: jnp.sum(jax.grad(lambda y: jnp.linalg.slogdet(y)[1])(x) ** 2))
    np.testing.assert_allclose(ours(a), ref(a), rtol=1e-10)


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: sg.linalg.inv(np.ones((2, 3))), "square"),
        (lambda: sg.linalg.solve(np.eye(3), np.ones((2,))), "solve"),
        (lambda: sg.linalg.det(np.ones(3)), "rank >= 2"),
        (lambda: sg.linalg.qr(np.eye(2), mode="raw"), "mode"),
        (lambda: sg.linalg.norm(np.ones((2, 2)), "bad"), "order"),
        (lambda: sg.linalg.norm(np.ones((2, 2, 2)), axis=(0, 1, 2)), "one axis"),
        (lambda: sg.linalg.matrix_power(np.eye(2), 1.5), "integer"),
        (lambda: sg.linalg.solve_triangular(np.eye(2), np.ones(2), trans=3), "trans"),
        (lambda: sg.linalg.eigh(np.eye(2), UPLO="X"), "UPLO"),
        (lambda: sg.linalg.trace(np.ones(3)), "rank >= 2"),
    ],
)
def test_bad_input_raises_a_shape_error(call: Callable, match: str) -> None:
    with pytest.raises(sg.ShapeError, match=match):
        sg.jit(call)()


# ---------------------------------------------------------------- einsum and matmul

EINSUM_CASES = [
    ("...ij,jk->...ik", [(2, 3, 4), (4, 5)]),
    ("...ij,...jk", [(2, 1, 3, 4), (5, 4, 2)]),
    ("ij...,jk", [(3, 4, 2), (4, 5)]),
    ("...ij,jk->ik", [(2, 3, 4), (4, 5)]),
    ("ii->i", [(3, 3)]),
    ("ii,ij->j", [(3, 3), (3, 2)]),
    ("ab,bc,cd,de->ae", [(2, 3), (3, 4), (4, 5), (5, 2)]),
    ("bij,bjk,bkl->bil", [(2, 2, 3), (2, 3, 4), (2, 4, 2)]),
    ("i,i,i,i", [(3,), (3,), (3,), (3,)]),
    ("Ba,ab", [(2, 3), (3, 4)]),
]


@pytest.mark.parametrize("spec,shapes", EINSUM_CASES, ids=[s for s, _ in EINSUM_CASES])
def test_einsum(spec: str, shapes: list) -> None:
    xs = [RNG.standard_normal(s) for s in shapes]
    both(lambda *xs: sg.einsum(spec, *xs), lambda *xs: jnp.einsum(spec, *xs), *xs)


def test_einsum_second_order_and_paths() -> None:
    xs = [RNG.standard_normal(s) for s in [(2, 3), (3, 4), (4, 2)]]
    both(
        lambda *xs: sg.einsum("ij,jk,ki->", *xs),
        lambda *xs: jnp.einsum("ij,jk,ki->", *xs),
        *xs,
        order=2,
    )
    for optimize in (False, True, "greedy", "optimal"):
        same(
            sg.jit(lambda *xs: sg.einsum("ij,jk,ki->i", *xs, optimize=optimize))(*xs),
            jnp.einsum("ij,jk,ki->i", *xs),
        )


def test_einsum_contracts_pairwise() -> None:
    """Three operands become two two-operand einsum ops along opt_einsum's path, not the
    left-to-right outer product `ab,cd->abcd` (8**4 entries)."""
    prog = sg.trace(lambda *xs: sg.einsum("ab,cd,bc->ad", *xs), *[np.ones((8, 8))] * 3)
    ops = [op for op in prog.global_block().ops if op.type == "einsum"]
    assert len(ops) == 2 and all(len(op.inputs) == 2 for op in ops)
    assert max(op.outputs[0].size for op in ops) == 64
    prog = sg.trace(
        lambda *xs: sg.einsum("ab,cd,bc->ad", *xs, optimize=False), *[np.ones((8, 8))] * 3
    )
    assert max(op.outputs[0].size for op in prog.global_block().ops if op.type == "einsum") == 8**4


def test_einsum_interleaved() -> None:
    a, b = RNG.standard_normal((2, 3)), RNG.standard_normal((4, 3, 5))
    both(
        lambda a, b: sg.einsum(a, [0, 1], b, [Ellipsis, 1, 2], [Ellipsis, 0, 2]),
        lambda a, b: jnp.einsum(a, [0, 1], b, [Ellipsis, 1, 2], [Ellipsis, 0, 2]),
        a,
        b,
    )
    both(lambda a: sg.einsum(a, [0, 1]), lambda a: jnp.einsum(a, [0, 1]), a)


@pytest.mark.parametrize(
    "spec,shapes,match",
    [
        ("ij,jk", [(2, 3), (4, 5)], "sizes"),
        ("ij,jk", [(2, 3)], "operands"),
        ("i.j", [(2, 3)], "'.'"),
        ("ijk", [(2, 3)], "does not match"),
        ("ij->ik", [(2, 3)], "names an index"),
    ],
)
def test_einsum_errors(spec: str, shapes: list, match: str) -> None:
    with pytest.raises(sg.ShapeError, match=match):
        sg.jit(lambda *xs: sg.einsum(spec, *xs))(*[np.ones(s) for s in shapes])


@pytest.mark.parametrize(
    "ashape,bshape",
    sliced(
        [((2, 1, 3, 4), (5, 4, 2)), ((1, 3, 4), (2, 1, 4, 5)), ((3, 2, 4), (3, 4, 2))],
        2,
        unpack=True,
    ),
)
def test_matmul_broadcasting_batches(ashape: tuple, bshape: tuple) -> None:
    a, b = RNG.standard_normal(ashape), RNG.standard_normal(bshape)
    both(sg.matmul, jnp.matmul, a, b, order=2)


# ---------------------------------------------------------------- JAX and NumPy habits


def test_jax_linalg_on_a_traced_value_names_sg_linalg() -> None:
    with pytest.raises(sg.TraceError, match=r"use sg\.linalg\.solve instead of jnp\.linalg\.solve"):
        sg.jit(lambda a: jnp.linalg.solve(a, a))(np.eye(2))
    with pytest.raises(sg.TraceError, match=r"use sg\.linalg\.trace instead of jnp\.trace"):
        sg.jit(lambda a: jnp.trace(a))(np.eye(2))


def test_numpy_linalg_on_a_traced_value_runs_sg_linalg() -> None:
    a, b = general(3, 3), RNG.standard_normal(3)
    both(
        lambda a, b: np.linalg.solve(a, b) + np.trace(a) + np.linalg.norm(a, "fro"),
        lambda a, b: jnp.linalg.solve(a, b) + jnp.trace(a) + jnp.linalg.norm(a, "fro"),
        a,
        b,
    )


def test_repeated_eigen_and_singular_values_when_only_the_values_are_differentiated() -> None:
    """Unused eigenvectors / singular vectors add no inf * 0 terms (JAX drops them too)."""
    a = np.diag([2.0, 2.0, 3.0])
    ours = sg.grad(lambda x: sg.sum(sg.linalg.eigh(x)[0] ** 2))(a)
    ref = jax.grad(lambda x: jnp.sum(jnp.linalg.eigh(x)[0] ** 2))(a)
    np.testing.assert_allclose(ours, ref, atol=1e-12)
    ours = sg.grad(lambda x: sg.sum(sg.linalg.svd(x)[1]))(a)
    ref = jax.grad(lambda x: jnp.sum(jnp.linalg.svd(x)[1]))(a)
    np.testing.assert_allclose(ours, ref, atol=1e-12)
