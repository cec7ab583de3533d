"""Layers for imperative mode, PyTorch's way: `Module`s whose parameters are collected
recursively from their attributes (re-exported as `sg.nn.Module`, `sg.nn.Linear`, ...).

    model = sg.nn.Sequential(sg.nn.Linear(4, 8, act="tanh"), sg.nn.Linear(8, 1))
    opt = sg.optim.Adam(model.parameters(), lr=1e-2)
    with sg.autograd.record():
        loss = sg.mean((model(x) - y) ** 2)
    loss.backward(); opt.step(); opt.zero_grad()

A Module's attributes that are Tensors, Modules, or lists / tuples / dicts of them are its
members, named as PyTorch names them ("0.weight", "blocks.1.norm.bias"). Layers compute
with srcgrad ops, so a layer's call records onto the tape like any op on Tensors.

Layer L6 (front ends): see docs/design.md.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Iterator, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from . import dispatch, ops
from .errors import SrcgradError, user_location
from .ir import Variable
from .ops.declare import EXPORTS
from .tensors import Tensor, tensor

_seeds = itertools.count()


def _key(seed: int | None) -> jax.Array:
    return jax.random.PRNGKey(next(_seeds) if seed is None else seed)


def _rng(seed: int | None) -> np.random.Generator:
    """The generator of a layer's initial weights: NumPy's, on the host. `jax.random` would
    compile a program per new shape (0.2-0.9 s each on a 2-core CPU: most of a fresh model's
    time to its first step)."""
    return np.random.default_rng(next(_seeds) if seed is None else seed)


def _param(value: Any, name: str, dtype: Any = None) -> Tensor:
    t = tensor(value, dtype, name)
    t.attach_grad()
    return t


class Module:
    """A layer: `__call__` runs `forward`; Tensor attributes are its parameters."""

    training: bool = True

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} defines no forward()")

    def _members(self) -> Iterator[tuple[str, Any]]:
        """(name, value) of the attributes that may hold Tensors or Modules."""
        return iter(vars(self).items())

    def _walk(self, prefix: str = "") -> Iterator[tuple[str, Any]]:
        """Every Tensor and Module below this one, depth first, with its dotted name."""
        def items(name: str, value: Any) -> Iterator[tuple[str, Any]]:
            if isinstance(value, (Tensor, Module)):
                yield name, value
            elif isinstance(value, (list, tuple)):
                for i, v in enumerate(value):
                    yield from items(f"{name}.{i}", v)
            elif isinstance(value, dict):
                for k, v in value.items():
                    yield from items(f"{name}.{k}", v)
        for name, value in self._members():
            for full, v in items(prefix + name, value):
                yield full, v
                if isinstance(v, Module):
                    yield from v._walk(full + ".")

    def named_parameters(self) -> Iterator[tuple[str, Tensor]]:
        """(dotted name, Tensor) for each parameter, each Tensor once."""
        seen: set[int] = set()
        for name, v in self._walk():
            if isinstance(v, Tensor) and id(v) not in seen:
                seen.add(id(v))
                yield name, v

    def parameters(self) -> list[Tensor]:
        """The parameters (every Tensor attribute, recursively), in definition order."""
        return [p for _, p in self.named_parameters()]

    def params(self) -> list[Tensor]:
        """DyNet's `Params()`: `parameters()`."""
        return self.parameters()

    def modules(self) -> list["Module"]:
        """This module and every module below it."""
        return [self] + [v for _, v in self._walk() if isinstance(v, Module)]

    def zero_grad(self) -> None:
        """Set the parameters' `.grad` to zeros."""
        for p in self.parameters():
            if p.grad is not None:
                p.grad = Tensor(jnp.zeros_like(p.value()))

    def train(self, mode: bool = True) -> "Module":
        """Training mode (Dropout drops) for this module and those below it."""
        for m in self.modules():
            m.training = mode
        return self

    def eval(self) -> "Module":
        """Evaluation mode (Dropout is the identity)."""
        return self.train(False)

    def state_dict(self) -> dict[str, np.ndarray]:
        """{dotted name: a NumPy copy of the parameter}: `np.savez(path, **m.state_dict())`."""
        return {name: p.numpy().copy() for name, p in self.named_parameters()}

    def load_state_dict(self, state: Mapping[str, Any], strict: bool = True) -> None:
        """Assign the arrays of `state` to the parameters of the same names, in place
        (`attach_grad` stays). `strict`: the names must match exactly."""
        params = dict(self.named_parameters())
        missing = [n for n in params if n not in state]
        unexpected = [n for n in state if n not in params]
        if strict and (missing or unexpected):
            raise SrcgradError(f"load_state_dict: missing {missing}, unexpected {unexpected} "
                               f"for {type(self).__name__}", loc=user_location())
        for name, p in params.items():
            if name in state:
                value = np.asarray(state[name])
                if value.shape != p.shape:
                    raise SrcgradError(f"load_state_dict: {name} has shape {value.shape} in the "
                                       f"state, {p.shape} in the module", loc=user_location())
                p.assign(value)

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={tuple(p.shape)}" for n, p in self.named_parameters())
        return f"{type(self).__name__}({inner})"


