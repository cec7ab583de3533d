"""The last jax.numpy names: partition, lexsort, compress, piecewise, histograms, the
polynomial constructors, resize, apply_* and the float-bit functions (frexp, nextafter,
spacing). Composites follow jax.numpy's own implementation, so values and gradients agree
with it (ties and padding included); frexp, nextafter and spacing are rows lowered to jnp.

Layer L3 (the ops): see docs/design.md.
"""
from __future__ import annotations

import builtins
import math
from typing import Any, Callable, Iterator, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .. import dtypes
from ..builder import as_pair, as_var, emit
from ..errors import ShapeError
from ..ir import Op, Variable
from ..registry import OutType, register
from . import elementwise as E
from . import reduce as R
from .construct import linspace
from .creation import arange, full, ones, zeros
from .decomp import qr, solve_triangular
from .lax_misc import top_k_indices
from .declare import defop, public
from .manip import flip, moveaxis, ravel, tile
from .numpy_build import convolve, ix_, searchsorted
from .numpy_index import ravel_multi_index, vander
from .numpy_sets import bincount, nonzero
from .shape import concatenate, expand_dims, reshape, stack, swapaxes
from .sort_scan import argsort, diff, sort, take_along_axis
from .special import i0e


def _axis(axis: int, ndim: int, name: str) -> int:
    if not -ndim <= axis < ndim:
        raise ShapeError(f"axis {axis} is out of range for {ndim}-d input", op=name)
    return axis % ndim


def _inexact(x: Any) -> Variable:
    x = as_var(x)
    return x if dtypes.is_inexact(x.dtype) else E.astype(x, dtypes.default_float())


# ---------------------------------------------------------------- sorting

@public
def partition(a: Any, kth: int, axis: int = -1) -> Variable:
    """jnp.partition: the `kth+1` smallest values ascending, then the rest descending (as
    jax's top_k-based result)."""
    a = as_var(a)
    ax = _axis(axis, a.ndim, "partition")
    k = _axis(kth, a.shape[ax], "partition (kth)")
    s = sort(swapaxes(a, ax, -1), -1)
    out = concatenate([s[..., :k + 1], flip(s[..., k + 1:], -1)], -1)
    return swapaxes(out, -1, ax)


@public
def top_k(a: Any, k: int, /, *, axis: int = -1, mode: str = "largest",
          sorted: bool = True) -> tuple[Variable, Variable]:
    """jnp.top_k: the `k` largest (`mode` 'largest') or smallest values along `axis`, sorted,
    and their int32 indices (ties: the lower index first), as lax.top_k finds them. The
    values are read at the indices, so the gradient flows to them."""
    del sorted  # always sorted, as jax's
    a = as_var(a)
    if np.issubdtype(a.dtype, np.complexfloating):
        raise ShapeError(f"top_k is not defined for complex input {a.type_str()}", op="top_k")
    if mode not in ("largest", "smallest"):
        raise ShapeError(f"mode must be 'largest' or 'smallest', got {mode!r}", op="top_k")
    ax = _axis(axis, a.ndim, "top_k")
    x = swapaxes(a, ax, -1)
    key = x if mode == "largest" else (
        E.logical_not(x) if a.dtype == np.dtype(bool) else
        E.negative(E.add(x, 1)) if np.issubdtype(a.dtype, np.unsignedinteger) else E.negative(x))
    idx = top_k_indices(key, k=k)
    return swapaxes(take_along_axis(x, idx, -1), -1, ax), swapaxes(idx, -1, ax)


@public
def argpartition(a: Any, kth: int, axis: int = -1) -> Variable:
    """jnp.argpartition: the indices of the `kth+1` smallest values (ascending, ties by index),
    then the other indices in increasing order (as jax's result)."""
    a = as_var(a)
    ax = _axis(axis, a.ndim, "argpartition")
    k = _axis(kth, a.shape[ax], "argpartition (kth)")
    order = argsort(swapaxes(a, ax, -1), -1)
    rest = argsort(argsort(order, -1) <= k, -1)  # not-bottom first, by index
    out = concatenate([order[..., :k + 1], rest[..., :a.shape[ax] - k - 1]], -1)
    return E.astype(swapaxes(out, -1, ax), np.dtype(np.int32))  # top_k's index dtype


