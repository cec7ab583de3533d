"""Workload 4: a tanh RNN over 200 steps (sg.fori_loop vs lax.scan), squared-error loss."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np
from jax import lax

import srcgrad as sg

from .workload import STEP_TARGETS, Init, Pair, Workload, train_step_pair


def loss_sg(p: dict, xs: Any, y: Any) -> Any:
    """srcgrad: h_{t+1} = tanh(x_t Wx + h_t Wh + b) by sg.fori_loop; loss on the last state."""
    steps, batch, _ = xs.shape

    def body(t: Any, h: Any) -> Any:
        return sg.tanh(xs[t] @ p["wx"] + h @ p["wh"] + p["b"])

    h = sg.fori_loop(0, steps, body, sg.zeros((batch, p["wh"].shape[0]), np.float32))
    return sg.mean(sg.square(h @ p["wo"] - y))


def loss_jax(p: dict, xs: Any, y: Any) -> Any:
    """The jax.numpy twin of `loss_sg`, with lax.scan."""

    def step(h: Any, x: Any) -> tuple[Any, None]:
        return jnp.tanh(x @ p["wx"] + h @ p["wh"] + p["b"]), None

    h, _ = lax.scan(step, jnp.zeros((xs.shape[1], p["wh"].shape[0]), np.float32), xs)
    return jnp.mean(jnp.square(h @ p["wo"] - y))


def build(quick: bool) -> Workload:
    steps, batch, n_in, hidden = (200, 32, 64, 256) if not quick else (5, 2, 3, 4)
    init = Init(4)
    p = {
        "wx": init.dense(n_in, hidden)[0],
        "wh": init.normal(hidden, hidden, scale=0.9 * hidden**-0.5),
        "b": init.dense(hidden, hidden)[1],
        "wo": init.dense(hidden, 8)[0],
    }
    args = (p, init.normal(steps, batch, n_in), init.normal(batch, 8))
    return Workload(
        "rnn",
        f"RNN {steps} steps, hidden {hidden}, input {n_in}, batch {batch}",
        args,
        train_step_pair(loss_sg, loss_jax),
        [Pair("srcgrad", "jax", STEP_TARGETS)],
    )
