"""Whole programs: srcgrad's gradients equal jax.grad's on the jax.numpy twin (dicts of params)."""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import srcgrad as sg
from support.util import assert_tree_close, normal_arrays
from srcgrad.testing import check_grads

RNG = np.random.default_rng(1)
arr = normal_arrays(RNG)


def check_program(f: Callable[..., Any], twin: Callable[..., Any], *args: Any) -> None:
    """Gradients w.r.t. every argument equal JAX's, and the transformed IR verifies."""
    argnums = tuple(range(len(args)))
    sg.trace(sg.grad(f, argnums), *args).verify()
    value, grads = sg.value_and_grad(f, argnums)(*args)
    want_value, want = jax.jit(jax.value_and_grad(twin, argnums))(*args)
    np.testing.assert_allclose(value, want_value, rtol=1e-12)
    assert_tree_close(grads, want)


# ---------------------------------------------------------------- MLP + softmax cross-entropy


def mlp(p: dict, x: Any, labels: Any) -> Any:
    h = sg.tanh(x @ p["w1"] + p["b1"])
    h = sg.relu(h @ p["w2"] + p["b2"])
    logits = h @ p["w3"] + p["b3"]
    return -sg.mean(sg.sum(sg.log_softmax(logits) * sg.one_hot(labels, 5), axis=-1))


def mlp_twin(p: dict, x: Any, labels: Any) -> Any:
    h = jnp.tanh(x @ p["w1"] + p["b1"])
    h = jax.nn.relu(h @ p["w2"] + p["b2"])
    logits = h @ p["w3"] + p["b3"]
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * jax.nn.one_hot(labels, 5), axis=-1))


def test_mlp_softmax_cross_entropy() -> None:
    p = {
        "w1": arr(6, 8, scale=0.5),
        "b1": arr(8, scale=0.1),
        "w2": arr(8, 8, scale=0.5),
        "b2": arr(8, scale=0.1),
        "w3": arr(8, 5, scale=0.5),
        "b3": arr(5, scale=0.1),
    }
    x, labels = arr(7, 6), RNG.integers(0, 5, size=7)
    sg.trace(sg.grad(mlp), p, x, labels).verify()
    value, grads = sg.value_and_grad(mlp)(p, x, labels)
    want_value, want = jax.jit(jax.value_and_grad(mlp_twin))(p, x, labels)
    np.testing.assert_allclose(value, want_value, rtol=1e-12)
    assert_tree_close(grads, want)


def test_softmax_cross_entropy_with_explicit_logsumexp() -> None:
    """The same loss spelled with softmax + log and with logsumexp."""

    def f(w: Any, x: Any, y: Any) -> Any:
        logits = x @ w
        a = -sg.mean(sg.sum(sg.log(sg.softmax(logits)) * y, axis=-1))
        b = sg.mean(sg.logsumexp(logits, axis=-1) - sg.sum(logits * y, axis=-1))
        return a + b

    def twin(w: Any, x: Any, y: Any) -> Any:
        logits = x @ w
        a = -jnp.mean(jnp.sum(jnp.log(jax.nn.softmax(logits)) * y, axis=-1))
        b = jnp.mean(jax.nn.logsumexp(logits, axis=-1) - jnp.sum(logits * y, axis=-1))
        return a + b

    check_program(f, twin, arr(4, 3), arr(5, 4), np.eye(3)[RNG.integers(0, 3, size=5)])


# ---------------------------------------------------------------- small CNN


def _conv(x: Any, k: Any, padding: str) -> Any:
    return lax.conv_general_dilated(
        x, k, (1, 1), padding, dimension_numbers=("NHWC", "HWIO", "NHWC")
    )


def cnn(p: dict, x: Any, y: Any) -> Any:
    h = sg.relu(sg.conv(x, p["k1"], padding="SAME") + p["b1"])
    h = sg.max_pool(h, (2, 2))
    h = sg.relu(sg.conv(h, p["k2"], padding="VALID"))
    h = sg.avg_pool(h, (2, 2), strides=(1, 1))
    h = sg.reshape(h, (h.shape[0], -1))
    return -sg.mean(sg.sum(sg.log_softmax(h @ p["w"]) * y, axis=-1))


def cnn_twin(p: dict, x: Any, y: Any) -> Any:
    h = jax.nn.relu(_conv(x, p["k1"], "SAME") + p["b1"])
    n, hh, ww, c = h.shape
    h = jnp.max(h.reshape(n, hh // 2, 2, ww // 2, 2, c), axis=(2, 4))
    h = jax.nn.relu(_conv(h, p["k2"], "VALID"))
    h = lax.reduce_window(h, 0.0, lax.add, (1, 2, 2, 1), (1, 1, 1, 1), "VALID") / 4.0
    h = h.reshape(h.shape[0], -1)
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(h @ p["w"]) * y, axis=-1))


def test_small_cnn() -> None:
    p = {
        "k1": arr(3, 3, 2, 4, scale=0.5),
        "b1": arr(4, scale=0.1),
        "k2": arr(2, 2, 4, 3, scale=0.5),
        "w": arr(12, 5, scale=0.5),
    }
    x, y = arr(2, 8, 8, 2), np.eye(5)[[1, 3]]
    sg.trace(sg.grad(cnn), p, x, y).verify()
    value, grads = sg.value_and_grad(cnn)(p, x, y)
    want_value, want = jax.jit(jax.value_and_grad(cnn_twin))(p, x, y)
    np.testing.assert_allclose(value, want_value, rtol=1e-12)
    assert_tree_close(grads, want)


