"""jax.numpy's elementwise names that are aliases or short compositions of srcgrad ops
(acos, trunc, copysign, logical_xor, ldexp, modf, ...), with jax.numpy's dtype rules.

Layer L3 (the ops): see docs/design.md.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import jax.numpy as jnp

from .. import dtypes
from ..builder import as_var
from ..ir import Variable
from ._rules import jax_dtype, require_real
from .creation import full_like, zeros_like
from .declare import public
from .elementwise import (abs, arccos, arccosh, arcsin, arcsinh, arctan, arctan2, arctanh,
                          astype, ceil, conj, divide, equal, exp2, floor, floor_divide, imag, less,
                          logical_and, logical_not, logical_or, negative, not_equal, power, real,
                          remainder, round, where)
from .shape import concatenate, swapaxes, transpose

BOOL = dtypes.canonical(bool)


def _inexact(x: Any, like: Any = jnp.sin) -> Variable:
    x = as_var(x)
    return x if dtypes.is_inexact(x.dtype) else astype(x, jax_dtype(like, x.dtype))


def _pair(x1: Any, x2: Any) -> tuple[Variable, Variable]:
    if isinstance(x1, Variable):
        return x1, as_var(x2, like=x1)
    x2 = as_var(x2)
    return as_var(x1, like=x2), x2


@public
def acos(x: Any) -> Variable:
    """jnp.acos: arccos."""
    return arccos(x)


@public
def acosh(x: Any) -> Variable:
    """jnp.acosh: arccosh."""
    return arccosh(x)


@public
def asin(x: Any) -> Variable:
    """jnp.asin: arcsin."""
    return arcsin(x)


@public
def asinh(x: Any) -> Variable:
    """jnp.asinh: arcsinh."""
    return arcsinh(x)


@public
def atan(x: Any) -> Variable:
    """jnp.atan: arctan."""
    return arctan(x)


@public
def atanh(x: Any) -> Variable:
    """jnp.atanh: arctanh."""
    return arctanh(x)


@public
def atan2(x1: Any, x2: Any) -> Variable:
    """jnp.atan2: arctan2."""
    return arctan2(x1, x2)


@public
def pow(x1: Any, x2: Any) -> Variable:
    """jnp.pow: power."""
    return power(x1, x2)


@public
def around(a: Any, decimals: int = 0, out: None = None) -> Variable:
    """jnp.around: round (half to even), with `decimals`."""
    return _round(a, decimals)


def _round(a: Any, decimals: int) -> Variable:
    a = as_var(a)
    if decimals == 0:
        return round(a)
    if not dtypes.is_inexact(a.dtype):  # an integer has no digits after the point
        return a
    scale = 10.0 ** decimals
    return round(a * scale) / scale


@public
def rint(x: Any) -> Variable:
    """jnp.rint: round to the nearest integer, half to even (in a float dtype)."""
    return round(_inexact(x))


@public
def trunc(x: Any) -> Variable:
    """jnp.trunc: the integer part towards zero (zero gradient)."""
    x = as_var(x)
    if not dtypes.is_inexact(x.dtype):
        return x
    return where(less(x, 0), ceil(x), floor(x))


@public
def positive(x: Any) -> Variable:
    """jnp.positive: +x."""
    return as_var(x)


@public
def conjugate(x: Any) -> Variable:
    """jnp.conjugate: the same as conj."""
    return conj(x)


@public
def signbit(x: Any) -> Variable:
    """jnp.signbit: True where the sign bit is set (-0.0 included)."""
    x = as_var(x)
    require_real(x, what="signbit")
    if x.dtype == BOOL or x.dtype.kind == "u":
        return full_like(x, False, BOOL)
    if x.dtype.kind == "i":
        return less(x, 0)
    return where(equal(x, 0), less(divide(1.0, x), 0), less(x, 0))


@public
def copysign(x1: Any, x2: Any) -> Variable:
    """jnp.copysign: |x1| with the sign of x2 (its sign bit)."""
    x1, x2 = _pair(x1, x2)
    require_real(x1, x2, what="copysign")
    dt = jax_dtype(jnp.copysign, x1.dtype, x2.dtype)
    x1, x2 = astype(x1, dt), astype(x2, dt)
    mag = abs(x1)
    return where(signbit(x2), negative(mag), mag)


@public
def float_power(x1: Any, x2: Any) -> Variable:
    """jnp.float_power: power in the inexact dtype of the arguments."""
    x1, x2 = _pair(x1, x2)
    dt = jax_dtype(jnp.float_power, x1.dtype, x2.dtype)
    return power(astype(x1, dt), astype(x2, dt))


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


@public
def angle(z: Any, deg: bool = False) -> Variable:
    """jnp.angle: arctan2(imag(z), real(z)) (of a real `z`: arctan2(0, z), pi where z < 0
    or z is -0.0)."""
    z = as_var(z)
    if z.dtype.kind == "c":
        out = arctan2(imag(z), real(z))
    else:
        z = _inexact(z, jnp.angle)
        out = arctan2(zeros_like(z), z)
    return out * (180.0 / math.pi) if deg else out


def _bools(x: Any) -> Variable:
    x = as_var(x)
    return x if x.dtype == BOOL else astype(x, BOOL)


@public
def logical_xor(x1: Any, x2: Any) -> Variable:
    """jnp.logical_xor (non-bool inputs mean != 0)."""
    a, b = _bools(x1), _bools(x2)
    return logical_and(logical_or(a, b), logical_not(logical_and(a, b)))


@public
def ldexp(x1: Any, x2: Any) -> Variable:
    """jnp.ldexp: x1 * 2**x2 (x2 integer), differentiable in x1."""
    x1 = _inexact(x1, jnp.ldexp)
    require_real(x1, what="ldexp")
    return x1 * exp2(astype(as_var(x2), x1.dtype))


@public
def modf(x: Any, out: None = None) -> tuple[Variable, Variable]:
    """jnp.modf: (fractional part, integral part), both with the sign of x."""
    x = _inexact(x, jnp.modf)
    whole = where(x >= 0, floor(x), ceil(x))
    return x - whole, whole


@public
def divmod(x1: Any, x2: Any) -> tuple[Variable, Variable]:
    """jnp.divmod: (floor_divide, remainder)."""
    return floor_divide(x1, x2), remainder(x1, x2)


@public
def concat(arrays: Sequence[Any], /, *, axis: int | None = 0) -> Variable:
    """jnp.concat: concatenate (the array API name)."""
    return concatenate(arrays, axis)


@public
def permute_dims(a: Any, /, axes: Sequence[int]) -> Variable:
    """jnp.permute_dims: transpose (the array API name)."""
    return transpose(a, tuple(axes))


@public
def matrix_transpose(x: Any, /) -> Variable:
    """jnp.matrix_transpose: swap the last two axes."""
    return swapaxes(x, -1, -2)
