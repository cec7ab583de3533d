"""Gradients through control flow: while and fori loops, cond, nesting, higher order.

Expected values come from jax.grad (of lax.fori_loop / lax.cond, or of the same computation
unrolled in jax.numpy with a trip count computed first in NumPy) and from float64 finite
differences (`check_grads`). Every transformed program also passes the verifier.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import srcgrad as sg
from srcgrad.ir.analysis import producer
from srcgrad.testing import check_grads

RNG = np.random.default_rng(4)


def arr(*shape: int, scale: float = 1.0) -> np.ndarray:
    return RNG.standard_normal(shape) * scale


def grad_verified(f: Callable[..., Any], argnums: int | tuple[int, ...], *args: Any) -> Any:
    """sg.grad(f, argnums)(*args), after checking that its program passes the verifier."""
    g = sg.grad(f, argnums)
    prog = sg.trace(g, *args)
    prog.verify()
    sg.verify(prog)
    return g(*args)


def assert_grads_equal(
    f: Callable[..., Any],
    twin: Callable[..., Any],
    args: Sequence[Any],
    argnums: tuple[int, ...] | None = None,
    rtol: float = 1e-9,
) -> None:
    """srcgrad's gradient of `f` equals jax.grad of its jax.numpy twin (and verifies)."""
    argnums = tuple(range(len(args))) if argnums is None else argnums
    got = grad_verified(f, argnums, *args)
    want = jax.grad(twin, argnums)(*args)
    for i, (a, b) in zip(argnums, zip(got, want)):
        np.testing.assert_allclose(
            np.asarray(a), np.asarray(b), rtol=rtol, atol=1e-12, err_msg=f"gradient of argument {i}"
        )


def trip_count(cond: Callable[[Any], bool], step: Callable[[Any], Any], state: Any) -> int:
    """How many times a loop runs, computed in NumPy float64."""
    n = 0
    while cond(state):
        state = step(state)
        n += 1
    return n


def recorded(prog: sg.Program) -> list[sg.Variable]:
    """The values the forward loops of the global block push into stacks, per iteration."""
    out = []
    for op in prog.global_block().ops:
        if op.type == "while" and op.origin is None:
            out += [o.inputs[1] for o in op.attrs["body"].ops if o.type == "dynamic_update_index"]
    return out


# ---------------------------------------------------------------- loops JAX can differentiate


def test_fori_loop_with_static_bounds_matches_jax() -> None:
    def f(x: Any, w: Any) -> Any:
        return sg.sum(sg.fori_loop(0, 4, lambda i, h: sg.tanh(h @ w) + x, x) ** 2)

    def twin(x: Any, w: Any) -> Any:
        return jnp.sum(jax.lax.fori_loop(0, 4, lambda i, h: jnp.tanh(h @ w) + x, x) ** 2)

    args = (arr(3), arr(3, 3, scale=0.5))
    assert_grads_equal(f, twin, args)
    check_grads(f, args, jax_fun=twin, directions=1)


def backward_loop_bounds(prog: sg.Program) -> list[Any]:
    """The count in the condition `k < count` of each backward loop of the global block: its
    value where it is a constant, else None."""
    out = []
    for op in prog.global_block().ops:
        if op.type == "while" and op.origin is not None:
            count = producer(producer(op.attrs["cond"].results[0]).inputs[1])
            out.append(
                count.attrs["value"] if count is not None and count.type == "constant" else None
            )
    return out


def test_a_known_trip_count_bounds_the_backward_loop_as_a_constant() -> None:
    """A loop `i < N` over a counter from a constant start (fori_loop's static bounds, a
    scan): its backward loop runs `k < N - start` on a constant, so XLA knows its trip count
    (as it knows those of JAX's scans); a data-dependent loop keeps its recorded count."""

    def f(x: Any, w: Any) -> Any:
        h = sg.fori_loop(3, 8, lambda i, h: sg.tanh(h @ w) + x * sg.astype(i, "float64"), x)
        return sg.while_loop(lambda s: s < 4.0, lambda s: s * 1.5 + 0.1, sg.sum(h**2) * 0.01)

    def twin(x: Any, w: Any) -> Any:
        h = jax.lax.fori_loop(3, 8, lambda i, h: jnp.tanh(h @ w) + x * i, x)
        s = jnp.sum(h**2) * 0.01
        for _ in range(n):
            s = s * 1.5 + 0.1
        return s

    args = (arr(3, scale=0.3), arr(3, 3, scale=0.5))
    h = args[0]
    for i in range(3, 8):
        h = np.tanh(h @ args[1]) + args[0] * i
    n = trip_count(lambda s: s < 4.0, lambda s: s * 1.5 + 0.1, np.sum(h**2) * 0.01)
    assert n > 0
    assert_grads_equal(f, twin, args)
    assert backward_loop_bounds(sg.trace(sg.grad(f, (0, 1)), *args)) == [None, 5]