@public
def lexsort(keys: Sequence[Any], axis: int = -1) -> Variable:
    """jnp.lexsort: the stable order sorting by the last key, then the one before, ..."""
    keys = [as_var(k) for k in keys]
    if not keys:
        raise ShapeError("lexsort needs at least one key", op="lexsort")
    if len({k.shape for k in keys}) > 1:
        raise ShapeError("lexsort's keys need one shape, got "
                         f"{', '.join(k.type_str() for k in keys)}", op="lexsort")
    if keys[0].ndim == 0:
        return full((), 0, dtypes.default_int())
    ax = _axis(axis, keys[0].ndim, "lexsort")
    idx = None
    for k in keys:  # least significant first: stable sorts compose (LSD radix)
        kk = k if idx is None else take_along_axis(k, idx, ax)
        step = argsort(kk, ax)
        idx = step if idx is None else take_along_axis(idx, step, ax)
    return E.astype(idx, dtypes.default_int())


# ---------------------------------------------------------------- selection

@public
def compress(condition: Any, a: Any, axis: int | None = None, *, size: int | None = None,
             fill_value: Any = 0, out: None = None) -> Variable:
    """jnp.compress with JAX's `size=` (required here: the result's length must be static):
    the slices of `a` along `axis` where `condition` holds, padded with `fill_value`."""
    c = E.astype(as_var(condition), np.dtype(bool))
    if c.ndim != 1:
        raise ShapeError(f"compress needs a 1-D condition, got {c.type_str()}", op="compress")
    if size is None:
        raise ShapeError("compress needs size= in srcgrad (the result's length must be "
                         "static, as under jax.jit)", op="compress")
    arr = ravel(as_var(a)) if axis is None else moveaxis(as_var(a), axis, 0)
    n = builtins.min(c.shape[0], arr.shape[0])
    if not 0 <= size <= arr.shape[0]:
        raise ShapeError(f"size must be in [0, {arr.shape[0]}], got {size}", op="compress")
    c, arr = c[:n], arr[:n]
    mask = reshape(c, (n,) + (1,) * (arr.ndim - 1))
    arr = E.where(mask, arr, E.astype(as_var(fill_value), arr.dtype))
    result = arr[argsort(c, stable=True, descending=True)][:size]
    return moveaxis(result, 0, 0 if axis is None else axis)


@public
def extract(condition: Any, arr: Any, *, size: int | None = None, fill_value: Any = 0) -> Variable:
    """jnp.extract(condition, arr, size=, fill_value=): compress of the flattened arrays."""
    return compress(ravel(as_var(condition)), ravel(as_var(arr)), size=size,
                    fill_value=fill_value)


@public
def piecewise(x: Any, condlist: Any, funclist: list, *args: Any, **kw: Any) -> Variable:
    """jnp.piecewise: each element takes the function (or constant) of the last condition
    that holds, the default (the extra last function, else 0) where none does."""
    x = as_var(x)
    conds = [E.astype(as_var(c), np.dtype(bool)) for c in
             (list(condlist) if isinstance(condlist, (list, tuple)) else
              [as_var(condlist)[i] for i in range(as_var(condlist).shape[0])])]
    nc, nf = len(conds), len(funclist)
    if nf == nc + 1:
        funclist = funclist[-1:] + funclist[:-1]
    elif nf == nc:
        funclist = [0] + list(funclist)
    else:
        raise ShapeError(f"with {nc} condition(s), piecewise needs {nc} or {nc + 1} functions, "
                         f"got {nf}", op="piecewise")

    def value(f: Any) -> Variable:
        v = f(x, *args, **kw) if callable(f) else f
        return E.astype(E.add(zeros(x.shape, x.dtype), v), x.dtype)
    out = value(funclist[0])
    for c, f in zip(conds, funclist[1:]):
        out = E.where(c, value(f), out)
    return out


@public
def put_along_axis(arr: Any, indices: Any, values: Any, axis: int | None,
                   inplace: bool = True, *, mode: str | None = None) -> Variable:
    """jnp.put_along_axis(..., inplace=False): `arr` with `values` written at `indices`
    along `axis` (the functional form: srcgrad, as JAX, has no in-place update)."""
    if inplace:
        raise ShapeError("put_along_axis needs inplace=False (arrays are immutable, as in "
                         "jax.numpy)", op="put_along_axis")
    a, idx = as_var(arr), as_var(indices)
    if axis is None:
        a, idx, axis = ravel(a), ravel(idx), 0
    ax = _axis(axis, a.ndim, "put_along_axis")
    if idx.ndim != a.ndim:
        raise ShapeError(f"indices need the array's rank {a.ndim}, got {idx.type_str()}",
                         op="put_along_axis")
    shape = tuple(idx.shape[d] if d == ax else a.shape[d] for d in range(a.ndim))
    grids = [arange(n, dtype=idx.dtype).reshape(
        tuple(n if d == i else 1 for d in range(a.ndim))) for i, n in enumerate(shape)]
    where_ = tuple(E.where(idx < 0, idx + a.shape[ax], idx) if d == ax else grids[d]
                   for d in range(a.ndim))
    v = E.astype(as_var(values), a.dtype)
    return a.at[where_].set(v, mode=mode)


