"""Neural-network ops: softmax, log_softmax and activations (as jax.nn); pooling is in
ops/conv.py.

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

from typing import Any, Sequence

import math

from ..core.builder import as_var
from ..ir.program import Op, Variable
from .rules import norm_axis, require_float, same
from ..core.declare import Emitted, defop, public
from .elementwise import (
    erf,
    exp,
    expm1,
    logical_and,
    maximum,
    minimum,
    multiply,
    negative,
    sigmoid,
    softplus,
    stop_gradient,
    subtract,
    tanh,
    where,
)
from .reduce import sum


def _jvp_softmax(op: Op, ts: list, tangents: Any) -> list:
    """d log_softmax(x) = t - sum(t * softmax(x)); d softmax(x) = y * (t - sum(t * y))."""
    t, y = ts[0], op.outputs[0]
    p = exp(y) if op.type == "log_softmax" else y
    centred = subtract(t, sum(multiply(t, p), op.attrs["axis"], keepdims=True))
    return [centred if op.type == "log_softmax" else multiply(y, centred)]


def _softmax_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list:
    require_float(inputs[0], "softmax")
    norm_axis(attrs["axis"], inputs[0].ndim)
    return same(inputs, attrs)


def _g_softmax(op: Op, g: list, need: list) -> list:
    y = op.outputs[0]
    gy = multiply(g[0], y)
    return [subtract(gy, multiply(y, sum(gy, op.attrs["axis"], keepdims=True)))]


def _g_log_softmax(op: Op, g: list, need: list) -> list:
    return [
        subtract(g[0], multiply(exp(op.outputs[0]), sum(g[0], op.attrs["axis"], keepdims=True)))
    ]


@defop("softmax", _softmax_rule, "jax.nn.softmax({0}, axis={axis})", _g_softmax, jvp=_jvp_softmax)
def softmax(x: Any, axis: int = -1) -> Emitted:
    """jax.nn.softmax(x, axis=-1)."""
    x = as_var(x)
    return [x], {"axis": norm_axis(axis, x.ndim)}


@defop(
    "log_softmax",
    _softmax_rule,
    "jax.nn.log_softmax({0}, axis={axis})",
    _g_log_softmax,
    jvp=_jvp_softmax,
)
def log_softmax(x: Any, axis: int = -1) -> Emitted:
    """jax.nn.log_softmax(x, axis=-1)."""
    x = as_var(x)
    return [x], {"axis": norm_axis(axis, x.ndim)}


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