class Sequential(Module):
    """Calls its layers in turn; a layer is a Module or any function of one value."""

    def __init__(self, *layers: Callable[[Any], Any]):
        self.layers = list(layers)

    def _members(self) -> Iterator[tuple[str, Any]]:
        return ((str(i), layer) for i, layer in enumerate(self.layers))

    def forward(self, x: Any) -> Any:
        for layer in self.layers:
            x = layer(x)
        return x

    def __getitem__(self, i: int) -> Any:
        return self.layers[i]

    def __len__(self) -> int:
        return len(self.layers)

    def append(self, layer: Callable[[Any], Any]) -> "Sequential":
        self.layers.append(layer)
        return self


# ---------------------------------------------------------------- Linear

def activations() -> dict[str, Callable[..., Any]]:
    """jax.nn's function names that srcgrad declares as ops."""
    return {n: EXPORTS[n] for n in dir(jax.nn) if not n.startswith("_") and n in EXPORTS}


class Linear(Module):
    """`act(x @ weight + bias)`: `weight` is (in_dim, out_dim), LeCun-normal, `bias` zeros;
    both attached. (PyTorch's `nn.Linear` stores the transpose: load its weight as `.T`.)

    `act` is None, the name of an activation in `sg.nn` ("relu", "tanh", ...) or a function
    of one Tensor. `seed` fixes the initial weights (default: a new seed per layer).
    """

    def __init__(self, in_dim: int, out_dim: int, act: str | Callable[[Any], Any] | None = None,
                 *, seed: int | None = None, dtype: Any = "float32", name: str = "linear",
                 bias: bool = True):
        acts = activations()
        if isinstance(act, str):
            if act not in acts:
                raise SrcgradError(f"sg.nn.Linear: unknown activation {act!r}; use one of "
                                   f"{sorted(acts)}, a function or None", loc=user_location())
            act = acts[act]
        elif act is not None and not callable(act):
            raise SrcgradError(f"sg.nn.Linear: act must be None, a name or a function, got "
                               f"{type(act).__name__}", loc=user_location())
        w = _rng(seed).standard_normal((in_dim, out_dim)) / np.sqrt(in_dim)
        self.weight = _param(w, f"{name}_w", dtype)
        self.bias = _param(np.zeros((out_dim,), dtype), f"{name}_b") if bias else None
        self.act = act
        self._fused = act is None or act in acts.values()

    def forward(self, x: Any) -> Tensor:
        fused = self.act if self._fused else None
        y = dispatch.call(_dense, (x, self.weight, self.bias, fused), {})
        return y if self._fused else self.act(y)  # type: ignore[misc]


def _dense(x: Any, w: Any, b: Any, act: Callable[[Any], Any] | None) -> Any:
    """`act(x @ w + b)` as one eager call: one jitted program computes it, and a recording
    keeps only its result (its grad reads the result, `x` and `w`; never `x @ w`)."""
    y = x @ w if b is None else x @ w + b
    return act(y) if act is not None else y


# ---------------------------------------------------------------- normalisation, lookup, dropout

