"""Neural-network ops: softmax, log_softmax, activations (as jax.nn) and pooling.

Layer L3 (the ops): see docs/design.md.
"""
from __future__ import annotations

from typing import Any, Sequence

import math

import numpy as np

from .. import dtypes
from ..builder import as_var
from ..errors import ShapeError
from ..ir import Op, Variable
from ._rules import norm_axis, require_float, same
from .creation import full
from .declare import Emitted, defop, public
from .elementwise import (erf, exp, expm1, logical_and, maximum, minimum, multiply, negative,
                          sigmoid, softplus, stop_gradient, subtract, tanh, where)
from .reduce import max as reduce_max
from .reduce import mean, sum
from .shape import concatenate, expand_dims, lax_pad, reshape, slice


def _softmax_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list:
    require_float(inputs[0], "softmax")
    norm_axis(attrs["axis"], inputs[0].ndim)
    return same(inputs, attrs)


def _g_softmax(op: Op, g: list, need: list) -> list:
    y = op.outputs[0]
    gy = multiply(g[0], y)
    return [subtract(gy, multiply(y, sum(gy, op.attrs["axis"], keepdims=True)))]


def _g_log_softmax(op: Op, g: list, need: list) -> list:
    return [subtract(g[0], multiply(exp(op.outputs[0]), sum(g[0], op.attrs["axis"], keepdims=True)))]


@defop("softmax", _softmax_rule, "jax.nn.softmax({0}, axis={axis})", _g_softmax)
def softmax(x: Any, axis: int = -1) -> Emitted:
    """jax.nn.softmax(x, axis=-1)."""
    x = as_var(x)
    return [x], {"axis": norm_axis(axis, x.ndim)}


@defop("log_softmax", _softmax_rule, "jax.nn.log_softmax({0}, axis={axis})", _g_log_softmax)
def log_softmax(x: Any, axis: int = -1) -> Emitted:
    """jax.nn.log_softmax(x, axis=-1)."""
    x = as_var(x)
    return [x], {"axis": norm_axis(axis, x.ndim)}


def _pad_lowest(x: Variable, config: Sequence[tuple[int, int, int]]) -> Variable:
    """Pad with the lowest value of the dtype (-inf for floats), which never wins a max."""
    low = -np.inf if dtypes.is_inexact(x.dtype) else np.iinfo(x.dtype).min
    for a, (lo, hi, _) in enumerate(config):
        if lo or hi:
            edges = [full(x.shape[:a] + (n,) + x.shape[a + 1:], low, x.dtype) for n in (lo, hi)]
            x = concatenate([edges[0], x, edges[1]], a)
    return x


def _pool(x: Any, window: Sequence[int], strides: Sequence[int] | None, padding: str,
          layout: str, kind: str) -> Variable:
    """Windowed max/mean over the spatial axes, built from slices (so it differentiates)."""
    x = as_var(x)
    if x.ndim != 4 or layout not in ("NHWC", "NCHW"):
        raise ShapeError(f"{kind}_pool needs a 4-D NHWC or NCHW input, got {x.type_str()}",
                         op=f"{kind}_pool")
    window = tuple(window)
    strides = tuple(strides) if strides is not None else window
    axes = (1, 2) if layout == "NHWC" else (2, 3)
    if padding.upper() == "SAME":
        cfg = [(0, 0, 0)] * 4
        for a, k, s in zip(axes, window, strides):
            n = x.shape[a]
            out = -(-n // s)
            total = max(0, (out - 1) * s + k - n)
            cfg[a] = (total // 2, total - total // 2, 0)
        x = lax_pad(x, cfg) if kind == "avg" else _pad_lowest(x, cfg)
    elif padding.upper() != "VALID":
        raise ShapeError(f"padding must be SAME or VALID, got {padding!r}", op=f"{kind}_pool")
    outs = [(x.shape[a] - k) // s + 1 for a, k, s in zip(axes, window, strides)]
    if min(outs) <= 0:
        raise ShapeError(f"window {window} is larger than the input {x.type_str()}",
                         op=f"{kind}_pool")
    reduce = reduce_max if kind == "max" else mean
    if window == strides and all(o * k == x.shape[a] for o, k, a in zip(outs, window, axes)):
        shape = list(x.shape)
        split: list[int] = []
        for a in reversed(axes):
            k = window[axes.index(a)]
            shape[a:a + 1] = [shape[a] // k, k]
        split = [axes[0] + 1, axes[1] + 2]
        return reduce(reshape(x, tuple(shape)), split)
    taps = []
    for i in range(window[0]):
        for j in range(window[1]):
            start = [0] * 4
            limit = list(x.shape)
            step = [1] * 4
            for a, off, o, s in zip(axes, (i, j), outs, strides):
                start[a], limit[a], step[a] = off, off + (o - 1) * s + 1, s
            taps.append(expand_dims(slice(x, start, limit, step), -1))
    return reduce(concatenate(taps, -1), -1)


@public
def max_pool(x: Any, window: Sequence[int], strides: Sequence[int] | None = None,
             padding: str = "VALID", layout: str = "NHWC") -> Variable:
    """Max pooling; with SAME padding the padded positions never win (as lax.reduce_window)."""
    return _pool(x, window, strides, padding, layout, "max")


@public
def avg_pool(x: Any, window: Sequence[int], strides: Sequence[int] | None = None,
             padding: str = "VALID", layout: str = "NHWC") -> Variable:
    """Average pooling; with SAME padding the padded zeros count (as flax's avg_pool)."""
    return _pool(x, window, strides, padding, layout, "avg")


# ---------------------------------------------------------------- activations (jax.nn)

@public
def silu(x: Any) -> Variable:
    """jax.nn.silu: x * sigmoid(x)."""
    x = as_var(x)
    return x * sigmoid(x)


@public
def log_sigmoid(x: Any) -> Variable:
    """jax.nn.log_sigmoid: -softplus(-x)."""
    return negative(softplus(negative(as_var(x))))


@public
def relu6(x: Any) -> Variable:
    """jax.nn.relu6: min(max(x, 0), 6), whose derivative is 1 strictly between 0 and 6 and 0
    elsewhere, at both kinks too (JAX's rule; max/min would give 0.5 there)."""
    x = as_var(x)
    clipped = minimum(maximum(x, 0.0), 6.0)
    return where(logical_and(x > 0, x < 6), x, stop_gradient(clipped))


@public
def leaky_relu(x: Any, negative_slope: float = 0.01) -> Variable:
    """jax.nn.leaky_relu(x, negative_slope=0.01)."""
    x = as_var(x)
    return where(x >= 0, x, x * negative_slope)


@public
def elu(x: Any, alpha: float = 1.0) -> Variable:
    """jax.nn.elu(x, alpha=1.0); the untaken branch sees 0, so no overflow reaches its gradient."""
    x = as_var(x)
    positive = x > 0
    return where(positive, x, expm1(where(positive, 0.0, x)) * alpha)


@public
def gelu(x: Any, approximate: bool = True) -> Variable:
    """jax.nn.gelu(x, approximate=True): the tanh approximation, or the exact erf form."""
    x = as_var(x)
    if approximate:
        inner = (x + x * x * x * 0.044715) * math.sqrt(2.0 / math.pi)
        return x * (tanh(inner) + 1.0) * 0.5
    return x * (erf(x * (1.0 / math.sqrt(2.0))) + 1.0) * 0.5
