"""sg.custom_vjp and sg.custom_jvp against jax.custom_vjp / jax.custom_jvp with the same rules.

The rules below deliberately differ from the true derivative (a factor), so that a test
passes only if the user's rule is the one used.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import srcgrad as sg
from support.util import close

RNG = np.random.default_rng(11)


def make_vjp(lib: Any, custom: Any) -> Any:
    """f(x, y) = sin(x) * y with a bwd that scales the x cotangent by 1.5; residuals a dict."""

    @custom
    def f(x: Any, y: Any) -> Any:
        return lib.sin(x) * y

    def fwd(x: Any, y: Any) -> Any:
        return lib.sin(x) * y, {"cos": lib.cos(x), "sin": lib.sin(x), "y": y}

    def bwd(res: Any, g: Any) -> Any:
        return (1.5 * res["cos"] * g * res["y"], res["sin"] * g)

    f.defvjp(fwd, bwd)
    return f


F = make_vjp(sg, sg.custom_vjp)
F_REF = make_vjp(jnp, jax.custom_vjp)


def loss(x: Any, y: Any) -> Any:
    return sg.sum(F(x, y) ** 2 * x)


def loss_ref(x: Any, y: Any) -> Any:
    return jnp.sum(F_REF(x, y) ** 2 * x)


X, Y = RNG.uniform(0.2, 1.5, 4), RNG.standard_normal(4)


def test_custom_vjp_value_and_gradient() -> None:
    close(F(X, Y), F_REF(X, Y))  # eager call
    close(sg.jit(F)(X, Y), F_REF(X, Y))
    close(sg.grad(loss, (0, 1))(X, Y), jax.grad(loss_ref, (0, 1))(X, Y))
    close(sg.vjp(F, X, Y)[1](Y), jax.vjp(F_REF, X, Y)[1](Y))


def test_custom_vjp_bwd_is_ordinary_ops_in_the_gradient_program() -> None:
    src = sg.source(sg.grad(loss), X, Y)
    assert "# grad of custom_vjp" in src
    grad_part = src[src.index("# grad of custom_vjp") :]
    assert "1.5" in grad_part  # bwd's own constant, emitted where the gradient runs
    prog = sg.trace(sg.grad(loss), X, Y)
    prog.verify()
    assert [op.type for op in prog.global_block().ops].count("custom_vjp") == 1


def test_custom_vjp_second_order() -> None:
    """grad of grad and hessian: bwd is differentiated, residuals through fwd's own ops."""
    close(
        sg.grad(lambda x, y: sg.sum(sg.grad(loss)(x, y) ** 2))(X, Y),
        jax.grad(lambda x, y: jnp.sum(jax.grad(loss_ref)(x, y) ** 2))(X, Y),
    )
    close(sg.hessian(loss)(X, Y), jax.hessian(loss_ref)(X, Y))
    close(sg.hessian(loss, (0, 1))(X, Y), jax.hessian(loss_ref, (0, 1))(X, Y))


def test_custom_vjp_inside_a_loop_and_under_jax() -> None:
    def looped(x: Any) -> Any:
        return sg.sum(sg.fori_loop(0, 3, lambda i, c: F(c, x) + x, x))

    def looped_ref(x: Any) -> Any:
        return jnp.sum(lax.fori_loop(0, 3, lambda i, c: F_REF(c, x) + x, x))

    close(sg.grad(looped)(X), jax.grad(looped_ref)(X))
    close(jax.jit(sg.grad(loss))(X, Y), jax.grad(loss_ref)(X, Y))
    close(
        jax.vmap(sg.grad(loss))(np.stack([X, X + 0.1]), np.stack([Y, Y])),
        jax.vmap(jax.grad(loss_ref))(np.stack([X, X + 0.1]), np.stack([Y, Y])),
    )


def test_custom_vjp_none_cotangent_and_forward_mode() -> None:
    @sg.custom_vjp
    def g(x: Any, y: Any) -> Any:
        return x * y

    g.defvjp(lambda x, y: (x * y, y), lambda y, ct: (ct * y * 3.0, None))
    close(sg.grad(lambda x, y: sg.sum(g(x, y)), (0, 1))(X, Y), (Y * 3.0, np.zeros(4)))
    # forward mode differentiates fwd's ops (jax refuses jvp of a custom_vjp function)
    close(sg.jvp(g, (X, Y), (Y, X))[1], Y * Y + X * X)


