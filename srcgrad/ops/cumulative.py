"""Sums, products and differences along an axis, in jax.numpy's names: the cumulative rows
(`cumsum`, `cumprod`, `cummax`, `cummin`, lax's, with `axis` and `reverse`; cumprod's
gradient is JAX's, the transpose of its associative scan's JVP), diff, ediff1d, trapezoid,
cumulative_sum/prod and gradient.

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

import builtins
from typing import Any, Sequence

import jax.numpy as jnp
import numpy as np

from ..base import dtypes
from ..base.errors import ShapeError
from ..core.builder import as_var
from ..core.declare import Emitted, defop, public
from ..core.registry import OutType
from ..ir.program import Op, Variable
from .creation import full
from .elementwise import (
    add,
    astype,
    equal,
    greater,
    isnan,
    less,
    multiply,
    not_equal,
    subtract,
    where,
)
from .grad_helpers import add_n
from .manip import iota, scatter_along, moveaxis, window
from .rules import jax_dtype, norm_axis
from .shape import broadcast_to, concatenate, expand_dims, lax_pad, ravel, rev
from .shape import slice as lax_slice


def _cum_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    x = inputs[0]
    norm_axis(attrs["axis"], x.ndim)
    return [(x.shape, x.dtype)]


def _cum_lower(name: str) -> str:
    return f"lax.{name}({{0}}, axis={{axis}}, reverse={{reverse}})"


def _g_cumsum(op: Op, g: Variable) -> Variable:
    return lax_cumsum(g, op.attrs["axis"], not op.attrs["reverse"])


def shift(v: Variable, axis: int, by: int, fill: float = 0.0) -> Variable:
    """`v` shifted by one along `axis` (`by` = 1: toward higher indices), `fill` coming in."""
    n = v.shape[axis]
    if n == 0:
        return v
    kept = window(v, axis, 0, n - 1) if by > 0 else window(v, axis, 1, n)
    if fill == 0.0:
        cfg = [(0, 0, 0)] * v.ndim
        cfg[axis] = (1, 0, 0) if by > 0 else (0, 1, 0)
        return lax_pad(kept, cfg)
    edge = broadcast_to(
        astype(as_var(fill, like=v), v.dtype), v.shape[:axis] + (1,) + v.shape[axis + 1 :]
    )
    return concatenate([edge, kept] if by > 0 else [kept, edge], axis)


def _strided(v: Variable, axis: int, lo: int, hi: int, step: int = 1) -> Variable:
    """`v[..., lo:hi:step, ...]` along `axis` (lax.slice_in_dim)."""
    start, limit, strides = [0] * v.ndim, list(v.shape), [1] * v.ndim
    start[axis], limit[axis], strides[axis] = lo, hi, step
    return lax_slice(v, start, limit, strides)


def _placed(v: Variable, axis: int, n: int, lo: int, step: int = 1) -> Variable:
    """The transpose of `_strided(x, axis, lo, ..., step)` for an `x` of length `n`: `v`'s
    elements at positions lo, lo + step, ... of zeros of that length."""
    m = v.shape[axis]
    cfg = [(0, 0, 0)] * v.ndim
    cfg[axis] = (lo, n - lo - (m - 1) * step - 1, step - 1) if m else (0, n, 0)
    return lax_pad(v, cfg)


def _g_cumprod(op: Op, g: Variable) -> Variable:
    """jax.grad's gradient of cumprod: the transpose of the JVP of lax.associative_scan(mul)
    (JAX's rule on every backend), written out level by level. Pairs are multiplied (level
    l + 1 scans x[0::2] * x[1::2] of level l), the odd outputs are the scan one level down
    and the even ones that scan times x[2::2]; the cotangent runs the same tree back. The
    same products as JAX's, so zeros are exact and infinities give JAX's inf or NaN."""
    x, axis = op.inputs[0], op.attrs["axis"]
    if op.attrs["reverse"]:
        x, g = rev(x, (axis,)), rev(g, (axis,))
    levels = []  # per level: its elements and the pairs' factors a = x[0::2], b = x[1::2]
    while x.shape[axis] >= 2:
        n = x.shape[axis]
        a, b = _strided(x, axis, 0, n - 1, 2), _strided(x, axis, 1, n, 2)
        levels.append((x, a, b))
        x = multiply(a, b)
    scan, forward = x, []  # scan: the forward scan of the level below
    for xl, _, _ in reversed(levels):
        n = xl.shape[axis]
        lhs = _strided(scan, axis, 0, scan.shape[axis] - 1) if n % 2 == 0 else scan
        c = _strided(xl, axis, 2, n, 2)
        forward.append((lhs, c))
        even = concatenate([_strided(xl, axis, 0, 1), multiply(lhs, c)], axis)
        scan = add(_placed(even, axis, n, 0, 2), _placed(scan, axis, n, 1, 2))
    forward.reverse()
    cts, ct = [], g  # down: the cotangent of each level's scan
    for (xl, _, _), (_, c) in zip(levels, forward):
        n = xl.shape[axis]
        ct_even, ct_odd = _strided(ct, axis, 2, n, 2), _strided(ct, axis, 1, n, 2)
        ct_lhs = multiply(ct_even, c)
        if n % 2 == 0:
            ct_lhs = _placed(ct_lhs, axis, ct_odd.shape[axis], 0)
        cts.append((ct, ct_even))
        ct = add(ct_odd, ct_lhs)
    for (xl, a, b), (lhs, _), (ct_top, ct_even) in zip(
        reversed(levels), reversed(forward), reversed(cts)
    ):
        n = xl.shape[axis]  # up: ct is the cotangent of this level's pairs
        ct = add_n(
            [
                _placed(_strided(ct_top, axis, 0, 1), axis, n, 0),
                _placed(multiply(ct_even, lhs), axis, n, 2, 2),
                _placed(multiply(ct, b), axis, n, 0, 2),
                _placed(multiply(ct, a), axis, n, 1, 2),
            ]
        )
    return rev(ct, (axis,)) if op.attrs["reverse"] else ct


def _g_cumulative_extreme(op: Op, g: Variable) -> Variable:
    """Each output's gradient goes to the position of its running extreme (the first one
    where several are equal; JAX splits it by its scan tree); a NaN output's goes nowhere."""
    x, out = op.inputs[0], op.outputs[0]
    axis, reverse = op.attrs["axis"], op.attrs["reverse"]
    n = x.shape[axis]
    if n == 0:
        return g
    if dtypes.is_inexact(out.dtype):  # a NaN result past the first takes no gradient (JAX's)
        first = equal(iota(x, axis, dtypes.default_int()), n - 1 if reverse else 0)
        g = where(isnan(out) & ~first, 0.0, g)
    better = greater if op.type == "cummax" else less
    if reverse:  # the position counted from the end
        x, out = rev(x, (axis,)), rev(out, (axis,))
    prev = concatenate([window(x, axis, 0, 1), window(out, axis, 0, n - 1)], axis)
    new = better(x, prev)
    pos = iota(x, axis, dtypes.default_int())
    is_first = equal(pos, 0)
    where_new = where(new | is_first, pos, 0)
    idx = cummax(where_new, axis, False)
    if reverse:
        idx = subtract(n - 1, rev(idx, (axis,)))
    return scatter_along(g, idx, axis)


