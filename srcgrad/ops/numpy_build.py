"""jax.numpy's comparison, product, grid, selection, interpolation and polynomial names as
compositions of srcgrad ops (isclose, vdot, meshgrid, select, searchsorted, interp, polyval,
cov, ...), with jax.numpy's signatures and dtype promotion.

Layer L3 (the ops): see docs/design.md.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .. import dtypes
from ..builder import as_var
from ..errors import ShapeError
from ..ir import Variable
from ._rules import broadcast_shapes, require_real
from .creation import arange, full, zeros
from .declare import public
from .elementwise import (abs, astype, clip, conj, exp, imag, isfinite, isnan, log, logical_and,
                          real, where)
from .contraction import einsum, matmul
from .manip import moveaxis, ravel
from .numpy_reductions import all
from .reduce import mean, sum
from .shape import broadcast_to, concatenate, expand_dims, reshape
from .sort_scan import diff, take_along_axis

BOOL = np.dtype(bool)


def _promoted(*xs: Any, inexact: bool = False) -> list[Variable]:
    """The arguments in their promoted dtype (Python scalars weakly typed, as in JAX)."""
    like = next((x for x in xs if isinstance(x, Variable)), None)
    if like is None:
        like = next((as_var(x) for x in xs if not isinstance(x, (bool, int, float))), None)
    vs = [as_var(x, like=like) for x in xs]
    dt = vs[0].dtype
    for v in vs[1:]:
        dt = dtypes.promote(dt, v.dtype)
    if inexact and not dtypes.is_inexact(dt):
        dt = dtypes.default_float()
    return [astype(v, dt) for v in vs]


@public
def isclose(a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08,
            equal_nan: bool = False) -> Variable:
    """jnp.isclose: |a - b| <= atol + rtol * |b| (infinities equal to themselves)."""
    a, b = _promoted(a, b)
    if not dtypes.is_inexact(a.dtype):
        return a == b
    finite = logical_and(isfinite(a), isfinite(b))
    close = abs(a - b) <= atol + rtol * abs(b)
    out = where(finite, close, a == b)
    if equal_nan:
        out = out | logical_and(isnan(a), isnan(b))
    return out


@public
def allclose(a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08,
             equal_nan: bool = False) -> Variable:
    """jnp.allclose: all(isclose(...)), a bool scalar."""
    return all(isclose(a, b, rtol, atol, equal_nan))


@public
def array_equal(a1: Any, a2: Any, equal_nan: bool = False) -> Variable:
    """jnp.array_equal: same shape (static: else False) and all elements equal."""
    a1, a2 = as_var(a1), as_var(a2)
    if a1.shape != a2.shape:
        return full((), False, BOOL)
    eq = a1 == a2
    if equal_nan and dtypes.is_inexact(dtypes.promote(a1.dtype, a2.dtype)):
        eq = eq | logical_and(isnan(a1), isnan(a2))
    return all(eq)


@public
def array_equiv(a1: Any, a2: Any) -> Variable:
    """jnp.array_equiv: broadcastable (static: else False) and all elements equal."""
    a1, a2 = as_var(a1), as_var(a2)
    try:
        broadcast_shapes(a1.shape, a2.shape)
    except ShapeError:
        return full((), False, BOOL)
    return all(a1 == a2)


@public
def vdot(a: Any, b: Any, *, precision: Any = None,
         preferred_element_type: Any = None) -> Variable:
    """jnp.vdot: the dot product of the flattened arrays, the first conjugated."""
    return matmul(ravel(conj(a)), ravel(b))


@public
def vecdot(x1: Any, x2: Any, /, *, axis: int = -1, precision: Any = None,
           preferred_element_type: Any = None) -> Variable:
    """jnp.vecdot: the dot product along `axis` (`x1` conjugated), broadcasting the others."""
    x1, x2 = conj(as_var(x1)), as_var(x2)
    x1, x2 = moveaxis(x1, axis, -1), moveaxis(x2, axis, -1)
    return einsum("...i,...i->...", x1, x2)


@public
def matvec(x1: Any, x2: Any, /) -> Variable:
    """jnp.matvec: batched matrix-vector product (..., m, n) x (..., n) -> (..., m)."""
    return matmul(as_var(x1), expand_dims(as_var(x2), -1))[..., 0]


@public
def vecmat(x1: Any, x2: Any, /) -> Variable:
    """jnp.vecmat: batched vector-matrix product (..., m) x (..., m, n) -> (..., n), the
    vector conjugated."""
    return matmul(expand_dims(conj(as_var(x1)), -2), as_var(x2))[..., 0, :]


@public
def meshgrid(*xi: Any, copy: bool = True, sparse: bool = False,
             indexing: str = "xy") -> list[Variable]:
    """jnp.meshgrid(*xi, sparse=False, indexing='xy'): coordinate arrays from 1-D arrays."""
    if indexing not in ("xy", "ij"):
        raise ShapeError(f"indexing must be 'xy' or 'ij', got {indexing!r}", op="meshgrid")
    xs = [ravel(as_var(x)) for x in xi]
    n = len(xs)
    shape = [x.shape[0] for x in xs]
    if indexing == "xy" and n >= 2:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, x in enumerate(xs):
        axis = (1 if i == 0 else 0 if i == 1 else i) if indexing == "xy" and n >= 2 else i
        s = [1] * n
        s[axis] = x.shape[0]
        v = reshape(x, tuple(s))
        out.append(v if sparse else broadcast_to(v, tuple(shape)))
    return out


@public
def broadcast_arrays(*args: Any) -> list[Variable]:
    """jnp.broadcast_arrays: the arguments broadcast to their common shape."""
    vs = [as_var(a) for a in args]
    shape = broadcast_shapes(*[v.shape for v in vs])
    return [v if v.shape == shape else broadcast_to(v, shape) for v in vs]


@public
def unstack(x: Any, /, *, axis: int = 0) -> tuple[Variable, ...]:
    """jnp.unstack: the slices of `x` along `axis`."""
    x = as_var(x)
    x = moveaxis(x, axis, 0)
    return tuple(x[i] for i in range(x.shape[0]))


@public
def copy(a: Any, order: None = None) -> Variable:
    """jnp.copy: the same values (arrays are immutable)."""
    return as_var(a)


@public
def empty(shape: Any, dtype: Any = None, device: Any = None) -> Variable:
    """jnp.empty: zeros (as jnp.empty gives)."""
    return zeros(shape, dtype)


@public
def empty_like(prototype: Any, dtype: Any = None, shape: Any = None,
               device: Any = None) -> Variable:
    """jnp.empty_like: zeros like `prototype`."""
    p = as_var(prototype)
    return zeros(p.shape if shape is None else shape, p.dtype if dtype is None else dtype)


@public
def select(condlist: Sequence[Any], choicelist: Sequence[Any], default: Any = 0) -> Variable:
    """jnp.select: the choice of the first true condition, else `default`."""
    if len(condlist) != len(choicelist):
        raise ShapeError(f"select: {len(condlist)} conditions for {len(choicelist)} choices",
                         op="select")
    choices = _promoted(*choicelist, default)
    out = choices[-1]
    for cond, choice in reversed(list(zip(condlist, choices[:-1]))):
        out = where(as_var(cond), choice, out)
    return out


@public
def choose(a: Any, choices: Sequence[Any], out: None = None, mode: str = "raise") -> Variable:
    """jnp.choose: choices[a] elementwise (mode 'clip' or 'wrap'; 'raise' clips, as jnp
    under jit)."""
    idx = as_var(a)
    cs = _promoted(*choices)
    shape = broadcast_shapes(idx.shape, *[c.shape for c in cs])
    n = len(cs)
    idx = idx % n if mode == "wrap" else clip(idx, 0, n - 1)
    stacked = concatenate([expand_dims(broadcast_to(c, shape), 0) for c in cs], 0)
    pick = expand_dims(broadcast_to(idx, shape), 0)
    return take_along_axis(stacked, pick, 0)[0]


@public
def searchsorted(a: Any, v: Any, side: str = "left", sorter: Any = None,
                 *, method: str = "scan") -> Variable:
    """jnp.searchsorted: insertion indices of `v` into the sorted 1-D `a` (a count of the
    elements below each value: exact, no gradient)."""
    a, v = as_var(a), as_var(v)
    if a.ndim != 1:
        raise ShapeError(f"searchsorted needs a 1-D array, got {a.type_str()}", op="searchsorted")
    if sorter is not None:
        from .indexing import take
        a = take(a, as_var(sorter))
    if side not in ("left", "right"):
        raise ShapeError(f"side must be 'left' or 'right', got {side!r}", op="searchsorted")
    a, v = _promoted(a, v)
    vv = expand_dims(v, -1)
    below = (a < vv) if side == "left" else (a <= vv)
    return astype(sum(below, -1), np.int32)  # jnp.searchsorted's dtype, x64 or not


@public
def digitize(x: Any, bins: Any, right: bool = False, *, method: str | None = None) -> Variable:
    """jnp.digitize: the bin of each value (bins increasing or decreasing)."""
    b = as_var(bins)
    side = "left" if right else "right"
    if b.ndim != 1:
        raise ShapeError(f"digitize needs 1-D bins, got {b.type_str()}", op="digitize")
    inc = searchsorted(b, x, side)
    dec = b.shape[0] - searchsorted(b[::-1], x, "left" if side == "right" else "right")
    if b.shape[0] < 2:
        return inc
    return where(b[-1] >= b[0], inc, dec)


@public
def interp(x: Any, xp: Any, fp: Any, left: Any = None, right: Any = None,
           period: Any = None) -> Variable:
    """jnp.interp: piecewise-linear interpolation of (xp, fp) at x (xp increasing),
    differentiable in x and fp."""
    if period is not None:
        raise ShapeError("interp's period= is not supported", op="interp")
    x, xp = _promoted(x, xp, inexact=True)
    (fp,) = _promoted(fp, inexact=True)  # (complex values of fp interpolate, as in JAX)
    require_real(x, what="interp's x (with xp)")
    n = xp.shape[0]
    i = clip(searchsorted(xp, x, side="right"), 1, n - 1)
    from .indexing import take
    x0, x1 = take(xp, i - 1), take(xp, i)
    y0, y1 = take(fp, i - 1), take(fp, i)
    dx = x1 - x0
    t = where(dx == 0, 0.0, (x - x0) / where(dx == 0, 1.0, dx))
    out = y0 + t * (y1 - y0)
    out = where(x < xp[0], fp[0] if left is None else left, out)
    return where(x > xp[-1], fp[-1] if right is None else right, out)


@public
def trapezoid(y: Any, x: Any = None, dx: float = 1.0, axis: int = -1) -> Variable:
    """jnp.trapezoid: the trapezoidal rule along `axis`."""
    y = _promoted(y, inexact=True)[0]
    y = moveaxis(y, axis, -1)
    if x is None:
        d: Any = dx
    else:
        xv = moveaxis(as_var(x), axis, -1) if as_var(x).ndim > 1 else as_var(x)
        d = diff(xv, axis=-1)
    return sum(d * (y[..., 1:] + y[..., :-1]), -1) * 0.5


@public
def ediff1d(ary: Any, to_end: Any = None, to_begin: Any = None) -> Variable:
    """jnp.ediff1d: differences of the flattened array, with optional ends."""
    out = diff(ravel(as_var(ary)))
    parts = [ravel(astype(as_var(to_begin), out.dtype))] if to_begin is not None else []
    parts.append(out)
    if to_end is not None:
        parts.append(ravel(astype(as_var(to_end), out.dtype)))
    return concatenate(parts, 0) if len(parts) > 1 else out


@public
def logspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, base: float = 10.0,
             dtype: Any = None, axis: int = 0) -> Variable:
    """jnp.logspace: base ** linspace(start, stop, num)."""
    from .construct import linspace
    lin = linspace(start, stop, num, endpoint, dtype=None, axis=axis)
    out = exp(lin * float(np.log(base)))
    return out if dtype is None else astype(out, dtype)


@public
def geomspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, dtype: Any = None,
              axis: int = 0) -> Variable:
    """jnp.geomspace: a geometric sequence from start to stop (same signs; complex ones: on
    the logarithmic spiral from start's direction, as jnp's)."""
    from .construct import linspace
    s, e = _promoted(start, stop, inexact=True)
    if s.dtype.kind == "c":  # jnp's: sign(s) * exp(linspace(log(s / sign(s)), log(e / sign(s))))
        turn = s / astype(abs(s), s.dtype)
        out = turn * exp(linspace(log(s / turn), log(e / turn), num, endpoint, axis=axis))
        return out if dtype is None else astype(out, dtype)
    lin = linspace(log(abs(s)), log(abs(e)), num, endpoint, axis=axis)
    mag = exp(lin)
    out = where(s < 0, -mag, mag)
    return out if dtype is None else astype(out, dtype)


@public
def diagflat(v: Any, k: int = 0) -> Variable:
    """jnp.diagflat: a 2-D array with the flattened `v` on diagonal k."""
    from .construct import diag
    return diag(ravel(as_var(v)), k)


@public
def ix_(*args: Any) -> tuple[Variable, ...]:
    """jnp.ix_: 1-D index arrays shaped to index an open mesh."""
    n = len(args)
    out = []
    for i, a in enumerate(args):
        v = as_var(a)
        if v.ndim != 1:
            raise ShapeError(f"ix_ takes 1-D arrays, got {v.type_str()}", op="ix_")
        out.append(reshape(v, (1,) * i + (v.shape[0],) + (1,) * (n - i - 1)))
    return tuple(out)


@public
def polyval(p: Any, x: Any, *, unroll: int = 16) -> Variable:
    """jnp.polyval: p[0] * x**(n-1) + ... + p[n-1], by Horner's rule."""
    p, x = _promoted(p, x)
    out = zeros(broadcast_shapes(x.shape, p.shape[1:]), x.dtype)
    for i in range(p.shape[0]):
        out = out * x + p[i]
    return out


