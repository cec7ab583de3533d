"""Array manipulation in jax.numpy's names: static gathers, atleast_*, moveaxis, rollaxis,
permute_dims, flips and rot90, roll, repeat, tile, pad, broadcast_arrays and resize (joining
and splitting: joining.py; sorting: sorting.py; the products: products.py).

They are composites of static slices, `rev`, reshapes, broadcasts, `concatenate` and
`take`, so their gradients come from those ops.

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

import builtins
from typing import Any, Sequence

import numpy as np
import math

from ..base import dtypes
from ..core.builder import as_var, constant
from ..base.errors import ShapeError
from ..ir.program import Variable
from .rules import broadcast_shapes, norm_axes, norm_axis
from .creation import arange, zeros
from ..core.declare import public
from .elementwise import astype, remainder, subtract
from .indexing import dynamic_slice, scatter_add, take
from .shape import (
    broadcast_to,
    concatenate,
    expand_dims,
    lax_pad,
    ravel,
    reshape,
    rev,
    swapaxes,
    transpose,
)
from .shape import slice as lax_slice

Axis = int | Sequence[int] | None
#: Above this many contiguous runs a static gather is one `take`, not a concatenation of slices.
_MAX_RUNS = 16


# ---------------------------------------------------------------- static gathers


def window(x: Variable, axis: int, lo: int, hi: int) -> Variable:
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
        return window(x, axis, 0, 0)
    runs = _runs(idx)
    if len(runs) > _MAX_RUNS:
        return take(x, constant(idx, dtypes.default_int()), axis)
    pieces = []
    for start, step, length in runs:
        if step == 1:
            piece = window(x, axis, start, start + length)
        elif step == -1:
            piece = rev(window(x, axis, start - length + 1, start + 1), (axis,))
        else:
            piece = window(x, axis, start, start + 1)
            if length > 1:
                piece = broadcast_to(piece, x.shape[:axis] + (length,) + x.shape[axis + 1 :])
        pieces.append(piece)
    return concatenate(pieces, axis) if len(pieces) > 1 else pieces[0]


def scatter_along(g: Variable, idx: Variable, axis: int) -> Variable:
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


def iota(x: Variable, axis: int, dtype: np.dtype) -> Variable:
    """The position along `axis`, broadcast to `x`'s shape."""
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    return broadcast_to(reshape(arange(x.shape[axis], dtype=dtype), tuple(shape)), x.shape)


def static_ints(value: Any, what: str, op: str) -> list[int]:
    """`value` (an int or a sequence of them) as Python ints; traced values are an error."""
    if isinstance(value, Variable):
        raise ShapeError(
            f"{what} must be static (Python ints), got the traced {value.type_str()}", op=op
        )
    arr = np.asarray(value)
    if arr.size and arr.dtype.kind not in "iu":
        raise ShapeError(f"{what} must be integers, got {value!r}", op=op)
    return [int(v) for v in arr.reshape(-1)]


# ---------------------------------------------------------------- dimensions


@public
def atleast_1d(*arys: Any) -> Variable | list[Variable]:
    """jnp.atleast_1d: 0-d arrays become shape (1,)."""
    out = [reshape(x, (1,)) if x.ndim == 0 else x for x in map(as_var, arys)]
    return out[0] if len(out) == 1 else out


@public
def atleast_2d(*arys: Any) -> Variable | list[Variable]:
    """jnp.atleast_2d: shape () -> (1, 1), (n,) -> (1, n)."""
    out = [
        reshape(x, (1,) * (2 - x.ndim) + x.shape) if x.ndim < 2 else x for x in map(as_var, arys)
    ]
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


# ---------------------------------------------------------------- reordering


