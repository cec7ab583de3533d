"""sg.scan: lax.scan's contract and its gradients, against jax.grad of lax.scan."""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import srcgrad as sg
from srcgrad.testing import check_grads
from support.util import assert_tree_close, normal_arrays

arr = normal_arrays(np.random.default_rng(11))


def rnn(np_: Any, scan: Callable[..., Any]) -> Callable[..., Any]:
    """A loss over a pytree carry and pytree per-step inputs and outputs."""

    def f(h0: Any, xs: Any, w: Any) -> Any:
        def step(c: Any, x: Any) -> Any:
            h, s = c
            h = np_.tanh(h @ w + x["a"] * x["b"])
            return (h, s + np_.sum(h * h)), {"y": h * 2.0, "z": np_.sum(np_.sin(h))}

        (h, s), ys = scan(step, (h0, np_.sum(h0) * 0.5), xs)
        return np_.sum(h) + s + np_.sum(ys["y"] ** 2) + np_.sum(np_.cos(ys["z"]))

    return f


ARGS = (arr(3), {"a": arr(6, 3), "b": arr(6, 3)}, arr(3, 3, scale=0.5))


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_value_and_first_order(reverse: bool) -> None:
    f = rnn(sg, lambda st, c, xs: sg.scan(st, c, xs, reverse=reverse))
    twin = rnn(jnp, lambda st, c, xs: lax.scan(st, c, xs, reverse=reverse))
    np.testing.assert_allclose(sg.jit(f)(*ARGS), twin(*ARGS), rtol=1e-12)
    assert_tree_close(
        sg.grad(f, argnums=(0, 1, 2))(*ARGS), jax.grad(twin, argnums=(0, 1, 2))(*ARGS)
    )
    sg.trace(sg.grad(f, argnums=(0, 1, 2)), *ARGS).verify()


@pytest.mark.parametrize("unroll,reverse", [(True, False), (6, True), (9, False), (2, True)])
def test_scan_unrolled_as_lax_scan(unroll: Any, reverse: bool) -> None:
    """unroll=True or >= the length (6) writes the steps out, no loop; 2 keeps the loop."""
    f = rnn(sg, lambda st, c, xs: sg.scan(st, c, xs, reverse=reverse, unroll=unroll))
    twin = rnn(jnp, lambda st, c, xs: lax.scan(st, c, xs, reverse=reverse, unroll=unroll))
    np.testing.assert_allclose(sg.jit(f)(*ARGS), twin(*ARGS), rtol=1e-12)
    grad = sg.grad(f, argnums=(0, 1, 2))
    assert_tree_close(grad(*ARGS), jax.grad(twin, argnums=(0, 1, 2))(*ARGS))
    assert ("while_loop" in sg.source(grad, *ARGS)) == (unroll == 2)


def test_from_jax_unrolls_the_scans_jax_unrolls() -> None:
    """jnp.polyval (inside jax.scipy.special.ndtri) is a scan with unroll=16: no loop."""

    def f(x: Any) -> Any:
        return jnp.sum(jax.scipy.special.ndtri(x))

    x = np.array([0.1, 0.4, 0.95])
    assert "while_loop" not in sg.source(sg.grad(sg.from_jax(f)), x)
    check_grads(sg.from_jax(f), (x,), jax_fun=f, directions=1)


def test_scan_outputs_match_lax_scan() -> None:
    def step(c: Any, x: Any) -> Any:
        return c * x + 1.0, (c, x * 2.0)

    xs = arr(5)
    got = sg.jit(lambda c, xs: sg.scan(step, c, xs, reverse=True))(0.3, xs)
    assert_tree_close(got, lax.scan(step, 0.3, xs, reverse=True))


def test_scan_second_order() -> None:
    f = rnn(sg, sg.scan)
    twin = rnn(jnp, lax.scan)

    def g_sg(w: Any) -> Any:
        return sg.sum(sg.grad(f, argnums=2)(ARGS[0], ARGS[1], w) ** 2)

    def g_j(w: Any) -> Any:
        return jnp.sum(jax.grad(twin, argnums=2)(ARGS[0], ARGS[1], w) ** 2)

    assert_tree_close(sg.grad(g_sg)(ARGS[2]), jax.grad(g_j)(ARGS[2]), rtol=1e-9)
    hess = jax.hessian(lambda h0: twin(h0, ARGS[1], ARGS[2]))(ARGS[0])
    e = np.eye(3)[1]
    hv = sg.grad(lambda h0: sg.sum(sg.grad(lambda u: f(u, ARGS[1], ARGS[2]))(h0) * e))(ARGS[0])
    np.testing.assert_allclose(hv, hess[1], rtol=1e-9, atol=1e-12)


