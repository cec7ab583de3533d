"""Tier 2, forward: every op's compiled result equals the jax.numpy equivalent.

One table of op cases. For each dtype variant of a case, hypothesis draws the static
parameters (axes, keepdims, strides, ...), shapes (broadcast pairs, 0-d, size-1 and size-0
axes where the op allows them) and values; `sg.jit(op)` must give jax.numpy's result, dtype
and shape included (exactly for integer and bool results). The strategies and helpers here are
shared with test_op_grads.py.
"""

from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from jax import lax

import srcgrad as sg
from srcgrad.ops import shape as shape_ops
from srcgrad.testing import arrays, broadcast_shapes, check_grads, shapes
from support.util import sliced

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
I32, I64, BOOL = np.dtype(np.int32), np.dtype(np.int64), np.dtype(bool)
FLOATS = ((F32,), (F64,))
NUMS = FLOATS + ((I32,),)
SIDE = 3  # the longest axis hypothesis draws

Shape = tuple[int, ...]
Draw = Callable[[st.DataObject, tuple[np.dtype, ...]], tuple[dict[str, Any], list[np.ndarray]]]


def examples(divisor: int, least: int = 2) -> settings:
    """Fewer examples than the profile's default: each example compiles a program per variant."""
    return settings(max_examples=max(least, settings.default.max_examples // divisor))


# ---------------------------------------------------------------- strategies


@dataclass(frozen=True)
class Dom:
    """The values one argument takes: a range, optionally away from zero or on a grid."""

    lo: float = -3.0
    hi: float = 3.0
    nonzero: bool = False
    step: float | None = None
    away: float = 0.0  # |value| >= away
    distinct: bool = False  # no two values equal


R = Dom()
POS = Dom(0.125, 3.0)
NONZERO = Dom(nonzero=True)
GRID = Dom(step=0.5)


def values(data: st.DataObject, shape: Shape, dtype: np.dtype, dom: Dom = R) -> np.ndarray:
    """An array of `shape` and `dtype` with values in `dom`."""
    if dtype == BOOL:
        return data.draw(arrays(shape, dtype))
    if dom.distinct:
        perm = np.array(data.draw(st.permutations(range(int(np.prod(shape))))))
        return ((perm - perm.size / 2) * 0.25).reshape(shape).astype(dtype)
    floating = dtype.kind == "f"
    a = data.draw(arrays(shape, dtype, dom.lo, dom.hi, exclude_zero=dom.nonzero and floating))
    if floating:  # no subnormals: XLA on CPU flushes them to zero
        a = np.where(np.abs(a) < np.finfo(np.float32).tiny, 0, a).astype(dtype)
    if dom.step is not None and floating:
        a = (np.round(a / dom.step) * dom.step).astype(dtype)
    if dom.nonzero and not floating:
        a = np.where(a == 0, 1, a).astype(dtype)
    if dom.away:
        a = np.where(np.abs(a) < dom.away, np.copysign(dom.away, a), a).astype(dtype)
    return a


def one_shape(min_dims: int = 0, max_dims: int = 3, min_side: int = 0) -> st.SearchStrategy:
    return shapes(min_dims, max_dims, min_side, SIDE)


def axes(ndim: int, tuples: bool = True) -> st.SearchStrategy:
    """None, an int axis (negative too) or, if `tuples`, a tuple of distinct axes."""
    if ndim == 0:
        return st.sampled_from([None, ()] if tuples else [None])
    options = [st.none(), st.integers(-ndim, ndim - 1)]
    if tuples:
        options.append(
            st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim).flatmap(
                lambda ax: st.tuples(*[st.sampled_from([a, a - ndim]) for a in ax])
            )
        )
    return st.one_of(options)


def elementwise(*doms: Dom) -> Draw:
    """Mutually broadcastable arguments, one per domain (dtypes cycle through the variant)."""

    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        shs = data.draw(broadcast_shapes(len(doms), 0, 3, 0, SIDE))
        return {}, [
            values(data, s, dts[i % len(dts)], d) for i, (s, d) in enumerate(zip(shs, doms))
        ]

    return draw


def where_args(dom: Dom = R) -> Draw:
    """A condition (bool, or int meaning != 0) and two values, all mutually broadcastable."""

    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        shs = data.draw(broadcast_shapes(3, 0, 3, 0, SIDE))
        cond = values(data, shs[0], data.draw(st.sampled_from([BOOL, I32])))
        return {}, [cond] + [values(data, s, dts[i % len(dts)], dom) for i, s in enumerate(shs[1:])]

    return draw


def with_specials(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
    """Values with some entries replaced by nan, inf or -inf (floats only)."""
    (x,) = elementwise(R)(data, dts)[1]
    if x.dtype.kind == "f" and x.size:
        picks = data.draw(hnp.arrays(np.int8, x.shape, elements=st.integers(0, 3)))
        x = np.where(
            picks == 1, np.nan, np.where(picks == 2, np.inf, np.where(picks == 3, -np.inf, x))
        ).astype(x.dtype)
    return {}, [x]


def stat_args(dom: Dom = R) -> Draw:
    """var/std: an int axis or None (at least two values each), keepdims and ddof 0 or 1."""

    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        params, args = reduction(dom, 2, False)(data, dts)
        return {**params, "ddof": data.draw(st.integers(0, 1))}, args

    return draw


METHODS: dict[str, Callable[[Any], Any]] = {
    "sum": lambda x: x.sum(axis=0),
    "mean": lambda x: x.mean(),
    "max": lambda x: x.max(axis=-1),
    "min": lambda x: x.min(keepdims=True),
    "prod": lambda x: x.prod(),
    "var": lambda x: x.var(),
    "std": lambda x: x.std(axis=0, ddof=1),
    "argmax": lambda x: x.argmax(),
    "argmin": lambda x: x.argmin(axis=0),
    "reshape": lambda x: x.reshape(-1),
    "transpose": lambda x: x.transpose(),
    "T": lambda x: x.T,
    "flatten": lambda x: x.flatten(),
    "ravel": lambda x: x.ravel(),
    "squeeze": lambda x: x[None].squeeze(0),
    "astype": lambda x: x.astype(np.float32),
    "dot": lambda x: x.dot(x.T),
    "clip": lambda x: x.clip(-0.5, 0.5),
    "round": lambda x: x.round(),
}


def method_args(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
    shape = data.draw(hnp.array_shapes(min_dims=2, max_dims=2, min_side=2, max_side=SIDE))
    return {"method": data.draw(st.sampled_from(sorted(METHODS)))}, [values(data, shape, dts[0])]


def clip_args(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
    """jnp.clip with Python bounds, either of them None."""
    lo = data.draw(st.sampled_from([None, -1.0, -0.5]))
    hi = data.draw(st.sampled_from([None, 0.5, 1.0]))
    return {"min": lo, "max": hi}, elementwise(R)(data, dts)[1]


def cast_args(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
    """An array and a target dtype for astype."""
    dtype = data.draw(st.sampled_from([F32, F64, I32, BOOL]))
    return {"dtype": dtype}, elementwise(R)(data, dts)[1]


def reduction(dom: Dom = R, min_side: int = 0, tuples: bool = True) -> Draw:
    """One array, `axis` (None, int or tuple) and `keepdims`."""

    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        shape = data.draw(one_shape(min_side=min_side))
        params = {"axis": data.draw(axes(len(shape), tuples)), "keepdims": data.draw(st.booleans())}
        return params, [values(data, shape, dts[0], dom)]

    return draw


def along_axis(dom: Dom = R) -> Draw:
    """One array of rank >= 1 and an int `axis`."""

    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        shape = data.draw(one_shape(min_dims=1))
        return {"axis": data.draw(st.integers(-len(shape), len(shape) - 1))}, [
            values(data, shape, dts[0], dom)
        ]

    return draw


def matmul_args(dom: Dom = R) -> Draw:
    """Batched operands with broadcasting batch dimensions, either of them possibly 1-D."""

    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        ba, bb = data.draw(broadcast_shapes(2, 0, 2, 0, 2))
        n, k, m = data.draw(st.tuples(*[st.integers(0, SIDE)] * 3))
        a = (k,) if data.draw(st.booleans()) else ba + (n, k)
        b = (k,) if data.draw(st.booleans()) else bb + (k, m)
        return {}, [values(data, a, dts[0], dom), values(data, b, dts[-1], dom)]

    return draw


def dot_args(dom: Dom = R) -> Draw:
    """jnp.dot's cases: a scalar factor, vector·vector, matrix·vector, N-D·matrix, N-D·vector,
    N-D·N-D."""

    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        n, k, m = data.draw(st.tuples(*[st.integers(0, SIDE)] * 3))
        lead = data.draw(one_shape(max_dims=2))
        a, b = data.draw(
            st.sampled_from(
                [
                    ((), lead + (k,)),
                    (lead, ()),
                    ((k,), (k,)),
                    ((n, k), (k,)),
                    ((k,), (k, m)),
                    (lead + (n, k), (k, m)),
                    (lead + (k,), (k,)),
                    (lead + (k,), (2, k, m)),
                    ((n, k), lead + (1, k, m)),
                ]
            )
        )
        return {}, [values(data, a, dts[0], dom), values(data, b, dts[-1], dom)]

    return draw


EINSUMS = [
    "ij,jk->ik",
    "ij,jk",
    "i,i->",
    "i,i",
    "bij,bjk->bik",
    "bij,jk->bik",
    "ij,kj->ik",
    "ij->ji",
    "ijk->kij",
    "i,j->ij",
    "ij,k->ijk",
    "ij->",
    "ij->j",
    "ij,ij->ij",
    "bi,bi->b",
    "ij,jk,kl->il",
    "i,i,i->",
    "ab,bc,ca",
    "ii->i",
    "iij->j",
    "ii,ij->j",
]


def einsum_args(dom: Dom = R) -> Draw:
    """Matmul/dot-like contractions, batch contractions, transposes and outer products."""

    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        spec = data.draw(st.sampled_from(EINSUMS))
        terms = spec.split("->")[0].split(",")
        size = {c: data.draw(st.integers(0, SIDE)) for c in sorted(set("".join(terms)))}
        return {"spec": spec}, [
            values(data, tuple(size[c] for c in t), dts[i % len(dts)], dom)
            for i, t in enumerate(terms)
        ]

    return draw


CONV_DN = {"NHWC": ("NHWC", "HWIO", "NHWC"), "NCHW": ("NCHW", "OIHW", "NCHW")}


def conv_args(dom: Dom = R) -> Draw:
    """2-D convolution: layout, strides, SAME/VALID/explicit padding and kernel dilation."""

    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        layout = data.draw(st.sampled_from(["NHWC", "NCHW"]))
        padding = data.draw(st.sampled_from(["SAME", "VALID", ((1, 0), (0, 2))]))
        strides = data.draw(st.tuples(st.integers(1, 2), st.integers(1, 2)))
        dilation = data.draw(st.sampled_from([(1, 1), (2, 1)]))
        kh, kw = data.draw(st.tuples(st.integers(1, 3), st.integers(1, 3)))
        lo_h = (kh - 1) * dilation[0] + 1 if padding != "SAME" else 1
        lo_w = (kw - 1) * dilation[1] + 1 if padding != "SAME" else 1
        h, w = data.draw(st.integers(lo_h, lo_h + 3)), data.draw(st.integers(lo_w, lo_w + 3))
        n, ci, co = data.draw(st.tuples(st.integers(1, 2), st.integers(1, 3), st.integers(1, 3)))
        xs = (n, h, w, ci) if layout == "NHWC" else (n, ci, h, w)
        ws = (kh, kw, ci, co) if layout == "NHWC" else (co, ci, kh, kw)
        params = {"strides": strides, "padding": padding, "layout": layout, "dilation": dilation}
        return params, [values(data, xs, dts[0], dom), values(data, ws, dts[-1], dom)]

    return draw


def conv_ours(x: Any, w: Any, strides: Shape, padding: str, layout: str, dilation: Shape) -> Any:
    return sg.conv(x, w, strides, padding, layout, rhs_dilation=dilation)


def conv_ref(x: Any, w: Any, strides: Shape, padding: str, layout: str, dilation: Shape) -> Any:
    return lax.conv_general_dilated(
        x, w, strides, padding, rhs_dilation=dilation, dimension_numbers=CONV_DN[layout]
    )


def pool_args(dom: Dom = R) -> Draw:
    """max_pool/avg_pool: window, strides (None: the window), SAME/VALID, NHWC/NCHW."""

    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        layout = data.draw(st.sampled_from(["NHWC", "NCHW"]))
        padding = data.draw(st.sampled_from(["SAME", "VALID"]))
        window = data.draw(st.tuples(st.integers(1, 3), st.integers(1, 3)))
        strides = data.draw(st.none() | st.tuples(st.integers(1, 3), st.integers(1, 3)))
        h, w = (data.draw(st.integers(k, k + 3)) for k in window)
        n, c = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2))
        shape = (n, h, w, c) if layout == "NHWC" else (n, c, h, w)
        params = {"window": window, "strides": strides, "padding": padding, "layout": layout}
        return params, [values(data, shape, dts[0], dom)]

    return draw


def pool_ref(kind: str) -> Callable[..., Any]:
    """The pool as lax.reduce_window (avg: a window sum over zero padding / the window size)."""

    def ref(x: Any, window: Shape, strides: Shape | None, padding: str, layout: str) -> Any:
        strides = strides or window
        dims = (1,) + window + (1,) if layout == "NHWC" else (1, 1) + window
        steps = (1,) + strides + (1,) if layout == "NHWC" else (1, 1) + strides
        if kind == "max":
            low = -np.inf if x.dtype.kind in "fc" else np.iinfo(x.dtype).min
            return lax.reduce_window(x, np.asarray(low, x.dtype), lax.max, dims, steps, padding)
        return lax.reduce_window(x, 0.0, lax.add, dims, steps, padding) / (window[0] * window[1])

    return ref


def reshape_args(dom: Dom = R) -> Draw:
    """A target shape of the same size, maybe with one -1."""

    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        shape = data.draw(one_shape())
        target = list(data.draw(st.permutations(shape))) + [1] * data.draw(st.integers(0, 1))
        free = [
            i
            for i in range(len(target))
            if np.prod([d for j, d in enumerate(target) if j != i]) != 0
        ]
        if free and data.draw(st.booleans()):
            target[data.draw(st.sampled_from(free))] = -1
        return {"shape": tuple(target)}, [values(data, shape, dts[0], dom)]

    return draw


def transpose_args(dom: Dom = R) -> Draw:
    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        shape = data.draw(one_shape())
        perm = data.draw(st.none() | st.permutations(range(len(shape))).map(tuple))
        return {"axes": perm}, [values(data, shape, dts[0], dom)]

    return draw


def broadcast_args(dom: Dom = R) -> Draw:
    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        target = data.draw(one_shape())
        shape = data.draw(
            hnp.broadcastable_shapes(target, min_side=0, max_side=SIDE).filter(
                lambda s: len(s) <= len(target) and np.broadcast_shapes(s, target) == target
            )
        )
        return {"shape": target}, [values(data, shape, dts[0], dom)]

    return draw


def expand_args(dom: Dom = R) -> Draw:
    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        shape = data.draw(one_shape())
        n = len(shape) + 1
        axis = data.draw(
            st.integers(-n, n - 1)
            | st.lists(st.integers(0, n), min_size=1, max_size=2, unique=True)
            .map(tuple)
            .filter(lambda ax: max(ax) < len(shape) + len(ax))
        )
        return {"axis": axis}, [values(data, shape, dts[0], dom)]

    return draw


def squeeze_args(dom: Dom = R) -> Draw:
    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=2))
        ones = [i for i, d in enumerate(shape) if d == 1]
        axis = data.draw(
            st.none() | st.lists(st.sampled_from(ones), unique=True).map(tuple)
            if ones
            else st.none()
        )
        return {"axis": axis}, [values(data, shape, dts[0], dom)]

    return draw


def join_args(stack: bool, dom: Dom = R) -> Draw:
    """1 to 3 arrays for concatenate (equal but the axis) or stack (equal shapes)."""

    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        shape = list(data.draw(one_shape(min_dims=0 if stack else 1)))
        n = len(shape) + stack
        axis = data.draw(st.integers(-n, n - 1))
        k = data.draw(st.integers(1, 3))
        shs = []
        for _ in range(k):
            if not stack:
                shape[axis] = data.draw(st.integers(0, SIDE))
            shs.append(tuple(shape))
        return {"axis": axis}, [values(data, s, dts[i % len(dts)], dom) for i, s in enumerate(shs)]

    return draw


def basic_index_args(dom: Dom = R) -> Draw:
    """NumPy basic indices: ints, slices (negative steps too), None and Ellipsis."""

    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        shape = data.draw(one_shape(max_dims=3))
        idx = data.draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=True))
        return {"index": idx}, [values(data, shape, dts[0], dom)]

    return draw


