"""Forward mode and Jacobians: sg.jvp, linearize, jacfwd, jacrev, hessian, hvp.

Against jax.jvp / jax.linearize / jax.jacfwd / jax.jacrev / jax.hessian of the jax.numpy twin
on the op table of test_op_grads (float64) and on loop programs; where JAX refuses (reverse
mode through a data-dependent while loop) against jax's forward-over-forward and float64
finite differences. Includes jvp of grad, grad of jvp, and both inside jax.jit / jax.vmap.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from jax import lax

import srcgrad as sg
from srcgrad.api.derivatives import _compiled_jvp
from support.util import close
from support.util import sliced
from test_op_grads import CASES, GradCase, cast, generic, with_floats
from test_ops import F64, examples

RNG = np.random.default_rng(5)


# ---------------------------------------------------------------- the op table

#: jax.jvp's tangents that are less precise than float64 on some backend: on GPU, JAX's
#: max_pool tangent (select_and_gather_add) packs each float64 pair into 64 bits, so it is
#: float32-rounded (srcgrad's is not; finite differences check it in test_op_grads).
_TANGENT_TOL = {("max_pool", "gpu"): 1e-6}


def _float_fun(case: GradCase, params: dict, drawn: list, ours: bool) -> Any:
    """The case's op as a function of its float arguments only (the others fixed)."""
    op = case.ours if ours else case.ref
    return lambda *xs: op(*with_floats(drawn, list(xs)), **params)


@pytest.mark.parametrize("case", sliced(CASES, 2), ids=str)
@examples(6)
@given(data=st.data())
def test_jvp_matches_jax_on_the_op_table(case: GradCase, data: st.DataObject) -> None:
    """sg.jvp equals jax.jvp (float64) for every differentiable op of the table."""
    params, drawn = case.draw(data, case.draw_dts)
    drawn = cast(drawn, (F64,))
    floats = [a for a in drawn if a.dtype.kind == "f"]
    tangents = [RNG.standard_normal(a.shape) for a in floats]
    out, t_out = sg.jvp(_float_fun(case, params, drawn, True), floats, tangents)
    want_out, want_t = jax.jit(
        lambda xs, ts: jax.jvp(_float_fun(case, params, drawn, False), xs, ts)
    )(floats, tangents)
    close(out, want_out)
    # With empty inputs nothing varies, so a zero tangent is right where jax's is NaN
    # (logsumexp's -inf - -inf); otherwise (mean's 0 / 0) both agree.
    if not (all(a.size == 0 for a in floats) and np.all(np.asarray(t_out) == 0)):
        close(t_out, want_t, _TANGENT_TOL.get((case.name, jax.default_backend()), 1e-9))
    assert np.asarray(t_out).dtype == np.asarray(out).dtype


@pytest.mark.parametrize("case", sliced([c for c in CASES if c.second_order], 2), ids=str)
@examples(15, least=1)
@given(data=st.data())
def test_jvp_of_grad_matches_jax_on_the_op_table(case: GradCase, data: st.DataObject) -> None:
    """Forward over reverse: sg.jvp of sg.grad transposes every grad op's rule correctly.
    At generic values of the op's smooth domain, as the second-order checks of test_op_grads
    (at a kink or tie the second derivative is a convention)."""
    params, drawn = case.draw(data, case.draw_dts)
    floats = generic(drawn, case.fd_doms)
    drawn = with_floats(drawn, floats)
    tangents = [RNG.standard_normal(a.shape) for a in floats]
    out = jax.eval_shape(_float_fun(case, params, drawn, False), *floats)
    cts = RNG.standard_normal(np.shape(out))
    nums = tuple(range(len(floats)))

    def ours(*xs: Any) -> Any:
        return sg.sum(_float_fun(case, params, drawn, True)(*xs) * cts)

    def ref(*xs: Any) -> Any:
        return jnp.sum(_float_fun(case, params, drawn, False)(*xs) * cts)

    got = sg.jvp(sg.grad(ours, nums), floats, tangents)
    want = jax.jit(lambda xs, ts: jax.jvp(jax.grad(ref, nums), xs, ts))(floats, tangents)
    close(got, want, 1e-8)


# ---------------------------------------------------------------- small functions


def mlp(params: dict, x: Any) -> Any:
    h = sg.tanh(x @ params["w1"] + params["b1"])
    return sg.sum(sg.log_softmax(h @ params["w2"]) ** 2)


