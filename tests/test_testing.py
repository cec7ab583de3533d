"""srcgrad.testing.check_grads: pytree arguments, argnums, and that it does catch errors."""

from __future__ import annotations

import sys
from typing import Any

import hypothesis
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given
from hypothesis import strategies as hst

import srcgrad as sg
from srcgrad.base import dtypes
from srcgrad import testing as sgt
from srcgrad.testing import check_grads

RNG = np.random.default_rng(7)
PARAMS = {"w": RNG.standard_normal((3, 2)), "b": RNG.standard_normal(2)}
X = RNG.standard_normal((4, 3))


def _mlp(params: dict, x: Any) -> Any:
    return sg.tanh(x @ params["w"] + params["b"])


def _mlp_jnp(params: dict, x: Any) -> Any:
    return jnp.tanh(x @ params["w"] + params["b"])


def test_dict_of_arrays() -> None:
    check_grads(_mlp, (PARAMS, X), jax_fun=_mlp_jnp)
    check_grads(_mlp, (PARAMS, X), order=2, jax_fun=_mlp_jnp, argnums=0, directions=1)


def test_nested_tuples_lists_and_scalars() -> None:
    def f(pair: tuple, xs: list) -> Any:
        a, b = pair
        return sg.sum(sg.sin(a) * xs[0]) + b * sg.sum(xs[1])

    def f_jnp(pair: tuple, xs: list) -> Any:
        a, b = pair
        return jnp.sum(jnp.sin(a) * xs[0]) + b * jnp.sum(xs[1])

    args = ((RNG.standard_normal(3), 1.5), [RNG.standard_normal(3), RNG.standard_normal(2)])
    check_grads(f, args, jax_fun=f_jnp)


def test_argnums_leaves_other_arguments_unchanged() -> None:
    seen = []

    def f(n: Any, x: Any) -> Any:
        seen.append(n)
        return sg.sum(x**n)

    check_grads(f, (3, RNG.standard_normal(4)), argnums=1, jax_fun=lambda n, x: jnp.sum(x**n))
    assert seen and all(n == 3 and type(n) is int for n in seen)  # never cast nor traced
    check_grads(f, (3, RNG.standard_normal(4)), argnums=(-1,))


def test_a_wrong_gradient_is_caught_in_a_pytree() -> None:
    def wrong(params: dict, x: Any) -> Any:  # d/db is lost
        return sg.tanh(x @ params["w"] + sg.stop_gradient(params["b"]))

    with pytest.raises(AssertionError):
        check_grads(wrong, (PARAMS, X), jax_fun=_mlp_jnp)
    with pytest.raises(AssertionError, match="directional derivative"):
        check_grads(wrong, (PARAMS, X))
    # Not differentiating params, the mistake is invisible, as it should be.
    check_grads(wrong, (PARAMS, X), argnums=1, jax_fun=_mlp_jnp)


def test_argnums_out_of_range() -> None:
    with pytest.raises(ValueError, match="argnums 2"):
        check_grads(_mlp, (PARAMS, X), argnums=2)


def test_float32_without_global_x64() -> None:
    """Without jax_enable_x64, check_grads checks float32 arguments in a float64 scope (as
    jax.test_util.check_grads works without it), catches a wrong gradient there, and leaves
    x64 off."""
    x32 = RNG.standard_normal((4, 3)).astype(np.float32)
    w32 = {"w": PARAMS["w"].astype(np.float32), "b": PARAMS["b"].astype(np.float32)}
    with dtypes.x64_scope(False):
        check_grads(_mlp, (w32, x32), order=2, jax_fun=_mlp_jnp, directions=1)
        with pytest.raises(AssertionError, match="directional derivative"):
            check_grads(lambda p, x: sg.tanh(x @ p["w"] + sg.stop_gradient(p["b"])), (w32, x32))
        assert not jax.config.read("jax_enable_x64")
        assert sg.grad(lambda v: sg.sum(sg.tanh(v)))(x32).dtype == np.float32


# ---------------------------------------------------------------- property-test helpers


def test_settings_turn_the_deadline_off_and_take_changes() -> None:
    s = sgt.settings()
    assert s.deadline is None and HealthCheck.too_slow in s.suppress_health_check
    assert sgt.settings(max_examples=3).max_examples == 3 and sgt.settings().max_examples == 25


@hypothesis.settings(max_examples=40, deadline=None)
@given(hst.data())
def test_shapes_drawn_from_a_few_fixed_ones(data: Any) -> None:
    pool = sgt.shapes(min_dims=1, max_dims=3, min_side=2, max_side=5, distinct=3)
    seen = {data.draw(pool) for _ in range(30)}
    assert len(seen) <= 3
    assert all(1 <= len(s) <= 3 and all(2 <= d <= 5 for d in s) for s in seen), seen


def test_strategies_without_hypothesis_name_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("hypothesis", "hypothesis.extra.numpy"):
        monkeypatch.setitem(sys.modules, name, None)  # `import hypothesis` fails
    for make in (sgt.shapes, sgt.settings, lambda: sgt.arrays((2,))):
        with pytest.raises(ModuleNotFoundError, match=r"pip install 'srcgrad\[testing\]'"):
            make()
