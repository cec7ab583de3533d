"""Workload 3: one pre-norm transformer block (causal self-attention + GELU MLP)."""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import srcgrad as sg

from .workload import STEP_TARGETS, Init, Pair, Workload, train_step_pair

EPS = 1e-5
GELU_C = math.sqrt(2 / math.pi)


def _layer_norm_sg(x: Any, g: Any, b: Any) -> Any:
    xc = x - sg.mean(x, axis=-1, keepdims=True)
    return xc * sg.rsqrt(sg.mean(xc * xc, axis=-1, keepdims=True) + EPS) * g + b


def _gelu_sg(x: Any) -> Any:
    return 0.5 * x * (1.0 + sg.tanh(GELU_C * (x + 0.044715 * (x * x * x))))


def block_sg(p: dict, x: Any, heads: int) -> Any:
    """srcgrad: x + attn(ln(x)), then + mlp(ln(.)); causal mask, `heads` heads."""
    b, t, c = x.shape
    d = c // heads

    def split(v: Any) -> Any:
        return sg.transpose(sg.reshape(v, (b, t, heads, d)), (0, 2, 1, 3))

    h = _layer_norm_sg(x, p["ln1_g"], p["ln1_b"])
    q, k, v = split(h @ p["wq"]), split(h @ p["wk"]), split(h @ p["wv"])
    s = (q @ sg.swapaxes(k, -1, -2)) * (1.0 / math.sqrt(d))
    s = sg.where(np.tril(np.ones((t, t), bool)), s, -1e9)
    a = sg.reshape(sg.transpose(sg.softmax(s, axis=-1) @ v, (0, 2, 1, 3)), (b, t, c))
    x = x + a @ p["wo"]
    h = _layer_norm_sg(x, p["ln2_g"], p["ln2_b"])
    return x + _gelu_sg(h @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]


def _layer_norm_jax(x: Any, g: Any, b: Any) -> Any:
    xc = x - jnp.mean(x, axis=-1, keepdims=True)
    return xc * lax.rsqrt(jnp.mean(xc * xc, axis=-1, keepdims=True) + EPS) * g + b


def _gelu_jax(x: Any) -> Any:
    return 0.5 * x * (1.0 + jnp.tanh(GELU_C * (x + 0.044715 * (x * x * x))))


def block_jax(p: dict, x: Any, heads: int) -> Any:
    """The jax.numpy twin of `block_sg`."""
    b, t, c = x.shape
    d = c // heads

    def split(v: Any) -> Any:
        return jnp.transpose(jnp.reshape(v, (b, t, heads, d)), (0, 2, 1, 3))

    h = _layer_norm_jax(x, p["ln1_g"], p["ln1_b"])
    q, k, v = split(h @ p["wq"]), split(h @ p["wk"]), split(h @ p["wv"])
    s = (q @ jnp.swapaxes(k, -1, -2)) * (1.0 / math.sqrt(d))
    s = jnp.where(np.tril(np.ones((t, t), bool)), s, -1e9)
    a = jnp.reshape(jnp.transpose(jax.nn.softmax(s, axis=-1) @ v, (0, 2, 1, 3)), (b, t, c))
    x = x + a @ p["wo"]
    h = _layer_norm_jax(x, p["ln2_g"], p["ln2_b"])
    return x + _gelu_jax(h @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]


def loss_sg(p: dict, x: Any, target: Any) -> Any:
    return sg.mean(sg.square(block_sg(p, x, 4) - target))


def loss_jax(p: dict, x: Any, target: Any) -> Any:
    return jnp.mean(jnp.square(block_jax(p, x, 4) - target))


def build(quick: bool) -> Workload:
    batch, seq, width = (8, 128, 256) if not quick else (2, 8, 8)
    init = Init(3)
    p = {
        "ln1_g": init.normal(width, scale=0.0) + 1,
        "ln1_b": init.normal(width, scale=0.0),
        "ln2_g": init.normal(width, scale=0.0) + 1,
        "ln2_b": init.normal(width, scale=0.0),
    }
    for name in ("wq", "wk", "wv", "wo"):
        p[name] = init.dense(width, width)[0]
    p["w1"], p["b1"] = init.dense(width, 4 * width)
    p["w2"], p["b2"] = init.dense(4 * width, width)
    args = (p, init.normal(batch, seq, width), init.normal(batch, seq, width))
    return Workload(
        "transformer",
        f"transformer block, batch {batch}, sequence {seq}, width "
        f"{width}, 4 heads, MLP {4 * width}",
        args,
        train_step_pair(loss_sg, loss_jax),
        [Pair("srcgrad", "jax", STEP_TARGETS)],
    )