def _pad_front(p: Variable, n: int) -> Variable:
    return p if p.shape[0] == n else concatenate([zeros((n - p.shape[0],), p.dtype), p], 0)


@public
def polyadd(a1: Any, a2: Any) -> Variable:
    """jnp.polyadd: the sum of two polynomials (coefficients, highest power first)."""
    a1, a2 = _promoted(a1, a2)
    n = max(a1.shape[0], a2.shape[0])
    return _pad_front(a1, n) + _pad_front(a2, n)


@public
def polysub(a1: Any, a2: Any) -> Variable:
    """jnp.polysub: the difference of two polynomials."""
    a1, a2 = _promoted(a1, a2)
    n = max(a1.shape[0], a2.shape[0])
    return _pad_front(a1, n) - _pad_front(a2, n)


@public
def polymul(a1: Any, a2: Any, *, trim_leading_zeros: bool = False) -> Variable:
    """jnp.polymul: the product of two polynomials (a full convolution)."""
    a1, a2 = _promoted(a1, a2, inexact=True)
    n, m = a1.shape[0], a2.shape[0]
    rows = [concatenate([zeros((i,), a1.dtype), a1 * a2[i], zeros((m - 1 - i,), a1.dtype)], 0)
            for i in range(m)]
    return sum(concatenate([expand_dims(r, 0) for r in rows], 0), 0) if n + m > 1 else a1 * a2


