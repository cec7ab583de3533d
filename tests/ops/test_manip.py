"""Array manipulation (srcgrad/ops/manip.py, sort_scan.py, products.py): forward against
jax.numpy, gradients against jax.grad and float64 finite differences (first and second
order), eager calls.

The tables follow test_ops.py / test_op_grads.py (same Case and GradCase, same draws);
test_op_coverage.py and test_api_docs.py read CASES and GRAD_CASES from here too.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from jax import lax

import srcgrad as sg
from srcgrad.base.errors import ShapeError
from srcgrad.ops.cumulative import lax_cumprod
from support.util import sliced
from test_op_grads import MIXED, GradCase, check, check_against_jax
from test_ops import (
    BOOL,
    F32,
    F64,
    GRID,
    I32,
    NUMS,
    SIDE,
    Case,
    Dom,
    Draw,
    R,
    assert_same,
    check_case,
    examples,
    one_shape,
    values,
)

DISTINCT = Dom(distinct=True)
ALL = NUMS + ((BOOL,),)


# ---------------------------------------------------------------- draws


def _axis(data: st.DataObject, ndim: int) -> int:
    return data.draw(st.integers(-ndim, ndim - 1))


def split_args(name: str, dom: Dom = R) -> Draw:
    """Equal sections (split: a divisor of the axis) or sorted split points (jnp rejects
    others; srcgrad slices as NumPy does)."""
    min_dims = {"vsplit": 2, "dsplit": 3}.get(name, 1)
    fixed = {"hsplit": 1, "vsplit": 0, "dsplit": 2}.get(name)

    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        shape = data.draw(one_shape(min_dims=min_dims, max_dims=builtin_max(min_dims, 3)))
        axis = _axis(data, len(shape)) if fixed is None else fixed if len(shape) > 1 else 0
        n = shape[axis]
        if data.draw(st.booleans()):
            sections: Any = data.draw(
                st.sampled_from(
                    [k for k in range(1, 5) if n % k == 0]
                    if name != "array_split"
                    else [1, 2, 3, 4]
                )
            )
        else:
            sections = sorted(data.draw(st.lists(st.integers(0, n), max_size=3)))
        params = (
            {"sections": sections} if fixed is not None else {"sections": sections, "axis": axis}
        )
        return params, [values(data, shape, dts[0], dom)]

    return draw


def builtin_max(a: int, b: int) -> int:
    return a if a > b else b


def stack_args(name: str, dom: Dom = R) -> Draw:
    """1 to 3 arrays that the stacking function joins (sizes vary along its axis)."""

    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        rank = data.draw(st.integers(0, 3))
        base = list(data.draw(one_shape(min_dims=rank, max_dims=rank)))
        k = data.draw(st.integers(1, 3))
        vary = {
            "hstack": 0 if rank <= 1 else 1,
            "vstack": 0 if rank >= 2 else None,
            "row_stack": 0 if rank >= 2 else None,
            "dstack": 2 if rank >= 3 else None,
            "column_stack": 1 if rank == 2 else None,
        }[name]
        shapes = []
        for _ in range(k):
            s = list(base)
            if vary is not None and rank:
                s[vary] = data.draw(st.integers(0, SIDE))
            if name == "column_stack" and rank == 2 and data.draw(st.booleans()):
                s = [s[0]]  # a 1-D column next to matrices
            shapes.append(tuple(s))
        if name == "hstack" and rank == 0:
            shapes = [
                () if data.draw(st.booleans()) else (data.draw(st.integers(0, SIDE)),)
                for _ in range(k)
            ]
        return {}, [values(data, s, dts[i % len(dts)], dom) for i, s in enumerate(shapes)]

    return draw


def append_args(dom: Dom = R) -> Draw:
    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        shape = list(data.draw(one_shape(min_dims=1)))
        if data.draw(st.booleans()):
            other = data.draw(one_shape())
            return {"axis": None}, [
                values(data, tuple(shape), dts[0], dom),
                values(data, other, dts[-1], dom),
            ]
        axis = _axis(data, len(shape))
        second = list(shape)
        second[axis] = data.draw(st.integers(0, SIDE))
        return {"axis": axis}, [
            values(data, tuple(shape), dts[0], dom),
            values(data, tuple(second), dts[-1], dom),
        ]

    return draw


def repeat_args(dom: Dom = R) -> Draw:
    """An int or one count per element, axis None or an int, sometimes total_repeat_length."""

    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        shape = data.draw(one_shape())
        axis = data.draw(st.none() | st.integers(-len(shape), len(shape) - 1)) if shape else None
        n = int(np.prod(shape)) if axis is None else shape[axis]
        repeats: Any = data.draw(
            st.integers(0, 3) | st.lists(st.integers(0, 3), min_size=n, max_size=n).map(tuple)
        )
        total = data.draw(st.none() | st.integers(1, 6)) if n else None
        return {"repeats": repeats, "axis": axis, "total": total}, [
            values(data, shape, dts[0], dom)
        ]

    return draw


def repeat_ours(x: Any, repeats: Any, axis: Any, total: Any) -> Any:
    return sg.repeat(x, repeats, axis, total_repeat_length=total)


def repeat_ref(x: Any, repeats: Any, axis: Any, total: Any) -> Any:
    return jnp.repeat(x, np.asarray(repeats), axis, total_repeat_length=total)


def tile_args(dom: Dom = R) -> Draw:
    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        shape = data.draw(one_shape())
        reps = data.draw(
            st.integers(0, 3) | st.lists(st.integers(0, 2), min_size=1, max_size=3).map(tuple)
        )
        return {"reps": reps}, [values(data, shape, dts[0], dom)]

    return draw


def roll_args(dom: Dom = R) -> Draw:
    """A shift (int or tuple, negative and larger than the axis) and axis (None, int, tuple)."""

    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        shape = data.draw(one_shape(min_dims=1))
        shift = st.integers(-7, 7)
        nd = len(shape)
        kind = data.draw(st.sampled_from(["none", "int", "tuple", "shared"]))
        if kind == "none":
            params = {"shift": data.draw(shift), "axis": None}
        elif kind == "int":
            params = {"shift": data.draw(shift), "axis": _axis(data, nd)}
        else:
            axes = tuple(data.draw(st.lists(st.integers(-nd, nd - 1), min_size=1, max_size=3)))
            s = data.draw(shift) if kind == "shared" else tuple(data.draw(shift) for _ in axes)
            params = {"shift": s, "axis": axes}
        return params, [values(data, shape, dts[0], dom)]

    return draw


def traced_roll_args(dom: Dom = R) -> Draw:
    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        shape = data.draw(one_shape(min_dims=1))
        s = np.asarray(data.draw(st.integers(-7, 7)), np.int32)
        return {"axis": _axis(data, len(shape))}, [values(data, shape, dts[0], dom), s]

    return draw


def flip_args(dom: Dom = R) -> Draw:
    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        shape = data.draw(one_shape())
        nd = len(shape)
        axis = data.draw(
            st.none()
            | (st.integers(-nd, nd - 1) if nd else st.none())
            | st.lists(st.integers(0, builtin_max(nd - 1, 0)), unique=True, max_size=nd).map(tuple)
        )
        return {"axis": axis}, [values(data, shape, dts[0], dom)]

    return draw


def rank_args(min_dims: int, dom: Dom = R) -> Draw:
    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        return {}, [values(data, data.draw(one_shape(min_dims=min_dims)), dts[0], dom)]

    return draw


def rot90_args(dom: Dom = R) -> Draw:
    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        shape = data.draw(one_shape(min_dims=2))
        nd = len(shape)
        a = data.draw(st.integers(-nd, nd - 1))
        b = data.draw(st.integers(-nd, nd - 1).filter(lambda b: b % nd != a % nd))
        return {"k": data.draw(st.integers(-3, 5)), "axes": (a, b)}, [
            values(data, shape, dts[0], dom)
        ]

    return draw


def moveaxis_args(dom: Dom = R) -> Draw:
    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        shape = data.draw(one_shape(min_dims=1))
        nd = len(shape)
        if data.draw(st.booleans()):
            src, dst = _axis(data, nd), _axis(data, nd)
        else:
            k = data.draw(st.integers(0, nd))
            src = tuple(data.draw(st.permutations(range(nd)))[:k])
            dst = tuple(
                d - nd * data.draw(st.booleans()) for d in data.draw(st.permutations(range(nd)))[:k]
            )
        return {"source": src, "destination": dst}, [values(data, shape, dts[0], dom)]

    return draw


def rollaxis_args(dom: Dom = R) -> Draw:
    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        shape = data.draw(one_shape(min_dims=1))
        nd = len(shape)
        return {"axis": _axis(data, nd), "start": data.draw(st.integers(-nd, nd))}, [
            values(data, shape, dts[0], dom)
        ]

    return draw


def atleast_args(dom: Dom = R) -> Draw:
    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        k = data.draw(st.integers(1, 2))
        return {}, [values(data, data.draw(one_shape()), dts[0], dom) for _ in range(k)]

    return draw


def ravel_args(dom: Dom = R) -> Draw:
    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        return {"order": data.draw(st.sampled_from(["C", "F"]))}, [
            values(data, data.draw(one_shape()), dts[0], dom)
        ]

    return draw


def pad_args(
    dom: Dom = R, modes: tuple[str, ...] = ("constant", "edge", "reflect", "symmetric", "wrap")
) -> Draw:
    """NumPy's pad_width forms (int, pair, one pair per axis; wider than the axis too) and
    constant_values (scalar or per-axis pairs)."""

    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        mode = data.draw(st.sampled_from(modes))
        shape = data.draw(one_shape(min_dims=1, min_side=0 if mode == "constant" else 1))
        w = st.integers(0, 4)
        form = data.draw(st.sampled_from(["int", "pair", "axes"]))
        width: Any = (
            data.draw(w)
            if form == "int"
            else (data.draw(w), data.draw(w))
            if form == "pair"
            else tuple((data.draw(w), data.draw(w)) for _ in shape)
        )
        params: dict[str, Any] = {"pad_width": width, "mode": mode}
        if mode == "constant":
            c = st.sampled_from([0, 1, -2])
            params["constant_values"] = data.draw(
                c | st.lists(st.tuples(c, c), min_size=len(shape), max_size=len(shape)).map(tuple)
            )
        return params, [values(data, shape, dts[0], dom)]

    return draw


def sort_args(dom: Dom = GRID, argsort: bool = False) -> Draw:
    """axis None or an int, stable and descending; ties on the grid (argsort: stable only,
    the order of equal values is unspecified otherwise)."""

    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        shape = data.draw(one_shape(min_dims=1))
        params = {
            "axis": data.draw(st.none() | st.integers(-len(shape), len(shape) - 1)),
            "stable": True if argsort else data.draw(st.booleans()),
            "descending": data.draw(st.booleans()),
        }
        return params, [values(data, shape, dts[0], dom)]

    return draw


def diff_args(dom: Dom = R) -> Draw:
    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        shape = data.draw(one_shape(min_dims=1))
        axis = _axis(data, len(shape))
        params: dict[str, Any] = {"n": data.draw(st.integers(0, 3)), "axis": axis}
        args = [values(data, shape, dts[0], dom)]
        edge = list(shape)
        edge[axis] = data.draw(st.integers(1, 2))
        for which in ("prepend", "append"):
            kind = data.draw(st.sampled_from(["none", "scalar", "array"]))
            params[which] = (
                None
                if kind == "none"
                else 1.5
                if kind == "scalar"
                else (values(data, tuple(edge), dts[0], dom))
            )
        return params, args

    return draw


def diff_ours(x: Any, n: int, axis: int, prepend: Any, append: Any) -> Any:
    return sg.diff(x, n, axis, prepend, append)


def diff_ref(x: Any, n: int, axis: int, prepend: Any, append: Any) -> Any:
    return jnp.diff(x, n, axis, prepend, append)


def cumulative_args(dom: Dom = R, dtypes_: tuple = (None,)) -> Draw:
    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        shape = data.draw(one_shape())
        axis = data.draw(st.none() | st.integers(-len(shape), len(shape) - 1)) if shape else None
        return {"axis": axis, "dtype": data.draw(st.sampled_from(dtypes_))}, [
            values(data, shape, dts[0], dom)
        ]

    return draw


def lax_cumulative_args(dom: Dom = R) -> Draw:
    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        shape = data.draw(one_shape(min_dims=1))
        axis = data.draw(st.integers(0, len(shape) - 1))  # lax rejects negative axes
        return {"axis": axis, "reverse": data.draw(st.booleans())}, [
            values(data, shape, dts[0], dom)
        ]

    return draw


def pair_args(kind: str, dom: Dom = R) -> Draw:
    """Operands for outer, inner, kron, cross and tensordot."""

    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        params: dict[str, Any] = {}
        if kind in ("outer", "kron"):
            a, b = data.draw(one_shape()), data.draw(one_shape())
        elif kind == "inner":
            k = data.draw(st.integers(0, SIDE))
            a, b = data.draw(one_shape(max_dims=2)) + (k,), data.draw(one_shape(max_dims=2)) + (k,)
            if data.draw(st.integers(0, 4)) == 0:
                a = ()
        elif kind == "cross":
            la, lb = data.draw(st.sampled_from([2, 3])), data.draw(st.sampled_from([2, 3]))
            lead = data.draw(one_shape(max_dims=2, min_side=1))
            a, b = lead + (la,), lead[data.draw(st.integers(0, len(lead))) :] + (lb,)
            where_a, where_b = (
                data.draw(st.integers(0, len(a) - 1)),
                data.draw(st.integers(0, len(b) - 1)),
            )
            a, b = _move(a, where_a), _move(b, where_b)
            params = {
                "axisa": where_a,
                "axisb": where_b,
                "axisc": data.draw(st.integers(-1, 0)) if la == 3 or lb == 3 else -1,
            }
        else:
            k = data.draw(st.integers(0, 2))
            shared = data.draw(one_shape(min_dims=k, max_dims=k))
            a = data.draw(one_shape(max_dims=2)) + shared
            b = shared + data.draw(one_shape(max_dims=2))
            if data.draw(st.booleans()):
                params = {"axes": k}
            else:  # the shared axes named in a shuffled order
                perm = data.draw(st.permutations(range(k)))
                ia = [len(a) - k + p for p in perm]
                ib = [p - len(b) * data.draw(st.booleans()) for p in perm]
                params = {"axes": (tuple(ia), tuple(ib))}
        return params, [values(data, a, dts[0], dom), values(data, b, dts[-1], dom)]

    return draw


def _move(shape: tuple[int, ...], to: int) -> tuple[int, ...]:
    """`shape` with its last entry moved to position `to`."""
    s = list(shape[:-1])
    s.insert(to, shape[-1])
    return tuple(s)


METHODS: dict[str, Callable[[Any], Any]] = {
    "cumsum": lambda x: x.cumsum(axis=0),
    "cumprod": lambda x: x.cumprod(),
    "ravel": lambda x: x.ravel(),
    "flatten": lambda x: x.flatten(),
    "repeat": lambda x: x.repeat(2, axis=1),
    "sort": lambda x: x.sort(axis=0),
    "argsort": lambda x: x.argsort(),
}


def method_args(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
    shape = data.draw(one_shape(min_dims=2, max_dims=2))
    return {"method": data.draw(st.sampled_from(sorted(METHODS)))}, [
        values(data, shape, dts[0], DISTINCT)
    ]


def _split_fn(mod: Any, name: str) -> Callable[..., Any]:
    def fn(x: Any, sections: Any, axis: Any = None) -> Any:
        f = getattr(mod, name)
        return f(x, sections) if axis is None else f(x, sections, axis)

    return fn


def _stack_fn(mod: Any, name: str) -> Callable[..., Any]:
    return lambda *xs: getattr(mod, "vstack" if mod is jnp and name == "row_stack" else name)(xs)


def _cumulative(mod: Any, name: str) -> Callable[..., Any]:
    return lambda x, axis, dtype: getattr(mod, name)(x, axis=axis, dtype=dtype)


def take_along_args(dom: Dom = R) -> Draw:
    """An array, in-range indices (negatives too) of its rank, broadcasting on the other axes."""

    def draw(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        shape = data.draw(one_shape(min_dims=1, min_side=1))
        axis = data.draw(st.integers(-len(shape), len(shape) - 1))
        n = shape[axis]
        ishape = [1 if data.draw(st.booleans()) else s for s in shape]
        ishape[axis] = data.draw(st.integers(0, SIDE))
        idx = np.asarray(
            data.draw(
                st.lists(
                    st.integers(-n, n - 1),
                    min_size=int(np.prod(ishape)),
                    max_size=int(np.prod(ishape)),
                )
            ),
            np.int32,
        )
        return {"axis": axis}, [values(data, shape, dts[0], dom), idx.reshape(ishape)]

    return draw


def _lax_cumulative(name: str) -> tuple[Callable, Callable]:
    return (
        lambda x, axis, reverse: getattr(sg, name)(x, axis, reverse),
        lambda x, axis, reverse: getattr(lax, name)(x, axis, reverse),
    )


def _pad(mod: Any) -> Callable[..., Any]:
    return lambda x, **kw: mod.pad(x, **kw)


SPLITS = ("split", "array_split", "hsplit", "vsplit", "dsplit")
STACKS = ("hstack", "vstack", "dstack", "column_stack", "row_stack")

CASES: list[Case] = [
    *[
        Case(name, _split_fn(sg, name), _split_fn(jnp, name), split_args(name), ((F32,), (I32,)))
        for name in SPLITS
    ],
    *[
        Case(
            name,
            _stack_fn(sg, name),
            _stack_fn(jnp, name),
            stack_args(name),
            ((F32,), (I32,), (F32, F64)),
        )
        for name in STACKS
    ],
    Case("append", sg.append, jnp.append, append_args(), ((F64,), (I32, F32))),
    Case("repeat", repeat_ours, repeat_ref, repeat_args(), ((F32,), (BOOL,))),
    Case("tile", sg.tile, jnp.tile, tile_args(), ((F64,), (I32,))),
    Case("roll", sg.roll, jnp.roll, roll_args(), ((F32,), (I32,))),
    Case("roll traced shift", sg.roll, jnp.roll, traced_roll_args(), ((F64, I32),)),
    Case("flip", sg.flip, jnp.flip, flip_args(), ((F32,), (BOOL,))),
    Case("fliplr", sg.fliplr, jnp.fliplr, rank_args(2), ((F32,),)),
    Case("flipud", sg.flipud, jnp.flipud, rank_args(1), ((I32,),)),
    Case("rot90", sg.rot90, jnp.rot90, rot90_args(), ((F32,), (I32,))),
    Case("moveaxis", sg.moveaxis, jnp.moveaxis, moveaxis_args(), ((F32,),)),
    Case("rollaxis", sg.rollaxis, jnp.rollaxis, rollaxis_args(), ((F64,),)),
    *[
        Case(name, getattr(sg, name), getattr(jnp, name), atleast_args(), ((F32,), (I32,)))
        for name in ("atleast_1d", "atleast_2d", "atleast_3d")
    ],
    Case("ravel", sg.ravel, jnp.ravel, ravel_args(), ((F32,), (BOOL,))),
    Case("pad", _pad(sg), _pad(jnp), pad_args(), ((F32,), (I32,), (BOOL,))),
    Case("sort", sg.sort, jnp.sort, sort_args(), NUMS),
    Case("argsort", sg.argsort, jnp.argsort, sort_args(argsort=True), NUMS),
    Case("argsort unstable distinct", sg.argsort, jnp.argsort, sort_args(DISTINCT), ((F32,),)),
    Case("diff", diff_ours, diff_ref, diff_args(), ((F32,), (I32,), (BOOL,))),
    Case(
        "cumsum",
        _cumulative(sg, "cumsum"),
        _cumulative(jnp, "cumsum"),
        cumulative_args(R, (None, F32, I32)),
        ALL,
    ),
    Case(
        "cumprod",
        _cumulative(sg, "cumprod"),
        _cumulative(jnp, "cumprod"),
        cumulative_args(Dom(-2.0, 2.0), (None, F64)),
        ALL,
    ),
    Case("cummax", *_lax_cumulative("cummax"), lax_cumulative_args(GRID), NUMS),
    Case("cummin", *_lax_cumulative("cummin"), lax_cumulative_args(GRID), NUMS),
    Case(
        "take_along_axis",
        sg.take_along_axis,
        jnp.take_along_axis,
        take_along_args(),
        ((F32,), (I32,)),
    ),
    Case("outer", sg.outer, jnp.outer, pair_args("outer"), ((F32,), (I32, F64))),
    Case("inner", sg.inner, jnp.inner, pair_args("inner"), ((F32,), (I32, F64))),
    Case("kron", sg.kron, jnp.kron, pair_args("kron"), ((F32,), (I32,))),
    Case("cross", sg.cross, jnp.cross, pair_args("cross"), ((F32,), (I32, F64))),
    Case("tensordot", sg.tensordot, jnp.tensordot, pair_args("tensordot"), ((F32,), (I32, F64))),
    Case(
        "methods .cumsum() .cumprod() .ravel() .flatten() .repeat() .sort() .argsort()",
        lambda x, method: METHODS[method](x),
        lambda x, method: METHODS[method](x),
        method_args,
        ((F32,),),
    ),
]


def _flat_sg(fn: Callable) -> Callable:
    def joined(*xs: Any, **kw: Any) -> Any:
        return sg.concatenate([sg.ravel(p) for p in fn(*xs, **kw)], 0)

    return joined


def _flat_jnp(fn: Callable) -> Callable:
    def joined(*xs: Any, **kw: Any) -> Any:
        return jnp.concatenate([jnp.ravel(p) for p in fn(*xs, **kw)], 0)

    return joined


GRAD_CASES: list[GradCase] = [
    *[
        GradCase(
            name, _flat_sg(_split_fn(sg, name)), _flat_jnp(_split_fn(jnp, name)), split_args(name)
        )
        for name in SPLITS
    ],
    *[
        GradCase(
            name,
            _stack_fn(sg, name),
            _stack_fn(jnp, name),
            stack_args(name),
            variants=MIXED,
            second_order=name == "hstack",
        )
        for name in STACKS
    ],
    GradCase("append", sg.append, jnp.append, append_args(), variants=MIXED),
    GradCase("repeat", repeat_ours, repeat_ref, repeat_args(), second_order=True),
    GradCase("tile", sg.tile, jnp.tile, tile_args(), second_order=True),
    GradCase("roll", sg.roll, jnp.roll, roll_args(), second_order=True),
    GradCase("roll traced shift", sg.roll, jnp.roll, traced_roll_args(), (F32, I32)),
    GradCase("flip", sg.flip, jnp.flip, flip_args()),
    GradCase("fliplr", sg.fliplr, jnp.fliplr, rank_args(2)),
    GradCase("flipud", sg.flipud, jnp.flipud, rank_args(1)),
    GradCase("rot90", sg.rot90, jnp.rot90, rot90_args(), second_order=True),
    GradCase("moveaxis", sg.moveaxis, jnp.moveaxis, moveaxis_args()),
    GradCase("rollaxis", sg.rollaxis, jnp.rollaxis, rollaxis_args()),
    *[
        GradCase(
            name,
            _flat_sg(lambda *xs, f=getattr(sg, name): f(*xs, *xs)),
            _flat_jnp(lambda *xs, f=getattr(jnp, name): f(*xs, *xs)),
            atleast_args(),
        )
        for name in ("atleast_1d", "atleast_2d", "atleast_3d")
    ],
    GradCase("ravel", sg.ravel, jnp.ravel, ravel_args()),
    GradCase("pad", _pad(sg), _pad(jnp), pad_args(), second_order=True),
    GradCase(
        "sort", sg.sort, jnp.sort, sort_args(DISTINCT), fd_doms=(DISTINCT,), second_order=True
    ),
    GradCase("diff", diff_ours, diff_ref, diff_args(), second_order=True),
    GradCase(
        "cumsum",
        _cumulative(sg, "cumsum"),
        _cumulative(jnp, "cumsum"),
        cumulative_args(),
        second_order=True,
    ),
    GradCase(
        "cumprod",
        _cumulative(sg, "cumprod"),
        _cumulative(jnp, "cumprod"),
        cumulative_args(Dom(-2.0, 2.0)),
        second_order=True,
    ),
    GradCase(
        "cummax",
        *_lax_cumulative("cummax"),
        lax_cumulative_args(DISTINCT),
        fd_doms=(DISTINCT,),
        second_order=True,
    ),
    GradCase(
        "cummin", *_lax_cumulative("cummin"), lax_cumulative_args(DISTINCT), fd_doms=(DISTINCT,)
    ),
    GradCase(
        "take_along_axis",
        sg.take_along_axis,
        jnp.take_along_axis,
        take_along_args(),
        second_order=True,
    ),
    GradCase("outer", sg.outer, jnp.outer, pair_args("outer"), variants=MIXED),
    GradCase("inner", sg.inner, jnp.inner, pair_args("inner"), second_order=True),
    GradCase("kron", sg.kron, jnp.kron, pair_args("kron"), second_order=True),
    GradCase("cross", sg.cross, jnp.cross, pair_args("cross"), variants=MIXED, second_order=True),
    GradCase("tensordot", sg.tensordot, jnp.tensordot, pair_args("tensordot"), second_order=True),
]


# ---------------------------------------------------------------- running the tables


def assert_same_tree(ours: Any, theirs: Any, what: str) -> None:
    """Same pytree (a list for split), leaf dtypes and shapes; equal values."""
    a_leaves, a_tree = jax.tree_util.tree_flatten(ours)
    b_leaves, b_tree = jax.tree_util.tree_flatten(theirs)
    assert a_tree == b_tree, f"{what}: srcgrad gives {a_tree}, jax.numpy {b_tree}"
    for a, b in zip(a_leaves, b_leaves):
        assert_same(a, b, what)


@pytest.mark.parametrize("case", sliced(CASES, 2), ids=str)
@examples(7)
@given(data=st.data())
def test_op_matches_jax_numpy(case: Case, data: st.DataObject) -> None:
    """sg.jit(op) equals the jax.numpy equivalent for every dtype variant of the case."""
    check_case(case, data, assert_same_tree)


@pytest.mark.parametrize("case", sliced(CASES, 2), ids=str)
@examples(30, least=1)
@given(data=st.data())
def test_eager_call_matches_jax_numpy(case: Case, data: st.DataObject) -> None:
    """Called on NumPy arrays outside a trace, the op returns jax.numpy's result."""
    params, args = case.draw(data, case.variants[0])
    assert_same_tree(case.ours(*args, **params), case.ref(*args, **params), case.name)


