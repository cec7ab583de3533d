"""Python's operators on integer and bool values follow jax.numpy, in every mode.

`&`, `|`, `^`, `~` are logical on bools and bitwise on integers (`~5 == -6`, `6 & 3 == 2`);
`<<`, `>>`, `//`, `%`, `**`, `-` and `abs` keep jnp's signs, wrap-around and dtypes. One
table: every operator x {bool, int32, uint8, int64} x a Python int on neither, the left or the
right side, compared with jax.numpy's result (value and dtype; where jnp refuses, srcgrad must
raise a SrcgradError), computed under `sg.jit`, eagerly through the one method table, and on
Tensors under `sg.autograd.record()`.
"""

from __future__ import annotations

import operator
from functools import lru_cache
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import srcgrad as sg
from srcgrad.base.errors import SrcgradError
from srcgrad.ops import methods

DTYPES = [np.bool_, np.int32, np.uint8, np.int64]
BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "and": operator.and_,
    "or": operator.or_,
    "xor": operator.xor,
    "lshift": operator.lshift,
    "rshift": operator.rshift,
    "floordiv": operator.floordiv,
    "mod": operator.mod,
    "pow": operator.pow,
}
UNARY: dict[str, Callable[[Any], Any]] = {
    "invert": operator.invert,
    "neg": operator.neg,
    "abs": operator.abs,
}
#: Operand sides: both arrays, a Python int on the left, on the right, a Python bool.
SIDES = ["xy", "3x", "x3", "Tx"]


def _data(dt: Any) -> tuple[np.ndarray, np.ndarray]:
    """Operands with negative values (signed), zeros on the left, none on the right (`//`)."""
    if dt is np.bool_:
        return np.array([True, False, True, False]), np.array([True, True, True, True])
    if np.dtype(dt).kind == "u":
        return np.array([5, 0, 250, 6], dt), np.array([3, 1, 7, 2], dt)
    return np.array([5, -7, 0, 6, -1], dt), np.array([3, 2, -4, 1, 3], dt)


def _call(name: str, side: str, x: Any, y: Any) -> Any:
    if name in UNARY:
        return UNARY[name](x)
    f = BINARY[name]
    return {
        "xy": lambda: f(x, y),
        "3x": lambda: f(3, x),
        "x3": lambda: f(x, 3),
        "Tx": lambda: f(True, x),
    }[side]()


def _table_call(name: str, side: str, x: Any, y: Any) -> Any:
    """The same call through the one method table's entries (eager on concrete arrays)."""
    t = methods.table()
    if name in UNARY:
        return t[f"__{name}__"](x)
    return {
        "xy": lambda: t[f"__{name}__"](x, y),
        "3x": lambda: t[f"__r{name}__"](x, 3),
        "x3": lambda: t[f"__{name}__"](x, 3),
        "Tx": lambda: t[f"__r{name}__"](x, True),
    }[side]()


CASES = [
    (dt, name, side)
    for dt in DTYPES
    for name in [*BINARY, *UNARY]
    for side in (SIDES if name in BINARY else ["x"])
]


@lru_cache(maxsize=None)
def _cases(dt: Any) -> list[tuple]:
    """(name, side, x, y, jnp's result or None where jnp refuses) for every case on `dt`; jnp's
    results computed in one jax.jit program."""
    x, y = _data(dt)
    rows = []
    for d, name, side in CASES:
        if d is not dt:
            continue
        b = np.abs(y) % 3 if name == "pow" and dt is not np.bool_ else y  # small exponents
        try:
            jax.eval_shape(lambda a, c: _call(name, side, a, c), x, b)
            rows.append([name, side, x, b, True])
        except TypeError:
            rows.append([name, side, x, b, None])
    ok = [r for r in rows if r[4]]
    outs = jax.jit(
        lambda *xy: [_call(r[0], r[1], xy[2 * i], xy[2 * i + 1]) for i, r in enumerate(ok)]
    )(*[a for r in ok for a in r[2:4]])
    for r, out in zip(ok, outs):
        r[4] = out
    return [tuple(r) for r in rows]


def _check(got: Any, want: Any, what: str) -> None:
    got = got.numpy() if isinstance(got, sg.Tensor) else np.asarray(got)
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, jnp {want.dtype}"
    np.testing.assert_array_equal(got, np.asarray(want), err_msg=what)


def _rotated(dt: Any) -> list[tuple]:
    """One side per operator, rotated across operators and dtypes: each operator on each
    dtype once, each side on each dtype and operator somewhere in the table."""
    k = DTYPES.index(dt)
    return [
        c
        for i, name in enumerate([*BINARY, *UNARY])
        for c in _cases(dt)
        if c[0] == name and c[1] in (SIDES[(i + k) % 4], "x")
    ]


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_traced_operators_match_jax_numpy(dt: Any) -> None:
    """Every operator on `dt` with every side, in one sg.jit program; where jnp refuses,
    srcgrad raises."""
    cases = _cases(dt)
    ok = [c for c in cases if c[4] is not None]
    traced = sg.jit(
        lambda *xy: [_call(n, s, xy[2 * i], xy[2 * i + 1]) for i, (n, s, *_) in enumerate(ok)]
    )(*[a for c in ok for a in c[2:4]])
    for (name, side, x, y, want), got in zip(ok, traced):
        _check(got, want, f"traced {name} {side} {x.dtype}")
    for name, side, x, y, _ in (c for c in cases if c[4] is None):
        with pytest.raises(SrcgradError):
            sg.jit(lambda a, b: _call(name, side, a, b))(x, y)
        with pytest.raises(SrcgradError):
            _table_call(name, side, jnp.asarray(x), jnp.asarray(y))


def _eager_and_recorded(cases: list[tuple]) -> None:
    for name, side, x, y, want in (c for c in cases if c[4] is not None):
        _check(
            _table_call(name, side, jnp.asarray(x), jnp.asarray(y)), want, f"eager {name} {side}"
        )
        with sg.autograd.record():
            rec = _call(name, side, sg.tensor(x), sg.tensor(y))
        _check(rec, want, f"record() {name} {side}")


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_eager_and_recorded_operators_match_jax_numpy(dt: Any) -> None:
    """Every operator on `dt` eagerly (the method table on arrays) and on Tensors under
    record(), one side each (rotated; every side of every operator: the slow test)."""
    _eager_and_recorded(_rotated(dt))


@pytest.mark.slow
@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_eager_and_recorded_every_side(dt: Any) -> None:
    """As above, with every side of every operator."""
    _eager_and_recorded(_cases(dt))


def test_bitwise_examples() -> None:
    """The examples of the docs: `~5 == -6`, `6 & 3 == 2`, `3 & x` on a traced int."""
    f = sg.jit(lambda x: (~x, x & 3, 3 & x, x | 1, x ^ 2))
    inv, a, ra, o, xo = f(np.array([5, 6], np.int32))
    np.testing.assert_array_equal(inv, [-6, -7])
    np.testing.assert_array_equal(a, [1, 2])
    np.testing.assert_array_equal(ra, [1, 2])
    np.testing.assert_array_equal(o, [5, 7])
    np.testing.assert_array_equal(xo, [7, 4])
