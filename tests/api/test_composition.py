"""sg.grad & co. as ordinary JAX functions: jit, vmap, train steps, pytrees, caching, vjp."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import srcgrad as sg
from support.util import assert_tree_close, normal_arrays

RNG = np.random.default_rng(3)
arr = normal_arrays(RNG)


def loss(p: dict, x: Any, y: Any) -> Any:
    h = sg.tanh(x @ p["w1"] + p["b1"])
    return sg.mean((h @ p["w2"] - y) ** 2)


def loss_twin(p: dict, x: Any, y: Any) -> Any:
    h = jnp.tanh(x @ p["w1"] + p["b1"])
    return jnp.mean((h @ p["w2"] - y) ** 2)


def params() -> dict:
    return {"w1": arr(3, 4, scale=0.5), "b1": arr(4, scale=0.1), "w2": arr(4, 1, scale=0.5)}


def data(n: int = 8) -> tuple[np.ndarray, np.ndarray]:
    return arr(n, 3), arr(n, 1)


# ---------------------------------------------------------------- jit and vmap


def test_jax_jit_of_grad() -> None:
    p, (x, y) = params(), data()
    g = sg.grad(loss)
    assert_tree_close(jax.jit(g)(p, x, y), jax.grad(loss_twin)(p, x, y))


def test_vmap_of_grad_gives_per_example_gradients() -> None:
    p, (x, y) = params(), data()
    got = jax.vmap(sg.grad(loss), in_axes=(None, 0, 0))(p, x, y)
    want = jax.vmap(jax.grad(loss_twin), in_axes=(None, 0, 0))(p, x, y)
    assert got["w1"].shape == (8, 3, 4)
    assert_tree_close(got, want)


def test_jax_grad_of_sg_grad() -> None:
    """The emitted code is plain JAX, so JAX can differentiate it again."""
    x = arr(3)

    def f(x: Any) -> Any:
        return sg.sum(sg.sin(x) * x**2)

    def twin(x: Any) -> Any:
        return jnp.sum(jnp.sin(x) * x**2)

    got = jax.grad(lambda x: jnp.sum(sg.grad(f)(x) ** 2))(x)
    want = jax.grad(lambda x: jnp.sum(jax.grad(twin)(x) ** 2))(x)
    np.testing.assert_allclose(got, want, rtol=1e-10)


# ---------------------------------------------------------------- train steps


def test_jitted_sgd_train_step() -> None:
    p0, (x, y) = params(), data()
    vg = sg.value_and_grad(loss)

    @jax.jit
    def step(p: dict, x: Any, y: Any) -> tuple[dict, Any]:
        value, g = vg(p, x, y)
        return jax.tree_util.tree_map(lambda a, b: a - 0.1 * b, p, g), value

    @jax.jit
    def step_twin(p: dict, x: Any, y: Any) -> tuple[dict, Any]:
        value, g = jax.value_and_grad(loss_twin)(p, x, y)
        return jax.tree_util.tree_map(lambda a, b: a - 0.1 * b, p, g), value

    p, q, losses = p0, p0, []
    for _ in range(4):
        p, value = step(p, x, y)
        q, value_twin = step_twin(q, x, y)
        np.testing.assert_allclose(value, value_twin, rtol=1e-10)
        losses.append(float(value))
    assert_tree_close(p, q)
    assert losses[-1] < losses[0]
    assert vg.compilations == 1


def test_jitted_adam_train_step() -> None:
    optax = pytest.importorskip("optax")
    p0, (x, y) = params(), data()
    opt = optax.adam(1e-2)
    vg = sg.value_and_grad(loss)

    def make_step(value_and_grad: Any) -> Any:
        @jax.jit
        def step(p: dict, state: Any) -> tuple[dict, Any, Any]:
            value, g = value_and_grad(p, x, y)
            updates, state = opt.update(g, state, p)
            return optax.apply_updates(p, updates), state, value

        return step

    step, step_twin = make_step(vg), make_step(jax.value_and_grad(loss_twin))
    p, s = p0, opt.init(p0)
    q, t = p0, opt.init(p0)
    for _ in range(3):
        p, s, value = step(p, s)
        q, t, value_twin = step_twin(q, t)
        np.testing.assert_allclose(value, value_twin, rtol=1e-10)
    assert_tree_close(p, q, rtol=1e-8)


# ---------------------------------------------------------------- has_aux, argnums, pytrees


def loss_aux(p: dict, x: Any, y: Any) -> tuple[Any, dict]:
    h = sg.tanh(x @ p["w1"] + p["b1"])
    err = h @ p["w2"] - y
    return sg.mean(err**2), {"h": h, "max_err": sg.max(sg.abs(err))}


def loss_aux_twin(p: dict, x: Any, y: Any) -> tuple[Any, dict]:
    h = jnp.tanh(x @ p["w1"] + p["b1"])
    err = h @ p["w2"] - y
    return jnp.mean(err**2), {"h": h, "max_err": jnp.max(jnp.abs(err))}


def test_has_aux() -> None:
    p, (x, y) = params(), data()
    sg.trace(sg.value_and_grad(loss_aux, argnums=(0, 1), has_aux=True), p, x, y).verify()
    assert_tree_close(
        sg.grad(loss_aux, has_aux=True)(p, x, y), jax.grad(loss_aux_twin, has_aux=True)(p, x, y)
    )
    assert_tree_close(
        sg.value_and_grad(loss_aux, has_aux=True)(p, x, y),
        jax.value_and_grad(loss_aux_twin, has_aux=True)(p, x, y),
    )


@pytest.mark.parametrize("argnums", [0, 1, (0, 1), (1, 0), (0, 2)])
def test_argnums(argnums: Any) -> None:
    p, (x, y) = params(), data()
    got = sg.grad(loss, argnums=argnums)(p, x, y)
    want = jax.grad(loss_twin, argnums=argnums)(p, x, y)
    assert isinstance(got, tuple) == isinstance(argnums, tuple)
    assert_tree_close(got, want)


def test_keyword_arguments_are_not_differentiated() -> None:
    p, (x, y) = params(), data()
    assert_tree_close(sg.grad(loss)(p, x, y=y), jax.grad(loss_twin)(p, x, y=y))
    assert_tree_close(
        sg.value_and_grad(loss)(p, y=y, x=x), jax.value_and_grad(loss_twin)(p, y=y, x=x)
    )


def test_keyword_only_parameters() -> None:
    """Their defaults are used; passing one is a TypeError naming it, the way to bind it and
    the user's line (it said "pass them positionally", which a keyword-only parameter cannot
    be)."""

    def f(x: Any, *, k: float = 2.0) -> Any:
        return sg.sum(x * k)

    x = np.ones(2)
    np.testing.assert_allclose(sg.grad(f)(x), [2.0, 2.0])
    for transform in (sg.grad, sg.jit):
        with pytest.raises(
            TypeError,
            match=r"keyword-only parameters \['k'\] cannot be passed"
            r".*functools.partial\(f, k=...\).*\(at .*test_composition.py:\d+\)",
        ):
            transform(f)(x, k=3.0)
        with pytest.raises(TypeError, match=r"unexpected keyword argument 'q'.*test_composition"):
            transform(f)(x, q=3.0)


def test_argnums_out_of_range() -> None:
    with pytest.raises(sg.GradientError, match="argnums 3"):
        sg.grad(loss, argnums=3)(params(), *data())


def test_pytrees_in_and_out() -> None:
    """Nested dicts, lists and tuples keep their structure; unused leaves get zeros."""

    def f(tree: dict, scale: Any) -> Any:
        a, (b, _) = tree["pair"][0], tree["pair"][1]
        return sg.sum(sg.sin(a) * b) * scale + sg.mean(tree["nested"]["z"] ** 2)

    def twin(tree: dict, scale: Any) -> Any:
        a, (b, _) = tree["pair"][0], tree["pair"][1]
        return jnp.sum(jnp.sin(a) * b) * scale + jnp.mean(tree["nested"]["z"] ** 2)

    tree = {"pair": [arr(3), (arr(3), arr(2, 2))], "nested": {"z": arr(4)}}
    got = sg.grad(f, argnums=(0, 1))(tree, 1.5)
    assert_tree_close(got, jax.grad(twin, argnums=(0, 1))(tree, 1.5))
    np.testing.assert_array_equal(got[0]["pair"][1][1], np.zeros((2, 2)))


def test_vjp_matches_jax_vjp() -> None:
    p, (x, _) = params(), data(4)

    def f(p: dict, x: Any) -> dict:
        return {"h": sg.tanh(x @ p["w1"] + p["b1"]), "s": sg.sum(x * x)}

    def twin(p: dict, x: Any) -> dict:
        return {"h": jnp.tanh(x @ p["w1"] + p["b1"]), "s": jnp.sum(x * x)}

    out, pullback = sg.vjp(f, p, x)
    want_out, want_pullback = jax.vjp(twin, p, x)
    assert_tree_close(out, want_out)
    for _ in range(2):
        ct = {"h": arr(4, 4), "s": arr()}
        assert_tree_close(pullback(ct), want_pullback(ct))


# ---------------------------------------------------------------- caching


def test_compiled_once_per_signature() -> None:
    g = sg.grad(loss)
    p, (x, y) = params(), data()
    g(p, x, y)
    g(params(), *data())
    assert g.compilations == 1
    g(p, *data(5))
    assert g.compilations == 2
    g(p, x.astype(np.float32), y)
    assert g.compilations == 3
    g({**p, "extra": arr(2)}, x, y)
    assert g.compilations == 4
    g(p, *data(5))
    assert g.compilations == 4


def test_jax_jit_traces_the_gradient_once() -> None:
    g = sg.grad(loss)
    step = jax.jit(g)
    p, (x, y) = params(), data()
    step(p, x, y)
    step(params(), *data())
    assert g.compilations == 1


def test_inside_jax_jit_the_gradient_is_traced_inline() -> None:
    """Under an outer jax.jit the emitted function's ops join the caller's jaxpr, as
    jax.grad's would, rather than a nested jit call XLA has to compile and inline. Under
    vmap (or jax.grad) the nested jit stays, so that run eagerly the gradient is still one
    compiled program rather than op-by-op dispatch."""
    p, (x, y) = params(), data()
    jits = ("pjit", "jit")
    jaxpr = jax.make_jaxpr(lambda *a: sg.grad(loss)(*a))(p, x, y)
    assert not [e for e in jaxpr.eqns if e.primitive.name in jits]
    assert {"tanh", "dot_general"} <= {e.primitive.name for e in jaxpr.eqns}
    g = sg.grad(loss)
    batched = jax.make_jaxpr(jax.vmap(g, in_axes=(None, 0, 0)))(p, x[:, None], y[:, None])
    assert [e for e in batched.eqns if e.primitive.name in jits]
    assert_tree_close(
        jax.vmap(g, in_axes=(None, 0, 0))(p, x[:, None], y[:, None]),
        jax.vmap(jax.grad(loss_twin), in_axes=(None, 0, 0))(p, x[:, None], y[:, None]),
    )


# ---------------------------------------------------------------- NumPy operands


def test_numpy_arrays_on_the_left_of_traced_values() -> None:
    """np_array @ w, np_array - w, ...: NumPy defers to the traced value's reflected operators."""
    a, x = arr(2, 3), np.abs(arr(2, 3)) + 0.5

    def f(w: Any) -> Any:
        return sg.sum((a @ w.T) ** 2) + sg.sum(a - w) + sg.sum(a / w) + sg.sum(x**w)

    def twin(w: Any) -> Any:
        return jnp.sum((a @ w.T) ** 2) + jnp.sum(a - w) + jnp.sum(a / w) + jnp.sum(x**w)

    w = np.abs(arr(2, 3)) + 0.5
    np.testing.assert_allclose(sg.grad(f)(w), jax.grad(twin)(w), rtol=1e-10)


# ---------------------------------------------------------------- integer inputs


def test_grad_with_respect_to_an_integer_input_raises() -> None:
    def f(x: Any) -> Any:
        return sg.sum(x * 2.0)

    with pytest.raises(TypeError):
        jax.grad(lambda x: jnp.sum(x * 2.0))(np.arange(3))
    with pytest.raises(sg.GradientError, match="floating-point"):
        sg.grad(f)(np.arange(3))
    with pytest.raises(sg.GradientError, match="floating-point"):
        sg.grad(lambda x, n: f(x) * n, argnums=(0, 1))(arr(3), 2)


def test_integer_inputs_that_are_not_differentiated_are_fine() -> None:
    w, labels = arr(3, 4), RNG.integers(0, 4, size=5)
    x = arr(5, 3)

    def f(w: Any, labels: Any) -> Any:
        return -sg.mean(sg.sum(sg.log_softmax(x @ w) * sg.one_hot(labels, 4), axis=-1))

    def twin(w: Any, labels: Any) -> Any:
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(x @ w) * jax.nn.one_hot(labels, 4), axis=-1))

    np.testing.assert_allclose(sg.grad(f)(w, labels), jax.grad(twin)(w, labels), rtol=1e-10)
