"""sg.from_jax: typed PRNG keys as arguments of srcgrad's transformations, and the readable
rows of the primitives that once ran as jax ops (nextafter, top_k, scatter with mul/min/max,
the total-order comparisons, lu_pivots_to_permutation, the random primitives and
pure_callback). Gradients against jax.grad and float64 finite differences."""
from __future__ import annotations

import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import srcgrad as sg
from srcgrad.testing import check_grads

RNG = np.random.default_rng(24)
HERE = re.escape(Path(__file__).name)


def _noisy(params: dict, key: jax.Array) -> jax.Array:
    noise = jax.random.normal(jax.random.fold_in(key, 1), params["w"].shape)
    return jnp.sum(jnp.tanh(params["w"] + noise) * params["b"])


def test_a_typed_key_argument_takes_no_gradient() -> None:
    """sg.grad(sg.from_jax(f))(params, key): the key is not differentiated (argnums=0), as
    under jax.grad; the same under jax.jit, with the key in a pytree, and for value_and_grad."""
    params = {"w": RNG.standard_normal(4), "b": RNG.standard_normal(4)}
    key = jax.random.key(3)
    want = jax.grad(_noisy)(params, key)
    for got in (sg.grad(sg.from_jax(_noisy))(params, key),
                jax.jit(sg.grad(sg.from_jax(_noisy)))(params, key),
                sg.value_and_grad(sg.from_jax(_noisy))(params, key)[1]):
        for k in want:
            np.testing.assert_allclose(got[k], want[k], rtol=1e-12)
    pair = lambda p, ks: _noisy(p, ks[0]) + _noisy(p, ks[1])
    keys = (key, jax.random.key(4))
    np.testing.assert_allclose(sg.grad(sg.from_jax(pair))(params, keys)["w"],
                               jax.grad(pair)(params, keys)["w"], rtol=1e-12)
    check_grads(lambda p: sg.from_jax(_noisy)(p, key), (params,), jax_fun=lambda p: _noisy(p, key))


def test_a_key_argument_reaches_jax_as_a_key() -> None:
    """Inside a srcgrad function the key is its uint32 data; the from_jax call gets the key."""
    f = lambda x, key: jnp.sum(x * jax.random.uniform(key, x.shape))
    x, key = RNG.standard_normal(3), jax.random.key(5)
    g = sg.grad(lambda x, key: sg.from_jax(f)(x, key) * 2.0)(x, key)
    np.testing.assert_allclose(g, 2.0 * jax.grad(f)(x, key), rtol=1e-12)
    np.testing.assert_allclose(sg.from_jax(f)(x, key), f(x, key), rtol=1e-12)


def test_differentiating_a_key_is_a_clear_error() -> None:
    params = {"w": np.ones(4), "b": np.ones(4)}
    with pytest.raises(sg.SrcgradError, match=rf"argument 1 \('key'\) is a PRNG key: "
                       rf"key<fry>\[\].*{HERE}:\d+"):
        sg.grad(sg.from_jax(_noisy), argnums=1)(params, jax.random.key(0))
    with pytest.raises(sg.SrcgradError, match=rf"'key' is a PRNG key.*{HERE}:\d+"):
        sg.vjp(sg.from_jax(lambda key: jax.random.normal(key)), jax.random.key(0))
