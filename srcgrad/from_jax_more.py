"""`sg.from_jax`'s rows for special functions, the shape primitives of current JAX (`stack`,
`tile`, `unstack`) and typed PRNG keys, each onto a srcgrad op with JAX's gradient.

Layer L6 (front ends): see docs/design.md.
"""
from __future__ import annotations

from typing import Any

from .from_jax_rules import Cx, Rule, _un
from .ir import Variable
from .ops import elementwise as E
from .ops import manip as M
from .ops import shape as S
from .ops import special as SP


def _unstack(cx: Cx, a: list[Variable], p: dict) -> list[Variable]:
    x, axis = a[0], p["axis"] % a[0].ndim
    outs = []
    for i in range(x.shape[axis]):
        start, limit = [0] * x.ndim, list(x.shape)
        start[axis], limit[axis] = i, i + 1
        outs.append(S.squeeze(S.slice(x, start, limit), axis))
    return outs


def _polygamma(cx: Cx, a: list[Variable], p: dict) -> Variable:
    """lax.polygamma(m, x) with a literal order m (jax.scipy.special.polygamma's); a traced
    order runs as a jax_op."""
    m = cx.literal_value(a[0])
    if m is None or float(m) != int(m) or int(m) < 0:
        return cx.fallback(a)
    return SP.polygamma(int(m), a[1])


def _identity(cx: Cx, a: list[Variable], p: dict) -> Any:
    return a[0]


MORE: dict[str, Rule] = {
    # special functions (srcgrad/ops/special.py)
    "erfc": _un(SP.erfc), "erf_inv": _un(SP.erfinv), "lgamma": _un(SP.gammaln),
    "digamma": _un(SP.digamma), "bessel_i0e": _un(SP.i0e), "bessel_i1e": _un(SP.i1e),
    "igamma": lambda cx, a, p: SP.gammainc(a[0], a[1]),
    "igammac": lambda cx, a, p: SP.gammaincc(a[0], a[1]), "polygamma": _polygamma,
    # shapes (primitives of their own in current JAX)
    "stack": lambda cx, a, p: S.stack(a, p["axis"]),
    "tile": lambda cx, a, p: M.tile(a[0], tuple(p["reps"])), "unstack": _unstack,
    # typed PRNG keys travel as their uint32 data: wrapping and unwrapping are the identity
    "random_wrap": _identity, "random_unwrap": _identity,
    # equinox's markers of values no cotangent (nondifferentiable_backward) or tangent
    # (nondifferentiable) may reach: JAX's symbolic zeros arrive here as zero arrays, so the
    # rows are stop_gradient (code whose cotangent would be nonzero is an error under JAX)
    "nondifferentiable_backward": _un(E.stop_gradient), "nondifferentiable": _un(E.stop_gradient),
}

__all__ = ["MORE"]
