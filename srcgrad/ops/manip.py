"""Array manipulation in jax.numpy's names: split/stack families, repeat, tile, roll, flips,
pad, sort, cumulative ops, diff and the products (outer, inner, kron, cross, tensordot).

Most are composites of static slices, `rev`, reshapes, broadcasts and `concatenate`, so their
gradients come from those ops. The rows declared here are the ones no composite does exactly:
`sort` (values and the permutation, one lax.sort), the cumulative `cumsum`, `cumprod`,
`cummax`, `cummin` (lax's, with `axis` and `reverse`), and the internal `linear_scan` that
cumprod's gradient is built from.
"""
from __future__ import annotations

import builtins
from typing import Any, Sequence

import jax.numpy as jnp
import numpy as np

from .. import dtypes
from ..builder import as_var, constant, emit
from ..errors import ShapeError
from ..ir import Op, Variable
from ..registry import OutType, register
from ._rules import broadcast_shapes, jax_dtype, norm_axes, norm_axis
from .creation import arange, zeros
from .declare import Emitted, defop, public
from .elementwise import (astype, equal, greater, less, multiply, not_equal, remainder,
                          subtract, where)
from .indexing import dynamic_slice, scatter_add, take
from .linalg import matmul
from .shape import broadcast_to, concatenate, expand_dims, lax_pad, reshape, rev, transpose
from .shape import slice as lax_slice

Axis = int | Sequence[int] | None
#: Above this many contiguous runs a static gather is one `take`, not a concatenation of slices.
_MAX_RUNS = 16


# ---------------------------------------------------------------- static gathers

def _window(x: Variable, axis: int, lo: int, hi: int) -> Variable:
    """`x[..., lo:hi, ...]` along `axis`."""
    if lo == 0 and hi == x.shape[axis]:
        return x
    start, limit = [0] * x.ndim, list(x.shape)
    start[axis], limit[axis] = lo, hi
    return lax_slice(x, start, limit)


def _runs(idx: list[int]) -> list[tuple[int, int, int]]:
    """`idx` as runs `(start, step, length)` with step -1, 0 or 1."""
    runs, k = [], 0
    while k < len(idx):
        length, step = 1, 0
        if k + 1 < len(idx) and idx[k + 1] - idx[k] in (-1, 0, 1):
            step = idx[k + 1] - idx[k]
            while k + length < len(idx) and idx[k + length] - idx[k + length - 1] == step:
                length += 1
        runs.append((idx[k], step, length))
        k += length
    return runs


def gather_static(x: Variable, axis: int, idx: Sequence[int]) -> Variable:
    """`x` indexed along `axis` by the static indices `idx` (in range): contiguous, reversed
    and repeated runs become slices, `rev` and broadcasts; many runs become one `take`."""
    idx = [int(i) for i in idx]
    if idx == list(range(x.shape[axis])):
        return x
    if not idx:
        return _window(x, axis, 0, 0)
    runs = _runs(idx)
    if len(runs) > _MAX_RUNS:
        return take(x, constant(idx, dtypes.default_int()), axis)
    pieces = []
    for start, step, length in runs:
        if step == 1:
            piece = _window(x, axis, start, start + length)
        elif step == -1:
            piece = rev(_window(x, axis, start - length + 1, start + 1), (axis,))
        else:
            piece = _window(x, axis, start, start + 1)
            if length > 1:
                piece = broadcast_to(piece, x.shape[:axis] + (length,) + x.shape[axis + 1:])
        pieces.append(piece)
    return concatenate(pieces, axis) if len(pieces) > 1 else pieces[0]


def _scatter_along(g: Variable, idx: Variable, axis: int) -> Variable:
    """`out[..., idx[..., j, ...], ...] += g[..., j, ...]` along `axis` (idx has g's shape): the
    rows flattened into one axis, so one `scatter_add` does every row."""
    gt, it = moveaxis(g, axis, -1), moveaxis(idx, axis, -1)
    n = gt.shape[-1]
    rows = int(np.prod(gt.shape[:-1], dtype=np.int64))
    if rows > 1:
        it = it + reshape(arange(rows, dtype=idx.dtype) * n, gt.shape[:-1] + (1,))
    flat = reshape(it, (-1,))
    out = scatter_add(zeros((rows * n,), g.dtype), flat, reshape(gt, (-1,)), 0)
    return moveaxis(reshape(out, gt.shape), -1, axis)


def _iota(x: Variable, axis: int, dtype: np.dtype) -> Variable:
    """The position along `axis`, broadcast to `x`'s shape."""
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    return broadcast_to(reshape(arange(x.shape[axis], dtype=dtype), tuple(shape)), x.shape)


def _static_ints(value: Any, what: str, op: str) -> list[int]:
    """`value` (an int or a sequence of them) as Python ints; traced values are an error."""
    if isinstance(value, Variable):
        raise ShapeError(f"{what} must be static (Python ints), got the traced {value.type_str()}",
                         op=op)
    arr = np.asarray(value)
    if arr.size and arr.dtype.kind not in "iu":
        raise ShapeError(f"{what} must be integers, got {value!r}", op=op)
    return [int(v) for v in arr.reshape(-1)]


# ---------------------------------------------------------------- split and stack

