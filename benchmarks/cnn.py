"""Workload 2: a small CNN train step (two 3x3 stride-2 convs + dense, 28x28x1 inputs)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

import srcgrad as sg

from .workload import STEP_TARGETS, Init, Pair, Workload, train_step_pair


def loss_sg(params: Any, x: Any, y: Any) -> Any:
    """srcgrad: conv-relu, conv-relu, dense, softmax cross-entropy (NHWC, HWIO kernels)."""
    (w1, b1), (w2, b2), (w3, b3) = params
    h = sg.relu(sg.conv(x, w1, strides=(2, 2), padding="SAME") + b1)
    h = sg.relu(sg.conv(h, w2, strides=(2, 2), padding="SAME") + b2)
    h = sg.reshape(h, (h.shape[0], -1))
    return -sg.mean(sg.sum(sg.log_softmax(h @ w3 + b3, axis=-1) * y, axis=-1))


def _conv(x: Any, w: Any) -> Any:
    return lax.conv_general_dilated(
        x, w, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
    )


def loss_jax(params: Any, x: Any, y: Any) -> Any:
    """The jax.numpy twin of `loss_sg`."""
    (w1, b1), (w2, b2), (w3, b3) = params
    h = jax.nn.relu(_conv(x, w1) + b1)
    h = jax.nn.relu(_conv(h, w2) + b2)
    h = jnp.reshape(h, (h.shape[0], -1))
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(h @ w3 + b3, axis=-1) * y, axis=-1))


def build(quick: bool) -> Workload:
    batch, side, c1, c2 = (64, 28, 32, 64) if not quick else (2, 8, 2, 3)
    init = Init(2)
    flat = (-(-side // 4)) ** 2 * c2
    params = [
        (init.normal(3, 3, 1, c1, scale=1 / 3), init.normal(c1, scale=0.0)),
        (init.normal(3, 3, c1, c2, scale=(9 * c1) ** -0.5), init.normal(c2, scale=0.0)),
        init.dense(flat, 10),
    ]
    args = (params, init.normal(batch, side, side, 1), init.one_hot(batch, 10))
    return Workload(
        "cnn",
        f"CNN train step, conv3x3/2 {c1}, conv3x3/2 {c2}, dense 10; batch {batch}, {side}x{side}x1",
        args,
        train_step_pair(loss_sg, loss_jax),
        [Pair("srcgrad", "jax", STEP_TARGETS)],
    )
