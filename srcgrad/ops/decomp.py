"""`sg.linalg`: decompositions and solves as primitives (lowered to lax.linalg / jnp.linalg,
with lax.linalg's semantics, so a jaxpr maps onto them), and the jax.numpy.linalg functions.

Each primitive's gradient is the adjoint of the forward-mode rule JAX uses, written in srcgrad
ops, so it can be differentiated again. Real floating-point inputs; ints are promoted to floats.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import numpy as np

from .. import dtypes
from ..builder import as_var, emit
from ..errors import GradientError, ShapeError
from ..ir import Op, Variable
from ..registry import OutType, register
from ._rules import broadcast_shapes, norm_axis, require_float
from .declare import Emitted, defop, public_in
from .elementwise import (abs, add, astype, divide, isfinite, logical_not, multiply, negative,
                          not_equal, power, reciprocal, sqrt, subtract, where)
from .indexing import one_hot
from .linalg import const_array, matmul
from .reduce import max as reduce_max
from .reduce import min as reduce_min
from .reduce import prod as reduce_prod
from .reduce import sum as reduce_sum
from .shape import broadcast_to, concatenate, expand_dims, reshape, stack, swapaxes, transpose


class EighResult(NamedTuple):
    eigenvalues: Any
    eigenvectors: Any


class SVDResult(NamedTuple):
    U: Any
    S: Any
    Vh: Any


class QRResult(NamedTuple):
    Q: Any
    R: Any


class SlogdetResult(NamedTuple):
    sign: Any
    logabsdet: Any


# ---------------------------------------------------------------- helpers

def _mT(x: Variable) -> Variable:
    return swapaxes(x, -1, -2)


def _const(value: np.ndarray, dtype: np.dtype) -> Variable:
    return const_array(value, dtypes.canonical(dtype))


def _eye(n: int, dtype: np.dtype, m: int | None = None) -> Variable:
    return _const(np.eye(n, m), dtype)


def _tril(x: Variable, k: int = 0) -> Variable:
    """The lower triangle (diagonal `k` and below) of the last two axes; zeros elsewhere."""
    mask = np.tri(x.shape[-2], x.shape[-1], k, dtype=bool)
    return where(_const(mask, np.dtype(bool)), x, 0)


def _triu(x: Variable, k: int = 0) -> Variable:
    mask = ~np.tri(x.shape[-2], x.shape[-1], k - 1, dtype=bool)
    return where(_const(mask, np.dtype(bool)), x, 0)


def _diag(v: Variable) -> Variable:
    """The matrices with diagonal `v` (last axis)."""
    n = v.shape[-1]
    return multiply(expand_dims(v, -2), _eye(n, v.dtype))


def _col(v: Variable) -> Variable:
    """`v[..., :, None]`."""
    return expand_dims(v, -1)


def _row(v: Variable) -> Variable:
    """`v[..., None, :]`."""
    return expand_dims(v, -2)


def _inexact(*xs: Any) -> list[Variable]:
    """The arguments as Variables of one floating-point dtype (as jnp's promote_dtypes_inexact)."""
    vs = [as_var(x) for x in xs]
    dt = vs[0].dtype
    for v in vs[1:]:
        dt = dtypes.promote(dt, v.dtype)
    dt = dtypes.to_inexact(dt)
    return [astype(v, dt) for v in vs]


def _matrices(x: Variable, what: str, square: bool = True, floating: bool = True
              ) -> tuple[int, int]:
    """Check that `x` is a (batch of) matrices, square if `square`, floating-point if
    `floating`; return (m, n)."""
    if x.ndim < 2:
        raise ShapeError(f"{what} needs an array of rank >= 2 (a batch of matrices), got "
                         f"{x.type_str()}")
    m, n = x.shape[-2:]
    if square and m != n:
        raise ShapeError(f"{what} needs square matrices (..., n, n), got {x.type_str()}")
    if floating:
        require_float(x, what)
    return m, n


def _square_rule(what: str) -> Any:
    def infer(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
        x = inputs[0]
        _matrices(x, what)
        return [(x.shape, x.dtype)]
    return infer


def _known_zero(g: Variable) -> bool:
    """True for the zeros the backward walk fills in for an output nothing differentiates (so
    a term of it is dropped, as JAX drops symbolic zeros, not computed as inf * 0)."""
    for op in reversed(g.block.ops):
        if any(o is g for o in op.outputs):
            return op.type == "fill_zeros_like" or (
                op.type == "fill_constant" and op.attrs["value"] == 0)
    return False


def _inv_t(a: Variable) -> Variable:
    """inv(a)^T, as solve(a^T, I)."""
    n = a.shape[-1]
    return solve(_mT(a), broadcast_to(_eye(n, a.dtype), a.shape))


# ---------------------------------------------------------------- cholesky

def _g_cholesky(op: Op, g: list, need: list) -> list:
    """S_bar = L^-T phi(L^T L_bar) L^-1, phi = lower triangle with the diagonal halved."""
    low = op.outputs[0]
    n = low.shape[-1]
    phi = _const(np.tril(np.ones((n, n))) - 0.5 * np.eye(n), low.dtype)
    p = multiply(matmul(_mT(low), g[0]), phi)
    tmp = triangular_solve(low, p, left_side=True, lower=True, transpose_a=True)
    return [triangular_solve(low, tmp, left_side=False, lower=True)]


@defop("cholesky", _square_rule("cholesky"), "lax.linalg.cholesky({0}, symmetrize_input=False)",
       _g_cholesky, export="linalg.cholesky")
def lax_cholesky(x: Variable) -> Emitted:
    """lax.linalg.cholesky without symmetrizing: the lower factor, from the lower triangle."""
    return [x], {}


@public_in("linalg")
def cholesky(a: Any, *, upper: bool = False, symmetrize_input: bool = True) -> Variable:
    """jnp.linalg.cholesky: the lower (or `upper`) Cholesky factor; NaN if not positive
    definite. `symmetrize_input` uses (a + a^T) / 2, as jax does (so the gradient is symmetric)."""
    (a,) = _inexact(a)
    if symmetrize_input:
        _matrices(a, "linalg.cholesky")
        a = multiply(add(a, _mT(a)), 0.5)
    low = lax_cholesky(a)
    return _mT(low) if upper else low


# ---------------------------------------------------------------- triangular solve

def _trisolve_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    a, b = inputs
    _matrices(a, "triangular_solve")
    if b.ndim != a.ndim or a.shape[:-2] != b.shape[:-2]:
        raise ShapeError(f"triangular_solve needs b of a's batch shape and rank, got "
                         f"{a.type_str()} and {b.type_str()}")
    common = b.shape[-2] if attrs["left_side"] else b.shape[-1]
    if common != a.shape[-1]:
        raise ShapeError(f"triangular_solve: a {a.type_str()} does not match b {b.type_str()} "
                         f"(left_side={attrs['left_side']})")
    if a.dtype != b.dtype:
        raise ShapeError(f"triangular_solve needs one dtype, got {a.type_str()} and {b.type_str()}")
    return [(b.shape, b.dtype)]


def _g_trisolve(op: Op, g: list, need: list) -> list:
    """b_bar = op(a)^-T g; a_bar = -b_bar x^T (left) or -x^T b_bar (right), transposed if
    op(a) = a^T, on the triangle the solve reads."""
    a, _ = op.inputs
    x = op.outputs[0]
    at = op.attrs
    gb = triangular_solve(a, g[0], left_side=at["left_side"], lower=at["lower"],
                          transpose_a=not at["transpose_a"], unit_diagonal=at["unit_diagonal"])
    ga = None
    if need[0]:
        if at["left_side"]:
            ga = matmul(x, _mT(gb)) if at["transpose_a"] else matmul(gb, _mT(x))
        else:
            ga = matmul(_mT(gb), x) if at["transpose_a"] else matmul(_mT(x), gb)
        unit = 1 if at["unit_diagonal"] else 0
        ga = negative(_tril(ga, -unit) if at["lower"] else _triu(ga, unit))
    return [ga, gb if need[1] else None]


def _lower_trisolve(args: list[str], attrs: dict[str, str]) -> str:
    return (f"lax.linalg.triangular_solve({args[0]}, {args[1]}, left_side={attrs['left_side']}, "
            f"lower={attrs['lower']}, transpose_a={attrs['transpose_a']}, "
            f"unit_diagonal={attrs['unit_diagonal']})")


@defop("triangular_solve", _trisolve_rule, _lower_trisolve, _g_trisolve,
       export="linalg.solve_triangular")
def triangular_solve(a: Variable, b: Variable, *, left_side: bool = False, lower: bool = False,
                     transpose_a: bool = False, unit_diagonal: bool = False) -> Emitted:
    """lax.linalg.triangular_solve (real): x with op(a) x = b (left_side) or x op(a) = b."""
    return [a, b], {"left_side": bool(left_side), "lower": bool(lower),
                    "transpose_a": bool(transpose_a), "unit_diagonal": bool(unit_diagonal)}


@public_in("linalg")
def solve_triangular(a: Any, b: Any, trans: int | str = 0, lower: bool = False,
                     unit_diagonal: bool = False, overwrite_b: bool = False, debug: Any = None,
                     check_finite: bool = True) -> Variable:
    """jax.scipy.linalg.solve_triangular: x with a x = b (`trans` 0/'N'), a^T x = b (1/'T',
    2/'C'); b is (n,) or (..., n, k); batch dimensions broadcast."""
    what = "linalg.solve_triangular"
    transpose = {0: False, "N": False, 1: True, "T": True, 2: True, "C": True}.get(trans)
    if transpose is None:
        raise ShapeError(f"invalid trans value {trans!r} (0, 1, 2, 'N', 'T' or 'C')", op=what)
    a, b = _inexact(a, b)
    _matrices(a, what)
    vector = b.ndim == 1
    if vector:
        b = _col(b)
    if b.ndim < 2 or b.shape[-2] != a.shape[-1]:
        raise ShapeError(f"b must be (n,) or (..., n, k) for a {a.type_str()}, got "
                         f"{b.type_str()}", op=what)
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = broadcast_to(a, batch + a.shape[-2:])
    b = broadcast_to(b, batch + b.shape[-2:])
    x = triangular_solve(a, b, left_side=True, lower=lower, transpose_a=transpose,
                         unit_diagonal=unit_diagonal)
    return reshape(x, x.shape[:-1]) if vector else x


# ---------------------------------------------------------------- solve, det, slogdet, inv

def _solve_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    a, b = inputs
    m, _ = _matrices(a, "solve")
    dt = dtypes.promote(a.dtype, b.dtype)
    if b.ndim == 1:
        if b.shape[0] != m:
            raise ShapeError(f"solve: b {b.type_str()} does not match a {a.type_str()}")
        return [(a.shape[:-2] + (m,), dt)]
    if b.ndim < 2 or b.shape[-2] != m:
        raise ShapeError(f"solve: b must be (m,) or (..., m, k) for a {a.type_str()}, got "
                         f"{b.type_str()}")
    return [(broadcast_shapes(a.shape[:-2], b.shape[:-2]) + b.shape[-2:], dt)]


def _g_solve(op: Op, g: list, need: list) -> list:
    """b_bar = solve(a^T, g) and a_bar = -b_bar x^T (the backward walk sums over batches)."""
    a, b = op.inputs
    x = op.outputs[0]
    if b.ndim == 1:
        gb = solve(_mT(a), _col(g[0]))
        ga = negative(matmul(gb, _row(x))) if need[0] else None
        return [ga, reshape(gb, gb.shape[:-1]) if need[1] else None]
    gb = solve(_mT(a), g[0])
    return [negative(matmul(gb, _mT(x))) if need[0] else None, gb if need[1] else None]


@defop("solve", _solve_rule, "jnp.linalg.solve({0}, {1})", _g_solve, namespace="linalg")
def solve(a: Any, b: Any) -> Emitted:
    """jnp.linalg.solve: x with a x = b; b is (m,) or (..., m, k), batch dimensions broadcast."""
    a, b = _inexact(a, b)
    return [a, b], {}


@public_in("linalg")
def inv(a: Any) -> Variable:
    """jnp.linalg.inv: solve(a, I)."""
    (a,) = _inexact(a)
    _matrices(a, "linalg.inv")
    return solve(a, broadcast_to(_eye(a.shape[-1], a.dtype), a.shape))


def _det_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    a = inputs[0]
    _matrices(a, "det")
    return [(a.shape[:-2], a.dtype)]


def _g_det(op: Op, g: list, need: list) -> list:
    """a_bar = g cof(a), the cofactor matrix det(a) inv(a)^T, finite at singular a."""
    return [multiply(expand_dims(g[0], (-1, -2)), _cofactors(op.inputs[0]))]


def _cofactors(a: Variable) -> Variable:
    """The cofactor matrix det(a) inv(a)^T, without dividing by det(a): by its definition up
    to 3x3 (exact at every a), else as JAX's det gradient computes it (see `_lu_cofactors`)."""
    n = a.shape[-1]
    if n > 3:
        return _lu_cofactors(a)
    if n == 1:
        return broadcast_to(_const(np.ones(()), a.dtype), a.shape)

    def e(i: int, j: int) -> Variable:
        return a[..., i % n, j % n]
    if n == 2:
        rows = [[e(1, 1), negative(e(1, 0))], [negative(e(0, 1)), e(0, 0)]]
    else:  # the cyclic 2x2 minors carry their signs
        rows = [[subtract(multiply(e(i + 1, j + 1), e(i + 2, j + 2)),
                          multiply(e(i + 1, j + 2), e(i + 2, j + 1))) for j in range(3)]
                for i in range(3)]
    return stack([stack(r, -1) for r in rows], -2)


def _lu_cofactors(a: Variable) -> Variable:
    """det(a) inv(a)^T without dividing by det(a), as JAX's det gradient computes it.

    With a^T = P^T L U (LU with partial pivoting) and s the sign of P, det(a) solve(a^T, I)
    is det(a) U^-1 L^-1 P. Its last row is s prod(u_ii, i < n) times that of L^-1 P, so U's
    last pivot is replaced by 1 / (s prod(u_ii, i < n)) and every other row of L^-1 P scaled
    by det(a) before the solve with U: finite where a has rank n - 1 and its zero pivot comes
    last, and exact where a is invertible. Where the solve still fails (a lower rank, or a
    zero pivot before the last) the result is zero, as JAX's.
    """
    n = a.shape[-1]
    packed, pivots, perm = lax_lu(_mT(a))
    diag = reduce_sum(multiply(packed, _eye(n, a.dtype)), -1)
    swapped = not_equal(pivots, _const(np.arange(n, dtype=np.int32), np.dtype(np.int32)))
    sign = reduce_prod(where(swapped, -1.0, 1.0), -1)
    det_ = multiply(sign, reduce_prod(diag, -1))
    first = multiply(sign, reduce_prod(diag[..., :-1], -1))
    corner = _const(np.arange(n * n).reshape(n, n) == n * n - 1, np.dtype(bool))
    up = where(corner, expand_dims(reciprocal(first), (-1, -2)), packed)
    x = triangular_solve(packed, one_hot(perm, n, dtype=a.dtype), left_side=True, lower=True,
                         unit_diagonal=True)
    last_row = _const(np.arange(n).reshape(n, 1) == n - 1, np.dtype(bool))
    x = multiply(x, where(last_row, 1.0, expand_dims(det_, (-1, -2))))
    x = triangular_solve(up, x, left_side=True, lower=False)
    failed = logical_not(isfinite(reduce_sum(x, (-2, -1))))
    return where(expand_dims(failed, (-1, -2)), 0.0, x)


@defop("det", _det_rule, "jnp.linalg.det({0})", _g_det, namespace="linalg")
def det(a: Any) -> Emitted:
    """jnp.linalg.det."""
    (a,) = _inexact(a)
    return [a], {}


def _slogdet_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    a = inputs[0]
    _matrices(a, "slogdet")
    return [(a.shape[:-2], a.dtype)] * 2


def _g_slogdet(op: Op, g: list, need: list) -> list:
    """The sign is piecewise constant; logabsdet's gradient is g inv(a)^T."""
    return [multiply(expand_dims(g[1], (-1, -2)), _inv_t(op.inputs[0]))]


register("slogdet", _slogdet_rule, "tuple(jnp.linalg.slogdet({0}))", _g_slogdet,
         public="linalg.slogdet")


@public_in("linalg")
def slogdet(a: Any, *, method: str | None = None) -> SlogdetResult:
    """jnp.linalg.slogdet: (sign, log|det|) from an LU factorization."""
    if method not in (None, "lu"):
        raise ShapeError(f"method {method!r} is not supported (None or 'lu')", op="linalg.slogdet")
    (a,) = _inexact(a)
    sign, logabsdet = emit("slogdet", [a])
    return SlogdetResult(sign, logabsdet)


# ---------------------------------------------------------------- eigh

def _eigh_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    a = inputs[0]
    _matrices(a, "eigh")
    return [(a.shape, a.dtype), (a.shape[:-1], a.dtype)]


def _g_eigh(op: Op, g: list, need: list) -> list:
    """a_bar = V (diag(w_bar) + F * (V^T V_bar)) V^T, F_ij = 1 / (w_j - w_i) off the diagonal
    (distinct eigenvalues)."""
    v, w = op.outputs
    gv, gw = g
    inner = _diag(gw)
    if not _known_zero(gv):
        eye = _eye(w.shape[-1], w.dtype)
        f = subtract(reciprocal(add(eye, subtract(_row(w), _col(w)))), eye)
        inner = add(inner, multiply(f, matmul(_mT(v), gv)))
    return [matmul(v, matmul(inner, _mT(v)))]


register("eigh", _eigh_rule,
         "lax.linalg.eigh({0}, lower={lower}, symmetrize_input=False)", _g_eigh,
         public="linalg.eigh")


@public_in("linalg")
def eigh(a: Any, UPLO: str | None = None, symmetrize_input: bool = True) -> EighResult:
    """jnp.linalg.eigh: ascending eigenvalues and eigenvectors (columns) of symmetric matrices,
    read from the lower (UPLO 'L', default) or upper triangle; `symmetrize_input` uses
    (a + a^T) / 2 as jax does. Gradients need distinct eigenvalues."""
    if UPLO not in (None, "L", "U"):
        raise ShapeError(f"UPLO must be None, 'L' or 'U', got {UPLO!r}", op="linalg.eigh")
    (a,) = _inexact(a)
    if symmetrize_input:
        _matrices(a, "linalg.eigh")
        a = multiply(add(a, _mT(a)), 0.5)
    v, w = emit("eigh", [a], {"lower": UPLO != "U"})
    return EighResult(w, v)


# ---------------------------------------------------------------- svd

def _svd_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    a = inputs[0]
    m, n = _matrices(a, "svd", square=False)
    k = min(m, n)
    batch = a.shape[:-2]
    s = (batch + (k,), a.dtype)
    if not attrs["compute_uv"]:
        return [s]
    if attrs["full_matrices"]:
        return [(batch + (m, m), a.dtype), s, (batch + (n, n), a.dtype)]
    return [(batch + (m, k), a.dtype), s, (batch + (k, n), a.dtype)]


def _g_svd(op: Op, g: list, need: list) -> list:
    """The adjoint of jax's svd JVP (distinct, nonzero singular values): a_bar =
    U [diag(s_bar) + (J + J^T) S + S (K + K^T)] V^T plus the terms of the complement of
    U (tall) or V (wide), J = F * (U^T U_bar), K = F * (V^T V_bar), F_ij = 1/(s_j^2 - s_i^2)."""
    a = op.inputs[0]
    m, n = a.shape[-2:]
    if not op.attrs["compute_uv"]:
        u, s, vh = emit("svd", [a], {"full_matrices": False, "compute_uv": True})
        return [matmul(multiply(u, _row(g[0])), vh)]
    if op.attrs["full_matrices"] and m != n:
        raise GradientError(f"svd with full_matrices=True of a non-square {a.type_str()} has "
                            "no gradient (the extra singular vectors are not unique); use "
                            "full_matrices=False", op="svd", loc=op.loc)
    u, s, vh = op.outputs
    gu, gs, gvh = g
    eye = _eye(s.shape[-1], s.dtype)
    s2 = multiply(s, s)
    f = subtract(reciprocal(add(eye, subtract(_row(s2), _col(s2)))), eye)
    core = _diag(gs)
    with_u, with_v = not _known_zero(gu), not _known_zero(gvh)
    if with_u:
        j = multiply(f, matmul(_mT(u), gu))
        core = add(core, multiply(add(j, _mT(j)), _row(s)))
    if with_v:
        k = multiply(f, matmul(vh, _mT(gvh)))
        core = add(core, multiply(_col(s), add(k, _mT(k))))
    ga = matmul(u, matmul(core, vh))
    if m > n and with_u:
        rest = subtract(gu, matmul(u, matmul(_mT(u), gu)))
        ga = add(ga, matmul(divide(rest, _row(s)), vh))
    if n > m and with_v:
        rest = subtract(gvh, matmul(matmul(gvh, _mT(vh)), vh))
        ga = add(ga, matmul(u, divide(rest, _col(s))))
    return [ga]


def _lower_svd(args: list[str], attrs: dict[str, str]) -> str:
    return (f"lax.linalg.svd({args[0]}, full_matrices={attrs['full_matrices']}, "
            f"compute_uv={attrs['compute_uv']})")


register("svd", _svd_rule, _lower_svd, _g_svd, public="linalg.svd")


@public_in("linalg")
def svd(a: Any, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False,
        subset_by_index: Any = None) -> SVDResult | Variable:
    """jnp.linalg.svd: (U, S, Vh) with descending S, or S alone when not `compute_uv`.
    Gradients need distinct nonzero singular values (and full_matrices=False unless square)."""
    what = "linalg.svd"
    if hermitian or subset_by_index is not None:
        raise ShapeError("hermitian=True and subset_by_index are not supported", op=what)
    (a,) = _inexact(a)
    outs = emit("svd", [a], {"full_matrices": bool(full_matrices),
                             "compute_uv": bool(compute_uv)})
    return SVDResult(*outs) if compute_uv else outs[0]


# ---------------------------------------------------------------- qr

def _qr_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    a = inputs[0]
    m, n = _matrices(a, "qr", square=False)
    k = m if attrs["full_matrices"] else min(m, n)
    return [(a.shape[:-2] + (m, k), a.dtype), (a.shape[:-2] + (k, n), a.dtype)]


def _qr_thin_vjp(q: Variable, r: Variable, gq: Variable, gr: Variable) -> Variable:
    """The adjoint of jax's thin-QR JVP (m >= n): a_bar = (Q N + Q_bar) R^-T,
    M = R_bar R^T - Q^T Q_bar, N = M - tril(M - M^T, -1)."""
    mm = subtract(matmul(gr, _mT(r)), matmul(_mT(q), gq))
    nn = subtract(mm, _tril(subtract(mm, _mT(mm)), -1))
    return triangular_solve(r, add(matmul(q, nn), gq), left_side=False, lower=False,
                            transpose_a=True)


def _g_qr(op: Op, g: list, need: list) -> list:
    a = op.inputs[0]
    m, n = a.shape[-2:]
    q, r = op.outputs
    gq, gr = g
    if m >= n:
        if op.attrs["full_matrices"] and m > n:
            raise GradientError(f"qr with mode='complete' of a tall {a.type_str()} has no "
                                "gradient here; use mode='reduced'", op="qr", loc=op.loc)
        return [_qr_thin_vjp(q, r, gq, gr)]
    # Wide: a = [a1 a2] with q r1 = a1 (square) and r2 = q^T a2.
    a2, r1, gr1, gr2 = a[..., :, m:], r[..., :, :m], gr[..., :, :m], gr[..., :, m:]
    ga1 = _qr_thin_vjp(q, r1, add(gq, matmul(a2, _mT(gr2))), gr1)
    return [concatenate([ga1, matmul(q, gr2)], a.ndim - 1)]


register("qr", _qr_rule, "lax.linalg.qr({0}, full_matrices={full_matrices})", _g_qr,
         public="linalg.qr")


@public_in("linalg")
def qr(a: Any, mode: str = "reduced") -> QRResult | Variable:
    """jnp.linalg.qr with mode 'reduced', 'complete' or 'r' (R alone)."""
    if mode not in ("reduced", "complete", "r"):
        raise ShapeError(f"mode must be 'reduced', 'complete' or 'r', got {mode!r}",
                         op="linalg.qr")
    (a,) = _inexact(a)
    q, r = emit("qr", [a], {"full_matrices": mode == "complete"})
    return r if mode == "r" else QRResult(q, r)


# ---------------------------------------------------------------- lu

def _lu_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    a = inputs[0]
    m, n = _matrices(a, "lu", square=False)
    i32 = np.dtype(np.int32)
    return [(a.shape, a.dtype), (a.shape[:-2] + (min(m, n),), i32), (a.shape[:-2] + (m,), i32)]


def _zeros(shape: tuple[int, ...], dtype: np.dtype) -> Variable:
    return broadcast_to(_const(np.zeros(()), dtype), shape)


def _lu_factors(lu: Variable) -> tuple[Variable, Variable]:
    """The unit-lower (m, m) and upper (n, n) factors of packed `lu`, padded with identity."""
    *batch, m, n = lu.shape
    k = min(m, n)
    low = _tril(lu[..., :, :k], -1)
    if m > k:
        low = concatenate([low, _zeros((*batch, m, m - k), lu.dtype)], lu.ndim - 1)
    up = _triu(lu[..., :k, :])
    if n > k:
        up = concatenate([up, _zeros((*batch, n - k, n), lu.dtype)], lu.ndim - 2)
    pad = np.diag(np.arange(n) >= k).astype(float)
    return add(low, _eye(m, lu.dtype)), add(up, _const(pad, lu.dtype))


def _g_lu(op: Op, g: list, need: list) -> list:
    """The adjoint of jax's LU JVP: with X = L^-1 P a_dot U^-1, lu_dot = L tril(X, -1) +
    triu(X) U, so a_bar = P^T L^-T [tril(L^T g, -1) + triu(g U^T)] U^-T."""
    lu, _, perm = op.outputs
    low, up = _lu_factors(lu)
    z = add(_tril(matmul(_mT(low), g[0]), -1), _triu(matmul(g[0], _mT(up))))
    w = triangular_solve(low, z, left_side=True, lower=True, transpose_a=True, unit_diagonal=True)
    w = triangular_solve(up, w, left_side=False, lower=False, transpose_a=True)
    p = one_hot(perm, lu.shape[-2], dtype=lu.dtype)
    return [matmul(_mT(p), w)]


register("lu", _lu_rule, "lax.linalg.lu({0})", _g_lu, public="linalg.lu")


def lax_lu(a: Variable) -> list[Variable]:
    """lax.linalg.lu: (packed lu, pivots, permutation), with P a = L U for P from permutation."""
    return emit("lu", [a])


@public_in("linalg")
def lu(a: Any, permute_l: bool = False, overwrite_a: bool = False,
       check_finite: bool = True) -> tuple[Variable, ...]:
    """jax.scipy.linalg.lu: (p, l, u) with a = p @ l @ u, or (p @ l, u) if `permute_l`."""
    (a,) = _inexact(a)
    packed, _, perm = lax_lu(a)
    m, n = a.shape[-2:]
    k = min(m, n)
    p = _mT(one_hot(perm, m, dtype=a.dtype))
    low = add(_tril(packed[..., :, :k], -1), _eye(m, a.dtype, k))
    up = _triu(packed[..., :k, :])
    return (matmul(p, low), up) if permute_l else (p, low, up)


# ---------------------------------------------------------------- composites

def _pinv_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    a = inputs[0]
    m, n = _matrices(a, "pinv", square=False)
    return [(a.shape[:-2] + (n, m), a.dtype)]


def _g_pinv(op: Op, g: list, need: list) -> list:
    """The adjoint of jax's pinv JVP (Golub and Pereyra; constant rank): with p = pinv(a),
    a_bar = -p^T g p^T + (I - a p) g^T p p^T + p^T p g^T (I - p a)."""
    a, p = op.inputs[0], op.outputs[0]
    m, n = a.shape[-2:]
    pt, gt = _mT(p), _mT(g[0])
    left = subtract(_eye(m, a.dtype), matmul(a, p))
    right = subtract(_eye(n, a.dtype), matmul(p, a))
    return [add(negative(matmul(pt, matmul(g[0], pt))),
                add(matmul(left, matmul(gt, matmul(p, pt))),
                    matmul(matmul(pt, p), matmul(gt, right))))]


@defop("pinv", _pinv_rule, "jnp.linalg.pinv({0}, rtol={rtol})", _g_pinv, namespace="linalg")
def pinv(a: Any, rtol: float | None = None, hermitian: bool = False, *,
         rcond: float | None = None) -> Emitted:
    """jnp.linalg.pinv (singular values <= rtol * largest are dropped); a static `rtol`, no
    `hermitian=True`. Its gradient is jax's (exact where the rank is constant)."""
    what = "linalg.pinv"
    if hermitian:
        raise ShapeError("hermitian=True is not supported", op=what)
    if rcond is not None:
        if rtol is not None:
            raise ShapeError("pass rtol or rcond, not both", op=what)
        rtol = rcond
    if isinstance(rtol, Variable) or (rtol is not None and np.ndim(rtol)):
        raise ShapeError("rtol must be a Python number or None", op=what)
    (a,) = _inexact(a)
    return [a], {"rtol": None if rtol is None else float(rtol)}


@public_in("linalg")
def matrix_power(a: Any, n: int) -> Variable:
    """jnp.linalg.matrix_power: a^n for an integer n (negative: of inv(a)), by squaring."""
    what = "linalg.matrix_power"
    a = as_var(a)
    _matrices(a, what, floating=False)
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
        raise ShapeError(f"the exponent must be an integer, got {n!r}", op=what)
    n = int(n)
    if n == 0:
        return broadcast_to(_eye(a.shape[-1], a.dtype), a.shape)
    if n < 0:
        a, n = inv(a), -n
    if n == 3:  # as jax multiplies
        return matmul(matmul(a, a), a)
    result = None
    base = a
    while True:
        if n & 1:
            result = base if result is None else matmul(result, base)
        n >>= 1
        if not n:
            return result
        base = matmul(base, base)


def _vector_norm(x: Variable, ord: Any, axes: tuple[int, ...], keepdims: bool) -> Variable:
    if ord is None or ord == 2:
        return sqrt(reduce_sum(multiply(x, x), axes, keepdims=keepdims))
    if ord == np.inf:
        return reduce_max(abs(x), axes, keepdims=keepdims)
    if ord == -np.inf:
        return reduce_min(abs(x), axes, keepdims=keepdims)
    if ord == 0:
        return reduce_sum(astype(not_equal(x, 0), x.dtype), axes, keepdims=keepdims)
    if ord == 1:
        return reduce_sum(abs(x), axes, keepdims=keepdims)
    if isinstance(ord, str):
        raise ShapeError(f"invalid order {ord!r} for a vector norm", op="linalg.norm")
    p = float(ord)
    return power(reduce_sum(power(abs(x), p), axes, keepdims=keepdims), 1.0 / p)


def _matrix_norm(x: Variable, ord: Any, row: int, col: int, keepdims: bool) -> Variable:
    if ord is None or ord in ("f", "fro"):
        return sqrt(reduce_sum(multiply(x, x), (row, col), keepdims=keepdims))
    if ord in (1, -1, np.inf, -np.inf):
        summed, other = (row, col) if ord in (1, -1) else (col, row)
        if not keepdims and other > summed:
            other -= 1
        sums = reduce_sum(abs(x), summed, keepdims=keepdims)
        if ord in (1, np.inf):
            return reduce_max(sums, other, keepdims=keepdims)
        return reduce_min(sums, other, keepdims=keepdims)
    if ord in ("nuc", 2, -2):
        order = [i for i in range(x.ndim) if i not in (row, col)] + [row, col]
        s = svd(transpose(x, order), compute_uv=False)
        y = (reduce_max(s, -1) if ord == 2 else reduce_min(s, -1) if ord == -2
             else reduce_sum(s, -1))
        return expand_dims(y, (row, col)) if keepdims else y
    raise ShapeError(f"invalid order {ord!r} for a matrix norm", op="linalg.norm")


@public_in("linalg")
def norm(x: Any, ord: Any = None, axis: int | tuple[int, ...] | None = None,
         keepdims: bool = False) -> Variable:
    """jnp.linalg.norm: a vector norm over one axis (ord None/2, 1, inf, -inf, 0, any p), a
    matrix norm over two (None/'fro', 'nuc', 1, -1, 2, -2, inf, -inf); with axis None, the
    2-norm of the flattened array if ord is None, else the vector/matrix norm of a 1-D/2-D x."""
    (x,) = _inexact(x)
    if axis is None:
        if ord is None:
            return sqrt(reduce_sum(multiply(x, x), None, keepdims=keepdims))
        axes = tuple(range(x.ndim))
    else:
        axes = tuple(norm_axis(int(a), x.ndim) for a in
                     ((axis,) if isinstance(axis, (int, np.integer)) else axis))
    if len(axes) == 1:
        return _vector_norm(x, 2 if ord is None else ord, axes, keepdims)
    if len(axes) == 2:
        return _matrix_norm(x, ord, axes[0], axes[1], keepdims)
    raise ShapeError(f"norm needs one axis (vector norm) or two (matrix norm), got {axis}",
                     op="linalg.norm")


@public_in("linalg")
def trace(x: Any, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None,
          out: None = None) -> Variable:
    """NumPy's trace: the sum of the `offset` diagonal of the axis1/axis2 planes (also
    `x.trace()`; `sg.trace` is srcgrad's program tracer)."""
    what = "linalg.trace"
    if out is not None:
        raise ShapeError("out= is not supported (JAX arrays are immutable)", op=what)
    x = as_var(x)
    if x.ndim < 2:
        raise ShapeError(f"trace needs an array of rank >= 2, got {x.type_str()}", op=what)
    a1, a2 = norm_axis(axis1, x.ndim), norm_axis(axis2, x.ndim)
    if a1 == a2:
        raise ShapeError(f"axis1 and axis2 are the same axis ({axis1}, {axis2})", op=what)
    mask = np.eye(x.shape[a1], x.shape[a2], offset, dtype=bool)
    shape = [1] * x.ndim
    shape[a1], shape[a2] = x.shape[a1], x.shape[a2]
    picked = where(_const(mask.reshape(shape) if a1 < a2 else mask.T.reshape(shape), np.dtype(bool)),
                   x, 0)
    out = reduce_sum(picked, (a1, a2), dtype=dtype)
    return out if dtype is None else astype(out, dtype)  # (sg.sum widens an int dtype=)