def fixed_slice_args(dom: Dom = R) -> Draw:
    """x[1:3, ::2] on arrays of rank >= 2."""

    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        shape = data.draw(hnp.array_shapes(min_dims=2, max_dims=3, min_side=0, max_side=4))
        return {"index": (slice(1, 3), slice(None, None, 2))}, [values(data, shape, dts[0], dom)]

    return draw


def getitem(x: Any, index: Any) -> Any:
    return x[index]


SCALAR_INDEXERS: dict[str, Callable[[Any, Any], Any]] = {
    "x[i]": lambda x, i: x[i],
    "x[:, i]": lambda x, i: x[:, i],
    "x[..., i]": lambda x, i: x[..., i],
    "x[None, ::-1, i]": lambda x, i: x[None, ::-1, i],
}
ARRAY_INDEXERS: dict[str, Callable[[Any, Any], Any]] = {
    "x[idx]": lambda x, i: x[i],
    "x[:, idx]": lambda x, i: x[:, i],
    "x[::-1, idx]": lambda x, i: x[::-1, i],
    "x[None, ..., idx]": lambda x, i: x[None, ..., i],
    "x[0, ..., idx]": lambda x, i: x[0, ..., i],
    "x[-1, None, idx]": lambda x, i: x[-1, None, i],
}
AXIS_OF = {
    "x[i]": 0,
    "x[:, i]": 1,
    "x[..., i]": -1,
    "x[None, ::-1, i]": 1,
    "x[idx]": 0,
    "x[:, idx]": 1,
    "x[::-1, idx]": 1,
    "x[None, ..., idx]": -1,
    "x[0, ..., idx]": -1,
    "x[-1, None, idx]": 1,
}


