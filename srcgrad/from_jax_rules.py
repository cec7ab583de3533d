"""`sg.from_jax`'s translation rows for JAX's array primitives: elementwise math, types,
shapes, indexing, contractions and reductions. Each row is `rule(cx, args, params) -> value or
list of values`, `cx` the translator (srcgrad/from_jax.py), `args` srcgrad Variables.

Layer L6 (front ends): see docs/design.md.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import numpy as np

from . import dtypes
from .builder import constant
from .errors import SrcgradError, user_location
from .ir import Variable
from .ops import debug as D
from .ops import bitwise as B
from .ops import elementwise as E
from .ops import lax_ops as X
from .ops import contraction as L
from .ops import reduce as R
from .ops import shape as S
from .ops import sort_scan as SS
from .ops.creation import arange, full
from .ops.indexing import dynamic_slice, dynamic_update_slice

#: The translator (from_jax._Translator): `call(jaxpr, args)`, `literal_value(v)`,
#: `max_iters`, `checkpoints`, `custom_rules`.
Cx = Any
Rule = Callable[[Cx, list[Variable], dict[str, Any]], Any]


def _refuse(prim: str, why: str) -> SrcgradError:
    return SrcgradError(f"JAX primitive {prim!r}: {why}", op="from_jax", loc=user_location())


# ---------------------------------------------------------------- rules shared by rows

def _un(fn: Callable[[Variable], Variable]) -> Rule:
    return lambda cx, a, p: fn(a[0])


def _bin(fn: Callable[[Variable, Variable], Variable]) -> Rule:
    return lambda cx, a, p: fn(a[0], a[1])


def _bool_only(fn: Callable[..., Variable], bitwise: Callable[..., Variable]) -> Rule:
    """and/or/xor/not: logical ops on bools, bitwise ops (srcgrad/ops/bitwise.py) on integers."""
    def rule(cx: Cx, a: list[Variable], p: dict) -> Variable:
        if any(v.dtype != np.dtype(bool) for v in a):
            return bitwise(*a)
        return fn(*a)
    return rule


def _debug_print(cx: Cx, a: list[Variable], p: dict) -> list:
    """jax.debug.print: sg.debug.print's op (a format with static arguments: JAX's own
    print, as a `jax_effect` op)."""
    if p.get("static_args"):
        return cx.fallback(a)
    args, kwargs = jax.tree_util.tree_unflatten(p["in_tree"], list(a))
    D.emit_print(p["fmt"], list(args), dict(kwargs))
    return []


def _div(cx: Cx, a: list[Variable], p: dict) -> Variable:
    """lax.div: true division of floats; integer division rounds toward zero."""
    x, y = a
    if dtypes.is_inexact(x.dtype):
        return E.divide(x, y)
    q = E.floor_divide(x, y)
    inexact = E.logical_and(E.not_equal(E.remainder(x, y), 0), E.not_equal(x < 0, y < 0))
    return E.where(inexact, q + 1, q)


def _rem(cx: Cx, a: list[Variable], p: dict) -> Variable:
    """lax.rem: the remainder takes the sign of the dividend (C's fmod)."""
    x, y = a
    r = E.remainder(x, y)
    flip = E.logical_and(E.not_equal(r, 0), E.not_equal(r < 0, x < 0))
    return E.where(flip, r - y, r)


def _round(cx: Cx, a: list[Variable], p: dict) -> Variable:
    x = a[0]
    if int(p.get("rounding_method", 0)) == 1:  # TO_NEAREST_EVEN, as jnp.round
        return E.round(x)
    return E.sign(x) * E.floor(E.abs(x) + 0.5)  # AWAY_FROM_ZERO, lax.round's default


def _select_n(cx: Cx, a: list[Variable], p: dict) -> Variable:
    """select_n(which, *cases): cases[which]; a bool `which` picks between two."""
    which, cases = a[0], a[1:]
    if which.dtype == np.dtype(bool):
        return E.where(which, cases[1], cases[0]) if len(cases) == 2 else cases[0]
    out = cases[-1]
    for k in range(len(cases) - 2, -1, -1):
        out = E.where(E.equal(which, k), cases[k], out)
    return out


def _clamp(cx: Cx, a: list[Variable], p: dict) -> Variable:
    """lax.clamp with JAX's derivative: `x` where lo < x < hi, `lo` where x < lo < hi, `hi`
    where hi < x; at a tie or a NaN nothing takes it. Integers (lax.switch's index) need no
    derivative: `min(max(x, lo), hi)`."""
    lo, x, hi = a
    if not dtypes.is_inexact(x.dtype):
        return E.minimum(E.maximum(x, lo), hi)
    held = E.stop_gradient(E.minimum(E.maximum(x, lo), hi))
    inside = E.where(E.logical_and(x > lo, x < hi), x, held)
    return E.where(hi < x, hi, E.where(E.logical_and(lo > x, lo < hi), lo, inside))


def _convert(cx: Cx, a: list[Variable], p: dict) -> Variable:
    return E.astype(a[0], dtypes.canonical(p["new_dtype"]))


def _reduce_precision(cx: Cx, a: list[Variable], p: dict) -> Variable:
    x = a[0]
    info = np.finfo(x.dtype)
    if (p["exponent_bits"], p["mantissa_bits"]) != (info.nexp, info.nmant):
        raise _refuse("reduce_precision", f"rounding {x.type_str()} to {p['exponent_bits']} "
                      f"exponent and {p['mantissa_bits']} mantissa bits is not supported")
    return x


def _iota(cx: Cx, a: list[Variable], p: dict) -> Variable:
    shape, dim = tuple(p["shape"]), p["dimension"]
    line = arange(0, shape[dim], dtype=dtypes.canonical(p["dtype"]))
    return S.broadcast_to(S.reshape(line, tuple(d if i == dim else 1 for i, d in enumerate(shape))),
                          shape)


def _broadcast_in_dim(cx: Cx, a: list[Variable], p: dict) -> Variable:
    x, shape, dims = a[0], tuple(p["shape"]), tuple(p["broadcast_dimensions"])
    kept = [1] * len(shape)
    for d, size in zip(dims, x.shape):
        kept[d] = size
    return S.broadcast_to(S.reshape(x, tuple(kept)), shape)


def _pad_with(x: Variable, value: Variable | None, config: Sequence[tuple[int, int, int]]
              ) -> Variable:
    """lax.pad: `value` (None: zero) in the new positions; negative low/high padding crops."""
    grow = [(max(lo, 0), max(hi, 0), it) for lo, hi, it in config]
    out = S.lax_pad(x, grow)
    if value is not None:
        inside = S.lax_pad(full(x.shape, True, np.dtype(bool)), grow)
        out = E.where(inside, out, value)
    if any(lo < 0 or hi < 0 for lo, hi, _ in config):
        start = [max(-lo, 0) for lo, _, _ in config]
        limit = [d - max(-hi, 0) for d, (_, hi, _) in zip(out.shape, config)]
        out = S.slice(out, start, limit)
    return out


def _pad(cx: Cx, a: list[Variable], p: dict) -> Variable:
    return _pad_with(a[0], None if cx.literal_value(a[1]) == 0 else a[1], p["padding_config"])


def _dot_general(cx: Cx, a: list[Variable], p: dict) -> Variable:
    """dot_general as an einsum: batch dimensions, then lhs free, then rhs free."""
    x, y = a
    (cx_, cy), (bx, by) = p["dimension_numbers"]
    pref = p.get("preferred_element_type")
    if _is_matmul(x.ndim, y.ndim, tuple(cx_), tuple(cy), tuple(bx), tuple(by)):
        r = L.matmul(x, y)
        return E.astype(r, dtypes.canonical(pref)) if pref is not None else r
    letters = iter("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    xs, ys = [""] * x.ndim, [""] * y.ndim
    for i, j in list(zip(bx, by)) + list(zip(cx_, cy)):
        xs[i] = ys[j] = next(letters)
    for t in (xs, ys):
        for i, c in enumerate(t):
            t[i] = c or next(letters)
    out = ("".join(xs[i] for i in bx) + "".join(c for i, c in enumerate(xs) if i not in bx + cx_)
           + "".join(c for i, c in enumerate(ys) if i not in by + cy))
    r = L.einsum(f"{''.join(xs)},{''.join(ys)}->{out}", x, y)
    return E.astype(r, dtypes.canonical(pref)) if pref is not None else r


def _is_matmul(nx: int, ny: int, cx: tuple, cy: tuple, bx: tuple, by: tuple) -> bool:
    """True when dot_general is what jnp.matmul computes: (..., k) @ (k[, n]), or a batched
    (B, m, k) @ (B, k, n) with the batch axes leading."""
    if not bx and not by:
        return nx >= 1 and ny in (1, 2) and cx == (nx - 1,) and cy == (0,)
    b = len(bx)
    return (bx == by == tuple(range(b)) and nx == ny == b + 2 and cx == (b + 1,)
            and cy == (b,))


def _conv(cx: Cx, a: list[Variable], p: dict) -> Variable:
    if p["feature_group_count"] != 1 or p["batch_group_count"] != 1:
        return cx.fallback(a)  # grouped: JAX's convolution, as a jax_op
    dn = p["dimension_numbers"]
    pads = p["padding"]
    if isinstance(pads, str):
        raise _refuse("conv_general_dilated", f"string padding {pads!r} in a jaxpr")
    out = L._conv_op(a[0], a[1], p["window_strides"], tuple(tuple(q) for q in pads),
                     p["lhs_dilation"], p["rhs_dilation"],
                     (tuple(dn.lhs_spec), tuple(dn.rhs_spec), tuple(dn.out_spec)))
    pref = p.get("preferred_element_type")
    return E.astype(out, dtypes.canonical(pref)) if pref is not None else out


def _reduce_window(kind: str) -> Rule:
    """reduce_window_{sum,max,min} (pooling) as the reduction of one strided slice per window
    tap of the padded input; so its gradient is built from slice and pad (max/min: ties share
    the gradient equally, where JAX gives it to one tapped element)."""
    def rule(cx: Cx, a: list[Variable], p: dict) -> Variable:
        x = a[0]
        win, strides = p["window_dimensions"], p["window_strides"]
        base, wdil = p["base_dilation"], p["window_dilation"]
        fill = {"sum": 0, "max": -np.inf, "min": np.inf}[kind]
        if not dtypes.is_inexact(x.dtype) and kind != "sum":
            fill = (np.iinfo(x.dtype).min if kind == "max" else np.iinfo(x.dtype).max)
        cfg = [(lo, hi, b - 1) for (lo, hi), b in zip(p["padding"], base)]
        xp = _pad_with(x, None if fill == 0 else constant(np.asarray(fill, x.dtype)[()]), cfg)
        out_shape = [(d - (k - 1) * wd - 1) // s + 1 if d > (k - 1) * wd else 0
                     for d, k, wd, s in zip(xp.shape, win, wdil, strides)]
        taps = []
        for offs in np.ndindex(*win):
            start = [o * wd for o, wd in zip(offs, wdil)]
            limit = [st + (n - 1) * s + 1 if n else st
                     for st, n, s in zip(start, out_shape, strides)]
            taps.append(S.slice(xp, start, limit, strides))
        if kind == "sum":
            out = taps[0]
            for t in taps[1:]:
                out = out + t
            return out
        stacked = S.stack(taps, axis=-1)
        return (R.max if kind == "max" else R.min)(stacked, -1)
    return rule


def _argminmax(fn: Callable[..., Variable]) -> Rule:
    def rule(cx: Cx, a: list[Variable], p: dict) -> Variable:
        (axis,) = p["axes"]
        return E.astype(fn(a[0], axis), dtypes.canonical(p["index_dtype"]))
    return rule


def _reduce_bool(kind: str) -> Rule:
    def rule(cx: Cx, a: list[Variable], p: dict) -> Variable:
        ints = E.astype(a[0], np.int32)
        if kind == "and":
            return E.equal(R.min(ints, tuple(p["axes"])), 1)
        return E.equal(R.max(ints, tuple(p["axes"])), 1)
    return rule


def _split(cx: Cx, a: list[Variable], p: dict) -> list[Variable]:
    x, axis = a[0], p["axis"]
    outs, at = [], 0
    for n in p["sizes"]:
        start, limit = [0] * x.ndim, list(x.shape)
        start[axis], limit[axis] = at, at + int(n)
        outs.append(S.slice(x, start, limit))
        at += int(n)
    return outs


def _gather(cx: Cx, a: list[Variable], p: dict) -> Variable:
    return X.gather(a[0], a[1], _dnums(p["dimension_numbers"]), p["slice_sizes"],
                    _mode(p["mode"], "gather"), p["fill_value"], p["indices_are_sorted"],
                    p["unique_indices"])


def _scatter(fn: Callable[..., Variable], prim: str) -> Rule:
    def rule(cx: Cx, a: list[Variable], p: dict) -> Variable:
        if p.get("update_consts"):
            raise _refuse(prim, "a scatter with a custom combiner is not supported")
        return fn(a[0], a[1], a[2], _dnums(p["dimension_numbers"]), _mode(p["mode"], prim),
                  p["indices_are_sorted"], p["unique_indices"])
    return rule


def _dnums(dn: Any) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(int(d) for d in part) for part in dn)


def _mode(mode: Any, prim: str) -> str:
    name = getattr(mode, "name", str(mode)).upper()
    known = {"CLIP": "clip", "FILL_OR_DROP": "fill", "PROMISE_IN_BOUNDS": "promise_in_bounds"}
    if name not in known:
        raise _refuse(prim, f"indexing mode {name} is not supported")
    return known[name]


def _sort(cx: Cx, a: list[Variable], p: dict) -> list[Variable]:
    """lax.sort by one key (jnp.sort, argsort's sort of (x, iota)): the other operands follow
    the key's permutation."""
    if p["num_keys"] != 1:
        raise _refuse("sort", f"sorting by {p['num_keys']} keys is not translated")
    axis = p["dimension"]
    values, perm = SS._sorted("sort", a[0], axis, None, None, p["is_stable"], False)
    return [values] + [SS.take_along_axis(x, perm, axis) for x in a[1:]]


def _cumulative(fn: Callable[..., Variable]) -> Rule:
    return lambda cx, a, p: fn(a[0], p["axis"], p["reverse"])


def _identity(cx: Cx, a: list[Variable], p: dict) -> Any:
    return a[0]


# ---------------------------------------------------------------- the table

BASIC: dict[str, Rule] = {
    # elementwise, one argument
    "neg": _un(E.negative), "sign": _un(E.sign), "floor": _un(E.floor), "ceil": _un(E.ceil),
    "round": _round, "is_finite": _un(E.isfinite), "abs": _un(E.abs), "square": _un(E.square),
    "exp": _un(E.exp), "exp2": _un(E.exp2), "log": _un(E.log), "log1p": _un(E.log1p),
    "expm1": _un(E.expm1), "sqrt": _un(E.sqrt), "rsqrt": _un(E.rsqrt), "cbrt": _un(E.cbrt),
    "sin": _un(E.sin), "cos": _un(E.cos), "tan": _un(E.tan), "asin": _un(E.arcsin),
    "acos": _un(E.arccos), "atan": _un(E.arctan), "sinh": _un(E.sinh), "cosh": _un(E.cosh),
    "tanh": _un(E.tanh), "asinh": _un(E.arcsinh), "acosh": _un(E.arccosh),
    "atanh": _un(E.arctanh), "logistic": _un(E.sigmoid), "erf": _un(E.erf),
    "integer_pow": lambda cx, a, p: E.integer_pow(a[0], int(p["y"])),
    "not": _bool_only(E.logical_not, B.bitwise_not),
    # elementwise, two or more arguments
    "add": _bin(E.add), "add_any": _bin(E.add), "sub": _bin(E.subtract),
    "mul": _bin(E.multiply), "div": _div,
    "rem": _rem, "pow": _bin(E.power), "max": _bin(E.maximum), "min": _bin(E.minimum),
    "atan2": _bin(E.arctan2), "and": _bool_only(E.logical_and, B.bitwise_and),
    "or": _bool_only(E.logical_or, B.bitwise_or), "xor": _bool_only(E.not_equal, B.bitwise_xor),
    "eq": _bin(E.equal), "ne": _bin(E.not_equal), "lt": _bin(E.less), "le": _bin(E.less_equal),
    "gt": _bin(E.greater), "ge": _bin(E.greater_equal), "select_n": _select_n, "clamp": _clamp,
    # types and values
    "convert_element_type": _convert, "reduce_precision": _reduce_precision, "iota": _iota,
    "stop_gradient": _un(E.stop_gradient), "copy": _identity,
    "device_put": lambda cx, a, p: list(a), "sharding_constraint": _identity,
    "optimization_barrier": lambda cx, a, p: list(a),
    "debug_print": _debug_print,
    # shapes
    "broadcast_in_dim": _broadcast_in_dim,
    "reshape": lambda cx, a, p: S.reshape(a[0], tuple(p["new_sizes"])),
    "squeeze": lambda cx, a, p: S.squeeze(a[0], tuple(p["dimensions"])),
    "transpose": lambda cx, a, p: S.transpose(a[0], tuple(p["permutation"])),
    "rev": lambda cx, a, p: S.rev(a[0], tuple(p["dimensions"])),
    "concatenate": lambda cx, a, p: S.concatenate(a, p["dimension"]), "pad": _pad,
    "slice": lambda cx, a, p: S.slice(a[0], p["start_indices"], p["limit_indices"],
                                      p["strides"] or (1,) * a[0].ndim),
    "split": _split,
    # indexing
    "dynamic_slice": lambda cx, a, p: dynamic_slice(a[0], a[1:], p["slice_sizes"]),
    "dynamic_update_slice": lambda cx, a, p: dynamic_update_slice(a[0], a[1], a[2:]),
    "gather": _gather, "scatter-add": _scatter(X.scatter_add, "scatter-add"),
    "scatter": _scatter(X.scatter, "scatter"),
    "scatter-mul": _scatter(X.scatter_mul, "scatter-mul"),
    "scatter-min": _scatter(X.scatter_min, "scatter-min"),
    "scatter-max": _scatter(X.scatter_max, "scatter-max"),
    # contractions
    "dot_general": _dot_general, "conv_general_dilated": _conv,
    # reductions
    "reduce_sum": lambda cx, a, p: R.sum(a[0], tuple(p["axes"])),
    "reduce_max": lambda cx, a, p: R.max(a[0], tuple(p["axes"])),
    "reduce_min": lambda cx, a, p: R.min(a[0], tuple(p["axes"])),
    "reduce_prod": lambda cx, a, p: R.prod(a[0], tuple(p["axes"])),
    "reduce_and": _reduce_bool("and"), "reduce_or": _reduce_bool("or"),
    "argmax": _argminmax(R.argmax), "argmin": _argminmax(R.argmin),
    "reduce_window_sum": _reduce_window("sum"), "reduce_window_max": _reduce_window("max"),
    "reduce_window_min": _reduce_window("min"),
    "cumsum": _cumulative(SS.lax_cumsum), "cumprod": _cumulative(SS.lax_cumprod),
    "cummax": _cumulative(SS.cummax), "cummin": _cumulative(SS.cummin), "sort": _sort,
}
