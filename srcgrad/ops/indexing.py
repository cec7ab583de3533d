"""Indexing: NumPy-style getitem (advanced indexing included), dynamic slices and indices,
take/scatter_add, one_hot (`x.at[...]` updates: index_update.py).

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

import builtins
import inspect
from typing import Any, Sequence

import jax
import numpy as np
from jax import lax

from ..base import dtypes
from ..core.builder import as_var
from ..base.errors import ShapeError
from ..ir.program import Op, Variable
from ..core.registry import LINEAR, REMAT_VIEW, ZERO, OutType
from .rules import broadcast_shapes, norm_axis
from .creation import full, zeros
from ..core.declare import Emitted, defop
from .elementwise import (
    add,
    astype,
    greater_equal,
    less,
    logical_and,
    maximum,
    minimum,
    stop_gradient,
    where,
)
from .shape import broadcast_to, concatenate, reshape, rev, slice, transpose


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
        raise ShapeError(
            f"dynamic_slice of {x.shape} needs {x.ndim} start indices and sizes "
            f"within the shape, got sizes {attrs['sizes']}"
        )
    return [(attrs["sizes"], x.dtype)]


def check_update_dtype(x: Variable, update: Variable) -> None:
    """An update must already have the operand's dtype: a ShapeError otherwise."""
    if update.dtype != x.dtype:
        raise ShapeError(
            f"the update must have the operand's dtype {x.dtype.name}, got "
            f"{update.dtype.name} (cast it with astype)"
        )


def _dus_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    x, u = inputs[:2]
    _check_starts_2(inputs)
    if (
        u.ndim != x.ndim
        or len(inputs) - 2 != x.ndim
        or any(a > b for a, b in zip(u.shape, x.shape))
    ):
        raise ShapeError(
            "dynamic_update_slice needs an update no larger than the operand "
            "and one start index per axis"
        )
    check_update_dtype(x, u)
    return [(x.shape, x.dtype)]


def _dyn_index_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    x = inputs[0]
    _check_starts_1(inputs)
    axis = attrs["axis"]
    return [(x.shape[:axis] + x.shape[axis + 1 :], x.dtype)]


def _dyn_update_index_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    x, v = inputs[:2]
    _check_starts_2(inputs)
    axis = attrs["axis"]
    if v.shape != x.shape[:axis] + x.shape[axis + 1 :]:
        raise ShapeError(
            f"dynamic_update_index of {x.shape} along axis {axis} needs a value of "
            f"shape {x.shape[:axis] + x.shape[axis + 1 :]}, got {v.shape}"
        )
    check_update_dtype(x, v)
    return [(x.shape, x.dtype)]


def _take_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    x, idx = inputs
    if idx.dtype.kind not in "iu":
        raise ShapeError(f"take needs integer indices, got {idx.type_str()}")
    a = attrs["axis"]
    return [(x.shape[:a] + idx.shape + x.shape[a + 1 :], x.dtype)]


def _scatter_add_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    x, idx, u = inputs
    a = attrs["axis"]
    want = x.shape[:a] + idx.shape + x.shape[a + 1 :]
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
    """The updates' gradient is `g` read at their indices, 0 for the dropped ones (as JAX)."""
    x, idx, u = op.inputs
    gu = None
    if need[2]:
        a, n = op.attrs["axis"], x.shape[op.attrs["axis"]]
        inside = logical_and(greater_equal(idx, -n), less(idx, n))
        read = take(g[0], where(inside, idx, 0), a)
        mask = reshape(inside, (1,) * a + idx.shape + (1,) * (x.ndim - a - 1))
        gu = where(mask, read, zeros((), read.dtype))
    return [g[0] if need[0] else None, None, gu]


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


@defop(
    "dynamic_slice",
    _dynamic_slice_rule,
    _lower_dynamic_slice,
    _g_dynamic_slice,
    jvp=LINEAR,
    remat=REMAT_VIEW,
)
def dynamic_slice(x: Any, start_indices: Sequence[Any], slice_sizes: Sequence[int]) -> Emitted:
    """lax.dynamic_slice: a window of static size at traced start indices."""
    x = as_var(x)
    starts = _index_vars(start_indices)
    return [x, *starts], {"sizes": tuple(int(s) for s in slice_sizes)}


