"""PyTorch's `torch.nn.functional` activations and tensor functions, with its signatures,
defaults and derivatives at the kinks (`sg.nn.functional`, imported as `F`).

    import srcgrad.nn.functional as F
    h = F.relu(x); p = F.log_softmax(h, dim=1); y = F.pixel_shuffle(z, 3)

Each is written with srcgrad ops, so it runs eagerly, on the tape (imperative mode) and
traced (inside `sg.grad` / `sg.jit`) alike. Where PyTorch's default differs from jax.nn's,
PyTorch's holds here: `F.gelu` is the exact (erf) form unless `approximate="tanh"`; the
derivative of `relu`, `leaky_relu`, `hardtanh`, `relu6`, `hardswish`, `hardsigmoid` and
`prelu` at their kinks is PyTorch's (`leaky_relu`'s at 0 is the slope, `hardtanh`'s at its
bounds 0). `inplace=True` is accepted and computes out of place: use the result. The
losses are in losses.py, pooling in pooling.py.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

import warnings
from typing import Any, Sequence

import jax
import numpy as np

from .. import ops as declared_ops
from ..base.errors import SrcgradError, user_location
from ..core import dispatch
from ..ops import activations
from .seeds import KeyStream
from .tensor import Tensor, tensor

#: The op namespace (its names are declared when srcgrad is imported: mypy cannot see them).
ops: Any = declared_ops


class FunctionalError(SrcgradError, ValueError):
    """A bad argument of an `sg.nn.functional` function: a ValueError, as PyTorch's, naming
    the function, the value and the user's line."""


def fail(who: str, message: str) -> FunctionalError:
    return FunctionalError(f"F.{who}: {message}", loc=user_location())


# ---------------------------------------------------------------- activations


def relu(input: Any, inplace: bool = False) -> Any:
    """max(x, 0); its derivative at 0 is 0."""
    return ops.relu(input)


def relu6(input: Any, inplace: bool = False) -> Any:
    """hardtanh(x, 0, 6), PyTorch's: derivative 0 at 0 and 6."""
    return hardtanh(input, 0.0, 6.0)


