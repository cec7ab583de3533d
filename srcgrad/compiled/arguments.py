"""The arguments of a transformed function: their input names (from the signature and the
pytree paths), dtypes, arrays, Variables (typed PRNG keys as their key data) and static
positions.

Layer L5 (compiled): see docs/design.md.
"""

from __future__ import annotations

import inspect
import re
from typing import Any, Callable, Sequence

import jax
import numpy as np

from ..base import dtypes
from ..core.builder import active_program, as_var
from ..base.errors import SrcgradError, user_location
from ..ir.program import Variable

_IDENT = re.compile(r"[^0-9A-Za-z_]+")


def leaf_array(x: Any) -> Any:
    """An argument leaf as the array fed to the compiled program (a Python number at its
    canonical dtype, an array-like as NumPy; JAX arrays and tracers as they are)."""
    if isinstance(x, jax.core.Tracer) or isinstance(x, jax.Array):
        return x
    if isinstance(x, (bool, int, float, complex)):
        return np.asarray(x, dtypes.scalar_dtype(x, None))
    arr = np.asarray(x)
    return arr.astype(dtypes.canonical(arr.dtype), copy=False)


def arg_names(fun: Callable[..., Any], args: tuple, tree_paths: list) -> list[str]:
    """The program input name of each leaf: its parameter's name and its pytree path."""
    try:
        params = list(inspect.signature(fun).parameters)
    except (TypeError, ValueError):
        params = []
    names = []
    for path in tree_paths:
        first, rest = path[0], path[1:]
        pos = getattr(first, "idx", 0)
        base = (
            params[pos]
            if pos < len(params) and params[pos] not in ("args", "kwargs")
            else f"arg{pos}"
        )
        parts = [base] + [
            _IDENT.sub("", str(getattr(k, "key", getattr(k, "idx", getattr(k, "name", k)))))
            for k in rest
        ]
        names.append(_IDENT.sub("_", "_".join(p for p in parts if p)) or "x")
    return names


def as_vars(tree: Any) -> Any:
    """Each leaf of `tree` as a Variable of the program being traced."""
    return jax.tree_util.tree_map(_as_var, tree)


def _as_var(x: Any) -> Variable:
    """`as_var(x)`; a typed PRNG key becomes its uint32 key data, recorded as a key's in the
    program (`Program.key_data`)."""
    impl = dtypes.key_impl(x)
    if impl is None:
        return as_var(x)
    v = as_var(jax.random.key_data(x))
    active_program("a PRNG key").key_data[v] = impl
    return v


def key_type(v: Variable, impl: Any) -> str:
    """A key's type as JAX prints it (`key<fry>[]`), from its data `v`."""
    return f"key<{impl.tag}>[{','.join(map(str, v.shape[: v.ndim - len(impl.key_shape)]))}]"


def leaf_dtype(x: Any) -> np.dtype:
    """The canonical dtype of an argument leaf (a Python number's as srcgrad types it)."""
    if isinstance(x, (bool, int, float, complex)):
        return dtypes.scalar_dtype(x, None)
    return dtypes.canonical(np.dtype(x.dtype) if hasattr(x, "dtype") else np.asarray(x).dtype)


def static_positions(static_argnums: int | Sequence[int], who: str) -> tuple[int, ...]:
    """`static_argnums` as a sorted tuple of ints, checked."""
    nums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in nums):
        raise TypeError(f"{who}: static_argnums must be ints, got {static_argnums!r}")
    return tuple(sorted(set(nums)))


def hashable(value: Any, i: int, who: str) -> Any:
    """A static argument, checked to be hashable (it is part of the cache key)."""
    if isinstance(value, (jax.Array, np.ndarray, Variable)):
        raise SrcgradError(
            f"{who}: static argument {i} is an array ({type(value).__name__}); "
            "static arguments are Python values (str, bool, int, tuples), pass "
            "arrays without static_argnums",
            loc=user_location(),
        )
    try:
        hash(value)
    except TypeError:
        raise SrcgradError(
            f"{who}: static argument {i} must be hashable (it keys the compile "
            f"cache), got a {type(value).__name__}: {value!r:.60}",
            loc=user_location(),
        ) from None
    return value


__all__ = [
    "arg_names",
    "as_vars",
    "hashable",
    "key_type",
    "leaf_array",
    "leaf_dtype",
    "static_positions",
]