@public
def array_split(ary: Any, indices_or_sections: int | Sequence[int], axis: int = 0) -> list[Variable]:
    """jnp.array_split: `n` nearly equal sections (the first ones one longer) or split points."""
    x = as_var(ary)
    axis = norm_axis(axis, x.ndim)
    n = x.shape[axis]
    if isinstance(indices_or_sections, (int, np.integer)):
        k = int(indices_or_sections)
        if k <= 0:
            raise ShapeError(f"number of sections must be larger than 0, got {k}", op="array_split")
        size, extra = divmod(n, k)
        bounds = np.cumsum([0] + [size + 1] * extra + [size] * (k - extra)).tolist()
    else:
        points = _static_ints(indices_or_sections, "split indices", "split")
        bounds = [0] + points + [n]
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        lo, hi, _ = builtins.slice(lo, hi).indices(n)
        out.append(_window(x, axis, lo, builtins.max(lo, hi)))
    return out


@public
def split(ary: Any, indices_or_sections: int | Sequence[int], axis: int = 0) -> list[Variable]:
    """jnp.split: `n` equal sections (an error if the axis does not divide) or split points."""
    x = as_var(ary)
    if isinstance(indices_or_sections, (int, np.integer)):
        k = int(indices_or_sections)
        size = x.shape[norm_axis(axis, x.ndim)]
        if k <= 0 or size % k:
            raise ShapeError(f"array split does not result in an equal division: an axis of "
                             f"size {size} into {k} sections", op="split")
    return array_split(x, indices_or_sections, axis)


def _split_at(name: str, axis: int, min_ndim: int) -> Any:
    def fn(ary: Any, indices_or_sections: int | Sequence[int]) -> list[Variable]:
        x = as_var(ary)
        if x.ndim < min_ndim:
            raise ShapeError(f"{name} needs an array of rank at least {min_ndim}, got "
                             f"{x.type_str()}", op=name)
        return split(x, indices_or_sections, axis if x.ndim > 1 or name != "hsplit" else 0)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"jnp.{name}(ary, indices_or_sections): split along axis {axis}."
    return public(fn)


hsplit = _split_at("hsplit", 1, 1)
vsplit = _split_at("vsplit", 0, 2)
dsplit = _split_at("dsplit", 2, 3)


def _as_list(tup: Any, name: str) -> list[Variable]:
    vs = [as_var(t) for t in tup]  # a traced array is a sequence of its rows
    if not vs:
        raise ShapeError(f"{name} needs at least one array", op=name)
    return vs


def _cast_all(vs: list[Variable], dtype: Any) -> list[Variable]:
    return vs if dtype is None else [astype(v, dtype) for v in vs]


@public
def atleast_1d(*arys: Any) -> Variable | list[Variable]:
    """jnp.atleast_1d: 0-d arrays become shape (1,)."""
    out = [reshape(x, (1,)) if x.ndim == 0 else x for x in map(as_var, arys)]
    return out[0] if len(out) == 1 else out


@public
def atleast_2d(*arys: Any) -> Variable | list[Variable]:
    """jnp.atleast_2d: shape () -> (1, 1), (n,) -> (1, n)."""
    out = [reshape(x, (1,) * (2 - x.ndim) + x.shape) if x.ndim < 2 else x
           for x in map(as_var, arys)]
    return out[0] if len(out) == 1 else out


@public
def atleast_3d(*arys: Any) -> Variable | list[Variable]:
    """jnp.atleast_3d: () -> (1, 1, 1), (n,) -> (1, n, 1), (m, n) -> (m, n, 1)."""
    def three(x: Variable) -> Variable:
        if x.ndim == 0:
            return reshape(x, (1, 1, 1))
        if x.ndim == 1:
            return reshape(x, (1,) + x.shape + (1,))
        return reshape(x, x.shape + (1,)) if x.ndim == 2 else x
    out = [three(as_var(x)) for x in arys]
    return out[0] if len(out) == 1 else out


@public
def hstack(tup: Sequence[Any], dtype: Any = None) -> Variable:
    """jnp.hstack: concatenate along axis 1 (axis 0 for 1-D arrays)."""
    vs = _cast_all([atleast_1d(v) for v in _as_list(tup, "hstack")], dtype)
    return concatenate(vs, 0 if vs[0].ndim == 1 else 1)


@public
def vstack(tup: Sequence[Any], dtype: Any = None) -> Variable:
    """jnp.vstack: concatenate along axis 0 after atleast_2d."""
    return concatenate(_cast_all([atleast_2d(v) for v in _as_list(tup, "vstack")], dtype), 0)


@public
def row_stack(tup: Sequence[Any], dtype: Any = None) -> Variable:
    """NumPy's row_stack (= vstack)."""
    return vstack(tup, dtype)


@public
def dstack(tup: Sequence[Any], dtype: Any = None) -> Variable:
    """jnp.dstack: concatenate along axis 2 after atleast_3d."""
    return concatenate(_cast_all([atleast_3d(v) for v in _as_list(tup, "dstack")], dtype), 2)


