"""`sg.distributions.Categorical`: PyTorch's torch.distributions.Categorical, for policy
gradients (REINFORCE) and sampling.

    m = sg.distributions.Categorical(probs)       # or logits=
    action = m.sample()
    loss = -m.log_prob(action) * reward           # recorded: differentiable in probs

`probs` (normalised along the last axis, as PyTorch does) or `logits` (log-softmaxed) hold
the event's K classes on the last axis, any batch axes before. `log_prob`, `entropy`,
`probs` and `logits` are srcgrad ops, so they are recorded on the tape and traced under
sg.grad / sg.jit alike; `sample` draws integer classes with jax.random from the process's
key stream (or `key=`), not differentiable, as PyTorch's.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

from typing import Any, Sequence

import jax
import numpy as np

from .. import ops as declared_ops
from ..base.errors import SrcgradError, user_location
from .seeds import KeyStream
from .tensor import Tensor

#: The op namespace (its names are declared when srcgrad is imported: mypy cannot see them).
ops: Any = declared_ops


class DistributionError(SrcgradError, ValueError):
    """A bad argument of a distribution: a ValueError, as PyTorch's."""


_stream: list[KeyStream] = []


def _next_key() -> jax.Array:
    if not _stream:
        _stream.append(KeyStream())
    return _stream[0].next()


class Categorical:
    """A categorical distribution over the last axis of `probs` or `logits` (one of them)."""

    def __init__(self, probs: Any = None, logits: Any = None, validate_args: Any = None):
        if (probs is None) == (logits is None):
            raise DistributionError(
                "Categorical: give either probs or logits, not both nor neither",
                loc=user_location(),
            )
        given = probs if probs is not None else logits
        if (given.ndim if hasattr(given, "ndim") else np.ndim(given)) < 1:
            raise DistributionError(
                "Categorical: probs / logits need at least one axis (the classes)",
                loc=user_location(),
            )
        if probs is not None:
            self.probs = probs / ops.sum(probs, axis=-1, keepdims=True)
            self.logits = ops.log(self.probs)
        else:
            self.logits = logits - ops.logsumexp(logits, axis=-1, keepdims=True)
            self.probs = ops.exp(self.logits)

    @property
    def batch_shape(self) -> tuple[int, ...]:
        return tuple(self.logits.shape[:-1])

    @property
    def num_events(self) -> int:
        return int(self.logits.shape[-1])

    def sample(self, sample_shape: Sequence[int] = (), *, key: Any = None) -> Tensor:
        """Integer classes of shape sample_shape + batch_shape (not recorded)."""
        logits = self.logits.value() if isinstance(self.logits, Tensor) else self.logits
        shape = tuple(sample_shape) + self.batch_shape
        k = _next_key() if key is None else key
        return Tensor(jax.random.categorical(k, jax.numpy.asarray(logits), axis=-1, shape=shape))

    def log_prob(self, value: Any) -> Any:
        """log p(value), `value` integer classes broadcast against the batch shape."""
        v = value.value() if isinstance(value, Tensor) else value
        v = np.asarray(v) if not isinstance(v, jax.Array) else v
        if np.dtype(v.dtype).kind not in "iu":
            raise DistributionError(
                f"Categorical.log_prob: the values must be integer classes, got {v.dtype}",
                loc=user_location(),
            )
        shape = np.broadcast_shapes(tuple(v.shape), self.batch_shape)
        logits = ops.broadcast_to(self.logits, shape + (self.num_events,))
        index = ops.expand_dims(jax.numpy.broadcast_to(v, shape), -1)
        return ops.squeeze(ops.take_along_axis(logits, index, axis=-1), -1)

    def entropy(self) -> Any:
        """-sum p log p over the classes (0 log 0 counted as 0)."""
        plogp = ops.where(self.probs > 0, self.probs * self.logits, ops.zeros_like(self.probs))
        return -ops.sum(plogp, axis=-1)


__all__ = ["DistributionError", "Categorical"]
