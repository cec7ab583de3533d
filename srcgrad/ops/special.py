"""`sg.scipy.special`: jax.scipy.special's functions as ops, each with JAX's gradient.

The functions JAX computes with its own primitives or custom derivative rules (`erfc`,
`gammaln`, `digamma`, `gammainc`, `i0e`, `log_ndtr`, `xlogy`, ...) are one row each: the
forward is JAX's own (accurate in the tails: `erfc(10)` is 2.1e-45, not 1 - erf(10) = 0), the
gradient is JAX's rule written in srcgrad ops. `erf`, `expit` and `logsumexp` are the
top-level ops `sg.erf`, `sg.sigmoid` and `sg.logsumexp`, exported here under scipy's names.

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import jax.numpy as jnp
import jax.scipy.special as jss
import numpy as np
from jax import lax

from ..base import dtypes
from ..core.builder import as_pair, as_var
from ..base.errors import SrcgradError, user_location
from ..ir.program import Op, Variable
from ..core.registry import GradSpec
from . import elementwise
from .rules import jax_dtype
from ..core.declare import EXPORTS, defop, named, public_in
from .reduce import logsumexp

NS = "scipy.special"
_SQRT_2PI = math.sqrt(2.0 * math.pi)
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def _float(x: Any) -> Variable:
    """`x` as a Variable of a float dtype (integers and bools cast as JAX promotes them)."""
    x = as_var(x)
    if not dtypes.is_inexact(x.dtype):
        x = elementwise.astype(x, jax_dtype(jnp.exp, x.dtype))
    return x


def _unary(
    name: str, lower: str, grad: GradSpec, doc: str, op: str | None = None
) -> Callable[[Any], Variable]:
    """An elementwise function of one float argument: row `op` (default: `name`)."""

    def front(x: Any) -> tuple[list[Variable], dict]:
        return [_float(x)], {}

    named(front, name, doc)
    return defop(
        op or name, elementwise.unary_rule(getattr(jss, name), True), lower, grad, namespace=NS
    )(front)


def _binary(
    name: str, lower: str, grad: GradSpec, doc: str, export: bool = True
) -> Callable[[Any, Any], Variable]:
    """An elementwise function of two broadcasting float arguments."""

    def front(x: Any, y: Any) -> tuple[list[Variable], dict]:
        x, y = as_pair(x, y)
        dt = dtypes.promote(x.dtype, y.dtype)
        if not dtypes.is_inexact(dt):
            dt = jax_dtype(jnp.exp, dt)
        return [elementwise.astype(x, dt), elementwise.astype(y, dt)], {}

    named(front, name, doc)
    return defop(
        name,
        elementwise.binary_rule("float", getattr(jss, name)),
        lower,
        grad,
        namespace=NS,
        export=export,
    )(front)


def _x(op: Op) -> Variable:
    return op.inputs[0]


def _y(op: Op) -> Variable:
    return op.outputs[0]


# ---------------------------------------------------------------- error functions

erfc = _unary(
    "erfc",
    "lax.erfc({0})",
    (
        lambda op, g: (
            g
            * (elementwise.exp(elementwise.negative(_x(op) * _x(op))) * (-2.0 / math.sqrt(math.pi)))
        ),
    ),
    "jax.scipy.special.erfc: 1 - erf(x), computed directly (accurate for large x).",
)
erfinv = _unary(
    "erfinv",
    "lax.erf_inv({0})",
    (lambda op, g: g * (elementwise.exp(_y(op) * _y(op)) * (math.sqrt(math.pi) / 2.0)),),
    "jax.scipy.special.erfinv: the inverse of erf on (-1, 1).",
)
ndtr = _unary(
    "ndtr",
    "jax.scipy.special.ndtr({0})",
    (lambda op, g: g * (elementwise.exp(_x(op) * _x(op) * -0.5) * (1.0 / _SQRT_2PI)),),
    "jax.scipy.special.ndtr: the standard normal CDF.",
)
log_ndtr = _unary(
    "log_ndtr",
    "jax.scipy.special.log_ndtr({0})",
    (lambda op, g: g * elementwise.exp(_x(op) * _x(op) * -0.5 - _LOG_SQRT_2PI - _y(op)),),
    "jax.scipy.special.log_ndtr: log of the normal CDF, accurate in the lower "
    "tail (its gradient too: exp(log pdf - log cdf)).",
)
ndtri = _unary(
    "ndtri",
    "jax.scipy.special.ndtri({0})",
    (lambda op, g: g * (elementwise.exp(_y(op) * _y(op) * 0.5) * _SQRT_2PI),),
    "jax.scipy.special.ndtri: the inverse of ndtr on (0, 1).",
)


# ---------------------------------------------------------------- gamma family


@public_in(NS)
def polygamma(n: int, x: Any) -> Variable:
    """jax.scipy.special.polygamma(n, x) for a static integer order n >= 0."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise SrcgradError(
            f"scipy.special.polygamma: the order n must be a static int >= 0, got {n!r}",
            op="polygamma",
            loc=user_location(),
        )
    return _polygamma(_float(x), n=int(n))


@defop(
    "polygamma",
    elementwise.unary_rule(jss.digamma, True),
    "jax.scipy.special.polygamma({n}, {0})",
    (lambda op, g: g * _polygamma(_x(op), n=op.attrs["n"] + 1),),
    export="scipy.special.polygamma",
)
def _polygamma(x: Variable, *, n: int) -> tuple[list[Variable], dict]:
    return [x], {"n": n}