@defop("dynamic_update_slice", _dus_rule, _lower_dus, _g_dus, jvp=LINEAR)
def dynamic_update_slice(x: Any, update: Any, start_indices: Sequence[Any]) -> Emitted:
    """lax.dynamic_update_slice: `update` written into `x` at traced start indices."""
    x = as_var(x)
    u = as_var(update, like=x)
    starts = _index_vars(start_indices)
    return [x, u, *starts], {}


#: `allow_negative_indices` came with jax 0.5.3. Before it, lax always wraps a negative index
#: (the same values, one select more), so the emitted call leaves the flag out there.
_NEGATIVE_FLAG = all(
    "allow_negative_indices" in inspect.signature(f).parameters
    for f in (lax.dynamic_index_in_dim, lax.dynamic_update_index_in_dim)
)


def _negative_flag(attrs: dict[str, str]) -> str:
    return f", allow_negative_indices={attrs['allow_negative_indices']}" if _NEGATIVE_FLAG else ""


def _lower_dyn_index(args: list[str], attrs: dict[str, str]) -> str:
    return (
        f"lax.dynamic_index_in_dim({args[0]}, {args[1]}, {attrs['axis']}, keepdims=False"
        f"{_negative_flag(attrs)})"
    )


def _lower_dyn_update_index(args: list[str], attrs: dict[str, str]) -> str:
    return (
        f"lax.dynamic_update_index_in_dim({args[0]}, {args[1]}, {args[2]}, {attrs['axis']}"
        f"{_negative_flag(attrs)})"
    )


@defop(
    "dynamic_index", _dyn_index_rule, _lower_dyn_index, _g_dyn_index, jvp=LINEAR, remat=REMAT_VIEW
)
def dynamic_index(
    x: Variable, index: Any, axis: int = 0, *, allow_negative_indices: bool = True
) -> Emitted:
    """lax.dynamic_index_in_dim without the kept axis.

    `allow_negative_indices=False` (lax's option) promises `index >= 0`: srcgrad passes it
    where it has normalized the index or counts it from 0, which saves XLA a select.
    """
    x = as_var(x)
    return [x, _index_var(index)], {
        "axis": norm_axis(axis, x.ndim),
        "allow_negative_indices": allow_negative_indices,
    }


@defop(
    "dynamic_update_index",
    _dyn_update_index_rule,
    _lower_dyn_update_index,
    _g_dyn_update_index,
    jvp=LINEAR,
)
def dynamic_update_index(
    x: Variable, value: Any, index: Any, axis: int = 0, *, allow_negative_indices: bool = True
) -> Emitted:
    """lax.dynamic_update_index_in_dim: write `value` at position `index` along `axis`."""
    x = as_var(x)
    return [x, as_var(value, like=x), _index_var(index)], {
        "axis": norm_axis(axis, x.ndim),
        "allow_negative_indices": allow_negative_indices,
    }


@defop("take", _take_rule, "jnp.take({0}, {1}, axis={axis})", _g_take, jvp=LINEAR)
def take(x: Any, indices: Any, axis: int | None = None) -> Emitted:
    """jnp.take along `axis` (None: of the flattened array); out-of-range indices clamp."""
    x = as_var(x)
    idx = as_var(indices)
    if axis is None:
        x = reshape(x, (-1,))
        axis = 0
    return [x, idx], {"axis": norm_axis(axis, x.ndim)}


@defop("scatter_add", _scatter_add_rule, _lower_scatter_add, _g_scatter_add, jvp=LINEAR)
def scatter_add(x: Variable, indices: Any, updates: Any, axis: int = 0) -> Emitted:
    """`x.at[indices].add(updates)` along `axis` (out-of-range indices are dropped)."""
    x = as_var(x)
    return [x, as_var(indices), as_var(updates, like=x)], {"axis": norm_axis(axis, x.ndim)}


