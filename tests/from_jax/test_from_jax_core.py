"""sg.from_jax on every JAX that pyproject.toml allows: the core translation table (elementwise
math, shapes, indexing, scatters, contractions, reductions, sort and top_k, linear algebra,
control flow, jax.random with typed keys), checked against jax.grad and float64 finite
differences. Cheap (three programs), so that CI runs it on the dependency floor too (.ci/run),
where primitive names and parameters differ (`stack`/`tile` are no primitives in jax 0.4.30,
`top_k` has no axis, dimension numbers have three lists, `custom_jvp_call` carries no name).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import srcgrad as sg

X = np.array([0.3, -1.7, 2.2, 0.9])


def _math(x: jax.Array) -> jax.Array:
    """Elementwise math, shapes, indexing, scatters, contractions and reductions."""
    m = jnp.outer(x, x[::-1]) * 0.3 + jnp.eye(4)
    y = jnp.tanh(x) * jnp.exp(-(x**2)) + jnp.log1p(x**2) + jnp.sqrt(x**2 + 1.0) ** 3
    y = y + jnp.where(x > 0, jnp.sin(x), jnp.cos(x)) + jnp.clip(x, -1.0, 1.0) + jnp.abs(x)
    z = jnp.stack([x, 2 * x], 1).reshape(-1)[::2] + jnp.tile(x[:2], 2) + jnp.pad(x, 1)[1:5]
    w = x[jnp.array([3, 0, 2, 1])] * jnp.take_along_axis(x, jnp.argsort(x), 0)
    s = jnp.asarray(x).at[1].add(x[0]).at[2].set(x[3] * 2).at[0].multiply(x[1]).at[3].max(0.5)
    u = (
        jnp.cumsum(x)
        + jnp.max(m, 0)
        + jnp.einsum("ij,j->i", m, x)
        + jnp.concatenate([x[:1], x[1:]])
    )
    return (
        jnp.sum(y * z)
        + jnp.sum(w * s)
        + jnp.sum(u**2)
        + jnp.prod(x[:2])
        + jax.nn.logsumexp(x)
        + jnp.sum(jax.nn.relu(x) + jax.nn.softplus(x))
    )


def _ordered(x: jax.Array) -> jax.Array:
    """Sorting and selection, linear algebra and jax.random (a typed key in the function)."""
    a = jnp.outer(x, x) * 0.1 + 3.0 * jnp.eye(4)
    noise = jax.random.normal(jax.random.split(jax.random.key(2))[1], x.shape)
    return (
        jnp.sum(jnp.sort(x) * jnp.arange(4.0))
        + jnp.sum(lax.top_k(x, 2)[0] ** 2)
        + jnp.sum(jnp.interp(x, jnp.arange(-2.0, 2.0), jnp.arange(4.0) ** 2))
        + jnp.sum(jnp.linalg.solve(a, x))
        + jnp.sum(jnp.linalg.cholesky(a))
        + jnp.sum(jax.scipy.linalg.lu_solve(jax.scipy.linalg.lu_factor(a), x))
        + jnp.sum(noise * x)
    )


def _flow(x: jax.Array) -> jax.Array:
    """scan, cond, fori_loop with static bounds and jax.checkpoint."""
    ys = lax.scan(lambda c, xi: (c * 0.5 + jnp.sin(xi), c * xi), 1.0, x)[1]
    c = lax.cond(x[0] > 0, lambda v: v * 2.0, lambda v: v - 1.0, x)
    f = lax.fori_loop(0, 3, lambda i, v: v * jnp.cos(x) + 0.1, x)
    r = jax.checkpoint(lambda v: jnp.sin(v) * v)(x)
    return jnp.sum(ys) + jnp.sum(c * f) + jnp.sum(r)


def test_the_core_table_matches_jax() -> None:
    """Values, gradients against jax.grad, and the gradient's directional derivative against
    central differences of the (float64) function."""
    v = np.random.default_rng(0).standard_normal(X.shape)
    for fn in (_math, _ordered, _flow):
        jf = jax.jit(fn)  # (one compilation, where op-by-op JAX compiles every primitive)
        np.testing.assert_allclose(sg.from_jax(fn)(X), jf(X), rtol=1e-12, err_msg=fn.__name__)
        g = sg.grad(sg.from_jax(fn))(X)
        np.testing.assert_allclose(g, jax.jit(jax.grad(fn))(X), rtol=1e-10, err_msg=fn.__name__)
        eps = 1e-6
        fd = (jf(X + eps * v) - jf(X - eps * v)) / (2 * eps)
        np.testing.assert_allclose(np.dot(g, v), fd, rtol=1e-6, err_msg=fn.__name__)


def test_a_while_loop_and_a_key_argument() -> None:
    """A data-dependent while loop (jax.grad refuses it: finite differences) and a typed key
    passed straight to sg.grad."""

    def cbrt(t: jax.Array) -> jax.Array:
        step = lambda c: (c[0] - (c[0] ** 3 - t) / (3 * c[0] ** 2), c[0])
        return lax.while_loop(
            lambda c: jnp.max(jnp.abs(c[0] - c[1])) > 1e-12,
            step,
            (jnp.ones_like(t), jnp.zeros_like(t)),
        )[0]

    t = np.array([2.0, 5.0])
    np.testing.assert_allclose(
        sg.grad(lambda v: sg.sum(sg.from_jax(cbrt)(v)))(t), t ** (-2 / 3) / 3, rtol=1e-9
    )
    f = lambda x, key: jnp.sum(x * jax.random.uniform(key, x.shape))
    key = jax.random.key(1)
    np.testing.assert_allclose(sg.grad(sg.from_jax(f))(X, key), jax.grad(f)(X, key), rtol=1e-12)
