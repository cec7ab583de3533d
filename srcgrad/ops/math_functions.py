"""jax.numpy's mathematical functions that are aliases or short compositions of srcgrad ops
(acos, trunc, copysign, ldexp, modf, angle, interp, unwrap, i0, ...), with jax.numpy's dtype
rules, and the floating-point routines frexp, nextafter and spacing (rows lowered to jnp).

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterator, Sequence

import jax.numpy as jnp
import jax
import numpy as np

from ..base import dtypes
from ..core.registry import register
from ..core.builder import as_pair, as_var, emit
from ..ir.program import Op, Variable
from .rules import jax_dtype, norm_axis, require_real
from .creation import full_like, zeros_like
from ..core.declare import defop, public
from .elementwise import (
    abs as abs_,
    arccos,
    arccosh,
    arcsin,
    arcsinh,
    arctan,
    arctan2,
    arctanh,
    astype,
    ceil,
    clip,
    conj,
    divide,
    equal,
    exp2,
    floor,
    floor_divide,
    imag,
    less,
    negative,
    power,
    real,
    remainder,
    round,
    where,
)
from .shape import concatenate
from ..base.errors import ShapeError
from .operands import inexact, promoted
from .sorting import searchsorted
from . import elementwise
from ..core.registry import OutType
from .special import i0e
from .cumulative import cumsum, diff
from .manip import moveaxis
from .reduce import sum

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
    scale = 10.0**decimals
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
def interp(
    x: Any, xp: Any, fp: Any, left: Any = None, right: Any = None, period: Any = None
) -> Variable:
    """jnp.interp: piecewise-linear interpolation of (xp, fp) at x (xp increasing),
    differentiable in x and fp."""
    if period is not None:
        raise ShapeError("interp's period= is not supported", op="interp")
    x, xp = promoted(x, xp, inexact=True)
    (fp,) = promoted(fp, inexact=True)  # (complex values of fp interpolate, as in JAX)
    require_real(x, what="interp's x (with xp)")
    n = xp.shape[0]
    i = clip(searchsorted(xp, x, side="right"), 1, n - 1)
    from .indexing import take

    x0, x1 = take(xp, i - 1), take(xp, i)
    y0, y1 = take(fp, i - 1), take(fp, i)
    dx = x1 - x0
    t = where(dx == 0, 0.0, (x - x0) / where(dx == 0, 1.0, dx))
    out = y0 + t * (y1 - y0)
    out = where(x < xp[0], fp[0] if left is None else left, out)
    return where(x > xp[-1], fp[-1] if right is None else right, out)


@public
def i0(x: Any) -> Variable:
    """jnp.i0: the modified Bessel function of order 0, as i0e(x) * exp(|x|) (|x| written
    x * sign(x), whose slope is 0 at 0, as jnp.i0's)."""
    x = inexact(x)
    return elementwise.multiply(
        i0e(x), elementwise.exp(elementwise.multiply(x, elementwise.sign(x)))
    )


def _jnp_rule(name: str, index: int | None = None) -> Callable[..., list[OutType]]:
    """The shape/dtype rule of jnp.<name> on the inputs, taken from jax itself."""

    def infer(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
        structs = [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in inputs]
        try:
            out = jax.eval_shape(getattr(jnp, name), *structs)
        except (TypeError, ValueError) as e:
            raise ShapeError(
                f"{name} takes floating-point arrays, got "
                f"{', '.join(v.type_str() for v in inputs)}: {e}"
            ) from None
        return [(tuple(o.shape), np.dtype(o.dtype)) for o in jax.tree_util.tree_leaves(out)]

    return infer


def _g_frexp(op: Op, g: list, need: list) -> Iterator[Variable | None]:
    """d mantissa / dx = 2**-exponent = mantissa / x (1 at 0 and at non-finite x, as jax)."""
    x, m = op.inputs[0], op.outputs[0]
    ok = elementwise.logical_and(elementwise.isfinite(x), elementwise.not_equal(x, 0.0))
    yield elementwise.multiply(
        g[0], elementwise.where(ok, elementwise.divide(m, elementwise.where(ok, x, 1.0)), 1.0)
    )


register("frexp", _jnp_rule("frexp"), "jnp.frexp({0})", _g_frexp, public="frexp")


@public
def frexp(x: Any) -> tuple[Variable, Variable]:
    """jnp.frexp: mantissa in [0.5, 1) (signed) and int32 exponent, x = m * 2**e;
    differentiable in the mantissa (the exponent is piecewise constant)."""
    m, e = emit("frexp", [inexact(x)])
    return m, e


@defop("nextafter", _jnp_rule("nextafter"), "jnp.nextafter({0}, {1})", None)
def nextafter(x1: Any, x2: Any) -> tuple[list[Variable], dict]:
    """jnp.nextafter: the next representable value after x1 towards x2 (no gradient, as jax)."""
    a, b = as_pair(x1, x2)
    return [inexact(a), inexact(b)], {}


@defop("spacing", _jnp_rule("spacing"), "jnp.spacing({0})", None)
def spacing(x: Any) -> tuple[list[Variable], dict]:
    """jnp.spacing: the distance to the next representable value away from 0 (no gradient)."""
    return [inexact(x)], {}


@public
def unwrap(p: Any, discont: Any = None, axis: int = -1, period: float = 2 * math.pi) -> Variable:
    """jnp.unwrap: remove jumps larger than `discont` (default period / 2) along `axis`."""
    p = as_var(p)
    if not dtypes.is_inexact(p.dtype):
        p = astype(p, dtypes.default_float())
    half = period / 2
    discont = half if discont is None else discont
    dd = diff(p, axis=axis)
    ddmod = (dd + half) % period - half
    ddmod = where((ddmod == -half) & (dd > 0), half, ddmod)
    correction = where(abs_(dd) < discont, 0.0, ddmod - dd)
    cum = cumsum(correction, axis=axis)
    ax = norm_axis(axis, p.ndim)
    zero_shape = p.shape[:ax] + (1,) + p.shape[ax + 1 :]
    from .creation import zeros

    return p + concatenate([zeros(zero_shape, p.dtype), cum], ax)


@public
def trapezoid(y: Any, x: Any = None, dx: float = 1.0, axis: int = -1) -> Variable:
    """jnp.trapezoid: the trapezoidal rule along `axis`."""
    y = promoted(y, inexact=True)[0]
    y = moveaxis(y, axis, -1)
    if x is None:
        d: Any = dx
    else:
        xv = moveaxis(as_var(x), axis, -1) if as_var(x).ndim > 1 else as_var(x)
        d = diff(xv, axis=-1)
    return sum(d * (y[..., 1:] + y[..., :-1]), -1) * 0.5