@public
def moveaxis(a: Any, source: int | Sequence[int], destination: int | Sequence[int]) -> Variable:
    """jnp.moveaxis: move axes `source` to positions `destination`, the rest keep their order."""
    x = as_var(a)
    src = [source] if isinstance(source, (int, np.integer)) else list(source)
    dst = [destination] if isinstance(destination, (int, np.integer)) else list(destination)
    if len(src) != len(dst):
        raise ShapeError(
            f"moveaxis: source {source} and destination {destination} differ in length",
            op="moveaxis",
        )
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
        raise ShapeError(
            f"rollaxis: start {start} is out of range for rank {x.ndim}", op="rollaxis"
        )
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
        raise ShapeError(
            f"fliplr needs an array of rank at least 2, got {x.type_str()}", op="fliplr"
        )
    return rev(x, (1,))


@public
def flipud(m: Any) -> Variable:
    """jnp.flipud: reverse axis 0."""
    x = as_var(m)
    if x.ndim < 1:
        raise ShapeError(
            f"flipud needs an array of rank at least 1, got {x.type_str()}", op="flipud"
        )
    return rev(x, (0,))


@public
def rot90(m: Any, k: int = 1, axes: tuple[int, int] = (0, 1)) -> Variable:
    """jnp.rot90: rotate by 90 degrees `k` times in the plane of `axes` (first toward second)."""
    x = as_var(m)
    if len(axes) != 2 or x.ndim < 2:
        raise ShapeError(
            f"rot90 needs two axes of an array of rank >= 2, got axes {axes} of {x.type_str()}",
            op="rot90",
        )
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
        shifts: list[Any] = (
            [shift] if shift.ndim == 0 else [shift[i] for i in range(shift.shape[0])]
        )
    else:
        shifts = static_ints(shift, "shift", "roll")
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
def repeat(
    a: Any,
    repeats: int | Sequence[int],
    axis: int | None = None,
    *,
    total_repeat_length: int | None = None,
) -> Variable:
    """jnp.repeat: each element `repeats` times (an int, or one count per element) along `axis`
    (None: of the flattened array); `repeats` is static. `total_repeat_length` truncates, or
    fills with the last element, as jnp."""
    x = as_var(a)
    if axis is None:
        x, axis = ravel(x), 0
    axis = norm_axis(axis, x.ndim)
    n = x.shape[axis]
    reps = static_ints(repeats, "repeats", "repeat")
    if any(r < 0 for r in reps):
        raise ShapeError(f"repeats must be non-negative, got {repeats!r}", op="repeat")
    if len(reps) == 1 and total_repeat_length is None:
        r = reps[0]
        expanded = broadcast_to(
            expand_dims(x, axis + 1), x.shape[: axis + 1] + (r,) + x.shape[axis + 1 :]
        )
        return reshape(expanded, x.shape[:axis] + (n * r,) + x.shape[axis + 1 :])
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
    r = static_ints(reps, "reps", "tile")
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
        raise ShapeError(
            f"pad_width {pad_width!r} does not fit an array of rank {ndim}", op="pad"
        ) from None
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
            shape = out.shape[:ax] + (n,) + out.shape[ax + 1 :]
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
    allowed = {
        "constant": {"constant_values"},
        "reflect": {"reflect_type"},
        "symmetric": {"reflect_type"},
    }.get(mode, set())
    unknown = set(kwargs) - allowed
    if unknown:
        raise ShapeError(
            f"unsupported keyword arguments for mode {mode!r}: {sorted(unknown)}", op="pad"
        )
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


@public
def broadcast_arrays(*args: Any) -> list[Variable]:
    """jnp.broadcast_arrays: the arguments broadcast to their common shape."""
    vs = [as_var(a) for a in args]
    shape = broadcast_shapes(*[v.shape for v in vs])
    return [v if v.shape == shape else broadcast_to(v, shape) for v in vs]


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
def permute_dims(a: Any, /, axes: Sequence[int]) -> Variable:
    """jnp.permute_dims: transpose (the array API name)."""
    return transpose(a, tuple(axes))


@public
def matrix_transpose(x: Any, /) -> Variable:
    """jnp.matrix_transpose: swap the last two axes."""
    return swapaxes(x, -1, -2)
