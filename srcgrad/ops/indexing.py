"""Indexing: NumPy-style getitem, dynamic slices and indices, take/scatter_add, one_hot."""
from __future__ import annotations

import builtins
import inspect
from typing import Any, Sequence

import numpy as np
from jax import lax

from .. import dtypes
from ..builder import as_var
from ..errors import ShapeError
from ..ir import Op, Variable
from ..registry import REMAT_VIEW, ZERO, OutType, set_remat
from ._rules import norm_axis
from .creation import zeros
from .declare import Emitted, defop
from .elementwise import add, astype, less, where
from .shape import reshape, rev, slice, transpose


def _index_rule(start: int) -> Any:
    def check(inputs: Sequence[Variable]) -> None:
        for i in inputs[start:]:
            if i.shape != () or i.dtype.kind not in "iu":
                raise ShapeError(f"indices must be integer scalars, got {i.type_str()}")
    return check


_check_starts_1 = _index_rule(1)
_check_starts_2 = _index_rule(2)


def _dynamic_slice_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    x = inputs[0]
    _check_starts_1(inputs)
    if len(inputs) - 1 != x.ndim or any(s > d for s, d in zip(attrs["sizes"], x.shape)):
        raise ShapeError(f"dynamic_slice of {x.shape} needs {x.ndim} start indices and sizes "
                         f"within the shape, got sizes {attrs['sizes']}")
    return [(attrs["sizes"], x.dtype)]


def _check_update_dtype(x: Variable, update: Variable) -> None:
    if update.dtype != x.dtype:
        raise ShapeError(f"the update must have the operand's dtype {x.dtype.name}, got "
                         f"{update.dtype.name} (cast it with astype)")


def _dus_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    x, u = inputs[:2]
    _check_starts_2(inputs)
    if u.ndim != x.ndim or len(inputs) - 2 != x.ndim or any(a > b for a, b in zip(u.shape, x.shape)):
        raise ShapeError("dynamic_update_slice needs an update no larger than the operand "
                         "and one start index per axis")
    _check_update_dtype(x, u)
    return [(x.shape, x.dtype)]


def _dyn_index_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    x = inputs[0]
    _check_starts_1(inputs)
    axis = attrs["axis"]
    return [(x.shape[:axis] + x.shape[axis + 1:], x.dtype)]


def _dyn_update_index_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    x, v = inputs[:2]
    _check_starts_2(inputs)
    axis = attrs["axis"]
    if v.shape != x.shape[:axis] + x.shape[axis + 1:]:
        raise ShapeError(f"dynamic_update_index of {x.shape} along axis {axis} needs a value of "
                         f"shape {x.shape[:axis] + x.shape[axis + 1:]}, got {v.shape}")
    _check_update_dtype(x, v)
    return [(x.shape, x.dtype)]


def _take_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    x, idx = inputs
    if idx.dtype.kind not in "iu":
        raise ShapeError(f"take needs integer indices, got {idx.type_str()}")
    a = attrs["axis"]
    return [(x.shape[:a] + idx.shape + x.shape[a + 1:], x.dtype)]


def _scatter_add_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    x, idx, u = inputs
    a = attrs["axis"]
    want = x.shape[:a] + idx.shape + x.shape[a + 1:]
    if u.shape != want:
        raise ShapeError(f"scatter_add needs updates of shape {want}, got {u.shape}")
    return [(x.shape, x.dtype)]


def _one_hot_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    return [(inputs[0].shape + (attrs["num_classes"],), attrs["dtype"])]


# ---------------------------------------------------------------- grad makers

def _g_dynamic_slice(op: Op, g: list, need: list) -> list:
    x = op.inputs[0]
    return [dynamic_update_slice(zeros(x.shape, x.dtype), g[0], op.inputs[1:])] + [None] * (x.ndim)


def _g_dus(op: Op, g: list, need: list) -> list:
    x, u = op.inputs[:2]
    starts = op.inputs[2:]
    gx = dynamic_update_slice(g[0], zeros(u.shape, u.dtype), starts) if need[0] else None
    gu = dynamic_slice(g[0], starts, u.shape) if need[1] else None
    return [gx, gu] + [None] * len(starts)


def _g_dyn_index(op: Op, g: list, need: list) -> list:
    x, i = op.inputs
    return [dynamic_update_index(zeros(x.shape, x.dtype), g[0], i, **op.attrs), None]


def _g_dyn_update_index(op: Op, g: list, need: list) -> list:
    x, v, i = op.inputs
    gx = dynamic_update_index(g[0], zeros(v.shape, v.dtype), i, **op.attrs) if need[0] else None
    gv = dynamic_index(g[0], i, **op.attrs) if need[1] else None
    return [gx, gv, None]


def _g_take(op: Op, g: list, need: list) -> list:
    x, idx = op.inputs
    return [scatter_add(zeros(x.shape, x.dtype), idx, g[0], op.attrs["axis"]), None]


