"""jax.numpy's reductions built from srcgrad's: all/any, amax/amin, count_nonzero, ptp, the
NaN-ignoring family, cumulative_sum/prod, and the order statistics (median, quantile,
percentile and their nan forms, from a sort, as jnp computes them).

Layer L3 (the ops): see docs/design.md.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import dtypes
from ..builder import as_var
from ..errors import ShapeError
from ..ir import Variable
from ._rules import norm_axes, norm_axis
from .creation import full
from .declare import public
from .elementwise import (astype, ceil, floor, isnan, logical_not, minimum, maximum, sqrt,
                          where)
from .manip import moveaxis
from .elementwise import where as _where
from .reduce import Axis, _no_out, argmax, argmin, max, min, prod, squared_magnitude, sum
from .shape import concatenate, expand_dims, reshape
from .sort_scan import cumprod, cumsum, sort, take_along_axis

BOOL = np.dtype(bool)


def _bool(x: Variable) -> Variable:
    return x if x.dtype == BOOL else x != 0


@public
def all(a: Any, axis: Axis = None, out: None = None, keepdims: bool = False, *,
        where: Any = None) -> Variable:
    """jnp.all: True where no element (along `axis`) is zero."""
    _no_out("all", out)
    b = logical_not(_bool(as_var(a)))
    if where is not None:
        b = b & _bool(as_var(where))
    return sum(b, axis, keepdims=keepdims) == 0


@public
def any(a: Any, axis: Axis = None, out: None = None, keepdims: bool = False, *,
        where: Any = None) -> Variable:
    """jnp.any: True where some element (along `axis`) is nonzero."""
    _no_out("any", out)
    b = _bool(as_var(a))
    if where is not None:
        b = b & _bool(as_var(where))
    return sum(b, axis, keepdims=keepdims) > 0


@public
def amax(a: Any, axis: Axis = None, out: None = None, keepdims: bool = False,
         initial: Any = None, where: Any = None) -> Variable:
    """jnp.amax: max."""
    return max(a, axis, None, out, keepdims, initial, where)


@public
def minmax(a: Any, axis: Axis = None, out: None = None, keepdims: bool = False,
           initial: Any = None, where: Any = None) -> tuple[Variable, Variable]:
    """jnp.minmax: (min, max); `initial` is one start for both or a (for min, for max) pair."""
    lo, hi = initial if isinstance(initial, tuple) else (initial, initial)
    return (min(a, axis, None, out, keepdims, lo, where),
            max(a, axis, None, out, keepdims, hi, where))


@public
def amin(a: Any, axis: Axis = None, out: None = None, keepdims: bool = False,
         initial: Any = None, where: Any = None) -> Variable:
    """jnp.amin: min."""
    return min(a, axis, None, out, keepdims, initial, where)


@public
def count_nonzero(a: Any, axis: Axis = None, keepdims: bool = False) -> Variable:
    """jnp.count_nonzero: the number of nonzero elements (default int dtype)."""
    return sum(_bool(as_var(a)), axis, keepdims=keepdims)


@public
def ptp(a: Any, axis: Axis = None, out: None = None, keepdims: bool = False) -> Variable:
    """jnp.ptp: max - min (peak to peak)."""
    _no_out("ptp", out)
    return max(a, axis, keepdims=keepdims) - min(a, axis, keepdims=keepdims)


def _nan_to(a: Any, value: float) -> tuple[Variable, Variable | None]:
    a = as_var(a)
    if not dtypes.is_inexact(a.dtype):
        return a, None
    nan = isnan(a)
    return where(nan, full((), value, a.dtype), a), nan


@public
def nansum(a: Any, axis: Axis = None, dtype: Any = None, out: None = None,
           keepdims: bool = False, initial: Any = None, where: Any = None) -> Variable:
    """jnp.nansum: sum with NaNs counted as zero."""
    return sum(_nan_to(a, 0.0)[0], axis, dtype, out, keepdims, initial, where)


@public
def nanprod(a: Any, axis: Axis = None, dtype: Any = None, out: None = None,
            keepdims: bool = False, initial: Any = None, where: Any = None) -> Variable:
    """jnp.nanprod: prod with NaNs counted as one."""
    return prod(_nan_to(a, 1.0)[0], axis, dtype, out, keepdims, initial, where)


def _valid_count(a: Variable, nan: Variable | None, axis: Axis, keepdims: bool,
                 dt: np.dtype) -> Variable:
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
def nanmean(a: Any, axis: Axis = None, dtype: Any = None, out: None = None,
            keepdims: bool = False, where: Any = None) -> Variable:
    """jnp.nanmean: the mean of the non-NaN elements (NaN where there are none)."""
    _no_out("nanmean", out)
    a = _float(a, dtype)
    zeroed, nan = _nan_to(a, 0.0)
    return sum(zeroed, axis, keepdims=keepdims) / _valid_count(a, nan, axis, keepdims, a.dtype)


@public
def nanvar(a: Any, axis: Axis = None, dtype: Any = None, out: None = None, ddof: int = 0,
           keepdims: bool = False, where: Any = None) -> Variable:
    """jnp.nanvar: the variance of the non-NaN elements."""
    _no_out("nanvar", out)
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
def nanstd(a: Any, axis: Axis = None, dtype: Any = None, out: None = None, ddof: int = 0,
           keepdims: bool = False, where: Any = None) -> Variable:
    """jnp.nanstd: sqrt(nanvar)."""
    return sqrt(nanvar(a, axis, dtype, out, ddof, keepdims))


def _nan_extreme(name: str, a: Any, axis: Axis, keepdims: bool, initial: Any, where_: Any
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
def nanmax(a: Any, axis: Axis = None, out: None = None, keepdims: bool = False,
           initial: Any = None, where: Any = None) -> Variable:
    """jnp.nanmax: max ignoring NaNs (NaN where all are NaN)."""
    _no_out("nanmax", out)
    return _nan_extreme("max", a, axis, keepdims, initial, where)


@public
def nanmin(a: Any, axis: Axis = None, out: None = None, keepdims: bool = False,
           initial: Any = None, where: Any = None) -> Variable:
    """jnp.nanmin: min ignoring NaNs (NaN where all are NaN)."""
    _no_out("nanmin", out)
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
def nanargmax(a: Any, axis: int | None = None, out: None = None,
              keepdims: bool = False) -> Variable:
    """jnp.nanargmax: argmax ignoring NaNs (-1 where all are NaN)."""
    _no_out("nanargmax", out)
    return _nan_arg("max", a, axis, keepdims)


@public
def nanargmin(a: Any, axis: int | None = None, out: None = None,
              keepdims: bool = False) -> Variable:
    """jnp.nanargmin: argmin ignoring NaNs (-1 where all are NaN)."""
    _no_out("nanargmin", out)
    return _nan_arg("min", a, axis, keepdims)


@public
def nancumsum(a: Any, axis: int | None = None, dtype: Any = None, out: None = None) -> Variable:
    """jnp.nancumsum: cumsum with NaNs counted as zero."""
    return cumsum(_nan_to(a, 0.0)[0], axis, dtype, out)


@public
def nancumprod(a: Any, axis: int | None = None, dtype: Any = None,
               out: None = None) -> Variable:
    """jnp.nancumprod: cumprod with NaNs counted as one."""
    return cumprod(_nan_to(a, 1.0)[0], axis, dtype, out)


def _cumulative(fn: Any, name: str, x: Any, axis: int | None, dtype: Any,
                include_initial: bool, start: int) -> Variable:
    x = as_var(x)
    if axis is None:
        if x.ndim > 1:
            raise ShapeError(f"{name}: axis must be given for an array of rank {x.ndim}",
                             op=name)
        axis = 0
    axis = norm_axis(axis, x.ndim)
    out = fn(x, axis, dtype)
    if not include_initial:
        return out
    shape = out.shape[:axis] + (1,) + out.shape[axis + 1:]
    return concatenate([full(shape, start, out.dtype), out], axis)


@public
def cumulative_sum(x: Any, /, *, axis: int | None = None, dtype: Any = None,
                   include_initial: bool = False) -> Variable:
    """jnp.cumulative_sum (the array API cumsum; `include_initial` prepends a zero)."""
    return _cumulative(cumsum, "cumulative_sum", x, axis, dtype, include_initial, 0)


@public
def cumulative_prod(x: Any, /, *, axis: int | None = None, dtype: Any = None,
                    include_initial: bool = False) -> Variable:
    """jnp.cumulative_prod (the array API cumprod; `include_initial` prepends a one)."""
    return _cumulative(cumprod, "cumulative_prod", x, axis, dtype, include_initial, 1)


# ---------------------------------------------------------------- order statistics

_METHODS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(name: str, a: Any, q: Any, axis: int | None, method: str, keepdims: bool,
              nan_aware: bool) -> Variable:
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
        kept = a.shape[:axis] + (1,) + a.shape[axis + 1:]
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
def quantile(a: Any, q: Any, axis: int | None = None, out: None = None,
             overwrite_input: bool = False, method: str = "linear",
             keepdims: bool = False) -> Variable:
    """jnp.quantile(a, q, axis=None, method='linear', keepdims=False): q in [0, 1], a scalar
    or 1-D (traced too); NaN where a slice holds a NaN."""
    _no_out("quantile", out)
    return _quantile("quantile", a, q, axis, method, keepdims, False)


@public
def nanquantile(a: Any, q: Any, axis: int | None = None, out: None = None,
                overwrite_input: bool = False, method: str = "linear",
                keepdims: bool = False) -> Variable:
    """jnp.nanquantile: quantile of the non-NaN elements."""
    _no_out("nanquantile", out)
    return _quantile("nanquantile", a, q, axis, method, keepdims, True)


@public
def percentile(a: Any, q: Any, axis: int | None = None, out: None = None,
               overwrite_input: bool = False, method: str = "linear",
               keepdims: bool = False) -> Variable:
    """jnp.percentile: quantile(a, q / 100)."""
    _no_out("percentile", out)
    return _quantile("percentile", a, _float(q) / 100.0, axis, method, keepdims, False)


@public
def nanpercentile(a: Any, q: Any, axis: int | None = None, out: None = None,
                  overwrite_input: bool = False, method: str = "linear",
                  keepdims: bool = False) -> Variable:
    """jnp.nanpercentile: nanquantile(a, q / 100)."""
    _no_out("nanpercentile", out)
    return _quantile("nanpercentile", a, _float(q) / 100.0, axis, method, keepdims, True)


@public
def median(a: Any, axis: int | None = None, out: None = None, overwrite_input: bool = False,
           keepdims: bool = False) -> Variable:
    """jnp.median: quantile(a, 0.5, method='midpoint')."""
    _no_out("median", out)
    return _quantile("median", a, 0.5, axis, "midpoint", keepdims, False)


@public
def nanmedian(a: Any, axis: int | None = None, out: None = None,
              overwrite_input: bool = False, keepdims: bool = False) -> Variable:
    """jnp.nanmedian: nanquantile(a, 0.5, method='midpoint')."""
    _no_out("nanmedian", out)
    return _quantile("nanmedian", a, 0.5, axis, "midpoint", keepdims, True)

