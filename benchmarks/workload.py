"""What a workload is: example arguments and the variants (srcgrad and peers) that run on them."""

from __future__ import annotations

import types
from dataclasses import dataclass, field
from typing import Any, Callable

import jax
import numpy as np

import srcgrad as sg

#: The learning rate of every SGD step.
LR = 0.01


@dataclass
class Variant:
    """One implementation of a workload.

    `make` builds a fresh callable from fresh function objects, so nothing of an earlier build
    (srcgrad's or JAX's caches keyed on the function) helps its first call. `memory` returns
    XLA's compiled memory analysis for it; by default the callable is a `jax.jit` function
    and is lowered on the workload's arguments.
    """

    name: str
    make: Callable[[], Callable[..., Any]]
    memory: Callable[[tuple], Any] | None = None

    def memory_analysis(self, args: tuple) -> Any:
        if self.memory is not None:
            return self.memory(args)
        return self.make().lower(*args).compile().memory_analysis()


#: The project's targets for a train step (workloads 1-4), as srcgrad/peer ratios.
STEP_TARGETS = {"step": 1.05, "first gradient": 1.0, "temp memory": 1.1}


@dataclass
class Pair:
    """A srcgrad variant and the peer it is compared with; `targets` maps figure → max ratio."""

    srcgrad: str
    peer: str
    targets: dict[str, float] = field(default_factory=dict)


@dataclass
class Workload:
    """A computation, its arguments, its variants and which pairs of them are compared."""

    name: str
    title: str
    args: tuple
    variants: list[Variant]
    pairs: list[Pair]
    rtol: float = 2e-3

    def variant(self, name: str) -> Variant:
        return next(v for v in self.variants if v.name == name)


def fresh(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A new function object with `fn`'s code: caches keyed on the function miss."""
    new = types.FunctionType(
        fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__
    )
    new.__kwdefaults__ = fn.__kwdefaults__
    return new


def sgd(params: Any, grads: Any) -> Any:
    return jax.tree_util.tree_map(lambda p, g: p - LR * g, params, grads)


def srcgrad_step(loss: Callable[..., Any]) -> Callable[..., Any]:
    """`jax.jit(step)`: value and gradient by srcgrad, then an SGD update."""
    value_and_grad = sg.value_and_grad(fresh(loss))

    def step(params: Any, *batch: Any) -> tuple[Any, Any]:
        value, grads = value_and_grad(params, *batch)
        return value, sgd(params, grads)

    return jax.jit(step)


def jax_step(loss: Callable[..., Any]) -> Callable[..., Any]:
    """`jax.jit(step)`: value and gradient by `jax.value_and_grad`, then an SGD update."""
    value_and_grad = jax.value_and_grad(fresh(loss))

    def step(params: Any, *batch: Any) -> tuple[Any, Any]:
        value, grads = value_and_grad(params, *batch)
        return value, sgd(params, grads)

    return jax.jit(step)


def train_step_pair(loss_sg: Callable[..., Any], loss_jax: Callable[..., Any]) -> list[Variant]:
    return [
        Variant("srcgrad", lambda: srcgrad_step(loss_sg)),
        Variant("jax", lambda: jax_step(loss_jax)),
    ]


class Init:
    """Deterministic float32 device arrays."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)

    def normal(self, *shape: int, scale: float = 1.0) -> jax.Array:
        return jax.device_put((self.rng.standard_normal(shape) * scale).astype(np.float32))

    def dense(self, n_in: int, n_out: int) -> tuple[jax.Array, jax.Array]:
        bias = jax.device_put(np.zeros(n_out, np.float32))
        return self.normal(n_in, n_out, scale=n_in**-0.5), bias

    def one_hot(self, n: int, classes: int) -> jax.Array:
        return jax.device_put(np.eye(classes, dtype=np.float32)[self.rng.integers(0, classes, n)])
