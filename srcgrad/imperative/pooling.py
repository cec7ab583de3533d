"""PyTorch's pooling functions (`F.max_pool2d`, `F.avg_pool2d`, their 1-D and 3-D forms, the
adaptive averages) with its signatures, output sizes and gradients.

    y = F.max_pool2d(x, 2)                    # x (N, C, H, W) or (C, H, W); stride = kernel
    y, idx = F.max_pool2d(x, 3, 2, padding=1, return_indices=True)

Each window is a strided slice of the (padded) input, one per kernel offset, stacked on a
last axis. A max takes the first largest element of a window in row-major order, as
PyTorch's kernel does, and its gradient goes to that element alone (jnp.max would split it
among ties: after a ReLU, windows of zeros are common); NaN wins, as in PyTorch. The
average's divisor follows PyTorch's rules for padding (`count_include_pad`), `ceil_mode`
and `divisor_override`, computed on the host per output position. The adaptive averages
are products with averaging matrices (linear, so their gradient is exact).

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, NamedTuple, Sequence

import numpy as np

from .. import ops as declared_ops
from ..base import dtypes
from ..core import dispatch
from .functional import fail

#: The op namespace (its names are declared when srcgrad is imported: mypy cannot see them).
ops: Any = declared_ops


class Window(NamedTuple):
    """One pooling's geometry per spatial axis (all tuples of n ints)."""

    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]
    out: tuple[int, ...]
    extra: tuple[int, ...]  # padding past `padding` on the high side (ceil_mode)


def _ints(who: str, v: int | Sequence[int], n: int, what: str) -> tuple[int, ...]:
    out = (int(v),) * n if isinstance(v, (int, np.integer)) else tuple(int(x) for x in v)
    if len(out) == 1 and n > 1:
        out = out * n
    if len(out) != n:
        raise fail(who, f"{what} needs 1 or {n} values, got {v!r}")
    return out


