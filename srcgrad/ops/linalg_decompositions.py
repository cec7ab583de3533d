"""`sg.linalg`'s decompositions as primitives: cholesky, triangular_solve, eigh, svd, qr and
lu, lowered to lax.linalg with its semantics (so a jaxpr maps onto them), and the
jax.numpy.linalg / jax.scipy.linalg functions over them. The solves and the functions built
on these are in linalg_functions.py.

Each primitive's gradient is the adjoint of the forward-mode rule JAX uses, written in srcgrad
ops, so it can be differentiated again. Complex matrices give JAX's values; the gradients of
cholesky, eigh, svd and qr are for real ones (a complex one's is a GradientError); lu's and
triangular_solve's hold for both. Ints are promoted to floats.

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import jax.numpy as jnp
import numpy as np

from ..base import dtypes
from ..core.builder import as_var, emit
from ..base.errors import GradientError, ShapeError
from ..ir.program import Op, Variable
from ..core.registry import OutType, register
from .rules import broadcast_shapes, jax_dtype, require_float
from ..core.declare import Emitted, defop, public_in
from .elementwise import add, astype, conj, divide, multiply, negative, reciprocal, subtract, where
from .grad_helpers import is_known_zero
from .indexing import one_hot
from .contraction import const_array, matmul
from .shape import broadcast_to, concatenate, expand_dims, reshape, swapaxes


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


# ---------------------------------------------------------------- helpers


def matrix_t(x: Variable) -> Variable:
    """The transpose of the last two axes (jax's `x.mT`)."""
    return swapaxes(x, -1, -2)


def matrix_h(x: Variable) -> Variable:
    """The conjugate transpose of the last two axes (jax's `x.mH`; `x.mT` of a real x)."""
    return conj(matrix_t(x))


def real_dtype(x: Variable) -> np.dtype:
    """The dtype of |x|: x's own, or the real dtype of a complex x's precision."""
    return jax_dtype(jnp.abs, x.dtype)


def _real_rule_only(op: Op) -> None:
    """A GradientError for the gradient of a decomposition of complex matrices: its rule is
    written for real ones (JAX's conjugates where the real rule transposes)."""
    a = op.inputs[0]
    if a.dtype.kind == "c":
        raise GradientError(
            f"the gradient of {op.type} of complex matrices ({a.type_str()}) "
            "is not supported: its rule is for real matrices",
            op=op.type,
            loc=op.loc,
        )


def const(value: np.ndarray, dtype: np.dtype) -> Variable:
    """A constant array of `dtype` (canonicalized)."""
    return const_array(value, dtypes.canonical(dtype))


def identity_matrix(n: int, dtype: np.dtype, m: int | None = None) -> Variable:
    """The n x m (n x n) identity as a constant of `dtype`."""
    return const(np.eye(n, m), dtype)


def _tril(x: Variable, k: int = 0) -> Variable:
    """The lower triangle (diagonal `k` and below) of the last two axes; zeros elsewhere."""
    mask = np.tri(x.shape[-2], x.shape[-1], k, dtype=bool)
    return where(const(mask, np.dtype(bool)), x, 0)


def _triu(x: Variable, k: int = 0) -> Variable:
    mask = ~np.tri(x.shape[-2], x.shape[-1], k - 1, dtype=bool)
    return where(const(mask, np.dtype(bool)), x, 0)


def _diag(v: Variable) -> Variable:
    """The matrices with diagonal `v` (last axis)."""
    n = v.shape[-1]
    return multiply(expand_dims(v, -2), identity_matrix(n, v.dtype))


def column(v: Variable) -> Variable:
    """`v[..., :, None]`."""
    return expand_dims(v, -1)


def row_vector(v: Variable) -> Variable:
    """`v[..., None, :]`."""
    return expand_dims(v, -2)


def inexact_all(*xs: Any) -> list[Variable]:
    """The arguments as Variables of one floating-point dtype (as jnp's promote_dtypes_inexact)."""
    vs = [as_var(x) for x in xs]
    dt = vs[0].dtype
    for v in vs[1:]:
        dt = dtypes.promote(dt, v.dtype)
    dt = dtypes.to_inexact(dt)
    return [astype(v, dt) for v in vs]


def check_matrices(
    x: Variable, what: str, square: bool = True, floating: bool = True
) -> tuple[int, int]:
    """Check that `x` is a (batch of) matrices, square if `square`, floating-point if
    `floating`; return (m, n)."""
    if x.ndim < 2:
        raise ShapeError(
            f"{what} needs an array of rank >= 2 (a batch of matrices), got {x.type_str()}"
        )
    m, n = x.shape[-2:]
    if square and m != n:
        raise ShapeError(f"{what} needs square matrices (..., n, n), got {x.type_str()}")
    if floating:
        require_float(x, what)
    return m, n


def _square_rule(what: str) -> Any:
    def infer(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
        x = inputs[0]
        check_matrices(x, what)
        return [(x.shape, x.dtype)]

    return infer


# ---------------------------------------------------------------- cholesky


def _g_cholesky(op: Op, g: list, need: list) -> list:
    """S_bar = L^-T phi(L^T L_bar) L^-1, phi = lower triangle with the diagonal halved."""
    _real_rule_only(op)
    low = op.outputs[0]
    n = low.shape[-1]
    phi = const(np.tril(np.ones((n, n))) - 0.5 * np.eye(n), low.dtype)
    p = multiply(matmul(matrix_t(low), g[0]), phi)
    tmp = triangular_solve(low, p, left_side=True, lower=True, transpose_a=True)
    return [_read_triangle(triangular_solve(low, tmp, left_side=False, lower=True), True)]


def _read_triangle(g: Variable, lower: bool) -> Variable:
    """The gradient of a function of the symmetric matrix built from one triangle of `a`
    (LAPACK reads only that one), from the gradient `g` with respect to that matrix: each
    off-diagonal entry of the triangle stands for two entries, the other triangle for none.
    Symmetrizing `a` first (symmetrize_input) gives (g + g^T) / 2 either way."""
    if lower:
        return add(_tril(g), _tril(matrix_t(g), -1))
    return add(_triu(g), _triu(matrix_t(g), 1))


@defop(
    "cholesky",
    _square_rule("cholesky"),
    "lax.linalg.cholesky({0}, symmetrize_input=False)",
    _g_cholesky,
    export="linalg.cholesky",
)
def lax_cholesky(x: Variable) -> Emitted:
    """lax.linalg.cholesky without symmetrizing: the lower factor, from the lower triangle."""
    return [x], {}


@public_in("linalg")
def cholesky(a: Any, *, upper: bool = False, symmetrize_input: bool = True) -> Variable:
    """jnp.linalg.cholesky: the lower (or `upper`) Cholesky factor; NaN if not positive
    definite. `symmetrize_input` uses (a + a^H) / 2, as jax does (so the gradient is symmetric)."""
    (a,) = inexact_all(a)
    if symmetrize_input:
        check_matrices(a, "linalg.cholesky")
        a = multiply(add(a, matrix_h(a)), 0.5)
    low = lax_cholesky(a)
    return matrix_h(low) if upper else low


# ---------------------------------------------------------------- triangular solve


def _trisolve_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    a, b = inputs
    check_matrices(a, "triangular_solve")
    if b.ndim != a.ndim or a.shape[:-2] != b.shape[:-2]:
        raise ShapeError(
            f"triangular_solve needs b of a's batch shape and rank, got "
            f"{a.type_str()} and {b.type_str()}"
        )
    common = b.shape[-2] if attrs["left_side"] else b.shape[-1]
    if common != a.shape[-1]:
        raise ShapeError(
            f"triangular_solve: a {a.type_str()} does not match b {b.type_str()} "
            f"(left_side={attrs['left_side']})"
        )
    if a.dtype != b.dtype:
        raise ShapeError(f"triangular_solve needs one dtype, got {a.type_str()} and {b.type_str()}")
    return [(b.shape, b.dtype)]


def _g_trisolve(op: Op, g: list, need: list) -> list:
    """b_bar = op(a)^-T g; a_bar = -b_bar x^T (left) or -x^T b_bar (right), transposed if
    op(a) = a^T, on the triangle the solve reads."""
    a, _ = op.inputs
    x = op.outputs[0]
    at = op.attrs
    gb = triangular_solve(
        a,
        g[0],
        left_side=at["left_side"],
        lower=at["lower"],
        transpose_a=not at["transpose_a"],
        unit_diagonal=at["unit_diagonal"],
    )
    ga = None
    if need[0]:
        if at["left_side"]:
            ga = matmul(x, matrix_t(gb)) if at["transpose_a"] else matmul(gb, matrix_t(x))
        else:
            ga = matmul(matrix_t(gb), x) if at["transpose_a"] else matmul(matrix_t(x), gb)
        unit = 1 if at["unit_diagonal"] else 0
        ga = negative(_tril(ga, -unit) if at["lower"] else _triu(ga, unit))
    return [ga, gb if need[1] else None]


def _lower_trisolve(args: list[str], attrs: dict[str, str]) -> str:
    return (
        f"lax.linalg.triangular_solve({args[0]}, {args[1]}, left_side={attrs['left_side']}, "
        f"lower={attrs['lower']}, transpose_a={attrs['transpose_a']}, "
        f"unit_diagonal={attrs['unit_diagonal']})"
    )


@defop(
    "triangular_solve",
    _trisolve_rule,
    _lower_trisolve,
    _g_trisolve,
    export="linalg.solve_triangular",
)
def triangular_solve(
    a: Variable,
    b: Variable,
    *,
    left_side: bool = False,
    lower: bool = False,
    transpose_a: bool = False,
    unit_diagonal: bool = False,
) -> Emitted:
    """lax.linalg.triangular_solve (real): x with op(a) x = b (left_side) or x op(a) = b."""
    return [a, b], {
        "left_side": bool(left_side),
        "lower": bool(lower),
        "transpose_a": bool(transpose_a),
        "unit_diagonal": bool(unit_diagonal),
    }


@public_in("linalg")
def solve_triangular(
    a: Any,
    b: Any,
    trans: int | str = 0,
    lower: bool = False,
    unit_diagonal: bool = False,
    overwrite_b: bool = False,
    debug: Any = None,
    check_finite: bool = True,
) -> Variable:
    """jax.scipy.linalg.solve_triangular: x with a x = b (`trans` 0/'N'), a^T x = b (1/'T',
    2/'C'); b is (n,) or (..., n, k); batch dimensions broadcast."""
    what = "linalg.solve_triangular"
    transpose = {0: False, "N": False, 1: True, "T": True, 2: True, "C": True}.get(trans)
    if transpose is None:
        raise ShapeError(f"invalid trans value {trans!r} (0, 1, 2, 'N', 'T' or 'C')", op=what)
    a, b = inexact_all(a, b)
    check_matrices(a, what)
    vector = b.ndim == 1
    if vector:
        b = column(b)
    if b.ndim < 2 or b.shape[-2] != a.shape[-1]:
        raise ShapeError(
            f"b must be (n,) or (..., n, k) for a {a.type_str()}, got {b.type_str()}", op=what
        )
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = broadcast_to(a, batch + a.shape[-2:])
    b = broadcast_to(b, batch + b.shape[-2:])
    x = triangular_solve(
        a, b, left_side=True, lower=lower, transpose_a=transpose, unit_diagonal=unit_diagonal
    )
    return reshape(x, x.shape[:-1]) if vector else x


# ---------------------------------------------------------------- eigh


def _eigh_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    a = inputs[0]
    check_matrices(a, "eigh")
    return [(a.shape, a.dtype), (a.shape[:-1], real_dtype(a))]


def _g_eigh(op: Op, g: list, need: list) -> list:
    """a_bar = V (diag(w_bar) + F * (V^T V_bar)) V^T, F_ij = 1 / (w_j - w_i) off the diagonal
    (distinct eigenvalues)."""
    _real_rule_only(op)
    v, w = op.outputs
    gv, gw = g
    inner = _diag(gw)
    if not is_known_zero(gv):
        eye = identity_matrix(w.shape[-1], w.dtype)
        f = subtract(reciprocal(add(eye, subtract(row_vector(w), column(w)))), eye)
        inner = add(inner, multiply(f, matmul(matrix_t(v), gv)))
    return [_read_triangle(matmul(v, matmul(inner, matrix_t(v))), op.attrs["lower"])]


register(
    "eigh",
    _eigh_rule,
    "lax.linalg.eigh({0}, lower={lower}, symmetrize_input=False)",
    _g_eigh,
    public="linalg.eigh",
)


@public_in("linalg")
def eigh(a: Any, UPLO: str | None = None, symmetrize_input: bool = True) -> EighResult:
    """jnp.linalg.eigh: ascending eigenvalues and eigenvectors (columns) of symmetric matrices,
    read from the lower (UPLO 'L', default) or upper triangle; `symmetrize_input` uses
    (a + a^H) / 2 as jax does. Gradients need distinct eigenvalues (and real matrices)."""
    if UPLO not in (None, "L", "U"):
        raise ShapeError(f"UPLO must be None, 'L' or 'U', got {UPLO!r}", op="linalg.eigh")
    (a,) = inexact_all(a)
    if symmetrize_input:
        check_matrices(a, "linalg.eigh")
        a = multiply(add(a, matrix_h(a)), 0.5)
    v, w = emit("eigh", [a], {"lower": UPLO != "U"})
    return EighResult(w, v)


# ---------------------------------------------------------------- svd


def _svd_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    a = inputs[0]
    m, n = check_matrices(a, "svd", square=False)
    k = min(m, n)
    batch = a.shape[:-2]
    s = (batch + (k,), real_dtype(a))
    if not attrs["compute_uv"]:
        return [s]
    if attrs["full_matrices"]:
        return [(batch + (m, m), a.dtype), s, (batch + (n, n), a.dtype)]
    return [(batch + (m, k), a.dtype), s, (batch + (k, n), a.dtype)]


def _g_svd(op: Op, g: list, need: list) -> list:
    """The adjoint of jax's svd JVP (distinct, nonzero singular values): a_bar =
    U [diag(s_bar) + (J + J^T) S + S (K + K^T)] V^T plus the terms of the complement of
    U (tall) or V (wide), J = F * (U^T U_bar), K = F * (V^T V_bar), F_ij = 1/(s_j^2 - s_i^2)."""
    _real_rule_only(op)
    a = op.inputs[0]
    m, n = a.shape[-2:]
    if not op.attrs["compute_uv"]:
        u, s, vh = emit("svd", [a], {"full_matrices": False, "compute_uv": True})
        return [matmul(multiply(u, row_vector(g[0])), vh)]
    if op.attrs["full_matrices"] and m != n:
        raise GradientError(
            f"svd with full_matrices=True of a non-square {a.type_str()} has "
            "no gradient (the extra singular vectors are not unique); use "
            "full_matrices=False",
            op="svd",
            loc=op.loc,
        )
    u, s, vh = op.outputs
    gu, gs, gvh = g
    eye = identity_matrix(s.shape[-1], s.dtype)
    s2 = multiply(s, s)
    f = subtract(reciprocal(add(eye, subtract(row_vector(s2), column(s2)))), eye)
    core = _diag(gs)
    with_u, with_v = not is_known_zero(gu), not is_known_zero(gvh)
    if with_u:
        j = multiply(f, matmul(matrix_t(u), gu))
        core = add(core, multiply(add(j, matrix_t(j)), row_vector(s)))
    if with_v:
        k = multiply(f, matmul(vh, matrix_t(gvh)))
        core = add(core, multiply(column(s), add(k, matrix_t(k))))
    ga = matmul(u, matmul(core, vh))
    if m > n and with_u:
        rest = subtract(gu, matmul(u, matmul(matrix_t(u), gu)))
        ga = add(ga, matmul(divide(rest, row_vector(s)), vh))
    if n > m and with_v:
        rest = subtract(gvh, matmul(matmul(gvh, matrix_t(vh)), vh))
        ga = add(ga, matmul(u, divide(rest, column(s))))
    return [ga]


def _lower_svd(args: list[str], attrs: dict[str, str]) -> str:
    return (
        f"lax.linalg.svd({args[0]}, full_matrices={attrs['full_matrices']}, "
        f"compute_uv={attrs['compute_uv']})"
    )


register("svd", _svd_rule, _lower_svd, _g_svd, public="linalg.svd")


@public_in("linalg")
def svd(
    a: Any,
    full_matrices: bool = True,
    compute_uv: bool = True,
    hermitian: bool = False,
    subset_by_index: Any = None,
) -> SVDResult | Variable:
    """jnp.linalg.svd: (U, S, Vh) with descending S, or S alone when not `compute_uv`.
    Gradients need distinct nonzero singular values (and full_matrices=False unless square)."""
    what = "linalg.svd"
    if hermitian or subset_by_index is not None:
        raise ShapeError("hermitian=True and subset_by_index are not supported", op=what)
    (a,) = inexact_all(a)
    outs = emit("svd", [a], {"full_matrices": bool(full_matrices), "compute_uv": bool(compute_uv)})
    return SVDResult(*outs) if compute_uv else outs[0]


# ---------------------------------------------------------------- qr


def _qr_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    a = inputs[0]
    m, n = check_matrices(a, "qr", square=False)
    k = m if attrs["full_matrices"] else min(m, n)
    return [(a.shape[:-2] + (m, k), a.dtype), (a.shape[:-2] + (k, n), a.dtype)]


def _qr_thin_vjp(q: Variable, r: Variable, gq: Variable, gr: Variable) -> Variable:
    """The adjoint of jax's thin-QR JVP (m >= n): a_bar = (Q N + Q_bar) R^-T,
    M = R_bar R^T - Q^T Q_bar, N = M - tril(M - M^T, -1)."""
    mm = subtract(matmul(gr, matrix_t(r)), matmul(matrix_t(q), gq))
    nn = subtract(mm, _tril(subtract(mm, matrix_t(mm)), -1))
    return triangular_solve(
        r, add(matmul(q, nn), gq), left_side=False, lower=False, transpose_a=True
    )


def _g_qr(op: Op, g: list, need: list) -> list:
    _real_rule_only(op)
    a = op.inputs[0]
    m, n = a.shape[-2:]
    q, r = op.outputs
    gq, gr = g
    if m >= n:
        if op.attrs["full_matrices"] and m > n:
            raise GradientError(
                f"qr with mode='complete' of a tall {a.type_str()} has no "
                "gradient here; use mode='reduced'",
                op="qr",
                loc=op.loc,
            )
        return [_qr_thin_vjp(q, r, gq, gr)]
    # Wide: a = [a1 a2] with q r1 = a1 (square) and r2 = q^T a2.
    a2, r1, gr1, gr2 = a[..., :, m:], r[..., :, :m], gr[..., :, :m], gr[..., :, m:]
    ga1 = _qr_thin_vjp(q, r1, add(gq, matmul(a2, matrix_t(gr2))), gr1)
    return [concatenate([ga1, matmul(q, gr2)], a.ndim - 1)]


register(
    "qr", _qr_rule, "lax.linalg.qr({0}, full_matrices={full_matrices})", _g_qr, public="linalg.qr"
)


@public_in("linalg")
def qr(a: Any, mode: str = "reduced") -> QRResult | Variable:
    """jnp.linalg.qr with mode 'reduced', 'complete' or 'r' (R alone)."""
    if mode not in ("reduced", "complete", "r"):
        raise ShapeError(f"mode must be 'reduced', 'complete' or 'r', got {mode!r}", op="linalg.qr")
    (a,) = inexact_all(a)
    q, r = emit("qr", [a], {"full_matrices": mode == "complete"})
    return r if mode == "r" else QRResult(q, r)


# ---------------------------------------------------------------- lu


def _lu_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    a = inputs[0]
    m, n = check_matrices(a, "lu", square=False)
    i32 = np.dtype(np.int32)
    return [(a.shape, a.dtype), (a.shape[:-2] + (min(m, n),), i32), (a.shape[:-2] + (m,), i32)]


def _zeros(shape: tuple[int, ...], dtype: np.dtype) -> Variable:
    return broadcast_to(const(np.zeros(()), dtype), shape)


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
    return add(low, identity_matrix(m, lu.dtype)), add(up, const(pad, lu.dtype))


def _g_lu(op: Op, g: list, need: list) -> list:
    """The adjoint of jax's LU JVP: with X = L^-1 P a_dot U^-1, lu_dot = L tril(X, -1) +
    triu(X) U, so a_bar = P^T L^-T [tril(L^T g, -1) + triu(g U^T)] U^-T."""
    lu, _, perm = op.outputs
    low, up = _lu_factors(lu)
    z = add(_tril(matmul(matrix_t(low), g[0]), -1), _triu(matmul(g[0], matrix_t(up))))
    w = triangular_solve(low, z, left_side=True, lower=True, transpose_a=True, unit_diagonal=True)
    w = triangular_solve(up, w, left_side=False, lower=False, transpose_a=True)
    p = one_hot(perm, lu.shape[-2], dtype=lu.dtype)
    return [matmul(matrix_t(p), w)]


register("lu", _lu_rule, "lax.linalg.lu({0})", _g_lu, public="linalg.lu")


def lax_lu(a: Variable) -> list[Variable]:
    """lax.linalg.lu: (packed lu, pivots, permutation), with P a = L U for P from permutation."""
    return emit("lu", [a])


@public_in("linalg")
def lu(
    a: Any, permute_l: bool = False, overwrite_a: bool = False, check_finite: bool = True
) -> tuple[Variable, ...]:
    """jax.scipy.linalg.lu: (p, l, u) with a = p @ l @ u, or (p @ l, u) if `permute_l`."""
    (a,) = inexact_all(a)
    packed, _, perm = lax_lu(a)
    m, n = a.shape[-2:]
    k = min(m, n)
    p = matrix_t(one_hot(perm, m, dtype=a.dtype))
    low = add(_tril(packed[..., :, :k], -1), identity_matrix(m, a.dtype, k))
    up = _triu(packed[..., :k, :])
    return (matmul(p, low), up) if permute_l else (p, low, up)