def mlp_ref(params: dict, x: Any) -> Any:
    h = jnp.tanh(x @ params["w1"] + params["b1"])
    return jnp.sum(jax.nn.log_softmax(h @ params["w2"]) ** 2)


PARAMS = {
    "w1": RNG.standard_normal((3, 4)) * 0.5,
    "b1": RNG.standard_normal(4) * 0.1,
    "w2": RNG.standard_normal((4, 2)) * 0.5,
}
X = RNG.standard_normal((5, 3))


def vec(x: Any) -> Any:
    return sg.sin(x) * x[::-1] + sg.exp(x[0])


def vec_ref(x: Any) -> Any:
    return jnp.sin(x) * x[::-1] + jnp.exp(x[0])


def test_jvp_on_pytrees_and_two_arguments() -> None:
    tangents = (
        jax.tree_util.tree_map(lambda a: RNG.standard_normal(a.shape), PARAMS),
        RNG.standard_normal(X.shape),
    )
    close(sg.jvp(mlp, (PARAMS, X), tangents), jax.jvp(mlp_ref, (PARAMS, X), tangents))


def test_jvp_has_aux_and_float32() -> None:
    x = RNG.standard_normal(4).astype(np.float32)
    t = RNG.standard_normal(4).astype(np.float32)
    out, t_out, aux = sg.jvp(lambda x: (sg.tanh(x), sg.sum(x)), (x,), (t,), has_aux=True)
    want, want_t, want_aux = jax.jvp(lambda x: (jnp.tanh(x), jnp.sum(x)), (x,), (t,), has_aux=True)
    assert t_out.dtype == np.float32
    close((out, t_out, aux), (want, want_t, want_aux), 1e-6)


def test_integer_inputs_and_outputs_take_float0_tangents() -> None:
    x, n = RNG.standard_normal(3), np.int32(2)
    f = lambda x, n: (x * n, sg.argmax(x))
    t0 = np.zeros((), jax.dtypes.float0)
    (out, idx), (t_out, t_idx) = sg.jvp(f, (x, n), (np.ones(3), t0))
    close(t_out, 2.0 * np.ones(3))
    assert t_idx.dtype == jax.dtypes.float0 and t_idx.shape == ()
    want = jax.jvp(lambda x, n: (x * n, jnp.argmax(x)), (x, n), (np.ones(3), t0))[1][1]
    assert want.dtype == t_idx.dtype


def test_linearize_matches_jax() -> None:
    x = RNG.standard_normal(4)
    out, f_jvp = sg.linearize(vec, x)
    want, want_jvp = jax.linearize(vec_ref, x)
    close(out, want)
    for _ in range(2):
        t = RNG.standard_normal(4)
        close(f_jvp(t), want_jvp(t))


@pytest.mark.parametrize("argnums", [0, 1, (0, 1)])
def test_jacobians_match_jax(argnums: Any) -> None:
    f = lambda x, y: {"a": vec(x) * y[0], "b": sg.sum(y * y)}
    f_ref = lambda x, y: {"a": vec_ref(x) * y[0], "b": jnp.sum(y * y)}
    x, y = RNG.standard_normal(4), RNG.standard_normal(2)
    close(sg.jacfwd(f, argnums)(x, y), jax.jacfwd(f_ref, argnums)(x, y))
    close(sg.jacrev(f, argnums)(x, y), jax.jacrev(f_ref, argnums)(x, y))


def test_hessian_of_an_mlp_on_a_dict_matches_jax() -> None:
    close(sg.hessian(mlp)(PARAMS, X), jax.jit(jax.hessian(mlp_ref))(PARAMS, X), 1e-8)
    close(sg.hessian(mlp, 1)(PARAMS, X), jax.jit(jax.hessian(mlp_ref, 1))(PARAMS, X), 1e-8)


def test_hessian_has_aux() -> None:
    x = RNG.standard_normal(3)
    got = sg.hessian(lambda x: (sg.sum(sg.sin(x) ** 3), x * 2.0), has_aux=True)(x)
    want = jax.hessian(lambda x: (jnp.sum(jnp.sin(x) ** 3), x * 2.0), has_aux=True)(x)
    close(got, want)


def test_hvp_is_the_hessian_times_the_vector() -> None:
    x, v = RNG.standard_normal(4), RNG.standard_normal(4)
    f = lambda x: sg.sum(vec(x) ** 2)
    f_ref = lambda x: jnp.sum(vec_ref(x) ** 2)
    close(sg.hvp(f, (x,), (v,)), jax.hessian(f_ref)(x) @ v)