def _g_scatter_add(op: Op, g: list, need: list) -> list:
    x, idx, u = op.inputs
    return [g[0] if need[0] else None, None,
            take(g[0], idx, op.attrs["axis"]) if need[2] else None]


def _lower_scatter_add(args: list[str], attrs: dict[str, str]) -> str:
    lead = ":, " * int(attrs["axis"])
    return f"{args[0]}.at[{lead}{args[1]}].add({args[2]}, mode='drop')"


def _tuple_src(items: list[str]) -> str:
    return f"({', '.join(items)},)" if items else "()"


def _lower_dynamic_slice(args: list[str], attrs: dict[str, str]) -> str:
    return f"lax.dynamic_slice({args[0]}, {_tuple_src(args[1:])}, {attrs['sizes']})"


def _lower_dus(args: list[str], attrs: dict[str, str]) -> str:
    return f"lax.dynamic_update_slice({args[0]}, {args[1]}, {_tuple_src(args[2:])})"


# ---------------------------------------------------------------- user-facing functions

def _index_var(i: Any) -> Variable:
    v = as_var(i)
    if v.dtype.kind not in "iu" or v.shape != ():
        raise ShapeError(f"an index must be an integer scalar, got {v.type_str()}")
    return v


def _index_vars(indices: Sequence[Any]) -> list[Variable]:
    """Integer scalar indices of one dtype (Python ints take the dtype of the traced ones)."""
    like = next((i for i in indices if isinstance(i, Variable) and i.dtype.kind in "iu"), None)
    vs = [_index_var(as_var(i, like=like)) for i in indices]
    dt = vs[0].dtype if vs else None
    for v in vs[1:]:
        dt = dtypes.promote(dt, v.dtype)
    return [astype(v, dt) for v in vs]


@defop("dynamic_slice", _dynamic_slice_rule, _lower_dynamic_slice, _g_dynamic_slice)
def dynamic_slice(x: Any, start_indices: Sequence[Any], slice_sizes: Sequence[int]) -> Emitted:
    """lax.dynamic_slice: a window of static size at traced start indices."""
    x = as_var(x)
    starts = _index_vars(start_indices)
    return [x, *starts], {"sizes": tuple(int(s) for s in slice_sizes)}


@defop("dynamic_update_slice", _dus_rule, _lower_dus, _g_dus)
def dynamic_update_slice(x: Any, update: Any, start_indices: Sequence[Any]) -> Emitted:
    """lax.dynamic_update_slice: `update` written into `x` at traced start indices."""
    x = as_var(x)
    u = as_var(update, like=x)
    starts = _index_vars(start_indices)
    return [x, u, *starts], {}


#: `allow_negative_indices` came with jax 0.5.3. Before it, lax always wraps a negative index
#: (the same values, one select more), so the emitted call leaves the flag out there.
_NEGATIVE_FLAG = all("allow_negative_indices" in inspect.signature(f).parameters
                     for f in (lax.dynamic_index_in_dim, lax.dynamic_update_index_in_dim))


def _negative_flag(attrs: dict[str, str]) -> str:
    return f", allow_negative_indices={attrs['allow_negative_indices']}" if _NEGATIVE_FLAG else ""


def _lower_dyn_index(args: list[str], attrs: dict[str, str]) -> str:
    return (f"lax.dynamic_index_in_dim({args[0]}, {args[1]}, {attrs['axis']}, keepdims=False"
            f"{_negative_flag(attrs)})")


def _lower_dyn_update_index(args: list[str], attrs: dict[str, str]) -> str:
    return (f"lax.dynamic_update_index_in_dim({args[0]}, {args[1]}, {args[2]}, {attrs['axis']}"
            f"{_negative_flag(attrs)})")


@defop("dynamic_index", _dyn_index_rule, _lower_dyn_index, _g_dyn_index)
def dynamic_index(x: Variable, index: Any, axis: int = 0, *,
                  allow_negative_indices: bool = True) -> Emitted:
    """lax.dynamic_index_in_dim without the kept axis.

    `allow_negative_indices=False` (lax's option) promises `index >= 0`: srcgrad passes it
    where it has normalized the index or counts it from 0, which saves XLA a select.
    """
    x = as_var(x)
    return [x, _index_var(index)], {"axis": norm_axis(axis, x.ndim),
                                    "allow_negative_indices": allow_negative_indices}


@defop("dynamic_update_index", _dyn_update_index_rule, _lower_dyn_update_index,
       _g_dyn_update_index)
def dynamic_update_index(x: Variable, value: Any, index: Any, axis: int = 0, *,
                         allow_negative_indices: bool = True) -> Emitted:
    """lax.dynamic_update_index_in_dim: write `value` at position `index` along `axis`."""
    x = as_var(x)
    return [x, as_var(value, like=x), _index_var(index)], {
        "axis": norm_axis(axis, x.ndim), "allow_negative_indices": allow_negative_indices}


