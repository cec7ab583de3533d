"""sg.from_jax: typed PRNG keys as arguments of srcgrad's transformations, and the readable
rows of the primitives that once ran as jax ops (nextafter, top_k, scatter with mul/min/max,
the total-order comparisons, lu_pivots_to_permutation, the random primitives and
pure_callback). Gradients against jax.grad and float64 finite differences."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import jax
import jax.extend.random
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

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
    for got in (
        sg.grad(sg.from_jax(_noisy))(params, key),
        jax.jit(sg.grad(sg.from_jax(_noisy)))(params, key),
        sg.value_and_grad(sg.from_jax(_noisy))(params, key)[1],
    ):
        for k in want:
            np.testing.assert_allclose(got[k], want[k], rtol=1e-12)
    pair = lambda p, ks: _noisy(p, ks[0]) + _noisy(p, ks[1])
    keys = (key, jax.random.key(4))
    np.testing.assert_allclose(
        sg.grad(sg.from_jax(pair))(params, keys)["w"], jax.grad(pair)(params, keys)["w"], rtol=1e-12
    )
    check_grads(lambda p: sg.from_jax(_noisy)(p, key), (params,), jax_fun=lambda p: _noisy(p, key))


def test_a_key_argument_reaches_jax_as_a_key() -> None:
    """Inside a srcgrad function the key is its uint32 data; the from_jax call gets the key,
    sg.random's functions use the data."""
    f = lambda x, key: jnp.sum(x * jax.random.uniform(key, x.shape))
    x, key = RNG.standard_normal(3), jax.random.key(5)
    g = sg.grad(lambda x, key: sg.from_jax(f)(x, key) * 2.0)(x, key)
    np.testing.assert_allclose(g, 2.0 * jax.grad(f)(x, key), rtol=1e-12)
    np.testing.assert_allclose(sg.from_jax(f)(x, key), f(x, key), rtol=1e-12)
    # srcgrad's own random functions take the key (its data) too
    h = lambda x, key: sg.sum(x * sg.random.normal(key, (3,)))
    np.testing.assert_allclose(sg.grad(h)(x, key), jax.random.normal(key, (3,)), rtol=1e-12)


def test_differentiating_a_key_is_a_clear_error() -> None:
    params = {"w": np.ones(4), "b": np.ones(4)}
    with pytest.raises(
        sg.SrcgradError,
        match=rf"argument 1 \('key'\) is a PRNG key: "
        rf"key<fry>\[\].*{HERE}:\d+",
    ):
        sg.grad(sg.from_jax(_noisy), argnums=1)(params, jax.random.key(0))
    with pytest.raises(sg.SrcgradError, match=rf"'key' is a PRNG key.*{HERE}:\d+"):
        sg.vjp(sg.from_jax(lambda key: jax.random.normal(key)), jax.random.key(0))


# ---------------------------------------------------------------- readable rows


def _jax_ops(fn: Any, *args: Any) -> list[str]:
    """The primitives of `fn`'s translation that run as jax ops (none: all readable rows)."""
    prog = sg.trace(fn, *args)
    return [op.attrs["fn"].name for b in prog.blocks for op in b.ops if op.type == "jax_op"]


LU_SOLVE = lambda x: jnp.sum(
    jax.scipy.linalg.lu_solve(jax.scipy.linalg.lu_factor(jnp.outer(x, x) + 4.0 * jnp.eye(3)), x)
)
INTERP = lambda x: jnp.sum(jnp.interp(x, jnp.arange(4.0), jnp.arange(4.0) ** 2))
RANDOM = lambda x: jnp.sum(
    jax.random.normal(jax.random.fold_in(jax.random.split(jax.random.key(3))[1], 7), x.shape) * x**2
)


def _top_k_axis0(x: jax.Array) -> jax.Array:
    if "axis" in inspect.signature(lax.top_k).parameters:  # (older JAX: the last axis only)
        return lax.top_k(x, 2, axis=0)[0]
    return lax.top_k(x.T, 2)[0].T


@pytest.mark.parametrize(
    "name,order,fn",
    [
        ("top_k", 2, lambda x: jnp.sum(jnp.sin(lax.top_k(x, 2)[0]) * jnp.arange(1.0, 3.0))),
        ("top_k_axis0", 1, lambda x: jnp.sum(jnp.sin(_top_k_axis0(jnp.outer(x, x[::-1] + 1.0))))),
        (
            "scatter_mul_min_max",
            2,
            lambda x: jnp.sum(
                jnp.asarray(x).at[1].multiply(x[0]).at[2].max(x[0] * 0.5).at[0].min(x[2]) ** 2
            ),
        ),
        (
            "scatter_max_min_arrays",
            1,
            lambda x: jnp.sum(
                jnp.sin(
                    jnp.asarray(x)
                    .at[jnp.array([0, 2])]
                    .max(x[1:] * 1.5)
                    .at[jnp.array([1, 1])]
                    .min(x[:2])
                )
            ),
        ),
    ],
)
def test_rows_give_jaxs_gradient(name: str, order: int, fn: Any) -> None:
    """Each of these once ran as a jax op; now its rows are srcgrad ops (readable source)
    whose gradients are JAX's (second order for the rows with gradients of their own)."""
    x = np.array([0.3, 1.7, 2.2])
    assert _jax_ops(sg.from_jax(fn), x) == []
    np.testing.assert_allclose(sg.from_jax(fn)(x), fn(x), rtol=1e-12)
    check_grads(sg.from_jax(fn), (x,), order=order, jax_fun=fn)