@defop("one_hot", _one_hot_rule, "jax.nn.one_hot({0}, {num_classes}, dtype={dtype})", ZERO)
def one_hot(x: Any, num_classes: int, dtype: Any = None) -> Emitted:
    """jax.nn.one_hot(x, num_classes, dtype=float)."""
    dt = dtypes.canonical(dtype) if dtype is not None else dtypes.default_float()
    return [as_var(x)], {"num_classes": int(num_classes), "dtype": dt}


# ---------------------------------------------------------------- NumPy indexing

#: An index item after `expand_index`: None, a slice, a `SliceAt`, a Python int, a NumPy
#: integer array or a traced integer value (0-d or an array).
Item = Any


@jax.tree_util.register_pytree_node_class
class SliceAt:
    """A slice of `size` elements from a runtime `start` (a concrete array's `x[i:i + n]`:
    the int is a runtime value, so one program serves every `i`). `start` is an int32 scalar
    in range, `start + size` at most the axis' size: methods.py makes it from a checked slice."""

    __slots__ = ("start", "size")

    def __init__(self, start: Any, size: int):
        self.start, self.size = start, size

    def tree_flatten(self) -> tuple[tuple[Any], int]:
        return (self.start,), self.size

    @classmethod
    def tree_unflatten(cls, size: int, children: tuple[Any]) -> "SliceAt":
        return cls(children[0], size)


def has_traced(index: Any) -> bool:
    """Whether an index (or a tuple/list of them) holds a traced value."""
    if isinstance(index, Variable):
        return True
    return isinstance(index, (tuple, list)) and builtins.any(has_traced(i) for i in index)


def _array_item(it: Any) -> Any:
    """A list, NumPy or JAX array as an index item: an int array, a bool mask or traced."""
    if isinstance(it, list):
        if has_traced(it):
            from .construct import array

            return array(it)
        arr = np.asarray(it)
        return arr.astype(dtypes.default_int()) if arr.size == 0 and arr.dtype.kind == "f" else arr
    return np.asarray(it)


def expand_index(x: Variable, index: Any) -> list[Item]:
    """`index` as one item per axis of `x` (plus None for new axes): lists and arrays turned
    into index arrays, concrete bool masks into their `nonzero()` arrays, Ellipsis filled in."""
    items: list[Item] = []
    for it in index if isinstance(index, tuple) else (index,):
        if isinstance(it, (bool, np.bool_)):
            raise ShapeError(
                "a bool scalar is not supported as an index; use x[None] to add "
                "an axis or sg.where to select",
                op="getitem",
            )
        if isinstance(it, (list, np.ndarray)) or (
            not isinstance(it, Variable) and hasattr(it, "__array__")
        ):
            it = _array_item(it)
        if isinstance(it, np.ndarray):
            if it.dtype == np.bool_:
                items.extend(np.nonzero(it))
                continue
            if it.dtype.kind not in "iu":
                raise ShapeError(
                    f"indices must be integers or bools, got a {it.dtype} array", op="getitem"
                )
            it = int(it) if it.ndim == 0 else it
        elif isinstance(it, np.integer):
            it = int(it)
        elif isinstance(it, Variable):
            if it.dtype == np.dtype(bool):
                raise ShapeError(
                    f"a traced bool mask ({it.type_str()}) has no static result "
                    "shape; use sg.where, or a concrete NumPy mask",
                    op="getitem",
                )
            if it.dtype.kind not in "iu":
                raise ShapeError(f"indices must be integers, got {it.type_str()}", op="getitem")
        elif not (it is None or it is Ellipsis or isinstance(it, (int, builtins.slice, SliceAt))):
            raise ShapeError(f"cannot index with a {type(it).__name__}", op="getitem")
        items.append(it)
    ellipses = [k for k, i in enumerate(items) if i is Ellipsis]
    if len(ellipses) > 1:
        raise ShapeError("an index can only have a single ellipsis ('...')", op="getitem")
    used = builtins.sum(1 for i in items if i is not None and i is not Ellipsis)
    if used > x.ndim:
        raise ShapeError(f"too many indices ({used}) for {x.type_str()}", op="getitem")
    fill = [builtins.slice(None)] * (x.ndim - used)
    if ellipses:
        items[ellipses[0] : ellipses[0] + 1] = fill
    else:
        items += fill
    return items