@public
def column_stack(tup: Sequence[Any]) -> Variable:
    """jnp.column_stack: 1-D arrays become columns; concatenate along axis 1."""
    vs = [reshape(v, (v.size, 1)) if v.ndim < 2 else v for v in _as_list(tup, "column_stack")]
    return concatenate(vs, 1)


@public
def append(arr: Any, values: Any, axis: int | None = None) -> Variable:
    """jnp.append: concatenate `values` after `arr` (both flattened when `axis` is None)."""
    x = as_var(arr)
    v = as_var(values, like=x)
    if axis is None:
        return concatenate([ravel(x), ravel(v)], 0)
    return concatenate([x, v], axis)


# ---------------------------------------------------------------- reshaping and reordering

@public
def ravel(a: Any, order: str = "C") -> Variable:
    """jnp.ravel(a, order='C'); order 'F' flattens the transpose."""
    x = as_var(a)
    if order not in ("C", "F"):
        raise ShapeError(f"ravel supports order 'C' and 'F', got {order!r}", op="ravel")
    return reshape(x if order == "C" else transpose(x), (-1,))


@public
def moveaxis(a: Any, source: int | Sequence[int], destination: int | Sequence[int]) -> Variable:
    """jnp.moveaxis: move axes `source` to positions `destination`, the rest keep their order."""
    x = as_var(a)
    src = [source] if isinstance(source, (int, np.integer)) else list(source)
    dst = [destination] if isinstance(destination, (int, np.integer)) else list(destination)
    if len(src) != len(dst):
        raise ShapeError(f"moveaxis: source {source} and destination {destination} differ in "
                         "length", op="moveaxis")
    src = [norm_axis(int(s), x.ndim) for s in src]
    dst = [norm_axis(int(d), x.ndim) for d in dst]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ShapeError(f"moveaxis: repeated axis in {source} or {destination}", op="moveaxis")
    rest = [a for a in range(x.ndim) if a not in src]
    perm: list[int] = []
    placed = dict(zip(dst, src))
    for pos in range(x.ndim):
        perm.append(placed[pos] if pos in placed else rest.pop(0))
    return transpose(x, perm)


@public
def rollaxis(a: Any, axis: int, start: int = 0) -> Variable:
    """jnp.rollaxis: move `axis` to just before position `start` (NumPy's rule)."""
    x = as_var(a)
    axis = norm_axis(axis, x.ndim)
    start = start + x.ndim if start < 0 else start
    if not 0 <= start <= x.ndim:
        raise ShapeError(f"rollaxis: start {start} is out of range for rank {x.ndim}", op="rollaxis")
    if axis < start:
        start -= 1
    return moveaxis(x, axis, start) if axis != start else x


@public
def flip(m: Any, axis: Axis = None) -> Variable:
    """jnp.flip: reverse the order of elements along `axis` (None: every axis)."""
    x = as_var(m)
    axes = norm_axes(axis, x.ndim)
    return rev(x, axes) if axes else x


@public
def fliplr(m: Any) -> Variable:
    """jnp.fliplr: reverse axis 1."""
    x = as_var(m)
    if x.ndim < 2:
        raise ShapeError(f"fliplr needs an array of rank at least 2, got {x.type_str()}", op="fliplr")
    return rev(x, (1,))


@public
def flipud(m: Any) -> Variable:
    """jnp.flipud: reverse axis 0."""
    x = as_var(m)
    if x.ndim < 1:
        raise ShapeError(f"flipud needs an array of rank at least 1, got {x.type_str()}", op="flipud")
    return rev(x, (0,))


@public
def rot90(m: Any, k: int = 1, axes: tuple[int, int] = (0, 1)) -> Variable:
    """jnp.rot90: rotate by 90 degrees `k` times in the plane of `axes` (first toward second)."""
    x = as_var(m)
    if len(axes) != 2 or x.ndim < 2:
        raise ShapeError(f"rot90 needs two axes of an array of rank >= 2, got axes {axes} of "
                         f"{x.type_str()}", op="rot90")
    a, b = norm_axis(axes[0], x.ndim), norm_axis(axes[1], x.ndim)
    if a == b:
        raise ShapeError(f"rot90: axes {axes} must differ", op="rot90")
    k = int(k) % 4
    if k == 0:
        return x
    if k == 2:
        return rev(x, (a, b))
    perm = list(range(x.ndim))
    perm[a], perm[b] = perm[b], perm[a]
    return transpose(rev(x, (b,)), perm) if k == 1 else rev(transpose(x, perm), (b,))


