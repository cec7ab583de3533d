"""`sg.optim`: optimizers that update attached Tensors in place from their `.grad`.

optax works too: its updates are pytrees of arrays, and a Tensor is a pytree of its array
(`optax.sgd(lr).update([p.grad for p in ps], state)`).

Layer L6 (front ends): see docs/design.md.
"""
from __future__ import annotations

from typing import Any, Sequence

import jax

from .errors import SrcgradError, user_location
from .tensors import Tensor


@jax.jit
def _sgd(values: list[Any], grads: list[Any], lr: Any) -> list[Any]:
    return [v - (lr * g).astype(v.dtype) for v, g in zip(values, grads)]


class SGD:
    """Plain gradient descent: `p <- p - lr * p.grad` for each Tensor (DyNet's `sgd(params)`)."""

    def __init__(self, lr: float):
        self.lr = lr

    def __call__(self, params: Sequence[Tensor]) -> None:
        ps = [p for p in params if _has_grad(p)]
        if ps:
            grads = [p.grad._value for p in ps]  # type: ignore[union-attr]
            new = _sgd([p._value for p in ps], grads, self.lr)
            for p, v in zip(ps, new):
                p._value = v


def _has_grad(p: Any) -> bool:
    if not isinstance(p, Tensor):
        raise SrcgradError(f"sg.optim: parameters must be sg.Tensors, got a {type(p).__name__}",
                           loc=user_location())
    return p.grad is not None


__all__ = ["SGD"]
