"""Layers for imperative mode, PyTorch's way: `Module`s whose parameters are collected
recursively from their attributes (re-exported as `sg.nn.Module`, `sg.nn.Linear`, ...).

    model = sg.nn.Sequential(sg.nn.Linear(4, 8, act="tanh"), sg.nn.Linear(8, 1))
    opt = sg.optim.Adam(model.parameters(), lr=1e-2)
    with sg.autograd.record():
        loss = sg.mean((model(x) - y) ** 2)
    loss.backward(); opt.step(); opt.zero_grad()

A Module's members are its attributes that are Tensors (its parameters) or Modules, the
Modules in its lists / tuples / dicts, and the Tensors in its `ParameterList` /
`ParameterDict`s, named as PyTorch names them ("0.weight", "blocks.1.norm.bias"). As in
PyTorch, a Tensor in a plain list is not a parameter (a list of states or masks); one that
requires grad there is an error naming `ParameterList`, so that no parameter goes untrained.
Layers compute with srcgrad ops, so a layer's call records onto the tape like any op on
Tensors.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ..core import dispatch
from ..ops import elementwise, indexing, reduce
from ..base.errors import SrcgradError, user_location
from ..core.declare import EXPORTS
from ..ir.program import Variable
from .devices import parse_to
from .functional import dropout_with
from .seeds import KeyStream, seeded_rng
from .tensor import Tensor, tensor, zeros_like


def new_parameter(value: Any, name: str, dtype: Any = None) -> Tensor:
    """A Tensor of `value` with `attach_grad()`: a layer's parameter."""
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

    def _direct(self, prefix: str = "") -> Iterator[tuple[str, Any]]:
        """This module's own member Tensors and Modules (those in its containers too), with
        their dotted names; a Tensor in a plain container comes as `_Stray` (not a member)."""

        def items(name: str, value: Any, registers: bool) -> Iterator[tuple[str, Any]]:
            if isinstance(value, Module):
                yield name, value
            elif isinstance(value, Tensor):
                yield name, value if registers else _Stray(value)
            elif isinstance(value, (list, tuple)):
                inner = isinstance(value, ParameterList)
                for i, v in enumerate(value):
                    yield from items(f"{name}.{i}", v, inner)
            elif isinstance(value, dict):
                inner = isinstance(value, ParameterDict)
                for k, v in value.items():
                    yield from items(f"{name}.{k}", v, inner)

        for name, value in self._members():
            yield from items(prefix + name, value, True)

    def _walk(self, prefix: str = "") -> Iterator[tuple[str, Any]]:
        """Every member Tensor and Module below this one, depth first, with its dotted name."""
        for full, v in self._direct(prefix):
            yield full, v
            if isinstance(v, Module):
                yield from v._walk(full + ".")

    def named_parameters(self) -> Iterator[tuple[str, Tensor]]:
        """(dotted name, Tensor) for each parameter, each Tensor once."""
        seen: set[int] = set()
        for name, v in self._walk():
            if isinstance(v, _Stray):
                if v.tensor.requires_grad:
                    raise SrcgradError(
                        f"{type(self).__name__}.{name} is a tensor that requires grad in a "
                        "plain list / tuple / dict, which is not a parameter (as in PyTorch): "
                        "hold such tensors in sg.nn.ParameterList([...]) or "
                        "sg.nn.ParameterDict({...}) so that they are trained and saved",
                        loc=user_location(),
                    )
            elif isinstance(v, Tensor) and id(v) not in seen:
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

    def named_modules(self) -> list[tuple[str, "Module"]]:
        """(dotted name, module) for this module ("") and every module below it."""
        return [("", self)] + [(n, v) for n, v in self._walk() if isinstance(v, Module)]

    def children(self) -> list["Module"]:
        """The modules directly below this one."""
        return [v for _, v in self._direct() if isinstance(v, Module)]

    def apply(self, fn: Callable[["Module"], Any]) -> "Module":
        """Call `fn` on every module below this one, then on this one (PyTorch's order: an
        initialiser over `model.apply(init_weights)`); returns this module."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    def to(self, *args: Any, **kwargs: Any) -> "Module":
        """PyTorch's `module.to(device)`, `.to(dtype)`, `.to(device, dtype)`: the parameters
        (and their `.grad`) moved to the JAX device and / or the floating ones cast, in place
        (the same Tensors, so an optimizer holding them keeps working); returns the module."""
        device, dtype = parse_to(args, dict(kwargs))
        for p in self.parameters():
            p.relocate(device, dtype)
        return self

    def cuda(self, device: int | None = None) -> "Module":
        """`to("cuda")` (`device` k: "cuda:k"): an error naming JAX's devices without a GPU."""
        return self.to("cuda" if device is None else f"cuda:{device}")

    def cpu(self) -> "Module":
        return self.to("cpu")

    def double(self) -> "Module":
        """The floating parameters cast to float64 (needs jax_enable_x64)."""
        return self.to(np.float64)

    def float(self) -> "Module":
        return self.to(np.float32)

    def half(self) -> "Module":
        return self.to(np.float16)

    def bfloat16(self) -> "Module":
        return self.to(jnp.bfloat16)

    def zero_grad(self) -> None:
        """Set the parameters' `.grad` to zeros."""
        for p in self.parameters():
            if p.grad is not None:
                p.grad = Tensor(zeros_like(p.value()))

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
            raise SrcgradError(
                f"load_state_dict: missing {missing}, unexpected {unexpected} "
                f"for {type(self).__name__}",
                loc=user_location(),
            )
        for name, p in params.items():
            if name in state:
                value = np.asarray(state[name])
                if value.shape != p.shape:
                    raise SrcgradError(
                        f"load_state_dict: {name} has shape {value.shape} in the "
                        f"state, {p.shape} in the module",
                        loc=user_location(),
                    )
                p.assign(value)

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={tuple(p.shape)}" for n, p in self.named_parameters())
        return f"{type(self).__name__}({inner})"


