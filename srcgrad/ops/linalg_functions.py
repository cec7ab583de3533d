"""`sg.linalg`'s solves and the functions built on the decompositions of
linalg_decompositions.py: solve (a primitive), inv, det, slogdet, pinv, matrix_power, norm and
trace.

As in linalg_decompositions.py, each gradient is written in srcgrad ops, so it can be
differentiated again.

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import numpy as np

from ..base import dtypes
from ..core.builder import as_var, emit
from ..base.errors import ShapeError
from ..ir.program import Op, Variable
from ..core.registry import OutType, register
from .rules import broadcast_shapes, norm_axis
from ..core.declare import Emitted, defop, public_in
from .creation import zeros_like
from .grad_helpers import is_known_zero
from .linalg_decompositions import (
    check_matrices,
    column,
    const,
    identity_matrix,
    inexact_all,
    lax_lu,
    matrix_t,
    real_dtype,
    row_vector,
    svd,
    triangular_solve,
)
from .elementwise import (
    abs,
    add,
    astype,
    complex_,
    imag,
    isfinite,
    logical_not,
    multiply,
    negative,
    not_equal,
    power,
    reciprocal,
    sqrt,
    subtract,
    where,
)
from .indexing import one_hot
from .contraction import matmul
from .reduce import max as reduce_max
from .reduce import min as reduce_min
from .reduce import prod as reduce_prod
from .reduce import squared_magnitude
from .reduce import sum as reduce_sum
from .shape import broadcast_to, expand_dims, reshape, stack, transpose


class SlogdetResult(NamedTuple):
    sign: Any
    logabsdet: Any


def _inv_t(a: Variable) -> Variable:
    """inv(a)^T, as solve(a^T, I)."""
    n = a.shape[-1]
    return solve(matrix_t(a), broadcast_to(identity_matrix(n, a.dtype), a.shape))


# ---------------------------------------------------------------- solve, det, slogdet, inv


def _solve_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    a, b = inputs
    m, _ = check_matrices(a, "solve")
    dt = dtypes.promote(a.dtype, b.dtype)
    if b.ndim == 1:
        if b.shape[0] != m:
            raise ShapeError(f"solve: b {b.type_str()} does not match a {a.type_str()}")
        return [(a.shape[:-2] + (m,), dt)]
    if b.ndim < 2 or b.shape[-2] != m:
        raise ShapeError(
            f"solve: b must be (m,) or (..., m, k) for a {a.type_str()}, got {b.type_str()}"
        )
    return [(broadcast_shapes(a.shape[:-2], b.shape[:-2]) + b.shape[-2:], dt)]


def _g_solve(op: Op, g: list, need: list) -> list:
    """b_bar = solve(a^T, g) and a_bar = -b_bar x^T (the backward walk sums over batches)."""
    a, b = op.inputs
    x = op.outputs[0]
    if b.ndim == 1:
        gb = solve(matrix_t(a), column(g[0]))
        ga = negative(matmul(gb, row_vector(x))) if need[0] else None
        return [ga, reshape(gb, gb.shape[:-1]) if need[1] else None]
    gb = solve(matrix_t(a), g[0])
    return [negative(matmul(gb, matrix_t(x))) if need[0] else None, gb if need[1] else None]


@defop("solve", _solve_rule, "jnp.linalg.solve({0}, {1})", _g_solve, namespace="linalg")
def solve(a: Any, b: Any) -> Emitted:
    """jnp.linalg.solve: x with a x = b; b is (m,) or (..., m, k), batch dimensions broadcast."""
    a, b = inexact_all(a, b)
    return [a, b], {}


@public_in("linalg")
def inv(a: Any) -> Variable:
    """jnp.linalg.inv: solve(a, I)."""
    (a,) = inexact_all(a)
    check_matrices(a, "linalg.inv")
    return solve(a, broadcast_to(identity_matrix(a.shape[-1], a.dtype), a.shape))


def _det_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    a = inputs[0]
    check_matrices(a, "det")
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
        return broadcast_to(const(np.ones(()), a.dtype), a.shape)

    def e(i: int, j: int) -> Variable:
        return a[..., i % n, j % n]

    if n == 2:
        rows = [[e(1, 1), negative(e(1, 0))], [negative(e(0, 1)), e(0, 0)]]
    else:  # the cyclic 2x2 minors carry their signs
        rows = [
            [
                subtract(
                    multiply(e(i + 1, j + 1), e(i + 2, j + 2)),
                    multiply(e(i + 1, j + 2), e(i + 2, j + 1)),
                )
                for j in range(3)
            ]
            for i in range(3)
        ]
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
    packed, pivots, perm = lax_lu(matrix_t(a))
    diag = reduce_sum(multiply(packed, identity_matrix(n, a.dtype)), -1)
    swapped = not_equal(pivots, const(np.arange(n, dtype=np.int32), np.dtype(np.int32)))
    sign = reduce_prod(where(swapped, -1.0, 1.0), -1)
    det_ = multiply(sign, reduce_prod(diag, -1))
    first = multiply(sign, reduce_prod(diag[..., :-1], -1))
    corner = const(np.arange(n * n).reshape(n, n) == n * n - 1, np.dtype(bool))
    up = where(corner, expand_dims(reciprocal(first), (-1, -2)), packed)
    x = triangular_solve(
        packed, one_hot(perm, n, dtype=a.dtype), left_side=True, lower=True, unit_diagonal=True
    )
    last_row = const(np.arange(n).reshape(n, 1) == n - 1, np.dtype(bool))
    x = multiply(x, where(last_row, 1.0, expand_dims(det_, (-1, -2))))
    x = triangular_solve(up, x, left_side=True, lower=False)
    failed = logical_not(isfinite(reduce_sum(x, (-2, -1))))
    return where(expand_dims(failed, (-1, -2)), 0.0, x)


@defop("det", _det_rule, "jnp.linalg.det({0})", _g_det, namespace="linalg")
def det(a: Any) -> Emitted:
    """jnp.linalg.det."""
    (a,) = inexact_all(a)
    return [a], {}


def _slogdet_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    a = inputs[0]
    check_matrices(a, "slogdet")
    return [(a.shape[:-2], a.dtype), (a.shape[:-2], real_dtype(a))]


def _g_slogdet(op: Op, g: list, need: list) -> list:
    """JAX's rule: with t = trace(inv(a) a_dot), logabsdet_dot = real(t) and sign_dot =
    i imag(t) sign (0 for a real a: the sign is piecewise constant), so a_bar = t_bar
    inv(a)^T with t_bar = logabsdet_bar + i imag(sign_bar sign)."""
    a, sign = op.inputs[0], op.outputs[0]
    t_bar = g[1]
    if a.dtype.kind == "c":
        turn = imag(multiply(g[0], sign)) if not is_known_zero(g[0]) else zeros_like(g[1])
        t_bar = complex_(g[1], turn)
    return [multiply(expand_dims(t_bar, (-1, -2)), _inv_t(a))]


register(
    "slogdet", _slogdet_rule, "tuple(jnp.linalg.slogdet({0}))", _g_slogdet, public="linalg.slogdet"
)


@public_in("linalg")
def slogdet(a: Any, *, method: str | None = None) -> SlogdetResult:
    """jnp.linalg.slogdet: (sign, log|det|) from an LU factorization."""
    if method not in (None, "lu"):
        raise ShapeError(f"method {method!r} is not supported (None or 'lu')", op="linalg.slogdet")
    (a,) = inexact_all(a)
    sign, logabsdet = emit("slogdet", [a])
    return SlogdetResult(sign, logabsdet)


# ---------------------------------------------------------------- composites


def _pinv_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    a = inputs[0]
    m, n = check_matrices(a, "pinv", square=False)
    return [(a.shape[:-2] + (n, m), a.dtype)]


def _g_pinv(op: Op, g: list, need: list) -> list:
    """The adjoint of jax's pinv JVP (Golub and Pereyra; constant rank): with p = pinv(a),
    a_bar = -p^T g p^T + (I - a p) g^T p p^T + p^T p g^T (I - p a)."""
    a, p = op.inputs[0], op.outputs[0]
    m, n = a.shape[-2:]
    pt, gt = matrix_t(p), matrix_t(g[0])
    left = subtract(identity_matrix(m, a.dtype), matmul(a, p))
    right = subtract(identity_matrix(n, a.dtype), matmul(p, a))
    return [
        add(
            negative(matmul(pt, matmul(g[0], pt))),
            add(matmul(left, matmul(gt, matmul(p, pt))), matmul(matmul(pt, p), matmul(gt, right))),
        )
    ]


@defop("pinv", _pinv_rule, "jnp.linalg.pinv({0}, rtol={rtol})", _g_pinv, namespace="linalg")
def pinv(
    a: Any, rtol: float | None = None, hermitian: bool = False, *, rcond: float | None = None
) -> Emitted:
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
    (a,) = inexact_all(a)
    return [a], {"rtol": None if rtol is None else float(rtol)}


@public_in("linalg")
def matrix_power(a: Any, n: int) -> Variable:
    """jnp.linalg.matrix_power: a^n for an integer n (negative: of inv(a)), by squaring."""
    what = "linalg.matrix_power"
    a = as_var(a)
    check_matrices(a, what, floating=False)
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
        raise ShapeError(f"the exponent must be an integer, got {n!r}", op=what)
    n = int(n)
    if n == 0:
        return broadcast_to(identity_matrix(a.shape[-1], a.dtype), a.shape)
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
        return sqrt(reduce_sum(squared_magnitude(x), axes, keepdims=keepdims))
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
        return sqrt(reduce_sum(squared_magnitude(x), (row, col), keepdims=keepdims))
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
        y = reduce_max(s, -1) if ord == 2 else reduce_min(s, -1) if ord == -2 else reduce_sum(s, -1)
        return expand_dims(y, (row, col)) if keepdims else y
    raise ShapeError(f"invalid order {ord!r} for a matrix norm", op="linalg.norm")


@public_in("linalg")
def norm(
    x: Any, ord: Any = None, axis: int | tuple[int, ...] | None = None, keepdims: bool = False
) -> Variable:
    """jnp.linalg.norm: a vector norm over one axis (ord None/2, 1, inf, -inf, 0, any p), a
    matrix norm over two (None/'fro', 'nuc', 1, -1, 2, -2, inf, -inf); with axis None, the
    2-norm of the flattened array if ord is None, else the vector/matrix norm of a 1-D/2-D x."""
    (x,) = inexact_all(x)
    if axis is None:
        if ord is None:
            return sqrt(reduce_sum(squared_magnitude(x), None, keepdims=keepdims))
        axes = tuple(range(x.ndim))
    else:
        axes = tuple(
            norm_axis(int(a), x.ndim)
            for a in ((axis,) if isinstance(axis, (int, np.integer)) else axis)
        )
    if len(axes) == 1:
        return _vector_norm(x, 2 if ord is None else ord, axes, keepdims)
    if len(axes) == 2:
        return _matrix_norm(x, ord, axes[0], axes[1], keepdims)
    raise ShapeError(
        f"norm needs one axis (vector norm) or two (matrix norm), got {axis}", op="linalg.norm"
    )


@public_in("linalg")
def trace(
    x: Any, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None, out: None = None
) -> Variable:
    """NumPy's trace: the sum of the `offset` diagonal of the axis1/axis2 planes (also
    `x.trace()`, and `sg.trace(x)` of an array)."""
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
    picked = where(
        const(mask.reshape(shape) if a1 < a2 else mask.T.reshape(shape), np.dtype(bool)), x, 0
    )
    out = reduce_sum(picked, (a1, a2), dtype=dtype)
    return out if dtype is None else astype(out, dtype)  # (sg.sum widens an int dtype=)