@public
def roll(a: Any, shift: Any, axis: Axis = None) -> Variable:
    """jnp.roll: shift elements along `axis` cyclically (None: of the flattened array).

    `shift` and `axis` may be tuples (broadcast against each other); a traced integer shift
    works too (a dynamic slice of the axis written twice).
    """
    x = as_var(a)
    if axis is None:
        return reshape(roll(ravel(x), shift, 0), x.shape)
    axes = [axis] if isinstance(axis, (int, np.integer)) else list(axis)
    if isinstance(shift, Variable):
        if shift.dtype.kind not in "iu" or shift.ndim > 1:
            raise ShapeError(f"roll needs integer shifts, got {shift.type_str()}", op="roll")
        shifts: list[Any] = [shift] if shift.ndim == 0 else [shift[i] for i in range(shift.shape[0])]
    else:
        shifts = _static_ints(shift, "shift", "roll")
    if len(shifts) == 1:
        shifts = shifts * len(axes)
    elif len(axes) == 1:
        axes = axes * len(shifts)
    if len(shifts) != len(axes):
        raise ShapeError(f"roll: shift {shift} and axis {axis} do not broadcast", op="roll")
    out = x
    for s, ax in zip(shifts, axes):
        ax = norm_axis(int(ax), x.ndim)
        n = x.shape[ax]
        if n == 0:
            continue
        if isinstance(s, Variable):
            start = subtract(n, remainder(s, n))  # in 1..n
            starts = [0] * x.ndim
            starts[ax] = start
            out = dynamic_slice(concatenate([out, out], ax), starts, out.shape)
        elif s % n:
            out = gather_static(out, ax, [(i - s) % n for i in range(n)])
    return out


@public
def repeat(a: Any, repeats: int | Sequence[int], axis: int | None = None, *,
           total_repeat_length: int | None = None) -> Variable:
    """jnp.repeat: each element `repeats` times (an int, or one count per element) along `axis`
    (None: of the flattened array); `repeats` is static. `total_repeat_length` truncates, or
    fills with the last element, as jnp."""
    x = as_var(a)
    if axis is None:
        x, axis = ravel(x), 0
    axis = norm_axis(axis, x.ndim)
    n = x.shape[axis]
    reps = _static_ints(repeats, "repeats", "repeat")
    if any(r < 0 for r in reps):
        raise ShapeError(f"repeats must be non-negative, got {repeats!r}", op="repeat")
    if len(reps) == 1 and total_repeat_length is None:
        r = reps[0]
        expanded = broadcast_to(expand_dims(x, axis + 1), x.shape[:axis + 1] + (r,) + x.shape[axis + 1:])
        return reshape(expanded, x.shape[:axis] + (n * r,) + x.shape[axis + 1:])
    if len(reps) == 1:
        reps = reps * n
    if len(reps) != n:
        raise ShapeError(f"repeat: {len(reps)} repeats for an axis of size {n}", op="repeat")
    idx = np.repeat(np.arange(n), reps).tolist()
    if total_repeat_length is not None:
        t = int(total_repeat_length)
        if t > len(idx) and n == 0:
            raise ShapeError(f"repeat: total_repeat_length {t} of an empty axis", op="repeat")
        idx = idx[:t] + [n - 1] * (t - len(idx))  # as jnp: the last element fills the rest
    return gather_static(x, axis, idx)


@public
def tile(A: Any, reps: int | Sequence[int]) -> Variable:
    """jnp.tile: `A` repeated `reps` times per axis (shapes padded with leading ones)."""
    x = as_var(A)
    r = _static_ints(reps, "reps", "tile")
    nd = builtins.max(x.ndim, len(r))
    r = [1] * (nd - len(r)) + r
    shape = (1,) * (nd - x.ndim) + x.shape
    inter = tuple(d for pair in zip([1] * nd, shape) for d in pair)
    target = tuple(d for pair in zip(r, shape) for d in pair)
    out = broadcast_to(reshape(x, inter), target)
    return reshape(out, tuple(a * b for a, b in zip(r, shape)))


# ---------------------------------------------------------------- pad

_PAD_MODES = ("constant", "edge", "reflect", "symmetric", "wrap")


def _pad_widths(pad_width: Any, ndim: int) -> list[tuple[int, int]]:
    if isinstance(pad_width, Variable):
        raise ShapeError("pad_width must be static ints", op="pad")
    arr = np.asarray(pad_width)
    if arr.dtype.kind not in "iu" and arr.size and not np.all(np.mod(arr, 1) == 0):
        raise ShapeError(f"pad_width must be integers, got {pad_width!r}", op="pad")
    try:
        widths = np.broadcast_to(arr.astype(np.int64), (ndim, 2))
    except ValueError:
        raise ShapeError(f"pad_width {pad_width!r} does not fit an array of rank {ndim}",
                         op="pad") from None
    if np.any(widths < 0):
        raise ShapeError(f"pad_width must be non-negative, got {pad_width!r}", op="pad")
    return [(int(lo), int(hi)) for lo, hi in widths]


def _constant_pad(x: Variable, widths: list[tuple[int, int]], values: Any) -> Variable:
    """Constant padding: one zero `lax_pad`, or per axis a fill on each side (later axes
    cover the corners, as NumPy)."""
    if isinstance(values, Variable) or (np.ndim(values) == 0 and values != 0):
        fills = [(values, values)] * x.ndim
    elif np.ndim(values) == 0:
        return lax_pad(x, [(lo, hi, 0) for lo, hi in widths]) if any(map(any, widths)) else x
    else:
        v = np.asarray(values)
        fills = [tuple(p) for p in np.broadcast_to(v, (x.ndim, 2)).tolist()]
    out = x
    for ax, ((lo, hi), pair) in enumerate(zip(widths, fills)):
        parts = []
        for n, val in zip((lo, hi), pair):
            shape = out.shape[:ax] + (n,) + out.shape[ax + 1:]
            if n:
                fill = astype(as_var(val, like=x), x.dtype)
                parts.append(broadcast_to(fill, shape))
        if parts:
            body = [parts[0], out] if lo else [out]
            out = concatenate(body + ([parts[-1]] if hi else []), ax)
    return out