def traced_index_args(indexers: dict[str, Callable], array: bool, dom: Dom = R) -> Draw:
    """An indexer from the table and a traced integer index (a 0-d or N-d array, negative too)."""

    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        how = data.draw(st.sampled_from(sorted(indexers)))
        shape = data.draw(one_shape(min_dims=2, min_side=1))
        n = shape[AXIS_OF[how]]
        ishape = data.draw(one_shape(max_dims=2)) if array else ()
        idx = data.draw(hnp.arrays(dts[1], ishape, elements=st.integers(-n, n - 1)))
        return {"how": how}, [values(data, shape, dts[0], dom), np.asarray(idx)]

    return draw


def dynamic_slice_args(update: bool, dom: Dom = R) -> Draw:
    """Start indices (possibly out of range: XLA clamps them) and slice sizes within the shape."""

    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        shape = data.draw(one_shape())
        sizes = tuple(data.draw(st.integers(0, d)) for d in shape)
        starts = [np.asarray(data.draw(st.integers(-d - 1, d + 1)), dts[-1]) for d in shape]
        lead = data.draw(st.none() | st.integers(0, 2)) if shape else None
        if lead is not None:
            starts = starts[1:]
        x = values(data, shape, dts[0], dom)
        if update:
            return {"lead": lead}, [x, values(data, sizes, dts[0], dom)] + starts
        return {"sizes": sizes, "lead": lead}, [x] + starts

    return draw


def _starts(lead: int | None, starts: Sequence[Any], python: bool) -> tuple:
    """The start indices, the Python int `lead` first (as a like-typed array for lax)."""
    if lead is None:
        return tuple(starts)
    first = lead if python else jnp.asarray(lead, starts[0].dtype if starts else jnp.int32)
    return (first,) + tuple(starts)


def take_args(dom: Dom = R) -> Draw:
    """An embedding-style lookup: indices of any shape (0-d, size-0, negative) along an axis."""

    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        shape = data.draw(one_shape(min_dims=1, min_side=1))
        axis = data.draw(st.none() | st.integers(-len(shape), len(shape) - 1))
        n = int(np.prod(shape)) if axis is None else shape[axis]
        ishape = data.draw(one_shape(max_dims=2))
        idx = data.draw(hnp.arrays(dts[1], ishape, elements=st.integers(-n, n - 1)))
        return {"axis": axis}, [values(data, shape, dts[0], dom), np.asarray(idx)]

    return draw


def lax_slice_args(dom: Dom = R) -> Draw:
    """lax.slice: start <= limit within each axis, strides 1 to 3."""

    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        shape = data.draw(one_shape(min_dims=1))
        start = [data.draw(st.integers(0, d)) for d in shape]
        limit = [data.draw(st.integers(lo, d)) for lo, d in zip(start, shape)]
        strides = [data.draw(st.integers(1, 3)) for _ in shape]
        return (
            {"start": tuple(start), "limit": tuple(limit), "strides": tuple(strides)},
            [values(data, shape, dts[0], dom)],
        )

    return draw


def swapaxes_args(dom: Dom = R) -> Draw:
    """Two axes (negative too, possibly equal) of an array of rank >= 1."""

    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        shape = data.draw(one_shape(min_dims=1))
        a, b = (data.draw(st.integers(-len(shape), len(shape) - 1)) for _ in range(2))
        return {"axis1": a, "axis2": b}, [values(data, shape, dts[0], dom)]

    return draw


def rev_args(dom: Dom = R) -> Draw:
    """lax.rev over a set of distinct axes."""

    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        shape = data.draw(one_shape(min_dims=1))
        axes = data.draw(st.lists(st.integers(0, len(shape) - 1), unique=True, max_size=len(shape)))
        return {"axes": tuple(axes)}, [values(data, shape, dts[0], dom)]

    return draw


def lax_pad_args(dom: Dom = R) -> Draw:
    """lax.pad with zeros: (low, high, interior) per axis, each 0 to 2."""

    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        shape = data.draw(one_shape())
        config = tuple(
            (
                data.draw(st.integers(0, 2)),
                data.draw(st.integers(0, 2)),
                data.draw(st.integers(0, 2)),
            )
            for _ in shape
        )
        return {"config": config}, [values(data, shape, dts[0], dom)]

    return draw


def lax_pad(x: Any, config: Any) -> Any:
    return lax.pad(x, jnp.zeros((), x.dtype), config)


def dynamic_index_args(update: bool, dom: Dom = R) -> Draw:
    """An axis and a traced 0-d index in range (negative too); for an update, a value too."""

    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        shape = data.draw(one_shape(min_dims=1, min_side=1))
        axis = data.draw(st.integers(-len(shape), len(shape) - 1))
        n = shape[axis]
        i = np.asarray(data.draw(st.integers(-n, n - 1)), dts[1])
        x = values(data, shape, dts[0], dom)
        if update:
            rest = shape[: axis % len(shape)] + shape[axis % len(shape) + 1 :]
            return {"axis": axis}, [x, values(data, rest, dts[0], dom), i]
        return {"axis": axis}, [x, i]

    return draw


def scatter_add_args(dom: Dom = R) -> Draw:
    """x.at[..., idx, ...].add(u) along an axis, indices in range (negative and repeated too)."""

    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        shape = data.draw(one_shape(min_dims=1, min_side=1))
        axis = data.draw(st.integers(0, len(shape) - 1))
        n = shape[axis]
        ishape = data.draw(one_shape(max_dims=2))
        idx = np.asarray(data.draw(hnp.arrays(dts[1], ishape, elements=st.integers(-n, n - 1))))
        ushape = shape[:axis] + ishape + shape[axis + 1 :]
        return {"axis": axis}, [
            values(data, shape, dts[0], dom),
            idx,
            values(data, ushape, dts[0], dom),
        ]

    return draw


def scatter_add_ref(x: Any, idx: Any, u: Any, axis: int) -> Any:
    return x.at[(slice(None),) * axis + (idx,)].add(u, mode="drop")


