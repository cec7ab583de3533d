"""Workload 7: a Gaussian-process marginal-likelihood train step (sg.linalg).

loss = 0.5 y^T K^-1 y + log det L, K = exp(-|x_i - x_j|^2 / 2) + 0.1 I = L L^T, through
linalg.cholesky and linalg.solve_triangular; SGD on the inputs x and the targets' scale.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np

import srcgrad as sg

from .workload import Init, Pair, Workload, train_step_pair


def loss_sg(params: Any, y: Any) -> Any:
    x, scale = params
    sq = sg.sum(x * x, axis=1)
    d2 = sq[:, None] + sq[None, :] - 2.0 * (x @ x.T)
    k = sg.exp(-0.5 * d2) + np.float32(0.1) * np.eye(x.shape[0], dtype=np.float32)
    low = sg.linalg.cholesky(k)
    alpha = sg.linalg.solve_triangular(low, y * scale, lower=True)
    return 0.5 * sg.sum(alpha * alpha) + sg.sum(sg.log(sg.einsum("ii->i", low)))


def loss_jax(params: Any, y: Any) -> Any:
    x, scale = params
    sq = jnp.sum(x * x, axis=1)
    d2 = sq[:, None] + sq[None, :] - 2.0 * (x @ x.T)
    k = jnp.exp(-0.5 * d2) + np.float32(0.1) * np.eye(x.shape[0], dtype=np.float32)
    low = jnp.linalg.cholesky(k)
    alpha = jsl.solve_triangular(low, y * scale, lower=True)
    return 0.5 * jnp.sum(alpha * alpha) + jnp.sum(jnp.log(jnp.diagonal(low)))


def build(quick: bool) -> Workload:
    n, d = (256, 8) if not quick else (8, 2)
    init = Init(3)
    params = (init.normal(n, d), jnp.float32(1.0))
    args = (params, init.normal(n))
    return Workload(
        "gp",
        f"GP marginal likelihood step, {n} points in {d}-D (cholesky, solve_triangular)",
        args,
        train_step_pair(loss_sg, loss_jax),
        [Pair("srcgrad", "jax", {})],
    )