def hardtanh(input: Any, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Any:
    """x clipped to [min_val, max_val]; the derivative is 1 strictly inside, 0 elsewhere."""
    return dispatch.call(_hardtanh, (input, float(min_val), float(max_val)), {})


def _hardtanh(x: Any, lo: float, hi: float) -> Any:
    inside = ops.logical_and(x > lo, x < hi)
    return ops.where(inside, x, ops.where(x <= lo, ops.full_like(x, lo), ops.full_like(x, hi)))


def leaky_relu(input: Any, negative_slope: float = 0.01, inplace: bool = False) -> Any:
    """x if x > 0 else negative_slope * x (the slope at 0, as PyTorch's)."""
    return ops.where(input > 0, input, input * float(negative_slope))


def elu(input: Any, alpha: float = 1.0, inplace: bool = False) -> Any:
    return ops.elu(input, float(alpha))


def celu(input: Any, alpha: float = 1.0, inplace: bool = False) -> Any:
    return activations.celu(input, float(alpha))


def selu(input: Any, inplace: bool = False) -> Any:
    return activations.selu(input)


def gelu(input: Any, approximate: str = "none") -> Any:
    """x * Phi(x), exact (erf) by default as PyTorch's; `approximate="tanh"` is the tanh
    form (jax.nn.gelu's default)."""
    if approximate not in ("none", "tanh"):
        raise fail("gelu", f"approximate must be 'none' or 'tanh', got {approximate!r}")
    return ops.gelu(input, approximate == "tanh")


def silu(input: Any, inplace: bool = False) -> Any:
    return ops.silu(input)


def mish(input: Any, inplace: bool = False) -> Any:
    return activations.mish(input)


def sigmoid(input: Any) -> Any:
    return ops.sigmoid(input)


def tanh(input: Any) -> Any:
    return ops.tanh(input)


def logsigmoid(input: Any) -> Any:
    return ops.log_sigmoid(input)


def softsign(input: Any) -> Any:
    return input / (1.0 + ops.abs(input))


def tanhshrink(input: Any) -> Any:
    return input - ops.tanh(input)


def softplus(input: Any, beta: float = 1.0, threshold: float = 20.0) -> Any:
    """log(1 + exp(beta x)) / beta, and x itself where beta x > threshold."""
    return dispatch.call(_softplus, (input, float(beta), float(threshold)), {})


def _softplus(x: Any, beta: float, threshold: float) -> Any:
    return ops.where(x * beta > threshold, x, ops.softplus(x * beta) / beta)


def hardswish(input: Any, inplace: bool = False) -> Any:
    """x * relu6(x + 3) / 6, with PyTorch's derivative (x / 3 + 1/2 on (-3, 3), 0 at -3, 1
    at 3)."""
    return dispatch.call(_hardswish, (input,), {})


def _hardswish(x: Any) -> Any:
    inner = ops.where(x < 3.0, x * (x + 3.0) / 6.0, x)
    return ops.where(x <= -3.0, ops.zeros_like(x), inner)


def hardsigmoid(input: Any, inplace: bool = False) -> Any:
    """relu6(x + 3) / 6; its derivative 1/6 strictly inside (-3, 3), else 0."""
    return dispatch.call(_hardsigmoid, (input,), {})


def _hardsigmoid(x: Any) -> Any:
    outside = ops.where(x >= 3.0, ops.ones_like(x), ops.zeros_like(x))
    return ops.where(ops.logical_and(x > -3.0, x < 3.0), x / 6.0 + 0.5, outside)


def hardshrink(input: Any, lambd: float = 0.5) -> Any:
    return ops.where(ops.abs(input) > float(lambd), input, ops.zeros_like(input))


def softshrink(input: Any, lambd: float = 0.5) -> Any:
    return dispatch.call(_softshrink, (input, float(lambd)), {})


def _softshrink(x: Any, lambd: float) -> Any:
    return ops.where(x > lambd, x - lambd, ops.where(x < -lambd, x + lambd, ops.zeros_like(x)))


def threshold(input: Any, threshold: float, value: float, inplace: bool = False) -> Any:
    """x where x > threshold, else value."""
    return ops.where(input > float(threshold), input, ops.full_like(input, value))


def prelu(input: Any, weight: Any) -> Any:
    """x if x > 0 else weight * x, `weight` of 1 element or one per channel (axis 1)."""
    n = int(np.prod(weight.shape))
    if n != 1:
        channels = input.shape[1] if input.ndim >= 2 else input.shape[0]
        if n != channels:
            raise fail("prelu", f"{n} weights for {channels} channels (input {tuple(input.shape)})")
        axis = 1 if input.ndim >= 2 else 0
        weight = ops.reshape(weight, (n,) + (1,) * (input.ndim - axis - 1))
    else:
        weight = ops.reshape(weight, ())
    return ops.where(input > 0, input, weight * input)


def glu(input: Any, dim: int = -1) -> Any:
    """a * sigmoid(b), the halves of `input` along `dim`."""
    if input.shape[dim] % 2:
        raise fail("glu", f"dim {dim} has odd size {input.shape[dim]} (input {tuple(input.shape)})")
    return activations.glu(input, dim)


def _softmax_dim(who: str, ndim: int, dim: int | None) -> int:
    """PyTorch's implicit dim (0 for 0-, 1- and 3-D inputs, else 1), with its warning."""
    if dim is not None:
        return dim
    warnings.warn(
        f"F.{who}: implicit dim is deprecated (as in PyTorch); pass dim=", UserWarning, stacklevel=3
    )
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input: Any, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Any:
    """exp(x) / sum(exp(x)) along `dim` (`dtype`: the input is cast first)."""
    x = input if dtype is None else ops.astype(input, dtype)
    return ops.softmax(x, _softmax_dim("softmax", x.ndim, dim))


def softmin(input: Any, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Any:
    x = input if dtype is None else ops.astype(input, dtype)
    return ops.softmax(-x, _softmax_dim("softmin", x.ndim, dim))


def log_softmax(input: Any, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Any:
    """x - logsumexp(x) along `dim`."""
    x = input if dtype is None else ops.astype(input, dtype)
    return ops.log_softmax(x, _softmax_dim("log_softmax", x.ndim, dim))


# ---------------------------------------------------------------- dropout


def dropout(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Any:
    """Zero each element with probability `p` and scale the rest by 1 / (1 - p) (training is
    True by default, as PyTorch's: pass `training=self.training` in a Module). The masks
    come from a stream of jax.random keys (a new mask per call)."""
    return dropout_with(next_key(), input, p, training)


def dropout_with(key: jax.Array, input: Any, p: float, training: bool) -> Any:
    """`dropout` with the mask drawn from `key` (nn.Dropout passes its own stream's)."""
    if not 0.0 <= p <= 1.0:
        raise fail("dropout", f"p must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    keep = jax.random.bernoulli(key, 1.0 - p, tuple(input.shape))
    scale = np.asarray(1.0 / (1.0 - p), input.dtype)
    # a Tensor: an input of the tape, so a new mask each step changes no structure
    return input * tensor(jax.numpy.where(keep, scale, np.zeros((), input.dtype)))


_stream: list[KeyStream] = []


def next_key() -> jax.Array:
    """A new key of `F.dropout`'s stream (made at its first use, from the seed counter)."""
    if not _stream:
        _stream.append(KeyStream())
    return _stream[0].next()


# ---------------------------------------------------------------- tensor functions


def linear(input: Any, weight: Any, bias: Any = None) -> Any:
    """input @ weight.T + bias, `weight` (out, in) as PyTorch's."""
    y = ops.matmul(input, ops.transpose(weight))
    return y if bias is None else y + bias


def embedding(input: Any, weight: Any) -> Any:
    """The rows of `weight` at the integer indices `input`."""
    return ops.take(weight, input, axis=0)


def one_hot(tensor: Any, num_classes: int = -1) -> Any:
    """Integer indices as one-hot integer vectors (num_classes=-1: the largest index + 1,
    read from the values)."""
    if num_classes == -1:
        values = tensor.value() if isinstance(tensor, Tensor) else tensor
        num_classes = int(np.max(np.asarray(values))) + 1
    return ops.one_hot(tensor, num_classes, dtype=np.int32)


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def pad(input: Any, pad: Sequence[int], mode: str = "constant", value: float | None = None) -> Any:
    """PyTorch's pad: `pad` lists (before, after) pairs from the LAST axis backwards
    ((left, right, top, bottom) pads W then H); modes constant, reflect, replicate,
    circular."""
    if len(pad) % 2 or len(pad) // 2 > input.ndim:
        raise fail("pad", f"pad {tuple(pad)} needs pairs for at most {input.ndim} axes")
    if mode not in _PAD_MODES:
        raise fail("pad", f"mode must be one of {sorted(_PAD_MODES)}, got {mode!r}")
    widths = [(0, 0)] * input.ndim
    for i in range(len(pad) // 2):
        widths[input.ndim - 1 - i] = (int(pad[2 * i]), int(pad[2 * i + 1]))
    if any(lo < 0 or hi < 0 for lo, hi in widths):
        raise fail("pad", f"negative padding {tuple(pad)} (cropping) is not supported")
    if mode == "constant":
        return ops.pad(input, widths, constant_values=0.0 if value is None else value)
    return ops.pad(input, widths, mode=_PAD_MODES[mode])


def normalize(
    input: Any, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out: None = None
) -> Any:
    """input / max(||input||_p along dim, eps)."""
    return dispatch.call(_normalize, (input, float(p), dim, float(eps)), {})


def _normalize(x: Any, p: float, dim: int, eps: float) -> Any:
    norm = ops.sum(ops.abs(x) ** p, axis=dim, keepdims=True) ** (1.0 / p)
    return x / ops.maximum(norm, eps)


def pixel_shuffle(input: Any, upscale_factor: int) -> Any:
    """(*, C r^2, H, W) -> (*, C, H r, W r), PyTorch's channel order."""
    r = int(upscale_factor)
    *batch, c, h, w = _at_least("pixel_shuffle", input, 3)
    if c % (r * r):
        raise fail("pixel_shuffle", f"{c} channels are not divisible by {r}^2")
    n = len(batch)
    x = ops.reshape(input, (*batch, c // (r * r), r, r, h, w))
    x = ops.transpose(x, (*range(n), n, n + 3, n + 1, n + 4, n + 2))
    return ops.reshape(x, (*batch, c // (r * r), h * r, w * r))


def pixel_unshuffle(input: Any, downscale_factor: int) -> Any:
    """(*, C, H r, W r) -> (*, C r^2, H, W): the inverse of pixel_shuffle."""
    r = int(downscale_factor)
    *batch, c, h, w = _at_least("pixel_unshuffle", input, 3)
    if h % r or w % r:
        raise fail("pixel_unshuffle", f"H, W ({h}, {w}) are not divisible by {r}")
    n = len(batch)
    x = ops.reshape(input, (*batch, c, h // r, r, w // r, r))
    x = ops.transpose(x, (*range(n), n, n + 2, n + 4, n + 1, n + 3))
    return ops.reshape(x, (*batch, c * r * r, h // r, w // r))


def _at_least(who: str, x: Any, ndim: int) -> tuple[int, ...]:
    if x.ndim < ndim:
        raise fail(who, f"the input needs at least {ndim} axes, got shape {tuple(x.shape)}")
    return tuple(x.shape)


def flatten(input: Any, start_dim: int = 0, end_dim: int = -1) -> Any:
    """`torch.flatten`: axes start_dim..end_dim merged into one."""
    shape = tuple(input.shape)
    if not shape:
        return ops.reshape(input, (1,))
    start, end = start_dim % len(shape), end_dim % len(shape)
    if start > end:
        raise fail("flatten", f"start_dim {start_dim} comes after end_dim {end_dim}")
    merged = int(np.prod(shape[start : end + 1], dtype=np.int64))
    return ops.reshape(input, shape[:start] + (merged,) + shape[end + 1 :])


__all__ = [
    "FunctionalError",
    "relu",
    "relu6",
    "hardtanh",
    "leaky_relu",
    "elu",
    "celu",
    "selu",
    "gelu",
    "silu",
    "mish",
    "sigmoid",
    "tanh",
    "logsigmoid",
    "softsign",
    "tanhshrink",
    "softplus",
    "hardswish",
    "hardsigmoid",
    "hardshrink",
    "softshrink",
    "threshold",
    "prelu",
    "glu",
    "softmax",
    "softmin",
    "log_softmax",
    "dropout",
    "linear",
    "embedding",
    "one_hot",
    "pad",
    "normalize",
    "pixel_shuffle",
    "pixel_unshuffle",
    "flatten",
]
