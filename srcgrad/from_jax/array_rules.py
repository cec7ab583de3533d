"""`sg.from_jax`'s translation rows for JAX's array primitives: elementwise math (special
functions, total-order comparisons and bit shifts included), types, shapes, indexing,
contractions, reductions, sorting and top_k. Each row is `rule(cx, args, params) -> value or
list of values`, `cx` the translator (translate.py), `args` srcgrad Variables.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import numpy as np

from ..base import dtypes
from ..core.builder import constant
from ..base.errors import SrcgradError, user_location
from ..ir.program import Variable
from ..ops import debug
from ..ops import manip
from ..ops import special
from ..ops import bitwise as bitwise_ops
from ..ops import elementwise
from ..ops import lax_primitives as primitives
from ..ops import contraction
from ..ops import cumulative
from ..ops import reduce
from ..ops import shape as shape_ops
from ..ops import sorting
from ..ops.conv import conv_op
from ..ops.creation import arange, full
from ..ops.indexing import dynamic_slice, dynamic_update_slice

#: The translator (from_jax._Translator): `call(jaxpr, args)`, `literal_value(v)`,
#: `max_iters`, `checkpoints`, `custom_rules`.
Cx = Any
Rule = Callable[[Cx, list[Variable], dict[str, Any]], Any]


def refuse(prim: str, why: str) -> SrcgradError:
    """The error for a JAX primitive srcgrad cannot translate, and why."""
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
    debug.emit_print(p["fmt"], list(args), dict(kwargs))
    return []


def _div(cx: Cx, a: list[Variable], p: dict) -> Variable:
    """lax.div: true division of floats; integer division rounds toward zero."""
    x, y = a
    if dtypes.is_inexact(x.dtype):
        return elementwise.divide(x, y)
    q = elementwise.floor_divide(x, y)
    inexact = elementwise.logical_and(
        elementwise.not_equal(elementwise.remainder(x, y), 0), elementwise.not_equal(x < 0, y < 0)
    )
    return elementwise.where(inexact, q + 1, q)


def _rem(cx: Cx, a: list[Variable], p: dict) -> Variable:
    """lax.rem: the remainder takes the sign of the dividend (C's fmod)."""
    x, y = a
    r = elementwise.remainder(x, y)
    flip = elementwise.logical_and(elementwise.not_equal(r, 0), elementwise.not_equal(r < 0, x < 0))
    return elementwise.where(flip, r - y, r)


def _round(cx: Cx, a: list[Variable], p: dict) -> Variable:
    x = a[0]
    if int(p.get("rounding_method", 0)) == 1:  # TO_NEAREST_EVEN, as jnp.round
        return elementwise.round(x)
    return elementwise.sign(x) * elementwise.floor(
        elementwise.abs(x) + 0.5
    )  # AWAY_FROM_ZERO, lax.round's default


def _select_n(cx: Cx, a: list[Variable], p: dict) -> Variable:
    """select_n(which, *cases): cases[which]; a bool `which` picks between two."""
    which, cases = a[0], a[1:]
    if which.dtype == np.dtype(bool):
        return elementwise.where(which, cases[1], cases[0]) if len(cases) == 2 else cases[0]
    out = cases[-1]
    for k in range(len(cases) - 2, -1, -1):
        out = elementwise.where(elementwise.equal(which, k), cases[k], out)
    return out


def _clamp(cx: Cx, a: list[Variable], p: dict) -> Variable:
    """lax.clamp with JAX's derivative: `x` where lo < x < hi, `lo` where x < lo < hi, `hi`
    where hi < x; at a tie or a NaN nothing takes it. Integers (lax.switch's index) need no
    derivative: `min(max(x, lo), hi)`."""
    lo, x, hi = a
    if not dtypes.is_inexact(x.dtype):
        return elementwise.minimum(elementwise.maximum(x, lo), hi)
    held = elementwise.stop_gradient(elementwise.minimum(elementwise.maximum(x, lo), hi))
    inside = elementwise.where(elementwise.logical_and(x > lo, x < hi), x, held)
    return elementwise.where(
        hi < x, hi, elementwise.where(elementwise.logical_and(lo > x, lo < hi), lo, inside)
    )


def _convert(cx: Cx, a: list[Variable], p: dict) -> Variable:
    return elementwise.astype(a[0], dtypes.canonical(p["new_dtype"]))


def _reduce_precision(cx: Cx, a: list[Variable], p: dict) -> Variable:
    x = a[0]
    info = np.finfo(x.dtype)
    if (p["exponent_bits"], p["mantissa_bits"]) != (info.nexp, info.nmant):
        raise refuse(
            "reduce_precision",
            f"rounding {x.type_str()} to {p['exponent_bits']} "
            f"exponent and {p['mantissa_bits']} mantissa bits is not supported",
        )
    return x


def _iota(cx: Cx, a: list[Variable], p: dict) -> Variable:
    shape, dim = tuple(p["shape"]), p["dimension"]
    line = arange(0, shape[dim], dtype=dtypes.canonical(p["dtype"]))
    return shape_ops.broadcast_to(
        shape_ops.reshape(line, tuple(d if i == dim else 1 for i, d in enumerate(shape))), shape
    )


def _broadcast_in_dim(cx: Cx, a: list[Variable], p: dict) -> Variable:
    x, shape, dims = a[0], tuple(p["shape"]), tuple(p["broadcast_dimensions"])
    kept = [1] * len(shape)
    for d, size in zip(dims, x.shape):
        kept[d] = size
    return shape_ops.broadcast_to(shape_ops.reshape(x, tuple(kept)), shape)


def _pad_with(
    x: Variable, value: Variable | None, config: Sequence[tuple[int, int, int]]
) -> Variable:
    """lax.pad: `value` (None: zero) in the new positions; negative low/high padding crops."""
    grow = [(max(lo, 0), max(hi, 0), it) for lo, hi, it in config]
    out = shape_ops.lax_pad(x, grow)
    if value is not None:
        inside = shape_ops.lax_pad(full(x.shape, True, np.dtype(bool)), grow)
        out = elementwise.where(inside, out, value)
    if any(lo < 0 or hi < 0 for lo, hi, _ in config):
        start = [max(-lo, 0) for lo, _, _ in config]
        limit = [d - max(-hi, 0) for d, (_, hi, _) in zip(out.shape, config)]
        out = shape_ops.slice(out, start, limit)
    return out


def _pad(cx: Cx, a: list[Variable], p: dict) -> Variable:
    return _pad_with(a[0], None if cx.literal_value(a[1]) == 0 else a[1], p["padding_config"])


def _dot_general(cx: Cx, a: list[Variable], p: dict) -> Variable:
    """dot_general as an einsum: batch dimensions, then lhs free, then rhs free."""
    x, y = a
    (cx_, cy), (bx, by) = p["dimension_numbers"]
    pref = p.get("preferred_element_type")
    if _is_matmul(x.ndim, y.ndim, tuple(cx_), tuple(cy), tuple(bx), tuple(by)):
        r = contraction.matmul(x, y)
        return elementwise.astype(r, dtypes.canonical(pref)) if pref is not None else r
    letters = iter("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    xs, ys = [""] * x.ndim, [""] * y.ndim
    for i, j in list(zip(bx, by)) + list(zip(cx_, cy)):
        xs[i] = ys[j] = next(letters)
    for t in (xs, ys):
        for i, c in enumerate(t):
            t[i] = c or next(letters)
    out = (
        "".join(xs[i] for i in bx)
        + "".join(c for i, c in enumerate(xs) if i not in bx + cx_)
        + "".join(c for i, c in enumerate(ys) if i not in by + cy)
    )
    r = contraction.einsum(f"{''.join(xs)},{''.join(ys)}->{out}", x, y)
    return elementwise.astype(r, dtypes.canonical(pref)) if pref is not None else r


def _is_matmul(nx: int, ny: int, cx: tuple, cy: tuple, bx: tuple, by: tuple) -> bool:
    """True when dot_general is what jnp.matmul computes: (..., k) @ (k[, n]), or a batched
    (B, m, k) @ (B, k, n) with the batch axes leading."""
    if not bx and not by:
        return nx >= 1 and ny in (1, 2) and cx == (nx - 1,) and cy == (0,)
    b = len(bx)
    return bx == by == tuple(range(b)) and nx == ny == b + 2 and cx == (b + 1,) and cy == (b,)


def _conv(cx: Cx, a: list[Variable], p: dict) -> Variable:
    if p["feature_group_count"] != 1 or p["batch_group_count"] != 1:
        return cx.fallback(a)  # grouped: JAX's convolution, as a jax_op
    dn = p["dimension_numbers"]
    pads = p["padding"]
    if isinstance(pads, str):
        raise refuse("conv_general_dilated", f"string padding {pads!r} in a jaxpr")
    out = conv_op(
        a[0],
        a[1],
        p["window_strides"],
        tuple(tuple(q) for q in pads),
        p["lhs_dilation"],
        p["rhs_dilation"],
        (tuple(dn.lhs_spec), tuple(dn.rhs_spec), tuple(dn.out_spec)),
    )
    pref = p.get("preferred_element_type")
    return elementwise.astype(out, dtypes.canonical(pref)) if pref is not None else out


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
            fill = np.iinfo(x.dtype).min if kind == "max" else np.iinfo(x.dtype).max
        cfg = [(lo, hi, b - 1) for (lo, hi), b in zip(p["padding"], base)]
        xp = _pad_with(x, None if fill == 0 else constant(np.asarray(fill, x.dtype)[()]), cfg)
        out_shape = [
            (d - (k - 1) * wd - 1) // s + 1 if d > (k - 1) * wd else 0
            for d, k, wd, s in zip(xp.shape, win, wdil, strides)
        ]
        taps = []
        for offs in np.ndindex(*win):
            start = [o * wd for o, wd in zip(offs, wdil)]
            limit = [
                st + (n - 1) * s + 1 if n else st for st, n, s in zip(start, out_shape, strides)
            ]
            taps.append(shape_ops.slice(xp, start, limit, strides))
        if kind == "sum":
            out = taps[0]
            for t in taps[1:]:
                out = out + t
            return out
        stacked = shape_ops.stack(taps, axis=-1)
        return (reduce.max if kind == "max" else reduce.min)(stacked, -1)

    return rule


def _argminmax(fn: Callable[..., Variable]) -> Rule:
    def rule(cx: Cx, a: list[Variable], p: dict) -> Variable:
        (axis,) = p["axes"]
        return elementwise.astype(fn(a[0], axis), dtypes.canonical(p["index_dtype"]))

    return rule


def _reduce_bool(kind: str) -> Rule:
    def rule(cx: Cx, a: list[Variable], p: dict) -> Variable:
        ints = elementwise.astype(a[0], np.int32)
        if kind == "and":
            return elementwise.equal(reduce.min(ints, tuple(p["axes"])), 1)
        return elementwise.equal(reduce.max(ints, tuple(p["axes"])), 1)

    return rule


def _split(cx: Cx, a: list[Variable], p: dict) -> list[Variable]:
    x, axis = a[0], p["axis"]
    outs, at = [], 0
    for n in p["sizes"]:
        start, limit = [0] * x.ndim, list(x.shape)
        start[axis], limit[axis] = at, at + int(n)
        outs.append(shape_ops.slice(x, start, limit))
        at += int(n)
    return outs


def _gather(cx: Cx, a: list[Variable], p: dict) -> Variable:
    return primitives.gather(
        a[0],
        a[1],
        _dnums(p["dimension_numbers"]),
        p["slice_sizes"],
        _mode(p["mode"], "gather"),
        p["fill_value"],
        p["indices_are_sorted"],
        p["unique_indices"],
    )


def _scatter(fn: Callable[..., Variable], prim: str) -> Rule:
    def rule(cx: Cx, a: list[Variable], p: dict) -> Variable:
        if p.get("update_consts"):
            raise refuse(prim, "a scatter with a custom combiner is not supported")
        return fn(
            a[0],
            a[1],
            a[2],
            _dnums(p["dimension_numbers"]),
            _mode(p["mode"], prim),
            p["indices_are_sorted"],
            p["unique_indices"],
        )

    return rule


def _dnums(dn: Any) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(int(d) for d in part) for part in dn)


def _mode(mode: Any, prim: str) -> str:
    name = getattr(mode, "name", str(mode)).upper()
    known = {"CLIP": "clip", "FILL_OR_DROP": "fill", "PROMISE_IN_BOUNDS": "promise_in_bounds"}
    if name not in known:
        raise refuse(prim, f"indexing mode {name} is not supported")
    return known[name]


def _sort(cx: Cx, a: list[Variable], p: dict) -> list[Variable]:
    """lax.sort by one key (jnp.sort, argsort's sort of (x, iota)): the other operands follow
    the key's permutation."""
    if p["num_keys"] != 1:
        raise refuse("sort", f"sorting by {p['num_keys']} keys is not translated")
    axis = p["dimension"]
    values, perm = sorting.sort_with_permutation(
        "sort", a[0], axis, None, None, p["is_stable"], False
    )
    return [values] + [sorting.take_along_axis(x, perm, axis) for x in a[1:]]


def _cumulative(fn: Callable[..., Variable]) -> Rule:
    return lambda cx, a, p: fn(a[0], p["axis"], p["reverse"])


def _identity(cx: Cx, a: list[Variable], p: dict) -> Any:
    return a[0]


def _unstack(cx: Cx, a: list[Variable], p: dict) -> list[Variable]:
    x, axis = a[0], p["axis"] % a[0].ndim
    outs = []
    for i in range(x.shape[axis]):
        start, limit = [0] * x.ndim, list(x.shape)
        start[axis], limit[axis] = i, i + 1
        outs.append(shape_ops.squeeze(shape_ops.slice(x, start, limit), axis))
    return outs


def _polygamma(cx: Cx, a: list[Variable], p: dict) -> Variable:
    """lax.polygamma(m, x) with a literal order m (jax.scipy.special.polygamma's); a traced
    order runs as a jax_op."""
    m = cx.literal_value(a[0])
    if m is None or float(m) != int(m) or int(m) < 0:
        return cx.fallback(a)
    return special.polygamma(int(m), a[1])


def _top_k(cx: Cx, a: list[Variable], p: dict) -> list[Variable]:
    """lax.top_k's indices, and its values read at them (take_along_axis: so the gradient
    goes to the chosen elements, as JAX's does); another axis than the last is swapped there
    and back (older JAX has no `axis`: the last)."""
    x = a[0]
    axis, last = p.get("axis", -1) % x.ndim, x.ndim - 1
    perm = list(range(x.ndim))
    perm[axis], perm[last] = last, axis
    if axis != last:
        x = shape_ops.transpose(x, tuple(perm))
    idx = primitives.top_k_indices(x, k=int(p["k"]))
    out = [sorting.take_along_axis(x, idx, last), idx]
    return [shape_ops.transpose(v, tuple(perm)) for v in out] if axis != last else out


def _total_key(x: Variable) -> Variable:
    """An integer of `x`'s width ordered as lax's total order orders floats (-NaN < -inf <
    ... < -0.0 < 0.0 < ... < inf < NaN): the bits, with a negative number's magnitude bits
    flipped."""
    if not dtypes.is_inexact(x.dtype):
        return x
    it = np.dtype(f"int{x.dtype.itemsize * 8}")
    k = primitives.bitcast(x, dtype=it)
    return elementwise.where(k < 0, bitwise_ops.bitwise_xor(k, int(np.iinfo(it).max)), k)


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


# ---------------------------------------------------------------- the table

BASIC: dict[str, Rule] = {
    # elementwise, one argument
    "neg": _un(elementwise.negative),
    "sign": _un(elementwise.sign),
    "floor": _un(elementwise.floor),
    "ceil": _un(elementwise.ceil),
    "round": _round,
    "is_finite": _un(elementwise.isfinite),
    "abs": _un(elementwise.abs),
    "square": _un(elementwise.square),
    "exp": _un(elementwise.exp),
    "exp2": _un(elementwise.exp2),
    "log": _un(elementwise.log),
    "log1p": _un(elementwise.log1p),
    "expm1": _un(elementwise.expm1),
    "sqrt": _un(elementwise.sqrt),
    "rsqrt": _un(elementwise.rsqrt),
    "cbrt": _un(elementwise.cbrt),
    "sin": _un(elementwise.sin),
    "cos": _un(elementwise.cos),
    "tan": _un(elementwise.tan),
    "asin": _un(elementwise.arcsin),
    "acos": _un(elementwise.arccos),
    "atan": _un(elementwise.arctan),
    "sinh": _un(elementwise.sinh),
    "cosh": _un(elementwise.cosh),
    "tanh": _un(elementwise.tanh),
    "asinh": _un(elementwise.arcsinh),
    "acosh": _un(elementwise.arccosh),
    "atanh": _un(elementwise.arctanh),
    "logistic": _un(elementwise.sigmoid),
    "erf": _un(elementwise.erf),
    "integer_pow": lambda cx, a, p: elementwise.integer_pow(a[0], int(p["y"])),
    "not": _bool_only(elementwise.logical_not, bitwise_ops.bitwise_not),
    # elementwise, two or more arguments
    "add": _bin(elementwise.add),
    "add_any": _bin(elementwise.add),
    "sub": _bin(elementwise.subtract),
    "mul": _bin(elementwise.multiply),
    "div": _div,
    "rem": _rem,
    "pow": _bin(elementwise.power),
    "max": _bin(elementwise.maximum),
    "min": _bin(elementwise.minimum),
    "atan2": _bin(elementwise.arctan2),
    "and": _bool_only(elementwise.logical_and, bitwise_ops.bitwise_and),
    "or": _bool_only(elementwise.logical_or, bitwise_ops.bitwise_or),
    "xor": _bool_only(elementwise.not_equal, bitwise_ops.bitwise_xor),
    "eq": _bin(elementwise.equal),
    "ne": _bin(elementwise.not_equal),
    "lt": _bin(elementwise.less),
    "le": _bin(elementwise.less_equal),
    "gt": _bin(elementwise.greater),
    "ge": _bin(elementwise.greater_equal),
    "select_n": _select_n,
    "clamp": _clamp,
    # types and values
    "convert_element_type": _convert,
    "reduce_precision": _reduce_precision,
    "iota": _iota,
    "stop_gradient": _un(elementwise.stop_gradient),
    "copy": _identity,
    "device_put": lambda cx, a, p: list(a),
    "sharding_constraint": _identity,
    "optimization_barrier": lambda cx, a, p: list(a),
    "debug_print": _debug_print,
    # shapes
    "broadcast_in_dim": _broadcast_in_dim,
    "reshape": lambda cx, a, p: shape_ops.reshape(a[0], tuple(p["new_sizes"])),
    "squeeze": lambda cx, a, p: shape_ops.squeeze(a[0], tuple(p["dimensions"])),
    "transpose": lambda cx, a, p: shape_ops.transpose(a[0], tuple(p["permutation"])),
    "rev": lambda cx, a, p: shape_ops.rev(a[0], tuple(p["dimensions"])),
    "concatenate": lambda cx, a, p: shape_ops.concatenate(a, p["dimension"]),
    "pad": _pad,
    "slice": lambda cx, a, p: shape_ops.slice(
        a[0], p["start_indices"], p["limit_indices"], p["strides"] or (1,) * a[0].ndim
    ),
    "split": _split,
    # indexing
    "dynamic_slice": lambda cx, a, p: dynamic_slice(a[0], a[1:], p["slice_sizes"]),
    "dynamic_update_slice": lambda cx, a, p: dynamic_update_slice(a[0], a[1], a[2:]),
    "gather": _gather,
    "scatter-add": _scatter(primitives.scatter_add, "scatter-add"),
    "scatter": _scatter(primitives.scatter, "scatter"),
    "scatter-mul": _scatter(primitives.scatter_mul, "scatter-mul"),
    "scatter-min": _scatter(primitives.scatter_min, "scatter-min"),
    "scatter-max": _scatter(primitives.scatter_max, "scatter-max"),
    # contractions
    "dot_general": _dot_general,
    "conv_general_dilated": _conv,
    # reductions
    "reduce_sum": lambda cx, a, p: reduce.sum(a[0], tuple(p["axes"])),
    "reduce_max": lambda cx, a, p: reduce.max(a[0], tuple(p["axes"])),
    "reduce_min": lambda cx, a, p: reduce.min(a[0], tuple(p["axes"])),
    "reduce_prod": lambda cx, a, p: reduce.prod(a[0], tuple(p["axes"])),
    "reduce_and": _reduce_bool("and"),
    "reduce_or": _reduce_bool("or"),
    "argmax": _argminmax(reduce.argmax),
    "argmin": _argminmax(reduce.argmin),
    "reduce_window_sum": _reduce_window("sum"),
    "reduce_window_max": _reduce_window("max"),
    "reduce_window_min": _reduce_window("min"),
    "cumsum": _cumulative(cumulative.lax_cumsum),
    "cumprod": _cumulative(cumulative.lax_cumprod),
    "cummax": _cumulative(cumulative.cummax),
    "cummin": _cumulative(cumulative.cummin),
    "sort": _sort,
    # special functions (srcgrad/ops/special.py)
    "erfc": _un(special.erfc),
    "erf_inv": _un(special.erfinv),
    "lgamma": _un(special.gammaln),
    "digamma": _un(special.digamma),
    "bessel_i0e": _un(special.i0e),
    "bessel_i1e": _un(special.i1e),
    "igamma": lambda cx, a, p: special.gammainc(a[0], a[1]),
    "igammac": lambda cx, a, p: special.gammaincc(a[0], a[1]),
    "polygamma": _polygamma,
    # shapes (primitives of their own in current JAX)
    "stack": lambda cx, a, p: shape_ops.stack(a, p["axis"]),
    "tile": lambda cx, a, p: manip.tile(a[0], tuple(p["reps"])),
    "unstack": _unstack,
    # lax's own
    "top_k": _top_k,
    "nextafter": _bin(primitives.nextafter),
    "eq_to": _total(elementwise.equal),
    "le_to": _total(elementwise.less_equal),
    "lt_to": _total(elementwise.less),
    "bitcast_convert_type": lambda cx, a, p: primitives.bitcast(
        a[0], dtype=dtypes.canonical(p["new_dtype"])
    ),
    "shift_left": _bits(bitwise_ops.left_shift, None),
    "shift_right_logical": _bits(bitwise_ops.right_shift, False),
    "shift_right_arithmetic": _bits(bitwise_ops.right_shift, True),
    # equinox's markers of values no cotangent (nondifferentiable_backward) or tangent
    # (nondifferentiable) may reach: JAX's symbolic zeros arrive here as zero arrays, so the
    # rows are stop_gradient (code whose cotangent would be nonzero is an error under JAX)
    "nondifferentiable_backward": _un(elementwise.stop_gradient),
    "nondifferentiable": _un(elementwise.stop_gradient),
}
