"""Constants and fills: full/zeros/ones(_like), arange and the builder's constant op.

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ..base import dtypes
from ..core.builder import as_var, emit1
from ..base.errors import ShapeError
from ..ir.program import Shape, Variable
from ..core.registry import ZERO, OutType, always, register
from ..core.declare import Emitted, defop, public
from .shape import broadcast_to


def _attr_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    return [(tuple(attrs["shape"]), attrs["dtype"])]


@defop(
    "fill_constant",
    _attr_rule,
    "jnp.full({shape}, {value}, {dtype})",
    ZERO,
    base="full",
    fast=("lax.full({shape}, {value}, {dtype})", always),
)
def full(shape: Shape | int, fill_value: Any, dtype: Any = None) -> Emitted:
    """jnp.full: `fill_value` (a scalar, or an array or traced value) broadcast to `shape`."""
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    if isinstance(fill_value, Variable) or np.ndim(fill_value) != 0:
        v = as_var(fill_value)
        dt = v.dtype if dtype is None else dtypes.canonical(dtype)
        if dt != v.dtype:  # elementwise.astype's op, by its registry name (no import cycle)
            v = emit1("convert", [v], {"dtype": dt})
        return broadcast_to(v, shape)
    if dtype is not None:
        dt = dtypes.canonical(dtype)
    elif hasattr(fill_value, "dtype"):  # a NumPy scalar or 0-d array: not weakly typed
        dt = dtypes.canonical(fill_value.dtype)
    else:
        dt = dtypes.scalar_dtype(fill_value, None)
    value = np.asarray(fill_value).astype(dt).item()
    return [], {"shape": shape, "dtype": dt, "value": value}


@defop("arange", _attr_rule, "jnp.arange({start}, {stop}, {step}, dtype={dtype})", ZERO)
def arange(
    start: float, stop: float | None = None, step: float | None = None, dtype: Any = None
) -> Emitted:
    """jnp.arange(start, stop, step, dtype) for static Python numbers."""
    bounds = []
    for v in (start, stop, step):
        if v is not None and not isinstance(v, (int, float, np.integer, np.floating)):
            raise ShapeError(f"arange needs static Python numbers, got {v!r}", op="arange")
        bounds.append(v.item() if isinstance(v, np.generic) else v)
    out = jax.eval_shape(lambda: jnp.arange(*bounds, dtype=dtype))
    return [], {
        "start": bounds[0],
        "stop": bounds[1],
        "step": bounds[2],
        "dtype": dtypes.canonical(out.dtype),
        "shape": tuple(out.shape),
    }


@public
def zeros(shape: Shape | int, dtype: Any = None) -> Variable:
    return full(shape, 0, dtype if dtype is not None else dtypes.default_float())


@public
def ones(shape: Shape | int, dtype: Any = None) -> Variable:
    return full(shape, 1, dtype if dtype is not None else dtypes.default_float())


@public
def full_like(x: Any, fill_value: Any, dtype: Any = None) -> Variable:
    return full(x.shape, fill_value, x.dtype if dtype is None else dtype)


@public
def zeros_like(x: Any, dtype: Any = None) -> Variable:
    return full_like(x, 0, dtype)


@public
def ones_like(x: Any, dtype: Any = None) -> Variable:
    return full_like(x, 1, dtype)


#: The builder's constants (builder.constant); lowered by the emitter, not by a template.
register("constant", _attr_rule, None, ZERO)