def test_scan_written_with_dynamic_update_index_matches_jax() -> None:
    def f(xs: Any, w: Any) -> Any:
        def body(i: Any, carry: Any) -> Any:
            h, ys = carry
            h = sg.tanh(h * w + xs[i])
            return h, sg.dynamic_update_index(ys, h * h, i)

        _, ys = sg.fori_loop(0, 5, body, (sg.zeros(3), sg.zeros((5, 3))))
        return sg.sum(ys * xs)

    def twin(xs: Any, w: Any) -> Any:
        def body(i: Any, carry: Any) -> Any:
            h, ys = carry
            h = jnp.tanh(h * w + xs[i])
            return h, jax.lax.dynamic_update_index_in_dim(ys, h * h, i, 0)

        _, ys = jax.lax.fori_loop(0, 5, body, (jnp.zeros(3), jnp.zeros((5, 3))))
        return jnp.sum(ys * xs)

    args = (arr(5, 3), arr(3))
    assert_grads_equal(f, twin, args)
    check_grads(f, args, jax_fun=twin, directions=1)


def test_scan_written_with_dynamic_update_slice_matches_jax() -> None:
    def f(x: Any, a: Any) -> Any:
        def body(i: Any, carry: Any) -> Any:
            s, out = carry
            s = s * a + sg.sin(s)
            return s, sg.dynamic_update_slice(out, sg.reshape(s, (1, 2)), (i, 0))

        s, out = sg.fori_loop(0, 4, body, (x, sg.zeros((4, 2))))
        return sg.sum(sg.cos(out)) + sg.sum(s)

    def twin(x: Any, a: Any) -> Any:
        def body(i: Any, carry: Any) -> Any:
            s, out = carry
            s = s * a + jnp.sin(s)
            return s, jax.lax.dynamic_update_slice(out, jnp.reshape(s, (1, 2)), (i, 0))

        s, out = jax.lax.fori_loop(0, 4, body, (x, jnp.zeros((4, 2))))
        return jnp.sum(jnp.cos(out)) + jnp.sum(s)

    assert_grads_equal(f, twin, (arr(2), arr(2, scale=0.3)))


def test_fori_loop_with_traced_bounds_matches_jax() -> None:
    def f(x: Any, n: Any) -> Any:
        return sg.sum(sg.fori_loop(0, n, lambda i, c: sg.sin(c) * x + 0.1, x))

    def twin(x: Any, n: Any) -> Any:
        return jnp.sum(jax.lax.fori_loop(0, n, lambda i, c: jnp.sin(c) * x + 0.1, x))

    x = arr(3)
    for n in (0, 1, 6):
        got = grad_verified(f, 0, x, np.int64(n))
        np.testing.assert_allclose(got, jax.grad(twin)(x, n), rtol=1e-10)


# ---------------------------------------------------------------- data-dependent loops


def test_loop_until_tolerance_matches_unrolled_jax_and_finite_differences() -> None:
    """Fixed-point iteration s <- cos(s) * a + x until the step is below a tolerance."""
    tol = 1e-3

    def f(a: Any, x: Any) -> Any:
        def not_done(c: Any) -> Any:
            return sg.abs(c[0] - c[1]) > tol

        def step(c: Any) -> Any:
            return sg.cos(c[0]) * a + x, c[0]

        return sg.while_loop(not_done, step, (x, x + 1.0))[0]

    a, x = 0.6, 0.3
    n = trip_count(
        lambda c: abs(c[0] - c[1]) > tol, lambda c: (np.cos(c[0]) * a + x, c[0]), (x, x + 1.0)
    )
    assert n > 3

    def unrolled(a: Any, x: Any) -> Any:
        s = x
        for _ in range(n):
            s = jnp.cos(s) * a + x
        return s

    assert_grads_equal(f, unrolled, (a, x))
    check_grads(f, (a, x), jax_fun=unrolled, directions=2)


def test_newton_sqrt_matches_unrolled_jax_and_analytic() -> None:
    def newton_sqrt(a: Any) -> Any:
        return sg.while_loop(lambda s: sg.abs(s * s - a) > 1e-10, lambda s: 0.5 * (s + a / s), a)

    for a in (2.0, 9.0, 0.3):
        n = trip_count(lambda s: abs(s * s - a) > 1e-10, lambda s: 0.5 * (s + a / s), a)

        def unrolled(a: Any, n: int = n) -> Any:
            s = a
            for _ in range(n):
                s = 0.5 * (s + a / s)
            return s

        assert_grads_equal(newton_sqrt, unrolled, (a,))
        np.testing.assert_allclose(sg.grad(newton_sqrt)(a), 0.5 / np.sqrt(a), rtol=1e-7)
    check_grads(newton_sqrt, (2.0,))


