"""sg.nn's functions against jax.nn: values, first and second derivatives (at the kinks too),
finite differences at generic points; sg.nn.initializers against jax.nn.initializers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import srcgrad as sg
from srcgrad.base.errors import SrcgradError
from srcgrad.testing import check_grads
from support.util import sliced

RNG = np.random.default_rng(11)
#: Kinks and branch points of the activations, and ordinary values between them.
KINKS = np.array([-6.0, -3.0, -1.0, -0.5, 0.0, 0.25, 1.0, 3.0, 6.0, 7.5, np.log(2.0)])


@dataclass(frozen=True, eq=False)
class Case:
    """`fn(nn, x)` with nn = sg.nn and jax.nn (their jnp twins via `_np`)."""

    name: str
    fn: Callable[..., Any]
    x: np.ndarray = field(default_factory=KINKS.copy)
    second_order: bool = True
    rtol: float = 1e-6  # attention takes its softmax in float32, as JAX does

    def __str__(self) -> str:
        return self.name


def _elementwise(name: str, **kw: Any) -> Case:
    return Case(f"nn.{name}", lambda nn, x: getattr(nn, name)(x, **kw))


def _attn(**kw: Any) -> Callable[..., Any]:
    q, k, v = (
        RNG.standard_normal((2, 3, 4, 5)),
        RNG.standard_normal((2, 6, 2, 5)),
        RNG.standard_normal((2, 6, 2, 5)),
    )
    extra = {}
    if kw.pop("bias", False):
        extra["bias"] = RNG.standard_normal((1, 4, 3, 6))
    if kw.pop("mask", False):
        extra["mask"] = RNG.standard_normal((2, 1, 3, 6)) > -0.5
    return lambda nn, x: nn.dot_product_attention(q * x[0], k, v * x[1], **extra, **kw)


#: Elementwise activations: checked together, activation i on row i of one array (one
#: compiled program for the values, one for each derivative order).
ELEMENTWISE = [
    *[
        _elementwise(n)
        for n in (
            "swish",
            "identity",
            "celu",
            "selu",
            "mish",
            "soft_sign",
            "squareplus",
            "sparse_plus",
            "sparse_sigmoid",
            "hard_tanh",
            "hard_sigmoid",
            "hard_silu",
            "hard_swish",
        )
    ],
    _elementwise("celu", alpha=0.5),
    _elementwise("squareplus", b=2.0),
]
CASES = [
    Case(
        "nn.log1mexp",
        lambda nn, x: nn.log1mexp(x),
        np.array([0.01, 0.5, np.log(2.0), 1.0, 3.0, 20.0]),
    ),
    Case(
        "nn.logmeanexp",
        lambda nn, x: nn.logmeanexp(x.reshape(3, 4), axis=1),
        RNG.standard_normal(12),
    ),
    Case(
        "nn.logmeanexp all", lambda nn, x: nn.logmeanexp(x, keepdims=True), RNG.standard_normal(5)
    ),
    Case("nn.glu", lambda nn, x: nn.glu(x.reshape(2, 6), axis=1), RNG.standard_normal(12)),
    Case("nn.standardize", lambda nn, x: nn.standardize(x.reshape(3, 4)), RNG.standard_normal(12)),
    Case(
        "nn.standardize stable",
        lambda nn, x: nn.standardize(x.reshape(3, 4), axis=0, algorithm="stable", epsilon=1e-3),
        RNG.standard_normal(12),
    ),
    Case(
        "nn.standardize given",
        lambda nn, x: nn.standardize(x[:4], mean=x[4], variance=x[5] * x[5]),
        RNG.standard_normal(6),
    ),
    Case("nn.dot_product_attention", _attn(), np.array([0.7, 1.3]), rtol=5e-5),
    Case(
        "nn.dot_product_attention bias mask",
        _attn(bias=True, mask=True),
        np.array([0.7, 1.3]),
        rtol=5e-5,
    ),
    Case(
        "nn.dot_product_attention causal scale",
        _attn(is_causal=True, scale=0.3),
        np.array([0.7, 1.3]),
        rtol=5e-5,
    ),
    Case(
        "nn.dot_product_attention window",
        _attn(local_window_size=(1, 2)),
        np.array([0.7, 1.3]),
        second_order=False,
        rtol=5e-5,
    ),
]


def _rows(nn: Any, xs: Any) -> Any:
    stack = sg.stack if nn is sg.nn else jnp.stack
    return stack([c.fn(nn, xs[i]) for i, c in enumerate(ELEMENTWISE)])


def test_elementwise_values_and_derivatives_match_jax_nn() -> None:
    """Each activation's value, derivative and second derivative at the kinks, as jax.nn's."""
    xs = np.tile(KINKS, (len(ELEMENTWISE), 1))
    check_case(Case("elementwise", _rows, xs))


@pytest.mark.parametrize("case", sliced(CASES, 2), ids=str)
def test_value_and_derivatives_match_jax_nn(case: Case) -> None:
    """Values; jax.grad of sum(f) and of sum(grad) (second order)."""
    check_case(case)


def check_case(case: Case) -> None:
    """Values; jax.grad of sum(f) and of sum(grad) (second order)."""
    # the references run under jax.jit: one compile, not one per primitive JAX runs eagerly
    np.testing.assert_allclose(
        sg.jit(lambda x: case.fn(sg.nn, x))(case.x),
        jax.jit(lambda x: case.fn(jax.nn, x))(case.x),
        rtol=case.rtol,
        atol=1e-12,
    )

    def ours(x: Any) -> Any:
        return sg.sum(case.fn(sg.nn, x))

    def theirs(x: Any) -> Any:
        return jnp.sum(case.fn(jax.nn, x))

    np.testing.assert_allclose(
        sg.grad(ours)(case.x), jax.jit(jax.grad(theirs))(case.x), rtol=case.rtol, atol=1e-12
    )
    if case.second_order:
        np.testing.assert_allclose(
            sg.grad(lambda x: sg.sum(sg.grad(ours)(x)))(case.x),
            jax.jit(jax.grad(lambda x: jnp.sum(jax.grad(theirs)(x))))(case.x),
            rtol=case.rtol,
            atol=1e-10,
        )


@pytest.mark.parametrize(
    "case", [ELEMENTWISE[2], ELEMENTWISE[4], *CASES[0:1], CASES[3], CASES[5]], ids=str
)
def test_finite_differences(case: Case) -> None:
    """Float64 finite differences away from the kinks, for a representative set."""
    x = RNG.uniform(0.1, 0.9, case.x.shape) * np.sign(RNG.standard_normal(case.x.shape))
    if case.name == "nn.log1mexp":
        x = np.abs(x) + 0.05
    check_grads(lambda v: case.fn(sg.nn, v), (x,), order=2, directions=1)


def test_f32_attention_and_bad_shapes() -> None:
    q = RNG.standard_normal((3, 2, 4)).astype(np.float32)
    np.testing.assert_allclose(
        sg.nn.dot_product_attention(q, q, q),
        jax.nn.dot_product_attention(q, q, q),
        rtol=1e-5,
        atol=1e-6,
    )
    with pytest.raises(SrcgradError, match="multiple of"):
        sg.nn.dot_product_attention(
            np.ones((1, 2, 3, 4)), np.ones((1, 2, 2, 4)), np.ones((1, 2, 2, 4))
        )
    with pytest.raises(SrcgradError, match="even size"):
        sg.nn.glu(np.ones((2, 3)))


INITIALIZERS = [
    "glorot_normal",
    "glorot_uniform",
    "xavier_normal",
    "xavier_uniform",
    "he_normal",
    "he_uniform",
    "kaiming_normal",
    "kaiming_uniform",
    "lecun_normal",
    "lecun_uniform",
    "normal",
    "uniform",
    "truncated_normal",
    "orthogonal",
]


@pytest.mark.parametrize("name", INITIALIZERS)
def test_initializers_give_jax_numbers(name: str) -> None:
    key = jax.random.PRNGKey(4)
    for shape, kw in (((3, 2, 5), {}), ((2, 6), {"dtype": jnp.float32})):
        ours = getattr(sg.nn.initializers, name)()(key, shape, **kw)
        theirs = getattr(jax.nn.initializers, name)()(key, shape, **kw)
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-7, err_msg=f"{name} {shape}")


def test_initializer_options_and_simple_ones() -> None:
    key = jax.random.PRNGKey(9)
    I, J = sg.nn.initializers, jax.nn.initializers
    pairs = [
        (
            I.variance_scaling(0.5, "fan_out", "normal", in_axis=0, out_axis=(1, 2)),
            J.variance_scaling(0.5, "fan_out", "normal", in_axis=0, out_axis=(1, 2)),
        ),
        (
            I.variance_scaling(2.0, "fan_geo_avg", "uniform"),
            J.variance_scaling(2.0, "fan_geo_avg", "uniform"),
        ),
        (I.orthogonal(scale=2.0, column_axis=0), J.orthogonal(scale=2.0, column_axis=0)),
        (I.normal(0.3), J.normal(0.3)),
        (I.constant(1.5), J.constant(1.5)),
        (I.zeros, J.zeros),
        (I.ones, J.ones),
    ]
    for ours, theirs in pairs:
        np.testing.assert_allclose(ours(key, (3, 4, 2)), theirs(key, (3, 4, 2)), rtol=1e-6)
    traced = sg.jit(lambda k: I.he_normal()(k, (3, 3)))(np.asarray(key))
    np.testing.assert_allclose(traced, J.he_normal()(key, (3, 3)), rtol=1e-12)
    with pytest.raises(SrcgradError, match="invalid mode"):
        I.variance_scaling(1.0, "fan", "normal")(key, (2, 2))