def test_rows_of_library_functions_are_readable() -> None:
    """lu_solve, interp and jax.random, whose primitives once ran as jax ops, translate to
    srcgrad rows, their gradients too (values and gradients against JAX: test_from_jax's
    table of these functions)."""
    x = np.array([0.3, 1.7, 2.2])
    for fn in (LU_SOLVE, INTERP, RANDOM):
        assert _jax_ops(sg.grad(sg.from_jax(fn)), x) == []


@pytest.mark.parametrize(
    "name,fn",
    [
        ("max_tie_with_operand", lambda x: jnp.sum(jnp.sin(x.at[0].max(x[1])))),
        (
            "max_tie_between_updates",
            lambda x: jnp.sum(
                jnp.sin(x.at[jnp.array([0, 0, 2])].max(jnp.stack([x[1], x[1], x[2]])))
            ),
        ),
        ("min_tie_all", lambda x: jnp.sum(jnp.cos(x.at[jnp.array([1, 1])].min(x[:2])))),
    ],
)
def test_scatter_min_max_ties_share_the_gradient_as_jax(name: str, fn: Any) -> None:
    x = jnp.array([1.0, 1.0, 2.2])
    np.testing.assert_allclose(sg.grad(sg.from_jax(fn))(x), jax.grad(fn)(x), rtol=1e-12)


def test_scatter_mul_with_repeated_indices_refuses_the_updates_gradient() -> None:
    """JAX: NotImplementedError; srcgrad: a GradientError at the user's line. The operand's
    gradient is still given."""
    f = lambda x, y: jnp.sum(x.at[jnp.array([0, 0])].multiply(y))
    x, y = np.array([0.5, 2.0]), np.array([3.0, 4.0])
    with pytest.raises(sg.GradientError, match=rf"unique indices.*{HERE}:\d+"):
        sg.grad(sg.from_jax(f), argnums=1)(x, y)
    np.testing.assert_allclose(sg.grad(sg.from_jax(f))(x, y), jax.grad(f)(x, y), rtol=1e-12)


def test_total_order_comparisons_match_lax() -> None:
    from jax._src.lax.lax import eq_to_p, le_to_p, lt_to_p

    special = [-np.nan, -np.inf, -1.0, -0.0, 0.0, 1.0, np.inf, np.nan]
    a = np.array([[u for u in special] for _ in special]).T.astype(np.float32)
    a[0] = -np.abs(a[0])  # -NaN: the sign bit set
    b = a.T.copy()
    for prim in (eq_to_p, le_to_p, lt_to_p):
        f = lambda x, y, p=prim: p.bind(x, y)
        assert _jax_ops(sg.from_jax(f), a, b) == []
        np.testing.assert_array_equal(sg.from_jax(f)(a, b), f(a, b))
        ints = np.arange(-3, 3)
        np.testing.assert_array_equal(sg.from_jax(f)(ints, ints[::-1]), f(ints, ints[::-1]))


def test_random_bit_primitives_match_jax_random() -> None:
    """random_seed/bits/split/fold_in and the bit operations that turn bits into floats, on
    keys and on arrays of keys (sliced, reshaped, broadcast), give jax.random's numbers."""
    f = lambda s: (
        jax.random.bits(jax.random.key(s), (4,), jnp.uint32),
        jax.random.uniform(
            jnp.reshape(
                jnp.transpose(
                    jnp.reshape(jax.random.split(jax.random.PRNGKey(s), 6), (2, 3, 2)), (1, 0, 2)
                ),
                (6, 2),
            )[4],
            (2,),
        ),
        jax.random.normal(
            jnp.concatenate(
                [jnp.broadcast_to(jax.random.key(s), (2,)), jax.random.split(jax.random.key(1))]
            )[3]
        ),
        jax.extend.random.threefry_2x32(
            (jnp.uint32(1), jnp.uint32(s)), jnp.arange(6, dtype=jnp.uint32)
        ),
    )
    assert _jax_ops(sg.from_jax(f), 5) == []
    for got, want in zip(sg.from_jax(f)(5), f(5)):
        np.testing.assert_array_equal(got, want)
    g = lambda x: (
        jnp.sum(((jnp.arange(5) ^ 3) | 8) >> 1)
        + jnp.sum((~jnp.arange(3)) * x)
        + jnp.sum(lax.shift_right_logical(jnp.arange(3, dtype=jnp.uint8) << 6, jnp.uint8(1)) * x)
    )
    assert _jax_ops(sg.from_jax(g), np.ones(3)) == []
    np.testing.assert_allclose(sg.from_jax(g)(np.arange(3.0)), g(np.arange(3.0)))


def test_nextafter_and_pure_callback_run_forward_and_refuse_gradients() -> None:
    """Readable rows (jnp.nextafter, jax.pure_callback in the source); JAX cannot
    differentiate either: the gradient is a GradientError at the user's line."""
    f = lambda x: jnp.nextafter(x, 5.0)
    cb = lambda x: jax.pure_callback(lambda v: np.sin(v), jax.ShapeDtypeStruct(x.shape, x.dtype), x)
    x = np.array([0.3, 1.7, 2.2])
    np.testing.assert_array_equal(sg.from_jax(f)(x), f(x))
    np.testing.assert_allclose(sg.from_jax(cb)(x), np.sin(x))
    assert "jnp.nextafter(" in sg.source(sg.from_jax(f), x)
    assert "jax.pure_callback(" in sg.source(sg.from_jax(cb), x)
    for fn, name in ((f, "nextafter"), (cb, "pure_callback")):
        with pytest.raises(sg.GradientError, match=rf"JAX cannot differentiate {name}.*{HERE}:\d+"):
            sg.grad(lambda v: sg.sum(sg.from_jax(fn)(v)))(x)
