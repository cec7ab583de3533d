"""The rest of jax.nn as `sg.nn.<name>`: activations written as jax.nn writes them (so their
derivatives at the kinks are JAX's), standardize, logmeanexp, glu and dot_product_attention.

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ..base import dtypes
from ..core.builder import as_var
from ..base.errors import ShapeError
from ..ir.program import Variable
from .construct import tril
from .creation import arange, full, ones
from ..core.declare import public_in
from .elementwise import (
    abs,
    astype,
    clip,
    exp,
    expm1,
    log,
    log1p,
    logical_and,
    maximum,
    minimum,
    rsqrt,
    sigmoid,
    softplus,
    sqrt,
    square,
    tanh,
    where,
)
from .contraction import einsum
from .manip import repeat
from .joining import split
from .nn import elu, relu6, silu, softmax
from .reduce import logsumexp
from .reduce import mean as _mean
from .rules import norm_axes, require_real

Axis = int | Sequence[int] | None


def _float(x: Any) -> Variable:
    x = as_var(x)
    return x if dtypes.is_inexact(x.dtype) else astype(x, dtypes.default_float())


@public_in("nn")
def swish(x: Any) -> Variable:
    """jax.nn.swish: the same as silu, x * sigmoid(x)."""
    return silu(x)


@public_in("nn")
def identity(x: Any) -> Variable:
    """jax.nn.identity: x."""
    return as_var(x)


@public_in("nn")
def celu(x: Any, alpha: float = 1.0) -> Variable:
    """jax.nn.celu(x, alpha=1.0): max(x, 0) + alpha * expm1(min(x, 0) / alpha)."""
    x = _float(x)
    return maximum(x, 0.0) + expm1(minimum(x, 0.0) / alpha) * alpha


@public_in("nn")
def selu(x: Any) -> Variable:
    """jax.nn.selu: scale * elu(x, alpha) with the self-normalising constants."""
    return elu(_float(x), 1.6732632423543772848170429916717) * 1.0507009873554804934193349852946


@public_in("nn")
def mish(x: Any) -> Variable:
    """jax.nn.mish: x * tanh(softplus(x))."""
    x = _float(x)
    return x * tanh(softplus(x))


@public_in("nn")
def soft_sign(x: Any) -> Variable:
    """jax.nn.soft_sign: x / (|x| + 1)."""
    x = _float(x)
    return x / (abs(x) + 1.0)


@public_in("nn")
def squareplus(x: Any, b: float = 4) -> Variable:
    """jax.nn.squareplus(x, b=4): (x + sqrt(x^2 + b)) / 2."""
    x = _float(x)
    return (x + sqrt(square(x) + b)) / 2.0


@public_in("nn")
def sparse_plus(x: Any) -> Variable:
    """jax.nn.sparse_plus: 0 below -1, x above 1, (x + 1)^2 / 4 between."""
    x = _float(x)
    return where(x <= -1.0, 0.0, where(x >= 1.0, x, square(x + 1.0) / 4.0))


@public_in("nn")
def sparse_sigmoid(x: Any) -> Variable:
    """jax.nn.sparse_sigmoid: 0.5 * clip(x + 1, 0, 2)."""
    return clip(_float(x) + 1.0, 0.0, 2.0) * 0.5


@public_in("nn")
def hard_tanh(x: Any) -> Variable:
    """jax.nn.hard_tanh: x clipped to [-1, 1] (slope 1 at the kinks, as jax.nn's where)."""
    x = as_var(x)
    return where(x > 1, 1, where(x < -1, -1, x))


@public_in("nn")
def hard_sigmoid(x: Any) -> Variable:
    """jax.nn.hard_sigmoid: relu6(x + 3) / 6."""
    return relu6(_float(x) + 3.0) / 6.0


@public_in("nn")
def hard_silu(x: Any) -> Variable:
    """jax.nn.hard_silu: x * hard_sigmoid(x)."""
    x = _float(x)
    return x * hard_sigmoid(x)


@public_in("nn")
def hard_swish(x: Any) -> Variable:
    """jax.nn.hard_swish: the same as hard_silu."""
    return hard_silu(x)


@public_in("nn")
def log1mexp(x: Any) -> Variable:
    """jax.nn.log1mexp: log(1 - exp(-x)), by log(-expm1(-x)) below log 2 and
    log1p(-exp(-x)) above; each branch sees a value where it is finite."""
    x = _float(x)
    c = math.log(2.0)
    small = x < c
    lo = log(expm1(where(small, x, 1.0) * -1.0) * -1.0)
    hi = log1p(exp(where(small, 1.0, x) * -1.0) * -1.0)
    return where(small, lo, hi)


@public_in("nn")
def logmeanexp(x: Any, axis: Axis = None, where: Any = None, keepdims: bool = False) -> Variable:
    """jax.nn.logmeanexp(x, axis=None, keepdims=False): logsumexp(x) - log(count)."""
    if where is not None:
        raise ShapeError("logmeanexp's where= is not supported", op="nn.logmeanexp")
    x = _float(x)
    axes = norm_axes(axis, x.ndim)
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    return logsumexp(x, axes, keepdims=keepdims) - math.log(count)


@public_in("nn")
def glu(x: Any, axis: int = -1) -> Variable:
    """jax.nn.glu(x, axis=-1): the first half of `axis` times sigmoid of the second."""
    x = as_var(x)
    if x.shape[axis] % 2:
        raise ShapeError(
            f"glu needs an even size along axis {axis}, got {x.type_str()}", op="nn.glu"
        )
    x1, x2 = split(x, 2, axis)
    return x1 * sigmoid(x2)


@public_in("nn")
def standardize(
    x: Any,
    axis: Axis = -1,
    mean: Any = None,
    variance: Any = None,
    epsilon: float = 1e-5,
    where: Any = None,
    *,
    algorithm: str = "fast",
) -> Variable:
    """jax.nn.standardize(x, axis=-1, mean=None, variance=None, epsilon=1e-5, *,
    algorithm='fast'): (x - mean) * rsqrt(variance + epsilon)."""
    if where is not None:
        raise ShapeError("standardize's where= is not supported", op="nn.standardize")
    m = mean
    x = _float(x)
    if m is None:
        m = _mean(x, axis, keepdims=True)
    if variance is None:
        if algorithm == "stable":
            variance = _mean(square(x - m), axis, keepdims=True)
        elif algorithm == "fast":
            variance = clip(_mean(square(x), axis, keepdims=True) - square(m), 0)
        else:
            raise ShapeError(
                f"unknown algorithm {algorithm!r}: 'fast' or 'stable'", op="nn.standardize"
            )
    return (x - m) * rsqrt(variance + epsilon)


def _attention_mask(t: int, s: int, is_causal: bool, window: Any) -> Variable | None:
    masks = []
    if is_causal:
        masks.append(tril(ones((t, s), bool)))
    if window is not None:
        left, right = (window, window) if isinstance(window, int) else window
        q = arange(t).reshape((t, 1))
        k = arange(s).reshape((1, s))
        masks.append(logical_and(q >= k - right, q <= k + left))
    out = None
    for m in masks:
        out = m if out is None else logical_and(out, m)
    return out


@public_in("nn")
def dot_product_attention(
    query: Any,
    key: Any,
    value: Any,
    bias: Any = None,
    mask: Any = None,
    *,
    scale: float | None = None,
    is_causal: bool = False,
    query_seq_lengths: Any = None,
    key_value_seq_lengths: Any = None,
    local_window_size: int | tuple[int, int] | None = None,
    implementation: str | None = None,
    return_residual: bool = False,
) -> Variable:
    """jax.nn.dot_product_attention (the 'xla' implementation): query (B, T, N, H) or
    (T, N, H), key/value with K heads (N a multiple of K: grouped-query attention), optional
    bias and bool mask broadcast to (B, N, T, S), causal and local-window masks; the softmax
    is taken in float32, as JAX takes it."""
    if query_seq_lengths is not None or key_value_seq_lengths is not None or return_residual:
        raise ShapeError(
            "query/key_value_seq_lengths and return_residual are not supported",
            op="nn.dot_product_attention",
        )
    if implementation not in (None, "xla"):
        raise ShapeError(
            f"implementation {implementation!r}: only 'xla'", op="nn.dot_product_attention"
        )
    q, k, v = as_var(query), as_var(key), as_var(value)
    require_real(q, k, v, what="nn.dot_product_attention")  # (JAX's refuses them too)
    unbatched = q.ndim == 3
    if unbatched:
        q, k, v = (x.reshape((1,) + x.shape) for x in (q, k, v))
    if q.ndim != 4 or k.ndim != 4 or v.shape != k.shape or q.shape[-1] != k.shape[-1]:
        raise ShapeError(
            f"query {q.type_str()}, key {k.type_str()}, value {v.type_str()}: "
            "need (B, T, N, H), (B, S, K, H), (B, S, K, H)",
            op="nn.dot_product_attention",
        )
    n, heads = q.shape[2], k.shape[2]
    if n % heads:
        raise ShapeError(
            f"{n} query heads are not a multiple of {heads} key heads",
            op="nn.dot_product_attention",
        )
    if heads != n:
        k, v = repeat(k, n // heads, axis=2), repeat(v, n // heads, axis=2)
    logits_dt = dtypes.promote(q.dtype, np.dtype(np.float32))
    logits = astype(einsum("BTNH,BSNH->BNTS", q, k), logits_dt)
    logits = logits * (1.0 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if bias is not None:
        logits = astype(logits + as_var(bias), logits_dt)
    masks = [astype(as_var(mask), bool)] if mask is not None else []
    extra = _attention_mask(logits.shape[2], logits.shape[3], is_causal, local_window_size)
    if extra is not None:
        masks.append(extra)
    if masks:
        big = -0.7 * min(float(np.finfo(logits_dt).max), float(np.finfo(np.float32).max))
        combined = masks[0] if len(masks) == 1 else logical_and(masks[0], masks[1])
        logits = where(combined, logits, full((), big, logits_dt))
    probs = astype(softmax(astype(logits, np.float32), -1), k.dtype)
    out = einsum("BNTS,BSNH->BTNH", probs, v)
    return out.reshape(out.shape[1:]) if unbatched else out