class _Stray:
    """A Tensor found in a plain container of a Module: not one of its parameters."""

    __slots__ = ("tensor",)

    def __init__(self, tensor: Tensor):
        self.tensor = tensor


class ParameterList(list):
    """A list whose Tensors are parameters of the Module holding it (PyTorch's
    `nn.ParameterList`; a plain list's Tensors are not)."""


class ParameterDict(dict):
    """A dict whose Tensors are parameters of the Module holding it (PyTorch's
    `nn.ParameterDict`)."""


class ModuleList(list):
    """PyTorch's `nn.ModuleList`: a list of Modules (a plain list of Modules registers them
    too)."""


class ModuleDict(dict):
    """PyTorch's `nn.ModuleDict`: a dict of Modules (as a plain dict)."""


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
    """`act(x @ weight.T + bias)`: `weight` is (out_dim, in_dim) as PyTorch's `nn.Linear`
    (and MXNet's and DyNet's) stores it, so a PyTorch `state_dict` loads as it is;
    LeCun-normal; `bias` zeros; both attached.

    `act` is None, the name of an activation in `sg.nn` ("relu", "tanh", ...) or a function
    of one Tensor. `seed` fixes the initial weights (default: a new seed per layer).
    """

    def __init__(
        self,
        in_dim: int,
        out_dim: int,
        act: str | Callable[[Any], Any] | None = None,
        *,
        seed: int | None = None,
        dtype: Any = "float32",
        name: str = "linear",
        bias: bool = True,
    ):
        acts = activations()
        if isinstance(act, str):
            if act not in acts:
                raise SrcgradError(
                    f"sg.nn.Linear: unknown activation {act!r}; use one of "
                    f"{sorted(acts)}, a function or None",
                    loc=user_location(),
                )
            act = acts[act]
        elif act is not None and not callable(act):
            raise SrcgradError(
                f"sg.nn.Linear: act must be None, a name or a function, got {type(act).__name__}",
                loc=user_location(),
            )
        w = seeded_rng(seed).standard_normal((out_dim, in_dim)) / np.sqrt(in_dim)
        self.weight = new_parameter(w, f"{name}_w", dtype)
        self.bias = new_parameter(np.zeros((out_dim,), dtype), f"{name}_b") if bias else None
        self.act = act
        self._fused = act is None or act in acts.values()

    def forward(self, x: Any) -> Tensor:
        fused = self.act if self._fused else None
        y = dispatch.call(_dense, (x, self.weight, self.bias, fused), {})
        return y if self._fused else self.act(y)


