"""Elementwise math, comparisons, logic, `where` and casts: one declaration per op.

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterator, Sequence

import jax
import jax.numpy as jnp
import jax.scipy.special
import numpy as np
from jax import lax

from ..base import dtypes
from ..core.builder import as_pair, as_var, emit
from ..base.errors import ShapeError
from ..ir.program import Op, Variable
from ..core.registry import (
    LINEAR,
    MULTILINEAR,
    REGISTRY,
    REMAT_INDEX,
    ZERO,
    GradSpec,
    OutType,
    f32_f64,
)
from .rules import broadcast_shapes, jax_dtype, require_real, same
from .creation import zeros_like
from ..core.declare import defop, named, public


def _jvp_add(op: Op, ts: list, tangents: Any) -> list:
    tx, ty = ts
    if tx is not None and ty is not None:
        return emit(op.type, [tx, ty])
    if tx is None:
        tx = ty if op.type == "add" else negative(ty)
    return [tx]  # forward mode broadcasts it to the output's shape


def _jvp_divide(op: Op, ts: list, tangents: Any) -> list:
    """d(x / y) = (dx - out * dy) / y."""
    tx, ty = ts
    y, out = op.inputs[1], op.outputs[0]
    if ty is None:
        return [divide(tx, y)]
    num = negative(multiply(out, ty)) if tx is None else subtract(tx, multiply(out, ty))
    return [divide(num, y)]


ArrayLike = Any
BOOL = np.dtype(bool)


# ---------------------------------------------------------------- shape/dtype rules


def _jax_says(jfn: Callable[..., Any], *xs: Variable) -> np.dtype:
    """JAX's result dtype for `jfn` on these inputs' dtypes, or its refusal as a ShapeError."""
    try:
        return jax_dtype(jfn, *(x.dtype for x in xs))
    except (TypeError, ValueError):
        name = getattr(jfn, "__name__", "the function")
        raise ShapeError(
            f"JAX's {name} does not take {' and '.join(x.type_str() for x in xs)}"
        ) from None


def unary_rule(jfn: Callable[..., Any], float_only: bool) -> Callable[..., list[OutType]]:
    """The shape/dtype rule of a unary elementwise op whose jnp twin is `jfn`."""

    def infer(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
        x = inputs[0]
        if dtypes.is_float(x.dtype) or not (float_only or x.dtype.kind in "bc"):
            return [(x.shape, x.dtype)]
        # JAX's dtype for an integer (floating ops), bool or complex input, or its refusal
        return [(x.shape, _jax_says(jfn, x))]

    return infer


def binary_rule(kind: str, jfn: Callable[..., Any]) -> Callable[..., list[OutType]]:
    """The shape/dtype rule of a broadcasting binary op of `kind` (arith, divide, ...) whose
    jnp twin is `jfn`."""

    def infer(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
        x, y = inputs
        shape = broadcast_shapes(x.shape, y.shape)
        if x.dtype.kind == "c" or y.dtype.kind == "c":  # JAX's dtype, or its refusal
            return [(shape, _jax_says(jfn, x, y))]
        if kind == "compare":
            return [(shape, BOOL)]
        if kind == "logic":
            if x.dtype != BOOL or y.dtype != BOOL:
                raise ShapeError("logical ops need bool inputs")
            return [(shape, BOOL)]
        dt = dtypes.promote(x.dtype, y.dtype)
        if kind in ("divide", "float") and not dtypes.is_inexact(dt):
            dt = jax_dtype(jnp.true_divide, dt, dt)
        if kind in ("power", "intdiv") and dt == BOOL:  # jnp computes these on bools as ints
            dt = jax_dtype(jnp.power, dt, dt)
        return [(shape, dt)]

    return infer


def _where_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    c, x, y = inputs
    if c.dtype != BOOL:
        raise ShapeError(f"where needs a bool condition, got {c.type_str()}")
    return [(broadcast_shapes(c.shape, x.shape, y.shape), dtypes.promote(x.dtype, y.dtype))]


def _cast_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    return [(inputs[0].shape, attrs["dtype"])]


# ---------------------------------------------------------------- the two op families


def unary(
    name: str,
    lower: str,
    grad: GradSpec,
    floating: bool = False,
    like: Callable[..., Any] | None = None,
    fast: bool = False,
    **knobs: Any,
) -> Callable[[ArrayLike], Variable]:
    """Declare an elementwise op of one argument.

    `floating`: integer and bool inputs are cast to the float dtype JAX gives `like` (default
    jnp.<name>) on them; otherwise every dtype keeps its own. A complex input takes the dtype
    `like` gives it, or its refusal: `like` must be the function the lowering calls, or one
    that agrees with it on complex values. `fast`: float32/float64 inputs lower to
    `lax.<name>`. `knobs`: defop's jvp and remat.
    """

    def front(x: ArrayLike) -> tuple[list[Variable], dict]:
        x = as_var(x)
        # An inexact input keeps its dtype under every unary rule; others are cast first.
        if not dtypes.is_inexact(x.dtype):
            x = astype(x, REGISTRY[name].infer([x], {})[0][1])
        return [x], {}

    named(front, name, f"Elementwise {name} (jax.numpy semantics).")
    if fast:
        knobs["fast"] = (f"lax.{name}({{0}})", f32_f64)
    return defop(
        name,
        unary_rule(like or getattr(jnp, name), floating),
        lower,
        grad,
        operands=("x",),
        **knobs,
    )(front)


def binary(
    name: str,
    lower: str,
    grad: GradSpec,
    kind: str = "arith",
    doc: str | None = None,
    export: bool | str = True,
    **knobs: Any,
) -> Callable[[ArrayLike, ArrayLike], Variable]:
    """Declare an elementwise op of two broadcasting arguments (`kind` picks the dtype rule).

    A Python scalar takes the other argument's dtype, as JAX's weak types do.
    """

    def front(x: ArrayLike, y: ArrayLike) -> tuple[list[Variable], dict]:
        x, y = as_pair(x, y)
        return [x, y], {}

    named(front, name, doc or f"Elementwise {name} with NumPy broadcasting (jax.numpy semantics).")
    return defop(
        name,
        binary_rule(kind, getattr(jnp, name)),
        lower,
        grad,
        export=export,
        operands=("x", "y"),
        **knobs,
    )(front)


# ---------------------------------------------------------------- grad makers shared by rows


def _g_integer_pow(op: Op, g: Variable) -> Variable:
    y = op.attrs["y"]
    x = op.inputs[0]
    if y == 0:
        return zeros_like(x)
    if y == 1:
        return g
    base = x if y == 2 else integer_pow(x, y - 1)
    return g * (base * float(y))


def _g_divide(op: Op, g: list, need: list) -> Iterator[Variable | None]:
    x, y = op.inputs
    gx = g[0] / y
    yield gx if need[0] else None
    yield negative(gx * op.outputs[0]) if need[1] else None


def _g_power(op: Op, g: list, need: list) -> Iterator[Variable | None]:
    out = op.outputs[0]
    # Work in the result's dtype, as the forward promotion does (log(x) of an f32 base that
    # meets an f64 exponent is taken in f64).
    x, y = (astype(v, out.dtype) for v in op.inputs)
    yield g[0] * where(y == 0, 0.0, y * power(x, y - 1.0)) if need[0] else None
    yield g[0] * (out * log(where(x == 0, 1.0, x))) if need[1] else None


def _g_chooser(op: Op, g: list, need: list) -> Iterator[Variable | None]:
    """JAX's balanced rule: the input equal to the result takes the gradient, half each on a
    tie; where the result is NaN neither input equals it, so both take 0 (as jax.grad)."""
    x, y = op.inputs
    out = op.outputs[0]
    x_is, y_is = x == out, y == out
    yield g[0] * astype(where(x_is, where(y_is, 0.5, 1.0), 0.0), g[0].dtype) if need[0] else None
    yield g[0] * astype(where(y_is, where(x_is, 0.5, 1.0), 0.0), g[0].dtype) if need[1] else None


def _g_where(op: Op, g: list, need: list) -> Iterator[Variable | None]:
    c = op.inputs[0]
    yield None
    yield where(c, g[0], 0.0) if need[1] else None
    yield where(c, 0.0, g[0]) if need[2] else None


def _g_abs(op: Op, g: Variable) -> Variable:
    """JAX's: slope +1 at 0; of a complex x, g * conj(x) / |x| (0 where |x| is 0)."""
    x = op.inputs[0]
    if x.dtype.kind == "c":
        out = op.outputs[0]
        return astype(g, x.dtype) * (conj(x) / astype(where(out == 0.0, 1.0, out), x.dtype))
    return where(x >= 0, g, negative(g))