@public
def polyder(p: Any, m: int = 1) -> Variable:
    """jnp.polyder: the m-th derivative of a polynomial."""
    p = _promoted(p, inexact=True)[0]
    for _ in range(m):
        n = p.shape[0] - 1
        p = p[:-1] * arange(n, 0, -1, dtype=p.dtype) if n > 0 else p[:0]
    return p


@public
def polyint(p: Any, m: int = 1, k: Any = None) -> Variable:
    """jnp.polyint: the m-th antiderivative, integration constants `k` (default zeros)."""
    if k is None:
        p = _promoted(p, inexact=True)[0]
        ks = zeros((m,), p.dtype)
    else:
        p, ks = _promoted(p, k, inexact=True)
        ks = reshape(ks, (-1,))
    if ks.shape[0] == 1 and m > 1:
        ks = broadcast_to(ks, (m,))
    for i in range(m):
        n = p.shape[0]
        scaled = p / arange(n, 0, -1, dtype=p.dtype) if n else p
        p = concatenate([scaled, reshape(ks[i], (1,))], 0)
    return p


@public
def cov(m: Any, y: Any = None, rowvar: bool = True, bias: bool = False, ddof: int | None = None,
        fweights: Any = None, aweights: Any = None) -> Variable:
    """jnp.cov (no weights): the covariance of the rows (variables) of `m`."""
    if fweights is not None or aweights is not None:
        raise ShapeError("cov's fweights/aweights are not supported", op="cov")
    x = _promoted(m, inexact=True)[0]
    x = reshape(x, (1, -1)) if x.ndim == 1 else x
    if not rowvar and x.shape[0] != 1:
        x = x.T
    if y is not None:
        yv = astype(as_var(y), x.dtype)
        yv = reshape(yv, (1, -1)) if yv.ndim == 1 else yv
        yv = yv.T if not rowvar and yv.shape[0] != 1 else yv
        x = concatenate([x, yv], 0)
    d = (0 if bias else 1) if ddof is None else ddof
    xc = x - mean(x, 1, keepdims=True)
    out = matmul(xc, conj(xc).T) / float(x.shape[1] - d)
    return out[0, 0] if out.shape == (1, 1) else out


