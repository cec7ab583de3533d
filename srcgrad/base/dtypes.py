"""Dtype canonicalization and promotion (JAX's rules, cached).

Layer L0 (base): see docs/design.md.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

_SHORT = {
    "float16": "f16",
    "bfloat16": "bf16",
    "float32": "f32",
    "float64": "f64",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
    "uint16": "u16",
    "uint32": "u32",
    "uint64": "u64",
    "bool": "bool",
    "complex64": "c64",
    "complex128": "c128",
}


try:  # JAX's flag object: reading it costs 40 ns where `jax.config.read` costs 200-400
    from jax._src.config import enable_x64 as _X64
except ImportError:  # pragma: no cover - a JAX without it
    _X64 = None


def x64() -> bool:
    """Whether 64-bit types are on (a thread's `enable_x64` scope included); every eager call
    and traced op asks."""
    if _X64 is not None:
        return bool(_X64.value)
    return bool(jax.config.read("jax_enable_x64"))


def x64_scope(on: bool = True) -> Any:
    """A scope in which 64-bit types are on (or off) for this thread: `jax.enable_x64` where
    JAX has it, else `jax.experimental.enable_x64` (JAX 0.4.30)."""
    scope = getattr(jax, "enable_x64", None)
    if scope is None:
        from jax import experimental

        scope = experimental.enable_x64  # type: ignore[attr-defined]  # JAX 0.4.30 only
    return scope(on)


@lru_cache(maxsize=None)
def _canonical(dtype: object, wide: bool) -> np.dtype:
    return np.dtype(jax.dtypes.canonicalize_dtype(jnp.dtype(dtype)))


def canonical(dtype: object) -> np.dtype:
    """The dtype JAX would use for `dtype` under the current x64 setting."""
    return _canonical(dtype, x64())


@lru_cache(maxsize=None)
def _promote(a: np.dtype, b: np.dtype, wide: bool) -> np.dtype:
    return canonical(jnp.promote_types(a, b))


def promote(a: np.dtype, b: np.dtype) -> np.dtype:
    """JAX's type promotion of two dtypes."""
    return a if a is b else _promote(a, b, x64())


def default_float() -> np.dtype:
    return canonical(np.float64)


def default_int() -> np.dtype:
    return canonical(np.int64)


def is_inexact(dtype: np.dtype) -> bool:
    return dtype.kind in "fc" or dtype.name == "bfloat16"


def is_float(dtype: np.dtype) -> bool:
    return dtype.kind == "f" or dtype.name == "bfloat16"


def to_inexact(dtype: np.dtype) -> np.dtype:
    """The dtype of a float-valued function of `dtype` (e.g. exp of an int is a float)."""
    return dtype if is_inexact(dtype) else default_float()


def key_impl(x: object) -> Any:
    """The PRNG implementation of a typed key (`jax.random.key`: an array, tracer or aval),
    None for any other value."""
    dt = getattr(x, "dtype", None)
    if dt is not None and jax.dtypes.issubdtype(dt, jax.dtypes.prng_key):
        return dt._impl
    return None


def short(dtype: np.dtype) -> str:
    return _SHORT.get(dtype.name, dtype.name)


def scalar_dtype(value: object, other: np.dtype | None) -> np.dtype:
    """The dtype a Python scalar takes when combined with an array of dtype `other` (weak
    typing)."""
    if isinstance(value, bool):
        return other if other is not None else np.dtype(bool)
    if isinstance(value, int):
        if other is None or other == np.dtype(bool):
            return default_int()
        return other
    if isinstance(value, float):
        if other is not None and is_inexact(other):
            return other
        return default_float()
    if isinstance(value, complex):  # the complex type of an inexact `other`'s precision
        if other is not None and is_inexact(other):
            return canonical(jnp.promote_types(other, np.complex64))
        return canonical(np.complex128)
    raise TypeError(f"not a Python scalar: {type(value).__name__}")
