"""jax.numpy's logic functions beyond the elementwise rows: truth tests over axes (all, any),
whole-array comparisons with tolerances (isclose, allclose, array_equal, array_equiv), value
and type tests (isneginf, isposinf, isreal, iscomplex) and logical_xor.

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..base import dtypes
from ..base.errors import ShapeError
from ..core.builder import as_var
from ..core.declare import public
from ..ir.program import Variable
from .creation import full, full_like
from .elementwise import (
    abs,
    astype,
    equal,
    imag,
    isfinite,
    isnan,
    logical_and,
    logical_not,
    logical_or,
    not_equal,
    where,
)
from .operands import promoted
from .reduce import Axis, refuse_out, sum
from .rules import broadcast_shapes, require_real

BOOL = np.dtype(bool)


@public
def isclose(
    a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
) -> Variable:
    """jnp.isclose: |a - b| <= atol + rtol * |b| (infinities equal to themselves)."""
    a, b = promoted(a, b)
    if not dtypes.is_inexact(a.dtype):
        return a == b
    finite = logical_and(isfinite(a), isfinite(b))
    close = abs(a - b) <= atol + rtol * abs(b)
    out = where(finite, close, a == b)
    if equal_nan:
        out = out | logical_and(isnan(a), isnan(b))
    return out


@public
def allclose(
    a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
) -> Variable:
    """jnp.allclose: all(isclose(...)), a bool scalar."""
    return all(isclose(a, b, rtol, atol, equal_nan))


@public
def array_equal(a1: Any, a2: Any, equal_nan: bool = False) -> Variable:
    """jnp.array_equal: same shape (static: else False) and all elements equal."""
    a1, a2 = as_var(a1), as_var(a2)
    if a1.shape != a2.shape:
        return full((), False, BOOL)
    eq = a1 == a2
    if equal_nan and dtypes.is_inexact(dtypes.promote(a1.dtype, a2.dtype)):
        eq = eq | logical_and(isnan(a1), isnan(a2))
    return all(eq)


@public
def array_equiv(a1: Any, a2: Any) -> Variable:
    """jnp.array_equiv: broadcastable (static: else False) and all elements equal."""
    a1, a2 = as_var(a1), as_var(a2)
    try:
        broadcast_shapes(a1.shape, a2.shape)
    except ShapeError:
        return full((), False, BOOL)
    return all(a1 == a2)


def as_bool(x: Variable) -> Variable:
    """`x` as bools: itself if it is bool, else `x != 0`."""
    return x if x.dtype == BOOL else x != 0


@public
def all(
    a: Any, axis: Axis = None, out: None = None, keepdims: bool = False, *, where: Any = None
) -> Variable:
    """jnp.all: True where no element (along `axis`) is zero."""
    refuse_out("all", out)
    b = logical_not(as_bool(as_var(a)))
    if where is not None:
        b = b & as_bool(as_var(where))
    return sum(b, axis, keepdims=keepdims) == 0


@public
def any(
    a: Any, axis: Axis = None, out: None = None, keepdims: bool = False, *, where: Any = None
) -> Variable:
    """jnp.any: True where some element (along `axis`) is nonzero."""
    refuse_out("any", out)
    b = as_bool(as_var(a))
    if where is not None:
        b = b & as_bool(as_var(where))
    return sum(b, axis, keepdims=keepdims) > 0


@public
def isneginf(x: Any, out: None = None) -> Variable:
    """jnp.isneginf: x == -inf."""
    x = as_var(x)
    require_real(x, what="isneginf")
    return equal(x, -math.inf) if dtypes.is_inexact(x.dtype) else full_like(x, False, BOOL)


@public
def isposinf(x: Any, out: None = None) -> Variable:
    """jnp.isposinf: x == +inf."""
    x = as_var(x)
    require_real(x, what="isposinf")
    return equal(x, math.inf) if dtypes.is_inexact(x.dtype) else full_like(x, False, BOOL)


@public
def isreal(x: Any) -> Variable:
    """jnp.isreal: imag(x) == 0 (True everywhere for a real `x`)."""
    x = as_var(x)
    return equal(imag(x), 0) if x.dtype.kind == "c" else full_like(x, True, BOOL)


@public
def iscomplex(x: Any) -> Variable:
    """jnp.iscomplex: imag(x) != 0 (False everywhere for a real `x`)."""
    x = as_var(x)
    return not_equal(imag(x), 0) if x.dtype.kind == "c" else full_like(x, False, BOOL)


def _bools(x: Any) -> Variable:
    x = as_var(x)
    return x if x.dtype == BOOL else astype(x, BOOL)


@public
def logical_xor(x1: Any, x2: Any) -> Variable:
    """jnp.logical_xor (non-bool inputs mean != 0)."""
    a, b = _bools(x1), _bools(x2)
    return logical_and(logical_or(a, b), logical_not(logical_and(a, b)))
