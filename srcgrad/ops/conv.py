"""Convolutions and pooling of any rank: lax.conv_general_dilated and lax.conv_transpose over
the `conv` op (ops/contraction.py), and max/avg pooling over 1, 2 or 3 spatial axes built from
strided slices (so they differentiate to any order).

Layer L3 (the ops): see docs/design.md.
"""
from __future__ import annotations

import itertools
from typing import Any, Sequence

import numpy as np
from jax import lax

from ..base import dtypes
from ..core.builder import as_var
from ..base.errors import ShapeError
from ..ir.program import Variable
from .creation import full
from ..core.declare import public
from .elementwise import astype
from .contraction import _conv_op, conv_padding, layout_specs
from .reduce import max as reduce_max
from .reduce import mean
from .shape import concatenate, expand_dims, lax_pad, reshape, rev, slice, swapaxes

Padding = str | Sequence[tuple[int, int]]


def _dimension_numbers(x: Variable, w: Variable, dimension_numbers: Any) -> tuple:
    if isinstance(dimension_numbers, lax.ConvDimensionNumbers) or (
            isinstance(dimension_numbers, tuple) and all(
                isinstance(s, tuple) for s in dimension_numbers)):
        dimension_numbers = lax.ConvDimensionNumbers(*dimension_numbers)
    try:
        dn = lax.conv_dimension_numbers(x.shape, w.shape, dimension_numbers)
    except (TypeError, ValueError) as e:
        raise ShapeError(f"dimension_numbers {dimension_numbers!r} for {x.type_str()} and "
                         f"kernel {w.type_str()}: {e}", op="conv_general_dilated") from None
    return tuple(tuple(int(i) for i in spec) for spec in dn)


@public
def conv_general_dilated(lhs: Any, rhs: Any, window_strides: Sequence[int], padding: Padding,
                         lhs_dilation: Sequence[int] | None = None,
                         rhs_dilation: Sequence[int] | None = None,
                         dimension_numbers: Any = None, feature_group_count: int = 1,
                         batch_group_count: int = 1, precision: Any = None,
                         preferred_element_type: Any = None) -> Variable:
    """lax.conv_general_dilated: any rank, dimension numbers as strings or index tuples,
    lhs/rhs dilation (transposed convolution), feature and batch groups."""
    x, w = as_var(lhs), as_var(rhs)
    if x.ndim != w.ndim or x.ndim < 2:
        raise ShapeError(f"conv_general_dilated needs an input and a kernel of one rank >= 2, "
                         f"got {x.type_str()} and {w.type_str()}", op="conv_general_dilated")
    n = x.ndim - 2
    dn = _dimension_numbers(x, w, dimension_numbers)
    lhs_dil = (1,) * n if lhs_dilation is None else tuple(int(d) for d in lhs_dilation)
    rhs_dil = (1,) * n if rhs_dilation is None else tuple(int(d) for d in rhs_dilation)
    if isinstance(padding, str) and any(d != 1 for d in lhs_dil):
        raise ShapeError("string padding with lhs_dilation (a transposed convolution): give "
                         "explicit pairs or use conv_transpose", op="conv_general_dilated")
    strides = tuple(int(s) for s in window_strides)
    pads = conv_padding(padding, x, w, dn, strides, rhs_dil, "conv_general_dilated")
    out = _conv_op(x, w, strides, pads, lhs_dil, rhs_dil, dn, feature_group_count,
                   batch_group_count)
    return out if preferred_element_type is None else astype(out, preferred_element_type)


def _transpose_padding(k: int, s: int, padding: Any) -> tuple[int, int]:
    """Before and after padding of one axis of a transposed convolution (lax's rule)."""
    if padding == "SAME":
        pad_len = k + s - 2
        before = k - 1 if s > k - 1 else int(np.ceil(pad_len / 2))
    elif padding == "VALID":
        pad_len = k + s - 2 + max(k - s, 0)
        before = k - 1
    else:
        pads = tuple(k - p - 1 for p in padding)
        before, pad_len = pads[0], sum(pads)
    return before, pad_len - before


_TRANSPOSE_DEFAULTS = {2: ("NC", "IO", "NC"), 3: ("NHC", "HIO", "NHC"),
                       4: ("NHWC", "HWIO", "NHWC"), 5: ("NHWDC", "HWDIO", "NHWDC")}


