"""sg.scipy.special: forward against jax.scipy.special, gradients against jax.grad and float64
finite differences (the tables of test_ops / test_op_grads run on these cases too: see
test_op_coverage), and both tails of each function at fixed points, where `1 - erf` style
formulas lose everything (erfc(10) = 2e-45; log_ndtr(-40) = -804.6)."""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import jax.scipy.special as jss
import numpy as np
import pytest
import scipy.special
from hypothesis import given
from hypothesis import strategies as st

import srcgrad as sg
from support.util import sliced
from srcgrad.testing import check_grads
from test_op_grads import GradCase, check, check_against_jax
from test_ops import (
    F32,
    F64,
    FLOATS,
    R,
    Case,
    Dom,
    assert_same,
    check_case,
    elementwise,
    examples,
    values,
)

sp = sg.scipy.special
POS = Dom(0.25, 3.0)
UNIT = Dom(0.0625, 0.9375)  # float32-representable bounds (hypothesis needs them)
ERFINV = Dom(-0.875, 0.875)
F64_ONLY = ((F64,),)


def polygamma_args(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
    n = data.draw(st.integers(0, 2))
    return {"n": n}, elementwise(Dom(0.5, 3.0))(data, dts)[1]


def lse_args(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
    return {}, [values(data, (3,), dts[0])]


#: (name, reference, domains, gradient variants, second order)
UNARY: list[tuple[str, Callable, Dom, tuple, bool]] = [
    ("erfc", jss.erfc, R, FLOATS, True),
    ("erfinv", jss.erfinv, ERFINV, FLOATS, False),
    ("ndtr", jss.ndtr, R, FLOATS, False),
    ("log_ndtr", jss.log_ndtr, R, FLOATS, True),
    ("ndtri", jss.ndtri, UNIT, FLOATS, False),
    ("digamma", jss.digamma, POS, FLOATS, False),
    ("gammaln", jss.gammaln, POS, FLOATS, True),
    ("i0e", jss.i0e, R, FLOATS, True),
    ("i1e", jss.i1e, R, FLOATS, False),
    ("logit", jss.logit, UNIT, FLOATS, False),
    ("entr", jss.entr, POS, FLOATS, False),
]
BINARY: list[tuple[str, Callable, Dom, Dom, tuple, bool]] = [
    # gammainc's gradient in `a` (lax.igamma_grad_a) is a series whose float32 error is ~1e-4
    ("gammainc", jss.gammainc, Dom(0.5, 3.0), POS, F64_ONLY, False),
    ("gammaincc", jss.gammaincc, Dom(0.5, 3.0), POS, F64_ONLY, False),
    ("betaln", jss.betaln, POS, POS, FLOATS, False),
    ("xlogy", jss.xlogy, R, POS, FLOATS, True),
    ("xlog1py", jss.xlog1py, R, Dom(-0.5, 3.0), FLOATS, False),
]


def _polygamma_ours(x: Any, n: int) -> Any:
    return sp.polygamma(n, x)


def _polygamma_ref(x: Any, n: int) -> Any:
    return jss.polygamma(n, x)


CASES: list[Case] = (
    [Case(f"scipy.special.{n}", getattr(sp, n), ref, elementwise(d)) for n, ref, d, _, _ in UNARY]
    + [
        Case(f"scipy.special.{n}", getattr(sp, n), ref, elementwise(dx, dy))
        for n, ref, dx, dy, _, _ in BINARY
    ]
    + [
        Case("scipy.special.polygamma", _polygamma_ours, _polygamma_ref, polygamma_args),
        Case("scipy.special.erf", sp.erf, jss.erf, elementwise(R)),
        Case("scipy.special.expit", sp.expit, jss.expit, elementwise(R)),
        Case("scipy.special.logsumexp", sp.logsumexp, jss.logsumexp, lse_args),
    ]
)
GRAD_CASES: list[GradCase] = (
    [
        GradCase(
            f"scipy.special.{n}",
            getattr(sp, n),
            ref,
            elementwise(d),
            variants=v,
            fd_doms=(d,),
            second_order=so,
        )
        for n, ref, d, v, so in UNARY
    ]
    + [
        GradCase(
            f"scipy.special.{n}",
            getattr(sp, n),
            ref,
            elementwise(dx, dy),
            draw_dts=(F64,),
            variants=v,
            fd_doms=(dx, dy),
            second_order=so,
        )
        for n, ref, dx, dy, v, so in BINARY
    ]
    + [
        GradCase(
            "scipy.special.polygamma",
            _polygamma_ours,
            _polygamma_ref,
            polygamma_args,
            fd_doms=(Dom(0.5, 3.0),),
        ),
        GradCase("scipy.special.erf", sp.erf, jss.erf, elementwise(R)),
        GradCase("scipy.special.expit", sp.expit, jss.expit, elementwise(R)),
        GradCase("scipy.special.logsumexp", sp.logsumexp, jss.logsumexp, lse_args),
    ]
)


@pytest.mark.parametrize("case", CASES, ids=str)
@examples(15, least=1)
@given(data=st.data())
def test_forward_matches_jax_scipy(case: Case, data: st.DataObject) -> None:
    check_case(case, data, assert_same)


@pytest.mark.parametrize("case", sliced(GRAD_CASES, 2), ids=str)
@examples(15, least=1)
@given(data=st.data())
def test_grad_matches_jax(case: GradCase, data: st.DataObject) -> None:
    check_against_jax(case, data)


@pytest.mark.parametrize("case", sliced(GRAD_CASES, 2), ids=str)
@examples(15, least=1)
@given(data=st.data())
def test_finite_differences(case: GradCase, data: st.DataObject) -> None:
    check(case, data, order=2 if case.second_order else 1)


# ---------------------------------------------------------------- the tails

TAILS: dict[str, tuple[Callable, Callable, np.ndarray]] = {
    "erfc": (sp.erfc, jss.erfc, np.array([-6.0, -1e-3, 0.0, 6.0, 10.0, 26.0])),
    "log_ndtr": (sp.log_ndtr, jss.log_ndtr, np.array([-40.0, -10.0, -1.0, 0.0, 5.0, 10.0])),
    "ndtr": (sp.ndtr, jss.ndtr, np.array([-30.0, -8.0, 0.0, 8.0])),
    "ndtri": (sp.ndtri, jss.ndtri, np.array([1e-300, 1e-12, 0.5, 1 - 1e-12])),
    "erfinv": (sp.erfinv, jss.erfinv, np.array([-1 + 1e-12, 0.0, 1 - 1e-12])),
    "gammaln": (sp.gammaln, jss.gammaln, np.array([1e-8, 0.5, 50.0, 1e6])),
    "digamma": (sp.digamma, jss.digamma, np.array([1e-6, 0.5, 50.0, 1e6])),
    "i0e": (sp.i0e, jss.i0e, np.array([-500.0, -1e-20, 0.0, 1e-20, 500.0])),
    "i1e": (sp.i1e, jss.i1e, np.array([-500.0, -1e-20, 0.0, 1e-20, 500.0])),
    "logit": (sp.logit, jss.logit, np.array([1e-12, 0.5, 1 - 1e-12])),
    "entr": (sp.entr, jss.entr, np.array([0.0, 1e-300, 1.0, 1e300])),
}


@pytest.mark.parametrize("name", sorted(TAILS))
def test_tails_match_jax(name: str) -> None:
    """Value, gradient and gradient of the log (the probit likelihood's) at extreme points:
    equal to JAX's, and finite where JAX's is."""
    ours, ref, x = TAILS[name]
    np.testing.assert_allclose(ours(x), ref(x), rtol=1e-12, atol=0)
    for wrap_ours, wrap_ref in ((lambda v: v, lambda v: v), (sg.log, jnp.log)):
        if wrap_ours is sg.log and name not in ("erfc", "ndtr", "i0e"):
            continue  # the log of the positive ones (a likelihood's)
        got = sg.grad(lambda v: sg.sum(wrap_ours(ours(v))))(x)
        want = jax.grad(lambda v: jnp.sum(wrap_ref(ref(v))))(x)
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=0, err_msg=name)
        assert np.array_equal(np.isfinite(got), np.isfinite(want)), name


def test_binary_tails_match_jax() -> None:
    a = np.array([0.5, 3.0, 30.0, 30.0])
    x = np.array([1e-8, 3.0, 1.0, 200.0])
    for ours, ref in (
        (sp.gammainc, jss.gammainc),
        (sp.gammaincc, jss.gammaincc),
        (sp.betaln, jss.betaln),
    ):
        np.testing.assert_allclose(ours(a, x), ref(a, x), rtol=1e-12, atol=1e-300)
        got = sg.grad(lambda a, x: sg.sum(ours(a, x)), argnums=(0, 1))(a, x)
        want = jax.grad(lambda a, x: jnp.sum(ref(a, x)), argnums=(0, 1))(a, x)
        # betaln: JAX differentiates its large-argument approximation (2e-8 off at a = 30);
        # srcgrad's digamma(a) - digamma(a + b) is exact (scipy below)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-7 if ours is sp.betaln else 1e-10, atol=1e-300)
    exact = scipy.special.digamma(a) - scipy.special.digamma(a + x)
    np.testing.assert_allclose(
        sg.grad(lambda v: sg.sum(sp.betaln(v, x)))(a), exact, rtol=1e-13, atol=1e-15
    )  # the difference cancels where b is tiny
    zero = np.zeros(2)
    y = np.array([0.0, 2.0])
    for ours, ref in ((sp.xlogy, jss.xlogy), (sp.xlog1py, jss.xlog1py)):
        np.testing.assert_array_equal(
            ours(zero, y - 1.0 * (ours is sp.xlog1py)), ref(zero, y - 1.0 * (ref is jss.xlog1py))
        )
        got = sg.grad(lambda v: sg.sum(ours(v, y + 1.0)))(zero)
        np.testing.assert_allclose(got, jax.grad(lambda v: jnp.sum(ref(v, y + 1.0)))(zero))


def test_erfc_is_not_one_minus_erf() -> None:
    """The silent wrong result this module fixes: log(1 - erf(6)) is -inf in float64."""
    x = np.array([6.0, 10.0])
    assert np.all(np.isfinite(sg.log(sp.erfc(x))))
    assert np.all(np.isinf(sg.log(1.0 - sg.erf(x))))


def test_polygamma_needs_a_static_order() -> None:
    with pytest.raises(sg.SrcgradError, match="static int"):
        sp.polygamma(-1, np.ones(2))
    check_grads(
        lambda x: sp.polygamma(1, x),
        (np.array([0.7, 2.0]),),
        order=2,
        jax_fun=lambda x: jss.polygamma(1, x),
    )


def test_gammainc_gradient_in_a_is_first_order_only_as_in_jax() -> None:
    """JAX's igamma_grad_a has no derivative: neither does srcgrad's (a clear error)."""
    a, x = np.array([1.5]), np.array([2.0])
    g = sg.grad(lambda a: sg.sum(sg.grad(lambda b: sg.sum(sp.gammainc(b, x)))(a)))
    with pytest.raises(sg.GradientError, match="igamma_grad_a"):
        g(a)


def test_float32_values_keep_their_dtype() -> None:
    x = np.array([0.5, 2.0], np.float32)
    for name in ("erfc", "gammaln", "i0e", "log_ndtr"):
        assert getattr(sp, name)(x).dtype == F32
        assert sg.grad(lambda v: sg.sum(getattr(sp, name)(v)))(x).dtype == F32
