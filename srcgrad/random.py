"""`sg.random`: jax.random's key-based generators over traced values, eagerly and on Tensors,
giving jax.random's numbers for the same key. Declared in srcgrad/ops/random.py.

    key = sg.random.PRNGKey(0)
    k1, k2 = sg.random.split(key)
    w = sg.random.normal(k1, (3, 2))

A key is a uint32[2] array; a typed key (`jax.random.key(0)`) is accepted wherever a key is
taken and used by its data (`jax.random.key_data`).

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import jax

from .ops import exports_of


def key_data_of(x: Any) -> Any:
    """A typed PRNG key's uint32 data (`jax.random.key_data`); any other value as it is."""
    if isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        return jax.random.key_data(x)
    return x


def _taking_typed_keys(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        return fn(*[key_data_of(a) for a in args], **{k: key_data_of(v) for k, v in kwargs.items()})

    return call


globals().update({n: _taking_typed_keys(f) for n, f in exports_of("random").items()})

__all__ = sorted(exports_of("random"))