def test_newton_root_of_a_cubic_matches_implicit_derivative() -> None:
    """Root r of r**3 + p*r - q: dr/dq = 1/(3r**2 + p), dr/dp = -r/(3r**2 + p)."""

    def root(p: Any, q: Any) -> Any:
        def not_done(r: Any) -> Any:
            return sg.abs(r**3 + p * r - q) > 1e-12

        def step(r: Any) -> Any:
            return r - (r**3 + p * r - q) / (3.0 * r**2 + p)

        return sg.while_loop(not_done, step, q)

    p, q = 1.5, 2.0
    step = lambda r: r - (r**3 + p * r - q) / (3.0 * r**2 + p)
    n = trip_count(lambda r: abs(r**3 + p * r - q) > 1e-12, step, q)

    def unrolled(p: Any, q: Any) -> Any:
        r = q
        for _ in range(n):
            r = r - (r**3 + p * r - q) / (3.0 * r**2 + p)
        return r

    assert_grads_equal(root, unrolled, (p, q))
    r = float(sg.jit(root)(p, q))
    dp, dq = sg.grad(root, (0, 1))(p, q)
    np.testing.assert_allclose([dp, dq], [-r / (3 * r * r + p), 1 / (3 * r * r + p)], rtol=1e-8)
    check_grads(root, (p, q), directions=1)


def test_trip_count_depends_on_the_input() -> None:
    def f(x: Any, w: Any) -> Any:
        def body(c: Any) -> Any:
            s, acc = c
            return s * 1.5 + w, acc + sg.sin(s * w)

        return sg.while_loop(lambda c: c[0] < 10.0 * x, body, (w, 0.0 * w))[1]

    def np_count(x: float, w: float) -> int:
        return trip_count(lambda c: c < 10.0 * x, lambda c: c * 1.5 + w, w)

    for x, w in ((0.5, 0.7), (2.0, 0.7), (8.0, 0.4)):
        n = np_count(x, w)

        def unrolled(x: Any, w: Any, n: int = n) -> Any:
            s, acc = w, 0.0 * w
            for _ in range(n):
                s, acc = s * 1.5 + w, acc + jnp.sin(s * w)
            return acc

        assert_grads_equal(f, unrolled, (x, w))
    assert np_count(0.5, 0.7) < np_count(8.0, 0.4)
    check_grads(f, (2.0, 0.7), directions=2)


# ---------------------------------------------------------------- zero iterations, max_iters


def test_zero_iterations_give_the_gradient_of_the_identity() -> None:
    def f(x: Any, w: Any) -> Any:
        return sg.while_loop(lambda s: s > 10.0, lambda s: s * w, x) * 3.0

    dx, dw = grad_verified(f, (0, 1), 1.5, 2.0)
    assert (float(dx), float(dw)) == (3.0, 0.0)

    def g(x: Any) -> Any:
        return sg.sum(sg.fori_loop(0, 0, lambda i, c: c * x, x) * x)

    x = arr(3)
    np.testing.assert_allclose(grad_verified(g, 0, x), 2 * x)

    def backwards_bounds(x: Any) -> Any:
        return sg.sum(sg.fori_loop(5, 2, lambda i, c: sg.sin(c), x))

    np.testing.assert_allclose(grad_verified(backwards_bounds, 0, x), np.ones(3))

    def no_trips(x: Any, n: Any) -> Any:
        return sg.sum(
            sg.while_loop(lambda c: c[1] < n, lambda c: (c[0] * x, c[1] + 1.0), (x, 0.0))[0]
        )

    np.testing.assert_allclose(grad_verified(no_trips, 0, x, 0.0), np.ones(3))


def test_max_iters_bounds_the_forward_loop_and_its_gradient() -> None:
    def forever(x: Any, w: Any) -> Any:
        return sg.while_loop(lambda s: s > -1.0, lambda s: s * w + 0.1, x, max_iters=5)

    def five_steps(x: Any, w: Any) -> Any:
        s = x
        for _ in range(5):
            s = s * w + 0.1
        return s

    x, w = 0.5, 1.3
    np.testing.assert_allclose(sg.jit(forever)(x, w), five_steps(x, w), rtol=1e-12)
    assert_grads_equal(forever, five_steps, (x, w))

    def early(x: Any) -> Any:
        return sg.while_loop(lambda s: s < 3.0, lambda s: s * 2.0, x, max_iters=10)

    assert float(sg.jit(early)(1.0)) == 4.0
    assert float(grad_verified(early, 0, 1.0)) == 4.0

    def none(x: Any) -> Any:
        return sg.while_loop(lambda s: s < 3.0, lambda s: s * 2.0, x, max_iters=0) * x

    assert float(sg.jit(none)(1.0)) == 1.0
    assert float(grad_verified(none, 0, 1.0)) == 2.0

    def bounded_fori(x: Any, n: Any) -> Any:
        return sg.fori_loop(0, n, lambda i, c: c * x, x, max_iters=3)

    assert float(sg.jit(bounded_fori)(2.0, np.int64(10))) == 16.0
    assert float(grad_verified(bounded_fori, 0, 2.0, np.int64(10))) == 32.0


# ---------------------------------------------------------------- fan-in, no-grad, captures


