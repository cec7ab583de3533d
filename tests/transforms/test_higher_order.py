"""Higher order: grad of grad, Hessian-vector products, gradient penalties, grad through a step."""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import srcgrad as sg
from support.util import assert_tree_close, normal_arrays

RNG = np.random.default_rng(2)
arr = normal_arrays(RNG)


# (srcgrad function, jax.numpy twin) pairs of scalar -> scalar functions
SCALAR_FUNS: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
    "sin_x2": (lambda x: sg.sin(x) * x**2, lambda x: jnp.sin(x) * x**2),
    "tanh_exp": (lambda x: sg.tanh(sg.exp(x) - 1.5), lambda x: jnp.tanh(jnp.exp(x) - 1.5)),
    "rational": (lambda x: x**3 / (1.0 + x * x), lambda x: x**3 / (1.0 + x * x)),
    "softplus_log": (
        lambda x: sg.log(1.0 + sg.exp(x)) * sg.sqrt(x * x + 1.0),
        lambda x: jnp.log(1.0 + jnp.exp(x)) * jnp.sqrt(x * x + 1.0),
    ),
    "sigmoid_pow": (lambda x: sg.sigmoid(x) ** 2.5, lambda x: jax.nn.sigmoid(x) ** 2.5),
}


@pytest.mark.parametrize("name", sorted(SCALAR_FUNS))
def test_grad_of_grad_of_scalar_function(name: str) -> None:
    f, twin = SCALAR_FUNS[name]
    d2 = sg.grad(sg.grad(f))
    for x in (0.7, -1.3):
        np.testing.assert_allclose(d2(x), jax.grad(jax.grad(twin))(x), rtol=1e-10)
    sg.trace(d2, 0.7).verify()


def test_third_derivative() -> None:
    f, twin = SCALAR_FUNS["sin_x2"]
    d3 = sg.grad(sg.grad(sg.grad(f)))
    np.testing.assert_allclose(d3(0.4), jax.grad(jax.grad(jax.grad(twin)))(0.4), rtol=1e-10)


def vec_f(x: Any) -> Any:
    return sg.sum(sg.tanh(x) ** 3) * sg.sum(sg.sin(x) * x)


def vec_twin(x: Any) -> Any:
    return jnp.sum(jnp.tanh(x) ** 3) * jnp.sum(jnp.sin(x) * x)


def hvp(f: Callable[[Any], Any]) -> sg.Transformed:
    """(x, v) -> H(x) v, as the gradient of <grad f(x), v>."""
    return sg.grad(lambda x, v: sg.sum(sg.grad(f)(x) * v))


def test_hessian_vector_product() -> None:
    x, v = arr(4), arr(4)
    want = jax.jvp(jax.grad(vec_twin), (x,), (v,))[1]
    np.testing.assert_allclose(hvp(vec_f)(x, v), want, rtol=1e-10)
    sg.trace(hvp(vec_f), x, v).verify()


def test_full_hessian_from_vmapped_hvp() -> None:
    x = arr(3)
    hessian = jax.vmap(hvp(vec_f), in_axes=(None, 0))(x, np.eye(3))
    np.testing.assert_allclose(hessian, jax.hessian(vec_twin)(x), rtol=1e-10, atol=1e-12)


def test_hvp_with_dict_params() -> None:
    x, y = arr(5, 3), arr(5)

    def loss(p: dict) -> Any:
        return sg.mean((sg.tanh(x @ p["w"] + p["b"]) - y) ** 2)

    def twin(p: dict) -> Any:
        return jnp.mean((jnp.tanh(x @ p["w"] + p["b"]) - y) ** 2)

    def grad_dot(p: dict, v: dict) -> Any:
        g = sg.grad(loss)(p)
        return sg.sum(g["w"] * v["w"]) + sg.sum(g["b"] * v["b"])

    p, v = {"w": arr(3), "b": arr()}, {"w": arr(3), "b": arr()}
    want = jax.jvp(jax.grad(twin), (p,), (v,))[1]
    assert_tree_close(sg.grad(grad_dot)(p, v), want)


# ---------------------------------------------------------------- gradient penalty


def critic(p: dict, x: Any) -> Any:
    return sg.sum(sg.tanh(sg.relu(x @ p["w1"] + p["b1"]) @ p["w2"]))


def critic_twin(p: dict, x: Any) -> Any:
    return jnp.sum(jnp.tanh(jax.nn.relu(x @ p["w1"] + p["b1"]) @ p["w2"]))


def penalized(p: dict, x: Any) -> Any:
    value, gx = sg.value_and_grad(critic, argnums=1)(p, x)
    norms = sg.sqrt(sg.sum(gx**2, axis=-1))
    return value + 10.0 * sg.mean((norms - 1.0) ** 2)


def penalized_twin(p: dict, x: Any) -> Any:
    value, gx = jax.value_and_grad(critic_twin, argnums=1)(p, x)
    norms = jnp.sqrt(jnp.sum(gx**2, axis=-1))
    return value + 10.0 * jnp.mean((norms - 1.0) ** 2)


def test_gradient_penalty() -> None:
    """The gradient of a loss that contains a value_and_grad (WGAN-GP)."""
    p = {"w1": arr(3, 6), "b1": arr(6, scale=0.1), "w2": arr(6, 2)}
    x = arr(4, 3)
    sg.trace(sg.grad(penalized, argnums=(0, 1)), p, x).verify()
    got = sg.value_and_grad(penalized, argnums=(0, 1))(p, x)
    want = jax.value_and_grad(penalized_twin, argnums=(0, 1))(p, x)
    assert_tree_close(got, want)


def test_grad_through_an_inner_gradient_step() -> None:
    """MAML: differentiate the loss after one SGD step taken with an inner sg.grad."""
    x, y = arr(5, 3), arr(5)

    def loss(p: dict) -> Any:
        return sg.mean((sg.tanh(x @ p["w"] + p["b"]) - y) ** 2)

    def twin(p: dict) -> Any:
        return jnp.mean((jnp.tanh(x @ p["w"] + p["b"]) - y) ** 2)

    def adapted(p: dict) -> Any:
        g = sg.grad(loss)(p)
        return loss(jax.tree_util.tree_map(lambda a, b: a - 0.3 * b, p, g))

    def adapted_twin(p: dict) -> Any:
        g = jax.grad(twin)(p)
        return twin(jax.tree_util.tree_map(lambda a, b: a - 0.3 * b, p, g))

    p = {"w": arr(3), "b": arr()}
    assert_tree_close(sg.grad(adapted)(p), jax.grad(adapted_twin)(p))


def test_grad_of_an_inline_vjp() -> None:
    def f(x: Any) -> Any:
        y, pullback = sg.vjp(lambda x: sg.sin(x) * x, x)
        (gx,) = pullback(sg.ones_like(y) * 2.0)
        return sg.sum(gx * gx)

    def twin(x: Any) -> Any:
        y, pullback = jax.vjp(lambda x: jnp.sin(x) * x, x)
        (gx,) = pullback(jnp.ones_like(y) * 2.0)
        return jnp.sum(gx * gx)

    x = arr(4)
    np.testing.assert_allclose(sg.grad(f)(x), jax.grad(twin)(x), rtol=1e-10)