@public
def pad(array: Any, pad_width: Any, mode: str = "constant", **kwargs: Any) -> Variable:
    """jnp.pad(array, pad_width, mode='constant', **kwargs): modes constant (with
    `constant_values`), edge, reflect, symmetric and wrap."""
    x = as_var(array)
    widths = _pad_widths(pad_width, x.ndim)
    if mode not in _PAD_MODES:
        raise ShapeError(f"pad mode {mode!r} is not supported (use one of {_PAD_MODES})", op="pad")
    allowed = {"constant": {"constant_values"}, "reflect": {"reflect_type"},
               "symmetric": {"reflect_type"}}.get(mode, set())
    unknown = set(kwargs) - allowed
    if unknown:
        raise ShapeError(f"unsupported keyword arguments for mode {mode!r}: {sorted(unknown)}",
                         op="pad")
    if kwargs.get("reflect_type", "even") != "even":
        raise ShapeError("pad: only reflect_type='even' is supported", op="pad")
    if mode == "constant":
        return _constant_pad(x, widths, kwargs.get("constant_values", 0))
    out = x
    for ax, (lo, hi) in enumerate(widths):
        n = x.shape[ax]
        if not lo and not hi:
            continue
        if n == 0:
            raise ShapeError(f"pad mode {mode!r} cannot extend the empty axis {ax}", op="pad")
        idx = np.pad(np.arange(n), (lo, hi), mode=mode).tolist()
        out = gather_static(out, ax, idx)
    return out


# ---------------------------------------------------------------- sort

def _sort_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    x = inputs[0]
    if x.dtype.kind == "c":
        raise ShapeError(f"sort of complex values is not supported, got {x.type_str()}")
    return [(x.shape, x.dtype), (x.shape, attrs["index_dtype"])]


def _lower_sort(args: list[str], attrs: dict[str, str]) -> str:
    x, axis, stable = args[0], attrs["axis"], attrs["stable"]
    iota = f"lax.broadcasted_iota({attrs['index_dtype']}, {x}.shape, {axis})"
    if attrs["descending"] != "True":
        return f"lax.sort_key_val({x}, {iota}, {axis}, is_stable={stable})"
    if stable == "True":  # reversed first, so that equal values keep their order (as jnp)
        x, iota = f"lax.rev({x}, ({axis},))", f"lax.rev({iota}, ({axis},))"
    return (f"tuple(lax.rev(r, ({axis},)) for r in "
            f"lax.sort_key_val({x}, {iota}, {axis}, is_stable={stable}))")


def _g_sort(op: Op, g: list, need: list) -> list:
    return [_scatter_along(g[0], op.outputs[1], op.attrs["axis"])]


register("sort", _sort_rule, _lower_sort, _g_sort, public="sort")


def _sorted(name: str, a: Any, axis: int | None, kind: None, order: None, stable: bool,
            descending: bool) -> list[Variable]:
    """The sort row's outputs: the values and the permutation (jnp.argsort's)."""
    if kind is not None or order is not None:
        raise ShapeError(f"{name}: kind= and order= are not supported (use stable=)", op=name)
    x = as_var(a)
    if axis is None:
        x, axis = ravel(x), 0
    return emit("sort", [x], {"axis": norm_axis(axis, x.ndim), "stable": bool(stable),
                              "descending": bool(descending),
                              "index_dtype": dtypes.default_int()})


@public
def sort(a: Any, axis: int | None = -1, *, kind: None = None, order: None = None,
         stable: bool = True, descending: bool = False) -> Variable:
    """jnp.sort(a, axis=-1, *, stable=True, descending=False); NaNs sort last."""
    return _sorted("sort", a, axis, kind, order, stable, descending)[0]


@public
def argsort(a: Any, axis: int | None = -1, *, kind: None = None, order: None = None,
            stable: bool = True, descending: bool = False, dtype: Any = None) -> Variable:
    """jnp.argsort(a, axis=-1, *, stable=True, descending=False, dtype=None)."""
    idx = _sorted("argsort", a, axis, kind, order, stable, descending)[1]
    return idx if dtype is None else astype(idx, dtype)


@public
def take_along_axis(arr: Any, indices: Any, axis: int | None, mode: None = None,
                    fill_value: None = None) -> Variable:
    """jnp.take_along_axis(arr, indices, axis): negative indices count from the end;
    out-of-range indices clamp (jnp fills them with NaN)."""
    if mode is not None or fill_value is not None:
        raise ShapeError("take_along_axis: mode= and fill_value= are not supported",
                         op="take_along_axis")
    x, idx = as_var(arr), as_var(indices)
    if axis is None:
        x, axis = ravel(x), 0
    if idx.ndim != x.ndim or idx.dtype.kind not in "iu":
        raise ShapeError(f"take_along_axis needs integer indices of the array's rank "
                         f"{x.ndim}, got {idx.type_str()}", op="take_along_axis")
    axis = norm_axis(axis, x.ndim)
    rest = broadcast_shapes(x.shape[:axis] + (1,) + x.shape[axis + 1:],
                            idx.shape[:axis] + (1,) + idx.shape[axis + 1:])
    x = broadcast_to(x, rest[:axis] + (x.shape[axis],) + rest[axis + 1:])
    idx = broadcast_to(idx, rest[:axis] + (idx.shape[axis],) + rest[axis + 1:])
    idx = where(less(idx, 0), idx + x.shape[axis], idx)
    xt, it = moveaxis(x, axis, -1), moveaxis(idx, axis, -1)
    rows = int(np.prod(xt.shape[:-1], dtype=np.int64))
    if rows > 1:  # one take over the flattened rows: row r's indices shifted by r * n
        it = it + reshape(arange(rows, dtype=it.dtype) * xt.shape[-1], xt.shape[:-1] + (1,))
    flat = take(reshape(xt, (-1,)), reshape(it, (-1,)), 0)
    return moveaxis(reshape(flat, it.shape), -1, axis)