def one_hot_args(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
    n = data.draw(st.integers(1, 4))
    shape = data.draw(one_shape(max_dims=2))
    x = data.draw(hnp.arrays(dts[0], shape, elements=st.integers(-1, n)))
    return {"num_classes": n, "dtype": data.draw(st.sampled_from([None, F32, I32, BOOL]))}, [x]


FILLS = st.one_of(
    st.integers(-3, 3),
    st.floats(-3, 3, width=32),
    st.booleans(),
    st.floats(-3, 3, width=32).map(np.float32),
    st.integers(-3, 3).map(np.array),
)
DTYPES_OR_NONE = st.sampled_from([None, F32, F64, I32, BOOL])


def creation_args(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
    params = {"shape": data.draw(one_shape()), "dtype": data.draw(DTYPES_OR_NONE)}
    return params, []


def full_args(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
    params, _ = creation_args(data, dts)
    return {**params, "fill": data.draw(FILLS)}, []


def like_args(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
    x = values(data, data.draw(one_shape()), dts[0])
    return {"fill": data.draw(FILLS), "dtype": data.draw(DTYPES_OR_NONE)}, [x]


def traced_fill_args(like: bool) -> Draw:
    """full(shape, v) / full_like(x, v) with a traced `v` that broadcasts to the shape."""

    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        params, (v,) = broadcast_args()(data, dts)
        if like:
            return {}, [values(data, params["shape"], dts[-1]), v]
        return {**params, "dtype": data.draw(st.sampled_from([None, F32, I32]))}, [v]

    return draw


def arange_args(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
    num = st.integers(-5, 5) | st.sampled_from([-2.5, 0.5, 1.25, 3.0])
    step = st.sampled_from([1, 2, -1, -3, 0.5, -0.75])
    bounds = data.draw(
        st.sampled_from([(num,), (num, num), (num, num, step)]).flatmap(lambda s: st.tuples(*s))
    )
    return {"bounds": bounds, "dtype": data.draw(st.sampled_from([None, F32, F64, I32]))}, []


# ---------------------------------------------------------------- Python operators

BINARY_OPERATORS = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "**": operator.pow,
    "%": operator.mod,
    "//": operator.floordiv,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}
CONSTANTS: dict[str, Callable[[float], Any]] = {
    "int": int,
    "float": float,
    "bool": lambda v: v > 0,
    "np.float32": np.float32,
    "np.float64": np.float64,
    "np.int32": lambda v: np.int32(v),
    "ndarray f64": lambda v: np.array([v, 1.5]),
    "ndarray f32": lambda v: np.array([v, 2], np.float32),
    "ndarray i32": lambda v: np.array([int(v), 1], np.int32),
}


def operator_args(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
    """x OP other and other OP x, for a traced `other` or a Python / NumPy constant."""
    op = data.draw(
        st.sampled_from(
            ["+", "*", "/", "**", "<", "==", "!=", ">="]
            if dts[0] == BOOL
            else sorted(BINARY_OPERATORS)
        )
    )
    kind = data.draw(st.sampled_from(["traced"] + sorted(CONSTANTS)))
    dom = Dom(0.5, 2.0) if op in ("/", "**", "%", "//") else GRID
    shape = (2,) if kind.startswith("ndarray") else data.draw(one_shape(max_dims=2))
    x = values(data, shape, dts[0], dom)
    params = {"op": op, "kind": kind, "left": data.draw(st.booleans())}
    if kind == "traced":
        other = data.draw(hnp.broadcastable_shapes(shape, min_side=0, max_side=SIDE))
        return params, [x, values(data, other, dts[-1], dom)]
    value = data.draw(
        st.sampled_from([1.0, 2.0] if op in ("/", "**", "%", "//") else [-1.0, 0.0, 1.5, 2.0])
    )
    return {**params, "const": CONSTANTS[kind](value)}, [x]


def apply_operator(x: Any, *other: Any, op: str, kind: str, left: bool, const: Any = None) -> Any:
    y = other[0] if other else const
    return BINARY_OPERATORS[op](y, x) if left else BINARY_OPERATORS[op](x, y)


def unary_operator_args(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
    return {"op": data.draw(st.sampled_from(sorted(UNARY_OPERATORS)))}, [
        values(data, data.draw(one_shape()), dts[0])
    ]


UNARY_OPERATORS: dict[str, Callable[[Any], Any]] = {
    "-x": operator.neg,
    "+x": operator.pos,
    "abs(x)": abs,
    "~(x > 0)": lambda x: ~(x > 0),
    "x.T": lambda x: x.T,
    "x.transpose(*axes)": lambda x: x.transpose(*range(x.ndim)[::-1]),
    "x.transpose(axes)": lambda x: x.transpose(tuple(range(x.ndim))[::-1]),
    "x.reshape(-1)": lambda x: x.reshape(-1),
    "x.sum()": lambda x: x.sum(),
    "x.astype(float32)": lambda x: x.astype(np.float32),
}


def attribute_args(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
    return {}, [values(data, data.draw(one_shape(min_dims=1)), dts[0])]


def attributes(full: Callable, zeros: Callable) -> Callable[[Any], Any]:
    """Static metadata of a traced value feeding ops: .shape, .ndim, .dtype."""

    def fn(x: Any) -> Any:
        return full(x.shape[::-1], x.ndim, x.dtype) + zeros(x.T.shape, x.dtype) + x.T * x.shape[0]

    return fn


# ---------------------------------------------------------------- fmax/fmin, nan_to_num, creation
# from traced values, average (more cases in test_elem_extra.py and test_indexing_adv.py)


def nan_pairs(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
    """fmax/fmin: two broadcasting arguments on a grid (ties), floats with some NaNs."""
    args = elementwise(GRID, GRID)(data, dts)[1]
    out = []
    for a in args:
        if a.dtype.kind == "f" and a.size:
            nans = data.draw(hnp.arrays(np.bool_, a.shape))
            a = np.where(nans, np.nan, a).astype(a.dtype)
        out.append(a)
    return {}, out


def nan_to_num_args(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
    params = {
        k: data.draw(st.sampled_from(v))
        for k, v in (("nan", [0.0, 1.5, -2]), ("posinf", [None, 7.0]), ("neginf", [None, -7]))
    }
    return params, with_specials(data, dts)[1]


ARRAY_FORMS = {  # sg.array / jnp.array over these nested sequences of the drawn arrays
    "[a, b]": lambda a, b: [a, b],
    "(a, b, a)": lambda a, b: (a, b, a),
    "[[a, b], [b, a]]": lambda a, b: [[a, b], [b, a]],
    "[a]": lambda a, b: [a],
}
SCALAR_FORMS = {  # the same with Python numbers mixed in (0-d arrays only)
    "[a, 2, b]": lambda a, b: [a, 2, b],
    "[[a, 1.5], (b, -1)]": lambda a, b: [[a, 1.5], (b, -1)],
    "[True, a]": lambda a, b: [True, a],
}


def array_args(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
    """Two arrays of one shape and a nesting form (Python numbers too, for 0-d arrays)."""
    shape = data.draw(one_shape(max_dims=2))
    forms = sorted(ARRAY_FORMS) + (sorted(SCALAR_FORMS) if shape == () else [])
    params = {
        "form": data.draw(st.sampled_from(forms)),
        "dtype": data.draw(st.sampled_from([None, None, F32, I32])),
    }
    return params, [values(data, shape, dts[i % len(dts)]) for i in range(2)]


def array_ours(a: Any, b: Any, form: str, dtype: Any) -> Any:
    return sg.array({**ARRAY_FORMS, **SCALAR_FORMS}[form](a, b), dtype=dtype)


def array_ref(a: Any, b: Any, form: str, dtype: Any) -> Any:
    return jnp.array({**ARRAY_FORMS, **SCALAR_FORMS}[form](a, b), dtype=dtype)


def eye_args(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
    n = data.draw(st.integers(0, 4))
    return {
        "N": n,
        "M": data.draw(st.none() | st.integers(0, 4)),
        "k": data.draw(st.integers(-3, 3)),
        "dtype": data.draw(DTYPES_OR_NONE),
    }, []


def tri_args(min_dims: int = 2, k: bool = True, dom: Dom = R) -> Draw:
    """tril/triu/diag/diagonal: an array of rank min_dims..3 and a diagonal offset."""

    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        shape = data.draw(one_shape(min_dims=min_dims, max_dims=3 if min_dims > 1 else 2))
        return {"k": data.draw(st.integers(-3, 3))}, [values(data, shape, dts[0], dom)]

    return draw


def diagonal_args(dom: Dom = R) -> Draw:
    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        shape = data.draw(one_shape(min_dims=2))
        a1, a2 = data.draw(
            st.lists(st.integers(-len(shape), len(shape) - 1), min_size=2, max_size=2).filter(
                lambda ax: ax[0] % len(shape) != ax[1] % len(shape)
            )
        )
        return (
            {"offset": data.draw(st.integers(-3, 3)), "axis1": a1, "axis2": a2},
            [values(data, shape, dts[0], dom)],
        )

    return draw


def linspace_args(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
    """Traced start and stop (broadcasting), num 0..5, endpoint, axis, retstep, dtype."""
    s1, s2 = data.draw(broadcast_shapes(2, 0, 2, 0, SIDE))
    nd = len(np.broadcast_shapes(s1, s2)) + 1
    retstep = data.draw(st.booleans())  # the step of fewer than two intervals is NaN
    params = {
        "num": data.draw(st.integers(2 if retstep else 0, 5)),
        "endpoint": data.draw(st.booleans()),
        "retstep": retstep,
        "axis": data.draw(st.integers(-nd, nd - 1)),
        "dtype": data.draw(st.sampled_from([None, None, F32, I32])),
    }
    return params, [values(data, s1, dts[0]), values(data, s2, dts[-1])]


def linspace_via(m: Any) -> Callable[..., Any]:
    """m.linspace, its (samples, step) pair joined into one flat array when retstep=True."""

    def fn(a: Any, b: Any, **kw: Any) -> Any:
        out = m.linspace(a, b, **kw)
        if not kw["retstep"]:
            return out
        return m.concatenate([m.reshape(out[0], (-1,)), m.reshape(out[1], (-1,))])

    return fn


CONCAT_FORMS = {  # sg.r_ / sg.c_ items: arrays, Python numbers and static slices
    "r_[a, b]": lambda m, a, b: m[a, b],
    "r_[a, 2, 0:3]": lambda m, a, b: m[a, 2, 0:3],
    "r_[1:4:2, b, -1.5]": lambda m, a, b: m[1:4:2, b, -1.5],
    "r_[0:1:4j, a]": lambda m, a, b: m[0:1:4j, a],
    "r_['0,2', a, b]": lambda m, a, b: m["0,2", a, b],
    "r_['c', a, b]": lambda m, a, b: m["c", a, b],
}
C_FORMS = {  # sg.c_: columns of equal length
    "c_[a, b]": lambda m, a, b: m[a, b],
    "c_[a, b, a]": lambda m, a, b: m[a, b, a],
    "c_[a, 0:len(a)]": lambda m, a, b: m[a, 0 : len(a)],
    "c_[0:1:len(a)*1j, b]": lambda m, a, b: m[0 : 1 : len(a) * 1j, b],
}


def concat_args(forms: dict[str, Callable]) -> Draw:
    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        n = data.draw(st.integers(1, SIDE))
        return (
            {"form": data.draw(st.sampled_from(sorted(forms)))},
            [values(data, (n,), dts[i % len(dts)]) for i in range(2)],
        )

    return draw


def average_args(dom: Dom = R) -> Draw:
    """An array, axis (None/int/tuple), keepdims, returned and weights: none, a's shape, or
    1-D along an int axis."""

    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        shape = data.draw(one_shape(min_dims=1, min_side=1))
        axis = data.draw(axes(len(shape)))
        params = {
            "axis": axis,
            "keepdims": data.draw(st.booleans()),
            "returned": data.draw(st.booleans()),
        }
        a = values(data, shape, dts[0], dom)
        kind = data.draw(
            st.sampled_from(["none", "full"] + (["axis"] if isinstance(axis, int) else []))
        )
        if kind == "none":
            return params, [a]
        wshape = shape if kind == "full" else (shape[axis],)
        return params, [a, values(data, wshape, dts[-1], Dom(0.5, 2.0))]

    return draw


def average_via(m: Any) -> Callable[..., Any]:
    """m.average, its (average, sum of weights) pair stacked when returned=True."""

    def fn(a: Any, *w: Any, **kw: Any) -> Any:
        out = m.average(a, weights=w[0] if w else None, **kw)
        return m.stack(out) if kw["returned"] else out

    return fn


# ---------------------------------------------------------------- sg.linalg


def _orthogonal(x: np.ndarray) -> np.ndarray:
    """An orthogonal matrix from a drawn square one (Q of a well-conditioned shift of it)."""
    n = x.shape[-1]
    return np.linalg.qr(x / (3 * n) + np.eye(n))[0]


def conditioned(kind: str, x: np.ndarray) -> np.ndarray:
    """A drawn batch of square matrices (entries in [-3, 3]) made well conditioned: `general`
    (diagonally dominant), `spd`, `spectrum` (symmetric, eigenvalues near 1..n) or `singular`
    (singular values near 1..k; x may be rectangular)."""
    m, n = x.shape[-2:]
    if kind == "general":
        return x / (3 * n) + 2 * np.eye(m, n)
    if kind == "spd":
        b = x / 3
        return b @ np.swapaxes(b, -1, -2) + np.eye(n)
    out = np.empty(x.shape)
    k = min(m, n)
    for idx in np.ndindex(*x.shape[:-2]):
        sq = np.resize(x[idx], (max(m, n),) * 2)
        q = _orthogonal(sq)
        d = np.arange(1.0, k + 1) + 0.25 * np.tanh(x[idx].ravel()[:k].sum())
        if kind == "spectrum":
            out[idx] = q @ np.diag(d) @ q.T
        else:
            out[idx] = q[:m, :k] @ np.diag(d) @ _orthogonal(sq.T)[:n, :k].T
    return out


def matrix_args(kind: str, rhs: bool = False, rect: bool = False, **choices: Any) -> Draw:
    """A batch (0 or 1 axes) of conditioned matrices, a right-hand side if `rhs` ((n,) or
    (..., n, k)), and static parameters drawn from `choices`."""

    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        m = data.draw(st.integers(1, SIDE))
        n = data.draw(st.integers(1, SIDE)) if rect else m
        batch = data.draw(one_shape(max_dims=1, min_side=1))
        a = conditioned(kind, values(data, batch + (m, n), F64)).astype(dts[0])
        params = {k: data.draw(st.sampled_from(v)) for k, v in choices.items()}
        if not rhs:
            return params, [a]
        b = (n,) if data.draw(st.booleans()) else batch + (n, data.draw(st.integers(1, SIDE)))
        return params, [a, values(data, b, dts[-1])]

    return draw


def flat(*outs: Any) -> Any:
    """Several outputs as one vector (for the table's one-output comparison)."""
    cat = (
        sg.concatenate
        if any(isinstance(o, (sg.Variable, sg.Tensor)) for o in outs)
        else jnp.concatenate
    )
    return cat([o.reshape(-1) for o in outs])


NORMS = {
    "vector": [None, 2, 1, np.inf, -np.inf, 0, 3, 0.5],
    "matrix": [None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf],
}


def norm_args(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
    """jnp.linalg.norm's cases: flattened, one axis (vector norms) or two (matrix norms)."""
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=SIDE))
    x = (
        conditioned("singular", values(data, shape, F64))
        if len(shape) >= 2
        else values(data, shape, F64)
    )
    kind = data.draw(st.sampled_from(["flat", "vector"] + (["matrix"] if len(shape) > 1 else [])))
    if kind == "flat":
        ords = [None] + NORMS["vector" if len(shape) == 1 else "matrix"] * (len(shape) <= 2)
        axis = None
    elif kind == "vector":
        axis = data.draw(st.integers(-len(shape), len(shape) - 1))
        ords = NORMS["vector"]
    else:
        axis = tuple(data.draw(st.permutations(range(len(shape))))[:2])
        ords = NORMS["matrix"]
    return {
        "ord": data.draw(st.sampled_from(ords)),
        "axis": axis,
        "keepdims": data.draw(st.booleans()),
    }, [x.astype(dts[0])]


def trace_args(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
    shape = data.draw(one_shape(min_dims=2))
    a1, a2 = data.draw(st.permutations(range(len(shape))))[:2]
    return {
        "offset": data.draw(st.integers(-2, 2)),
        "axis1": a1 - len(shape) * data.draw(st.booleans()),
        "axis2": a2,
    }, [values(data, shape, dts[0])]


def eigh_flat(eigh: Callable) -> Callable:
    def fn(a: Any, UPLO: Any) -> Any:
        w, v = eigh(a, UPLO)
        return flat(w, v)

    return fn


def svd_flat(svd: Callable) -> Callable:
    def fn(a: Any, full_matrices: bool) -> Any:
        return flat(*svd(a, full_matrices=full_matrices))

    return fn


def lu_ref(a: Any) -> Any:
    return flat(*(jax.vmap(jax.scipy.linalg.lu) if a.ndim > 2 else jax.scipy.linalg.lu)(a))


def slogdet_flat(slogdet: Callable) -> Callable:
    return lambda a: flat(*slogdet(a))


SOLVE_TRIANGULAR = {
    "trans": [0, 1, "T", "N"],
    "lower": [False, True],
    "unit_diagonal": [False, True],
}


def solve_triangular_ref(a: Any, b: Any, trans: Any, lower: bool, unit_diagonal: bool) -> Any:
    return jax.scipy.linalg.solve_triangular(a, b, trans, lower, unit_diagonal)


def matrix_power_ours(a: Any, n: int) -> Any:
    return sg.linalg.matrix_power(a, n)


def matrix_power_ref(a: Any, n: int) -> Any:
    return jnp.linalg.matrix_power(a, n)


def linalg_cases(case: Callable[..., Any], gauge_free: bool) -> list:
    """The sg.linalg rows of the forward (`gauge_free` False) or gradient table, with `case`
    making a row from (name, ours, ref, draw)."""
    eigh = (
        (
            lambda eigh: (
                lambda a, UPLO: (lambda w, v: flat(w, v * v * w[..., None, :]))(*eigh(a, UPLO))
            )
        )
        if gauge_free
        else eigh_flat
    )
    svd = (
        (
            lambda svd: (
                lambda a, full_matrices: (
                    lambda u, s, vh: flat(
                        s,
                        u[..., :, : s.shape[-1]] ** 2 * s[..., None, :],
                        vh[..., : s.shape[-1], :] ** 2,
                    )
                )(*svd(a, full_matrices=full_matrices))
            )
        )
        if gauge_free
        else svd_flat
    )
    full = [False] if gauge_free else [False, True]
    la, jla = sg.linalg, jnp.linalg
    return [
        case(
            "linalg.cholesky",
            lambda a, upper: la.cholesky(a, upper=upper),
            lambda a, upper: jla.cholesky(a, upper=upper),
            matrix_args("spd", upper=[False, True]),
        ),
        case(
            "linalg.solve_triangular",
            la.solve_triangular,
            solve_triangular_ref,
            matrix_args("general", True, **SOLVE_TRIANGULAR),
        ),
        case("linalg.solve", la.solve, jla.solve, matrix_args("general", True)),
        case("linalg.inv", la.inv, jla.inv, matrix_args("general")),
        case("linalg.det", la.det, jla.det, matrix_args("general")),
        case(
            "linalg.slogdet",
            slogdet_flat(la.slogdet),
            slogdet_flat(jla.slogdet),
            matrix_args("general"),
        ),
        case(
            "linalg.eigh", eigh(la.eigh), eigh(jla.eigh), matrix_args("spectrum", UPLO=[None, "U"])
        ),
        case(
            "linalg.svd",
            svd(la.svd),
            svd(jla.svd),
            matrix_args("singular", rect=True, full_matrices=full),
        ),
        case(
            "linalg.svd compute_uv=False",
            lambda a: la.svd(a, compute_uv=False),
            lambda a: jla.svd(a, compute_uv=False),
            matrix_args("singular", rect=True),
        ),
        case(
            "linalg.qr",
            lambda a: flat(*la.qr(a)),
            lambda a: flat(*jla.qr(a)),
            matrix_args("general", rect=True),
        ),
        case("linalg.lu", lambda a: flat(*la.lu(a)), lu_ref, matrix_args("general", rect=True)),
        case("linalg.pinv", la.pinv, jla.pinv, matrix_args("singular", rect=True)),
        case(
            "linalg.matrix_power",
            matrix_power_ours,
            matrix_power_ref,
            matrix_args("general", n=[0, 1, 2, 3, 6, -1, -2]),
        ),
        case("linalg.norm", la.norm, jla.norm, norm_args),
        case("linalg.trace", la.trace, jnp.trace, trace_args),
    ]


# ---------------------------------------------------------------- the table


@dataclass(frozen=True, eq=False)
class Case:
    """One op: srcgrad's function, jax.numpy's equivalent, a draw and the dtype variants."""

    name: str
    ours: Callable[..., Any]
    ref: Callable[..., Any]
    draw: Draw
    variants: tuple[tuple[np.dtype, ...], ...] = FLOATS

    def __str__(self) -> str:
        return self.name


def unary(name: str, ref: Callable, dom: Dom = R, variants: tuple = FLOATS) -> Case:
    return Case(name, getattr(sg, name), ref, elementwise(dom), variants)


def binary(
    name: str, dom_x: Dom = R, dom_y: Dom = R, variants: tuple = NUMS, label: str | None = None
) -> Case:
    return Case(
        label or name, getattr(sg, name), getattr(jnp, name), elementwise(dom_x, dom_y), variants
    )


def reducer(
    name: str,
    ours: Callable,
    ref: Callable,
    dom: Dom = R,
    min_side: int = 0,
    tuples: bool = True,
    variants: tuple = NUMS,
) -> Case:
    return Case(
        name,
        lambda x, axis, keepdims: ours(x, axis, keepdims=keepdims),
        lambda x, axis, keepdims: ref(x, axis=axis, keepdims=keepdims),
        reduction(dom, min_side, tuples),
        variants,
    )


def dynamic_slice_ours(x: Any, *starts: Any, sizes: Shape, lead: int | None) -> Any:
    return sg.dynamic_slice(x, _starts(lead, starts, True), sizes)


def dynamic_slice_ref(x: Any, *starts: Any, sizes: Shape, lead: int | None) -> Any:
    return lax.dynamic_slice(x, _starts(lead, starts, False), sizes)


def dus_ours(x: Any, u: Any, *starts: Any, lead: int | None) -> Any:
    return sg.dynamic_update_slice(x, u, _starts(lead, starts, True))


def dus_ref(x: Any, u: Any, *starts: Any, lead: int | None) -> Any:
    return lax.dynamic_update_slice(x, u, _starts(lead, starts, False))


COMPARISONS = ["less", "less_equal", "greater", "greater_equal", "equal", "not_equal"]

CASES: list[Case] = [
    unary("negative", jnp.negative, variants=NUMS),
    unary("exp", jnp.exp, variants=NUMS),
    unary("log", jnp.log, POS),
    unary("log1p", jnp.log1p, Dom(-0.875, 3.0)),
    unary("expm1", jnp.expm1),
    unary("sqrt", jnp.sqrt, Dom(0.0, 3.0)),
    unary("rsqrt", lax.rsqrt, POS, FLOATS),
    unary("tanh", jnp.tanh),
    unary("sin", jnp.sin),
    unary("cos", jnp.cos),
    unary("abs", jnp.abs, variants=NUMS),
    unary("sign", jnp.sign, variants=NUMS),
    unary("floor", jnp.floor, variants=FLOATS),
    unary("ceil", jnp.ceil, variants=FLOATS),
    unary("round", jnp.round, variants=FLOATS),
    unary("square", jnp.square, variants=NUMS),
    unary("reciprocal", jnp.reciprocal, NONZERO, NUMS),
    unary("sigmoid", jax.nn.sigmoid, variants=FLOATS),
    unary("tan", jnp.tan, Dom(-1.25, 1.25), NUMS),
    unary("sinh", jnp.sinh, variants=NUMS),
    unary("cosh", jnp.cosh),
    unary("arcsin", jnp.arcsin, Dom(-1.0, 1.0)),
    unary("arccos", jnp.arccos, Dom(-1.0, 1.0)),
    unary("arctan", jnp.arctan, variants=NUMS),
    unary("arcsinh", jnp.arcsinh),
    unary("arccosh", jnp.arccosh, Dom(1.0, 3.0)),
    unary("arctanh", jnp.arctanh, Dom(-0.875, 0.875)),
    unary("log2", jnp.log2, POS, NUMS),
    unary("log10", jnp.log10, POS),
    unary("exp2", jnp.exp2, variants=NUMS),
    unary("cbrt", jnp.cbrt, variants=NUMS),
    unary("deg2rad", jnp.deg2rad, variants=NUMS),
    unary("radians", jnp.radians),
    unary("rad2deg", jnp.rad2deg, variants=NUMS),
    unary("degrees", jnp.degrees),
    unary("absolute", jnp.absolute, variants=NUMS),
    unary("fabs", jnp.fabs, variants=NUMS),
    unary("real", jnp.real, variants=NUMS),
    unary("imag", jnp.imag, variants=NUMS),
    unary("conj", jnp.conj, variants=NUMS),
    *[
        Case(name, getattr(sg, name), getattr(jnp, name), with_specials, NUMS)
        for name in ("isnan", "isinf", "isfinite")
    ],
    Case("clip", sg.clip, jnp.clip, clip_args, NUMS),
    Case(
        "methods .sum() .var() .std() .flatten() .clip() ...",
        lambda x, method: METHODS[method](x),
        lambda x, method: METHODS[method](x),
        method_args,
        FLOATS,
    ),
    unary("relu", jax.nn.relu, variants=NUMS),
    unary("softplus", jax.nn.softplus),
    unary("erf", jax.scipy.special.erf, variants=NUMS),
    binary("add", variants=NUMS + ((F32, F64), (I32, F32), (BOOL, I32))),
    binary("subtract"),
    binary("multiply", variants=NUMS + ((I32, F64),)),
    binary("divide", dom_y=NONZERO, variants=NUMS + ((F32, F64), (I32, F32))),
    binary("power", POS, Dom(-2.0, 2.0), FLOATS),
    binary("power", Dom(0.0, 3.0), Dom(0.0, 3.0), ((I32,),), label="power int"),
    binary("remainder", Dom(-3.0, 3.0), Dom(0.5, 2.0), NUMS + ((F32, F64),)),
    binary("mod", Dom(-3.0, 3.0), Dom(0.5, 2.0), NUMS),
    binary("true_divide", dom_y=NONZERO, variants=NUMS + ((I32, F32),)),
    binary("arctan2", variants=NUMS + ((F32, F64),)),
    binary("hypot", variants=NUMS),
    binary("logaddexp", variants=NUMS + ((F32, F64),)),
    binary("logaddexp2", variants=NUMS),
    binary("heaviside", GRID, GRID, NUMS),
    binary("floor_divide", GRID, Dom(0.5, 2.0), NUMS),
    binary("maximum", GRID, GRID),
    binary("minimum", GRID, GRID, FLOATS + ((F32, F64),)),
    *[
        binary(name, GRID, GRID, (variant,))
        for name, variant in zip(
            COMPARISONS, [(F32,), (F64,), (I32,), (F32, F64), (I32, F32), (F64, I32)]
        )
    ],
    binary("logical_and", variants=((BOOL,),)),
    binary("logical_or", variants=((BOOL,),)),
    unary("logical_not", jnp.logical_not, variants=((BOOL,),)),
    Case("where", sg.where, jnp.where, where_args(), NUMS + ((I32, F32),)),
    Case(
        "astype",
        lambda x, dtype: sg.astype(x, dtype),
        lambda x, dtype: x.astype(dtype),
        cast_args,
        NUMS + ((BOOL,),),
    ),
    reducer("sum", sg.sum, jnp.sum, variants=NUMS + ((BOOL,),)),
    reducer("mean", sg.mean, jnp.mean, variants=((F32,), (I32,))),
    reducer("max", sg.max, jnp.max, GRID, min_side=1),
    reducer("min", sg.min, jnp.min, GRID, min_side=1, variants=((F64,),)),
    reducer("prod", sg.prod, jnp.prod, Dom(-2.0, 2.0)),
    reducer("logsumexp", sg.logsumexp, jax.nn.logsumexp, variants=FLOATS),
    *[
        Case(name, getattr(sg, name), getattr(jnp, name), stat_args(), NUMS)
        for name in ("var", "std")
    ],
    reducer("argmax", sg.argmax, jnp.argmax, GRID, min_side=1, tuples=False),
    reducer("argmin", sg.argmin, jnp.argmin, GRID, min_side=1, tuples=False, variants=((F32,),)),
    Case("matmul", sg.matmul, jnp.matmul, matmul_args(), NUMS + ((F32, F64),)),
    Case("dot", sg.dot, jnp.dot, dot_args(), ((F32,), (I32, F64))),
    Case(
        "einsum",
        lambda *xs, spec: sg.einsum(spec, *xs),
        lambda *xs, spec: jnp.einsum(spec, *xs),
        einsum_args(),
        NUMS,
    ),
    Case("conv", conv_ours, conv_ref, conv_args()),
    Case("max_pool", sg.max_pool, pool_ref("max"), pool_args(), NUMS),
    Case("avg_pool", sg.avg_pool, pool_ref("avg"), pool_args()),
    Case("reshape", sg.reshape, jnp.reshape, reshape_args(), ((F32,), (I32,))),
    Case("transpose", sg.transpose, jnp.transpose, transpose_args(), ((F64,), (BOOL,))),
    Case("broadcast_to", sg.broadcast_to, jnp.broadcast_to, broadcast_args(), ((F32,), (I32,))),
    Case("swapaxes", sg.swapaxes, jnp.swapaxes, swapaxes_args(), ((F32,), (I32,))),
    Case("expand_dims", sg.expand_dims, jnp.expand_dims, expand_args(), ((F64,),)),
    Case("squeeze", sg.squeeze, jnp.squeeze, squeeze_args(), ((F32,),)),
    Case(
        "concatenate",
        lambda *xs, axis: sg.concatenate(xs, axis),
        lambda *xs, axis: jnp.concatenate(xs, axis),
        join_args(False),
        ((F32,), (I32,), (F32, F64), (I32, F32)),
    ),
    Case(
        "stack",
        lambda *xs, axis: sg.stack(xs, axis),
        lambda *xs, axis: jnp.stack(xs, axis),
        join_args(True),
        ((F64,), (F32, I32)),
    ),
    Case("getitem basic", getitem, getitem, basic_index_args(), ((F32,), (I32,))),
    Case("getitem x[1:3, ::2]", getitem, getitem, fixed_slice_args(), ((F64,),)),
    Case(
        "getitem traced scalar",
        lambda x, i, how: SCALAR_INDEXERS[how](x, i),
        lambda x, i, how: SCALAR_INDEXERS[how](x, i),
        traced_index_args(SCALAR_INDEXERS, False),
        ((F32, I32), (I32, I64)),
    ),
    Case(
        "getitem integer array",
        lambda x, i, how: ARRAY_INDEXERS[how](x, i),
        lambda x, i, how: ARRAY_INDEXERS[how](x, i),
        traced_index_args(ARRAY_INDEXERS, True),
        ((F64, I32), (I32, I64)),
    ),
    Case(
        "dynamic_slice",
        dynamic_slice_ours,
        dynamic_slice_ref,
        dynamic_slice_args(False),
        ((F32, I32), (I32, I64)),
    ),
    Case(
        "dynamic_update_slice",
        dus_ours,
        dus_ref,
        dynamic_slice_args(True),
        ((F64, I32), (I32, I64)),
    ),
    Case("take", sg.take, jnp.take, take_args(), ((F32, I32), (I32, I64))),
    Case(
        "slice",
        lambda x, start, limit, strides: sg.slice(x, start, limit, strides),
        lambda x, start, limit, strides: lax.slice(x, start, limit, strides),
        lax_slice_args(),
        ((F32,), (I32,)),
    ),
    Case(
        "rev",
        lambda x, axes: sg.rev(x, axes),
        lambda x, axes: lax.rev(x, axes),
        rev_args(),
        ((F64,), (BOOL,)),
    ),
    Case(
        "pad lax config (the internal lax_pad)",
        shape_ops.lax_pad,
        lax_pad,
        lax_pad_args(),
        ((F32,), (I32,)),
    ),
    Case(
        "dynamic_index",
        sg.dynamic_index,
        lambda x, i, axis: lax.dynamic_index_in_dim(x, i, axis, keepdims=False),
        dynamic_index_args(False),
        ((F32, I32), (I32, I64)),
    ),
    Case(
        "dynamic_update_index",
        sg.dynamic_update_index,
        lax.dynamic_update_index_in_dim,
        dynamic_index_args(True),
        ((F64, I32), (I32, I64)),
    ),
    Case(
        "scatter_add", sg.scatter_add, scatter_add_ref, scatter_add_args(), ((F32, I32), (I32, I64))
    ),
    Case(
        "one_hot",
        sg.one_hot,
        lambda x, num_classes, dtype: jax.nn.one_hot(x, num_classes, dtype=dtype or jnp.float64),
        one_hot_args,
        ((I32,), (I64,)),
    ),
    Case("softmax", sg.softmax, jax.nn.softmax, along_axis()),
    *[
        unary(name, getattr(jax.nn, name))
        for name in ("silu", "log_sigmoid", "relu6", "leaky_relu", "elu", "gelu")
    ],
    Case(
        "gelu exact",
        lambda x: sg.gelu(x, approximate=False),
        lambda x: jax.nn.gelu(x, approximate=False),
        elementwise(R),
    ),
    Case("log_softmax", sg.log_softmax, jax.nn.log_softmax, along_axis()),
    Case("zeros", sg.zeros, jnp.zeros, creation_args, ((),)),
    Case("ones", sg.ones, jnp.ones, creation_args, ((),)),
    Case(
        "full",
        lambda shape, dtype, fill: sg.full(shape, fill, dtype),
        lambda shape, dtype, fill: jnp.full(shape, fill, dtype),
        full_args,
        ((),),
    ),
    Case(
        "full traced fill",
        lambda v, shape, dtype: sg.full(shape, v, dtype),
        lambda v, shape, dtype: jnp.full(shape, v, dtype),
        traced_fill_args(False),
        ((F32,), (I32,)),
    ),
    Case(
        "full_like traced fill",
        sg.full_like,
        jnp.full_like,
        traced_fill_args(True),
        ((F32, F64), (I32, F32)),
    ),
    Case(
        "full_like",
        lambda x, fill, dtype: sg.full_like(x, fill, dtype),
        lambda x, fill, dtype: jnp.full_like(x, fill, dtype),
        like_args,
        ((F32,), (I32,)),
    ),
    Case(
        "zeros_like",
        lambda x, fill, dtype: sg.zeros_like(x, dtype),
        lambda x, fill, dtype: jnp.zeros_like(x, dtype),
        like_args,
        ((F64,),),
    ),
    Case(
        "ones_like",
        lambda x, fill, dtype: sg.ones_like(x, dtype),
        lambda x, fill, dtype: jnp.ones_like(x, dtype),
        like_args,
        ((BOOL,),),
    ),
    Case(
        "arange",
        lambda bounds, dtype: sg.arange(*bounds, dtype=dtype),
        lambda bounds, dtype: jnp.arange(*bounds, dtype=dtype),
        arange_args,
        ((),),
    ),
    Case("stop_gradient", sg.stop_gradient, lax.stop_gradient, elementwise(R), ((F32,),)),
    Case(
        "operators binary",
        apply_operator,
        apply_operator,
        operator_args,
        NUMS + ((BOOL,), (F32, F64), (I32, F32)),
    ),
    Case(
        "operators unary",
        lambda x, op: UNARY_OPERATORS[op](x),
        lambda x, op: UNARY_OPERATORS[op](x),
        unary_operator_args,
        ((F32,), (I32,)),
    ),
    Case("operator @", operator.matmul, operator.matmul, matmul_args(), ((F32, F64),)),
    Case(
        "attributes .shape .ndim .dtype .T",
        attributes(sg.full, sg.zeros),
        attributes(jnp.full, jnp.zeros),
        attribute_args,
        ((F32,), (I32,)),
    ),
    binary("fmod", Dom(-3.0, 3.0), Dom(0.5, 2.0), NUMS + ((F32, F64),)),
    unary("sinc", jnp.sinc, GRID, NUMS),
    Case("fmax", sg.fmax, jnp.fmax, nan_pairs, NUMS + ((F32, F64),)),
    Case("fmin", sg.fmin, jnp.fmin, nan_pairs, NUMS),
    Case("nan_to_num", sg.nan_to_num, jnp.nan_to_num, nan_to_num_args, NUMS),
    Case("array", array_ours, array_ref, array_args, NUMS + ((F32, F64), (I32, F32), (BOOL,))),
    Case(
        "asarray",
        lambda a, b, form, dtype: sg.asarray(
            ARRAY_FORMS[form](a, b) if form in ARRAY_FORMS else a, dtype
        ),
        lambda a, b, form, dtype: jnp.asarray(
            ARRAY_FORMS[form](a, b) if form in ARRAY_FORMS else a, dtype
        ),
        array_args,
        ((F32,), (I32, F64)),
    ),
    Case("eye", sg.eye, jnp.eye, eye_args, ((),)),
    Case(
        "identity",
        lambda N, M, k, dtype: sg.identity(N, dtype),
        lambda N, M, k, dtype: jnp.identity(N, dtype),
        eye_args,
        ((),),
    ),
    Case("tri", sg.tri, jnp.tri, eye_args, ((),)),
    Case("tril", sg.tril, jnp.tril, tri_args(), ((F32,), (I32,), (BOOL,))),
    Case("triu", sg.triu, jnp.triu, tri_args(), ((F64,), (I32,))),
    Case("diag", sg.diag, jnp.diag, tri_args(1), ((F32,), (I32,))),
    Case("diagonal", sg.diagonal, jnp.diagonal, diagonal_args(), ((F64,), (BOOL,))),
    Case(
        "linspace",
        linspace_via(sg),
        linspace_via(jnp),
        linspace_args,
        ((F32,), (F64,), (I32,), (F32, F64)),
    ),
    Case(
        "r_",
        lambda a, b, form: CONCAT_FORMS[form](sg.r_, a, b),
        lambda a, b, form: CONCAT_FORMS[form](jnp.r_, a, b),
        concat_args(CONCAT_FORMS),
        ((F32,), (I32, F64)),
    ),
    Case(
        "c_",
        lambda a, b, form: C_FORMS[form](sg.c_, a, b),
        lambda a, b, form: C_FORMS[form](jnp.c_, a, b),
        concat_args(C_FORMS),
        ((F64,), (I32,)),
    ),
    Case("average", average_via(sg), average_via(jnp), average_args(), NUMS + ((F32, F64),)),
    Case(
        "methods .trace()",
        lambda x, **kw: x.trace(**kw),
        lambda x, **kw: x.trace(**kw),
        trace_args,
        NUMS,
    ),
    *linalg_cases(lambda name, ours, ref, draw: Case(name, ours, ref, draw), False),
]


# ---------------------------------------------------------------- running a case

_JITTED: dict[tuple[str, str], sg.Transformed] = {}


def key(case: Case, params: dict[str, Any]) -> tuple[str, str]:
    """A cache key for a case with these static parameters (repr: slices are unhashable)."""
    return case.name, repr(sorted(params.items()))


def jitted(case: Case, params: dict[str, Any]) -> sg.Transformed:
    """`sg.jit` of the case's op with these parameters, shared across examples."""
    k = key(case, params)
    if k not in _JITTED:
        _JITTED[k] = sg.jit(lambda *xs: case.ours(*xs, **params))
    return _JITTED[k]


def assert_same(ours: Any, theirs: Any, what: str) -> None:
    """Same dtype and shape; equal values (exactly for integers and bools)."""
    a, b = np.asarray(ours), np.asarray(theirs)
    assert (a.dtype, a.shape) == (b.dtype, b.shape), (
        f"{what}: srcgrad gives {a.dtype}{list(a.shape)}, jax.numpy {b.dtype}{list(b.shape)}"
    )
    if a.dtype.kind in "biu":
        np.testing.assert_array_equal(a, b, err_msg=what)
    else:
        tol = 2e-6 if a.dtype == F32 else 1e-12
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol, err_msg=what)


@pytest.mark.parametrize("case", sliced(CASES, 2), ids=str)
@examples(7)
@given(data=st.data())
def test_op_matches_jax_numpy(case: Case, data: st.DataObject) -> None:
    """sg.jit(op) equals the jax.numpy equivalent for every dtype variant of the case."""
    check_case(case, data, assert_same)


def check_case(case: Case, data: st.DataObject, same: Callable[[Any, Any, str], None]) -> None:
    """Draw each dtype variant of `case` and compare sg.jit(op) with its reference by `same`."""
    for dts in case.variants:
        params, args = case.draw(data, dts)
        ours = jitted(case, params)(*args)
        theirs = case.ref(*[jax.device_put(a) for a in args], **params)
        same(ours, theirs, f"{case.name} {params} on {[a.dtype.name for a in args]}")


@pytest.mark.parametrize("dtype", [BOOL, I32, I64, F32, F64], ids=str)
def test_operator_dtype_promotion(dtype: np.dtype) -> None:
    """x OP other and other OP x have jnp's result dtype for every operator and every constant
    kind or traced dtype of `other` (weak Python scalars, strong NumPy scalars and arrays)."""
    x = np.ones((2,), dtype)
    wrong = []
    others = [(kind, CONSTANTS[kind](2.0)) for kind in CONSTANTS] + [
        ("traced", np.ones((2,), d)) for d in (BOOL, I32, I64, F32, F64)
    ]
    for op, (kind, other), left in itertools.product(BINARY_OPERATORS, others, (False, True)):
        traced = kind == "traced"
        fn = partial(apply_operator, op=op, kind=kind, left=left, const=None if traced else other)
        args = (x, other) if traced else (x,)
        try:
            want = jax.eval_shape(fn, *[jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args]).dtype
        except TypeError:
            continue  # jax.numpy rejects the combination (e.g. bool - bool)
        got = sg.jit(fn).trace(*args)[2][0].dtype
        if got != want:
            name = f"{kind} {other.dtype}" if traced else f"{kind} {other!r}"
            wrong.append(
                f"{'other ' + op + ' x' if left else 'x ' + op + ' other'} with "
                f"{name}: srcgrad {got}, jnp {want}"
            )
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("index", [-4, -1, 0, 2, 3, 7])
@pytest.mark.parametrize("allow_negative", [True, False])
def test_dynamic_index_and_update_match_lax(index: int, allow_negative: bool) -> None:
    """dynamic_index / dynamic_update_index follow lax, negative and out-of-range indices
    included; `allow_negative_indices=False` is lax's promise that the index is >= 0."""
    x = np.arange(12.0).reshape(4, 3)
    v = -np.ones(4)
    kw = {"allow_negative_indices": allow_negative}
    if allow_negative or index >= 0:
        ours = sg.jit(lambda a, i: sg.dynamic_index(a, i, 1, **kw))(x, np.int32(index))
        theirs = lax.dynamic_index_in_dim(x, index, 1, keepdims=False, **kw)
        np.testing.assert_array_equal(ours, theirs)
        ours = sg.jit(lambda a, b, i: sg.dynamic_update_index(a, b, i, 1, **kw))(
            x, v, np.int32(index)
        )
        np.testing.assert_array_equal(ours, lax.dynamic_update_index_in_dim(x, v, index, 1, **kw))
    check_grads(
        lambda a, b: sg.sum(
            sg.dynamic_index(
                sg.dynamic_update_index(a, b * 2.0, abs(index) % 3, 1, **kw), 1, 1, **kw
            )
            ** 2
        ),
        (x, v),
    )


@pytest.mark.parametrize("i", [-7, -5, -4, -1, 0, 3, 4, 9])
def test_traced_integer_index_matches_jax_numpy_out_of_range(i: int) -> None:
    """x[i] with a traced i: negative indices count from the end and what is still out of
    range clamps, as in jax.numpy under jit."""
    x = np.arange(8.0).reshape(4, 2)
    ours = sg.jit(lambda a, k: a[k])(x, np.int32(i))
    np.testing.assert_array_equal(ours, jax.jit(lambda a, k: a[k])(x, np.int32(i)))


@pytest.mark.parametrize(
    "name,dtype",
    [
        *[
            (n, d)
            for n in ("sum", "prod")
            for d in (np.int8, np.int32, np.uint8, np.int64, np.float16, np.float32, bool)
        ],
        ("mean", np.float16),
        ("mean", np.float32),
    ],
)
def test_reduction_dtype_argument(name: str, dtype: Any) -> None:
    """`dtype=` gives jax.numpy's result dtype and values, a narrow integer's wrapped sum
    and product included (int8 and int32 under x64 are not widened)."""
    x = np.arange(-6, 6).reshape(3, 4) * (23.0 if np.dtype(dtype).kind in "biu" else 0.3)
    ours, theirs = getattr(sg, name), getattr(jnp, name)
    for axis in (None, 1):
        want = theirs(jnp.asarray(x), axis=axis, dtype=dtype)
        for got in (
            sg.jit(lambda v: ours(v, axis=axis, dtype=dtype))(x),
            ours(x, axis=axis, dtype=dtype),
        ):
            if dtype is np.float16:  # jnp rounds where it casts: within an ulp
                assert got.dtype == want.dtype and got.shape == want.shape
                np.testing.assert_allclose(got, want, rtol=2e-3)
            else:
                assert_same(got, want, name)
