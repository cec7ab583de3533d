"""jax.numpy's constants, dtype names and dtype/shape utilities, as `sg.<name>`.

The constants and dtype objects are jax.numpy's own (`sg.float32 is jnp.float32`), so they
work wherever a dtype is taken; the utilities read the static shape and dtype of traced
values as they read an array's.

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from ..ir.program import Variable

#: Constants and dtype objects taken from jax.numpy as they are.
CONSTANTS = ("e", "pi", "inf", "nan", "newaxis", "euler_gamma")
DTYPES = (
    "bool",
    "bool_",
    "int_",
    "uint",
    "float_",
    "complex_",
    "double",
    "single",
    "cdouble",
    "csingle",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "bfloat16",
    "complex64",
    "complex128",
    "int2",
    "int4",
    "uint2",
    "uint4",
    "int1",
    "uint1",
    "float8_e3m4",
    "float8_e4m3",
    "float8_e4m3b11fnuz",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
    "float4_e2m1fn",
    "float6_e2m3fn",
    "float6_e3m2fn",
    # the scalar-type hierarchy, for issubdtype
    "generic",
    "number",
    "inexact",
    "floating",
    "complexfloating",
    "integer",
    "signedinteger",
    "unsignedinteger",
    "character",
    "flexible",
    "object_",
    # dtype inspection and promotion (they take dtypes, not values)
    "dtype",
    "finfo",
    "iinfo",
    "can_cast",
    "promote_types",
    "issubdtype",
    "isdtype",
    # index helpers (pure Python objects)
    "s_",
    "index_exp",
    # arrays of static integers or window coefficients, made from Python ints alone: computed
    # by jax.numpy and used as constants of a traced program
    "tril_indices",
    "triu_indices",
    "diag_indices",
    "indices",
    "mgrid",
    "ogrid",
    "hamming",
    "hanning",
    "bartlett",
    "blackman",
    "kaiser",
)
_taken = {n: getattr(jnp, n) for n in CONSTANTS + DTYPES if hasattr(jnp, n)}
globals().update(_taken)


def _meta(x: Any) -> Any:
    """`x` itself if it is a traced value (it has .shape and .dtype), else `np.asarray(x)`."""
    return x if isinstance(x, Variable) else np.asarray(x)


def ndim(a: Any) -> int:
    """jnp.ndim: the number of axes (of a traced value too)."""
    return len(_meta(a).shape)


def shape(a: Any) -> tuple[int, ...]:
    """jnp.shape: the static shape (of a traced value too)."""
    return tuple(_meta(a).shape)


def size(a: Any, axis: int | None = None) -> int:
    """jnp.size: the number of elements (along `axis`)."""
    s = shape(a)
    return int(np.prod(s, dtype=np.int64)) if axis is None else s[axis]


def result_type(*args: Any) -> np.dtype:
    """jnp.result_type of arrays, traced values, dtypes and Python scalars."""
    return jnp.result_type(
        *[jnp.zeros((), a.dtype) if isinstance(a, Variable) else a for a in args]
    )


def iscomplexobj(x: Any) -> bool:
    """jnp.iscomplexobj: whether `x` (a traced value too) has a complex dtype."""
    return x.dtype.kind == "c" if isinstance(x, Variable) else jnp.iscomplexobj(x)


def isrealobj(x: Any) -> bool:
    """jnp.isrealobj: not iscomplexobj."""
    return not iscomplexobj(x)


def isscalar(element: Any) -> bool:
    """jnp.isscalar: a 0-d traced value counts as a scalar, as a 0-d jax.Array does."""
    if isinstance(element, Variable):
        return element.ndim == 0
    return jnp.isscalar(element)


def iterable(y: Any) -> bool:
    """jnp.iterable: whether `iter(y)` works (a traced value with an axis does)."""
    if isinstance(y, Variable):
        return y.ndim > 0
    return jnp.iterable(y)


def tril_indices_from(arr: Any, k: int = 0) -> tuple[Any, Any]:
    """jnp.tril_indices_from: tril_indices of `arr`'s (static) shape."""
    s = shape(arr)
    return jnp.tril_indices(s[-2], k, s[-1])


def triu_indices_from(arr: Any, k: int = 0) -> tuple[Any, Any]:
    """jnp.triu_indices_from: triu_indices of `arr`'s (static) shape."""
    s = shape(arr)
    return jnp.triu_indices(s[-2], k, s[-1])


def diag_indices_from(arr: Any) -> tuple[Any, ...]:
    """jnp.diag_indices_from: diag_indices of `arr`'s (static, square) shape."""
    s = shape(arr)
    return jnp.diag_indices(s[0], len(s))


def broadcast_shapes(*shapes: Any) -> tuple[int, ...]:
    """jnp.broadcast_shapes of static shapes."""
    return tuple(jnp.broadcast_shapes(*shapes))


UTILITIES = (
    "ndim",
    "shape",
    "size",
    "result_type",
    "iscomplexobj",
    "isrealobj",
    "isscalar",
    "iterable",
    "broadcast_shapes",
    "tril_indices_from",
    "triu_indices_from",
    "diag_indices_from",
)
__all__ = sorted(_taken) + list(UTILITIES)