@pytest.mark.parametrize("case", sliced(GRAD_CASES, 2), ids=str)
@examples(6)
@given(data=st.data())
def test_grad_matches_jax(case: GradCase, data: st.DataObject) -> None:
    """sg.grad equals jax.grad (in float64) for every float dtype variant of the case."""
    check_against_jax(case, data)


@pytest.mark.parametrize("case", sliced(GRAD_CASES, 2), ids=str)
@examples(15, least=1)
@given(data=st.data())
def test_check_grads(case: GradCase, data: st.DataObject) -> None:
    """Float64 finite differences (and jax.grad) on a sample shape of the op."""
    check(case, data, order=1)


@pytest.mark.parametrize("case", sliced([c for c in GRAD_CASES if c.second_order], 2), ids=str)
@examples(15, least=1)
@given(data=st.data())
def test_check_grads_second_order(case: GradCase, data: st.DataObject) -> None:
    """Gradients of gradients against finite differences and jax."""
    check(case, data, order=2)


# ---------------------------------------------------------------- cases the tables miss


@pytest.mark.parametrize(
    "x", [[2.0, 0.0, 3.0, 0.0, 5.0], [0.0, 2.0, -1.5, 4.0], [1.5, -2.0, 0.0], [0.0, 0.0, 0.0]]
)
@pytest.mark.parametrize("reverse", [False, True])
def test_cumprod_gradient_is_exact_with_zeros(x: list[float], reverse: bool) -> None:
    """cumprod's gradient where inputs are zero (one, several, first, last) equals jax.grad's,
    to second order, for jnp.cumprod and lax.cumprod(reverse=...)."""
    a = np.array([x, x[::-1]])
    w = np.arange(1.0, a.size + 1).reshape(a.shape)

    def ours(v: Any) -> Any:
        return sg.sum(sg.cumprod(v[:, ::-1] if reverse else v, axis=1) * w)

    def ref(v: Any) -> Any:
        return jnp.sum(jnp.cumprod(v[:, ::-1] if reverse else v, axis=1) * w)

    np.testing.assert_allclose(sg.grad(ours)(a), jax.grad(ref)(a), rtol=1e-12, atol=1e-12)
    h = np.random.default_rng(0).standard_normal(a.shape)
    hv = sg.grad(lambda v: sg.sum(sg.grad(ours)(v) * h))(a)
    np.testing.assert_allclose(
        hv, jax.grad(lambda v: jnp.sum(jax.grad(ref)(v) * h))(a), rtol=1e-12, atol=1e-12
    )
    got = sg.grad(lambda v: sg.sum(lax_cumprod(v, 1, reverse) * w))(a)
    want = jax.grad(lambda v: jnp.sum(lax.cumprod(v, 1, reverse=reverse) * w))(a)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("reverse", [False, True])
