"""`x.at[index]` updates: jax.numpy's functional `.set`, `.add`, `.multiply`, `.min`, `.max`
and `.get`, as a scatter on the flattened operand (`index_update`), with JAX's gradients of
scatter.

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

import builtins
from typing import Any, Sequence

import numpy as np

from ..core import dispatch
from ..base import dtypes
from ..core.builder import as_var
from ..base.errors import GradientError, ShapeError
from ..ir.program import Op, Variable
from ..core.registry import OutType
from .creation import arange, ones, zeros
from ..core.declare import Emitted, defop
from .elementwise import astype, equal, less, logical_and, maximum, minimum, multiply, where
from .indexing import (
    check_update_dtype,
    expand_index,
    has_traced,
    index_or_sentinel,
    static_index,
    getitem,
    scatter_add,
    take,
)
from .shape import broadcast_to, reshape


def _update_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    x, idx, u = inputs
    if x.ndim != 1 or idx.ndim != 1 or idx.dtype.kind not in "iu" or u.shape != idx.shape:
        raise ShapeError(
            f"index_update needs a 1-D operand, 1-D integer positions and one "
            f"update per position, got {x.type_str()}, {idx.type_str()}, "
            f"{u.type_str()}"
        )
    check_update_dtype(x, u)
    return [(x.shape, x.dtype)]


def _lower_update(args: list[str], attrs: dict[str, str]) -> str:
    return f"{args[0]}.at[{args[1]}].{attrs['kind'][1:-1]}({args[2]}, mode='drop')"


def _read(v: Variable, idx: Variable) -> Variable:
    """`v[idx]` for positions that may be one past the end (dropped updates): clamped."""
    return take(v, minimum(idx, v.shape[0] - 1), 0)


def _g_update(op: Op, g: list, need: list) -> list:
    """JAX's gradients of scatter (set: only the update that landed; multiply; min/max: the
    contenders equal to the result share it evenly)."""
    x, idx, u = op.inputs
    kind, gout = op.attrs["kind"], g[0]
    landed = less(idx, x.shape[0])
    gx = gu = None
    if kind == "set":  # unique positions: colliding float writes are `decided` instead
        hit = index_update(zeros(x.shape, np.int8), idx, ones(u.shape, np.int8), "set", True)
        gx = where(equal(hit, 0), gout, 0.0) if need[0] else None
        gu = where(landed, _read(gout, idx), 0.0) if need[2] else None
    elif kind == "multiply":
        gx = index_update(gout, idx, u, "multiply", op.attrs["unique"]) if need[0] else None
        if need[2]:
            if not op.attrs["unique"]:
                raise GradientError(
                    "the gradient of x.at[idx].multiply(u) with respect to u needs indices "
                    "without repeats (as in JAX): pass unique_indices=True if they are unique",
                    op="index_update",
                    loc=op.loc,
                )
            gu = _read(multiply(gout, x), idx)
    else:
        out = op.outputs[0]
        target = _read(out, idx)
        success = logical_and(landed, equal(u, target))
        retained = equal(_read(x, idx), target)
        one = ones(u.shape, u.dtype)
        count = _read(scatter_add(zeros(x.shape, x.dtype), idx, where(success, one, 0.0)), idx)
        refs = _read(scatter_add(zeros(x.shape, x.dtype), idx, one), idx)
        g_at = _read(gout, idx)
        if need[0]:
            share = where(retained, 1.0 / (count + 1.0), 0.0)
            gx = gout + scatter_add(
                zeros(x.shape, x.dtype), idx, where(landed, g_at * ((share - 1.0) / refs), 0.0)
            )
        if need[2]:
            gu = where(success, g_at * where(retained, 1.0 / (count + 1.0), 1.0 / count), 0.0)
    return [gx, None, gu]


@defop("index_update", _update_rule, _lower_update, _g_update, export=False)
def index_update(
    x: Variable, positions: Variable, updates: Variable, kind: str, unique: bool = False
) -> Emitted:
    """`x.at[positions].<kind>(updates)` on a flat `x` (kind: set, multiply, min or max);
    positions past the end are dropped."""
    return [x, positions, updates], {"kind": kind, "unique": unique}


def _positions(x: Variable, index: Any) -> tuple[Variable, bool]:
    """The flat position in `x` of each element of `x[index]`, and whether they are known to
    be distinct. Traced indices out of range point one past the end (the update is dropped)."""
    if not has_traced(index):
        items = expand_index(x, index)  # the checks and messages of getitem
        axis = 0
        for it in items:  # concrete indices out of range are an error, as in getitem
            if it is not None and not isinstance(it, builtins.slice):
                static_index(it, axis, x.shape[axis])
            axis += it is not None
        pos = np.arange(x.size, dtype=dtypes.default_int()).reshape(x.shape)[tuple(items)]
        return as_var(np.ascontiguousarray(pos)), np.unique(pos).size == pos.size
    iota = reshape(arange(x.size, dtype=dtypes.default_int()), x.shape)
    return index_or_sentinel(iota, index, x.size), False


class _IndexRef:
    """`x.at[index]`: the functional updates of jax.numpy's `.at` (new arrays, `x` unchanged)."""

    __slots__ = ("x", "index")

    def __init__(self, x: Variable, index: Any):
        self.x, self.index = x, index

    def get(self, **kwargs: Any) -> Variable:
        """`x[index]`."""
        return dispatch.call(getitem, (self.x, self.index), {})

    def set(self, values: Any, **kwargs: Any) -> Variable:
        """`x` with `values` written at `index` (where an index repeats, one write wins)."""
        return self._update("set", values, kwargs)

    def add(self, values: Any, **kwargs: Any) -> Variable:
        """`x` with `values` added at `index` (repeated indices add up)."""
        return self._update("add", values, kwargs)

    def multiply(self, values: Any, **kwargs: Any) -> Variable:
        """`x` multiplied by `values` at `index`."""
        return self._update("multiply", values, kwargs)

    mul = multiply

    def min(self, values: Any, **kwargs: Any) -> Variable:
        """`x` with the smaller of it and `values` at `index`."""
        return self._update("min", values, kwargs)

    def max(self, values: Any, **kwargs: Any) -> Variable:
        """`x` with the larger of it and `values` at `index`."""
        return self._update("max", values, kwargs)

    def _update(self, kind: str, values: Any, kwargs: dict[str, Any]) -> Variable:
        unknown = set(kwargs) - {"indices_are_sorted", "unique_indices", "mode"}
        if unknown or kwargs.get("mode") not in (None, "drop", "promise_in_bounds"):
            raise ShapeError(f"x.at[...].{kind}: unsupported arguments {kwargs}", op="at")
        return dispatch.call(
            _at_update, (self.x, self.index, values, kind, bool(kwargs.get("unique_indices"))), {}
        )