@public
def mask_indices(n: int, mask_func: Callable[[Any, int], Any], k: int = 0, *,
                 size: int | None = None) -> tuple[Variable, Variable]:
    """jnp.mask_indices(n, mask_func, k, size=): the indices where `mask_func(ones((n, n)), k)`
    is nonzero (`size=` required, as jnp under jit)."""
    i, j = nonzero(mask_func(ones((n, n)), k), size=size)
    return i, j


# ---------------------------------------------------------------- building arrays

@public
def resize(a: Any, new_shape: int | Sequence[int]) -> Variable:
    """jnp.resize: the flattened array repeated to fill `new_shape`."""
    shape = (new_shape,) if isinstance(new_shape, int) else tuple(new_shape)
    if any(d < 0 for d in shape):
        raise ShapeError(f"resize needs non-negative sizes, got {shape}", op="resize")
    arr = ravel(as_var(a))
    size = math.prod(shape)
    if arr.shape[0] == 0 or size == 0:
        return zeros(shape, arr.dtype)
    return reshape(tile(arr, -(-size // arr.shape[0]))[:size], shape)


@public
def fromfunction(function: Callable[..., Any], shape: Sequence[int], *, dtype: Any = float,
                 **kwargs: Any) -> Any:
    """jnp.fromfunction: `function` called on the index grids (broadcast, one per axis)."""
    shape = tuple(shape)
    grids = [arange(n, dtype=dtype).reshape(tuple(n if d == i else 1 for d in range(len(shape))))
             for i, n in enumerate(shape)]
    out = function(*grids, **kwargs)
    return jax.tree_util.tree_map(lambda v: E.add(zeros(shape, as_var(v).dtype), v), out)


@public
def apply_over_axes(func: Callable[[Any, int], Any], a: Any, axes: Sequence[int]) -> Variable:
    """jnp.apply_over_axes: `func(a, axis)` for each axis in turn, keeping the rank."""
    a = as_var(a)
    for axis in axes:
        b = as_var(func(a, axis))
        if b.ndim == a.ndim - 1:
            b = expand_dims(b, axis)
        elif b.ndim != a.ndim:
            raise ShapeError("apply_over_axes: the function returned a result of rank "
                             f"{b.ndim} for rank {a.ndim}", op="apply_over_axes")
        a = b
    return a


@public
def apply_along_axis(func1d: Callable[..., Any], axis: int, arr: Any, *args: Any,
                     **kwargs: Any) -> Variable:
    """jnp.apply_along_axis: `func1d` on every 1-D slice along `axis`; its result's axes
    replace `axis`. Traced as one call per slice (jax vmaps; the values are the same), so
    meant for modest batch sizes."""
    arr = as_var(arr)
    ax = _axis(axis, arr.ndim, "apply_along_axis")
    moved = moveaxis(arr, ax, -1)
    batch = moved.shape[:-1]
    rows = reshape(moved, (math.prod(batch), moved.shape[-1]))
    outs = [as_var(func1d(rows[i], *args, **kwargs)) for i in range(rows.shape[0])]
    res = reshape(stack(outs, 0), batch + outs[0].shape)
    return moveaxis(res, list(range(len(batch), res.ndim)),
                    list(range(ax, ax + outs[0].ndim))) if outs[0].ndim else res


# ---------------------------------------------------------------- polynomials

@public
def poly(seq_of_zeros: Any) -> Variable:
    """jnp.poly of a 1-D sequence of (real) roots: the monic polynomial's coefficients (the
    2-D matrix form needs complex eigenvalues and is not supported)."""
    z = _inexact(seq_of_zeros)
    if z.ndim == 0:
        z = reshape(z, (1,))
    if z.ndim != 1:
        raise ShapeError(f"poly takes a 1-D array of roots here, got {z.type_str()} (the "
                         "square-matrix form needs complex eigenvalues)", op="poly")
    if z.shape[0] == 0:
        return ones((), z.dtype)
    a = ones((1,), z.dtype)
    for k in range(z.shape[0]):
        a = convolve(a, stack([E.astype(as_var(1.0), z.dtype), E.negative(z[k])]), mode="full")
    return a


@public
def polydiv(u: Any, v: Any, *, trim_leading_zeros: bool = False) -> tuple[Variable, Variable]:
    """jnp.polydiv(u, v): the quotient and remainder (remainder as long as `u`, leading zeros
    kept; trim_leading_zeros needs concrete values and is refused)."""
    if trim_leading_zeros:
        raise ShapeError("polydiv(trim_leading_zeros=True) has a value-dependent shape",
                         op="polydiv")
    u, v = _inexact(u), _inexact(v)
    dt = dtypes.promote(u.dtype, v.dtype)
    u, v = E.astype(u, dt), E.astype(v, dt)
    m, n = u.shape[0] - 1, v.shape[0] - 1
    scale = E.divide(1.0, v[0])
    q = zeros((builtins.max(m - n + 1, 1),), u.dtype)
    for k in range(0, m - n + 1):
        d = E.multiply(scale, u[k])
        q = q.at[k].set(d)
        u = u.at[k:k + n + 1].add(E.negative(E.multiply(d, v)))
    return q, u


@public
def polyfit(x: Any, y: Any, deg: int, rcond: float | None = None, full: bool = False,
            w: Any = None, cov: bool = False) -> Variable:
    """jnp.polyfit(x, y, deg, w=): least-squares coefficients, highest power first, for
    full-rank problems (solved by QR of the column-scaled Vandermonde matrix; `full=` and
    `cov=` are not supported)."""
    if full or cov:
        raise ShapeError("polyfit: full= and cov= are not supported", op="polyfit")
    x, y = _inexact(x), _inexact(y)
    if x.ndim != 1 or y.ndim not in (1, 2) or x.shape[0] != y.shape[0]:
        raise ShapeError(f"polyfit needs 1-D x and 1-D/2-D y of one length, got "
                         f"{x.type_str()}, {y.type_str()}", op="polyfit")
    lhs, rhs = vander(x, deg + 1), y
    if w is not None:
        w = _inexact(w)
        lhs = E.multiply(lhs, w[:, None])
        rhs = E.multiply(rhs, w[:, None] if rhs.ndim == 2 else w)
    scale = E.sqrt(R.sum(E.multiply(lhs, lhs), 0))
    lhs = E.divide(lhs, scale[None, :])
    q, r = qr(lhs)
    c = solve_triangular(r, E.conj(q).T @ rhs, lower=False)  # (Q^H: complex x too)
    return E.divide(c, scale[:, None] if c.ndim == 2 else scale)


# ---------------------------------------------------------------- histograms

@public
def histogram_bin_edges(a: Any, bins: Any = 10, range: Sequence[Any] | None = None,
                        weights: Any = None) -> Variable:
    """jnp.histogram_bin_edges: `bins` (an int) equal bins over `range` (default: the data's
    min and max, widened by 0.5 each side when they are equal), or the given edges."""
    arr = _inexact(a)
    if isinstance(bins, str):
        raise ShapeError("string values for bins are not supported", op="histogram_bin_edges")
    if isinstance(bins, Variable) or np.ndim(bins) == 1:
        return E.astype(as_var(bins), arr.dtype)
    lo, hi = ((R.min(arr), R.max(arr)) if range is None else
              (E.astype(as_var(range[0]), arr.dtype), E.astype(as_var(range[1]), arr.dtype)))
    same = E.equal(lo, hi)
    lo, hi = E.where(same, E.subtract(lo, 0.5), lo), E.where(same, E.add(hi, 0.5), hi)
    return linspace(lo, hi, int(bins) + 1, dtype=arr.dtype)


@public
def histogram(a: Any, bins: Any = 10, range: Sequence[Any] | None = None, weights: Any = None,
              density: bool | None = None) -> tuple[Variable, Variable]:
    """jnp.histogram: the counts (or summed weights) per bin, the last bin closed, and the
    bin edges; differentiable in the weights and (through the edges) in `range`/`a`."""
    a = _inexact(a)
    w = E.astype(ones(a.shape, a.dtype), a.dtype) if weights is None else _inexact(weights)
    if w.shape != a.shape:
        raise ShapeError(f"histogram's weights need a's shape {a.shape}, got {w.type_str()}",
                         op="histogram")
    edges = histogram_bin_edges(a, bins, range)
    a, w = ravel(a), ravel(w)
    idx = searchsorted(edges, a, side="right")
    idx = E.where(E.equal(a, edges[-1]), edges.shape[0] - 1, idx)
    counts = zeros((edges.shape[0],), w.dtype).at[idx].add(w)[1:]
    if density:
        counts = E.divide(E.divide(counts, diff(edges)), R.sum(counts))
    return counts, edges


@public
def histogramdd(sample: Any, bins: Any = 10, range: Sequence[Any] | None = None,
                weights: Any = None, density: bool | None = None) -> tuple[Variable, list]:
    """jnp.histogramdd: the D-dimensional histogram of (N, D) samples and the edges per axis."""
    sample = _inexact(sample)
    if sample.ndim != 2:
        raise ShapeError(f"histogramdd needs (N, D) samples, got {sample.type_str()}",
                         op="histogramdd")
    n, d = sample.shape
    per_dim = list(bins) if isinstance(bins, (list, tuple)) else [bins] * d
    if len(per_dim) != d:
        raise ShapeError(f"histogramdd needs one bins entry per dimension ({d})", op="histogramdd")
    idx, edges = [], []
    for i in builtins.range(d):
        e = histogram_bin_edges(sample[:, i], per_dim[i], None if range is None else range[i])
        j = searchsorted(e, sample[:, i], side="right")
        idx.append(E.where(E.equal(sample[:, i], e[-1]), j - 1, j))
        edges.append(e)
    nbins = tuple(e.shape[0] + 1 for e in edges)
    xy = ravel_multi_index(tuple(idx), nbins, mode="clip")
    hist = bincount(xy, weights, length=math.prod(nbins))
    hist = reshape(hist, nbins)[(slice(1, -1),) * d]
    if density:
        hist = E.astype(hist, sample.dtype)
        hist = E.divide(hist, R.sum(hist))
        for norm in ix_(*[diff(e) for e in edges]):
            hist = E.divide(hist, norm)
    return hist, edges


@public
def histogram2d(x: Any, y: Any, bins: Any = 10, range: Sequence[Any] | None = None,
                weights: Any = None, density: bool | None = None
                ) -> tuple[Variable, Variable, Variable]:
    """jnp.histogram2d: histogramdd of the pairs (x, y), and the edges of each axis."""
    if isinstance(bins, (list, tuple)) and len(bins) not in (1, 2):
        bins = [bins, bins]
    hist, edges = histogramdd(stack([as_var(x), as_var(y)], 1), bins, range, weights, density)
    return hist, edges[0], edges[1]


# ---------------------------------------------------------------- special values

@public
def i0(x: Any) -> Variable:
    """jnp.i0: the modified Bessel function of order 0, as i0e(x) * exp(|x|) (|x| written
    x * sign(x), whose slope is 0 at 0, as jnp.i0's)."""
    x = _inexact(x)
    return E.multiply(i0e(x), E.exp(E.multiply(x, E.sign(x))))


def _jnp_rule(name: str, index: int | None = None) -> Callable[..., list[OutType]]:
    """The shape/dtype rule of jnp.<name> on the inputs, taken from jax itself."""
    def infer(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
        structs = [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in inputs]
        try:
            out = jax.eval_shape(getattr(jnp, name), *structs)
        except (TypeError, ValueError) as e:
            raise ShapeError(f"{name} takes floating-point arrays, got "
                             f"{', '.join(v.type_str() for v in inputs)}: {e}") from None
        return [(tuple(o.shape), np.dtype(o.dtype)) for o in jax.tree_util.tree_leaves(out)]
    return infer


def _g_frexp(op: Op, g: list, need: list) -> Iterator[Variable | None]:
    """d mantissa / dx = 2**-exponent = mantissa / x (1 at 0 and at non-finite x, as jax)."""
    x, m = op.inputs[0], op.outputs[0]
    ok = E.logical_and(E.isfinite(x), E.not_equal(x, 0.0))
    yield E.multiply(g[0], E.where(ok, E.divide(m, E.where(ok, x, 1.0)), 1.0))


register("frexp", _jnp_rule("frexp"), "jnp.frexp({0})", _g_frexp, public="frexp")


@public
def frexp(x: Any) -> tuple[Variable, Variable]:
    """jnp.frexp: mantissa in [0.5, 1) (signed) and int32 exponent, x = m * 2**e;
    differentiable in the mantissa (the exponent is piecewise constant)."""
    m, e = emit("frexp", [_inexact(x)])
    return m, e


@defop("nextafter", _jnp_rule("nextafter"), "jnp.nextafter({0}, {1})", None)
def nextafter(x1: Any, x2: Any) -> tuple[list[Variable], dict]:
    """jnp.nextafter: the next representable value after x1 towards x2 (no gradient, as jax)."""
    a, b = as_pair(x1, x2)
    return [_inexact(a), _inexact(b)], {}


@defop("spacing", _jnp_rule("spacing"), "jnp.spacing({0})", None)
def spacing(x: Any) -> tuple[list[Variable], dict]:
    """jnp.spacing: the distance to the next representable value away from 0 (no gradient)."""
    return [_inexact(x)], {}