def _g_hypot(op: Op, g: list, need: list) -> Iterator[Variable | None]:
    """jax.grad's gradient of jnp.hypot, which computes hi * sqrt(1 + (lo / hi)**2) from the
    larger and smaller magnitude (hi where hi is 0, inf where an input is inf): x / hypot away
    from the origin, a half to each input at it (maximum's tie), NaN at an infinite input."""
    x1, x2 = (astype(v, op.outputs[0].dtype) for v in op.inputs)
    a1, a2 = abs(x1), abs(x2)
    hi, lo = maximum(a1, a2), minimum(a1, a2)
    zero = hi == 0.0
    safe = where(zero, 1.0, hi)
    q = lo / safe
    s = sqrt(q * q + 1.0)
    gx = where(logical_or(a1 == math.inf, a2 == math.inf), 0.0, g[0])
    g_scaled = where(zero, 0.0, gx)  # the gradient of hi * s
    # the transposes of sqrt, square and divide in JAX's order (they decide what overflows)
    g_q = ((g_scaled * hi) * (0.5 / s)) * (q * 2.0)
    g_safe = negative((g_q * integer_pow(safe, -2)) * lo)
    g_hi = where(zero, gx, 0.0) + g_scaled * s + where(zero, 0.0, g_safe)
    g_lo = g_q / safe
    for x, a, b, n in ((x1, a1, a2, need[0]), (x2, a2, a1, need[1])):
        if not n:
            yield None
            continue
        # maximum's and minimum's balanced rule (half each on a tie), then abs's (+1 at 0)
        share = where(a == b, 0.5, 1.0)
        ga = g_hi * where(a == hi, share, 0.0) + g_lo * where(a == lo, share, 0.0)
        yield where(x >= 0, ga, negative(ga))