def test_jvp_of_grad_and_grad_of_jvp() -> None:
    x, v = RNG.standard_normal(4), RNG.standard_normal(4)
    f = lambda x: sg.sum(vec(x) ** 3)
    f_ref = lambda x: jnp.sum(vec_ref(x) ** 3)
    close(sg.jvp(sg.grad(f), (x,), (v,)), jax.jvp(jax.grad(f_ref), (x,), (v,)))
    close(
        sg.grad(lambda x: sg.sum(sg.jvp(vec, (x,), (v,))[1] ** 2))(x),
        jax.grad(lambda x: jnp.sum(jax.jvp(vec_ref, (x,), (v,))[1] ** 2))(x),
    )
    # the tangent as the differentiated argument
    close(
        sg.grad(lambda t: sg.sum(sg.jvp(vec, (x,), (t,))[1] ** 2))(v),
        jax.grad(lambda t: jnp.sum(jax.jvp(vec_ref, (x,), (t,))[1] ** 2))(v),
    )


def test_jacobians_inside_a_srcgrad_trace() -> None:
    """Inside sg.grad the Jacobians run an sg.scan over the basis (reverse mode through it)."""
    x = RNG.standard_normal(4)
    for ours, ref in ((sg.jacfwd, jax.jacfwd), (sg.jacrev, jax.jacrev)):
        close(
            sg.grad(lambda x: sg.sum(ours(vec)(x) ** 2))(x),
            jax.grad(lambda x: jnp.sum(ref(vec_ref)(x) ** 2))(x),
        )
    f = lambda x: sg.sum(vec(x) ** 3)
    close(sg.jit(sg.hessian(f))(x), jax.hessian(lambda x: jnp.sum(vec_ref(x) ** 3))(x))


def test_under_jax_jit_and_vmap() -> None:
    xs, vs = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))
    f = lambda x: sg.sum(vec(x) ** 2)
    f_ref = lambda x: jnp.sum(vec_ref(x) ** 2)
    close(jax.jit(sg.hessian(f))(xs[0]), jax.hessian(f_ref)(xs[0]))
    close(jax.vmap(sg.hessian(f))(xs), jax.vmap(jax.hessian(f_ref))(xs))
    close(
        jax.vmap(lambda x, v: sg.jvp(vec, (x,), (v,)))(xs, vs),
        jax.vmap(lambda x, v: jax.jvp(vec_ref, (x,), (v,)))(xs, vs),
    )
    close(
        jax.jit(lambda x, v: sg.hvp(f, (x,), (v,)))(xs[0], vs[0]), jax.hessian(f_ref)(xs[0]) @ vs[0]
    )
    close(
        jax.jacfwd(lambda x: sg.jvp(vec, (x,), (vs[0],))[1])(xs[0]),
        jax.jacfwd(lambda x: jax.jvp(vec_ref, (x,), (vs[0],))[1])(xs[0]),
    )


def test_compiled_once_per_signature() -> None:
    x, v = RNG.standard_normal(4), RNG.standard_normal(4)
    sg.jvp(vec, (x,), (v,))
    compiled = _compiled_jvp(vec, 1, (0,), False, "jvp")
    compiled(x, v)
    assert compiled.compilations == 0  # the first sg.jvp call compiled it


# ---------------------------------------------------------------- loops and branches


def loop(x: Any) -> Any:
    def body(i: Any, c: Any) -> Any:
        return sg.sin(c) * x + sg.cond(sg.sum(c) > 1.0, lambda a: a * 2.0, sg.tanh, c)

    return sg.fori_loop(0, 4, body, x)


def loop_ref(x: Any) -> Any:
    def body(i: Any, c: Any) -> Any:
        return jnp.sin(c) * x + lax.cond(jnp.sum(c) > 1.0, lambda a: a * 2.0, jnp.tanh, c)

    return lax.fori_loop(0, 4, body, x)


def switched(x: Any) -> Any:
    """lax.switch on the loop counter: each branch once, the last twice (index 3 clamps)."""
    branches = [lambda a: a * 2.0, sg.tanh, lambda a: sg.exp(a) * sg.sin(a)]
    return sg.fori_loop(0, 4, lambda i, c: sg.switch(i, branches, c) + 0.1 * x, x)