def test_cumprod_gradient_is_jax_grads_with_infinities_nan_and_zeros(reverse: bool) -> None:
    """The gradient is the transpose of the associative scan JAX differentiates, so where the
    input holds infinities, NaN and zeros its inf and NaN are jax.grad's (sum(cumprod(x))
    at [1, inf, 3, -inf] was [nan, -inf, -inf, inf], JAX's [-inf, -inf, nan, inf]): every
    length up to 9, values drawn from {0, 1.5, -2, inf, -inf, nan}, along axis 1."""
    rng = np.random.default_rng(5)
    values = np.array([0.0, 1.5, -2.0, np.inf, -np.inf, np.nan])
    for n in range(10):
        x = rng.choice(values, size=(12, n))
        x[0, :4] = [1.0, np.inf, 3.0, -np.inf][:n]
        w = rng.standard_normal((12, n))
        got = sg.grad(lambda v: sg.sum(lax_cumprod(v, 1, reverse) * w))(x)
        want = jax.grad(lambda v: jnp.sum(lax.cumprod(v, 1, reverse=reverse) * w))(x)
        np.testing.assert_allclose(
            got, want, rtol=1e-12, atol=1e-12, equal_nan=True, err_msg=f"length {n}"
        )


def test_sort_gradient_follows_the_permutation_with_ties() -> None:
    """Equal values: each sorted position's gradient goes to the element the stable sort put
    there, as jax.grad of jnp.sort."""
    x = np.array([[1.0, 3.0, 1.0, 2.0, 3.0], [0.5, 0.5, 0.5, -1.0, 2.0]])
    w = np.arange(10.0).reshape(2, 5)
    got = sg.grad(lambda v: sg.sum(sg.sort(v, axis=1) * w))(x)
    want = jax.grad(lambda v: jnp.sum(jnp.sort(v, axis=1) * w))(x)
    np.testing.assert_array_equal(got, want)


