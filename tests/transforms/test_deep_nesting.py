"""Deep nesting: block functions are emitted at top level, so depth is not bounded by Python.

300 nested `cond`s (Python's indentation limit is 100) and 50 nested `while` loops, forward
and gradient, against jax.numpy references. XLA's compile time grows steeply with nesting
(about two minutes at 200 nested conditionals; 300 crash it), so these run the emitted
source eagerly under `jax.disable_jit()`, where lax.cond and lax.while_loop run the branch
or body in Python.

The gradient of D nested conds passes each level's residuals out through every enclosing
branch (D^2/2 branch outputs, as JAX's own partial evaluation of nested conds does), so its
cost grows with D^2: the suite differentiates 100 levels (past Python's limit of 99) and
`SRCGRAD_DEEP_GRAD_DEPTH=300` differentiates 300 (about 30 s; 100 levels take about 6 s).
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any, Iterator

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import srcgrad as sg

COND_DEPTH = 300
GRAD_DEPTH = int(os.environ.get("SRCGRAD_DEEP_GRAD_DEPTH", "100"))
WHILE_DEPTH = 50


@pytest.fixture(autouse=True)
def deep_recursion() -> Iterator[None]:
    """Tracing a program nested this deep recurses once per level (the user's code, too)."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 30_000))
    yield
    sys.setrecursionlimit(old)


def _thresholds(depth: int) -> list[float]:
    """Level d takes its true branch when d is even and its false branch when d is odd."""
    return [-1e3 if d % 2 == 0 else 1e3 for d in range(depth)]


def nested_conds(x: Any, w: Any, depth: int = COND_DEPTH) -> Any:
    """`depth` nested sg.conds; the deeper level sits in the branch the data selects."""
    limits = _thresholds(depth)

    def level(v: Any, d: int) -> Any:
        if d == depth:
            return sg.sum(sg.sin(v) * w)
        deeper = lambda u: level(u * 0.99 + w * 0.01, d + 1)
        leaf = lambda u: sg.sum(sg.cos(u)) + float(d)
        pred = sg.sum(v) > limits[d]
        return sg.cond(pred, deeper, leaf, v) if d % 2 == 0 else sg.cond(pred, leaf, deeper, v)

    return level(x, 0)


def nested_conds_jnp(x: Any, w: Any, depth: int = COND_DEPTH) -> Any:
    """The same function in jax.numpy: each cond as a `where` of both branches."""
    limits = _thresholds(depth)
    vs = [x]
    for _ in range(depth):
        vs.append(vs[-1] * 0.99 + w * 0.01)
    out = jnp.sum(jnp.sin(vs[depth]) * w)
    for d in reversed(range(depth)):
        pred = jnp.sum(vs[d]) > limits[d]
        leaf = jnp.sum(jnp.cos(vs[d])) + float(d)
        out = jnp.where(pred, out, leaf) if d % 2 == 0 else jnp.where(pred, leaf, out)
    return out


X = np.array([0.3, -0.2, 0.5])
W = np.array([1.1, 0.7, -0.4])


def _assert_flat(src: str) -> None:
    """Every function is defined at top level and no line is indented more than one level."""
    compile(src, "<deep>", "exec")
    assert not re.search(r"^[ \t]+def ", src, flags=re.M)
    assert max(len(line) - len(line.lstrip()) for line in src.splitlines()) == 4


def test_300_nested_conds_forward_matches_jax() -> None:
    src = sg.source(nested_conds, X, W)
    _assert_flat(src)
    assert len(re.findall(r"^def (true|false)_\d+\(", src, flags=re.M)) == 2 * COND_DEPTH
    with jax.disable_jit():
        value = sg.jit(nested_conds)(X, W)
        want = nested_conds_jnp(X, W)
    np.testing.assert_allclose(value, want, rtol=1e-12)


def test_nested_conds_gradient_matches_jax() -> None:
    f = lambda x, w: nested_conds(x, w, GRAD_DEPTH)
    f_jnp = lambda x, w: nested_conds_jnp(x, w, GRAD_DEPTH)
    with jax.disable_jit():  # 100 levels and more raised IndentationError before
        gx, gw = sg.grad(f, (0, 1))(X, W)
        wx, ww = jax.grad(f_jnp, (0, 1))(X, W)
    np.testing.assert_allclose(gx, wx, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(gw, ww, rtol=1e-10, atol=1e-14)
    assert np.abs(wx).max() > 1e-3  # the gradient reaches the bottom level


def nested_whiles(x: Any, w: Any, depth: int = WHILE_DEPTH) -> Any:
    """`depth` nested sg.while_loops: the outer ones run once, the innermost until s >= 2."""

    def level(s: Any, d: int) -> Any:
        if d == depth:
            return sg.while_loop(
                lambda t: sg.sum(t) < 2.0, lambda t: t * 1.3 + sg.sin(t) * w, s, max_iters=40
            )

        def body(carry: Any) -> Any:
            t, i = carry
            return level(t * 0.98 + w * 0.02, d + 1), i + 1

        return sg.while_loop(lambda carry: carry[1] < 1, body, (s, 0), max_iters=1)[0]

    return sg.sum(level(x, 0) * w)


def nested_whiles_jnp(x: Any, w: Any, trips: int, depth: int = WHILE_DEPTH) -> Any:
    """The same function in jax.numpy, unrolled at the innermost loop's concrete trip count."""
    s = x
    for _ in range(depth):
        s = s * 0.98 + w * 0.02
    for _ in range(trips):
        s = s * 1.3 + jnp.sin(s) * w
    return jnp.sum(s * w)


def _inner_trips(x: np.ndarray, w: np.ndarray, depth: int = WHILE_DEPTH) -> int:
    s = x
    for _ in range(depth):
        s = s * 0.98 + w * 0.02
    trips = 0
    while np.sum(s) < 2.0:
        s, trips = s * 1.3 + np.sin(s) * w, trips + 1
    return trips


def test_50_nested_while_loops_forward_and_gradient_match_jax() -> None:
    xv, wv = np.array([0.1, 0.05, 0.08]), np.array([0.2, 0.3, 0.1])
    trips = _inner_trips(xv, wv)
    assert trips > 2
    with jax.disable_jit():
        value = sg.jit(nested_whiles)(xv, wv)
        gx, gw = sg.grad(nested_whiles, (0, 1))(xv, wv)
        want = nested_whiles_jnp(xv, wv, trips)
        wx, ww = jax.grad(nested_whiles_jnp, (0, 1))(xv, wv, trips)
    np.testing.assert_allclose(value, want, rtol=1e-12)
    np.testing.assert_allclose(gx, wx, rtol=1e-10)
    np.testing.assert_allclose(gw, ww, rtol=1e-10)
    _assert_flat(sg.source(sg.grad(nested_whiles, (0, 1)), xv, wv))


def _outer_cond(x: Any, w: Any, depth: int) -> Any:
    """`depth` nested conds under one outer cond written on its own line."""
    return sg.cond(
        sg.sum(x) > -1e3, lambda v: nested_conds(v, w, depth - 1), lambda v: sg.sum(v), x
    )


def test_compiling_past_the_nesting_limit_names_the_limit_and_the_outer_line() -> None:
    """Compiled (jax.jit), 150 nested conds ended in a raw RecursionError deep inside JAX;
    past MAX_COMPILED_NESTING levels srcgrad refuses, naming the limit and the outer cond."""
    from srcgrad.transforms.loading import MAX_COMPILED_NESTING

    depth = MAX_COMPILED_NESTING + 1
    outer = f"test_deep_nesting.py:{_outer_cond.__code__.co_firstlineno + 2}"
    with pytest.raises(
        sg.SrcgradError,
        match=rf"nest {depth} deep, past the "
        rf"{MAX_COMPILED_NESTING} levels .*the nesting starts at .*{outer}\. ",
    ):
        sg.jit(lambda x, w: _outer_cond(x, w, depth))(X, W)


def test_compiled_nesting_within_the_limit_does_not_need_a_higher_recursion_limit() -> None:
    """JAX's trace of the emitted code recurses about 7 frames per level; srcgrad makes room
    for it, so a program its own trace could build compiles under the same recursion limit."""
    here, frame = 0, sys._getframe()
    while frame is not None:
        here, frame = here + 1, frame.f_back
    depth = 50
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(here + 5 * depth + 60)  # srcgrad's trace needs about 4 a level
    try:
        got = sg.jit(lambda x, w: nested_conds(x, w, depth))(X, W)
    finally:
        sys.setrecursionlimit(old)
    np.testing.assert_allclose(got, nested_conds_jnp(X, W, depth), rtol=1e-12)
