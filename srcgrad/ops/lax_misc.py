"""lax-level ops that jaxprs need and srcgrad's jax.numpy-style ops do not cover, each lowered
to the lax / jax.random call of the same meaning: `top_k`'s indices, `nextafter`,
`bitcast_convert_type`, `lu_pivots_to_permutation`, the PRNG primitives on key data
(`random_seed`, `random_bits`, `random_split`, `random_fold_in`, `threefry2x32`) and
`pure_callback`.

They are internal rows (no `sg.` function): `sg.from_jax` reaches them. Their outputs are
integers, except `nextafter`'s and `pure_callback`'s, which JAX cannot differentiate: their
gradient is a GradientError where they lie on the differentiated path. A key's data is a
uint32 array whose last axis is the key (srcgrad's form of a typed key); `impl` is the
PRNG's name.

Layer L3 (the ops): see docs/design.md.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable, Sequence

import jax
import jax.extend.random  # noqa: F401  (jax.extend.random.threefry_2x32, in emitted source)
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..core.builder import as_var, emit
from ..base.errors import GradientError, ShapeError
from ..ir.program import Op, Variable
from ..core.registry import ZERO, OutType, register
from ..core.declare import defop, named


def _refused(what: str) -> Any:
    """The grad maker of a row JAX cannot differentiate: its error, at the op."""
    def grad(op: Op, g: list, need: list) -> list:
        raise GradientError(f"JAX cannot differentiate {what} either; it is on the "
                            "differentiated path", op=op.type, loc=op.loc)
    return grad


def _row(name: str, fn: Callable[..., Any], lower: str, doc: str, grad: Any = ZERO) -> Any:
    """An internal row lowered to `lower` whose shapes and dtypes are those of the JAX
    function `fn(*inputs, **attrs)` (the same computation)."""
    @lru_cache(maxsize=1024)
    def shapes(avals: tuple, attrs: tuple) -> list[OutType]:
        out = jax.eval_shape(lambda *xs: fn(*xs, **dict(attrs)),
                             *[jax.ShapeDtypeStruct(s, d) for s, d in avals])
        return [(tuple(o.shape), np.dtype(o.dtype)) for o in jax.tree_util.tree_leaves(out)]

    def infer(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
        try:
            return shapes(tuple((v.shape, v.dtype) for v in inputs), tuple(sorted(attrs.items())))
        except (TypeError, ValueError) as e:
            raise ShapeError(f"{name} of {', '.join(v.type_str() for v in inputs)}: "
                             f"{str(e).splitlines()[0] if str(e) else e}") from None

    def front(*inputs: Any, **attrs: Any) -> tuple[list[Variable], dict]:
        return [as_var(x) for x in inputs], attrs
    named(front, name, doc)
    return defop(name, infer, lower, grad, export=False)(front)


top_k_indices = _row("lax_top_k", lambda x, k: lax.top_k(x, k)[1], "lax.top_k({0}, {k})[1]",
                     "The indices of lax.top_k(x, k) (the k largest along the last axis).")
nextafter = _row("lax_nextafter", jnp.nextafter, "jnp.nextafter({0}, {1})",
                 "jnp.nextafter(x1, x2): the next float after x1 towards x2 (no gradient, as "
                 "in JAX).", grad=_refused("nextafter"))
bitcast = _row("lax_bitcast", lambda x, dtype: lax.bitcast_convert_type(x, dtype),
               "lax.bitcast_convert_type({0}, {dtype})",
               "lax.bitcast_convert_type(x, dtype): the same bits read as `dtype`.")
pivots_to_permutation = _row(
    "lax_lu_pivots_to_permutation",
    lambda p, size: lax.linalg.lu_pivots_to_permutation(p, size),
    "lax.linalg.lu_pivots_to_permutation({0}, {size})",
    "lax.linalg.lu_pivots_to_permutation(pivots, size): LU's row swaps as a permutation.")


def _key(data: Any, impl: str) -> Any:
    return jax.random.wrap_key_data(data, impl=impl)


prng_seed = _row("prng_seed", lambda s, impl: jax.random.key_data(jax.random.key(s, impl=impl)),
                 "jax.random.key_data(jax.random.key({0}, impl={impl}))",
                 "The key data of jax.random.key(seed, impl=impl).")
prng_bits = _row("prng_bits", lambda k, impl, shape, dtype: jax.random.bits(_key(k, impl), shape,
                                                                            dtype),
                 "jax.random.bits(jax.random.wrap_key_data({0}, impl={impl}), {shape}, {dtype})",
                 "jax.random.bits of the key with data `k`.")
prng_split = _row("prng_split", lambda k, impl, shape: jax.random.key_data(
                      jax.random.split(_key(k, impl), shape)),
                  "jax.random.key_data(jax.random.split(jax.random.wrap_key_data({0}, "
                  "impl={impl}), {shape}))", "The key data of jax.random.split.")
prng_fold_in = _row("prng_fold_in", lambda k, m, impl: jax.random.key_data(
                        jax.random.fold_in(_key(k, impl), m)),
                    "jax.random.key_data(jax.random.fold_in(jax.random.wrap_key_data({0}, "
                    "impl={impl}), {1}))", "The key data of jax.random.fold_in.")
threefry_2x32 = _row("threefry2x32", lambda k1, k2, x: jax.extend.random.threefry_2x32((k1, k2), x),
                     "jax.extend.random.threefry_2x32(({0}, {1}), {2})",
                     "The Threefry-2x32 hash of the uint32 array x under the key (k1, k2).")


# ---------------------------------------------------------------- pure_callback

def _callback_infer(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    return [(tuple(a.shape), np.dtype(a.dtype)) for a in attrs["result_avals"]]


def _callback_lower(em: Any, op: Op) -> None:
    """`jax.pure_callback(callback, result shapes, *args, vmap_method=...)`: the Python
    callback and the shapes are constants of the program."""
    callback = op.attrs["callback"]
    em.consts.append(lambda *xs: tuple(callback(*xs)))
    em.consts.append(tuple(jax.ShapeDtypeStruct(a.shape, a.dtype)
                           for a in op.attrs["result_avals"]))
    n = len(em.consts)
    args = "".join(f", {em.name(v)}" for v in op.inputs)
    kw = "".join(f", {k}={v!r}" for k, v in op.attrs["options"])
    em.assign(op.outputs, f"jax.pure_callback(_consts[{n - 2}], _consts[{n - 1}]{args}{kw})",
              unpack=True)


register("pure_callback", _callback_infer, None, _refused("pure_callback"),
         lower_stmt=_callback_lower)


def pure_callback(callback: Callable[..., Any], result_avals: Sequence[Any],
                  options: tuple[tuple[str, Any], ...], args: Sequence[Variable]
                  ) -> list[Variable]:
    """jax.pure_callback's primitive: `callback` (flat arrays in, a sequence of arrays out)
    on `args`; `options` are its keyword arguments (vmap_method, or vectorized in older
    JAX). No gradient (JAX has none)."""
    return emit("pure_callback", list(args), {"callback": callback,
                                              "result_avals": tuple(result_avals),
                                              "options": tuple(options)})


__all__ = ["top_k_indices", "nextafter", "bitcast", "pivots_to_permutation", "prng_seed",
           "prng_bits", "prng_split", "prng_fold_in", "threefry_2x32", "pure_callback"]