def test_cummax_gradient_goes_to_the_first_maximum() -> None:
    """With ties srcgrad routes each output's gradient to the first position of the running
    maximum (JAX splits ties by its scan's tree); without ties both agree."""
    g = sg.grad(lambda v: sg.sum(sg.cummax(v) * np.array([1.0, 2.0, 4.0, 8.0])))(
        np.array([1.0, 0.0, 1.0, 2.0])
    )
    np.testing.assert_array_equal(g, [7.0, 0.0, 0.0, 8.0])


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda x: sg.split(x, 4), "equal division"),
        (lambda x: sg.repeat(x, [1, 2]), "repeats for an axis"),
        (lambda x: sg.pad(x, 1, mode="median"), "not supported"),
        (lambda x: sg.pad(x, ((1, 2), (3, 4), (5, 6))), "does not fit"),
        (lambda x: sg.rot90(x, axes=(1, 1)), "must differ"),
        (lambda x: sg.tensordot(x, x, 3), "axes=3"),
        (lambda x: sg.cross(x, x), "length 2 or 3"),
        (lambda x: sg.vsplit(x[0], 2), "rank at least 2"),
        (lambda x: sg.sort(x, kind="quicksort"), "kind="),
    ],
)
def test_bad_arguments_raise_clear_errors(call: Callable, match: str) -> None:
    x = np.ones((3, 5))
    with pytest.raises(ShapeError, match=match):
        sg.jit(call)(x)


def test_traced_repeats_are_an_error() -> None:
    with pytest.raises(ShapeError, match="static"):
        sg.jit(lambda x, r: sg.repeat(x, r))(np.ones(3), np.ones(3, np.int32))
