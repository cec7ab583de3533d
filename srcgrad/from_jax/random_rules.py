"""`sg.from_jax`'s rows for typed PRNG keys and the random primitives: a key travels as its
uint32 data, the random primitives become the PRNG rows of srcgrad/ops/lax_primitives.py
(JAX's numbers for the same key), and the shape primitives on arrays of keys act on the data
(`KEYED`).

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..base import dtypes
from ..ir.program import Variable
from ..ops import lax_primitives as primitives
from ..ops import shape as shape_ops
from .array_rules import Cx, Rule


def _identity(cx: Cx, a: list[Variable], p: dict) -> Any:
    return a[0]


def _key_axes(cx: Cx) -> tuple[int, ...]:
    """The trailing axes a key's data has (its PRNG's key shape: (2,) for threefry)."""
    for v in list(cx.eqn.invars) + cx.eqn.outvars:
        impl = dtypes.key_impl(v.aval)
        if impl is not None:
            return tuple(impl.key_shape)
    return ()


def _key_slice(cx: Cx, a: list[Variable], p: dict) -> Variable:
    t = _key_axes(cx)
    strides = tuple(p["strides"] or (1,) * len(p["start_indices"]))
    return shape_ops.slice(
        a[0],
        tuple(p["start_indices"]) + (0,) * len(t),
        tuple(p["limit_indices"]) + t,
        strides + (1,) * len(t),
    )


def _key_broadcast(cx: Cx, a: list[Variable], p: dict) -> Variable:
    t, shape = _key_axes(cx), tuple(p["shape"])
    kept = [1] * len(shape)
    for d, size in zip(p["broadcast_dimensions"], a[0].shape):
        kept[d] = size
    return shape_ops.broadcast_to(shape_ops.reshape(a[0], tuple(kept) + t), shape + t)


#: Rows for shape primitives on arrays of keys, on their data (leading axes: the keys').
KEYED: dict[str, Rule] = {
    "slice": _key_slice,
    "broadcast_in_dim": _key_broadcast,
    "squeeze": lambda cx, a, p: shape_ops.squeeze(a[0], tuple(p["dimensions"])),
    "reshape": lambda cx, a, p: shape_ops.reshape(a[0], tuple(p["new_sizes"]) + _key_axes(cx)),
    "concatenate": lambda cx, a, p: shape_ops.concatenate(a, p["dimension"]),
    "transpose": lambda cx, a, p: shape_ops.transpose(
        a[0], tuple(p["permutation"]) + tuple(range(len(p["permutation"]), a[0].ndim))
    ),
    "convert_element_type": lambda cx, a, p: (
        a[0] if cx.eqn.invars[0].aval.dtype == cx.eqn.outvars[0].aval.dtype else cx.fallback(a)
    ),  # key to the same key type (old JAX)
    "copy": _identity,
    "device_put": lambda cx, a, p: list(a),
    "optimization_barrier": lambda cx, a, p: list(a),
}

_IMPLS = ("threefry2x32", "rbg", "unsafe_rbg")


def _prng(kind: str) -> Rule:
    """random_seed/bits/split/fold_in on one key (its uint32 data), with JAX's PRNG by name;
    arrays of keys and other PRNGs run as jax ops."""

    def rule(cx: Cx, a: list[Variable], p: dict) -> Variable:
        key = (cx.eqn.outvars if kind == "seed" else cx.eqn.invars)[0].aval
        impl = dtypes.key_impl(key)
        if key.shape != () or impl.name not in _IMPLS:
            return cx.fallback(a)
        if kind == "seed":
            return primitives.prng_seed(a[0], impl=impl.name)
        if kind == "bits":
            return primitives.prng_bits(
                a[0],
                impl=impl.name,
                shape=tuple(p["shape"]),
                dtype=np.dtype(f"uint{p['bit_width']}"),
            )
        if kind == "split":
            return primitives.prng_split(a[0], impl=impl.name, shape=tuple(p["shape"]))
        return primitives.prng_fold_in(a[0], a[1], impl=impl.name)

    return rule


def _threefry(cx: Cx, a: list[Variable], p: dict) -> list[Variable]:
    """threefry2x32(k1, k2, x1, x2) with scalar keys: jax.extend.random.threefry_2x32 of x1
    and x2 laid end to end, split again."""
    k1, k2, x1, x2 = a
    if k1.shape != () or k2.shape != () or x1.shape != x2.shape:
        return cx.fallback(a)
    flat = [shape_ops.reshape(x1, (x1.size,)), shape_ops.reshape(x2, (x2.size,))]
    out = primitives.threefry_2x32(k1, k2, shape_ops.concatenate(flat, 0))
    n = x1.size
    return [
        shape_ops.reshape(shape_ops.slice(out, [0], [n]), x1.shape),
        shape_ops.reshape(shape_ops.slice(out, [n], [2 * n]), x1.shape),
    ]


RANDOM: dict[str, Rule] = {
    # typed PRNG keys travel as their uint32 data: wrapping and unwrapping are the identity
    "random_wrap": _identity,
    "random_unwrap": _identity,
    "random_seed": _prng("seed"),
    "random_bits": _prng("bits"),
    "random_split": _prng("split"),
    "random_fold_in": _prng("fold_in"),
    "threefry2x32": _threefry,
}

__all__ = ["RANDOM", "KEYED"]