def test_custom_vjp_errors() -> None:
    @sg.custom_vjp
    def h(x: Any) -> Any:
        return x * 2.0

    with pytest.raises(sg.SrcgradError, match="defvjp"):
        sg.grad(lambda x: sg.sum(h(x)))(X)
    h.defvjp(lambda x: (x * 2.0, ()), lambda res, g: (g, g))
    with pytest.raises(
        sg.GradientError, match=r"^custom_vjp: bwd <lambda> must return a tuple of 1 cotangents"
    ):
        sg.grad(lambda x: sg.sum(h(x)))(X)

    def closes(x: Any) -> Any:
        @sg.custom_vjp
        def k(z: Any) -> Any:
            return z * x

        k.defvjp(lambda z: (z * x, ()), lambda res, g: (g,))
        return sg.sum(k(x))

    with pytest.raises(sg.GradientError, match="closes over"):
        sg.grad(closes)(X)


# ---------------------------------------------------------------- custom_jvp


def make_jvp(lib: Any, custom: Any, sigmoid: Any) -> Any:
    """softplus with a rule that doubles the tangent (so its use is visible)."""

    @custom
    def softplus(x: Any) -> Any:
        return lib.log1p(lib.exp(x))

    @softplus.defjvp
    def softplus_jvp(primals: Any, tangents: Any) -> Any:
        (x,), (t,) = primals, tangents
        return softplus(x), 2.0 * sigmoid(x) * t

    return softplus


SP = make_jvp(sg, sg.custom_jvp, sg.sigmoid)
SP_REF = make_jvp(jnp, jax.custom_jvp, jax.nn.sigmoid)


def sp_loss(x: Any) -> Any:
    return sg.sum(SP(x) * sg.sin(x))


def sp_loss_ref(x: Any) -> Any:
    return jnp.sum(SP_REF(x) * jnp.sin(x))


def test_custom_jvp_forward_and_reverse() -> None:
    v = RNG.standard_normal(4)
    close(SP(X), SP_REF(X))
    close(sg.jvp(SP, (X,), (v,)), jax.jvp(SP_REF, (X,), (v,)))
    close(sg.grad(sp_loss)(X), jax.grad(sp_loss_ref)(X))  # the rule, transposed
    close(sg.jacrev(SP)(X), jax.jacrev(SP_REF)(X))


def test_custom_jvp_second_order() -> None:
    close(sg.hessian(sp_loss)(X), jax.hessian(sp_loss_ref)(X))
    close(
        sg.grad(lambda x: sg.sum(sg.grad(sp_loss)(x)))(X),
        jax.grad(lambda x: jnp.sum(jax.grad(sp_loss_ref)(x)))(X),
    )
    close(sg.jacfwd(sg.jacfwd(sp_loss))(X), jax.jacfwd(jax.jacfwd(sp_loss_ref))(X))


def test_custom_jvp_in_a_while_loop() -> None:
    def looped(x: Any) -> Any:
        return sg.while_loop(
            lambda c: c[1] < 3, lambda c: (SP(c[0]) * x, c[1] + 1), (x, np.int32(0))
        )[0]

    def looped_ref(x: Any) -> Any:
        return lax.while_loop(
            lambda c: c[1] < 3, lambda c: (SP_REF(c[0]) * x, c[1] + 1), (x, np.int32(0))
        )[0]

    v = RNG.standard_normal(4)
    close(sg.jvp(looped, (X,), (v,)), jax.jvp(looped_ref, (X,), (v,)))
    close(
        sg.grad(lambda x: sg.sum(looped(x)))(X),
        jax.grad(lambda x: jnp.sum(lax.fori_loop(0, 3, lambda i, c: SP_REF(c) * x, x)))(X),
    )


def test_custom_jvp_rule_is_ordinary_ops_and_verifies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SRCGRAD_ENABLE_CHECKS", "1")
    src = sg.source(sg.grad(sp_loss), X)
    grad_part = src[src.index("# grad of custom_jvp") :]
    assert "jax.nn.sigmoid" in grad_part and "2.0" in grad_part
    sg.hessian(sp_loss)(X)
    sg.hessian(loss)(X, Y)


def test_custom_jvp_errors() -> None:
    @sg.custom_jvp
    def h(x: Any) -> Any:
        return x * 2.0

    with pytest.raises(sg.SrcgradError, match="defjvp"):
        h(X)

    @h.defjvp
    def h_jvp(primals: Any, tangents: Any) -> Any:
        return primals[0] * 2.0, (tangents[0], tangents[0])

    with pytest.raises(sg.GradientError, match="structure"):
        sg.jvp(h, (X,), (X,))


