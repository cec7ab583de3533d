"""sg.jax_op: a JAX function as one op, differentiated by JAX's rules (its custom rules
included), to any order, in both modes, inside loops; its residuals are op outputs, so the
gradient does not run the forward again."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import srcgrad as sg
from srcgrad.testing import check_grads


def arr(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1.0, 1.0, shape)


def model(x: jax.Array, p: dict) -> dict:
    return {"a": jnp.sin(x) * p["w"], "b": jnp.sum(jnp.exp(x * p["v"]))}


OP = sg.jax_op(model)


def ours(x: Any, p: Any) -> Any:
    out = OP(x, p)
    return sg.sum(out["a"] ** 2) + out["b"]


def theirs(x: Any, p: Any) -> Any:
    out = model(x, p)
    return jnp.sum(out["a"] ** 2) + out["b"]


P = {"w": arr(3, seed=1), "v": np.array(0.3)}


def test_pytrees_forward_and_gradient() -> None:
    x = arr(3)
    out = OP(x, P)
    np.testing.assert_allclose(out["a"], model(x, P)["a"], rtol=1e-14)
    got = sg.grad(ours, argnums=(0, 1))(x, P)
    want = jax.grad(theirs, argnums=(0, 1))(x, P)
    jax.tree_util.tree_map(lambda g, w: np.testing.assert_allclose(g, w, rtol=1e-12), got, want)


def test_second_order_forward_mode_and_hessian() -> None:
    x = arr(3)
    check_grads(lambda v: ours(v, P), (x,), order=2, jax_fun=lambda v: theirs(v, P))
    t = arr(3, seed=2)
    np.testing.assert_allclose(
        sg.jvp(lambda v: ours(v, P), (x,), (t,))[1],
        jax.jvp(lambda v: theirs(v, P), (x,), (t,))[1],
        rtol=1e-12,
    )
    np.testing.assert_allclose(
        sg.hessian(lambda v: ours(v, P))(x),
        jax.hessian(lambda v: theirs(v, P))(x),
        rtol=1e-10,
        atol=1e-12,
    )


def test_the_gradient_replays_the_residuals() -> None:
    """The grad op reads the forward op's residual outputs, not its inputs: no recompute."""
    prog = sg.trace(sg.grad(lambda v: ours(v, P)), arr(3))
    ops = [op for op in prog.global_block().ops if op.type == "jax_op"]
    fwd, bwd = ops[0], ops[-1]
    assert repr(fwd.attrs["fn"]) == "model" and repr(bwd.attrs["fn"]) == "vjp[model]"
    assert set(bwd.inputs) & set(fwd.outputs[2:])
    assert not set(bwd.inputs) & set(fwd.inputs)


def test_a_users_custom_vjp_is_honoured() -> None:
    """The rule clips the gradient: srcgrad gives what jax.grad gives, not the derivative."""

    @jax.custom_vjp
    def clip_grad(x: jax.Array) -> jax.Array:
        return x * 3.0

    clip_grad.defvjp(lambda x: (x * 3.0, None), lambda _, g: (jnp.clip(g, -1.0, 1.0),))
    x = arr(4)
    got = sg.grad(lambda v: sg.sum(sg.jax_op(clip_grad)(v) * 2.0))(x)
    np.testing.assert_allclose(got, np.ones(4))


def test_in_a_while_loop_gradient() -> None:
    step = sg.jax_op(lambda y, w: jnp.tanh(w * y) * 1.1)

    def loop(y: Any, w: Any) -> Any:
        def body(c: tuple) -> tuple:
            return c[0] + 1, step(c[1], w)

        return sg.sum(sg.while_loop(lambda c: c[0] < 4, body, (0, y))[1])

    def ref(y: Any, w: Any) -> Any:
        for _ in range(4):
            y = jnp.tanh(w * y) * 1.1
        return jnp.sum(y)

    y, w = arr(3), arr(3, seed=3)
    got = sg.grad(loop, argnums=(0, 1))(y, w)
    want = jax.grad(ref, argnums=(0, 1))(y, w)
    for g, v in zip(got, want):
        np.testing.assert_allclose(g, v, rtol=1e-12)


def test_jax_while_loop_inside_forward_only() -> None:
    """JAX cannot reverse its own while_loop: the op runs forward; its gradient is JAX's error."""

    def newton(t: jax.Array) -> jax.Array:
        return lax.while_loop(
            lambda y: jnp.max(jnp.abs(y * y - t)) > 1e-12, lambda y: 0.5 * (y + t / y), t
        )

    op = sg.jax_op(newton)
    t = np.array([2.0, 9.0])
    np.testing.assert_allclose(op(t), np.sqrt(t), rtol=1e-12)
    np.testing.assert_allclose(sg.jvp(op, (t,), (np.ones(2),))[1], 0.5 / np.sqrt(t), rtol=1e-10)
    with pytest.raises(sg.GradientError, match="JAX cannot differentiate newton"):
        sg.grad(lambda v: sg.sum(op(v)))(t)


def test_integer_arguments_and_outputs() -> None:
    op = sg.jax_op(lambda x, k: (x * k, jnp.argmax(x)))
    x, k = arr(3), np.arange(3, dtype=np.int32)
    y, i = op(x, k)
    assert i.dtype == np.int32 or i.dtype == np.int64
    g = sg.grad(lambda v: sg.sum(op(v, k)[0]))(x)
    np.testing.assert_allclose(g, k.astype(float))


def test_inside_jax_jit_and_eagerly() -> None:
    x = arr(3)
    np.testing.assert_allclose(
        jax.jit(sg.grad(lambda v: ours(v, P)))(x), jax.grad(lambda v: theirs(v, P))(x), rtol=1e-12
    )
    np.testing.assert_allclose(sg.jax_op(jnp.sin)(x), np.sin(x))


def test_a_function_jax_cannot_evaluate_is_a_clear_error() -> None:
    bad = sg.jax_op(lambda x: x @ jnp.ones((5, 2)))
    with pytest.raises(sg.SrcgradError, match="jax_op <lambda>: JAX cannot evaluate it"):
        sg.jit(lambda v: bad(v))(arr(3))