@public
def conv_transpose(lhs: Any, rhs: Any, strides: Sequence[int], padding: Padding,
                   rhs_dilation: Sequence[int] | None = None, dimension_numbers: Any = None,
                   transpose_kernel: bool = False, precision: Any = None,
                   preferred_element_type: Any = None,
                   use_consistent_padding: bool = False) -> Variable:
    """lax.conv_transpose: the transposed (fractionally strided) convolution, with its
    padding conventions (keras' Conv2DTranspose)."""
    x, w = as_var(lhs), as_var(rhs)
    if dimension_numbers is None:
        if x.ndim not in _TRANSPOSE_DEFAULTS:
            raise ShapeError(f"conv_transpose has default dimension numbers for ranks 2 to 5, "
                             f"got {x.type_str()}", op="conv_transpose")
        dimension_numbers = _TRANSPOSE_DEFAULTS[x.ndim]
    dn = _dimension_numbers(x, w, dimension_numbers)
    k_sdims = [w.shape[i] for i in dn[1][2:]]
    rhs_dil = (1,) * len(k_sdims) if rhs_dilation is None else tuple(rhs_dilation)
    if use_consistent_padding or (isinstance(padding, str) and padding in ("SAME", "VALID")):
        eff = [0 if k == 0 else 1 + r * (k - 1) for k, r in zip(k_sdims, rhs_dil)]
        per_axis = [padding] * len(strides) if isinstance(padding, str) else list(padding)
        pads: Padding = tuple(_transpose_padding(k, s, tuple(p) if not isinstance(p, str) else p)
                              for k, s, p in zip(eff, strides, per_axis))
    else:
        pads = padding
    if transpose_kernel:
        w = swapaxes(rev(w, dn[1][2:]), dn[1][0], dn[1][1])
    return conv_general_dilated(x, w, (1,) * len(k_sdims), pads, tuple(strides), rhs_dil, dn,
                                preferred_element_type=preferred_element_type)


# ---------------------------------------------------------------- pooling

def _pad_lowest(x: Variable, config: Sequence[tuple[int, int, int]]) -> Variable:
    """Pad with the lowest value of the dtype (-inf for floats), which never wins a max."""
    low = -np.inf if dtypes.is_inexact(x.dtype) else np.iinfo(x.dtype).min
    for a, (lo, hi, _) in enumerate(config):
        if lo or hi:
            edges = [full(x.shape[:a] + (n,) + x.shape[a + 1:], low, x.dtype) for n in (lo, hi)]
            x = concatenate([edges[0], x, edges[1]], a)
    return x


def _pool(x: Any, window: Sequence[int], strides: Sequence[int] | None, padding: str,
          layout: str, kind: str) -> Variable:
    """Windowed max/mean over the spatial axes of `layout`, built from slices."""
    op = f"{kind}_pool"
    x = as_var(x)
    spec = layout_specs(layout, op)[0]
    window = tuple(int(k) for k in window)
    axes = tuple(i for i, c in enumerate(spec) if c not in "NC")
    if x.ndim != len(spec) or len(window) != len(axes):
        raise ShapeError(f"{op} with layout {layout} needs a {len(spec)}-D input and a window "
                         f"of {len(axes)}, got {x.type_str()} and window {window}", op=op)
    strides = tuple(int(s) for s in strides) if strides is not None else window
    if not isinstance(padding, str) or padding.upper() not in ("SAME", "VALID"):
        raise ShapeError(f"padding must be SAME or VALID, got {padding!r}", op=op)
    if padding.upper() == "SAME":
        cfg = [(0, 0, 0)] * x.ndim
        for a, k, s in zip(axes, window, strides):
            total = max(0, (-(-x.shape[a] // s) - 1) * s + k - x.shape[a])
            cfg[a] = (total // 2, total - total // 2, 0)
        x = lax_pad(x, cfg) if kind == "avg" else _pad_lowest(x, cfg)
    outs = [(x.shape[a] - k) // s + 1 for a, k, s in zip(axes, window, strides)]
    if min(outs) <= 0:
        raise ShapeError(f"window {window} is larger than the input {x.type_str()}", op=op)
    reduce = reduce_max if kind == "max" else mean
    if window == strides and all(o * k == x.shape[a] for o, k, a in zip(outs, window, axes)):
        shape = list(x.shape)
        for a, k in reversed(list(zip(axes, window))):
            shape[a:a + 1] = [shape[a] // k, k]
        return reduce(reshape(x, tuple(shape)), [a + i + 1 for i, a in enumerate(axes)])
    taps = []
    for offsets in itertools.product(*[range(k) for k in window]):
        start, limit, step = [0] * x.ndim, list(x.shape), [1] * x.ndim
        for a, off, o, s in zip(axes, offsets, outs, strides):
            start[a], limit[a], step[a] = off, off + (o - 1) * s + 1, s
        taps.append(expand_dims(slice(x, start, limit, step), -1))
    return reduce(concatenate(taps, -1), -1)


@public
def max_pool(x: Any, window: Sequence[int], strides: Sequence[int] | None = None,
             padding: str = "VALID", layout: str = "NHWC") -> Variable:
    """Max pooling over 1, 2 or 3 spatial axes (layout NWC, NHWC, NDHWC or channels-first);
    with SAME padding the padded positions never win (as lax.reduce_window)."""
    return _pool(x, window, strides, padding, layout, "max")


@public
def avg_pool(x: Any, window: Sequence[int], strides: Sequence[int] | None = None,
             padding: str = "VALID", layout: str = "NHWC") -> Variable:
    """Average pooling over 1, 2 or 3 spatial axes; with SAME padding the padded zeros count
    (as flax's avg_pool)."""
    return _pool(x, window, strides, padding, layout, "avg")