@defop("take", _take_rule, "jnp.take({0}, {1}, axis={axis})", _g_take)
def take(x: Any, indices: Any, axis: int | None = None) -> Emitted:
    """jnp.take along `axis` (None: of the flattened array); out-of-range indices clamp."""
    x = as_var(x)
    idx = as_var(indices)
    if axis is None:
        x = reshape(x, (-1,))
        axis = 0
    return [x, idx], {"axis": norm_axis(axis, x.ndim)}


@defop("scatter_add", _scatter_add_rule, _lower_scatter_add, _g_scatter_add)
def scatter_add(x: Variable, indices: Any, updates: Any, axis: int = 0) -> Emitted:
    """`x.at[indices].add(updates)` along `axis` (out-of-range indices are dropped)."""
    x = as_var(x)
    return [x, as_var(indices), as_var(updates, like=x)], {"axis": norm_axis(axis, x.ndim)}


@defop("one_hot", _one_hot_rule, "jax.nn.one_hot({0}, {num_classes}, dtype={dtype})", ZERO)
def one_hot(x: Any, num_classes: int, dtype: Any = None) -> Emitted:
    """jax.nn.one_hot(x, num_classes, dtype=float)."""
    dt = dtypes.canonical(dtype) if dtype is not None else dtypes.default_float()
    return [as_var(x)], {"num_classes": int(num_classes), "dtype": dt}


def getitem(x: Variable, index: Any) -> Variable:
    """NumPy indexing: ints, slices, None, Ellipsis, traced integer scalars, one integer array."""
    items = list(index) if isinstance(index, tuple) else [index]
    if any(i is Ellipsis for i in items):
        at = next(k for k, i in enumerate(items) if i is Ellipsis)
        used = sum(1 for i in items if i is not None and i is not Ellipsis)
        items[at:at + 1] = [builtins.slice(None)] * (x.ndim - used)
    used = sum(1 for i in items if i is not None)
    if used > x.ndim:
        raise ShapeError(f"too many indices ({used}) for {x.type_str()}", op="getitem")
    items += [builtins.slice(None)] * (x.ndim - used)
    start, limit, strides = [0] * x.ndim, list(x.shape), [1] * x.ndim
    reversed_axes, dynamic, out_shape = [], [], []
    advanced, array_dims = [], None  # positions of int/array items; where the array's dims land
    axis = 0
    for pos, it in enumerate(items):
        if it is None:
            out_shape.append(1)
            continue
        d = x.shape[axis]
        if isinstance(it, (int, np.integer)) and not isinstance(it, bool):
            advanced.append(pos)
            k = int(it)
            if not -d <= k < d:
                raise ShapeError(f"index {k} is out of bounds for axis {axis} of size {d}",
                                 op="getitem")
            start[axis], limit[axis] = k % d, k % d + 1
        elif isinstance(it, builtins.slice):
            lo, hi, st = it.indices(d)
            n = len(range(lo, hi, st))
            if st < 0:
                reversed_axes.append(axis)
                lo, st = lo + (n - 1) * st, -st
            start[axis], limit[axis], strides[axis] = (lo, lo + (n - 1) * st + 1, st) if n else (0, 0, 1)
            out_shape.append(n)
        else:
            idx = as_var(it)
            if idx.dtype.kind not in "iu":
                raise ShapeError(f"indices must be integers, got {idx.type_str()}", op="getitem")
            dynamic.append((axis, idx))
            advanced.append(pos)
            if idx.ndim:
                array_dims = tuple(range(len(out_shape), len(out_shape) + idx.ndim))
            out_shape.extend(idx.shape)
        axis += 1
    if len([i for _, i in dynamic if i.ndim]) > 1:
        raise ShapeError("indexing with more than one integer array is not supported",
                         op="getitem")
    v = x
    if (tuple(start), tuple(limit), tuple(strides)) != ((0,) * x.ndim, x.shape, (1,) * x.ndim):
        v = slice(v, start, limit, strides)
    if reversed_axes:
        v = rev(v, reversed_axes)
    for axis, idx in reversed(dynamic):
        if idx.ndim:
            v = take(v, idx, axis)
        else:
            n = v.shape[axis]
            v = dynamic_index(v, where(less(idx, 0), add(idx, n), idx), axis,
                              allow_negative_indices=False)
    v = reshape(v, tuple(out_shape))
    if array_dims and advanced[-1] - advanced[0] + 1 != len(advanced):
        # NumPy: integer indices split by a slice or None put the array's dims first.
        v = transpose(v, array_dims + tuple(i for i in range(v.ndim) if i not in array_dims))
    return v


set_remat(REMAT_VIEW, "dynamic_index", "dynamic_slice")
