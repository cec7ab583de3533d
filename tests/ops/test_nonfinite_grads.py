"""NaN and infinities through every reduction and selection op: values, gradients (`sg.grad`)
and tangents (`sg.jvp`) equal jax.numpy's, `jax.grad`'s and `jax.jvp`'s.

The reference is JAX's rules run op by op (no `jax.jit`): under `jax.jit`, XLA rewrites
`convert(x == max) / count` into a select and so turns the NaN of `jax.grad(jnp.max)` into 0;
srcgrad writes the NaN out, so its compiled gradient keeps it.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import srcgrad as sg

nan, inf = np.nan, np.inf
INPUTS = {
    "nan": np.array([1.0, nan, 3.0, 2.0]),
    "inf": np.array([1.0, inf, 3.0, -inf]),
    "ninf_tie": np.array([-inf, 2.0, -inf, 0.5]),
    "nan_inf": np.array([inf, nan, -inf, 2.0]),
    "all_nan": np.array([nan, nan, nan, nan]),
    "edges": np.array([0.0, 2.5, 6.0, 2.0]),  # on clip's and relu6's bounds, ties with OTHER
}
OTHER = np.array([2.0, nan, inf, 2.0])  # the second operand of the binary ops
CT = np.array([0.3, -1.2, 0.7, 1.1])
TANGENT = np.array([1.0, 0.5, -2.0, 0.25])


def _rows(x: Any) -> Any:
    return x.reshape(2, 2) if isinstance(x, np.ndarray) else sg.reshape(x, (2, 2))


def _both(name: str, ours: Callable, theirs: Callable, **kw: Any) -> Any:
    return pytest.param(ours, theirs, kw, id=name)


CASES = [
    _both("max", sg.max, jnp.max),
    _both("min", sg.min, jnp.min),
    _both("max_axis", lambda x: sg.max(_rows(x), axis=1), lambda x: jnp.max(x.reshape(2, 2), 1)),
    _both(
        "min_axis_keepdims",
        lambda x: sg.min(_rows(x), axis=0, keepdims=True),
        lambda x: jnp.min(x.reshape(2, 2), 0, keepdims=True),
    ),
    _both("amax_from_jax", sg.from_jax(jnp.amax), jnp.amax),
    _both("amin_from_jax", sg.from_jax(lambda x: jnp.amin(x, axis=0)), lambda x: jnp.amin(x, 0)),
    _both("sum", sg.sum, jnp.sum),
    _both("mean", sg.mean, jnp.mean),
    _both("var", sg.var, jnp.var),
    _both("std", sg.std, jnp.std),
    _both("prod", sg.prod, jnp.prod),
    _both("prod_axis", lambda x: sg.prod(_rows(x), axis=0), lambda x: jnp.prod(x.reshape(2, 2), 0)),
    _both("logsumexp", sg.logsumexp, jax.nn.logsumexp),
    _both("softmax", sg.softmax, jax.nn.softmax),
    _both("log_softmax", sg.log_softmax, jax.nn.log_softmax),
    _both("cumsum", sg.cumsum, jnp.cumsum),
    _both("cumprod", sg.cumprod, jnp.cumprod),
    _both("cummax", sg.cummax, lax.cummax, ties=False),
    _both("cummin", sg.cummin, lax.cummin, ties=False),
    _both(
        "cummax_reverse",
        lambda x: sg.cummax(x, reverse=True),
        lambda x: lax.cummax(x, reverse=True),
        ties=False,
    ),
    _both(
        "cummin_reverse",
        lambda x: sg.cummin(x, reverse=True),
        lambda x: lax.cummin(x, reverse=True),
        ties=False,
    ),
    _both("maximum", lambda x: sg.maximum(x, OTHER), lambda x: jnp.maximum(x, OTHER)),
    _both("maximum_swapped", lambda x: sg.maximum(OTHER, x), lambda x: jnp.maximum(OTHER, x)),
    _both("minimum", lambda x: sg.minimum(x, OTHER), lambda x: jnp.minimum(x, OTHER)),
    _both("minimum_swapped", lambda x: sg.minimum(OTHER, x), lambda x: jnp.minimum(OTHER, x)),
    _both("maximum_self", lambda x: sg.maximum(x, x[::-1]), lambda x: jnp.maximum(x, x[::-1])),
    _both("fmax", lambda x: sg.fmax(x, OTHER), lambda x: jnp.fmax(x, OTHER)),
    _both("fmin", lambda x: sg.fmin(OTHER, x), lambda x: jnp.fmin(OTHER, x)),
    _both("clip", lambda x: sg.clip(x, 0.0, 2.5), lambda x: jnp.clip(x, 0.0, 2.5)),
    _both("clip_bounds", lambda x: sg.clip(2.0, x, x + 1.0), lambda x: jnp.clip(2.0, x, x + 1.0)),
    _both(
        "clamp_from_jax",
        sg.from_jax(lambda x: lax.clamp(0.0, x, 2.5)),
        lambda x: lax.clamp(0.0, x, 2.5),
    ),
    _both(
        "clamp_bounds_from_jax",
        sg.from_jax(lambda x: lax.clamp(x, jnp.full(4, 2.0), x + 1.0)),
        lambda x: lax.clamp(x, jnp.full(4, 2.0), x + 1.0),
    ),
    _both("sort", sg.sort, jnp.sort),
    _both(
        "sort_descending",
        lambda x: sg.sort(x, descending=True),
        lambda x: jnp.sort(x, descending=True),
    ),
    _both(
        "take_along_argsort",
        lambda x: sg.take_along_axis(x, sg.argsort(x), 0),
        lambda x: jnp.take_along_axis(x, jnp.argsort(x), 0),
    ),
    _both("relu", sg.relu, jax.nn.relu),
    _both("relu6", sg.relu6, jax.nn.relu6),
    _both("leaky_relu", sg.leaky_relu, jax.nn.leaky_relu),
    _both("abs", sg.abs, jnp.abs),
    _both("where", lambda x: sg.where(x > 1.5, x, 0.0), lambda x: jnp.where(x > 1.5, x, 0.0)),
    _both("nan_to_num", sg.nan_to_num, jnp.nan_to_num),
]


def _same(got: Any, want: Any, what: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, what
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, equal_nan=True, err_msg=what)


def _has_ties(x: np.ndarray) -> bool:
    return len(set(x.tolist())) < x.size and not np.isnan(x).all()


@pytest.mark.parametrize(
    "ours, theirs, kw",
    [  # every other case by default, -m slow all
        c if i % 2 == 0 else pytest.param(*c.values, marks=pytest.mark.slow, id=c.id)
        for i, c in enumerate(CASES)
    ],
)
def test_nonfinite_value_grad_and_jvp_match_jax(ours: Callable, theirs: Callable, kw: dict) -> None:
    def ct_like(y: Any) -> np.ndarray:
        return np.resize(CT, np.shape(y))

    grad = sg.grad(lambda x, c: sg.sum(ours(x) * c))
    wrong = []
    for name, x in INPUTS.items():
        if not kw.get("ties", True) and _has_ties(x):
            continue
        want, want_t = jax.jvp(theirs, (x,), (TANGENT,))
        got, got_t = sg.jvp(ours, (x,), (TANGENT,))
        c = ct_like(want)
        for what, mine, ref in [
            ("value", lambda: got, lambda: want),
            ("tangent", lambda: got_t, lambda: want_t),
            ("gradient", lambda: grad(x, c), lambda: jax.grad(lambda x: jnp.sum(theirs(x) * c))(x)),
        ]:
            try:
                _same(mine(), ref(), f"{what} at {name}")
            except AssertionError as e:
                wrong.append(str(e))
    assert not wrong, "\n".join(wrong)


def test_cumulative_extreme_ties_go_to_the_first() -> None:
    """srcgrad's documented tie rule for cummax/cummin (JAX splits ties along its scan tree)."""
    x = np.array([3.0, 1.0, 3.0, -inf, -inf])
    np.testing.assert_array_equal(
        sg.grad(lambda x: sg.sum(sg.cummax(x) * CT[:4].sum()))(x), [5 * CT[:4].sum(), 0, 0, 0, 0]
    )
    np.testing.assert_array_equal(sg.grad(lambda x: sg.sum(sg.cummin(x)[3:]))(x), [0, 0, 0, 2, 0])


def test_hypot_gradient_is_jax_grads_at_zero_infinity_and_overflow() -> None:
    """jnp.hypot's gradient is the derivative of its formula (hi * sqrt(1 + (lo / hi)**2)):
    half to each input at the origin (maximum's tie), NaN at an infinite input, and what the
    formula's transposes give where hi * hi would overflow."""
    vals = [0.0, -0.0, 1.0, -2.0, 3.0, inf, -inf, nan, 1e308, 1e-300, 5e-324]
    a = np.repeat(vals, len(vals))
    b = np.tile(vals, len(vals))
    ours = sg.grad(lambda a, b: sg.sum(sg.hypot(a, b) * 1.5), (0, 1))(a, b)
    theirs = jax.grad(lambda a, b: jnp.sum(jnp.hypot(a, b) * 1.5), (0, 1))(a, b)
    for got, want in zip(ours, theirs):
        _same(got, want, "hypot gradient")
    for fn, want in ((lambda x: sg.hypot(x, 0.0), 0.5), (lambda x: sg.hypot(x, x), 1.0)):
        assert sg.grad(fn)(0.0) == want
        assert sg.jvp(fn, (0.0,), (1.0,))[1] == want
