"""jax.numpy's polynomial functions over coefficient arrays (highest power first): polyval,
polyadd, polysub, polymul, polydiv, polyder, polyint, poly (from roots) and polyfit.

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

import builtins
from typing import Any

from ..base import dtypes
from ..base.errors import ShapeError
from ..core.builder import as_var
from ..core.declare import public
from ..ir.program import Variable
from . import elementwise
from . import reduce
from .construct import vander
from .creation import arange, ones, zeros
from .linalg_decompositions import qr, solve_triangular
from .operands import inexact, promoted
from .reduce import sum
from .rules import broadcast_shapes
from .shape import broadcast_to, concatenate, expand_dims, reshape, stack
from .statistics import convolve


@public
def polyval(p: Any, x: Any, *, unroll: int = 16) -> Variable:
    """jnp.polyval: p[0] * x**(n-1) + ... + p[n-1], by Horner's rule."""
    p, x = promoted(p, x)
    out = zeros(broadcast_shapes(x.shape, p.shape[1:]), x.dtype)
    for i in range(p.shape[0]):
        out = out * x + p[i]
    return out


def _pad_front(p: Variable, n: int) -> Variable:
    return p if p.shape[0] == n else concatenate([zeros((n - p.shape[0],), p.dtype), p], 0)


@public
def polyadd(a1: Any, a2: Any) -> Variable:
    """jnp.polyadd: the sum of two polynomials (coefficients, highest power first)."""
    a1, a2 = promoted(a1, a2)
    n = max(a1.shape[0], a2.shape[0])
    return _pad_front(a1, n) + _pad_front(a2, n)


@public
def polysub(a1: Any, a2: Any) -> Variable:
    """jnp.polysub: the difference of two polynomials."""
    a1, a2 = promoted(a1, a2)
    n = max(a1.shape[0], a2.shape[0])
    return _pad_front(a1, n) - _pad_front(a2, n)


@public
def polymul(a1: Any, a2: Any, *, trim_leading_zeros: bool = False) -> Variable:
    """jnp.polymul: the product of two polynomials (a full convolution)."""
    a1, a2 = promoted(a1, a2, inexact=True)
    n, m = a1.shape[0], a2.shape[0]
    rows = [
        concatenate([zeros((i,), a1.dtype), a1 * a2[i], zeros((m - 1 - i,), a1.dtype)], 0)
        for i in range(m)
    ]
    return sum(concatenate([expand_dims(r, 0) for r in rows], 0), 0) if n + m > 1 else a1 * a2


@public
def polyder(p: Any, m: int = 1) -> Variable:
    """jnp.polyder: the m-th derivative of a polynomial."""
    p = promoted(p, inexact=True)[0]
    for _ in range(m):
        n = p.shape[0] - 1
        p = p[:-1] * arange(n, 0, -1, dtype=p.dtype) if n > 0 else p[:0]
    return p


@public
def polyint(p: Any, m: int = 1, k: Any = None) -> Variable:
    """jnp.polyint: the m-th antiderivative, integration constants `k` (default zeros)."""
    if k is None:
        p = promoted(p, inexact=True)[0]
        ks = zeros((m,), p.dtype)
    else:
        p, ks = promoted(p, k, inexact=True)
        ks = reshape(ks, (-1,))
    if ks.shape[0] == 1 and m > 1:
        ks = broadcast_to(ks, (m,))
    for i in range(m):
        n = p.shape[0]
        scaled = p / arange(n, 0, -1, dtype=p.dtype) if n else p
        p = concatenate([scaled, reshape(ks[i], (1,))], 0)
    return p


@public
def poly(seq_of_zeros: Any) -> Variable:
    """jnp.poly of a 1-D sequence of (real) roots: the monic polynomial's coefficients (the
    2-D matrix form needs complex eigenvalues and is not supported)."""
    z = inexact(seq_of_zeros)
    if z.ndim == 0:
        z = reshape(z, (1,))
    if z.ndim != 1:
        raise ShapeError(
            f"poly takes a 1-D array of roots here, got {z.type_str()} (the "
            "square-matrix form needs complex eigenvalues)",
            op="poly",
        )
    if z.shape[0] == 0:
        return ones((), z.dtype)
    a = ones((1,), z.dtype)
    for k in range(z.shape[0]):
        a = convolve(
            a,
            stack([elementwise.astype(as_var(1.0), z.dtype), elementwise.negative(z[k])]),
            mode="full",
        )
    return a


@public
def polydiv(u: Any, v: Any, *, trim_leading_zeros: bool = False) -> tuple[Variable, Variable]:
    """jnp.polydiv(u, v): the quotient and remainder (remainder as long as `u`, leading zeros
    kept; trim_leading_zeros needs concrete values and is refused)."""
    if trim_leading_zeros:
        raise ShapeError(
            "polydiv(trim_leading_zeros=True) has a value-dependent shape", op="polydiv"
        )
    u, v = inexact(u), inexact(v)
    dt = dtypes.promote(u.dtype, v.dtype)
    u, v = elementwise.astype(u, dt), elementwise.astype(v, dt)
    m, n = u.shape[0] - 1, v.shape[0] - 1
    scale = elementwise.divide(1.0, v[0])
    q = zeros((builtins.max(m - n + 1, 1),), u.dtype)
    for k in range(0, m - n + 1):
        d = elementwise.multiply(scale, u[k])
        q = q.at[k].set(d)
        u = u.at[k : k + n + 1].add(elementwise.negative(elementwise.multiply(d, v)))
    return q, u


@public
def polyfit(
    x: Any,
    y: Any,
    deg: int,
    rcond: float | None = None,
    full: bool = False,
    w: Any = None,
    cov: bool = False,
) -> Variable:
    """jnp.polyfit(x, y, deg, w=): least-squares coefficients, highest power first, for
    full-rank problems (solved by QR of the column-scaled Vandermonde matrix; `full=` and
    `cov=` are not supported)."""
    if full or cov:
        raise ShapeError("polyfit: full= and cov= are not supported", op="polyfit")
    x, y = inexact(x), inexact(y)
    if x.ndim != 1 or y.ndim not in (1, 2) or x.shape[0] != y.shape[0]:
        raise ShapeError(
            f"polyfit needs 1-D x and 1-D/2-D y of one length, got {x.type_str()}, {y.type_str()}",
            op="polyfit",
        )
    lhs, rhs = vander(x, deg + 1), y
    if w is not None:
        w = inexact(w)
        lhs = elementwise.multiply(lhs, w[:, None])
        rhs = elementwise.multiply(rhs, w[:, None] if rhs.ndim == 2 else w)
    scale = elementwise.sqrt(reduce.sum(elementwise.multiply(lhs, lhs), 0))
    lhs = elementwise.divide(lhs, scale[None, :])
    q, r = qr(lhs)
    c = solve_triangular(r, elementwise.conj(q).T @ rhs, lower=False)  # (Q^H: complex x too)
    return elementwise.divide(c, scale[:, None] if c.ndim == 2 else scale)