def decided(x: Variable, won: Variable, updates: Variable) -> Variable:
    """`x` overwritten where a scatter of update ids (1-based; `won`, shaped as `x`) says an
    update landed, by that update (`updates`, by id). Colliding float writes are computed so,
    as JAX differentiates them: the value and its gradient read the one decision, where two
    scatters may keep different writes (a GPU orders colliding writes freely)."""
    kept = take(reshape(updates, (-1,)), maximum(won - 1, 0), 0)
    return where(equal(won, 0), x, astype(kept, x.dtype))


def _at_update(x: Any, index: Any, values: Any, kind: str, unique_indices: bool) -> Variable:
    """`x.at[index].<kind>(values)` on traced values."""
    x = as_var(x)
    pos, unique = _positions(x, index)
    u = astype(as_var(values, like=x), x.dtype)
    if u.shape != pos.shape:
        u = broadcast_to(u, pos.shape)
    flat = reshape(x, (-1,))
    p, fu = reshape(pos, (-1,)), reshape(u, (-1,))
    unique = unique or unique_indices or p.shape[0] <= 1
    if kind == "add":
        out = scatter_add(flat, p, fu, 0)
    elif kind == "set" and not unique and dtypes.is_inexact(x.dtype):
        out = decided(
            flat,
            index_update(
                zeros(flat.shape, np.int32), p, arange(1, p.shape[0] + 1, dtype=np.int32), "set"
            ),
            fu,
        )
    else:
        out = index_update(flat, p, fu, kind, unique)
    return reshape(out, x.shape)


class _At:
    """`x.at`: `x.at[index].set(v)`, `.add`, `.multiply`, `.min`, `.max`, `.get()`."""

    __slots__ = ("x",)

    def __init__(self, x: Variable):
        self.x = x

    def __getitem__(self, index: Any) -> _IndexRef:
        return _IndexRef(self.x, index)


def at(x: Variable) -> _At:
    """`x.at` (installed as a property of traced values)."""
    return _At(x)