def test_custom_functions_take_keyword_arguments_as_jax_resolves_them() -> None:
    """Keywords (and the defaults of parameters left out) go to their positions, as JAX's
    custom rules resolve them (a TypeError from _Custom.__call__ before); keyword-only
    parameters are refused with the line, as JAX refuses them."""

    @sg.custom_vjp
    def f(x: Any, scale: float = 2.0) -> Any:
        return x * scale

    f.defvjp(lambda x, scale: (x * scale, (scale,)), lambda res, g: (g * res[0], None))

    @sg.custom_jvp
    def h(x: Any, scale: float = 2.0) -> Any:
        return x * scale

    h.defjvp(lambda p, t: (p[0] * p[1], t[0] * p[1]))
    for fn in (f, h):
        np.testing.assert_allclose(sg.grad(lambda x: sg.sum(fn(x=x, scale=3.0)))(X), 3.0)
        np.testing.assert_allclose(sg.grad(lambda x: sg.sum(fn(x)))(X), 2.0)
        np.testing.assert_allclose(fn(X, scale=0.5), X * 0.5)
        with pytest.raises(sg.SrcgradError, match=r"called with \['y'\].*test_custom.py"):
            fn(X, y=1.0)

    @sg.custom_vjp
    def k(x: Any, *, scale: float) -> Any:
        return x * scale

    k.defvjp(lambda x, scale: (x * scale, ()), lambda res, g: (g,))
    with pytest.raises(sg.SrcgradError, match=r"keyword-only arguments \['scale'\].*test_custom"):
        k(X, scale=1.0)


def _rule_of(tangent: Any) -> Any:
    @sg.custom_jvp
    def f(x: Any) -> Any:
        return sg.sin(x)

    @f.defjvp
    def f_jvp(primals: Any, tangents: Any) -> Any:
        return sg.sin(primals[0]), tangent(primals[0], tangents[0])

    return f


@pytest.mark.parametrize(
    "tangent, culprit",
    [
        (lambda x, t: t * t, "multiply"),
        (lambda x, t: sg.sin(t) * x, "sin"),
        (lambda x, t: sg.abs(t), "abs"),
        (lambda x, t: x / (t + 1.0), "divide"),
    ],
)
def test_custom_jvp_rule_not_linear_in_the_tangent_is_refused_in_reverse_mode(
    tangent: Any, culprit: str
) -> None:
    """JAX cannot transpose such a rule and refuses it; srcgrad returned the gradient at a
    zero tangent (0.0 for t * t). Forward mode applies the rule as it is, as jax.jvp does."""
    f = _rule_of(tangent)
    with pytest.raises(
        sg.GradientError,
        match=rf"not linear in the tangents: .*\({culprit} at "
        r".*test_custom.py:\d+\)",
    ):
        sg.grad(lambda x: sg.sum(f(x)))(X)
    np.testing.assert_allclose(sg.jvp(f, (X,), (X,))[1], tangent(X, X), rtol=1e-12)


def test_custom_jvp_rules_linear_in_the_tangent_give_jaxs_gradient() -> None:
    """Linear rules (a tangent times primal values, where, a view of a split, a constant
    tangent, which transposes to zero) pass the check and match jax.grad."""
    cases = [
        (lambda x, t: sg.cos(x) * t, lambda x, t: jnp.cos(x) * t),
        (
            lambda x, t: sg.where(x > 0, t * 2.0, t / x),
            lambda x, t: jnp.where(x > 0, t * 2.0, t / x),
        ),
        (
            lambda x, t: sg.split(sg.stack([t, t * 3.0]), 2)[1][0],
            lambda x, t: jnp.split(jnp.stack([t, t * 3.0]), 2)[1][0],
        ),
        (lambda x, t: sg.ones_like(x), lambda x, t: jnp.ones_like(x)),
    ]
    for ours, theirs in cases:

        @jax.custom_jvp
        def g(x: Any) -> Any:
            return jnp.sin(x)

        g.defjvp(lambda p, t, theirs=theirs: (jnp.sin(p[0]), theirs(p[0], t[0])))
        np.testing.assert_allclose(
            sg.grad(lambda x: sg.sum(_rule_of(ours)(x)))(X),
            jax.grad(lambda x: jnp.sum(g(x)))(X),
            rtol=1e-12,
        )


