"""PyTorch's loss functions (`sg.nn.functional.cross_entropy`, ...) with its signatures,
defaults, layouts and reductions.

    loss = F.cross_entropy(logits, labels)              # logits (N, C), labels (N,) ints
    loss = F.cross_entropy(logits, probs, label_smoothing=0.1)  # or class probabilities

The class axis is axis 1 (axis 0 of a 1-D input), as PyTorch's: (N, C) or (N, C, d1, ...),
with targets (N,) or (N, d1, ...). `reduction` is "mean" (default), "sum" or "none";
PyTorch's legacy `size_average` / `reduce` flags map to it as PyTorch maps them. A mean
over class-index targets with `weight` divides by the summed weights of the targets that
are not `ignore_index`, as PyTorch's. `binary_cross_entropy` clamps its logs at -100 and
its gradient is PyTorch's (finite where the input is exactly 0 or 1). A target whose shape
differs from the input's is broadcast with a warning, as PyTorch warns.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

import warnings
from typing import Any

import jax
import numpy as np

from .. import ops as declared_ops
from ..api.custom import custom_vjp
from ..core import dispatch
from ..ir.program import Variable
from .functional import fail
from .tensor import Tensor

#: The op namespace (its names are declared when srcgrad is imported: mypy cannot see them).
ops: Any = declared_ops

REDUCTIONS = ("none", "mean", "sum")


def reduction_of(who: str, size_average: Any, reduce: Any, reduction: str) -> str:
    """`reduction`, or PyTorch's reading of the legacy flags when either is given."""
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        return "sum" if reduce and not size_average else ("mean" if reduce else "none")
    if reduction not in REDUCTIONS:
        raise fail(who, f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    return reduction


def _reduced(loss: Any, reduction: str) -> Any:
    if reduction == "mean":
        return ops.mean(loss)
    return ops.sum(loss) if reduction == "sum" else loss


def _same_shape(who: str, input: Any, target: Any) -> None:
    if tuple(input.shape) != tuple(target.shape):
        warnings.warn(
            f"F.{who}: the target's shape {tuple(target.shape)} differs from the input's "
            f"{tuple(input.shape)}; they are broadcast, which is likely wrong (as PyTorch warns)",
            UserWarning,
            stacklevel=3,
        )


# ---------------------------------------------------------------- regression losses


def mse_loss(
    input: Any,
    target: Any,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    weight: Any = None,
) -> Any:
    """(input - target)^2, reduced (`weight` multiplies each element)."""
    red = reduction_of("mse_loss", size_average, reduce, reduction)
    _same_shape("mse_loss", input, target)
    loss = (input - target) ** 2
    return _reduced(loss if weight is None else loss * weight, red)


def l1_loss(
    input: Any,
    target: Any,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    weight: Any = None,
) -> Any:
    """|input - target|, reduced."""
    red = reduction_of("l1_loss", size_average, reduce, reduction)
    _same_shape("l1_loss", input, target)
    loss = ops.abs(input - target)
    return _reduced(loss if weight is None else loss * weight, red)


def smooth_l1_loss(
    input: Any,
    target: Any,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    beta: float = 1.0,
) -> Any:
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (beta 0: the L1 loss)."""
    red = reduction_of("smooth_l1_loss", size_average, reduce, reduction)
    _same_shape("smooth_l1_loss", input, target)
    if beta < 0:
        raise fail("smooth_l1_loss", f"beta must be >= 0, got {beta}")
    return dispatch.call(_smooth_l1, (input, target, float(beta), red), {})


def _smooth_l1(x: Any, t: Any, beta: float, red: str) -> Any:
    d = ops.abs(x - t)
    loss = d if beta == 0 else ops.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta)
    return _reduced(loss, red)


def huber_loss(
    input: Any, target: Any, reduction: str = "mean", delta: float = 1.0, weight: Any = None
) -> Any:
    """0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta)."""
    red = reduction_of("huber_loss", None, None, reduction)
    _same_shape("huber_loss", input, target)
    if delta <= 0:
        raise fail("huber_loss", f"delta must be > 0, got {delta}")
    loss = dispatch.call(_huber, (input, target, float(delta)), {})
    return _reduced(loss if weight is None else loss * weight, red)


def _huber(x: Any, t: Any, delta: float) -> Any:
    d = ops.abs(x - t)
    return ops.where(d < delta, 0.5 * d * d, delta * (d - 0.5 * delta))


def kl_div(
    input: Any,
    target: Any,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    log_target: bool = False,
) -> Any:
    """target * (log target - input) (`input` holds log-probabilities; `log_target`: so
    does `target`); reduction also "batchmean" (the sum over the batch size)."""
    if reduction == "batchmean" and size_average is None and reduce is None:
        red = "batchmean"
    else:
        red = reduction_of("kl_div", size_average, reduce, reduction)
    return dispatch.call(_kl_div, (input, target, bool(log_target), red), {})


def _kl_div(x: Any, t: Any, log_target: bool, red: str) -> Any:
    if log_target:
        loss = ops.exp(t) * (t - x)
    else:
        positive = t > 0
        logt = ops.log(ops.where(positive, t, ops.ones_like(t)))
        loss = ops.where(positive, t * (logt - x), -t * x)
    if red == "batchmean":
        return ops.sum(loss) / (x.shape[0] if x.ndim else 1)
    return _reduced(loss, red)


# ---------------------------------------------------------------- binary cross-entropy


def binary_cross_entropy(
    input: Any,
    target: Any,
    weight: Any = None,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Any:
    """-w (t log x + (1 - t) log(1 - x)), the logs clamped at -100; `input` holds
    probabilities (apply a sigmoid first, or use binary_cross_entropy_with_logits)."""
    red = reduction_of("binary_cross_entropy", size_average, reduce, reduction)
    if tuple(input.shape) != tuple(target.shape):
        raise fail(
            "binary_cross_entropy",
            f"the target's shape {tuple(target.shape)} differs from the input's "
            f"{tuple(input.shape)} (PyTorch refuses this too)",
        )
    loss = _bce(input, target)
    return _reduced(loss if weight is None else loss * weight, red)


def _bce_value(x: Any, t: Any) -> Any:
    return -(t * _clamped_log(x) + (1.0 - t) * _clamped_log(1.0 - x))


_bce = custom_vjp(_bce_value)


def _clamped_log(x: Any) -> Any:
    return ops.maximum(ops.log(x), -100.0)


def _bce_fwd(x: Any, t: Any) -> tuple[Any, tuple[Any, Any]]:
    return _bce_value(x, t), (x, t)


def _bce_bwd(res: tuple[Any, Any], g: Any) -> tuple[Any, Any]:
    """PyTorch's derivatives: (x - t) / max(x (1 - x), 1e-12), and log(1 - x) - log(x)
    (not clamped: infinite where x is 0 or 1, as PyTorch's)."""
    x, t = res
    gx = g * (x - t) / ops.maximum((1.0 - x) * x, 1e-12)
    gt = g * (ops.log1p(-x) - ops.log(x))
    return gx, gt


_bce.defvjp(_bce_fwd, _bce_bwd)


def binary_cross_entropy_with_logits(
    input: Any,
    target: Any,
    weight: Any = None,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    pos_weight: Any = None,
) -> Any:
    """binary_cross_entropy(sigmoid(input), target), computed stably: (1 - t) x +
    (1 + (pos_weight - 1) t) softplus(-x); its gradient is exact at x = 0."""
    red = reduction_of("binary_cross_entropy_with_logits", size_average, reduce, reduction)
    if tuple(input.shape) != tuple(target.shape):
        raise fail(
            "binary_cross_entropy_with_logits",
            f"the target's shape {tuple(target.shape)} differs from the input's "
            f"{tuple(input.shape)} (PyTorch refuses this too)",
        )
    loss = dispatch.call(_bce_logits, (input, target, pos_weight), {})
    return _reduced(loss if weight is None else loss * weight, red)


def _bce_logits(x: Any, t: Any, pos_weight: Any) -> Any:
    if pos_weight is None:
        return ops.softplus(x) - x * t
    return (1.0 - t) * x + (1.0 + (pos_weight - 1.0) * t) * ops.softplus(-x)


# ---------------------------------------------------------------- class losses


def nll_loss(
    input: Any,
    target: Any,
    weight: Any = None,
    size_average: Any = None,
    ignore_index: int = -100,
    reduce: Any = None,
    reduction: str = "mean",
) -> Any:
    """-w[t] input[t] along the class axis (1; 0 of a 1-D input): `input` holds
    log-probabilities (F.log_softmax), `target` class indices; targets equal to
    `ignore_index` count nothing (and weigh nothing in the mean)."""
    red = reduction_of("nll_loss", size_average, reduce, reduction)
    _check_indices("nll_loss", input, target, ignore_index)
    return dispatch.call(_nll, (input, target, weight, int(ignore_index), red), {})


def cross_entropy(
    input: Any,
    target: Any,
    weight: Any = None,
    size_average: Any = None,
    ignore_index: int = -100,
    reduce: Any = None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Any:
    """nll_loss(log_softmax(input, 1), target): `input` holds unnormalised scores (logits),
    `target` class indices (an integer array) or class probabilities (a float array shaped as
    `input`). `label_smoothing` eps mixes the target with the uniform distribution:
    (1 - eps) target + eps / C."""
    red = reduction_of("cross_entropy", size_average, reduce, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise fail("cross_entropy", f"label_smoothing must be in [0, 1], got {label_smoothing}")
    if np.dtype(target.dtype).kind == "f":
        if tuple(target.shape) != tuple(input.shape):
            raise fail(
                "cross_entropy",
                f"class probabilities of shape {tuple(target.shape)} for an input of shape "
                f"{tuple(input.shape)}: they must have the same shape",
            )
        args = (input, target, weight, float(label_smoothing), red)
        return dispatch.call(_cross_entropy_probs, args, {})
    _check_indices("cross_entropy", input, target, ignore_index)
    args2 = (input, target, weight, int(ignore_index), red, float(label_smoothing))
    return dispatch.call(_cross_entropy_indices, args2, {})


def _class_axis(x: Any) -> int:
    return 1 if x.ndim >= 2 else 0


def _check_indices(who: str, input: Any, target: Any, ignore_index: int) -> None:
    """Shapes (and, for concrete targets, values) of class-index targets, as PyTorch checks."""
    if np.dtype(target.dtype).kind not in "iu":
        raise fail(who, f"class-index targets must be integers, got {np.dtype(target.dtype)}")
    if (
        input.ndim == 0
        or input.ndim > 1
        and tuple(target.shape)
        != (
            input.shape[0],
            *input.shape[2:],
        )
    ):
        want = "()" if input.ndim == 1 else str((input.shape[0], *input.shape[2:]))
        raise fail(
            who,
            f"an input of shape {tuple(input.shape)} (classes on axis 1) takes targets of "
            f"shape {want}, got {tuple(target.shape)}",
        )
    if input.ndim == 1 and target.ndim != 0:
        raise fail(who, f"a 1-D input takes a scalar target, got shape {tuple(target.shape)}")
    value = target.value() if isinstance(target, Tensor) else target
    if isinstance(value, (Variable, jax.core.Tracer)):
        return  # traced: no values to check
    values = np.asarray(value)
    n = input.shape[_class_axis(input)]
    bad = values[(values != ignore_index) & ((values < 0) | (values >= n))]
    if bad.size:
        raise fail(who, f"target {int(bad.flat[0])} is out of bounds for {n} classes")


def _picked(logp: Any, target: Any, weight: Any, ignore_index: int) -> tuple[Any, Any]:
    """(-w[t] logp[t], w[t]) per target, zero where the target is ignored."""
    axis = _class_axis(logp)
    ignored = ops.equal(target, ignore_index)
    safe = ops.where(ignored, ops.zeros_like(target), target)
    idx = ops.expand_dims(safe, axis)
    chosen = ops.squeeze(ops.take_along_axis(logp, idx, axis), axis)
    w = ops.ones_like(chosen) if weight is None else ops.take(weight, safe, axis=0)
    w = ops.where(ignored, ops.zeros_like(w), w)
    return -w * chosen, w


def _nll(logp: Any, target: Any, weight: Any, ignore_index: int, red: str) -> Any:
    loss, w = _picked(logp, target, weight, ignore_index)
    if red == "mean":
        return ops.sum(loss) / ops.sum(w)
    return _reduced(loss, red)


def _cross_entropy_indices(
    x: Any, target: Any, weight: Any, ignore_index: int, red: str, eps: float
) -> Any:
    axis = _class_axis(x)
    logp = ops.log_softmax(x, axis)
    nll = _nll(logp, target, weight, ignore_index, red)
    if eps == 0.0:
        return nll
    n = x.shape[axis]
    w = 1.0 if weight is None else _along(weight, axis, x.ndim)
    smooth = -ops.sum(logp * w, axis=axis)
    smooth = ops.where(ops.equal(target, ignore_index), ops.zeros_like(smooth), smooth)
    if red == "mean":
        _, wt = _picked(logp, target, weight, ignore_index)
        smooth = ops.sum(smooth) / ops.sum(wt)
    else:
        smooth = _reduced(smooth, red)
    return (1.0 - eps) * nll + smooth * (eps / n)


def _cross_entropy_probs(x: Any, target: Any, weight: Any, eps: float, red: str) -> Any:
    axis = _class_axis(x)
    n = x.shape[axis]
    logp = ops.log_softmax(x, axis)
    t = target if eps == 0.0 else target * (1.0 - eps) + eps / n
    w = 1.0 if weight is None else _along(weight, axis, x.ndim)
    return _reduced(-ops.sum(logp * t * w, axis=axis), red)


def _along(weight: Any, axis: int, ndim: int) -> Any:
    """A per-class weight shaped to broadcast along the class axis."""
    return ops.reshape(weight, (-1,) + (1,) * (ndim - axis - 1))


__all__ = [
    "mse_loss",
    "l1_loss",
    "smooth_l1_loss",
    "huber_loss",
    "kl_div",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "nll_loss",
    "cross_entropy",
]
