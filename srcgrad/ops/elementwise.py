"""Elementwise math, comparisons, logic, `where`, casts and the grad helper ops."""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import jax.numpy as jnp
import numpy as np

from .. import dtypes
from ..builder import as_var, constant, emit1
from ..errors import ShapeError
from ..ir import Op, Shape, Variable
from ..registry import REGISTRY, REMAT_INDEX, ZERO, OutType, register, set_remat
from ._rules import broadcast_shapes, jax_dtype, same
from .creation import zeros_like

ArrayLike = Any
BOOL = np.dtype(bool)


# ---------------------------------------------------------------- shape/dtype rules

def _unary_rule(jfn: Callable[..., Any], float_only: bool) -> Callable[..., list[OutType]]:
    def infer(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
        x = inputs[0]
        if dtypes.is_inexact(x.dtype) or not float_only:
            return [(x.shape, x.dtype)]
        return [(x.shape, jax_dtype(jfn, x.dtype))]
    return infer


def _binary_rule(kind: str) -> Callable[..., list[OutType]]:
    def infer(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
        x, y = inputs
        shape = broadcast_shapes(x.shape, y.shape)
        if kind == "compare":
            return [(shape, BOOL)]
        if kind == "logic":
            if x.dtype != BOOL or y.dtype != BOOL:
                raise ShapeError("logical ops need bool inputs")
            return [(shape, BOOL)]
        dt = dtypes.promote(x.dtype, y.dtype)
        if kind == "divide" and not dtypes.is_inexact(dt):
            dt = jax_dtype(jnp.true_divide, dt, dt)
        if kind == "power" and dt == BOOL:
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


def _sum_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    first = inputs[0]
    for v in inputs[1:]:
        if v.shape != first.shape or v.dtype != first.dtype:
            raise ShapeError("sum (fan-in) needs inputs of one shape and dtype")
    return [(first.shape, first.dtype)]


# ---------------------------------------------------------------- user-facing functions

def _binary(name: str, x: ArrayLike, y: ArrayLike) -> Variable:
    if isinstance(x, Variable):
        y = as_var(y, like=x)
    else:
        y = as_var(y)
        x = as_var(x, like=y)
    return emit1(name, [x, y])


def add(x: ArrayLike, y: ArrayLike) -> Variable:
    return _binary("add", x, y)


def subtract(x: ArrayLike, y: ArrayLike) -> Variable:
    return _binary("subtract", x, y)


def multiply(x: ArrayLike, y: ArrayLike) -> Variable:
    return _binary("multiply", x, y)


def divide(x: ArrayLike, y: ArrayLike) -> Variable:
    return _binary("divide", x, y)


def power(x: ArrayLike, y: ArrayLike) -> Variable:
    if isinstance(x, Variable) and isinstance(y, int) and not isinstance(y, bool):
        if x.dtype == BOOL:  # jnp.power computes on bools as integers
            x = astype(x, jax_dtype(jnp.power, BOOL, BOOL))
        return emit1("integer_pow", [x], {"y": y})
    return _binary("power", x, y)


def remainder(x: ArrayLike, y: ArrayLike) -> Variable:
    """jnp.remainder (Python's `%`: the result takes the sign of `y`)."""
    return _binary("remainder", x, y)


def floor_divide(x: ArrayLike, y: ArrayLike) -> Variable:
    return _binary("floor_divide", x, y)


def maximum(x: ArrayLike, y: ArrayLike) -> Variable:
    return _binary("maximum", x, y)


def minimum(x: ArrayLike, y: ArrayLike) -> Variable:
    return _binary("minimum", x, y)


def less(x: ArrayLike, y: ArrayLike) -> Variable:
    return _binary("less", x, y)


def less_equal(x: ArrayLike, y: ArrayLike) -> Variable:
    return _binary("less_equal", x, y)


def greater(x: ArrayLike, y: ArrayLike) -> Variable:
    return _binary("greater", x, y)


def greater_equal(x: ArrayLike, y: ArrayLike) -> Variable:
    return _binary("greater_equal", x, y)


def equal(x: ArrayLike, y: ArrayLike) -> Variable:
    return _binary("equal", x, y)


def not_equal(x: ArrayLike, y: ArrayLike) -> Variable:
    return _binary("not_equal", x, y)


def logical_and(x: ArrayLike, y: ArrayLike) -> Variable:
    return _binary("logical_and", x, y)


def logical_or(x: ArrayLike, y: ArrayLike) -> Variable:
    return _binary("logical_or", x, y)


def logical_not(x: ArrayLike) -> Variable:
    x = as_var(x)
    if x.dtype != BOOL:
        raise ShapeError(f"logical_not needs a bool input, got {x.type_str()}", op="logical_not")
    return emit1("logical_not", [x])


def where(condition: ArrayLike, x: ArrayLike, y: ArrayLike) -> Variable:
    """jnp.where(condition, x, y) (the three-argument form; a non-bool condition means != 0)."""
    c = astype(as_var(condition), BOOL)
    if isinstance(x, Variable):
        y = as_var(y, like=x)
    else:
        y = as_var(y)
        x = as_var(x, like=y)
    return emit1("where", [c, x, y])


def astype(x: ArrayLike, dtype: Any) -> Variable:
    x = as_var(x)
    dt = dtypes.canonical(dtype)
    if dt == x.dtype:
        return x
    return emit1("convert", [x], {"dtype": dt})


def stop_gradient(x: ArrayLike) -> Variable:
    """The value of `x`, through which no gradient flows."""
    out = emit1("stop_gradient", [as_var(x)])
    out.stop_gradient = True
    return out


def assign(x: Variable, base: str | None = None) -> Variable:
    return emit1("assign", [x], base=base)


def add_n(xs: Sequence[Variable], base: str | None = None) -> Variable:
    """Fluid's `sum` op: the elementwise sum of same-typed values (gradient fan-in)."""
    return emit1("sum", list(xs), base=base)


def unbroadcast(g: Variable, shape: Shape) -> Variable:
    """Sum `g` down to `shape`, undoing NumPy broadcasting."""
    if g.shape == shape:
        return g
    from .reduce import sum as reduce_sum
    from .shape import reshape
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, d in enumerate(shape) if d == 1 and g.shape[lead + i] != 1)
    out = reduce_sum(g, axis=axes) if axes else g
    return out if out.shape == shape else reshape(out, shape)


def _unary_fn(name: str) -> Callable[[ArrayLike], Variable]:
    def fn(x: ArrayLike) -> Variable:
        x = as_var(x)
        # An inexact input keeps its dtype under every unary rule; others are cast first.
        if not dtypes.is_inexact(x.dtype):
            x = astype(x, REGISTRY[name].infer([x], {})[0][1])
        return emit1(name, [x])
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise {name} (jax.numpy semantics)."
    return fn


# ---------------------------------------------------------------- grad makers

def _g_neg(op: Op, g: list, need: list) -> list:
    return [negative(g[0])]


def _g_exp(op: Op, g: list, need: list) -> list:
    return [g[0] * op.outputs[0]]


def _g_log(op: Op, g: list, need: list) -> list:
    return [g[0] / op.inputs[0]]


def _g_log1p(op: Op, g: list, need: list) -> list:
    return [g[0] / (op.inputs[0] + 1.0)]


def _g_expm1(op: Op, g: list, need: list) -> list:
    return [g[0] * (op.outputs[0] + 1.0)]


def _g_sqrt(op: Op, g: list, need: list) -> list:
    return [g[0] * 0.5 / op.outputs[0]]


def _g_rsqrt(op: Op, g: list, need: list) -> list:
    return [g[0] * (op.outputs[0] / op.inputs[0]) * -0.5]


def _g_tanh(op: Op, g: list, need: list) -> list:
    y = op.outputs[0]
    return [g[0] * (1.0 - y * y)]


def _g_sin(op: Op, g: list, need: list) -> list:
    return [g[0] * cos(op.inputs[0])]


def _g_cos(op: Op, g: list, need: list) -> list:
    return [negative(g[0] * sin(op.inputs[0]))]


def _g_abs(op: Op, g: list, need: list) -> list:
    return [where(op.inputs[0] >= 0, g[0], negative(g[0]))]  # as JAX: slope +1 at 0


def _g_square(op: Op, g: list, need: list) -> list:
    return [g[0] * (op.inputs[0] * 2.0)]


def _g_reciprocal(op: Op, g: list, need: list) -> list:
    y = op.outputs[0]
    return [negative(g[0] * (y * y))]


def _g_sigmoid(op: Op, g: list, need: list) -> list:
    y = op.outputs[0]
    return [g[0] * (y * (1.0 - y))]


def _g_relu(op: Op, g: list, need: list) -> list:
    return [where(op.inputs[0] > 0, g[0], 0.0)]


def _g_softplus(op: Op, g: list, need: list) -> list:
    return [g[0] * sigmoid(op.inputs[0])]


def _g_erf(op: Op, g: list, need: list) -> list:
    x = op.inputs[0]
    return [g[0] * (exp(negative(x * x)) * (2.0 / math.sqrt(math.pi)))]


def _g_integer_pow(op: Op, g: list, need: list) -> list:
    y = op.attrs["y"]
    x = op.inputs[0]
    if y == 0:
        return [zeros_like(x)]
    if y == 1:
        return [g[0]]
    base = x if y == 2 else emit1("integer_pow", [x], {"y": y - 1})
    return [g[0] * (base * float(y))]


def _g_add(op: Op, g: list, need: list) -> list:
    x, y = op.inputs
    return [unbroadcast(g[0], x.shape) if need[0] else None,
            unbroadcast(g[0], y.shape) if need[1] else None]


def _g_subtract(op: Op, g: list, need: list) -> list:
    x, y = op.inputs
    return [unbroadcast(g[0], x.shape) if need[0] else None,
            unbroadcast(negative(g[0]), y.shape) if need[1] else None]


def _g_multiply(op: Op, g: list, need: list) -> list:
    x, y = op.inputs
    return [unbroadcast(g[0] * y, x.shape) if need[0] else None,
            unbroadcast(g[0] * x, y.shape) if need[1] else None]


def _g_divide(op: Op, g: list, need: list) -> list:
    x, y = op.inputs
    gx = g[0] / y
    return [unbroadcast(gx, x.shape) if need[0] else None,
            unbroadcast(negative(gx * op.outputs[0]), y.shape) if need[1] else None]


def _g_remainder(op: Op, g: list, need: list) -> list:
    x, y = op.inputs
    return [unbroadcast(g[0], x.shape) if need[0] else None,
            unbroadcast(negative(g[0] * floor(x / y)), y.shape) if need[1] else None]


def _g_power(op: Op, g: list, need: list) -> list:
    out = op.outputs[0]
    # Work in the result's dtype, as the forward promotion does (log(x) of an f32 base that
    # meets an f64 exponent is taken in f64).
    x, y = (astype(v, out.dtype) for v in op.inputs)
    gx = gy = None
    if need[0]:
        d = where(y == 0, 0.0, y * power(x, y - 1.0))
        gx = unbroadcast(g[0] * d, op.inputs[0].shape)
    if need[1]:
        safe_x = where(x == 0, 1.0, x)
        gy = unbroadcast(g[0] * (out * log(safe_x)), op.inputs[1].shape)
    return [gx, gy]


def _g_chooser(op: Op, g: list, need: list) -> list:
    x, y = op.inputs
    out = op.outputs[0]
    mask = where(x == out, where(y == out, 0.5, 1.0), 0.0)
    mask = astype(mask, g[0].dtype)
    return [unbroadcast(g[0] * mask, x.shape) if need[0] else None,
            unbroadcast(g[0] * (1.0 - mask), y.shape) if need[1] else None]


def _g_where(op: Op, g: list, need: list) -> list:
    c, x, y = op.inputs
    return [None,
            unbroadcast(where(c, g[0], 0.0), x.shape) if need[1] else None,
            unbroadcast(where(c, 0.0, g[0]), y.shape) if need[2] else None]


def _g_convert(op: Op, g: list, need: list) -> list:
    return [astype(g[0], op.inputs[0].dtype)]


def _g_identity(op: Op, g: list, need: list) -> list:
    return [g[0]]


def _g_sum(op: Op, g: list, need: list) -> list:
    return [g[0] if n else None for n in need]


# ---------------------------------------------------------------- the registry rows

_UNARY = [
    # name, lowering, grad, float-valued
    ("negative", "-{0}", _g_neg, False),
    ("exp", "jnp.exp({0})", _g_exp, True),
    ("log", "jnp.log({0})", _g_log, True),
    ("log1p", "jnp.log1p({0})", _g_log1p, True),
    ("expm1", "jnp.expm1({0})", _g_expm1, True),
    ("sqrt", "jnp.sqrt({0})", _g_sqrt, True),
    ("rsqrt", "lax.rsqrt({0})", _g_rsqrt, True),
    ("tanh", "jnp.tanh({0})", _g_tanh, True),
    ("sin", "jnp.sin({0})", _g_sin, True),
    ("cos", "jnp.cos({0})", _g_cos, True),
    ("abs", "jnp.abs({0})", _g_abs, False),
    ("sign", "jnp.sign({0})", ZERO, False),
    ("floor", "jnp.floor({0})", ZERO, False),
    ("ceil", "jnp.ceil({0})", ZERO, False),
    ("round", "jnp.round({0})", ZERO, False),
    ("square", "jnp.square({0})", _g_square, False),
    ("reciprocal", "jnp.reciprocal({0})", _g_reciprocal, True),
    ("sigmoid", "jax.nn.sigmoid({0})", _g_sigmoid, True),
    ("relu", "jax.nn.relu({0})", _g_relu, False),
    ("softplus", "jax.nn.softplus({0})", _g_softplus, True),
    ("erf", "jax.scipy.special.erf({0})", _g_erf, True),
]
_JFN = {"sigmoid": jnp.exp, "softplus": jnp.exp, "erf": jnp.exp, "rsqrt": jnp.sqrt, "relu": jnp.abs}
for _name, _lower, _grad, _float in _UNARY:
    register(_name, _unary_rule(_JFN.get(_name) or getattr(jnp, _name), _float), _lower, _grad)

register("integer_pow", same, "lax.integer_pow({0}, {y})", _g_integer_pow)

_BINARY = [
    ("add", "{0} + {1}", _g_add, "arith"),
    ("subtract", "{0} - {1}", _g_subtract, "arith"),
    ("multiply", "{0} * {1}", _g_multiply, "arith"),
    ("divide", "{0} / {1}", _g_divide, "divide"),
    ("power", "jnp.power({0}, {1})", _g_power, "power"),
    ("remainder", "jnp.remainder({0}, {1})", _g_remainder, "arith"),
    ("floor_divide", "jnp.floor_divide({0}, {1})", ZERO, "arith"),
    ("maximum", "jnp.maximum({0}, {1})", _g_chooser, "arith"),
    ("minimum", "jnp.minimum({0}, {1})", _g_chooser, "arith"),
    ("less", "{0} < {1}", None, "compare"),
    ("less_equal", "{0} <= {1}", None, "compare"),
    ("greater", "{0} > {1}", None, "compare"),
    ("greater_equal", "{0} >= {1}", None, "compare"),
    ("equal", "{0} == {1}", None, "compare"),
    ("not_equal", "{0} != {1}", None, "compare"),
    ("logical_and", "jnp.logical_and({0}, {1})", None, "logic"),
    ("logical_or", "jnp.logical_or({0}, {1})", None, "logic"),
]
for _name, _lower, _grad, _kind in _BINARY:
    register(_name, _binary_rule(_kind), _lower, _grad)

register("logical_not", same, "jnp.logical_not({0})", None)
register("where", _where_rule, "jnp.where({0}, {1}, {2})", _g_where)
register("convert", _cast_rule, "{0}.astype({dtype})", _g_convert)
register("stop_gradient", same, "lax.stop_gradient({0})", ZERO)
register("assign", same, "{0}", _g_identity)
register("sum", _sum_rule, lambda args, attrs: " + ".join(args), _g_sum)
set_remat(REMAT_INDEX, "add", "subtract", "multiply", "negative", "convert", "where", "less",
          "less_equal", "greater", "greater_equal", "equal", "not_equal", "logical_and",
          "logical_or", "logical_not")

negative = _unary_fn("negative")
exp = _unary_fn("exp")
log = _unary_fn("log")
log1p = _unary_fn("log1p")
expm1 = _unary_fn("expm1")
sqrt = _unary_fn("sqrt")
rsqrt = _unary_fn("rsqrt")
tanh = _unary_fn("tanh")
sin = _unary_fn("sin")
cos = _unary_fn("cos")
abs = _unary_fn("abs")
sign = _unary_fn("sign")
floor = _unary_fn("floor")
ceil = _unary_fn("ceil")
round = _unary_fn("round")
square = _unary_fn("square")
reciprocal = _unary_fn("reciprocal")
sigmoid = _unary_fn("sigmoid")
relu = _unary_fn("relu")
softplus = _unary_fn("softplus")
erf = _unary_fn("erf")

__all__ = [
    "add", "subtract", "multiply", "divide", "power", "remainder", "floor_divide", "maximum",
    "minimum", "less",
    "less_equal", "greater", "greater_equal", "equal", "not_equal", "logical_and",
    "logical_or", "logical_not", "where", "astype", "stop_gradient", "assign", "add_n",
    "unbroadcast", "constant", "negative", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt",
    "tanh", "sin", "cos", "abs", "sign", "floor", "ceil", "round", "square", "reciprocal",
    "sigmoid", "relu", "softplus", "erf",
]
