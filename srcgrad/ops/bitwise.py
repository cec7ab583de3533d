"""jax.numpy's integer and bitwise functions (bitwise_and, shifts, gcd, lcm, ...): one row
each, lowered to the jnp function, with its shape and dtype rule taken from jnp itself. They
take integer (and, where jnp does, bool) arrays; they have no gradient.

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ..core.builder import as_var
from ..base.errors import ShapeError
from ..ir.program import Variable
from ..core.registry import OutType
from ..core.declare import defop, named


@lru_cache(maxsize=1024)
def _eval(name: str, avals: tuple) -> OutType:
    out = jax.eval_shape(getattr(jnp, name), *[jax.ShapeDtypeStruct(s, d) for s, d in avals])
    return tuple(out.shape), np.dtype(out.dtype)


def _rule(name: str) -> Callable[..., list[OutType]]:
    def infer(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
        try:
            return [_eval(name, tuple((v.shape, v.dtype) for v in inputs))]
        except (TypeError, ValueError) as e:
            raise ShapeError(
                f"{name} takes integer arrays, got {', '.join(v.type_str() for v in inputs)}: {e}"
            ) from None

    return infer


def _args(*xs: Any) -> list[Variable]:
    like = next((x for x in xs if isinstance(x, Variable)), None)
    if like is None:
        like = next((as_var(x) for x in xs if not isinstance(x, (bool, int))), None)
    return [as_var(x, like=like) for x in xs]


def _unary(name: str) -> Callable[[Any], Variable]:
    def front(x: Any) -> tuple[list[Variable], dict]:
        return _args(x), {}

    named(front, name, f"jnp.{name}(x) of an integer or bool array (no gradient).")
    return defop(name, _rule(name), f"jnp.{name}({{0}})", None)(front)


def _binary(name: str) -> Callable[[Any, Any], Variable]:
    def front(x1: Any, x2: Any) -> tuple[list[Variable], dict]:
        return _args(x1, x2), {}

    named(
        front, name, f"jnp.{name}(x1, x2) of integer (or bool) arrays, broadcasting (no gradient)."
    )
    return defop(name, _rule(name), f"jnp.{name}({{0}}, {{1}})", None)(front)


bitwise_and = _binary("bitwise_and")
bitwise_or = _binary("bitwise_or")
bitwise_xor = _binary("bitwise_xor")
left_shift = _binary("left_shift")
right_shift = _binary("right_shift")
gcd = _binary("gcd")
lcm = _binary("lcm")
bitwise_not = _unary("bitwise_not")
bitwise_count = _unary("bitwise_count")
invert = _unary("invert")
bitwise_invert = _unary("bitwise_invert")
bitwise_left_shift = _binary("bitwise_left_shift")
bitwise_right_shift = _binary("bitwise_right_shift")