def _sum_squares(op: Op) -> Variable:
    x1, x2 = op.inputs
    return x1 * x1 + x2 * x2


# ---------------------------------------------------------------- the rows

negative = unary("negative", "-{0}", (lambda op, g: negative(g),), jvp=LINEAR, remat=REMAT_INDEX)
exp = unary("exp", "jnp.exp({0})", (lambda op, g: g * op.outputs[0],), floating=True, fast=True)
log = unary("log", "jnp.log({0})", (lambda op, g: g / op.inputs[0],), floating=True, fast=True)
log1p = unary(
    "log1p", "jnp.log1p({0})", (lambda op, g: g / (op.inputs[0] + 1.0),), floating=True, fast=True
)
expm1 = unary(
    "expm1", "jnp.expm1({0})", (lambda op, g: g * (op.outputs[0] + 1.0),), floating=True, fast=True
)
sqrt = unary(
    "sqrt", "jnp.sqrt({0})", (lambda op, g: g * 0.5 / op.outputs[0],), floating=True, fast=True
)
rsqrt = unary(
    "rsqrt",
    "lax.rsqrt({0})",
    (lambda op, g: g * (op.outputs[0] / op.inputs[0]) * -0.5,),
    floating=True,
    like=jnp.sqrt,
)
tanh = unary(
    "tanh",
    "jnp.tanh({0})",
    (lambda op, g: g * (1.0 - op.outputs[0] * op.outputs[0]),),
    floating=True,
    fast=True,
)
sin = unary("sin", "jnp.sin({0})", (lambda op, g: g * cos(op.inputs[0]),), floating=True, fast=True)
cos = unary(
    "cos",
    "jnp.cos({0})",
    (lambda op, g: negative(g * sin(op.inputs[0])),),
    floating=True,
    fast=True,
)
abs = unary("abs", "jnp.abs({0})", (_g_abs,), fast=True)
sign = unary("sign", "jnp.sign({0})", ZERO)
floor = unary("floor", "jnp.floor({0})", ZERO)
ceil = unary("ceil", "jnp.ceil({0})", ZERO)
round = unary("round", "jnp.round({0})", ZERO)
square = unary("square", "jnp.square({0})", (lambda op, g: g * (op.inputs[0] * 2.0),))
reciprocal = unary(
    "reciprocal",
    "jnp.reciprocal({0})",
    (lambda op, g: negative(g * (op.outputs[0] * op.outputs[0])),),
    floating=True,
)
sigmoid = unary(
    "sigmoid",
    "jax.nn.sigmoid({0})",
    (lambda op, g: g * (op.outputs[0] * (1.0 - op.outputs[0])),),
    floating=True,
    like=jnp.exp,
)
relu = unary(
    "relu", "jax.nn.relu({0})", (lambda op, g: where(op.inputs[0] > 0, g, 0.0),), like=jax.nn.relu
)
softplus = unary(
    "softplus",
    "jax.nn.softplus({0})",
    (lambda op, g: g * sigmoid(op.inputs[0]),),
    floating=True,
    like=jnp.exp,
)
erf = unary(
    "erf",
    "jax.scipy.special.erf({0})",
    (lambda op, g: g * (exp(negative(op.inputs[0] * op.inputs[0])) * (2.0 / math.sqrt(math.pi))),),
    floating=True,
    like=jax.scipy.special.erf,
)