def test_custom_jvp_rule_with_a_cond_on_the_primal_is_linear() -> None:
    """A cond whose predicate is the primal's returns, beside the tangent, a value computed
    from the primal alone (a converted `if` returns such a flag): that output does not
    depend on the tangent, so its transpose may read it (it was refused as nonlinear). A
    predicate computed from the tangent is refused, as JAX refuses it."""

    def ours(x: Any, t: Any) -> Any:
        big, u = sg.cond(sg.sum(x) > 0, lambda: (x > 0.5, t * 2.0), lambda: (x < -0.5, t * 3.0))
        return sg.where(big, u, -u)

    def theirs(x: Any, t: Any) -> Any:
        big, u = jax.lax.cond(
            jnp.sum(x) > 0, lambda: (x > 0.5, t * 2.0), lambda: (x < -0.5, t * 3.0)
        )
        return jnp.where(big, u, -u)

    @jax.custom_jvp
    def g(x: Any) -> Any:
        return jnp.sin(x)

    g.defjvp(lambda p, t: (jnp.sin(p[0]), theirs(p[0], t[0])))
    for x in (X, -X):
        np.testing.assert_allclose(
            sg.grad(lambda x: sg.sum(_rule_of(ours)(x)))(x),
            jax.grad(lambda x: jnp.sum(g(x)))(x),
            rtol=1e-12,
        )
    f = _rule_of(lambda x, t: sg.cond(sg.sum(t) > 0, lambda: t, lambda: -t))
    with pytest.raises(sg.GradientError, match=r"not linear in the tangents: .*\(cond at "):
        sg.grad(lambda x: sg.sum(f(x)))(X)


# ---------------------------------------------------------------- rules jax's types refuse

X32 = X.astype(np.float32)


def _sin_vjp(fwd: Any, bwd: Any) -> Any:
    @sg.custom_vjp
    def f(x: Any) -> Any:
        return sg.sin(x)

    f.defvjp(fwd, bwd)
    return f


@pytest.mark.parametrize("dtype", ["int32", "float64"])
def test_custom_vjp_bwd_cotangent_of_another_dtype_is_refused(dtype: str) -> None:
    f = _sin_vjp(lambda x: (sg.sin(x), sg.cos(x)), lambda c, g: (sg.astype(g * c, dtype),))
    want = (
        rf"^custom_vjp: bwd <lambda> returned {dtype[0]}{dtype[-2:]}\[4\] for argument 0, "
        r"which is f32\[4\].*test_custom.py:\d+\)$"
    )
    with pytest.raises(sg.GradientError, match=want):
        sg.grad(lambda x: sg.sum(f(x)))(X32)


def test_custom_vjp_bwd_python_number_is_weakly_typed() -> None:
    f = _sin_vjp(lambda x: (sg.sin(x), ()), lambda res, g: (2.0,))
    got = sg.grad(lambda x: f(x))(np.float32(0.5))
    assert got.dtype == np.float32 and got == 2.0


@pytest.mark.parametrize(
    "out",
    [lambda x: 3.0, lambda x: sg.astype(sg.sin(x), "float64"), lambda x: (sg.sin(x),)],
    ids=["scalar", "float64", "tuple"],
)
def test_custom_vjp_fwd_output_unlike_the_function_is_refused(out: Any) -> None:
    f = _sin_vjp(lambda x: (out(x), x), lambda res, g: (g,))
    with pytest.raises(
        sg.SrcgradError,
        match=r"^custom_vjp: fwd <lambda> returned a primal "
        r"output.*the function f returns .*test_custom.py:\d+\)$",
    ):
        f(X32)  # a plain call too: its value would be fwd's
    with pytest.raises(sg.SrcgradError, match="the function f returns"):
        sg.grad(lambda x: sg.sum(f(x)))(X32)


def test_custom_jvp_rule_of_other_types_is_refused() -> None:
    @sg.custom_jvp
    def h(x: Any) -> Any:
        return sg.sin(x)

    h.defjvp(lambda p, t: (sg.sin(p[0]), sg.astype(t[0], "float64")))
    with pytest.raises(
        sg.GradientError,
        match=r"^custom_jvp: the rule <lambda> returned "
        r"f64\[4\] for the tangent of output, which is f32\[4\]",
    ):
        sg.grad(lambda x: sg.sum(h(x)))(X32)
    h.defjvp(lambda p, t: (3.0, t[0]))
    with pytest.raises(
        sg.GradientError,
        match=r"returned f32\[\] for the primal output, "
        r"which is f32\[4\]",
    ):
        sg.jvp(h, (X32,), (X32,))


def test_custom_vjp_function_traced_for_its_types_leaves_no_input_behind() -> None:
    """`fun` is traced only for its output types: an array only it captures is not fed."""

    @sg.custom_vjp
    def h(x: Any) -> Any:
        return sg.sin(x) * np.ones(4)

    h.defvjp(lambda x: (sg.sin(x) * 1.0, x), lambda res, g: (g * 2.0,))
    assert sg.source(sg.grad(lambda x: sg.sum(h(x))), X).splitlines()[0] == "def lambda__grad(x):"
    close(sg.grad(lambda x: sg.sum(h(x)))(X), np.full(4, 2.0))
