"""Reductions with `axis`/`keepdims`: sum, mean, max, min, prod, logsumexp, argmax, argmin."""
from __future__ import annotations

from typing import Any, Sequence

import jax.numpy as jnp
import numpy as np

from .. import dtypes
from ..builder import as_var, emit1
from ..ir import Op, Shape, Variable
from ..registry import OutType, register
from ._rules import jax_dtype, norm_axes, norm_axis
from .elementwise import astype, divide, equal, exp, logical_and, multiply, where

Axis = int | Sequence[int] | None


def _reduced_shape(shape: Shape, axes: tuple[int, ...], keepdims: bool) -> Shape:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _reduce_rule(kind: str) -> Any:
    def infer(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
        x = inputs[0]
        axes = norm_axes(attrs["axes"], x.ndim)
        shape = _reduced_shape(x.shape, axes, attrs["keepdims"])
        if kind == "index":
            return [(shape, dtypes.default_int())]
        if kind == "sum" and not dtypes.is_inexact(x.dtype):
            return [(shape, jax_dtype(jnp.sum, x.dtype))]
        if kind == "float":
            return [(shape, dtypes.to_inexact(x.dtype))]
        return [(shape, x.dtype)]
    return infer


def _reduce(name: str, x: Any, axis: Axis, keepdims: bool) -> Variable:
    x = as_var(x)
    axes = norm_axes(axis, x.ndim) if x.ndim or axis is None else norm_axes(axis, 0)
    return emit1(name, [x], {"axes": axes, "keepdims": bool(keepdims)})


def sum(x: Any, axis: Axis = None, keepdims: bool = False) -> Variable:
    return _reduce("reduce_sum", x, axis, keepdims)


def max(x: Any, axis: Axis = None, keepdims: bool = False) -> Variable:
    return _reduce("reduce_max", x, axis, keepdims)


def min(x: Any, axis: Axis = None, keepdims: bool = False) -> Variable:
    return _reduce("reduce_min", x, axis, keepdims)


def prod(x: Any, axis: Axis = None, keepdims: bool = False) -> Variable:
    return _reduce("reduce_prod", x, axis, keepdims)


def logsumexp(x: Any, axis: Axis = None, keepdims: bool = False) -> Variable:
    return _reduce("logsumexp", x, axis, keepdims)


def mean(x: Any, axis: Axis = None, keepdims: bool = False) -> Variable:
    x = as_var(x)
    if not dtypes.is_inexact(x.dtype):
        x = astype(x, jax_dtype(jnp.mean, x.dtype))
    axes = norm_axes(axis, x.ndim)
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    total = sum(x, axes, keepdims)
    return divide(total, float(count))


def _arg(name: str, x: Any, axis: int | None, keepdims: bool) -> Variable:
    x = as_var(x)
    if axis is None:
        from .shape import reshape
        out = emit1(name, [reshape(x, (-1,))], {"axes": (0,), "axis": 0, "keepdims": False})
        return reshape(out, (1,) * x.ndim) if keepdims else out
    ax = norm_axis(axis, x.ndim)
    return emit1(name, [x], {"axes": (ax,), "axis": ax, "keepdims": bool(keepdims)})


def argmax(x: Any, axis: int | None = None, keepdims: bool = False) -> Variable:
    return _arg("argmax", x, axis, keepdims)


def argmin(x: Any, axis: int | None = None, keepdims: bool = False) -> Variable:
    return _arg("argmin", x, axis, keepdims)


def expand_reduced(g: Variable, op: Op) -> Variable:
    """Broadcast the gradient of a reduction back to the reduced input's shape."""
    from .shape import broadcast_to, reshape
    x = op.inputs[0]
    keep = _reduced_shape(x.shape, op.attrs["axes"], True)
    if g.shape != keep:
        g = reshape(g, keep)
    return broadcast_to(g, x.shape)


def _g_sum(op: Op, g: list, need: list) -> list:
    return [expand_reduced(g[0], op)]


def _g_chooser(op: Op, g: list, need: list) -> list:
    x = op.inputs[0]
    out_b = expand_reduced(op.outputs[0], op)
    mask = astype(equal(x, out_b), x.dtype)
    count = sum(mask, op.attrs["axes"], keepdims=True)
    return [multiply(expand_reduced(g[0], op), divide(mask, count))]


def _g_prod(op: Op, g: list, need: list) -> list:
    x = op.inputs[0]
    axes = op.attrs["axes"]
    is_zero = equal(x, 0.0)
    zeros_in = sum(astype(is_zero, x.dtype), axes, keepdims=True)
    safe = where(is_zero, 1.0, x)
    prod_nonzero = prod(safe, axes, keepdims=True)
    no_zero = prod_nonzero / safe
    one_zero = where(logical_and(is_zero, equal(zeros_in, 1.0)), prod_nonzero, 0.0)
    local = where(equal(zeros_in, 0.0), no_zero, one_zero)
    return [multiply(expand_reduced(g[0], op), local)]


def _g_logsumexp(op: Op, g: list, need: list) -> list:
    x = op.inputs[0]
    return [multiply(expand_reduced(g[0], op), exp(x - expand_reduced(op.outputs[0], op)))]


_AX = "axis={axes}, keepdims={keepdims}"
register("reduce_sum", _reduce_rule("sum"), "jnp.sum({0}, %s)" % _AX, _g_sum)
register("reduce_max", _reduce_rule("same"), "jnp.max({0}, %s)" % _AX, _g_chooser)
register("reduce_min", _reduce_rule("same"), "jnp.min({0}, %s)" % _AX, _g_chooser)
register("reduce_prod", _reduce_rule("sum"), "jnp.prod({0}, %s)" % _AX, _g_prod)
register("logsumexp", _reduce_rule("float"), "jax.nn.logsumexp({0}, %s)" % _AX, _g_logsumexp)
register("argmax", _reduce_rule("index"), "jnp.argmax({0}, axis={axis}, keepdims={keepdims})")
register("argmin", _reduce_rule("index"), "jnp.argmin({0}, axis={axis}, keepdims={keepdims})")

__all__ = ["sum", "mean", "max", "min", "prod", "logsumexp", "argmax", "argmin", "expand_reduced"]
