"""Train a small MLP on synthetic data: a jax.jit-compiled SGD step around sg.value_and_grad.

python examples/train_mlp.py
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

import srcgrad as sg


def init_params(rng: np.random.Generator, sizes: tuple[int, ...]) -> dict[str, np.ndarray]:
    params = {}
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        params[f"w{i}"] = (rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(np.float32)
        params[f"b{i}"] = np.zeros(n_out, np.float32)
    return params


def loss_fn(params: dict, x: Any, y: Any) -> Any:
    """Mean squared error of a tanh MLP; written with srcgrad ops."""
    n_layers = len(params) // 2
    h = x
    for i in range(n_layers):
        h = h @ params[f"w{i}"] + params[f"b{i}"]
        if i < n_layers - 1:
            h = sg.tanh(h)
    return sg.mean((h - y) ** 2)


loss_and_grad = sg.value_and_grad(loss_fn)


@jax.jit
def train_step(params: dict, x: jax.Array, y: jax.Array, lr: float) -> tuple[dict, jax.Array]:
    """One SGD step; srcgrad's gradient runs inside this jax.jit like any JAX function."""
    loss, grads = loss_and_grad(params, x, y)
    return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), loss


def main() -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, (256, 2)).astype(np.float32)
    y = (np.sin(x[:, :1]) * np.cos(x[:, 1:])).astype(np.float32)
    params = init_params(rng, (2, 32, 32, 1))
    for step in range(201):
        params, loss = train_step(params, x, y, 0.1)
        if step % 25 == 0:
            print(f"step {step:3d}  loss {float(loss):.5f}")
    print(f"compiled srcgrad programs: {loss_and_grad.compilations}")


if __name__ == "__main__":
    main()