def switched_ref(x: Any) -> Any:
    branches = [lambda a: a * 2.0, jnp.tanh, lambda a: jnp.exp(a) * jnp.sin(a)]
    return lax.fori_loop(0, 4, lambda i, c: lax.switch(i, branches, c) + 0.1 * x, x)


def scanned(x: Any) -> Any:
    c, ys = sg.scan(lambda c, xi: (c * xi + sg.sin(c), c * 2.0), 1.0 + x[0], x)
    return c + sg.sum(ys**2)


def scanned_ref(x: Any) -> Any:
    c, ys = lax.scan(lambda c, xi: (c * xi + jnp.sin(c), c * 2.0), 1.0 + x[0], x)
    return c + jnp.sum(ys**2)


def nested(x: Any) -> Any:
    """A data-dependent while loop inside a fori_loop: the inner trip count varies."""

    def inner(c: Any) -> Any:
        return sg.while_loop(
            lambda y: y[1] < 4.0 + c, lambda y: (y[0] * 0.9 + sg.sin(c), y[1] + 1.0), (c, 0.0)
        )[0]

    return sg.fori_loop(0, 3, lambda i, c: inner(c) * 0.5, x)


def nested_ref(x: Any) -> Any:
    def inner(c: Any) -> Any:
        return lax.while_loop(
            lambda y: y[1] < 4.0 + c, lambda y: (y[0] * 0.9 + jnp.sin(c), y[1] + 1.0), (c, 0.0)
        )[0]

    return lax.fori_loop(0, 3, lambda i, c: inner(c) * 0.5, x)


LOOPS = {
    "fori_cond": (loop, loop_ref),
    "scan": (scanned, scanned_ref),
    "nested_while": (nested, nested_ref),
    "fori_switch": (switched, switched_ref),
}


@pytest.mark.parametrize("name", sorted(LOOPS))
def test_jvp_and_jacfwd_through_loops_match_jax(name: str) -> None:
    f, f_ref = LOOPS[name]
    x = RNG.uniform(0.2, 1.0, 3) if name != "nested_while" else np.float64(0.7)
    v = RNG.standard_normal(np.shape(x))
    close(sg.jvp(f, (x,), (v,)), jax.jvp(f_ref, (x,), (v,)))
    close(sg.jacfwd(f)(x), jax.jacfwd(f_ref)(x))


@pytest.mark.parametrize("name", ["fori_cond", "scan", "fori_switch"])
def test_hessian_and_grad_of_jvp_through_loops_match_jax(name: str) -> None:
    f, f_ref = LOOPS[name]
    x, v = RNG.uniform(0.2, 1.0, 3), RNG.standard_normal(3)
    s, s_ref = (lambda x: sg.sum(f(x))), (lambda x: jnp.sum(f_ref(x)))
    close(sg.hessian(s)(x), jax.hessian(s_ref)(x), 1e-8)
    close(
        sg.grad(lambda x: sg.sum(sg.jvp(f, (x,), (v,))[1]))(x),
        jax.grad(lambda x: jnp.sum(jax.jvp(f_ref, (x,), (v,))[1]))(x),
        1e-8,
    )


def newton_sqrt(a: Any) -> Any:
    return sg.while_loop(lambda y: sg.abs(y * y - a) > 1e-12 * a, lambda y: 0.5 * (y + a / y), a)


def newton_ref(a: Any) -> Any:
    return lax.while_loop(lambda y: jnp.abs(y * y - a) > 1e-12 * a, lambda y: 0.5 * (y + a / y), a)


def test_data_dependent_while_loop_where_jax_refuses_reverse_mode() -> None:
    """Second derivatives of Newton's sqrt: jax.hessian cannot go through lax.while_loop; sg's
    forward over reverse (and grad of jvp) equal jax's forward over forward and FD."""
    a = np.float64(9.0)
    want = jax.jacfwd(jax.jacfwd(newton_ref))(a)
    np.testing.assert_allclose(want, -0.25 * 9.0**-1.5, rtol=1e-9)
    one = np.float64(1.0)
    close(sg.jvp(newton_sqrt, (a,), (one,)), jax.jvp(newton_ref, (a,), (one,)))
    close(sg.hessian(newton_sqrt)(a), want)
    close(sg.jvp(sg.grad(newton_sqrt), (a,), (one,))[1], want)
    close(sg.grad(lambda a: sg.jvp(newton_sqrt, (a,), (one,))[1])(a), want)
    eps = 1e-4
    d = sg.grad(newton_sqrt)
    np.testing.assert_allclose(
        sg.hessian(newton_sqrt)(a), (d(a + eps) - d(a - eps)) / (2 * eps), rtol=1e-6
    )