add = binary(
    "add", "{0} + {1}", (lambda op, g: g, lambda op, g: g), jvp=_jvp_add, remat=REMAT_INDEX
)
subtract = binary(
    "subtract",
    "{0} - {1}",
    (lambda op, g: g, lambda op, g: negative(g)),
    jvp=_jvp_add,
    remat=REMAT_INDEX,
)
multiply = binary(
    "multiply",
    "{0} * {1}",
    (lambda op, g: g * op.inputs[1], lambda op, g: g * op.inputs[0]),
    jvp=MULTILINEAR,
    remat=REMAT_INDEX,
)
divide = binary("divide", "{0} / {1}", _g_divide, "divide", jvp=_jvp_divide)
remainder = binary(
    "remainder",
    "jnp.remainder({0}, {1})",
    (lambda op, g: g, lambda op, g: negative(g * floor(op.inputs[0] / op.inputs[1]))),
    "intdiv",
    doc="jnp.remainder (Python's `%`: the result takes the sign of `y`).",
)
floor_divide = binary("floor_divide", "jnp.floor_divide({0}, {1})", ZERO, "intdiv")
maximum = binary("maximum", "jnp.maximum({0}, {1})", _g_chooser)
minimum = binary("minimum", "jnp.minimum({0}, {1})", _g_chooser)
less = binary("less", "{0} < {1}", None, "compare", remat=REMAT_INDEX)
less_equal = binary("less_equal", "{0} <= {1}", None, "compare", remat=REMAT_INDEX)
greater = binary("greater", "{0} > {1}", None, "compare", remat=REMAT_INDEX)
greater_equal = binary("greater_equal", "{0} >= {1}", None, "compare", remat=REMAT_INDEX)
equal = binary("equal", "{0} == {1}", None, "compare", remat=REMAT_INDEX)
not_equal = binary("not_equal", "{0} != {1}", None, "compare", remat=REMAT_INDEX)
logical_and = binary("logical_and", "jnp.logical_and({0}, {1})", None, "logic", remat=REMAT_INDEX)
logical_or = binary("logical_or", "jnp.logical_or({0}, {1})", None, "logic", remat=REMAT_INDEX)
_LN2, _LN10 = math.log(2.0), math.log(10.0)
tan = unary(
    "tan",
    "jnp.tan({0})",
    (lambda op, g: g * (1.0 + op.outputs[0] * op.outputs[0]),),
    floating=True,
    fast=True,
)
sinh = unary("sinh", "jnp.sinh({0})", (lambda op, g: g * cosh(op.inputs[0]),), floating=True)
cosh = unary("cosh", "jnp.cosh({0})", (lambda op, g: g * sinh(op.inputs[0]),), floating=True)
arcsin = unary(
    "arcsin",
    "jnp.arcsin({0})",
    (lambda op, g: g * rsqrt(1.0 - op.inputs[0] * op.inputs[0]),),
    floating=True,
)
arccos = unary(
    "arccos",
    "jnp.arccos({0})",
    (lambda op, g: negative(g * rsqrt(1.0 - op.inputs[0] * op.inputs[0])),),
    floating=True,
)
arctan = unary(
    "arctan",
    "jnp.arctan({0})",
    (lambda op, g: g / (1.0 + op.inputs[0] * op.inputs[0]),),
    floating=True,
)
arcsinh = unary(
    "arcsinh",
    "jnp.arcsinh({0})",
    (lambda op, g: g * rsqrt(op.inputs[0] * op.inputs[0] + 1.0),),
    floating=True,
)
arccosh = unary(
    "arccosh",
    "jnp.arccosh({0})",
    (lambda op, g: g * rsqrt(op.inputs[0] * op.inputs[0] - 1.0),),
    floating=True,
)
arctanh = unary(
    "arctanh",
    "jnp.arctanh({0})",
    (lambda op, g: g / (1.0 - op.inputs[0] * op.inputs[0]),),
    floating=True,
)
log2 = unary("log2", "jnp.log2({0})", (lambda op, g: g / (op.inputs[0] * _LN2),), floating=True)
log10 = unary("log10", "jnp.log10({0})", (lambda op, g: g / (op.inputs[0] * _LN10),), floating=True)
exp2 = unary("exp2", "jnp.exp2({0})", (lambda op, g: g * (op.outputs[0] * _LN2),), floating=True)
cbrt = unary(
    "cbrt",
    "jnp.cbrt({0})",
    (lambda op, g: g / (op.outputs[0] * op.outputs[0] * 3.0),),
    floating=True,
)
deg2rad = unary(
    "deg2rad", "jnp.deg2rad({0})", (lambda op, g: g * (math.pi / 180.0),), floating=True
)
radians = unary(
    "radians", "jnp.radians({0})", (lambda op, g: g * (math.pi / 180.0),), floating=True, jvp=LINEAR
)
rad2deg = unary(
    "rad2deg", "jnp.rad2deg({0})", (lambda op, g: g * (180.0 / math.pi),), floating=True
)
degrees = unary(
    "degrees", "jnp.degrees({0})", (lambda op, g: g * (180.0 / math.pi),), floating=True, jvp=LINEAR
)
fabs = unary(
    "fabs",
    "jnp.fabs({0})",
    (lambda op, g: where(op.inputs[0] >= 0, g, negative(g)),),
    floating=True,
)
arctan2 = binary(
    "arctan2",
    "jnp.arctan2({0}, {1})",
    (
        lambda op, g: g * op.inputs[1] / _sum_squares(op),
        lambda op, g: negative(g * op.inputs[0] / _sum_squares(op)),
    ),
    "float",
    doc="jnp.arctan2(x1, x2): the angle of the point (x2, x1).",
)
hypot = binary("hypot", "jnp.hypot({0}, {1})", _g_hypot, "float")
logaddexp = binary(
    "logaddexp",
    "jnp.logaddexp({0}, {1})",
    (
        lambda op, g: g * exp(op.inputs[0] - op.outputs[0]),
        lambda op, g: g * exp(op.inputs[1] - op.outputs[0]),
    ),
    "float",
)
logaddexp2 = binary(
    "logaddexp2",
    "jnp.logaddexp2({0}, {1})",
    (
        lambda op, g: g * exp2(op.inputs[0] - op.outputs[0]),
        lambda op, g: g * exp2(op.inputs[1] - op.outputs[0]),
    ),
    "float",
)
heaviside = binary(
    "heaviside",
    "jnp.heaviside({0}, {1})",
    (None, lambda op, g: where(op.inputs[0] == 0, g, 0.0)),
    "float",
    doc="jnp.heaviside(x1, x2): 0 below zero, 1 above, x2 at x1 == 0.",
)
_power = binary("power", "jnp.power({0}, {1})", _g_power, "power", export="power")


