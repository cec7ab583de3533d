"""Programs whose printed IR and emitted source are golden-tested (tests/ir/test_golden.py).

The goldens quote this file's name and line numbers (every op records the user line that
made it, and the ops `sg.grad` adds record the line that traced it), so edits here change
the goldens: rerun the tests with SRCGRAD_UPDATE_GOLDEN=1 and review the diff.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

import srcgrad as sg


def mlp_loss(params: dict, x: Any, y: Any) -> Any:
    """Mean squared error of a two-layer tanh MLP."""
    h = sg.tanh(x @ params["w1"] + params["b1"])
    out = h @ params["w2"] + params["b2"]
    return sg.mean((out - y) ** 2)


def newton_sqrt(a: Any) -> Any:
    """sqrt(a) by Newton's method: the trip count depends on `a`."""
    def not_converged(x: Any) -> Any:
        return sg.abs(x * x - a) > 1e-12

    def step(x: Any) -> Any:
        return 0.5 * (x + a / x)
    return sg.while_loop(not_converged, step, a)


def nested_cond(x: Any, y: Any) -> Any:
    """A cond inside a cond branch; the predicates depend on the data."""
    def outer_true(x: Any, y: Any) -> Any:
        return sg.cond(y > 0.0, lambda v: sg.sin(v) * y, lambda v: v * v, x)

    def outer_false(x: Any, y: Any) -> Any:
        return sg.exp(x) - y
    return sg.sum(sg.cond(sg.sum(x) > 0.0, outer_true, outer_false, x, y))


def mlp_args() -> tuple:
    rng = np.random.default_rng(0)
    params = {"w1": rng.standard_normal((3, 4)).astype(np.float32),
              "b1": np.zeros(4, np.float32),
              "w2": rng.standard_normal((4, 1)).astype(np.float32),
              "b2": np.zeros(1, np.float32)}
    return params, np.ones((8, 3), np.float32), np.ones((8, 1), np.float32)


def newton_args() -> tuple:
    return (np.float64(2.0),)


def nested_cond_args() -> tuple:
    return np.array([0.5, 1.5]), np.float64(2.0)


PROGRAMS: dict[str, tuple[Callable[..., Any], Callable[[], tuple], Any]] = {
    "mlp": (mlp_loss, mlp_args, 0),
    "while": (newton_sqrt, newton_args, 0),
    "nested_cond": (nested_cond, nested_cond_args, (0, 1)),
}


def render(name: str, kind: str) -> str:
    """One golden text: `ir`, `source`, `grad_ir` or `grad_source` of a program."""
    fun, make_args, argnums = PROGRAMS[name]
    args = make_args()
    if kind == "ir":
        return str(sg.trace(fun, *args))
    if kind == "source":
        return sg.source(fun, *args)
    if kind == "grad_ir":
        return str(sg.trace(sg.grad(fun, argnums), *args))
    if kind == "grad_source":
        return sg.source(sg.grad(fun, argnums), *args)
    raise ValueError(f"unknown golden kind {kind!r}")