@public
def corrcoef(x: Any, y: Any = None, rowvar: bool = True) -> Variable:
    """jnp.corrcoef: the correlation coefficients, cov / sqrt(outer(diag, diag)), clipped to
    [-1, 1] (the real and imaginary parts of complex ones apart)."""
    from .construct import diagonal
    from .elementwise import complex_, sqrt
    c = cov(x, y, rowvar)
    if c.ndim == 0:
        return c / c
    d = astype(sqrt(real(diagonal(c))), c.dtype)
    out = c / d[:, None] / d[None, :]
    if out.dtype.kind == "c":
        return complex_(clip(real(out), -1.0, 1.0), clip(imag(out), -1.0, 1.0))
    return clip(out, -1.0, 1.0)


def _correlate(a: Variable, v: Variable, mode: str, name: str) -> Variable:
    from .conv import conv_general_dilated
    if a.ndim != 1 or v.ndim != 1:
        raise ShapeError(f"{name} takes 1-D arrays, got {a.type_str()} and {v.type_str()}",
                         op=name)
    n, m = a.shape[0], v.shape[0]
    if mode == "valid":
        pad = (0, 0)
    elif mode == "same":
        pad = (m // 2, m - 1 - m // 2)
    elif mode == "full":
        pad = (m - 1, m - 1)
    else:
        raise ShapeError(f"mode must be 'full', 'same' or 'valid', got {mode!r}", op=name)
    out = conv_general_dilated(reshape(a, (1, 1, n)), reshape(v, (1, 1, m)), (1,), (pad,))
    return reshape(out, (-1,))


@public
def correlate(a: Any, v: Any, mode: str = "valid", *, precision: Any = None,
              preferred_element_type: Any = None) -> Variable:
    """jnp.correlate: the cross-correlation of two 1-D arrays (a 1-D convolution), `v`
    conjugated."""
    a, v = _promoted(a, v, inexact=True)
    v = conj(v)
    if a.shape[0] < v.shape[0]:
        return _correlate(v, a, mode, "correlate")[::-1]
    return _correlate(a, v, mode, "correlate")


@public
def convolve(a: Any, v: Any, mode: str = "full", *, precision: Any = None,
             preferred_element_type: Any = None) -> Variable:
    """jnp.convolve: the convolution of two 1-D arrays."""
    a, v = _promoted(a, v, inexact=True)
    if a.shape[0] < v.shape[0]:
        a, v = v, a
    return _correlate(a, v[::-1], mode, "convolve")