@defop("integer_pow", same, "lax.integer_pow({0}, {y})", (_g_integer_pow,), export="power")
def integer_pow(x: Variable, y: int) -> tuple[list[Variable], dict]:
    """x ** y for a static Python int `y` (what `power` emits for one)."""
    return [x], {"y": y}


@public
def power(x: ArrayLike, y: ArrayLike) -> Variable:
    """jnp.power(x, y); a Python int exponent becomes lax.integer_pow."""
    if isinstance(x, Variable) and isinstance(y, int) and not isinstance(y, bool):
        if x.dtype == BOOL:  # jnp.power computes on bools as integers
            x = astype(x, jax_dtype(jnp.power, BOOL, BOOL))
        return integer_pow(x, y)
    return _power(x, y)


@defop("logical_not", same, "jnp.logical_not({0})", None, remat=REMAT_INDEX)
def logical_not(x: ArrayLike) -> tuple[list[Variable], dict]:
    """Elementwise logical not of a bool array."""
    x = as_var(x)
    if x.dtype != BOOL:
        raise ShapeError(f"logical_not needs a bool input, got {x.type_str()}", op="logical_not")
    return [x], {}


@defop("where", _where_rule, "jnp.where({0}, {1}, {2})", _g_where, jvp=LINEAR, remat=REMAT_INDEX)
def where(condition: ArrayLike, x: ArrayLike, y: ArrayLike) -> tuple[list[Variable], dict]:
    """jnp.where(condition, x, y) (the three-argument form; a non-bool condition means != 0)."""
    c = astype(as_var(condition), BOOL)
    x, y = as_pair(x, y)
    return [c, x, y], {}


