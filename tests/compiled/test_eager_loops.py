"""jit=False: loops and branches run as Python while/if over concrete arrays (for debuggers)."""

from __future__ import annotations

import contextlib
import sys
from collections import Counter
from typing import Any, Iterator

import jax
import numpy as np
import pytest

import srcgrad as sg


@contextlib.contextmanager
def body_calls() -> Iterator[Counter]:
    """Count calls of emitted block functions, as a breakpoint in them would fire; record
    whether the carried values each call sees are concrete arrays (not tracers)."""
    seen: Counter = Counter()

    def trace(frame: Any, event: str, arg: Any) -> None:
        code = frame.f_code
        if event == "call" and code.co_filename.startswith("<srcgrad:"):
            args = frame.f_locals.get("carry", frame.f_locals.get("operands"))
            if args is not None:
                leaves = jax.tree_util.tree_leaves(args)
                concrete = all(
                    isinstance(a, jax.Array) and not isinstance(a, jax.core.Tracer) for a in leaves
                )
                seen[(code.co_name.split("_")[0], concrete)] += 1

    old = sys.gettrace()
    sys.settrace(trace)
    try:
        yield seen
    finally:
        sys.settrace(old)


def loss(x: Any, w: Any) -> Any:
    y = sg.fori_loop(0, 5, lambda i, s: s * w + sg.sin(s), x)
    return sg.cond(y > 0.0, lambda a: a * a, lambda a: -a, y)


def test_eager_loop_bodies_run_once_per_iteration_with_real_values() -> None:
    g = sg.grad(loss, argnums=(0, 1), jit=False)
    with body_calls() as seen:
        got = g(0.3, 0.9)
    # the forward body and the grad body each run 5 times; the loop conditions 6 times each;
    # of the cond only its gradient runs (the loss value is not returned): the taken branch
    assert seen[("body", True)] == 10 and seen[("body", False)] == 0
    assert seen[("cond", True)] == 12
    assert seen[("true", True)] == 1 and seen[("false", True)] == 0
    np.testing.assert_allclose(got, sg.grad(loss, argnums=(0, 1))(0.3, 0.9), rtol=1e-12)


def test_eager_while_with_capacity_search_and_value() -> None:
    def f(x: Any) -> Any:
        return sg.while_loop(lambda s: s < 100.0, lambda s: s * 1.5 + 0.1, x)

    with body_calls() as seen:
        got = sg.grad(f, jit=False)(0.5)
    trips = seen[("body", True)] // 2
    assert trips > 10 and seen[("body", False)] == 0
    np.testing.assert_allclose(got, 1.5**trips, rtol=1e-12)
    np.testing.assert_allclose(sg.jit(f, jit=False)(0.5), sg.jit(f)(0.5), rtol=1e-12)


def test_eager_function_still_works_under_jax_transformations() -> None:
    g = sg.grad(
        lambda x, w: sg.while_loop(lambda s: s < 5.0, lambda s: s * w + 0.2, x, max_iters=30),
        argnums=1,
        jit=False,
    )
    want = sg.grad(
        lambda x, w: sg.while_loop(lambda s: s < 5.0, lambda s: s * w + 0.2, x, max_iters=30),
        argnums=1,
    )(0.5, 1.3)
    np.testing.assert_allclose(jax.jit(g)(0.5, 1.3), want, rtol=1e-12)
    np.testing.assert_allclose(
        jax.vmap(g, in_axes=(None, 0))(0.5, np.array([1.3, 1.3]))[0], want, rtol=1e-12
    )


@pytest.mark.parametrize("pred", [True, False])
def test_eager_cond_takes_one_branch(pred: bool) -> None:
    f = sg.jit(lambda p, x: sg.cond(p, lambda a: a + 1.0, lambda a: a - 1.0, x), jit=False)
    with body_calls() as seen:
        out = f(np.bool_(pred), 2.0)
    assert seen == Counter({("true" if pred else "false", True): 1})
    assert float(out) == (3.0 if pred else 1.0)
