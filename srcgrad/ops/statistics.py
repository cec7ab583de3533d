"""jax.numpy's statistics, built from srcgrad's reductions and sorts: amax/amin, ptp,
count_nonzero, the NaN-ignoring family (nansum ... nanmedian, nancumsum/prod), the order
statistics (median, quantile, percentile and their nan forms, from a sort, as jnp computes
them), cov, corrcoef, correlate/convolve and the histograms.

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import builtins

from ..base import dtypes
from ..core.builder import as_var
from ..base.errors import ShapeError
from ..ir.program import Variable
from .rules import norm_axes, norm_axis
from .creation import full, ones, zeros
from ..core.declare import public
from .elementwise import (
    astype,
    ceil,
    clip,
    conj,
    floor,
    imag,
    isnan,
    logical_not,
    maximum,
    minimum,
    real,
    sqrt,
    where,
)
from .manip import moveaxis
from .shape import ravel
from .elementwise import where as _where
from .reduce import (
    refuse_out,
    Axis,
    correction_of,
    argmax,
    argmin,
    max,
    mean,
    min,
    prod,
    squared_magnitude,
    sum,
)
from .shape import concatenate, expand_dims, reshape, stack
from .sorting import searchsorted, sort, take_along_axis
from .cumulative import cumprod, cumsum, diff
from .contraction import matmul
from .operands import inexact, promoted
from . import elementwise, reduce as reduce_ops
from .sets import bincount
from .index_routines import ix_, ravel_multi_index
from .construct import linspace
from .logic import as_bool

BOOL = np.dtype(bool)


@public
def amax(
    a: Any,
    axis: Axis = None,
    out: None = None,
    keepdims: bool = False,
    initial: Any = None,
    where: Any = None,
) -> Variable:
    """jnp.amax: max."""
    return max(a, axis, None, out, keepdims, initial, where)


@public
def minmax(
    a: Any,
    axis: Axis = None,
    out: None = None,
    keepdims: bool = False,
    initial: Any = None,
    where: Any = None,
) -> tuple[Variable, Variable]:
    """jnp.minmax: (min, max); `initial` is one start for both or a (for min, for max) pair."""
    lo, hi = initial if isinstance(initial, tuple) else (initial, initial)
    return (
        min(a, axis, None, out, keepdims, lo, where),
        max(a, axis, None, out, keepdims, hi, where),
    )


@public
def amin(
    a: Any,
    axis: Axis = None,
    out: None = None,
    keepdims: bool = False,
    initial: Any = None,
    where: Any = None,
) -> Variable:
    """jnp.amin: min."""
    return min(a, axis, None, out, keepdims, initial, where)


@public
def count_nonzero(a: Any, axis: Axis = None, keepdims: bool = False) -> Variable:
    """jnp.count_nonzero: the number of nonzero elements (default int dtype)."""
    return sum(as_bool(as_var(a)), axis, keepdims=keepdims)


@public
def ptp(a: Any, axis: Axis = None, out: None = None, keepdims: bool = False) -> Variable:
    """jnp.ptp: max - min (peak to peak)."""
    refuse_out("ptp", out)
    return max(a, axis, keepdims=keepdims) - min(a, axis, keepdims=keepdims)


def _nan_to(a: Any, value: float) -> tuple[Variable, Variable | None]:
    a = as_var(a)
    if not dtypes.is_inexact(a.dtype):
        return a, None
    nan = isnan(a)
    return where(nan, full((), value, a.dtype), a), nan


@public
def nansum(
    a: Any,
    axis: Axis = None,
    dtype: Any = None,
    out: None = None,
    keepdims: bool = False,
    initial: Any = None,
    where: Any = None,
) -> Variable:
    """jnp.nansum: sum with NaNs counted as zero."""
    return sum(_nan_to(a, 0.0)[0], axis, dtype, out, keepdims, initial, where)


@public
def nanprod(
    a: Any,
    axis: Axis = None,
    dtype: Any = None,
    out: None = None,
    keepdims: bool = False,
    initial: Any = None,
    where: Any = None,
) -> Variable:
    """jnp.nanprod: prod with NaNs counted as one."""
    return prod(_nan_to(a, 1.0)[0], axis, dtype, out, keepdims, initial, where)


def _valid_count(
    a: Variable, nan: Variable | None, axis: Axis, keepdims: bool, dt: np.dtype
) -> Variable:
    if nan is None:
        axes = norm_axes(axis, a.ndim)
        return full((), float(np.prod([a.shape[i] for i in axes])), dt)
    return astype(sum(logical_not(nan), axis, keepdims=keepdims), dt)


def _float(a: Any, dtype: Any = None) -> Variable:
    a = as_var(a)
    if dtype is not None:
        a = astype(a, dtype)
    return a if dtypes.is_inexact(a.dtype) else astype(a, dtypes.default_float())


@public
def nanmean(
    a: Any,
    axis: Axis = None,
    dtype: Any = None,
    out: None = None,
    keepdims: bool = False,
    where: Any = None,
) -> Variable:
    """jnp.nanmean: the mean of the non-NaN elements (NaN where there are none)."""
    refuse_out("nanmean", out)
    a = _float(a, dtype)
    zeroed, nan = _nan_to(a, 0.0)
    return sum(zeroed, axis, keepdims=keepdims) / _valid_count(a, nan, axis, keepdims, a.dtype)


@public
def nanvar(
    a: Any,
    axis: Axis = None,
    dtype: Any = None,
    out: None = None,
    ddof: int = 0,
    keepdims: bool = False,
    where: Any = None,
    *,
    correction: float | None = None,
) -> Variable:
    """jnp.nanvar: the variance of the non-NaN elements (population by default; `ddof` or
    `correction` is subtracted from their count)."""
    ddof = correction_of("nanvar", ddof, correction)
    refuse_out("nanvar", out)
    a = _float(a, dtype)
    zeroed, nan = _nan_to(a, 0.0)
    mean = nanmean(a, axis, keepdims=True)
    centered = zeroed - mean
    if nan is not None:
        centered = _where(nan, 0.0, centered)
    squared = squared_magnitude(centered)
    count = _valid_count(a, nan, axis, keepdims, squared.dtype) - float(ddof)
    out = sum(squared, axis, keepdims=keepdims) / count
    return _where(count <= 0, math.nan, out)


@public
def nanstd(
    a: Any,
    axis: Axis = None,
    dtype: Any = None,
    out: None = None,
    ddof: int = 0,
    keepdims: bool = False,
    where: Any = None,
    *,
    correction: float | None = None,
) -> Variable:
    """jnp.nanstd: sqrt(nanvar)."""
    return sqrt(nanvar(a, axis, dtype, out, ddof, keepdims, correction=correction))


def _nan_extreme(
    name: str, a: Any, axis: Axis, keepdims: bool, initial: Any, where_: Any
) -> Variable:
    a = as_var(a)
    fill = -math.inf if name == "max" else math.inf
    filled, nan = _nan_to(a, fill)
    reduce = max if name == "max" else min
    out = reduce(filled, axis, keepdims=keepdims, initial=initial, where=where_)
    if nan is None:
        return out
    return where(sum(logical_not(nan), axis, keepdims=keepdims) == 0, math.nan, out)


@public
def nanmax(
    a: Any,
    axis: Axis = None,
    out: None = None,
    keepdims: bool = False,
    initial: Any = None,
    where: Any = None,
) -> Variable:
    """jnp.nanmax: max ignoring NaNs (NaN where all are NaN)."""
    refuse_out("nanmax", out)
    return _nan_extreme("max", a, axis, keepdims, initial, where)


@public
def nanmin(
    a: Any,
    axis: Axis = None,
    out: None = None,
    keepdims: bool = False,
    initial: Any = None,
    where: Any = None,
) -> Variable:
    """jnp.nanmin: min ignoring NaNs (NaN where all are NaN)."""
    refuse_out("nanmin", out)
    return _nan_extreme("min", a, axis, keepdims, initial, where)


def _nan_arg(name: str, a: Any, axis: int | None, keepdims: bool) -> Variable:
    a = as_var(a)
    filled, nan = _nan_to(a, -math.inf if name == "max" else math.inf)
    out = (argmax if name == "max" else argmin)(filled, axis, keepdims=keepdims)
    if nan is None:
        return out
    none = sum(logical_not(nan), axis, keepdims=keepdims) == 0
    return where(none, -1, out)


@public
def nanargmax(
    a: Any, axis: int | None = None, out: None = None, keepdims: bool = False
) -> Variable:
    """jnp.nanargmax: argmax ignoring NaNs (-1 where all are NaN)."""
    refuse_out("nanargmax", out)
    return _nan_arg("max", a, axis, keepdims)


@public
def nanargmin(
    a: Any, axis: int | None = None, out: None = None, keepdims: bool = False
) -> Variable:
    """jnp.nanargmin: argmin ignoring NaNs (-1 where all are NaN)."""
    refuse_out("nanargmin", out)
    return _nan_arg("min", a, axis, keepdims)


# ---------------------------------------------------------------- order statistics

_METHODS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(
    name: str, a: Any, q: Any, axis: int | None, method: str, keepdims: bool, nan_aware: bool
) -> Variable:
    """jnp's quantile: sort along `axis`, then interpolate between the two order statistics
    around q * (n - 1) (n: the non-NaN count for the nan forms); NaN where a slice has a NaN
    (plain forms) or only NaNs (nan forms)."""
    if method not in _METHODS:
        raise ShapeError(f"method must be one of {_METHODS}, got {method!r}", op=name)
    a = _float(a)
    qv = astype(as_var(q), a.dtype)
    if qv.ndim > 1:
        raise ShapeError(f"q must be a scalar or 1-D, got {qv.type_str()}", op=name)
    if axis is None:
        kept = (1,) * a.ndim
        a, axis = reshape(a, (-1,)), 0
    else:
        axis = norm_axis(axis, a.ndim)
        kept = a.shape[:axis] + (1,) + a.shape[axis + 1 :]
    s = moveaxis(sort(a, axis), axis, -1)  # NaNs sort last
    n = s.shape[-1]
    nan = isnan(s)
    valid = sum(logical_not(nan), -1, keepdims=True)
    count = astype(valid, a.dtype) if nan_aware else full((), float(n), a.dtype)
    qs = reshape(qv, (-1,) + (1,) * s.ndim)  # (Q, 1, ..., 1)
    pos = qs * (count - 1.0)
    low, high = floor(pos), ceil(pos)
    high_w = pos - low
    low_w = 1.0 - high_w
    top = float(n - 1)
    low_i = astype(minimum(maximum(low, 0.0), top), dtypes.default_int())
    high_i = astype(minimum(maximum(high, 0.0), top), dtypes.default_int())
    stacked = expand_dims(s, 0)
    shape = (qs.shape[0],) + s.shape[:-1] + (1,)
    lo_v = take_along_axis(_bcast(stacked, shape), _bcast(low_i, shape), -1)
    hi_v = take_along_axis(_bcast(stacked, shape), _bcast(high_i, shape), -1)
    if method == "linear":
        out = lo_v * low_w + hi_v * high_w
    elif method == "lower":
        out = lo_v
    elif method == "higher":
        out = hi_v
    elif method == "midpoint":
        out = (lo_v + hi_v) * 0.5
    else:
        out = where(high_w <= 0.5, lo_v, hi_v)
    bad = (valid == 0) if nan_aware else (valid < n)
    out = where(bad, math.nan, out)[..., 0]  # (Q, ...rest)
    if keepdims:
        out = reshape(out, (out.shape[0],) + kept)
    return out[0] if qv.ndim == 0 else out


def _bcast(x: Variable, shape: tuple[int, ...]) -> Variable:
    from .shape import broadcast_to

    shape = tuple(shape[:-1]) + (x.shape[-1],)
    return x if x.shape == shape else broadcast_to(x, shape)


@public
def quantile(
    a: Any,
    q: Any,
    axis: int | None = None,
    out: None = None,
    overwrite_input: bool = False,
    method: str = "linear",
    keepdims: bool = False,
) -> Variable:
    """jnp.quantile(a, q, axis=None, method='linear', keepdims=False): q in [0, 1], a scalar
    or 1-D (traced too); NaN where a slice holds a NaN."""
    refuse_out("quantile", out)
    return _quantile("quantile", a, q, axis, method, keepdims, False)


@public
def nanquantile(
    a: Any,
    q: Any,
    axis: int | None = None,
    out: None = None,
    overwrite_input: bool = False,
    method: str = "linear",
    keepdims: bool = False,
) -> Variable:
    """jnp.nanquantile: quantile of the non-NaN elements."""
    refuse_out("nanquantile", out)
    return _quantile("nanquantile", a, q, axis, method, keepdims, True)


@public
def percentile(
    a: Any,
    q: Any,
    axis: int | None = None,
    out: None = None,
    overwrite_input: bool = False,
    method: str = "linear",
    keepdims: bool = False,
) -> Variable:
    """jnp.percentile: quantile(a, q / 100)."""
    refuse_out("percentile", out)
    return _quantile("percentile", a, _float(q) / 100.0, axis, method, keepdims, False)


@public
def nanpercentile(
    a: Any,
    q: Any,
    axis: int | None = None,
    out: None = None,
    overwrite_input: bool = False,
    method: str = "linear",
    keepdims: bool = False,
) -> Variable:
    """jnp.nanpercentile: nanquantile(a, q / 100)."""
    refuse_out("nanpercentile", out)
    return _quantile("nanpercentile", a, _float(q) / 100.0, axis, method, keepdims, True)


@public
def median(
    a: Any,
    axis: int | None = None,
    out: None = None,
    overwrite_input: bool = False,
    keepdims: bool = False,
) -> Variable:
    """jnp.median: quantile(a, 0.5, method='midpoint')."""
    refuse_out("median", out)
    return _quantile("median", a, 0.5, axis, "midpoint", keepdims, False)


@public
def nanmedian(
    a: Any,
    axis: int | None = None,
    out: None = None,
    overwrite_input: bool = False,
    keepdims: bool = False,
) -> Variable:
    """jnp.nanmedian: nanquantile(a, 0.5, method='midpoint')."""
    refuse_out("nanmedian", out)
    return _quantile("nanmedian", a, 0.5, axis, "midpoint", keepdims, True)


@public
def cov(
    m: Any,
    y: Any = None,
    rowvar: bool = True,
    bias: bool = False,
    ddof: int | None = None,
    fweights: Any = None,
    aweights: Any = None,
) -> Variable:
    """jnp.cov (no weights): the covariance of the rows (variables) of `m`."""
    if fweights is not None or aweights is not None:
        raise ShapeError("cov's fweights/aweights are not supported", op="cov")
    x = promoted(m, inexact=True)[0]
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
        raise ShapeError(f"{name} takes 1-D arrays, got {a.type_str()} and {v.type_str()}", op=name)
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
def correlate(
    a: Any,
    v: Any,
    mode: str = "valid",
    *,
    precision: Any = None,
    preferred_element_type: Any = None,
) -> Variable:
    """jnp.correlate: the cross-correlation of two 1-D arrays (a 1-D convolution), `v`
    conjugated."""
    a, v = promoted(a, v, inexact=True)
    v = conj(v)
    if a.shape[0] < v.shape[0]:
        return _correlate(v, a, mode, "correlate")[::-1]
    return _correlate(a, v, mode, "correlate")


@public
def convolve(
    a: Any, v: Any, mode: str = "full", *, precision: Any = None, preferred_element_type: Any = None
) -> Variable:
    """jnp.convolve: the convolution of two 1-D arrays."""
    a, v = promoted(a, v, inexact=True)
    if a.shape[0] < v.shape[0]:
        a, v = v, a
    return _correlate(a, v[::-1], mode, "convolve")


@public
def histogram_bin_edges(
    a: Any, bins: Any = 10, range: Sequence[Any] | None = None, weights: Any = None
) -> Variable:
    """jnp.histogram_bin_edges: `bins` (an int) equal bins over `range` (default: the data's
    min and max, widened by 0.5 each side when they are equal), or the given edges."""
    arr = inexact(a)
    if isinstance(bins, str):
        raise ShapeError("string values for bins are not supported", op="histogram_bin_edges")
    if isinstance(bins, Variable) or np.ndim(bins) == 1:
        return elementwise.astype(as_var(bins), arr.dtype)
    lo, hi = (
        (reduce_ops.min(arr), reduce_ops.max(arr))
        if range is None
        else (
            elementwise.astype(as_var(range[0]), arr.dtype),
            elementwise.astype(as_var(range[1]), arr.dtype),
        )
    )
    same = elementwise.equal(lo, hi)
    lo, hi = (
        elementwise.where(same, elementwise.subtract(lo, 0.5), lo),
        elementwise.where(same, elementwise.add(hi, 0.5), hi),
    )
    return linspace(lo, hi, int(bins) + 1, dtype=arr.dtype)


@public
def histogram(
    a: Any,
    bins: Any = 10,
    range: Sequence[Any] | None = None,
    weights: Any = None,
    density: bool | None = None,
) -> tuple[Variable, Variable]:
    """jnp.histogram: the counts (or summed weights) per bin, the last bin closed, and the
    bin edges; differentiable in the weights and (through the edges) in `range`/`a`."""
    a = inexact(a)
    w = elementwise.astype(ones(a.shape, a.dtype), a.dtype) if weights is None else inexact(weights)
    if w.shape != a.shape:
        raise ShapeError(
            f"histogram's weights need a's shape {a.shape}, got {w.type_str()}", op="histogram"
        )
    edges = histogram_bin_edges(a, bins, range)
    a, w = ravel(a), ravel(w)
    idx = searchsorted(edges, a, side="right")
    idx = elementwise.where(elementwise.equal(a, edges[-1]), edges.shape[0] - 1, idx)
    counts = zeros((edges.shape[0],), w.dtype).at[idx].add(w)[1:]
    if density:
        counts = elementwise.divide(elementwise.divide(counts, diff(edges)), reduce_ops.sum(counts))
    return counts, edges


@public
def histogramdd(
    sample: Any,
    bins: Any = 10,
    range: Sequence[Any] | None = None,
    weights: Any = None,
    density: bool | None = None,
) -> tuple[Variable, list]:
    """jnp.histogramdd: the D-dimensional histogram of (N, D) samples and the edges per axis."""
    sample = inexact(sample)
    if sample.ndim != 2:
        raise ShapeError(
            f"histogramdd needs (N, D) samples, got {sample.type_str()}", op="histogramdd"
        )
    n, d = sample.shape
    per_dim = list(bins) if isinstance(bins, (list, tuple)) else [bins] * d
    if len(per_dim) != d:
        raise ShapeError(f"histogramdd needs one bins entry per dimension ({d})", op="histogramdd")
    idx, edges = [], []
    for i in builtins.range(d):
        e = histogram_bin_edges(sample[:, i], per_dim[i], None if range is None else range[i])
        j = searchsorted(e, sample[:, i], side="right")
        idx.append(elementwise.where(elementwise.equal(sample[:, i], e[-1]), j - 1, j))
        edges.append(e)
    nbins = tuple(e.shape[0] + 1 for e in edges)
    xy = ravel_multi_index(tuple(idx), nbins, mode="clip")
    hist = bincount(xy, weights, length=math.prod(nbins))
    hist = reshape(hist, nbins)[(slice(1, -1),) * d]
    if density:
        hist = elementwise.astype(hist, sample.dtype)
        hist = elementwise.divide(hist, reduce_ops.sum(hist))
        for norm in ix_(*[diff(e) for e in edges]):
            hist = elementwise.divide(hist, norm)
    return hist, edges


@public
def histogram2d(
    x: Any,
    y: Any,
    bins: Any = 10,
    range: Sequence[Any] | None = None,
    weights: Any = None,
    density: bool | None = None,
) -> tuple[Variable, Variable, Variable]:
    """jnp.histogram2d: histogramdd of the pairs (x, y), and the edges of each axis."""
    if isinstance(bins, (list, tuple)) and len(bins) not in (1, 2):
        bins = [bins, bins]
    hist, edges = histogramdd(stack([as_var(x), as_var(y)], 1), bins, range, weights, density)
    return hist, edges[0], edges[1]


@public
def nancumsum(a: Any, axis: int | None = None, dtype: Any = None, out: None = None) -> Variable:
    """jnp.nancumsum: cumsum with NaNs counted as zero."""
    return cumsum(_nan_to(a, 0.0)[0], axis, dtype, out)


@public
def nancumprod(a: Any, axis: int | None = None, dtype: Any = None, out: None = None) -> Variable:
    """jnp.nancumprod: cumprod with NaNs counted as one."""
    return cumprod(_nan_to(a, 1.0)[0], axis, dtype, out)