def window(
    who: str,
    x: Any,
    n: int,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    ceil_mode: bool,
) -> Window:
    """The geometry of an n-D pooling of `x` ((N, C, *n) or (C, *n)), checked as PyTorch
    checks it."""
    if x.ndim not in (n + 1, n + 2):
        raise fail(
            who, f"the input must be (N, C, {n} axes) or (C, {n} axes), got {tuple(x.shape)}"
        )
    k = _ints(who, kernel_size, n, "kernel_size")
    s = k if stride is None or stride == [] or stride == () else _ints(who, stride, n, "stride")
    p = _ints(who, padding, n, "padding")
    d = _ints(who, dilation, n, "dilation")
    if min(k) < 1 or min(s) < 1 or min(d) < 1 or min(p) < 0:
        raise fail(
            who, f"kernel {k}, stride {s} and dilation {d} must be positive, padding {p} >= 0"
        )
    outs, extras = [], []
    for size, ki, si, pi, di in zip(x.shape[-n:], k, s, p, d):
        eff = di * (ki - 1) + 1
        if pi > eff // 2:
            raise fail(who, f"padding {p} should be at most half of the (dilated) kernel {k}")
        span = size + 2 * pi - eff
        if span < 0:
            raise fail(who, f"the kernel {k} is larger than the padded input {tuple(x.shape)}")
        o = (-(-span // si) if ceil_mode else span // si) + 1
        if ceil_mode and (o - 1) * si >= size + pi:
            o -= 1  # the last window must start inside the input or its low padding
        outs.append(o)
        extras.append(max(0, (o - 1) * si + eff - (size + 2 * pi)))
    return Window(k, s, p, d, tuple(outs), tuple(extras))


def _taps(x: Any, w: Window, fill: float) -> Any:
    """x padded, then one strided slice per kernel offset, stacked on a new last axis."""
    n = len(w.kernel)
    lead = x.ndim - n
    widths = [(0, 0)] * lead + [(p, p + e) for p, e in zip(w.padding, w.extra)]
    if any(lo or hi for lo, hi in widths):
        x = ops.pad(x, widths, constant_values=fill)
    taps = []
    for offsets in itertools.product(*(range(k) for k in w.kernel)):
        index = [slice(None)] * lead
        for off, s, d, o in zip(offsets, w.stride, w.dilation, w.out):
            index.append(slice(off * d, off * d + (o - 1) * s + 1, s))
        taps.append(x[tuple(index)])
    return ops.stack(taps, axis=-1)


def _lowest(dtype: Any) -> float:
    dt = np.dtype(dtype)
    return -math.inf if dtypes.is_inexact(dt) else int(np.iinfo(dt).min)


def _max_pool(x: Any, w: Window, indices: bool) -> Any:
    stacked = _taps(x, w, _lowest(x.dtype))
    arg = ops.argmax(stacked, axis=-1, keepdims=True)
    values = ops.squeeze(ops.take_along_axis(stacked, arg, -1), -1)
    if not indices:
        return values
    table = ops.broadcast_to(_index_table(x.shape[-len(w.kernel) :], w), stacked.shape)
    return values, ops.squeeze(ops.take_along_axis(table, arg, -1), -1)


def _index_table(sizes: Sequence[int], w: Window) -> np.ndarray:
    """Per output position and kernel offset, the flat index of the input element it reads
    (PyTorch's `return_indices`: an index into each plane of the unpadded input)."""
    grids = np.meshgrid(*(np.arange(o) for o in w.out), indexing="ij")
    cols = []
    for offsets in itertools.product(*(range(k) for k in w.kernel)):
        pos = [
            g * s - p + off * d
            for g, s, p, off, d in zip(grids, w.stride, w.padding, offsets, w.dilation)
        ]
        clipped = [np.clip(q, 0, size - 1) for q, size in zip(pos, sizes)]
        cols.append(np.ravel_multi_index(tuple(clipped), tuple(sizes)))
    return np.stack(cols, axis=-1).astype(dtypes.default_int())


def _divisor(sizes: Sequence[int], w: Window, count_include_pad: bool) -> np.ndarray:
    """PyTorch's divisor of each average: the window clipped to the padded input (padding
    counted) or to the input itself."""
    per_axis = []
    for size, o, k, s, p in zip(sizes, w.out, w.kernel, w.stride, w.padding):
        start = np.arange(o) * s - p
        end = np.minimum(start + k, size + p)
        pool = end - start
        count = np.minimum(end, size) - np.maximum(start, 0)
        per_axis.append(pool if count_include_pad else count)
    div = per_axis[0]
    for d in per_axis[1:]:
        div = np.multiply.outer(div, d)
    return np.asarray(div, np.float64)


def _avg_pool(x: Any, w: Window, count_include_pad: bool, divisor_override: Any) -> Any:
    total = ops.sum(_taps(x, w, 0.0), axis=-1)
    if divisor_override is not None:
        return total / float(divisor_override)
    div = _divisor(x.shape[-len(w.kernel) :], w, count_include_pad)
    return total / div.astype(np.dtype(total.dtype))


def _max(
    who: str,
    n: int,
    input: Any,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    ceil_mode: bool,
    return_indices: bool,
) -> Any:
    w = window(who, input, n, kernel_size, stride, padding, dilation, ceil_mode)
    return dispatch.call(_max_pool, (input, w, bool(return_indices)), {})


def _avg(
    who: str,
    n: int,
    input: Any,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: Any,
) -> Any:
    w = window(who, input, n, kernel_size, stride, padding, 1, ceil_mode)
    if divisor_override is not None and divisor_override == 0:
        raise fail(who, "divisor_override must not be 0")
    args = (input, w, bool(count_include_pad), divisor_override)
    return dispatch.call(_avg_pool, args, {})


def max_pool1d(
    input: Any,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Any:
    """Max over windows of the last axis of (N, C, L) or (C, L); stride defaults to the
    kernel; `return_indices` also gives each max's index along L."""
    return _max(
        "max_pool1d", 1, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices
    )


def max_pool2d(
    input: Any,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Any:
    """Max over windows of (N, C, H, W) or (C, H, W); `return_indices` gives each max's
    flat index into its H x W plane, as PyTorch's."""
    return _max(
        "max_pool2d", 2, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices
    )


def max_pool3d(
    input: Any,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Any:
    return _max(
        "max_pool3d", 3, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices
    )


def avg_pool1d(
    input: Any,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> Any:
    """Mean over windows of the last axis of (N, C, L) or (C, L)."""
    return _avg(
        "avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode, count_include_pad, None
    )


def avg_pool2d(
    input: Any,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Any:
    """Mean over windows of (N, C, H, W) or (C, H, W); zero padding counts in the divisor
    unless `count_include_pad=False`; `divisor_override` replaces the divisor."""
    return _avg(
        "avg_pool2d",
        2,
        input,
        kernel_size,
        stride,
        padding,
        ceil_mode,
        count_include_pad,
        divisor_override,
    )


def avg_pool3d(
    input: Any,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Any:
    return _avg(
        "avg_pool3d",
        3,
        input,
        kernel_size,
        stride,
        padding,
        ceil_mode,
        count_include_pad,
        divisor_override,
    )


def _averaging(size: int, out: int) -> np.ndarray:
    """(out, size): row o averages input [floor(o size / out), ceil((o + 1) size / out))."""
    m = np.zeros((out, size))
    for o in range(out):
        lo, hi = (o * size) // out, -(-((o + 1) * size) // out)
        m[o, lo:hi] = 1.0 / (hi - lo)
    return m


def _adaptive(who: str, n: int, input: Any, output_size: Any) -> Any:
    if input.ndim not in (n + 1, n + 2):
        raise fail(
            who, f"the input must be (N, C, {n} axes) or (C, {n} axes), got {tuple(input.shape)}"
        )
    sizes = tuple(input.shape[-n:])
    raw = (
        (output_size,) * n
        if isinstance(output_size, (int, np.integer)) or output_size is None
        else tuple(output_size)
    )
    if len(raw) != n:
        raise fail(who, f"output_size needs {n} values, got {output_size!r}")
    outs = tuple(s if o is None else int(o) for o, s in zip(raw, sizes))
    if min(outs) < 1:
        raise fail(who, f"output_size must be positive, got {output_size!r}")
    return dispatch.call(_adaptive_avg, (input, outs), {})


def _adaptive_avg(x: Any, outs: tuple[int, ...]) -> Any:
    n = len(outs)
    dt = np.dtype(x.dtype)
    for axis, out in zip(range(x.ndim - n, x.ndim), outs):
        m = _averaging(x.shape[axis], out).astype(dt)
        x = ops.moveaxis(ops.tensordot(x, m, axes=([axis], [1])), -1, axis)
    return x


def adaptive_avg_pool1d(input: Any, output_size: Any) -> Any:
    """Means over `output_size` windows of the last axis, PyTorch's windows."""
    return _adaptive("adaptive_avg_pool1d", 1, input, output_size)


def adaptive_avg_pool2d(input: Any, output_size: Any) -> Any:
    """Means over an `output_size` grid of windows of (N, C, H, W) (None: keep that size)."""
    return _adaptive("adaptive_avg_pool2d", 2, input, output_size)


__all__ = [
    "max_pool1d",
    "max_pool2d",
    "max_pool3d",
    "avg_pool1d",
    "avg_pool2d",
    "avg_pool3d",
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
]