def static_index(k: int | np.ndarray, axis: int, d: int) -> int | np.ndarray:
    """A concrete index checked against the axis size, negative values counted from the end."""
    if np.size(k) and not (np.all(k >= -d) and np.all(k < d)):
        bad = k if isinstance(k, int) else k[(k < -d) | (k >= d)].flat[0]
        raise ShapeError(
            f"index {int(bad)} is out of bounds for axis {axis} of size {d}", op="getitem"
        )
    return k % d if isinstance(k, int) else (k % d).astype(dtypes.default_int())


def getitem(x: Variable, index: Any) -> Variable:
    """NumPy indexing: ints, slices, None, Ellipsis, traced integer scalars and arrays, lists,
    several index arrays at once (NumPy's broadcasting and axis placement) and concrete bool
    masks. A traced index out of range clamps, as in jax.numpy."""
    return index_or_sentinel(as_var(x), index, None)


def index_or_sentinel(x: Variable, index: Any, sentinel: int | None) -> Variable:
    """`x[index]`; with a `sentinel`, a traced index array out of range reads `sentinel`
    instead of clamping (for `.at` updates, which drop those)."""
    items = expand_index(x, index)
    start, limit, strides = [0] * x.ndim, list(x.shape), [1] * x.ndim
    reversed_axes: list[int] = []
    layout: list[str] = []  # per item: "new", "slice" or "adv" (int, traced or array)
    adv: list[tuple[int, Any]] = []  # (axis, index) of each advanced item
    sliced: list[int] = []  # the size of each sliced axis
    at: list[tuple[int, SliceAt]] = []  # (axis, item) of each slice from a runtime start
    axis = 0
    for it in items:
        if it is None:
            layout.append("new")
            continue
        d = x.shape[axis]
        if type(it) is SliceAt:
            at.append((axis, it))
            layout.append("slice")
            sliced.append(it.size)
        elif isinstance(it, builtins.slice):
            lo, hi, st = it.indices(d)
            n = len(range(lo, hi, st))
            if st < 0:
                reversed_axes.append(axis)
                lo, st = lo + (n - 1) * st, -st
            start[axis], limit[axis], strides[axis] = (
                (lo, lo + (n - 1) * st + 1, st) if n else (0, 0, 1)
            )
            layout.append("slice")
            sliced.append(n)
        else:
            if not isinstance(it, Variable):
                it = static_index(it, axis, d)
            adv.append((axis, it))
            layout.append("adv")
        axis += 1
    traced = [i for _, i in adv if isinstance(i, Variable)]
    general = (
        builtins.any(np.ndim(i) for _, i in adv if not isinstance(i, Variable))
        or builtins.any(i.ndim for i in traced)
        or (sentinel is not None and bool(traced))
    )
    if not general:  # ints become size-1 slices, traced scalars dynamic indices
        for a, i in adv:
            if isinstance(i, int):
                start[a], limit[a] = i, i + 1
    v = x
    if (tuple(start), tuple(limit), tuple(strides)) != ((0,) * x.ndim, x.shape, (1,) * x.ndim):
        v = slice(v, start, limit, strides)
    if reversed_axes:
        v = rev(v, reversed_axes)
    for a, it in at:
        v = dynamic_slice(
            v,
            [it.start if k == a else 0 for k in range(v.ndim)],
            [it.size if k == a else n for k, n in enumerate(v.shape)],
        )
    if not general:
        for a, i in reversed(adv):
            if isinstance(i, Variable):
                n = v.shape[a]
                v = dynamic_index(
                    v, where(less(i, 0), add(i, n), i), a, allow_negative_indices=False
                )
        sizes = iter(sliced)
        return reshape(
            v, tuple(1 if kind == "new" else next(sizes) for kind in layout if kind != "adv")
        )
    return _gather(v, layout, adv, sentinel)