def cast_gradient(g: Variable, dtype: np.dtype) -> Variable:
    """A gradient `g` taken to its input's `dtype`: for a real input of a complex value, the
    real part (JAX's transpose of a real-to-complex convert)."""
    if g.dtype.kind == "c" and dtype.kind != "c":
        g = real(g)
    return astype(g, dtype)


@defop(
    "convert",
    _cast_rule,
    "{0}.astype({dtype})",
    (lambda op, g: cast_gradient(g, op.inputs[0].dtype),),
    jvp=LINEAR,
    remat=REMAT_INDEX,
)
def astype(x: ArrayLike, dtype: Any) -> Variable | tuple[list[Variable], dict]:
    """`x` converted to `dtype` (x.astype(dtype))."""
    x = as_var(x)
    dt = dtypes.canonical(dtype)
    if dt == x.dtype:
        return x
    return [x], {"dtype": dt}


@defop("stop_gradient", same, "lax.stop_gradient({0})", ZERO, export="stop_gradient")
def _stop_gradient(x: Variable) -> tuple[list[Variable], dict]:
    return [x], {}


@public
def stop_gradient(x: ArrayLike) -> Variable:
    """The value of `x`, through which no gradient flows."""
    out = _stop_gradient(as_var(x))
    out.stop_gradient = True
    return out


def _is(name: str) -> Callable[[ArrayLike], Variable]:
    """Declare an elementwise test of a float value (bool result, no gradient)."""

    def front(x: ArrayLike) -> tuple[list[Variable], dict]:
        return [as_var(x)], {}

    named(front, name, f"jnp.{name}(x): elementwise, a bool array.")
    return defop(name, lambda inputs, attrs: [(inputs[0].shape, BOOL)], f"jnp.{name}({{0}})", None)(
        front
    )