class LayerNorm(Module):
    """`(x - mean) / sqrt(var + eps) * weight + bias` over the last `len(shape)` axes
    (biased variance, as PyTorch's)."""

    def __init__(self, normalized_shape: int | Sequence[int], eps: float = 1e-5,
                 elementwise_affine: bool = True, *, dtype: Any = "float32"):
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.shape, self.eps = shape, eps
        self.weight = _param(np.ones(shape, dtype), "ln_w") if elementwise_affine else None
        self.bias = _param(np.zeros(shape, dtype), "ln_b") if elementwise_affine else None

    def forward(self, x: Any) -> Any:
        if tuple(x.shape[-len(self.shape):]) != self.shape:
            raise SrcgradError(f"LayerNorm{self.shape}: an input of shape {tuple(x.shape)} does "
                               f"not end in {self.shape}", loc=user_location())
        axes = tuple(range(-len(self.shape), 0))
        mean = ops.mean(x, axis=axes, keepdims=True)
        c = x - mean
        y = c * ops.rsqrt(ops.mean(c * c, axis=axes, keepdims=True) + self.eps)
        return y if self.weight is None else y * self.weight + self.bias


class EmbeddingIndexError(SrcgradError, IndexError):
    """An index outside [0, num_embeddings) of a concrete call of `Embedding`: an IndexError,
    as PyTorch's."""


class Embedding(Module):
    """Rows of `weight` (num_embeddings, embedding_dim), N(0, 1) as PyTorch's, by index.

    On concrete indices (imperative mode) an index outside [0, num_embeddings) is an
    `EmbeddingIndexError` (an IndexError, as PyTorch's; a negative index too). Under a trace
    (jax.jit, sg.jit) the indices have no values to check: an index past the end gives a row
    of NaN and a negative one counts from the end, as `jnp.take`'s default fill mode does."""

    def __init__(self, num_embeddings: int, embedding_dim: int, *, seed: int | None = None,
                 dtype: Any = "float32"):
        w = _rng(seed).standard_normal((num_embeddings, embedding_dim))
        self.weight = _param(w, "embedding", dtype)

    def forward(self, indices: Any) -> Any:
        idx = indices.value() if isinstance(indices, Tensor) else indices
        traced = isinstance(idx, Variable)  # (sg.jit, sg.grad: no values to check)
        if not traced and not isinstance(idx, jax.Array):
            idx = np.asarray(idx)  # (on the host: under a jax.jit, jnp.asarray is a tracer)
        if not jnp.issubdtype(idx.dtype, jnp.integer):
            raise SrcgradError(f"Embedding: indices must be integers, got {idx.dtype}",
                               loc=user_location())
        n = self.weight.shape[0]
        if not traced and not isinstance(idx, jax.core.Tracer) and idx.size:
            host = np.asarray(idx)
            lo, hi = host.min(), host.max()
            if lo < 0 or hi >= n:
                raise EmbeddingIndexError(f"Embedding: index {lo if lo < 0 else hi} is out of "
                                          f"range for {n} embeddings (valid: 0 to {n - 1})",
                                          loc=user_location())
        return ops.take(self.weight, idx if traced else tensor(idx), axis=0)


class Dropout(Module):
    """Zeroes each element with probability `p` and scales the rest by 1 / (1 - p) while
    training (a new jax.random mask per call, from `seed`); the identity in `eval()`."""

    def __init__(self, p: float = 0.5, *, seed: int | None = None):
        if not 0 <= p < 1:
            raise SrcgradError(f"Dropout: p must be in [0, 1), got {p}", loc=user_location())
        self.p = p
        self._key = _key(seed)

    def forward(self, x: Any) -> Any:
        if not self.training or self.p == 0:
            return x
        self._key, sub = jax.random.split(self._key)
        keep = jax.random.bernoulli(sub, 1 - self.p, tuple(x.shape))
        scale = np.asarray(1 / (1 - self.p), x.dtype)
        # a Tensor: an input of the tape, so a new mask each step changes no structure
        return x * tensor(jnp.where(keep, scale, jnp.zeros((), x.dtype)))


__all__ = ["Module", "Sequential", "Linear", "LayerNorm", "Embedding", "EmbeddingIndexError",
           "Dropout"]