def test_scan_with_length_and_no_xs() -> None:
    def f(x: Any) -> Any:
        c, ys = sg.scan(lambda c, _: (sg.sin(c) * 1.1, c * c), x, None, length=4)
        return c + sg.sum(ys)

    def twin(x: Any) -> Any:
        c, ys = lax.scan(lambda c, _: (jnp.sin(c) * 1.1, c * c), x, None, length=4)
        return c + jnp.sum(ys)

    np.testing.assert_allclose(sg.grad(f)(0.4), jax.grad(twin)(0.4), rtol=1e-12)


def test_scan_zero_length() -> None:
    def f(x: Any, xs: Any) -> Any:
        c, ys = sg.scan(lambda c, x: (c * x, c + x), x, xs)
        return c + sg.sum(ys)

    xs = np.zeros((0,))
    np.testing.assert_allclose(sg.jit(f)(2.0, xs), 2.0)
    np.testing.assert_allclose(sg.grad(f)(2.0, xs), 1.0)


def test_scan_under_jax_jit_and_vmap() -> None:
    f = rnn(sg, sg.scan)
    twin = rnn(jnp, lax.scan)
    g = jax.jit(sg.grad(f, argnums=2))
    assert_tree_close(g(*ARGS), jax.grad(twin, argnums=2)(*ARGS))
    ws = np.stack([ARGS[2], ARGS[2] * 0.5])
    got = jax.vmap(sg.grad(f, argnums=2), in_axes=(None, None, 0))(ARGS[0], ARGS[1], ws)
    want = jax.vmap(jax.grad(twin, argnums=2), in_axes=(None, None, 0))(ARGS[0], ARGS[1], ws)
    assert_tree_close(got, want)


def test_scan_against_finite_differences() -> None:
    f = rnn(sg, sg.scan)
    twin = rnn(jnp, lax.scan)
    check_grads(
        lambda h0, a, b, w: f(h0, {"a": a, "b": b}, w),
        (ARGS[0], ARGS[1]["a"], ARGS[1]["b"], ARGS[2]),
        order=2,
        jax_fun=lambda h0, a, b, w: twin(h0, {"a": a, "b": b}, w),
    )


@pytest.mark.parametrize(
    "bad,match",
    [
        (dict(xs=np.zeros(3), length=4), "inconsistent lengths"),
        (dict(xs=np.float64(1.0)), "leading axis"),
        (dict(xs=None), "xs or length"),
        (dict(xs=np.zeros(3), unroll=0), "unroll"),
    ],
)
def test_scan_errors_name_the_problem(bad: dict, match: str) -> None:
    xs = bad.pop("xs")

    def f(c: Any) -> Any:
        return sg.scan(lambda c, x: (c, c), c, xs, **bad)[0]

    with pytest.raises(sg.SrcgradError, match=match):
        sg.jit(f)(1.0)


def test_scan_body_must_return_a_pair_with_the_carry_structure() -> None:
    with pytest.raises(sg.SrcgradError, match="pair"):
        sg.jit(lambda c: sg.scan(lambda c, x: c, c, np.ones(2)))(1.0)
    with pytest.raises(sg.SrcgradError, match="structure of its carry"):
        sg.jit(lambda c: sg.scan(lambda c, x: ((c, c), x), c, np.ones(2)))(1.0)
    with pytest.raises(sg.SrcgradError, match="shape or dtype"):
        sg.jit(lambda c: sg.scan(lambda c, x: (c * np.ones(2), x), c, np.ones(2)))(1.0)


@pytest.mark.parametrize("k,reverse", [(1, False), (3, False), (3, True), (6, True), (50, False)])
def test_checkpointed_scan_matches_lax_scan(k: int, reverse: bool) -> None:
    f = rnn(sg, lambda st, c, xs: sg.scan(st, c, xs, reverse=reverse, checkpoints=k))
    twin = rnn(jnp, lambda st, c, xs: lax.scan(st, c, xs, reverse=reverse))
    np.testing.assert_allclose(sg.jit(f)(*ARGS), twin(*ARGS), rtol=1e-12)
    assert_tree_close(
        sg.grad(f, argnums=(0, 1, 2))(*ARGS), jax.grad(twin, argnums=(0, 1, 2))(*ARGS)
    )


def test_checkpointed_scan_second_order_and_records() -> None:
    f = rnn(sg, lambda st, c, xs: sg.scan(st, c, xs, checkpoints=2))
    twin = rnn(jnp, lax.scan)
    g_sg = lambda w: sg.sum(sg.grad(f, argnums=2)(ARGS[0], ARGS[1], w) ** 2)
    g_j = lambda w: jnp.sum(jax.grad(twin, argnums=2)(ARGS[0], ARGS[1], w) ** 2)
    assert_tree_close(sg.grad(g_sg)(ARGS[2]), jax.grad(g_j)(ARGS[2]), rtol=1e-9)
    prog = sg.trace(sg.grad(f, argnums=2), *ARGS)
    stacks = {
        v.shape[0]
        for blk in prog.blocks
        for op in blk.ops
        for v in op.outputs
        if v.name.endswith("@STACK")
    }
    assert stacks == {2, 3}  # 2 snapshots of the carry, one segment of 3 steps recorded