def _cumulative_front(name: str) -> Any:
    def front(x: Variable, axis: int = 0, reverse: bool = False) -> Emitted:
        x = as_var(x)
        if x.ndim == 0:
            raise ShapeError(f"{name} needs an array of rank >= 1, got {x.type_str()}", op=name)
        return [x], {"axis": norm_axis(axis, x.ndim), "reverse": bool(reverse)}

    front.__name__ = front.__qualname__ = name
    front.__doc__ = f"lax.{name}(operand, axis=0, reverse=False)."
    return front


lax_cumsum = defop("cumsum", _cum_rule, _cum_lower("cumsum"), (_g_cumsum,), export="cumsum")(
    _cumulative_front("cumsum")
)


lax_cumprod = defop("cumprod", _cum_rule, _cum_lower("cumprod"), (_g_cumprod,), export="cumprod")(
    _cumulative_front("cumprod")
)


cummax = defop("cummax", _cum_rule, _cum_lower("cummax"), (_g_cumulative_extreme,))(
    _cumulative_front("cummax")
)


cummin = defop("cummin", _cum_rule, _cum_lower("cummin"), (_g_cumulative_extreme,))(
    _cumulative_front("cummin")
)


def _cumulative(name: str, a: Any, axis: int | None, dtype: Any, out: None) -> Variable:
    if out is not None:
        raise ShapeError(
            "out= is not supported (JAX arrays are immutable); use the result", op=name
        )
    x = as_var(a)
    if axis is None:
        x, axis = ravel(x), 0
    want = dtypes.canonical(dtype) if dtype is not None else jax_dtype(getattr(jnp, name), x.dtype)
    x = astype(x, want)
    return (lax_cumsum if name == "cumsum" else lax_cumprod)(x, axis)


@public
def cumsum(a: Any, axis: int | None = None, dtype: Any = None, out: None = None) -> Variable:
    """jnp.cumsum(a, axis=None, dtype=None, out=None): None flattens; bools and small ints
    accumulate in the default int, as jnp."""
    return _cumulative("cumsum", a, axis, dtype, out)


@public
def cumprod(a: Any, axis: int | None = None, dtype: Any = None, out: None = None) -> Variable:
    """jnp.cumprod(a, axis=None, dtype=None, out=None); the gradient is exact with zeros."""
    return _cumulative("cumprod", a, axis, dtype, out)