isnan = _is("isnan")
isinf = _is("isinf")
isfinite = _is("isfinite")


@public
def absolute(x: ArrayLike) -> Variable:
    """jnp.absolute: the same as abs."""
    return abs(x)


@public
def true_divide(x1: ArrayLike, x2: ArrayLike) -> Variable:
    """jnp.true_divide: the same as divide."""
    return divide(x1, x2)


@public
def mod(x1: ArrayLike, x2: ArrayLike) -> Variable:
    """jnp.mod: the same as remainder (the result takes the sign of `x2`)."""
    return remainder(x1, x2)


@public
def clip(
    x: ArrayLike,
    min: ArrayLike | None = None,
    max: ArrayLike | None = None,
    *,
    a_min: ArrayLike | None = None,
    a_max: ArrayLike | None = None,
) -> Variable:
    """jnp.clip(x, min=None, max=None): maximum with `min`, then minimum with `max`; NumPy's
    keywords `a_min` / `a_max` name the same bounds."""
    for name, new, old in (("min", min, a_min), ("max", max, a_max)):
        if new is not None and old is not None:
            raise ShapeError(
                f"{name}= and a_{name}= are the same bound (a_{name} is NumPy's name): pass one",
                op="clip",
            )
    min = a_min if min is None else min
    max = a_max if max is None else max
    out = as_var(x)
    require_real(out, *(as_var(b) for b in (min, max) if b is not None), what="clip")
    if min is not None:
        out = maximum(out, min)
    if max is not None:
        out = minimum(out, max)
    return out


def _part_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    """real / imag of a complex value: the real dtype of its precision."""
    x = inputs[0]
    return [(x.shape, jax_dtype(jnp.real, x.dtype))]


def _complex_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    re, im = inputs
    return [(broadcast_shapes(re.shape, im.shape), jax_dtype(lax.complex, re.dtype, im.dtype))]


def _is_complex(x: Variable) -> bool:
    return x.dtype.kind == "c"


# JAX's transposes (cotangents of a complex value are d/dre - i d/dim): real's is
# complex(g, 0), imag's complex(0, -g), conj's conj(g), complex(re, im)'s (real g, -imag g).
@defop(
    "complex",
    _complex_rule,
    "lax.complex({0}, {1})",
    (lambda op, g: real(g), lambda op, g: negative(imag(g))),
    export=False,
    jvp=LINEAR,
)
def complex_(re: Variable, im: Variable) -> tuple[list[Variable], dict]:
    """lax.complex(re, im): the complex value re + i im of two real values."""
    return [re, im], {}


@defop(
    "real",
    _part_rule,
    "jnp.real({0})",
    (lambda op, g: astype(g, op.inputs[0].dtype),),
    jvp=LINEAR,
    operands=("x",),
)
def real(x: ArrayLike) -> Variable | tuple[list[Variable], dict]:
    """jnp.real: the real part of a complex `x`; a real `x` itself."""
    x = as_var(x)
    return ([x], {}) if _is_complex(x) else x


@defop(
    "imag",
    _part_rule,
    "jnp.imag({0})",
    (lambda op, g: complex_(zeros_like(g), negative(g)),),
    jvp=LINEAR,
    operands=("x",),
)
def imag(x: ArrayLike) -> Variable | tuple[list[Variable], dict]:
    """jnp.imag: the imaginary part of a complex `x`; zeros like a real `x`."""
    x = as_var(x)
    return ([x], {}) if _is_complex(x) else zeros_like(x)


@defop("conj", same, "jnp.conj({0})", (lambda op, g: conj(g),), jvp=LINEAR, operands=("x",))
def conj(x: ArrayLike) -> Variable | tuple[list[Variable], dict]:
    """jnp.conj: the complex conjugate of a complex `x`; a real `x` itself."""
    x = as_var(x)
    return ([x], {}) if _is_complex(x) else x


