"""`sg.from_jax`'s rows for special functions, the shape primitives of current JAX (`stack`,
`tile`, `unstack`), `top_k`, the total-order comparisons (`lt_to`, ...), bit-level
primitives, typed PRNG keys and the random primitives, `lu_pivots_to_permutation` and
`pure_callback`, each onto srcgrad ops with JAX's gradient (srcgrad/ops/lax_misc.py has the
lax-level ones).

Layer L6 (front ends): see docs/design.md.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..base import dtypes
from .array_rules import Cx, Rule, _bin, _un
from ..ir.program import Variable
from ..ops import bitwise as B
from ..ops import elementwise as E
from ..ops import lax_misc as XM
from ..ops import sorting as SS
from ..ops import manip as M
from ..ops import shape as S
from ..ops import special as SP


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


def _top_k(cx: Cx, a: list[Variable], p: dict) -> list[Variable]:
    """lax.top_k's indices, and its values read at them (take_along_axis: so the gradient
    goes to the chosen elements, as JAX's does); another axis than the last is swapped there
    and back (older JAX has no `axis`: the last)."""
    x = a[0]
    axis, last = p.get("axis", -1) % x.ndim, x.ndim - 1
    perm = list(range(x.ndim))
    perm[axis], perm[last] = last, axis
    if axis != last:
        x = S.transpose(x, tuple(perm))
    idx = XM.top_k_indices(x, k=int(p["k"]))
    out = [SS.take_along_axis(x, idx, last), idx]
    return [S.transpose(v, tuple(perm)) for v in out] if axis != last else out


def _total_key(x: Variable) -> Variable:
    """An integer of `x`'s width ordered as lax's total order orders floats (-NaN < -inf <
    ... < -0.0 < 0.0 < ... < inf < NaN): the bits, with a negative number's magnitude bits
    flipped."""
    if not dtypes.is_inexact(x.dtype):
        return x
    it = np.dtype(f"int{x.dtype.itemsize * 8}")
    k = XM.bitcast(x, dtype=it)
    return E.where(k < 0, B.bitwise_xor(k, int(np.iinfo(it).max)), k)


def _total(cmp: Any) -> Rule:
    """eq_to / le_to / lt_to: the comparison in lax's total order (jnp.sort's, searchsorted's)."""
    return lambda cx, a, p: cmp(_total_key(a[0]), _total_key(a[1]))


def _bits(fn: Any, signed: bool | None) -> Rule:
    """A shift on integers of the signedness it means (`signed` None: any); others: jax_op."""
    def rule(cx: Cx, a: list[Variable], p: dict) -> Variable:
        if signed is not None and (a[0].dtype.kind == "i") != signed:
            return cx.fallback(a)
        return fn(a[0], a[1])
    return rule


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
    return S.slice(a[0], tuple(p["start_indices"]) + (0,) * len(t),
                   tuple(p["limit_indices"]) + t, strides + (1,) * len(t))


def _key_broadcast(cx: Cx, a: list[Variable], p: dict) -> Variable:
    t, shape = _key_axes(cx), tuple(p["shape"])
    kept = [1] * len(shape)
    for d, size in zip(p["broadcast_dimensions"], a[0].shape):
        kept[d] = size
    return S.broadcast_to(S.reshape(a[0], tuple(kept) + t), shape + t)


#: Rows for shape primitives on arrays of keys, on their data (leading axes: the keys').
KEYED: dict[str, Rule] = {
    "slice": _key_slice, "broadcast_in_dim": _key_broadcast,
    "squeeze": lambda cx, a, p: S.squeeze(a[0], tuple(p["dimensions"])),
    "reshape": lambda cx, a, p: S.reshape(a[0], tuple(p["new_sizes"]) + _key_axes(cx)),
    "concatenate": lambda cx, a, p: S.concatenate(a, p["dimension"]),
    "transpose": lambda cx, a, p: S.transpose(a[0], tuple(p["permutation"]) + tuple(
        range(len(p["permutation"]), a[0].ndim))),
    "convert_element_type": lambda cx, a, p: a[0] if cx.eqn.invars[0].aval.dtype
    == cx.eqn.outvars[0].aval.dtype else cx.fallback(a),  # key to the same key type (old JAX)
    "copy": _identity, "device_put": lambda cx, a, p: list(a),
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
            return XM.prng_seed(a[0], impl=impl.name)
        if kind == "bits":
            return XM.prng_bits(a[0], impl=impl.name, shape=tuple(p["shape"]),
                                dtype=np.dtype(f"uint{p['bit_width']}"))
        if kind == "split":
            return XM.prng_split(a[0], impl=impl.name, shape=tuple(p["shape"]))
        return XM.prng_fold_in(a[0], a[1], impl=impl.name)
    return rule


def _threefry(cx: Cx, a: list[Variable], p: dict) -> list[Variable]:
    """threefry2x32(k1, k2, x1, x2) with scalar keys: jax.extend.random.threefry_2x32 of x1
    and x2 laid end to end, split again."""
    k1, k2, x1, x2 = a
    if k1.shape != () or k2.shape != () or x1.shape != x2.shape:
        return cx.fallback(a)
    flat = [S.reshape(x1, (x1.size,)), S.reshape(x2, (x2.size,))]
    out = XM.threefry_2x32(k1, k2, S.concatenate(flat, 0))
    n = x1.size
    return [S.reshape(S.slice(out, [0], [n]), x1.shape), S.reshape(S.slice(out, [n], [2 * n]),
                                                                   x1.shape)]


def _pure_callback(cx: Cx, a: list[Variable], p: dict) -> list[Variable]:
    options = tuple((k, p[k]) for k in ("vmap_method", "vectorized") if p.get(k) is not None)
    return XM.pure_callback(p["callback"], p["result_avals"], options, a)


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
    "random_seed": _prng("seed"), "random_bits": _prng("bits"), "random_split": _prng("split"),
    "random_fold_in": _prng("fold_in"), "threefry2x32": _threefry,
    # lax's own
    "top_k": _top_k, "nextafter": _bin(XM.nextafter),
    "eq_to": _total(E.equal), "le_to": _total(E.less_equal), "lt_to": _total(E.less),
    "lu_pivots_to_permutation": lambda cx, a, p: XM.pivots_to_permutation(
        a[0], size=int(p["permutation_size"])),
    "bitcast_convert_type": lambda cx, a, p: XM.bitcast(a[0],
                                                        dtype=dtypes.canonical(p["new_dtype"])),
    "shift_left": _bits(B.left_shift, None), "shift_right_logical": _bits(B.right_shift, False),
    "shift_right_arithmetic": _bits(B.right_shift, True),
    "pure_callback": _pure_callback,
    # equinox's markers of values no cotangent (nondifferentiable_backward) or tangent
    # (nondifferentiable) may reach: JAX's symbolic zeros arrive here as zero arrays, so the
    # rows are stop_gradient (code whose cotangent would be nonzero is an error under JAX)
    "nondifferentiable_backward": _un(E.stop_gradient), "nondifferentiable": _un(E.stop_gradient),
}

__all__ = ["MORE", "KEYED"]