@public
def diff(a: Any, n: int = 1, axis: int = -1, prepend: Any = None, append: Any = None) -> Variable:
    """jnp.diff: the `n`-th forward difference along `axis` (bools: not_equal), after
    concatenating `prepend` and `append` (scalars broadcast to one slice)."""
    x = as_var(a)
    if x.ndim == 0:
        raise ShapeError("diff needs an array of rank >= 1", op="diff")
    axis = norm_axis(axis, x.ndim)
    n = int(n)
    if n < 0:
        raise ShapeError(f"diff: order n must be non-negative, got {n}", op="diff")
    if n == 0:
        return x

    def edge(extra: Any) -> Variable:
        e = as_var(extra, like=x)
        return broadcast_to(e, x.shape[:axis] + (1,) + x.shape[axis + 1 :]) if e.ndim == 0 else e

    parts = (
        ([edge(prepend)] if prepend is not None else [])
        + [x]
        + ([edge(append)] if append is not None else [])
    )
    out = concatenate(parts, axis) if len(parts) > 1 else x
    for _ in range(n):
        m = out.shape[axis]
        hi, lo = (
            window(out, axis, builtins.min(1, m), m),
            window(out, axis, 0, builtins.max(m - 1, 0)),
        )
        out = not_equal(hi, lo) if out.dtype == np.dtype(bool) else subtract(hi, lo)
    return out


@public
def ediff1d(ary: Any, to_end: Any = None, to_begin: Any = None) -> Variable:
    """jnp.ediff1d: differences of the flattened array, with optional ends."""
    out = diff(ravel(as_var(ary)))
    parts = [ravel(astype(as_var(to_begin), out.dtype))] if to_begin is not None else []
    parts.append(out)
    if to_end is not None:
        parts.append(ravel(astype(as_var(to_end), out.dtype)))
    return concatenate(parts, 0) if len(parts) > 1 else out


def _cumulative_from(
    fn: Any, name: str, x: Any, axis: int | None, dtype: Any, include_initial: bool, start: int
) -> Variable:
    x = as_var(x)
    if axis is None:
        if x.ndim > 1:
            raise ShapeError(f"{name}: axis must be given for an array of rank {x.ndim}", op=name)
        axis = 0
    axis = norm_axis(axis, x.ndim)
    out = fn(x, axis, dtype)
    if not include_initial:
        return out
    shape = out.shape[:axis] + (1,) + out.shape[axis + 1 :]
    return concatenate([full(shape, start, out.dtype), out], axis)


@public
def cumulative_sum(
    x: Any, /, *, axis: int | None = None, dtype: Any = None, include_initial: bool = False
) -> Variable:
    """jnp.cumulative_sum (the array API cumsum; `include_initial` prepends a zero)."""
    return _cumulative_from(cumsum, "cumulative_sum", x, axis, dtype, include_initial, 0)


@public
def cumulative_prod(
    x: Any, /, *, axis: int | None = None, dtype: Any = None, include_initial: bool = False
) -> Variable:
    """jnp.cumulative_prod (the array API cumprod; `include_initial` prepends a one)."""
    return _cumulative_from(cumprod, "cumulative_prod", x, axis, dtype, include_initial, 1)


def expand_to(v: Variable, ndim: int, axis: int) -> Variable:
    """`v` with a new `axis` when it has one axis fewer than `ndim` (0-d stays 0-d)."""
    if v.ndim == 0:
        return v
    return expand_dims(v, axis) if v.ndim == ndim - 1 else v


@public
def gradient(
    f: Any, *varargs: Any, axis: int | Sequence[int] | None = None, edge_order: int | None = None
) -> Any:
    """jnp.gradient with unit or scalar spacing: central differences inside, one-sided at
    the edges; a list for several axes."""
    f = as_var(f)
    if not dtypes.is_inexact(f.dtype):
        f = astype(f, dtypes.default_float())
    axes = (
        list(range(f.ndim)) if axis is None else ([axis] if isinstance(axis, int) else list(axis))
    )
    spacing = list(varargs) if varargs else [1.0] * len(axes)
    if len(spacing) == 1 and len(axes) > 1:
        spacing = spacing * len(axes)
    outs = []
    for ax, h in zip(axes, spacing):
        if not isinstance(h, (int, float)):
            raise ShapeError("gradient supports scalar spacing only", op="gradient")
        g = moveaxis(f, ax, 0)
        if g.shape[0] < 2:
            raise ShapeError("gradient needs at least 2 points along each axis", op="gradient")
        inner = (g[2:] - g[:-2]) / (2.0 * h)
        first = (g[1:2] - g[0:1]) / float(h)
        last = (g[-1:] - g[-2:-1]) / float(h)
        outs.append(moveaxis(concatenate([first, inner, last], 0), 0, ax))
    return outs[0] if len(outs) == 1 else outs