def test_forward_mode_through_an_unbounded_while_loop_inside_jax_jit_and_vmap() -> None:
    """No records, so no max_iters: jvp and forward-over-forward run inside jax.jit / vmap
    (reverse mode there would need max_iters)."""
    a, one = np.float64(9.0), np.float64(1.0)
    close(
        jax.jit(lambda a, t: sg.jvp(newton_sqrt, (a,), (t,)))(a, one),
        jax.jvp(newton_ref, (a,), (one,)),
    )
    close(jax.vmap(sg.jacfwd(newton_sqrt))(np.array([4.0, 9.0])), np.array([0.25, 1 / 6]))
    close(jax.jit(sg.jacfwd(sg.jacfwd(newton_sqrt)))(a), jax.jacfwd(jax.jacfwd(newton_ref))(a))


def test_jvp_of_a_while_loop_carries_tangents_without_records() -> None:
    src = sg.source(
        _compiled_jvp(newton_sqrt, 1, (0,), False, "jvp"), np.float32(9.0), np.float32(1.0)
    )
    loop_line = next(line for line in src.splitlines() if "lax.while_loop" in line)
    assert "a_tangent" in loop_line and "tangent" in loop_line.split("=")[0]
    assert "STACK" not in src and "stack" not in src
    body = src[src.index("def body") :]
    assert "divide_0_tangent" in body  # the tangent op sits next to its op in the body


def test_jvp_through_checkpoint_and_checkpointed_loop() -> None:
    x, v = RNG.uniform(0.2, 1.0, 3), RNG.standard_normal(3)
    f = sg.checkpoint(lambda x: sg.sin(x) * sg.exp(x))
    g = lambda x: sg.fori_loop(0, 6, lambda i, c: sg.sin(c) + x, x, checkpoints=2)
    g_ref = lambda x: lax.fori_loop(0, 6, lambda i, c: jnp.sin(c) + x, x)
    close(sg.jvp(f, (x,), (v,)), jax.jvp(lambda x: jnp.sin(x) * jnp.exp(x), (x,), (v,)))
    close(sg.jvp(g, (x,), (v,)), jax.jvp(g_ref, (x,), (v,)))
    close(sg.hessian(lambda x: sg.sum(g(x)))(x), jax.hessian(lambda x: jnp.sum(g_ref(x)))(x), 1e-8)


def test_the_ir_verifies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SRCGRAD_ENABLE_CHECKS", "1")
    x, v = RNG.uniform(0.2, 1.0, 3), RNG.standard_normal(3)
    for f in (loop, scanned, lambda x: nested(x[0])):
        sg.jvp(f, (x,), (v,))
        sg.hessian(lambda x: sg.sum(f(x)))(x)
    tangents = jax.tree_util.tree_leaves((PARAMS, X))
    sg.trace(_compiled_jvp(mlp, 2, (0, 1), False, "jvp"), PARAMS, X, *tangents).verify()


# ---------------------------------------------------------------- errors


def test_bad_arguments_raise_clear_errors() -> None:
    """jax.jvp's TypeError and ValueError, with the user's file:line."""
    x = np.ones(3)
    here = r"\(at .*test_forward.py:\d+\)"
    with pytest.raises(TypeError, match="tuples or lists.*" + here):
        sg.jvp(vec, x, x)
    with pytest.raises(ValueError, match="shapes.*" + here):
        sg.jvp(vec, (x,), (np.ones(2),))
    with pytest.raises(TypeError, match="dtypes differ.*" + here):
        sg.jvp(vec, (x,), (np.ones(3, np.float32),))
    with pytest.raises(TypeError, match="float0.*" + here):
        sg.jvp(lambda x, n: x * n, (x, 2), (x, 1.0))
    with pytest.raises(TypeError, match="same tree structure.*" + here):
        sg.jvp(vec, (x,), (x, x))
    with pytest.raises(TypeError, match="takes 1 tangents.*" + here):
        sg.linearize(vec, x)[1](x, x)
    with pytest.raises(sg.GradientError, match="floating-point inputs"):
        sg.jacfwd(lambda n: n * 2.0)(np.arange(3))
    with pytest.raises(sg.GradientError, match="floating-point outputs"):
        sg.jacrev(lambda x: sg.argmax(x))(x)