def test_fan_in_of_a_carried_value_read_by_several_ops() -> None:
    def f(x: Any, w: Any) -> Any:
        return sg.sum(sg.fori_loop(0, 3, lambda i, s: s * s * 0.3 + sg.sin(s) * s + w * s, x))

    def twin(x: Any, w: Any) -> Any:
        return jnp.sum(
            jax.lax.fori_loop(0, 3, lambda i, s: s * s * 0.3 + jnp.sin(s) * s + w * s, x)
        )

    args = (arr(4, scale=0.5), arr(4, scale=0.5))
    assert_grads_equal(f, twin, args)
    check_grads(f, args, jax_fun=twin, directions=1)


def test_stop_gradient_on_values_used_inside_a_loop() -> None:
    def f(x: Any, w: Any) -> Any:
        def body(i: Any, s: Any) -> Any:
            return sg.stop_gradient(s) * sg.tanh(s) + sg.stop_gradient(w) * s + w

        return sg.fori_loop(0, 4, body, x)

    def twin(x: Any, w: Any) -> Any:
        def body(i: Any, s: Any) -> Any:
            return jax.lax.stop_gradient(s) * jnp.tanh(s) + jax.lax.stop_gradient(w) * s + w

        return jax.lax.fori_loop(0, 4, body, x)

    assert_grads_equal(f, twin, (0.4, 0.7))


def test_no_grad_set_on_a_value_used_inside_a_loop() -> None:
    prog = sg.Program()
    with sg.program_guard(prog):
        x = sg.parameter("x", (), "float64")
        w = sg.parameter("w", (), "float64")
        b = sg.parameter("b", (), "float64")
        y = sg.while_loop(lambda s: s < 5.0, lambda s: s * w + b, x)
        loss = y * b
        params_grads = sg.append_backward(loss, no_grad_set=[b])
    prog.verify()
    assert [p.name for p, _ in params_grads] == ["x", "w"]
    run = sg.compile(prog, feed=["x", "w", "b"], fetch=[g for _, g in params_grads])

    def np_trips(x: float, w: float, b: float) -> int:
        return trip_count(lambda s: s < 5.0, lambda s: s * w + b, x)

    def unrolled(x: Any, w: Any, b: Any) -> Any:
        b = jax.lax.stop_gradient(b)
        s = x
        for _ in range(np_trips(0.5, 1.5, 0.25)):
            s = s * w + b
        return s * b

    got = run(np.float64(0.5), np.float64(1.5), np.float64(0.25))
    want = jax.grad(unrolled, (0, 1))(0.5, 1.5, 0.25)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_loop_output_never_used_by_the_loss_gets_zero_gradient() -> None:
    def f(x: Any, w: Any) -> Any:
        a, unused = sg.while_loop(
            lambda c: c[0] < 4.0, lambda c: (c[0] + 1.0, c[1] * w), (x, x * w)
        )
        return a * 2.0

    dx, dw = grad_verified(f, (0, 1), 0.5, 3.0)
    assert (float(dx), float(dw)) == (2.0, 0.0)

    def ignores_loop(x: Any) -> Any:
        sg.while_loop(lambda s: s < 4.0, lambda s: s * 2.0, x)
        return x * 3.0

    assert float(grad_verified(ignores_loop, 0, 0.5)) == 3.0


def test_captured_weight_gradient_accumulates_over_iterations() -> None:
    def f(h: Any, w: Any, b: Any) -> Any:
        return sg.sum(sg.fori_loop(0, 6, lambda i, h: sg.tanh(w @ h + b), h))

    def twin(h: Any, w: Any, b: Any) -> Any:
        return jnp.sum(jax.lax.fori_loop(0, 6, lambda i, h: jnp.tanh(w @ h + b), h))

    args = (arr(3), arr(3, 3, scale=0.6), arr(3))
    assert_grads_equal(f, twin, args)
    check_grads(f, args, jax_fun=twin, directions=1)


def test_captured_weight_used_by_a_cond_inside_a_loop() -> None:
    def f(x: Any, w: Any) -> Any:
        def body(i: Any, v: Any) -> Any:
            return sg.cond(v > 0.5, lambda v: v * w - 0.4, lambda v: v + w * w, v)

        return sg.fori_loop(0, 6, body, x)

    def twin(x: Any, w: Any) -> Any:
        def body(i: Any, v: Any) -> Any:
            return jax.lax.cond(v > 0.5, lambda v: v * w - 0.4, lambda v: v + w * w, v)

        return jax.lax.fori_loop(0, 6, body, x)

    assert_grads_equal(f, twin, (0.3, 0.7))
    check_grads(f, (0.3, 0.7), jax_fun=twin, directions=1)


# ---------------------------------------------------------------- cond


def branchy(x: Any, w: Any, v: Any) -> Any:
    return sg.sum(sg.cond(sg.sum(x) > 0.0, lambda a: sg.sin(a) * w, lambda a: a * a + v, x))


