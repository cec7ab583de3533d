"""Shape ops: reshape (and ravel), transpose, broadcast, concatenate, stack, static slices,
pad and rev.

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ..base import dtypes
from ..core.builder import SEQUENCES, as_var
from ..base.errors import ShapeError
from ..ir.program import Op, Shape, Variable
from ..core.registry import LINEAR, REMAT_VIEW, OutType, always
from .rules import broadcast_shapes, norm_axis, same
from ..core.declare import Emitted, defop, public
from .grad_helpers import fill_zeros_like


# ---------------------------------------------------------------- shape/dtype rules


def _reshape_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    return [(attrs["shape"], inputs[0].dtype)]


def _transpose_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    x = inputs[0]
    perm = attrs["axes"]
    if sorted(perm) != list(range(x.ndim)):
        raise ShapeError(f"axes {perm} are not a permutation of the {x.ndim} axes")
    return [(tuple(x.shape[a] for a in perm), x.dtype)]


def _broadcast_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    x = inputs[0]
    shape = attrs["shape"]
    if len(shape) < x.ndim or broadcast_shapes(x.shape, shape) != shape:
        raise ShapeError(f"cannot broadcast {x.shape} to {shape}")
    return [(shape, x.dtype)]


def _concat_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    axis = attrs["axis"]
    first = inputs[0]
    dt = first.dtype
    for v in inputs[1:]:
        if v.ndim != first.ndim or any(
            a != b for i, (a, b) in enumerate(zip(v.shape, first.shape)) if i != axis
        ):
            raise ShapeError(f"concatenate along axis {axis} needs equal other dimensions")
        dt = dtypes.promote(dt, v.dtype)
    size = sum(v.shape[axis] for v in inputs)
    return [(first.shape[:axis] + (size,) + first.shape[axis + 1 :], dt)]


def _slice_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    x = inputs[0]
    shape = tuple(
        max(0, -(-(hi - lo) // st))
        for lo, hi, st in zip(attrs["start"], attrs["limit"], attrs["strides"])
    )
    return [(shape, x.dtype)]


def _pad_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    x = inputs[0]
    shape = tuple(
        lo + hi + d + max(0, d - 1) * it for d, (lo, hi, it) in zip(x.shape, attrs["config"])
    )
    return [(shape, x.dtype)]


# ---------------------------------------------------------------- grad makers


def _g_reshape(op: Op, g: list, need: list) -> list:
    return [reshape(g[0], op.inputs[0].shape)]


def _g_transpose(op: Op, g: list, need: list) -> list:
    return [transpose(g[0], tuple(np.argsort(op.attrs["axes"])))]


def _g_broadcast(op: Op, g: list, need: list) -> list:
    return [g[0]]  # the backward walk sums it down to the input's shape


def _g_concat(op: Op, g: list, need: list) -> list:
    axis = op.attrs["axis"]
    out, offset = [], 0
    for v, n in zip(op.inputs, need):
        size = v.shape[axis]
        if n:
            lo = [0] * v.ndim
            hi = list(g[0].shape)
            lo[axis], hi[axis] = offset, offset + size
            part = slice(g[0], lo, hi)
            out.append(part)  # (the backward walk casts it to v's dtype: cast_gradient)
        else:
            out.append(None)
        offset += size
    return out


def _g_slice(op: Op, g: list, need: list) -> list:
    x = op.inputs[0]
    if 0 in g[0].shape:
        return [fill_zeros_like(x)]
    config = []
    for d, lo, n, st in zip(x.shape, op.attrs["start"], g[0].shape, op.attrs["strides"]):
        config.append((lo, d - (lo + (n - 1) * st + 1), st - 1))
    return [lax_pad(g[0], config)]


def _g_pad(op: Op, g: list, need: list) -> list:
    x = op.inputs[0]
    cfg = op.attrs["config"]
    start = [lo for lo, _, _ in cfg]
    strides = [it + 1 for _, _, it in cfg]
    limit = [lo + (d - 1) * s + 1 if d else lo for (lo, _, _), d, s in zip(cfg, x.shape, strides)]
    return [slice(g[0], start, limit, strides)]


def _g_rev(op: Op, g: list, need: list) -> list:
    return [rev(g[0], op.attrs["axes"])]


# ---------------------------------------------------------------- user-facing functions


@defop(
    "reshape",
    _reshape_rule,
    "jnp.reshape({0}, {shape})",
    _g_reshape,
    jvp=LINEAR,
    remat=REMAT_VIEW,
    fast=("lax.reshape({0}, {shape})", always),
)
def reshape(x: Any, shape: Shape | int) -> Emitted:
    """jnp.reshape(x, shape); one axis may be -1."""
    x = as_var(x)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    if shape.count(-1) > 1:
        raise ShapeError(f"reshape to {shape}: at most one -1", op="reshape")
    if -1 in shape:
        rest = math.prod(s for s in shape if s != -1)
        if rest == 0 or x.size % rest:
            raise ShapeError(f"cannot reshape {x.type_str()} to {shape}", op="reshape")
        shape = tuple(x.size // rest if s == -1 else s for s in shape)
    if math.prod(shape) != x.size:
        raise ShapeError(
            f"cannot reshape {x.type_str()} ({x.size} elements) to {shape}", op="reshape"
        )
    if shape == x.shape:
        return x
    return [x], {"shape": shape}


@defop(
    "transpose",
    _transpose_rule,
    "jnp.transpose({0}, {axes})",
    _g_transpose,
    jvp=LINEAR,
    remat=REMAT_VIEW,
    fast=("lax.transpose({0}, {axes})", always),
)
def transpose(x: Any, axes: Sequence[int] | None = None) -> Emitted:
    """jnp.transpose(x, axes); None reverses the axes."""
    x = as_var(x)
    perm = (
        tuple(reversed(range(x.ndim)))
        if axes is None
        else tuple(norm_axis(a, x.ndim) for a in axes)
    )
    if perm == tuple(range(x.ndim)):
        return x
    return [x], {"axes": perm}


@public
def swapaxes(x: Any, axis1: int, axis2: int) -> Variable:
    """jnp.swapaxes(x, axis1, axis2)."""
    x = as_var(x)
    perm = list(range(x.ndim))
    a, b = norm_axis(axis1, x.ndim), norm_axis(axis2, x.ndim)
    perm[a], perm[b] = perm[b], perm[a]
    return transpose(x, perm)


@defop("broadcast_to", _broadcast_rule, "jnp.broadcast_to({0}, {shape})", _g_broadcast, jvp=LINEAR)
def broadcast_to(x: Any, shape: Shape | int) -> Emitted:
    """jnp.broadcast_to(x, shape)."""
    x = as_var(x)
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    if x.shape == shape:
        return x
    return [x], {"shape": shape}


@public
def expand_dims(x: Any, axis: int | Sequence[int]) -> Variable:
    x = as_var(x)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    ndim = x.ndim + len(axes)
    axes = sorted(norm_axis(a, ndim) for a in axes)
    if len(set(axes)) != len(axes):
        raise ShapeError(f"repeated axis in expand_dims: {axis}", op="expand_dims")
    shape = list(x.shape)
    for a in axes:
        shape.insert(a, 1)
    return reshape(x, tuple(shape))


@public
def squeeze(x: Any, axis: int | Sequence[int] | None = None) -> Variable:
    x = as_var(x)
    if axis is None:
        axes = [i for i, d in enumerate(x.shape) if d == 1]
    else:
        axes = [
            norm_axis(a, x.ndim) for a in ((axis,) if isinstance(axis, (int, np.integer)) else axis)
        ]
        for a in axes:
            if x.shape[a] != 1:
                raise ShapeError(f"cannot squeeze axis {a} of size {x.shape[a]}", op="squeeze")
    return reshape(x, tuple(d for i, d in enumerate(x.shape) if i not in axes))


@defop(
    "concatenate",
    _concat_rule,
    lambda a, at: f"jnp.concatenate([{', '.join(a)}], axis={at['axis']})",
    _g_concat,
    jvp=LINEAR,
)
def concatenate(xs: Sequence[Any], axis: int = 0) -> Emitted:
    """jnp.concatenate(xs, axis)."""
    vs = [as_var(x) for x in xs]
    if not vs:
        raise ShapeError("concatenate needs at least one array", op="concatenate")
    if vs[0].ndim == 0:
        raise ShapeError("zero-dimensional arrays cannot be concatenated", op="concatenate")
    if len(vs) == 1:
        return vs[0]
    return vs, {"axis": norm_axis(axis, vs[0].ndim)}


@public
def stack(xs: Sequence[Any], axis: int = 0) -> Variable:
    vs = [as_var(x) for x in xs]
    if not vs:
        raise ShapeError("stack needs at least one array", op="stack")
    axis = norm_axis(axis, vs[0].ndim + 1)
    return concatenate([expand_dims(v, axis) for v in vs], axis)


SEQUENCES.stack = stack


@defop(
    "slice",
    _slice_rule,
    "lax.slice({0}, {start}, {limit}, {strides})",
    _g_slice,
    jvp=LINEAR,
    remat=REMAT_VIEW,
)
def slice(
    x: Variable, start: Sequence[int], limit: Sequence[int], strides: Sequence[int] | None = None
) -> Emitted:
    """lax.slice: a static, strided window of `x`."""
    x = as_var(x)
    strides = tuple(strides) if strides is not None else (1,) * x.ndim
    return [x], {"start": tuple(start), "limit": tuple(limit), "strides": strides}


@defop("rev", same, "lax.rev({0}, {axes})", _g_rev, jvp=LINEAR, remat=REMAT_VIEW)
def rev(x: Variable, axes: Sequence[int]) -> Emitted:
    """lax.rev: `x` reversed along `axes`."""
    return [as_var(x)], {"axes": tuple(axes)}


@defop(
    "pad",
    _pad_rule,
    "lax.pad({0}, jnp.zeros((), {0}.dtype), {config})",
    _g_pad,
    export="pad",
    jvp=LINEAR,
)
def lax_pad(x: Variable, config: Sequence[tuple[int, int, int]]) -> Emitted:
    """lax.pad with zeros: `(low, high, interior)` per axis (sg.pad, NumPy's, reaches it)."""
    return [as_var(x)], {"config": tuple(tuple(c) for c in config)}


@public
def ravel(a: Any, order: str = "C") -> Variable:
    """jnp.ravel(a, order='C'); order 'F' flattens the transpose."""
    x = as_var(a)
    if order not in ("C", "F"):
        raise ShapeError(f"ravel supports order 'C' and 'F', got {order!r}", op="ravel")
    return reshape(x if order == "C" else transpose(x), (-1,))