digamma = _unary(
    "digamma",
    "lax.digamma({0})",
    (lambda op, g: g * _polygamma(_x(op), n=1),),
    "jax.scipy.special.digamma: the derivative of gammaln.",
)
gammaln = _unary(
    "gammaln",
    "lax.lgamma({0})",
    (lambda op, g: g * digamma(_x(op)),),
    "jax.scipy.special.gammaln: log |Gamma(x)| (lax.lgamma).",
)


def _g_igamma_x(op: Op, g: Variable) -> Variable:
    a, x = op.inputs
    return g * elementwise.exp(
        elementwise.negative(x) + (a - 1.0) * elementwise.log(x) - gammaln(a)
    )


@defop(
    "igamma_grad_a",
    elementwise.binary_rule("float", lax.igamma_grad_a),
    "lax.igamma_grad_a(*jnp.broadcast_arrays({0}, {1}))",
    None,
    export=False,
)
def _igamma_grad_a(a: Variable, x: Variable) -> tuple[list[Variable], dict]:
    return [a, x], {}


gammainc = _binary(
    "gammainc",
    "jax.scipy.special.gammainc({0}, {1})",
    (lambda op, g: g * _igamma_grad_a(*op.inputs), _g_igamma_x),
    "jax.scipy.special.gammainc(a, x): the regularized lower incomplete gamma "
    "function (lax.igamma); as JAX's, its gradient in `a` is not differentiable "
    "again.",
)
gammaincc = _binary(
    "gammaincc",
    "jax.scipy.special.gammaincc({0}, {1})",
    (
        lambda op, g: elementwise.negative(g * _igamma_grad_a(*op.inputs)),
        lambda op, g: elementwise.negative(_g_igamma_x(op, g)),
    ),
    "jax.scipy.special.gammaincc(a, x): 1 - gammainc(a, x), computed directly (lax.igammac).",
)
betaln = _binary(
    "betaln",
    "jax.scipy.special.betaln({0}, {1})",
    (
        lambda op, g: g * (digamma(op.inputs[0]) - digamma(op.inputs[0] + op.inputs[1])),
        lambda op, g: g * (digamma(op.inputs[1]) - digamma(op.inputs[0] + op.inputs[1])),
    ),
    "jax.scipy.special.betaln(a, b): log |B(a, b)|.",
)


# ---------------------------------------------------------------- Bessel functions


def _g_i1e(op: Op, g: Variable) -> Variable:
    """JAX's rule: i0e(x) - i1e(x) (sign(x) + 1/x), and 1/2 where |x| <= eps."""
    x, y = _x(op), _y(op)
    eps = float(np.finfo(x.dtype).eps)
    tiny = elementwise.abs(x) <= eps
    safe = elementwise.where(tiny, eps, x)
    slope = i0e(safe) - y * (elementwise.sign(safe) + 1.0 / safe)
    return g * elementwise.where(tiny, 0.5, slope)


i0e = _unary(
    "i0e",
    "lax.bessel_i0e({0})",
    (lambda op, g: g * (i1e(_x(op)) - elementwise.sign(_x(op)) * _y(op)),),
    "jax.scipy.special.i0e: the exponentially scaled modified Bessel function I0.",
)
i1e = _unary(
    "i1e",
    "lax.bessel_i1e({0})",
    (_g_i1e,),
    "jax.scipy.special.i1e: the exponentially scaled modified Bessel function I1.",
)


# ---------------------------------------------------------------- logs and logits

logit = _unary(
    "logit",
    "jax.scipy.special.logit({0})",
    (lambda op, g: g / (_x(op) * (1.0 - _x(op))),),
    "jax.scipy.special.logit: log(p / (1 - p)).",
)
entr = _unary(
    "entr",
    "jax.scipy.special.entr({0})",
    (
        lambda op, g: elementwise.where(
            _x(op) < 0, 0.0, elementwise.negative(g * (elementwise.log(_x(op)) + 1.0))
        ),
    ),
    "jax.scipy.special.entr: -x log x for x >= 0 (0 at 0), -inf below.",
)
xlogy = _binary(
    "xlogy",
    "jax.scipy.special.xlogy({0}, {1})",
    (
        lambda op, g: g * elementwise.log(op.inputs[1]),
        lambda op, g: g * op.inputs[0] / op.inputs[1],
    ),
    "jax.scipy.special.xlogy: x log y, 0 where x == 0 (JAX's gradient rule).",
)
xlog1py = _binary(
    "xlog1py",
    "jax.scipy.special.xlog1py({0}, {1})",
    (
        lambda op, g: g * elementwise.log1p(op.inputs[1]),
        lambda op, g: g * op.inputs[0] / (op.inputs[1] + 1.0),
    ),
    "jax.scipy.special.xlog1py: x log(1 + y), 0 where x == 0.",
)

# scipy's names for top-level ops (one op each, not twins).
for _short, _fn in {
    "erf": elementwise.erf,
    "expit": elementwise.sigmoid,
    "logsumexp": logsumexp,
}.items():
    EXPORTS[f"{NS}.{_short}"] = _fn

__all__ = [
    "erfc",
    "erfinv",
    "ndtr",
    "log_ndtr",
    "ndtri",
    "polygamma",
    "digamma",
    "gammaln",
    "gammainc",
    "gammaincc",
    "betaln",
    "i0e",
    "i1e",
    "logit",
    "entr",
    "xlogy",
    "xlog1py",
]