def branchy_twin(x: Any, w: Any, v: Any) -> Any:
    return jnp.sum(jax.lax.cond(jnp.sum(x) > 0.0, lambda a: jnp.sin(a) * w, lambda a: a * a + v, x))


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_cond_matches_jax_lax_cond(sign: float) -> None:
    args = (sign * np.array([0.5, 0.8, 0.1]), 1.3, 0.7)
    assert_grads_equal(branchy, branchy_twin, args)
    check_grads(branchy, args, jax_fun=branchy_twin, directions=1)


def test_cond_untaken_branch_inputs_get_zero_gradients() -> None:
    def f(p: Any, a: Any, b: Any, wt: Any, wf: Any) -> Any:
        return sg.cond(p > 0.0, lambda a, b: a * wt, lambda a, b: b * wf, a, b)

    g = grad_verified(f, (1, 2, 3, 4), 1.0, 2.0, 3.0, 4.0, 5.0)
    np.testing.assert_allclose(g, [4.0, 0.0, 2.0, 0.0])
    g = grad_verified(f, (1, 2, 3, 4), -1.0, 2.0, 3.0, 4.0, 5.0)
    np.testing.assert_allclose(g, [0.0, 5.0, 0.0, 3.0])


def test_values_captured_by_either_branch_get_their_gradients() -> None:
    def f(x: Any, wt: Any, wf: Any, both: Any) -> Any:
        out = sg.cond(x > 0.0, lambda: sg.sin(wt) * both, lambda: wf * wf * both)
        return out * x

    def twin(x: Any, wt: Any, wf: Any, both: Any) -> Any:
        return jax.lax.cond(x > 0.0, lambda: jnp.sin(wt) * both, lambda: wf * wf * both) * x

    for x in (0.7, -0.7):
        assert_grads_equal(f, twin, (x, 0.4, 1.1, 2.5))


def test_cond_with_pytree_operands_and_an_integer_output() -> None:
    def f(x: Any, y: Any) -> Any:
        a, n = sg.cond(
            x > y,
            lambda d: (d["x"] * d["y"], sg.astype(d["x"], "int32")),
            lambda d: (d["x"] - sg.exp(d["y"]), sg.astype(d["y"], "int32")),
            {"x": x, "y": y},
        )
        return a * 2.0

    def twin(x: Any, y: Any) -> Any:
        return jax.lax.cond(x > y, lambda x, y: x * y, lambda x, y: x - jnp.exp(y), x, y) * 2.0

    for x, y in ((1.5, 0.5), (0.5, 1.5)):
        assert_grads_equal(f, twin, (x, y))


# ---------------------------------------------------------------- nesting


def test_while_inside_while_with_an_inner_trip_count_per_outer_iteration() -> None:
    def f(x: Any, w: Any) -> Any:
        def outer(c: Any) -> Any:
            v, i = c
            inner = sg.while_loop(
                lambda t: t[1] < i, lambda t: (sg.sin(t[0]) * w + x, t[1] + 1.0), (v, 0.0)
            )
            return inner[0], i + 1.0

        return sg.while_loop(lambda c: c[1] < 4.0, outer, (x, 1.0))[0]

    def unrolled(x: Any, w: Any) -> Any:
        v = x
        for i in range(1, 4):
            for _ in range(i):
                v = jnp.sin(v) * w + x
        return v

    assert_grads_equal(f, unrolled, (0.6, 0.9))
    check_grads(f, (0.6, 0.9), directions=1)


def test_cond_inside_while_with_a_predicate_that_differs_per_iteration() -> None:
    def f(x: Any, w: Any) -> Any:
        def body(c: Any) -> Any:
            v, k = c
            v = sg.cond(sg.sin(v * 3.0) > 0.0, lambda v: v * w + 0.3, lambda v: sg.cos(v) * w, v)
            return v, k + 1.0

        return sg.while_loop(lambda c: c[1] < 7.0, body, (x, 0.0))[0]

    x, w = 0.4, 1.2
    taken = []
    v = x
    for _ in range(7):
        taken.append(np.sin(v * 3.0) > 0.0)
        v = v * w + 0.3 if taken[-1] else np.cos(v) * w
    assert any(taken) and not all(taken)

    def unrolled(x: Any, w: Any) -> Any:
        v = x
        for t in taken:
            v = v * w + 0.3 if t else jnp.cos(v) * w
        return v

    assert_grads_equal(f, unrolled, (x, w))


@pytest.mark.parametrize("x", [0.5, -0.5])
def test_while_inside_cond(x: float) -> None:
    def f(x: Any, w: Any) -> Any:
        def grow(x: Any) -> Any:
            return sg.while_loop(lambda s: s < 3.0, lambda s: s * 1.7 + w * x, x)

        return sg.cond(x > 0.0, grow, lambda x: x * w, x)

    w = 0.2
    if x > 0:
        n = trip_count(lambda s: s < 3.0, lambda s: s * 1.7 + w * x, x)

        def twin(x: Any, w: Any) -> Any:
            s = x
            for _ in range(n):
                s = s * 1.7 + w * x
            return s
    else:

        def twin(x: Any, w: Any) -> Any:
            return x * w

    assert_grads_equal(f, twin, (x, w))