# ---------------------------------------------------------------- fmod, sinc, fmax/fmin, nan_to_num


def _g_fmod_y(op: Op, g: Variable) -> Variable:
    q = op.inputs[0] / op.inputs[1]
    return negative(g * (sign(q) * floor(abs(q))))  # -g * trunc(x / y), as lax.rem's rule


fmod = binary(
    "fmod",
    "jnp.fmod({0}, {1})",
    (lambda op, g: g, _g_fmod_y),
    "intdiv",
    doc="jnp.fmod(x1, x2): C's remainder (the result takes the sign of `x1`).",
)


def _maclaurin_value(k: int) -> float:
    """The k-th derivative of sin(t)/t at t = 0."""
    return 0.0 if k % 2 else (-1.0) ** (k // 2) / (k + 1)


@defop(
    "sinc_maclaurin",
    same,
    "jnp.full_like({0}, {value})",
    (lambda op, g: g * sinc_maclaurin(op.inputs[0], op.attrs["k"] + 1),),
    export="sinc",
)
def sinc_maclaurin(t: Variable, k: int) -> tuple[list[Variable], dict]:
    """The k-th derivative of sin(t)/t at 0, shaped like `t`; its gradient is the (k+1)-th,
    so that sinc has its true derivatives of every order at 0 (JAX's construction)."""
    return [t], {"k": k, "value": _maclaurin_value(k)}


@public
def sinc(x: ArrayLike) -> Variable:
    """jnp.sinc: sin(pi x) / (pi x), 1 at 0, with its derivatives at 0 of every order."""
    x = as_var(x)
    if not dtypes.is_inexact(x.dtype):
        x = astype(x, jax_dtype(jnp.sinc, x.dtype))
    zero = x == 0.0
    pi_x = x * math.pi
    safe = where(zero, 1.0, pi_x)
    return where(zero, sinc_maclaurin(pi_x, 0), sin(safe) / safe)


def _two(x1: ArrayLike, x2: ArrayLike) -> tuple[Variable, Variable]:
    if isinstance(x1, Variable):
        return x1, as_var(x2, like=x1)
    x2 = as_var(x2)
    return as_var(x1, like=x2), x2


def _isnan(x: Variable) -> Variable:
    return isnan(x) if dtypes.is_inexact(x.dtype) else zeros_like(x, BOOL)


@public
def fmax(x1: ArrayLike, x2: ArrayLike) -> Variable:
    """jnp.fmax: the larger value, ignoring a NaN in either (x2 where they tie)."""
    x1, x2 = _two(x1, x2)
    return where(logical_or(greater(x1, x2), _isnan(x2)), x1, x2)


@public
def fmin(x1: ArrayLike, x2: ArrayLike) -> Variable:
    """jnp.fmin: the smaller value, ignoring a NaN in either (x2 where they tie)."""
    x1, x2 = _two(x1, x2)
    return where(logical_or(less(x1, x2), _isnan(x2)), x1, x2)


@public
def nan_to_num(
    x: ArrayLike,
    copy: bool = True,
    nan: float = 0.0,
    posinf: float | None = None,
    neginf: float | None = None,
) -> Variable:
    """jnp.nan_to_num: NaN, +inf and -inf replaced (by default with 0 and the dtype's largest
    and lowest values); integer and bool inputs are returned as they are."""
    x = as_var(x)
    if not dtypes.is_inexact(x.dtype):
        return x
    if x.dtype.kind == "c":  # each part on its own, as jnp
        return complex_(*(nan_to_num(part(x), copy, nan, posinf, neginf) for part in (real, imag)))
    info = jnp.finfo(x.dtype)
    hi = float(info.max) if posinf is None else posinf
    lo = float(info.min) if neginf is None else neginf
    out = where(isnan(x), astype(as_var(nan, like=x), x.dtype), x)
    out = where(equal(out, math.inf), astype(as_var(hi, like=x), x.dtype), out)
    return where(equal(out, -math.inf), astype(as_var(lo, like=x), x.dtype), out)