def test_cnn_pooling_by_reshape_and_reduce_nchw() -> None:
    def f(k: Any, x: Any) -> Any:
        h = sg.tanh(sg.conv(x, k, padding="SAME", layout="NCHW"))
        n, c, hh, ww = h.shape
        h = sg.mean(sg.reshape(h, (n, c, hh // 2, 2, ww // 2, 2)), axis=(3, 5))
        return sg.sum(h * h)

    def twin(k: Any, x: Any) -> Any:
        h = jnp.tanh(
            lax.conv_general_dilated(
                x, k, (1, 1), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW")
            )
        )
        n, c, hh, ww = h.shape
        h = jnp.mean(h.reshape(n, c, hh // 2, 2, ww // 2, 2), axis=(3, 5))
        return jnp.sum(h * h)

    check_program(f, twin, arr(3, 2, 3, 3, scale=0.5), arr(2, 2, 6, 6))


# ---------------------------------------------------------------- attention


def attention(p: dict, x: Any) -> Any:
    t, d = x.shape[-2], p["wq"].shape[-1]
    q, k, v = x @ p["wq"], x @ p["wk"], x @ p["wv"]
    s = q @ sg.swapaxes(k, -1, -2) / np.sqrt(d)
    s = sg.where(np.tril(np.ones((t, t), bool)), s, -1e9)
    return sg.sum(sg.softmax(s, axis=-1) @ v @ p["wo"]) ** 2 / x.size


def attention_twin(p: dict, x: Any) -> Any:
    t, d = x.shape[-2], p["wq"].shape[-1]
    q, k, v = x @ p["wq"], x @ p["wk"], x @ p["wv"]
    s = q @ jnp.swapaxes(k, -1, -2) / np.sqrt(d)
    s = jnp.where(np.tril(np.ones((t, t), bool)), s, -1e9)
    return jnp.sum(jax.nn.softmax(s, axis=-1) @ v @ p["wo"]) ** 2 / x.size


def test_causal_attention_block() -> None:
    p = {k: arr(4, 4, scale=0.5) for k in ("wq", "wk", "wv", "wo")}
    x = arr(2, 5, 4)
    check_program(attention, attention_twin, p, x)


# ---------------------------------------------------------------- layer norm


def layer_norm(p: dict, x: Any) -> Any:
    mu = sg.mean(x, axis=-1, keepdims=True)
    var = sg.mean(sg.square(x - mu), axis=-1, keepdims=True)
    y = (x - mu) * sg.rsqrt(var + 1e-5) * p["g"] + p["b"]
    return sg.sum(sg.tanh(y) * np.arange(y.shape[-1]))


def layer_norm_twin(p: dict, x: Any) -> Any:
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mu), axis=-1, keepdims=True)
    y = (x - mu) * lax.rsqrt(var + 1e-5) * p["g"] + p["b"]
    return jnp.sum(jnp.tanh(y) * np.arange(y.shape[-1]))


def test_layer_norm() -> None:
    check_program(layer_norm, layer_norm_twin, {"g": arr(6), "b": arr(6)}, arr(3, 6))


def test_layer_norm_against_finite_differences() -> None:
    def f(x: Any, g: Any, b: Any) -> Any:
        return layer_norm({"g": g, "b": b}, x)

    check_grads(f, (arr(2, 5), arr(5), arr(5)), directions=2)


# ---------------------------------------------------------------- transformer block


def test_transformer_block() -> None:
    """Layer norm, causal attention, a residual and an MLP in one program."""

    def block(p: dict, x: Any) -> Any:
        mu = sg.mean(x, axis=-1, keepdims=True)
        h = (x - mu) / sg.sqrt(sg.mean((x - mu) ** 2, axis=-1, keepdims=True) + 1e-5)
        t = x.shape[0]
        s = (h @ p["wq"]) @ (h @ p["wk"]).T / 2.0
        a = sg.softmax(sg.where(np.tril(np.ones((t, t), bool)), s, -1e9), axis=-1)
        x = x + a @ (h @ p["wv"])
        return sg.mean(sg.tanh(x @ p["w1"]) @ p["w2"])

    def twin(p: dict, x: Any) -> Any:
        mu = jnp.mean(x, axis=-1, keepdims=True)
        h = (x - mu) / jnp.sqrt(jnp.mean((x - mu) ** 2, axis=-1, keepdims=True) + 1e-5)
        t = x.shape[0]
        s = (h @ p["wq"]) @ (h @ p["wk"]).T / 2.0
        a = jax.nn.softmax(jnp.where(np.tril(np.ones((t, t), bool)), s, -1e9), axis=-1)
        x = x + a @ (h @ p["wv"])
        return jnp.mean(jnp.tanh(x @ p["w1"]) @ p["w2"])

    p = {"wq": arr(4, 4), "wk": arr(4, 4), "wv": arr(4, 4), "w1": arr(4, 8), "w2": arr(8, 2)}
    check_program(block, twin, p, arr(6, 4))