def three_levels(x: Any, w: Any) -> Any:
    """while > cond > while > cond: an inner loop, on some outer iterations only, with a branch."""

    def outer(c: Any) -> Any:
        v, i = c

        def inner_loop(v: Any) -> Any:
            def inner(t: Any) -> Any:
                u = sg.cond(t[0] > 0.5, lambda u: sg.sin(u) * w, lambda u: u * w + 0.4, t[0])
                return u, t[1] + 1.0

            return sg.while_loop(lambda t: t[1] < i, inner, (v, 0.0))[0]

        v = sg.cond(sg.sin(i * 2.0) > 0.0, inner_loop, lambda v: v * w, v)
        return v, i + 1.0

    return sg.while_loop(lambda c: c[1] < 5.0, outer, (x, 1.0))[0]


def three_levels_unrolled(x: Any, w: Any) -> Any:
    v = x
    for i in range(1, 5):
        if np.sin(i * 2.0) > 0.0:
            for _ in range(i):
                v = jax.lax.cond(v > 0.5, lambda u: jnp.sin(u) * w, lambda u: u * w + 0.4, v)
        else:
            v = v * w
    return v


def test_three_levels_of_nesting() -> None:
    assert [np.sin(i * 2.0) > 0 for i in range(1, 5)] == [True, False, False, True]
    args = (0.7, 0.9)
    assert_grads_equal(three_levels, three_levels_unrolled, args)
    check_grads(three_levels, args, jax_fun=three_levels_unrolled, directions=1)


# ---------------------------------------------------------------- higher order


def newton_sqrt(a: Any) -> Any:
    return sg.while_loop(lambda s: sg.abs(s * s - a) > 1e-10, lambda s: 0.5 * (s + a / s), a)


def test_second_derivative_through_a_data_dependent_loop() -> None:
    d2 = sg.grad(sg.grad(newton_sqrt))
    sg.trace(d2, 2.0).verify()
    for a in (2.0, 0.5):
        n = trip_count(lambda s: abs(s * s - a) > 1e-10, lambda s: 0.5 * (s + a / s), a)

        def unrolled(a: Any, n: int = n) -> Any:
            s = a
            for _ in range(n):
                s = 0.5 * (s + a / s)
            return s

        np.testing.assert_allclose(d2(a), jax.grad(jax.grad(unrolled))(a), rtol=1e-9)
        np.testing.assert_allclose(d2(a), -0.25 * a**-1.5, rtol=1e-6)
    check_grads(newton_sqrt, (2.0,), order=2, directions=1)


def test_second_derivative_through_cond() -> None:
    def f(x: Any, w: Any) -> Any:
        return sg.cond(x * w > 0.0, lambda x: sg.sin(x) * x * w, lambda x: x**3 * w, x)

    def twin(x: Any, w: Any) -> Any:
        return jax.lax.cond(x * w > 0.0, lambda x: jnp.sin(x) * x * w, lambda x: x**3 * w, x)

    for x in (0.8, -0.8):
        d2 = sg.grad(sg.grad(f))
        sg.trace(d2, x, 1.5).verify()
        np.testing.assert_allclose(d2(x, 1.5), jax.grad(jax.grad(twin))(x, 1.5), rtol=1e-12)
        check_grads(f, (x, 1.5), order=2, jax_fun=twin, directions=1)


def _branches(np_: Any, w: Any) -> list:
    """Three branches: residuals sin(a) (branch 0) and exp(a), cos(a) (branch 1), none kept by
    branch 2 (its gradient rebuilds a ** 2 from the operand)."""
    return [lambda a: np_.sin(a) * w, lambda a: np_.exp(a) * np_.cos(a), lambda a: a**3 + w]


def switched(i: Any, x: Any, w: Any) -> Any:
    return sg.sum(sg.switch(i, _branches(sg, w), x))


def switched_twin(i: Any, x: Any, w: Any) -> Any:
    return jnp.sum(jax.lax.switch(i, _branches(jnp, w), x))


@pytest.mark.parametrize("i", [-2, 0, 1, 2, 9])
def test_switch_matches_jax_lax_switch_with_the_index_clamped(i: int) -> None:
    args = (np.int32(i), arr(3), 0.7)
    assert_grads_equal(switched, switched_twin, args, argnums=(1, 2))
    check_grads(switched, args, jax_fun=switched_twin, argnums=(1, 2), order=2, directions=1)


def test_switch_is_one_op_and_its_branches_share_residual_outputs() -> None:
    """One forward and one backward `cond` op of three branches; the residuals of branches 0
    and 1 (f64[3] each) share outputs: the forward op returns its result and 2 residuals,
    not 3 (the most one branch needs, as JAX's cond)."""
    prog = sg.trace(sg.grad(switched, (1, 2)), np.int32(1), arr(3), 0.7)
    prog.verify()
    conds = [op for op in prog.global_block().ops if op.type == "cond"]
    assert [len(op.sub_blocks()) for op in conds] == [3, 3]
    assert [(o.shape, str(o.dtype)) for o in conds[0].outputs] == [((3,), "float64")] * 3