# ---------------------------------------------------------------- cumulative ops

def _cum_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    x = inputs[0]
    norm_axis(attrs["axis"], x.ndim)
    return [(x.shape, x.dtype)]


def _cum_lower(name: str) -> str:
    return f"lax.{name}({{0}}, axis={{axis}}, reverse={{reverse}})"


def _g_cumsum(op: Op, g: Variable) -> Variable:
    return lax_cumsum(g, op.attrs["axis"], not op.attrs["reverse"])


def _shift(v: Variable, axis: int, by: int, fill: float = 0.0) -> Variable:
    """`v` shifted by one along `axis` (`by` = 1: toward higher indices), `fill` coming in."""
    n = v.shape[axis]
    if n == 0:
        return v
    kept = _window(v, axis, 0, n - 1) if by > 0 else _window(v, axis, 1, n)
    if fill == 0.0:
        cfg = [(0, 0, 0)] * v.ndim
        cfg[axis] = (1, 0, 0) if by > 0 else (0, 1, 0)
        return lax_pad(kept, cfg)
    edge = broadcast_to(astype(as_var(fill, like=v), v.dtype),
                        v.shape[:axis] + (1,) + v.shape[axis + 1:])
    return concatenate([edge, kept] if by > 0 else [kept, edge], axis)


def _linear_scan_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    a, b = inputs
    if a.shape != b.shape or a.dtype != b.dtype:
        raise ShapeError("linear_scan needs coefficients and offsets of one shape and dtype")
    norm_axis(attrs["axis"], a.ndim)
    return [(a.shape, a.dtype)]


def _lower_linear_scan(args: list[str], attrs: dict[str, str]) -> str:
    return (f"lax.associative_scan(lambda p, q: (p[0] * q[0], q[0] * p[1] + q[1]), "
            f"({args[0]}, {args[1]}), reverse={attrs['reverse']}, axis={attrs['axis']})[1]")


def _g_linear_scan(op: Op, g: list, need: list) -> list:
    """out = a * out(previous) + b is linear in b; its adjoint runs the other way with the
    coefficients shifted by one, and a's gradient is that adjoint times the previous out."""
    a, out = op.inputs[0], op.outputs[0]
    axis, reverse = op.attrs["axis"], op.attrs["reverse"]
    toward = -1 if reverse else 1  # where the previous element comes from, seen from the next
    lam = linear_scan(_shift(a, axis, -toward), g[0], axis, not reverse)
    ga = multiply(lam, _shift(out, axis, toward)) if need[0] else None
    return [ga, lam if need[1] else None]


@defop("linear_scan", _linear_scan_rule, _lower_linear_scan, _g_linear_scan, export=False)
def linear_scan(a: Variable, b: Variable, axis: int, reverse: bool = False) -> Emitted:
    """`out[i] = a[i] * out[i - 1] + b[i]` along `axis` (`reverse`: from the end, out[i + 1]),
    as one associative scan: the adjoint of cumprod without dividing by its inputs."""
    return [a, b], {"axis": axis, "reverse": bool(reverse)}


def _g_cumprod(op: Op, g: Variable) -> Variable:
    """d out_i / d x_j = prod_{k<j} x_k * prod_{j<k<=i} x_k (for a forward cumprod): the
    exclusive product times the sum over i of g_i prod_{j<k<=i} x_k, which is a reverse
    linear scan; exact with zeros in `x`, no division."""
    x, out = op.inputs[0], op.outputs[0]
    axis, reverse = op.attrs["axis"], op.attrs["reverse"]
    if x.shape[axis] == 0:
        return g
    toward = -1 if reverse else 1
    exclusive = _shift(out, axis, toward, 1.0)
    later = linear_scan(_shift(x, axis, -toward), g, axis, not reverse)
    return multiply(exclusive, later)


def _g_cumulative_extreme(op: Op, g: Variable) -> Variable:
    """Each output's gradient goes to the position of its running extreme (the first one
    where several are equal)."""
    x, out = op.inputs[0], op.outputs[0]
    axis, reverse = op.attrs["axis"], op.attrs["reverse"]
    n = x.shape[axis]
    if n == 0:
        return g
    better = greater if op.type == "cummax" else less
    if reverse:  # the position counted from the end
        x, out = rev(x, (axis,)), rev(out, (axis,))
    prev = concatenate([_window(x, axis, 0, 1), _window(out, axis, 0, n - 1)], axis)
    new = better(x, prev)
    pos = _iota(x, axis, dtypes.default_int())
    is_first = equal(pos, 0)
    where_new = where(new | is_first, pos, 0)
    idx = cummax(where_new, axis, False)
    if reverse:
        idx = subtract(n - 1, rev(idx, (axis,)))
    return _scatter_along(g, idx, axis)