def _flat_index(adv: list[tuple[int, Any]], sizes: list[int]) -> tuple[Any, Variable | None]:
    """The row-major position of each advanced index tuple among the advanced axes, clamped
    (a NumPy array when all are concrete), and where traced indices were in range."""
    static, traced, valid = np.zeros((), dtypes.default_int()), [], None
    stride = 1
    for (_, i), n in reversed(list(zip(adv, sizes))):
        if isinstance(i, Variable):
            i = where(less(i, 0), add(i, n), i)
            ok = logical_and(greater_equal(i, 0), less(i, n))
            valid = ok if valid is None else logical_and(valid, ok)
            i = minimum(maximum(i, 0), n - 1)
            traced.append(i * stride if stride != 1 else i)
        else:
            static = static + np.asarray(i, static.dtype) * stride
        stride *= n
    flat: Any = static
    for t in traced:
        flat = add(t, flat) if isinstance(flat, Variable) or flat.ndim or flat != 0 else t
    return flat, valid


def _gather(
    v: Variable, layout: list[str], adv: list[tuple[int, Any]], sentinel: int | None
) -> Variable:
    """Advanced indexing of `v` (slices already applied): one `take` from the advanced axes
    flattened into one, then NumPy's placement of the broadcast index dims.

    A traced index out of range reads the clamped element and, as in JAX (XLA's gather
    clamps, its scatter drops), passes no gradient back.
    """
    adv_axes = [a for a, _ in adv]
    sizes = [v.shape[a] for a in adv_axes]
    rest = [a for a in range(v.ndim) if a not in adv_axes]
    bshape = broadcast_shapes(
        *[tuple(np.shape(i)) if not isinstance(i, Variable) else i.shape for _, i in adv]
    )
    flat, valid = _flat_index(adv, sizes)
    single = len(adv) == 1  # one index array: a take along its axis, no transposes
    ax = adv_axes[0] if single else 0
    vt = (
        v
        if single
        else reshape(
            transpose(v, adv_axes + rest),
            (int(np.prod(sizes, dtype=np.int64)),) + tuple(v.shape[a] for a in rest),
        )
    )
    if sentinel is not None and valid is not None:
        one_more = full(vt.shape[:ax] + (1,) + vt.shape[ax + 1 :], sentinel, vt.dtype)
        vt = concatenate([vt, one_more], ax)
        flat = where(valid, flat, vt.shape[ax] - 1)
    if not isinstance(flat, Variable):
        flat = as_var(np.broadcast_to(flat, bshape).copy())
    if flat.shape != bshape:
        flat = broadcast_to(flat, bshape)
    out = take(vt, flat, ax)
    nb = len(bshape)
    if valid is not None and sentinel is None:
        valid = valid if valid.shape == bshape else broadcast_to(valid, bshape)
        keep = reshape(valid, (1,) * ax + bshape + (1,) * (out.ndim - ax - nb))
        out = where(keep, out, stop_gradient(out))
    first = layout.index("adv")
    last = len(layout) - 1 - layout[::-1].index("adv")
    together = layout[first : last + 1].count("adv") == last - first + 1
    rest_dims = iter(d for k, d in enumerate(out.shape) if not ax <= k < ax + nb)
    shape: list[int] = [] if together else list(bshape)
    for k, kind in enumerate(layout):
        if kind == "new":
            shape.append(1)
        elif kind == "slice":
            shape.append(next(rest_dims))
        elif together and k == first:
            shape.extend(bshape)
    if together and not single:  # NumPy: adjacent advanced indices put their dims where they stand
        before = layout[:first].count("slice")
        out = transpose(
            out,
            [nb + i for i in range(before)]
            + list(range(nb))
            + [nb + i for i in range(before, len(rest))],
        )
    return reshape(out, tuple(shape))
