"""Workload 1: an MLP train step (784-512-512-10, tanh, softmax cross-entropy, SGD)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

import srcgrad as sg

from .workload import STEP_TARGETS, Init, Pair, Workload, train_step_pair


def loss_sg(params: Any, x: Any, y: Any) -> Any:
    """srcgrad: mean softmax cross-entropy of a tanh MLP."""
    h = x
    for w, b in params[:-1]:
        h = sg.tanh(h @ w + b)
    w, b = params[-1]
    return -sg.mean(sg.sum(sg.log_softmax(h @ w + b, axis=-1) * y, axis=-1))


def loss_jax(params: Any, x: Any, y: Any) -> Any:
    """The jax.numpy twin of `loss_sg`."""
    h = x
    for w, b in params[:-1]:
        h = jnp.tanh(h @ w + b)
    w, b = params[-1]
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(h @ w + b, axis=-1) * y, axis=-1))


def build(quick: bool) -> Workload:
    sizes, batch = ([784, 512, 512, 10], 256) if not quick else ([16, 8, 8, 4], 4)
    init = Init(1)
    params = [init.dense(a, b) for a, b in zip(sizes[:-1], sizes[1:])]
    args = (params, init.normal(batch, sizes[0]), init.one_hot(batch, sizes[-1]))
    return Workload(
        "mlp",
        f"MLP train step {'-'.join(map(str, sizes))}, batch {batch}",
        args,
        train_step_pair(loss_sg, loss_jax),
        [Pair("srcgrad", "jax", STEP_TARGETS)],
    )