def _cumulative_front(name: str) -> Any:
    def front(x: Variable, axis: int = 0, reverse: bool = False) -> Emitted:
        x = as_var(x)
        if x.ndim == 0:
            raise ShapeError(f"{name} needs an array of rank >= 1, got {x.type_str()}", op=name)
        return [x], {"axis": norm_axis(axis, x.ndim), "reverse": bool(reverse)}
    front.__name__ = front.__qualname__ = name
    front.__doc__ = f"lax.{name}(operand, axis=0, reverse=False)."
    return front


lax_cumsum = defop("cumsum", _cum_rule, _cum_lower("cumsum"), (_g_cumsum,),
                   export="cumsum")(_cumulative_front("cumsum"))
lax_cumprod = defop("cumprod", _cum_rule, _cum_lower("cumprod"), (_g_cumprod,),
                    export="cumprod")(_cumulative_front("cumprod"))
cummax = defop("cummax", _cum_rule, _cum_lower("cummax"), (_g_cumulative_extreme,))(
    _cumulative_front("cummax"))
cummin = defop("cummin", _cum_rule, _cum_lower("cummin"), (_g_cumulative_extreme,))(
    _cumulative_front("cummin"))


def _cumulative(name: str, a: Any, axis: int | None, dtype: Any, out: None) -> Variable:
    if out is not None:
        raise ShapeError("out= is not supported (JAX arrays are immutable); use the result", op=name)
    x = as_var(a)
    if axis is None:
        x, axis = ravel(x), 0
    want = dtypes.canonical(dtype) if dtype is not None else jax_dtype(
        getattr(jnp, name), x.dtype)
    x = astype(x, want)
    return (lax_cumsum if name == "cumsum" else lax_cumprod)(x, axis)


@public
def cumsum(a: Any, axis: int | None = None, dtype: Any = None, out: None = None) -> Variable:
    """jnp.cumsum(a, axis=None, dtype=None, out=None): None flattens; bools and small ints
    accumulate in the default int, as jnp."""
    return _cumulative("cumsum", a, axis, dtype, out)


@public
def cumprod(a: Any, axis: int | None = None, dtype: Any = None, out: None = None) -> Variable:
    """jnp.cumprod(a, axis=None, dtype=None, out=None); the gradient is exact with zeros."""
    return _cumulative("cumprod", a, axis, dtype, out)


@public
def diff(a: Any, n: int = 1, axis: int = -1, prepend: Any = None, append: Any = None) -> Variable:
    """jnp.diff: the `n`-th forward difference along `axis` (bools: not_equal), after
    concatenating `prepend` and `append` (scalars broadcast to one slice)."""
    x = as_var(a)
    if x.ndim == 0:
        raise ShapeError("diff needs an array of rank >= 1", op="diff")
    axis = norm_axis(axis, x.ndim)
    n = int(n)
    if n < 0:
        raise ShapeError(f"diff: order n must be non-negative, got {n}", op="diff")
    if n == 0:
        return x
    def edge(extra: Any) -> Variable:
        e = as_var(extra, like=x)
        return broadcast_to(e, x.shape[:axis] + (1,) + x.shape[axis + 1:]) if e.ndim == 0 else e
    parts = ([edge(prepend)] if prepend is not None else []) + [x] + (
        [edge(append)] if append is not None else [])
    out = concatenate(parts, axis) if len(parts) > 1 else x
    for _ in range(n):
        m = out.shape[axis]
        hi, lo = _window(out, axis, builtins.min(1, m), m), _window(out, axis, 0, builtins.max(m - 1, 0))
        out = not_equal(hi, lo) if out.dtype == np.dtype(bool) else subtract(hi, lo)
    return out


# ---------------------------------------------------------------- products

@public
def outer(a: Any, b: Any, out: None = None) -> Variable:
    """jnp.outer: the flattened `a` times the flattened `b`, as a matrix."""
    if out is not None:
        raise ShapeError("out= is not supported", op="outer")
    x, y = as_var(a), as_var(b)
    return multiply(reshape(x, (x.size, 1)), reshape(y, (1, y.size)))


def _matrix(v: Variable, contracted: list[int], contracted_last: bool) -> Variable:
    """`v` as a matrix with the `contracted` axes (in that order) grouped into its last
    (or first) dimension and the other axes, in order, into the other. Where the contracted
    axes already lead or trail in order, a 2-D transpose of a reshape (which XLA folds into
    the dot) stands in for an N-D transpose."""
    free = [i for i in range(v.ndim) if i not in contracted]
    k = int(np.prod([v.shape[i] for i in contracted], dtype=np.int64))
    f = int(np.prod([v.shape[i] for i in free], dtype=np.int64))
    n = len(contracted)
    leading, trailing = contracted == list(range(n)), contracted == list(range(v.ndim - n, v.ndim))
    if contracted_last:
        if trailing:
            return reshape(v, (f, k))
        if leading:
            return transpose(reshape(v, (k, f)))
        return reshape(transpose(v, free + contracted), (f, k))
    if leading:
        return reshape(v, (k, f))
    if trailing:
        return transpose(reshape(v, (f, k)))
    return reshape(transpose(v, contracted + free), (k, f))


