"""`sg.nn`: layers for imperative mode (the DyNet-on-Fluid `Linear`) and jax.nn's activations.

    l1 = sg.nn.Linear(3, 8, act="relu")
    with sg.autograd.record():
        loss = sg.mean(l2(l1(x)))
    loss.backward()
    sgd(l1.params() + l2.params())

A layer holds attached Tensors; calling it inside `sg.autograd.record()` records its ops
(`x @ w + b` and an activation of `sg.nn` are one eager call, whose result alone the tape
keeps: backward needs no more).
The activations are the srcgrad ops of jax.nn's names (`sg.nn.relu` is `sg.relu`; the rest of
jax.nn, such as `sg.nn.selu` and `sg.nn.dot_product_attention`, is declared in
ops/activations.py), and `sg.nn.initializers` holds jax.nn.initializers' initialisers.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable

import jax
import numpy as np

from .eager import call_eagerly
from .errors import SrcgradError, user_location
from .ir import current_program
from . import initializers
from .ops.declare import EXPORTS, exports_of
from .tensors import Tensor, tensor

#: jax.nn's activation names that srcgrad declares as ops.
ACTIVATIONS = ("relu", "sigmoid", "tanh", "softplus", "silu", "log_sigmoid", "relu6",
               "leaky_relu", "elu", "gelu", "softmax", "log_softmax", "logsumexp", "one_hot")

_seeds = itertools.count()
#: The activations that `Linear` computes in the same eager call as `x @ w + b` (the
#: srcgrad ops; a user's function runs on the Tensor, so it may look at values).
_FUSED = frozenset(EXPORTS[n] for n in ACTIVATIONS if n in EXPORTS)


class Linear:
    """`act(x @ w + b)`: `w` is (in_dim, out_dim), LeCun-normal, `b` zeros; both attached.

    `act` is None, the name of an activation in `sg.nn` ("relu", "tanh", ...) or a function
    of one Tensor. `seed` fixes the initial weights (default: a new seed per layer).
    """

    def __init__(self, in_dim: int, out_dim: int, act: str | Callable[[Any], Any] | None = None,
                 *, seed: int | None = None, dtype: Any = "float32", name: str = "linear"):
        if isinstance(act, str):
            if act not in ACTIVATIONS or act not in EXPORTS:
                raise SrcgradError(f"sg.nn.Linear: unknown activation {act!r}; use one of "
                                   f"{[a for a in ACTIVATIONS if a in EXPORTS]}, a function or "
                                   "None", loc=user_location())
            act = EXPORTS[act]
        elif act is not None and not callable(act):
            raise SrcgradError(f"sg.nn.Linear: act must be None, a name or a function, got "
                               f"{type(act).__name__}", loc=user_location())
        key = jax.random.PRNGKey(next(_seeds) if seed is None else seed)
        w = (jax.random.normal(key, (in_dim, out_dim)) / np.sqrt(in_dim)).astype(dtype)
        self.weight = tensor(w, name=f"{name}_w")
        self.bias = tensor(np.zeros((out_dim,), dtype), name=f"{name}_b")
        self.weight.attach_grad()
        self.bias.attach_grad()
        self.act = act

    def __call__(self, x: Any) -> Tensor:
        act = self.act
        fused = act if act is None or act in _FUSED else None
        args = (x, self.weight, self.bias, fused)
        y = _dense(*args) if current_program() is not None else call_eagerly(_dense, args, {})
        return y if act is fused else act(y)

    def params(self) -> list[Tensor]:
        """The weight and the bias (DyNet's `Params()`)."""
        return [self.weight, self.bias]


def _dense(x: Any, w: Any, b: Any, act: Callable[[Any], Any] | None) -> Any:
    """`act(x @ w + b)` as one eager call: one jitted program computes it, and a recording
    keeps only its result (its grad reads the result, `x` and `w`; never `x @ w`)."""
    y = x @ w + b
    return act(y) if act is not None else y


def _export_activations() -> None:
    globals().update({n: EXPORTS[n] for n in ACTIVATIONS if n in EXPORTS})
    globals().update(exports_of("nn"))


_export_activations()

__all__ = ["Linear", "initializers", *[n for n in ACTIVATIONS if n in EXPORTS],
           *sorted(exports_of("nn"))]
