"""Convolutions and pooling of any rank: the `conv` row (a contraction over windows, with its
gradient), lax.conv_general_dilated and lax.conv_transpose over it, and max/avg pooling over
1, 2 or 3 spatial axes built from strided slices (so they differentiate to any order).

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

import itertools
from functools import lru_cache
from typing import Any, Sequence

import jax
import numpy as np
from jax import lax

from ..base import dtypes
from ..core.builder import as_var, emit1
from ..base.errors import ShapeError
from ..ir.program import Op, Variable
from .creation import full
from ..core.declare import Emitted, defop, public
from .elementwise import astype
from .reduce import max as reduce_max
from .reduce import mean
from .shape import concatenate, expand_dims, lax_pad, reshape, rev, slice, swapaxes
from ..core.registry import MULTILINEAR, OutType


def _spec_indices(spec: str, chars: str) -> tuple[int, ...]:
    return (spec.index(chars[0]), spec.index(chars[1])) + tuple(
        i for i, c in enumerate(spec) if c not in chars[:2]
    )


@lru_cache(maxsize=1024)
def _conv_shape(
    lhs: tuple, rhs: tuple, dts: tuple, attrs: tuple
) -> tuple[tuple[int, ...], np.dtype]:
    strides, padding, lhs_dil, rhs_dil, dn, groups, batch_groups = attrs
    out = jax.eval_shape(
        lambda a, b: lax.conv_general_dilated(
            a,
            b,
            strides,
            padding,
            lhs_dil,
            rhs_dil,
            lax.ConvDimensionNumbers(*dn),
            groups,
            batch_groups,
        ),
        jax.ShapeDtypeStruct(lhs, dts[0]),
        jax.ShapeDtypeStruct(rhs, dts[1]),
    )
    return tuple(out.shape), np.dtype(out.dtype)


def _groups(attrs: dict[str, Any]) -> tuple[int, int]:
    """(feature_group_count, batch_group_count); an attr is present only when it is not 1."""
    return attrs.get("feature_group_count", 1), attrs.get("batch_group_count", 1)


def _conv_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    x, w = inputs
    key = (
        attrs["window_strides"],
        attrs["padding"],
        attrs["lhs_dilation"],
        attrs["rhs_dilation"],
        attrs["dimension_numbers"],
        *_groups(attrs),
    )
    try:
        return [_conv_shape(x.shape, w.shape, (x.dtype, w.dtype), key)]
    except (TypeError, ValueError) as e:
        raise ShapeError(f"conv of {x.type_str()} with kernel {w.type_str()}: {e}") from None


def conv_op(
    x: Variable,
    w: Variable,
    strides: tuple,
    padding: tuple,
    lhs_dil: tuple,
    rhs_dil: tuple,
    dn: tuple,
    feature_group_count: int = 1,
    batch_group_count: int = 1,
) -> Variable:
    """lax.conv_general_dilated as one `conv` op (`dn`: the three specs as index tuples)."""
    attrs = {
        "window_strides": tuple(strides),
        "padding": tuple(padding),
        "lhs_dilation": tuple(lhs_dil),
        "rhs_dilation": tuple(rhs_dil),
        "dimension_numbers": dn,
    }
    if feature_group_count != 1:
        attrs["feature_group_count"] = int(feature_group_count)
    if batch_group_count != 1:
        attrs["batch_group_count"] = int(batch_group_count)
    return emit1("conv", [x, w], attrs)


def _dilate(shape: Sequence[int], dil: Sequence[int]) -> np.ndarray:
    return np.array([0 if s == 0 else 1 + d * (s - 1) for s, d in zip(shape, dil)])


def _swap(spec: tuple[int, ...]) -> tuple[int, ...]:
    return (spec[1], spec[0]) + spec[2:]


def _axis_out_of(src: int, size: int, x: Variable) -> Variable:
    """Split axis `src` of `x` into (size, rest) (JAX's _reshape_axis_out_of)."""
    shape = list(x.shape)
    shape[src : src + 1] = [size, shape[src] // size]
    return reshape(x, tuple(shape))


def _axis_into(src: int, dst: int, x: Variable) -> Variable:
    """Merge axis `src` into axis `dst` (numbered without `src`), `src` the major part
    (JAX's _reshape_axis_into)."""
    from .shape import transpose

    perm = [i for i in range(x.ndim) if i != src]
    perm.insert(dst, src)
    shape = [d for i, d in enumerate(x.shape) if i != src]
    shape[dst] *= x.shape[src]
    return reshape(transpose(x, perm), tuple(shape))


def _g_conv(op: Op, g: list, need: list) -> list:
    """The transposes of conv_general_dilated, stated as convolutions (as JAX does), grouped
    ones included (feature groups become batch groups of the kernel's gradient and back)."""
    x, w = op.inputs
    a = op.attrs
    groups, batch_groups = _groups(a)
    lhs_spec, rhs_spec, out_spec = a["dimension_numbers"]
    strides, padding = a["window_strides"], a["padding"]
    lhs_dil, rhs_dil = a["lhs_dilation"], a["rhs_dilation"]
    in_sp = [x.shape[i] for i in lhs_spec[2:]]
    k_sp = [w.shape[i] for i in rhs_spec[2:]]
    out_sp = [g[0].shape[i] for i in out_spec[2:]]
    lhs_d, rhs_d, out_d = _dilate(in_sp, lhs_dil), _dilate(k_sp, rhs_dil), _dilate(out_sp, strides)
    gx = gw = None
    if need[0]:
        before = rhs_d - np.array([lo for lo, _ in padding]) - 1
        after = lhs_d + rhs_d - 1 - out_d - before
        pads = tuple((int(b), int(e)) for b, e in zip(before, after))
        k = w
        if groups > 1 or batch_groups > 1:
            k = _axis_into(
                rhs_spec[0], rhs_spec[1], _axis_out_of(rhs_spec[0], max(groups, batch_groups), w)
            )
        gx = conv_op(
            g[0],
            rev(k, rhs_spec[2:]),
            lhs_dil,
            pads,
            strides,
            rhs_dil,
            (out_spec, _swap(rhs_spec), lhs_spec),
            max(groups, batch_groups),
        )
        if batch_groups > 1:
            gx = _axis_into(lhs_spec[1], lhs_spec[0], _axis_out_of(lhs_spec[1], batch_groups, gx))
    if need[1]:
        lo = np.array([p for p, _ in padding])
        hi = (out_d - lhs_d) + (rhs_d - lo - 1)
        pads = tuple((int(p), int(q)) for p, q in zip(lo, hi))
        gw = conv_op(
            x,
            g[0],
            rhs_dil,
            pads,
            lhs_dil,
            strides,
            (_swap(lhs_spec), _swap(out_spec), _swap(rhs_spec)),
            feature_group_count=batch_groups,
            batch_group_count=groups,
        )
    return [gx, gw]


def _lower_conv(args: list[str], attrs: dict[str, str]) -> str:
    groups = "".join(
        f", {k}={attrs[k]}" for k in ("feature_group_count", "batch_group_count") if k in attrs
    )
    return (
        f"lax.conv_general_dilated({args[0]}, {args[1]}, {attrs['window_strides']}, "
        f"{attrs['padding']}, {attrs['lhs_dilation']}, {attrs['rhs_dilation']}, "
        f"lax.ConvDimensionNumbers(*{attrs['dimension_numbers']}){groups})"
    )


def conv_padding(
    padding: Any,
    x: Variable,
    w: Variable,
    dn: tuple,
    strides: Sequence[int],
    rhs_dilation: Sequence[int],
    op: str,
) -> tuple[tuple[int, int], ...]:
    """Explicit (low, high) pairs for `padding`: a string (SAME, SAME_LOWER, VALID) as
    lax.padtype_to_pads computes it for the dilated kernel, or the pairs themselves."""
    if isinstance(padding, str):
        if padding.upper() not in ("SAME", "SAME_LOWER", "VALID"):
            raise ShapeError(
                f"padding must be SAME, SAME_LOWER, VALID or explicit pairs, got {padding!r}", op=op
            )
        k_spatial = [w.shape[i] for i in dn[1][2:]]
        x_spatial = [x.shape[i] for i in dn[0][2:]]
        dil_k = tuple((k - 1) * d + 1 for k, d in zip(k_spatial, rhs_dilation))
        return tuple(
            (int(lo), int(hi))
            for lo, hi in lax.padtype_to_pads(x_spatial, dil_k, tuple(strides), padding.upper())
        )
    return tuple((int(lo), int(hi)) for lo, hi in padding)


def layout_specs(layout: str, op: str) -> tuple[str, str, str]:
    """(input, kernel, output) specs of a layout: NWC/NHWC/NDHWC (kernel WIO/HWIO/DHWIO) or
    NCW/NCHW/NCDHW (kernel OIW/OIHW/OIDHW)."""
    spatial = layout.replace("N", "").replace("C", "")
    if (
        layout not in (f"N{spatial}C", f"NC{spatial}")
        or not spatial
        or len(set(layout)) < len(layout)
        or "O" in spatial
        or "I" in spatial
    ):
        raise ShapeError(
            f"layout must be one of NWC, NHWC, NDHWC, NCW, NCHW, NCDHW (N, the "
            f"spatial axes and C), got {layout!r}",
            op=op,
        )
    kernel = spatial + "IO" if layout.endswith("C") else "OI" + spatial
    return layout, kernel, layout


@defop("conv", _conv_rule, _lower_conv, _g_conv, jvp=MULTILINEAR)
def conv(
    x: Any,
    w: Any,
    strides: Sequence[int] | None = None,
    padding: str | Sequence[tuple[int, int]] = "VALID",
    layout: str = "NHWC",
    rhs_dilation: Sequence[int] | None = None,
    *,
    feature_group_count: int = 1,
) -> Emitted:
    """N-d convolution (1-D, 2-D, 3-D, ...) given by `layout`: NHWC (kernel HWIO), NCHW
    (kernel OIHW), NWC/NCW, NDHWC/NCDHW; `feature_group_count` groups the input channels
    (depthwise: the channel count). Strides and dilation default to ones."""
    x, w = as_var(x), as_var(w)
    lhs_s, rhs_s, out_s = layout_specs(layout, "conv")
    if x.ndim != len(lhs_s) or w.ndim != len(lhs_s):
        raise ShapeError(
            f"conv with layout {layout} needs a {len(lhs_s)}-D input and kernel, "
            f"got {x.type_str()} and {w.type_str()}",
            op="conv",
        )
    n = len(lhs_s) - 2
    dn = (_spec_indices(lhs_s, "NC"), _spec_indices(rhs_s, "OI"), _spec_indices(out_s, "NC"))
    strides = (1,) * n if strides is None else tuple(int(s) for s in strides)
    rhs_dilation = (1,) * n if rhs_dilation is None else tuple(int(d) for d in rhs_dilation)
    attrs = {
        "window_strides": strides,
        "padding": conv_padding(padding, x, w, dn, strides, rhs_dilation, "conv"),
        "lhs_dilation": (1,) * n,
        "rhs_dilation": rhs_dilation,
        "dimension_numbers": dn,
    }
    if feature_group_count != 1:
        attrs["feature_group_count"] = int(feature_group_count)
    return [x, w], attrs


Padding = str | Sequence[tuple[int, int]]


def _dimension_numbers(x: Variable, w: Variable, dimension_numbers: Any) -> tuple:
    if isinstance(dimension_numbers, lax.ConvDimensionNumbers) or (
        isinstance(dimension_numbers, tuple)
        and all(isinstance(s, tuple) for s in dimension_numbers)
    ):
        dimension_numbers = lax.ConvDimensionNumbers(*dimension_numbers)
    try:
        dn = lax.conv_dimension_numbers(x.shape, w.shape, dimension_numbers)
    except (TypeError, ValueError) as e:
        raise ShapeError(
            f"dimension_numbers {dimension_numbers!r} for {x.type_str()} and "
            f"kernel {w.type_str()}: {e}",
            op="conv_general_dilated",
        ) from None
    return tuple(tuple(int(i) for i in spec) for spec in dn)


@public
def conv_general_dilated(
    lhs: Any,
    rhs: Any,
    window_strides: Sequence[int],
    padding: Padding,
    lhs_dilation: Sequence[int] | None = None,
    rhs_dilation: Sequence[int] | None = None,
    dimension_numbers: Any = None,
    feature_group_count: int = 1,
    batch_group_count: int = 1,
    precision: Any = None,
    preferred_element_type: Any = None,
) -> Variable:
    """lax.conv_general_dilated: any rank, dimension numbers as strings or index tuples,
    lhs/rhs dilation (transposed convolution), feature and batch groups."""
    x, w = as_var(lhs), as_var(rhs)
    if x.ndim != w.ndim or x.ndim < 2:
        raise ShapeError(
            f"conv_general_dilated needs an input and a kernel of one rank >= 2, "
            f"got {x.type_str()} and {w.type_str()}",
            op="conv_general_dilated",
        )
    n = x.ndim - 2
    dn = _dimension_numbers(x, w, dimension_numbers)
    lhs_dil = (1,) * n if lhs_dilation is None else tuple(int(d) for d in lhs_dilation)
    rhs_dil = (1,) * n if rhs_dilation is None else tuple(int(d) for d in rhs_dilation)
    if isinstance(padding, str) and any(d != 1 for d in lhs_dil):
        raise ShapeError(
            "string padding with lhs_dilation (a transposed convolution): give "
            "explicit pairs or use conv_transpose",
            op="conv_general_dilated",
        )
    strides = tuple(int(s) for s in window_strides)
    pads = conv_padding(padding, x, w, dn, strides, rhs_dil, "conv_general_dilated")
    out = conv_op(x, w, strides, pads, lhs_dil, rhs_dil, dn, feature_group_count, batch_group_count)
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


_TRANSPOSE_DEFAULTS = {
    2: ("NC", "IO", "NC"),
    3: ("NHC", "HIO", "NHC"),
    4: ("NHWC", "HWIO", "NHWC"),
    5: ("NHWDC", "HWDIO", "NHWDC"),
}


@public
def conv_transpose(
    lhs: Any,
    rhs: Any,
    strides: Sequence[int],
    padding: Padding,
    rhs_dilation: Sequence[int] | None = None,
    dimension_numbers: Any = None,
    transpose_kernel: bool = False,
    precision: Any = None,
    preferred_element_type: Any = None,
    use_consistent_padding: bool = False,
) -> Variable:
    """lax.conv_transpose: the transposed (fractionally strided) convolution, with its
    padding conventions (keras' Conv2DTranspose)."""
    x, w = as_var(lhs), as_var(rhs)
    if dimension_numbers is None:
        if x.ndim not in _TRANSPOSE_DEFAULTS:
            raise ShapeError(
                f"conv_transpose has default dimension numbers for ranks 2 to 5, "
                f"got {x.type_str()}",
                op="conv_transpose",
            )
        dimension_numbers = _TRANSPOSE_DEFAULTS[x.ndim]
    dn = _dimension_numbers(x, w, dimension_numbers)
    k_sdims = [w.shape[i] for i in dn[1][2:]]
    rhs_dil = (1,) * len(k_sdims) if rhs_dilation is None else tuple(rhs_dilation)
    if use_consistent_padding or (isinstance(padding, str) and padding in ("SAME", "VALID")):
        eff = [0 if k == 0 else 1 + r * (k - 1) for k, r in zip(k_sdims, rhs_dil)]
        per_axis = [padding] * len(strides) if isinstance(padding, str) else list(padding)
        pads: Padding = tuple(
            _transpose_padding(k, s, tuple(p) if not isinstance(p, str) else p)
            for k, s, p in zip(eff, strides, per_axis)
        )
    else:
        pads = padding
    if transpose_kernel:
        w = swapaxes(rev(w, dn[1][2:]), dn[1][0], dn[1][1])
    return conv_general_dilated(
        x,
        w,
        (1,) * len(k_sdims),
        pads,
        tuple(strides),
        rhs_dil,
        dn,
        preferred_element_type=preferred_element_type,
    )


# ---------------------------------------------------------------- pooling


def _pad_lowest(x: Variable, config: Sequence[tuple[int, int, int]]) -> Variable:
    """Pad with the lowest value of the dtype (-inf for floats), which never wins a max."""
    low = -np.inf if dtypes.is_inexact(x.dtype) else np.iinfo(x.dtype).min
    for a, (lo, hi, _) in enumerate(config):
        if lo or hi:
            edges = [full(x.shape[:a] + (n,) + x.shape[a + 1 :], low, x.dtype) for n in (lo, hi)]
            x = concatenate([edges[0], x, edges[1]], a)
    return x


def _pool(
    x: Any,
    window: Sequence[int],
    strides: Sequence[int] | None,
    padding: str,
    layout: str,
    kind: str,
) -> Variable:
    """Windowed max/mean over the spatial axes of `layout`, built from slices."""
    op = f"{kind}_pool"
    x = as_var(x)
    spec = layout_specs(layout, op)[0]
    window = tuple(int(k) for k in window)
    axes = tuple(i for i, c in enumerate(spec) if c not in "NC")
    if x.ndim != len(spec) or len(window) != len(axes):
        raise ShapeError(
            f"{op} with layout {layout} needs a {len(spec)}-D input and a window "
            f"of {len(axes)}, got {x.type_str()} and window {window}",
            op=op,
        )
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
            shape[a : a + 1] = [shape[a] // k, k]
        return reduce(reshape(x, tuple(shape)), [a + i + 1 for i, a in enumerate(axes)])
    taps = []
    for offsets in itertools.product(*[range(k) for k in window]):
        start, limit, step = [0] * x.ndim, list(x.shape), [1] * x.ndim
        for a, off, o, s in zip(axes, offsets, outs, strides):
            start[a], limit[a], step[a] = off, off + (o - 1) * s + 1, s
        taps.append(expand_dims(slice(x, start, limit, step), -1))
    return reduce(concatenate(taps, -1), -1)


@public
def max_pool(
    x: Any,
    window: Sequence[int],
    strides: Sequence[int] | None = None,
    padding: str = "VALID",
    layout: str = "NHWC",
) -> Variable:
    """Max pooling over 1, 2 or 3 spatial axes (layout NWC, NHWC, NDHWC or channels-first);
    with SAME padding the padded positions never win (as lax.reduce_window)."""
    return _pool(x, window, strides, padding, layout, "max")


@public
def avg_pool(
    x: Any,
    window: Sequence[int],
    strides: Sequence[int] | None = None,
    padding: str = "VALID",
    layout: str = "NHWC",
) -> Variable:
    """Average pooling over 1, 2 or 3 spatial axes; with SAME padding the padded zeros count
    (as flax's avg_pool)."""
    return _pool(x, window, strides, padding, layout, "avg")