@public
def tensordot(a: Any, b: Any, axes: int | Sequence[Any] = 2, *, precision: Any = None,
              preferred_element_type: Any = None) -> Variable:
    """jnp.tensordot: contract the last `axes` axes of `a` with the first of `b`, or the
    axes named by a pair of sequences; one matmul after a transpose and reshape."""
    x, y = as_var(a), as_var(b)
    if isinstance(axes, (int, np.integer)):
        k = int(axes)
        if k < 0 or k > builtins.min(x.ndim, y.ndim):
            raise ShapeError(f"tensordot: axes={k} for {x.type_str()} and {y.type_str()}",
                             op="tensordot")
        ax, bx = list(range(x.ndim - k, x.ndim)), list(range(k))
    else:
        if len(axes) != 2:
            raise ShapeError(f"tensordot: axes must be an int or a pair, got {axes!r}",
                             op="tensordot")
        ax, bx = ([s] if isinstance(s, (int, np.integer)) else list(s) for s in axes)
        if len(ax) != len(bx):
            raise ShapeError(f"tensordot: axes {axes!r} name different numbers of axes",
                             op="tensordot")
        ax = [norm_axis(int(i), x.ndim) for i in ax]
        bx = [norm_axis(int(i), y.ndim) for i in bx]
    for i, j in zip(ax, bx):
        if x.shape[i] != y.shape[j]:
            raise ShapeError(f"tensordot: axis {i} of {x.type_str()} and axis {j} of "
                             f"{y.type_str()} differ", op="tensordot")
    ma = _matrix(x, ax, contracted_last=True)
    mb = _matrix(y, bx, contracted_last=False)
    out = matmul(ma, mb)
    if preferred_element_type is not None:
        out = astype(out, preferred_element_type)
    return reshape(out, tuple(d for i, d in enumerate(x.shape) if i not in ax)
                   + tuple(d for j, d in enumerate(y.shape) if j not in bx))


@public
def inner(a: Any, b: Any) -> Variable:
    """jnp.inner: the sum product over the last axes (a product with a scalar)."""
    x, y = as_var(a), as_var(b)
    if x.ndim == 0 or y.ndim == 0:
        return multiply(x, y)
    return tensordot(x, y, ((x.ndim - 1,), (y.ndim - 1,)))


@public
def kron(a: Any, b: Any) -> Variable:
    """jnp.kron: the Kronecker product (shapes padded with leading ones to one rank)."""
    x, y = as_var(a), as_var(b)
    nd = builtins.max(x.ndim, y.ndim)
    xs, ys = (1,) * (nd - x.ndim) + x.shape, (1,) * (nd - y.ndim) + y.shape
    xa = reshape(x, tuple(d for s in xs for d in (s, 1)))
    yb = reshape(y, tuple(d for s in ys for d in (1, s)))
    return reshape(multiply(xa, yb), tuple(p * q for p, q in zip(xs, ys)))


@public
def cross(a: Any, b: Any, axisa: int = -1, axisb: int = -1, axisc: int = -1,
          axis: int | None = None) -> Variable:
    """jnp.cross of 3-vectors (or 2-vectors: the z component only when both are) along
    `axisa`/`axisb`, the result's vector axis at `axisc`; `axis` sets all three."""
    x, y = as_var(a), as_var(b)
    if axis is not None:
        axisa = axisb = axisc = axis
    x = moveaxis(x, norm_axis(axisa, x.ndim), -1) if x.ndim else x
    y = moveaxis(y, norm_axis(axisb, y.ndim), -1) if y.ndim else y
    if x.ndim == 0 or y.ndim == 0 or x.shape[-1] not in (2, 3) or y.shape[-1] not in (2, 3):
        raise ShapeError(f"cross needs vectors of length 2 or 3 along the axis, got "
                         f"{x.type_str()} and {y.type_str()}", op="cross")
    xc = [x[..., i] for i in range(x.shape[-1])]
    yc = [y[..., i] for i in range(y.shape[-1])]
    z3 = subtract(multiply(xc[0], yc[1]), multiply(xc[1], yc[0]))
    if len(xc) == 2 and len(yc) == 2:
        return z3
    zero = zeros((), dtypes.promote(x.dtype, y.dtype))
    x3, y3 = xc + [zero] * (3 - len(xc)), yc + [zero] * (3 - len(yc))
    c0 = subtract(multiply(x3[1], y3[2]), multiply(x3[2], y3[1]))
    c1 = subtract(multiply(x3[2], y3[0]), multiply(x3[0], y3[2]))
    parts = [c0, c1, z3]
    shape = broadcast_shapes(*(p.shape for p in parts))
    out = concatenate([expand_dims(broadcast_to(p, shape), -1) for p in parts], -1)
    return moveaxis(out, -1, norm_axis(axisc, out.ndim))