def _dense(x: Any, w: Any, b: Any, act: Callable[[Any], Any] | None) -> Any:
    """`act(x @ w.T + b)` as one eager call: one jitted program computes it (XLA folds the
    transpose into the product), and a recording keeps only its result (its grad reads the
    result, `x` and `w`; never `x @ w.T`)."""
    y = x @ w.T if b is None else x @ w.T + b
    return act(y) if act is not None else y


# ---------------------------------------------------------------- normalisation, lookup, dropout


class LayerNorm(Module):
    """`(x - mean) / sqrt(var + eps) * weight + bias` over the last `len(shape)` axes
    (biased variance, as PyTorch's)."""

    def __init__(
        self,
        normalized_shape: int | Sequence[int],
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        *,
        dtype: Any = "float32",
    ):
        shape = (
            (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        )
        self.shape, self.eps = shape, eps
        self.weight = new_parameter(np.ones(shape, dtype), "ln_w") if elementwise_affine else None
        self.bias = new_parameter(np.zeros(shape, dtype), "ln_b") if elementwise_affine else None

    def forward(self, x: Any) -> Any:
        if tuple(x.shape[-len(self.shape) :]) != self.shape:
            raise SrcgradError(
                f"LayerNorm{self.shape}: an input of shape {tuple(x.shape)} does "
                f"not end in {self.shape}",
                loc=user_location(),
            )
        axes = tuple(range(-len(self.shape), 0))
        mean = reduce.mean(x, axis=axes, keepdims=True)
        c = x - mean
        y = c * elementwise.rsqrt(reduce.mean(c * c, axis=axes, keepdims=True) + self.eps)
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

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        *,
        seed: int | None = None,
        dtype: Any = "float32",
    ):
        w = seeded_rng(seed).standard_normal((num_embeddings, embedding_dim))
        self.weight = new_parameter(w, "embedding", dtype)

    def forward(self, indices: Any) -> Any:
        idx = indices.value() if isinstance(indices, Tensor) else indices
        traced = isinstance(idx, Variable)  # (sg.jit, sg.grad: no values to check)
        if not traced and not isinstance(idx, jax.Array):
            idx = np.asarray(idx)  # (on the host: under a jax.jit, jnp.asarray is a tracer)
        if not jnp.issubdtype(idx.dtype, jnp.integer):
            raise SrcgradError(
                f"Embedding: indices must be integers, got {idx.dtype}", loc=user_location()
            )
        n = self.weight.shape[0]
        if not traced and not isinstance(idx, jax.core.Tracer) and idx.size:
            host = np.asarray(idx)
            lo, hi = host.min(), host.max()
            if lo < 0 or hi >= n:
                raise EmbeddingIndexError(
                    f"Embedding: index {lo if lo < 0 else hi} is out of "
                    f"range for {n} embeddings (valid: 0 to {n - 1})",
                    loc=user_location(),
                )
        return indexing.take(self.weight, idx if traced else tensor(idx), axis=0)


class Dropout(Module):
    """Zeroes each element with probability `p` and scales the rest by 1 / (1 - p) while
    training (a new jax.random mask per call, from `seed`); the identity in `eval()`."""

    def __init__(self, p: float = 0.5, inplace: bool = False, *, seed: int | None = None):
        if not 0 <= p <= 1:
            raise SrcgradError(f"Dropout: p must be in [0, 1], got {p}", loc=user_location())
        self.p = p
        self._keys = KeyStream(seed)

    def forward(self, x: Any) -> Any:
        if not self.training or self.p == 0:
            return x
        return dropout_with(self._keys.next(), x, self.p, True)


__all__ = [
    "Module",
    "Sequential",
    "ModuleList",
    "ModuleDict",
    "ParameterList",
    "ParameterDict",
    "Linear",
    "LayerNorm",
    "Embedding",
    "EmbeddingIndexError",
    "Dropout",
]