def test_switch_with_a_python_index_and_bad_indices() -> None:
    x = arr(3)
    np.testing.assert_allclose(
        sg.grad(lambda x: switched(5, x, 0.7))(x),
        jax.grad(lambda x: switched_twin(5, x, 0.7))(x),
        rtol=1e-12,
    )
    with pytest.raises(sg.SrcgradError, match=r"switch.*integer scalar, got f64\[\]"):
        sg.grad(lambda x: sg.sum(sg.switch(x[0], [sg.sin, sg.cos], x)))(x)
    with pytest.raises(sg.SrcgradError, match="different shapes or dtypes: branch0 .*branch1"):
        sg.grad(
            lambda x: sg.sum(
                sg.switch(np.int32(0) + sg.astype(x[0], "int32"), [sg.sin, lambda a: a[:2]], x)
            )
        )(x)


def test_switch_runs_eagerly_under_disable_jit() -> None:
    args = (np.int32(1), arr(3), 0.7)
    with jax.disable_jit():
        got = sg.grad(switched, (1, 2))(*args)
    want = jax.grad(switched_twin, (1, 2))(*args)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12)


@pytest.mark.parametrize("i", [0, 1, 2])
def test_while_loops_inside_switch_branches(i: int) -> None:
    """Unbounded loops in two branches: each reports its trip count (a capacity check, an
    output of its own) and the branch taken is differentiated."""

    def f(i: Any, x: Any, w: Any) -> Any:
        grow = lambda x: sg.while_loop(lambda s: s < 3.0, lambda s: s * 1.7 + w * x, x)
        shrink = lambda x: sg.while_loop(lambda s: s > 0.1, lambda s: s * 0.5 * w, x * w)
        return sg.switch(i, [grow, lambda x: x * w, shrink], x)

    x, w = 0.5, 0.8
    steps = [
        (lambda s: s < 3.0, lambda s: s * 1.7 + w * x, x),
        None,
        (lambda s: s > 0.1, lambda s: s * 0.5 * w, x * w),
    ][i]
    n = trip_count(*steps) if steps else 0

    def twin(x: Any, w: Any) -> Any:
        if i == 1:
            return x * w
        s = x if i == 0 else x * w
        for _ in range(n):
            s = s * 1.7 + w * x if i == 0 else s * 0.5 * w
        return s

    assert_grads_equal(lambda x, w: f(np.int32(i), x, w), twin, (x, w))


def test_second_order_through_nested_loops_and_a_scan() -> None:
    def rnn(xs: Any, w: Any, h: Any) -> Any:
        return sg.sum(sg.fori_loop(0, 4, lambda i, h: sg.tanh(h @ w + xs[i]), h) ** 2)

    def twin(xs: Any, w: Any, h: Any) -> Any:
        return jnp.sum(jax.lax.fori_loop(0, 4, lambda i, h: jnp.tanh(h @ w + xs[i]), h) ** 2)

    args = (arr(4, 2), arr(2, 2, scale=0.5), arr(2))
    sg.trace(sg.grad(lambda *a: sg.sum(sg.grad(rnn, (0, 1, 2))(*a)[1]), (0, 1, 2)), *args).verify()
    check_grads(rnn, args, order=2, jax_fun=twin, directions=1)
    d2 = sg.grad(lambda x, w: sg.grad(three_levels, (0, 1))(x, w)[0], (0, 1))
    sg.trace(d2, 0.7, 0.9).verify()
    want = jax.grad(lambda x, w: jax.grad(three_levels_unrolled, (0, 1))(x, w)[0], (0, 1))(0.7, 0.9)
    np.testing.assert_allclose(d2(0.7, 0.9), want, rtol=1e-9)


# ---------------------------------------------------------------- what is recorded


def test_only_what_the_grad_block_reads_is_recorded() -> None:
    """Constants are re-emitted, x[i] and counters recomputed; only s is stacked."""
    table = np.array([0.5, 1.5, 2.5])

    def f(xs: Any, w: Any) -> Any:
        def body(i: Any, s: Any) -> Any:
            return sg.sin(s) * sg.full((), 2.0) + s * table[1] + xs[i] * w

        return sg.fori_loop(0, 3, body, w)

    def twin(xs: Any, w: Any) -> Any:
        return jax.lax.fori_loop(0, 3, lambda i, s: jnp.sin(s) * 2.0 + s * 1.5 + xs[i] * w, w)

    assert_grads_equal(f, twin, (arr(3), 0.3))
    prog = sg.trace(sg.grad(f, (0, 1)), arr(3), 0.3)
    body = next(op for op in prog.global_block().ops if op.type == "while").attrs["body"]
    assert [v.name for v in recorded(prog)] == [body.params[1].name]


def test_grad_of_grad_reuses_the_records_of_the_first_gradient() -> None:
    first = recorded(sg.trace(sg.grad(newton_sqrt), 2.0))
    second = recorded(sg.trace(sg.grad(sg.grad(newton_sqrt)), 2.0))
    assert len(first) == 2
    assert len(second) == len(first)


# ---------------------------------------------------------------- the emitted source


def test_source_of_a_loop_gradient_records_forward_and_replays_backward() -> None:
    def f(x: Any, w: Any) -> Any:
        return sg.while_loop(lambda s: s < 5.0, lambda s: s * 1.5 + sg.sin(s) * w, x)

    loop_line = f.__code__.co_firstlineno + 1
    sg.trace(sg.grad(f, (0, 1)), 0.5, 1.2).verify()
    src = sg.source(sg.grad(f, (0, 1)), 0.5, 1.2)
    lines = src.splitlines()
    main, *block_functions = src.split("\n\ndef ")
    assert all(not line.lstrip().startswith("def ") for line in main.splitlines()[1:])
    loops = [k for k, line in enumerate(lines) if "lax.while_loop(" in line]
    assert len(loops) == 2
    forward, backward = loops
    bodies = [re.search(r"partial\((body_\d+), captured=", lines[k]).group(1) for k in loops]
    defs = {text.split("(")[0]: text for text in block_functions}
    assert all(re.match(r"body_\d+\(carry, captured\):", defs[b]) for b in bodies)
    here = f"test_control_flow.py:{loop_line}"
    grad_comments = [line.strip() for line in lines if line.strip().startswith("# grad of")]
    assert any(c.startswith("# grad of while") and c.endswith(f"({here})") for c in grad_comments)
    assert any(c.startswith("# grad of sin") and c.endswith(f"({here})") for c in grad_comments)
    assert all(re.search(r"\(test_control_flow\.py:\d+\)$", c) for c in grad_comments)
    first_grad = next(
        k for k, line in enumerate(lines) if line.strip().startswith("# grad of while")
    )
    assert forward < first_grad < backward
    compile(src, "<test>", "exec")


# ---------------------------------------------------------------- random loop bodies


def _op(code: int, a: Any, b: Any, w: Any, lib: Any) -> Any:
    """One op of a random loop body, in srcgrad (lib=sg) or jax.numpy (lib=jnp)."""
    if code == 0:
        return a + b
    if code == 1:
        return a * b * 0.5
    if code == 2:
        return lib.sin(a) - b
    if lib is sg:
        if code == 3:
            return sg.cond(sg.sum(a) > 0.0, lambda a, b: a * w, lambda a, b: b - a, a, b)
        return sg.fori_loop(0, 2, lambda j, u: sg.tanh(u * w) + b * 0.1, a)
    if code == 3:
        return jax.lax.cond(jnp.sum(a) > 0.0, lambda a, b: a * w, lambda a, b: b - a, a, b)
    return jax.lax.fori_loop(0, 2, lambda j, u: jnp.tanh(u * w) + b * 0.1, a)


def random_loop(
    body_ops: list[tuple[int, int, int]], n: int, lib: Any, unbounded: bool
) -> Callable:
    """sum(s + t) after n iterations of a body built from `body_ops` over (s, t, w, xs[i])."""

    def step(i: Any, s: Any, t: Any, w: Any, xs: Any) -> tuple[Any, Any]:
        vals = [s, t, w, xs[i]]
        for code, a, b in body_ops:
            vals.append(_op(code, vals[a % len(vals)], vals[b % len(vals)], w, lib))
        return lib.tanh(vals[-1]), lib.tanh(vals[-2]) * 0.9

    def f(x: Any, w: Any, xs: Any) -> Any:
        if lib is jnp:
            s, t = jax.lax.fori_loop(0, n, lambda i, c: step(i, *c, w, xs), (x, x * 0.5))
        elif unbounded:

            def body(c: Any) -> Any:
                return step(sg.astype(c[2], "int32"), c[0], c[1], w, xs) + (c[2] + 1.0,)

            s, t, _ = sg.while_loop(lambda c: c[2] < float(n), body, (x, x * 0.5, 0.0))
        else:
            s, t = sg.fori_loop(0, n, lambda i, c: step(i, *c, w, xs), (x, x * 0.5))
        return lib.sum(s + t)

    return f


@settings(max_examples=12, deadline=None)
@given(
    body_ops=st.lists(
        st.tuples(st.integers(0, 4), st.integers(0, 9), st.integers(0, 9)), min_size=1, max_size=4
    ),
    n=st.sampled_from([0, 1, 3]),
    unbounded=st.booleans(),
)
def test_random_loop_bodies_match_jax(body_ops: list, n: int, unbounded: bool) -> None:
    rng = np.random.default_rng(len(body_ops) + 10 * n)
    args = (rng.standard_normal(2) * 0.5, rng.standard_normal(2) * 0.5, rng.standard_normal((3, 2)))
    assert_grads_equal(
        random_loop(body_ops, n, sg, unbounded),
        random_loop(body_ops, n, jnp, False),
        args,
        rtol=1e-8,
    )
