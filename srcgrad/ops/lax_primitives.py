"""jax.lax's primitives that jaxprs need and srcgrad's jax.numpy-style ops do not cover, each
lowered to the lax / jax.random call of the same meaning. They are internal rows (no `sg.`
function): `sg.from_jax` reaches them.

The general `gather`, `scatter-add`, `scatter` and `scatter-mul`/`-min`/`-max` with XLA
dimension numbers (what `x[idx]`, `jnp.take_along_axis`, `x.at[idx].add(v)`, `.set(v)`,
`.multiply(v)`, `.min(v)` and `.max(v)` become in a jaxpr): each is the transpose of another
(gather <-> scatter-add, as in JAX), so their gradients are again these ops and they
differentiate to any order. Dimension numbers are tuples of ints in the attrs:
gather's `(offset_dims, collapsed_slice_dims, start_index_map, operand_batching_dims,
start_indices_batching_dims)`, scatter's `(update_window_dims, inserted_window_dims,
scatter_dims_to_operand_dims, operand_batching_dims, scatter_indices_batching_dims)`, the
same five lists in the same roles (older JAX has only the first three: the batching dims are
then empty). `mode` is "clip", "fill" or "promise_in_bounds".

`top_k`'s indices, `nextafter`, `bitcast_convert_type`, `lu_pivots_to_permutation`, the PRNG
primitives on key data (`random_seed`, `random_bits`, `random_split`, `random_fold_in`,
`threefry2x32`) and `pure_callback`: their outputs are integers, except `nextafter`'s and
`pure_callback`'s, which JAX cannot differentiate: their gradient is a GradientError where
they lie on the differentiated path. A key's data is a uint32 array whose last axis is the
key (srcgrad's form of a typed key); `impl` is the PRNG's name.

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, Callable, Sequence

import jax
import jax.extend.random  # jax.extend.random.threefry_2x32, in emitted source
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..base import dtypes
from ..base.errors import GradientError, ShapeError
from ..ir.program import Op, Variable
from ..core.registry import ZERO, OutType, register
from .creation import arange, full, zeros
from ..core.declare import defop, named
from .elementwise import equal, where
from .index_update import decided
from .shape import reshape
from ..core.builder import as_var, emit

DimNums = tuple[tuple[int, ...], ...]
MODES = ("clip", "fill", "promise_in_bounds")
#: How many of the five lists lax's dimension numbers take: 3 in JAX before batching dims
#: (0.4.30), whose jaxprs have no batching dims to give.
_FIELDS = len(lax.GatherDimensionNumbers._fields)
_CUT = "" if _FIELDS == 5 else f"[:{_FIELDS}]"


def _gather_dn(dn: DimNums) -> Any:
    return lax.GatherDimensionNumbers(*dn[:_FIELDS])


def _scatter_dn(dn: DimNums) -> Any:
    return lax.ScatterDimensionNumbers(*dn[:_FIELDS])


@lru_cache(maxsize=1024)
def _gather_shape(
    x: tuple, idx: tuple, dts: tuple, dn: DimNums, sizes: tuple, mode: str
) -> tuple[tuple[int, ...], np.dtype]:
    out = jax.eval_shape(
        lambda a, i: lax.gather(a, i, _gather_dn(dn), sizes, mode=mode),
        jax.ShapeDtypeStruct(x, dts[0]),
        jax.ShapeDtypeStruct(idx, dts[1]),
    )
    return tuple(out.shape), np.dtype(out.dtype)


@lru_cache(maxsize=1024)
def _check_scatter(x: tuple, idx: tuple, upd: tuple, dts: tuple, dn: DimNums, mode: str) -> None:
    jax.eval_shape(
        lambda a, i, u: lax.scatter_add(a, i, u, _scatter_dn(dn), mode=mode),
        jax.ShapeDtypeStruct(x, dts[0]),
        jax.ShapeDtypeStruct(idx, dts[1]),
        jax.ShapeDtypeStruct(upd, dts[0]),
    )


def _gather_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    x, idx = inputs
    try:
        return [
            _gather_shape(
                x.shape,
                idx.shape,
                (x.dtype, idx.dtype),
                attrs["dimension_numbers"],
                attrs["slice_sizes"],
                attrs["mode"],
            )
        ]
    except (TypeError, ValueError) as e:
        raise ShapeError(f"gather of {x.type_str()} at indices {idx.type_str()}: {e}") from None


def _scatter_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    x, idx, upd = inputs
    if upd.dtype != x.dtype:
        raise ShapeError(
            f"scatter updates must have the operand's dtype {x.dtype.name}, got {upd.type_str()}"
        )
    try:
        _check_scatter(
            x.shape,
            idx.shape,
            upd.shape,
            (x.dtype, idx.dtype),
            attrs["dimension_numbers"],
            attrs["mode"],
        )
    except (TypeError, ValueError) as e:
        raise ShapeError(
            f"scatter into {x.type_str()} of {upd.type_str()} at indices {idx.type_str()}: {e}"
        ) from None
    return [(x.shape, x.dtype)]


def _lower_gather(args: list[str], attrs: dict[str, str]) -> str:
    return (
        f"lax.gather({args[0]}, {args[1]}, "
        f"lax.GatherDimensionNumbers(*{attrs['dimension_numbers']}{_CUT}), "
        f"{attrs['slice_sizes']}, "
        f"indices_are_sorted={attrs['indices_are_sorted']}, "
        f"unique_indices={attrs['unique_indices']}, mode={attrs['mode']}, "
        f"fill_value={attrs['fill_value']})"
    )


def _lower_scatter(fn: str) -> Any:
    def lower(args: list[str], attrs: dict[str, str]) -> str:
        return (
            f"lax.{fn}({args[0]}, {args[1]}, {args[2]}, "
            f"lax.ScatterDimensionNumbers(*{attrs['dimension_numbers']}{_CUT}), "
            f"indices_are_sorted={attrs['indices_are_sorted']}, "
            f"unique_indices={attrs['unique_indices']}, mode={attrs['mode']})"
        )

    return lower


# ---------------------------------------------------------------- grad makers


def _window_sizes(operand: tuple[int, ...], upd: tuple[int, ...], dn: DimNums) -> tuple[int, ...]:
    """The gather slice sizes that read back what a scatter with `dn` wrote (JAX's transpose)."""
    window, inserted, _, batching, _ = dn
    sizes, pos = [], 0
    for i in range(len(operand)):
        if i in inserted or i in batching:
            sizes.append(1)
        else:
            sizes.append(upd[window[pos]])
            pos += 1
    return tuple(sizes)


def _read_back(g: Variable, op: Op) -> Variable:
    """The gather of `g` at the positions a scatter op wrote (0 where its updates dropped)."""
    x, idx, upd = op.inputs
    a = op.attrs
    return gather(
        g,
        idx,
        a["dimension_numbers"],
        _window_sizes(x.shape, upd.shape, a["dimension_numbers"]),
        a["mode"],
        0,
        a["indices_are_sorted"],
        a["unique_indices"],
    )


def _g_gather(op: Op, g: list, need: list) -> list:
    x, idx = op.inputs
    a = op.attrs
    return [
        scatter_add(
            zeros(x.shape, x.dtype),
            idx,
            g[0],
            a["dimension_numbers"],
            a["mode"],
            a["indices_are_sorted"],
            a["unique_indices"],
        ),
        None,
    ]


def _g_scatter_add(op: Op, g: list, need: list) -> list:
    return [g[0] if need[0] else None, None, _read_back(g[0], op) if need[2] else None]


def _g_scatter(op: Op, g: list, need: list) -> list:
    """Overwriting scatter with unique indices (float updates that may collide are written
    by `scatter` as a scatter of ids and a read): the operand's gradient is zero where an
    update landed, an update's is the cotangent at its target."""
    x, idx, upd = op.inputs
    a = op.attrs
    gx = gu = None
    if need[0]:
        hit = overwrite(
            zeros(x.shape, np.int8),
            idx,
            full(upd.shape, 1, np.int8),
            a["dimension_numbers"],
            a["mode"],
            a["indices_are_sorted"],
            a["unique_indices"],
        )
        gx = where(equal(hit, 0), g[0], 0.0)
    if need[2]:
        gu = _read_back(g[0], op)
    return [gx, None, gu]


def _g_scatter_mul(op: Op, g: list, need: list) -> list:
    """JAX's rule: the operand's gradient is the cotangent scaled as the operand was; an
    update's is the cotangent times the operand at its target (unique indices only, as in
    JAX: with repeated indices the product's other factors would be needed)."""
    x, idx, upd = op.inputs
    a = op.attrs
    flags = (a["indices_are_sorted"], a["unique_indices"])
    gx = gu = None
    if need[0]:
        gx = scatter_mul(g[0], idx, upd, a["dimension_numbers"], a["mode"], *flags)
    if need[2]:
        if not a["unique_indices"]:
            raise GradientError(
                "the gradient of scatter-mul (x.at[idx].multiply(v)) with "
                "respect to the updates needs unique indices (as in JAX)",
                op="lax_scatter_mul",
                loc=op.loc,
            )
        gu = _read_back(g[0] * x, op)
    return [gx, None, gu]


def _g_scatter_extremal(op: Op, g: list, need: list) -> list:
    """JAX's rule for scatter-min/max (the transpose of its JVP): the result at a target takes
    the gradient of the values that reach it, shared equally among the updates that won and
    the operand's value where it equals them (a tie)."""
    x, idx, upd = op.inputs
    a = op.attrs
    dn, mode = a["dimension_numbers"], a["mode"]
    sizes = _window_sizes(x.shape, upd.shape, dn)

    def at(v: Variable) -> Variable:  # JAX's reads: fill mode, NaN outside
        return gather(v, idx, dn, sizes, "fill")

    def count(v: Variable) -> Variable:
        return at(scatter_add(zeros(x.shape, x.dtype), idx, v, dn, "fill"))

    target = at(op.outputs[0])
    won, kept = equal(upd, target), equal(at(x), target)
    wins = count(where(won, 1.0, 0.0).astype(x.dtype))
    refs = count(full(upd.shape, 1, x.dtype))
    upd_coef = where(won, where(kept, 1.0 / (wins + 1.0), 1.0 / wins), 0.0)
    x_coef = (where(kept, 1.0 / (wins + 1.0), 0.0) - 1.0) / refs
    g_at = gather(g[0], idx, dn, sizes, mode, 0, a["indices_are_sorted"], a["unique_indices"])
    gx = gu = None
    if need[0]:
        gx = g[0] + scatter_add(zeros(x.shape, x.dtype), idx, g_at * x_coef, dn, "fill")
    if need[2]:
        gu = g_at * upd_coef
    return [gx, None, gu]


# ---------------------------------------------------------------- the ops


def _attrs(dn: Sequence[Sequence[int]], mode: str, sorted_: bool, unique: bool) -> dict[str, Any]:
    if mode not in MODES:
        raise ShapeError(f"gather/scatter mode must be one of {MODES}, got {mode!r}")
    parts = tuple(tuple(int(d) for d in part) for part in dn)
    return {
        "dimension_numbers": parts + ((),) * (5 - len(parts)),
        "mode": mode,
        "indices_are_sorted": bool(sorted_),
        "unique_indices": bool(unique),
    }


@defop("lax_gather", _gather_rule, _lower_gather, _g_gather, export=False, base="gather")
def gather(
    x: Variable,
    indices: Variable,
    dimension_numbers: Sequence[Sequence[int]],
    slice_sizes: Sequence[int],
    mode: str = "fill",
    fill_value: float | None = None,
    indices_are_sorted: bool = False,
    unique_indices: bool = False,
) -> Any:
    """lax.gather (dimension numbers as five tuples, in GatherDimensionNumbers' order)."""
    attrs = _attrs(dimension_numbers, mode, indices_are_sorted, unique_indices)
    attrs["slice_sizes"] = tuple(int(s) for s in slice_sizes)
    attrs["fill_value"] = None if fill_value is None else float(fill_value)
    return [x, indices], attrs


@defop(
    "lax_scatter_add",
    _scatter_rule,
    _lower_scatter("scatter_add"),
    _g_scatter_add,
    export=False,
    base="scatter_add",
)
def scatter_add(
    x: Variable,
    indices: Variable,
    updates: Variable,
    dimension_numbers: Sequence[Sequence[int]],
    mode: str = "fill",
    indices_are_sorted: bool = False,
    unique_indices: bool = False,
) -> Any:
    """lax.scatter_add (dimension numbers as five tuples, in ScatterDimensionNumbers' order)."""
    return [x, indices, updates], _attrs(
        dimension_numbers, mode, indices_are_sorted, unique_indices
    )


@defop(
    "lax_scatter",
    _scatter_rule,
    _lower_scatter("scatter"),
    _g_scatter,
    export=False,
    base="scatter",
)
def overwrite(
    x: Variable,
    indices: Variable,
    updates: Variable,
    dimension_numbers: Sequence[Sequence[int]],
    mode: str = "fill",
    indices_are_sorted: bool = False,
    unique_indices: bool = False,
) -> Any:
    """lax.scatter as one op: `updates` written over `x` (one of several updates to a
    position wins; which is unspecified on GPU)."""
    return [x, indices, updates], _attrs(
        dimension_numbers, mode, indices_are_sorted, unique_indices
    )


def scatter(
    x: Variable,
    indices: Variable,
    updates: Variable,
    dimension_numbers: Sequence[Sequence[int]],
    mode: str = "fill",
    indices_are_sorted: bool = False,
    unique_indices: bool = False,
) -> Variable:
    """lax.scatter: `updates` written over `x`; float updates that may collide through one
    scatter of update ids (`index_update.decided`)."""
    # One index vector (the last axis of `indices`) writes one window: nothing collides.
    unique_indices = unique_indices or math.prod(indices.shape[:-1]) <= 1
    flags = (indices_are_sorted, unique_indices)
    if unique_indices or not dtypes.is_inexact(updates.dtype):
        return overwrite(x, indices, updates, dimension_numbers, mode, *flags)
    ids = reshape(arange(1, updates.size + 1, dtype=np.int32), updates.shape)
    return decided(
        x,
        overwrite(zeros(x.shape, np.int32), indices, ids, dimension_numbers, mode, *flags),
        updates,
    )


def _combining(name: str, lax_fn: str, grad: Any, doc: str) -> Any:
    def front(
        x: Variable,
        indices: Variable,
        updates: Variable,
        dimension_numbers: Sequence[Sequence[int]],
        mode: str = "fill",
        indices_are_sorted: bool = False,
        unique_indices: bool = False,
    ) -> Any:
        return [x, indices, updates], _attrs(
            dimension_numbers, mode, indices_are_sorted, unique_indices
        )

    named(front, lax_fn, doc)
    return defop(name, _scatter_rule, _lower_scatter(lax_fn), grad, export=False, base=lax_fn)(
        front
    )


scatter_mul = _combining(
    "lax_scatter_mul",
    "scatter_mul",
    _g_scatter_mul,
    "lax.scatter_mul: `x` times `updates` at the indices.",
)
scatter_min = _combining(
    "lax_scatter_min",
    "scatter_min",
    _g_scatter_extremal,
    "lax.scatter_min: the minimum of `x` and the updates at the indices.",
)
scatter_max = _combining(
    "lax_scatter_max",
    "scatter_max",
    _g_scatter_extremal,
    "lax.scatter_max: the maximum of `x` and the updates at the indices.",
)


def _refused(what: str) -> Any:
    """The grad maker of a row JAX cannot differentiate: its error, at the op."""

    def grad(op: Op, g: list, need: list) -> list:
        raise GradientError(
            f"JAX cannot differentiate {what} either; it is on the differentiated path",
            op=op.type,
            loc=op.loc,
        )

    return grad


def _row(name: str, fn: Callable[..., Any], lower: str, doc: str, grad: Any = ZERO) -> Any:
    """An internal row lowered to `lower` whose shapes and dtypes are those of the JAX
    function `fn(*inputs, **attrs)` (the same computation)."""

    @lru_cache(maxsize=1024)
    def shapes(avals: tuple, attrs: tuple) -> list[OutType]:
        out = jax.eval_shape(
            lambda *xs: fn(*xs, **dict(attrs)), *[jax.ShapeDtypeStruct(s, d) for s, d in avals]
        )
        return [(tuple(o.shape), np.dtype(o.dtype)) for o in jax.tree_util.tree_leaves(out)]

    def infer(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
        try:
            return shapes(tuple((v.shape, v.dtype) for v in inputs), tuple(sorted(attrs.items())))
        except (TypeError, ValueError) as e:
            raise ShapeError(
                f"{name} of {', '.join(v.type_str() for v in inputs)}: "
                f"{str(e).splitlines()[0] if str(e) else e}"
            ) from None

    def front(*inputs: Any, **attrs: Any) -> tuple[list[Variable], dict]:
        return [as_var(x) for x in inputs], attrs

    named(front, name, doc)
    return defop(name, infer, lower, grad, export=False)(front)


top_k_indices = _row(
    "lax_top_k",
    lambda x, k: lax.top_k(x, k)[1],
    "lax.top_k({0}, {k})[1]",
    "The indices of lax.top_k(x, k) (the k largest along the last axis).",
)


nextafter = _row(
    "lax_nextafter",
    jnp.nextafter,
    "jnp.nextafter({0}, {1})",
    "jnp.nextafter(x1, x2): the next float after x1 towards x2 (no gradient, as in JAX).",
    grad=_refused("nextafter"),
)


bitcast = _row(
    "lax_bitcast",
    lambda x, dtype: lax.bitcast_convert_type(x, dtype),
    "lax.bitcast_convert_type({0}, {dtype})",
    "lax.bitcast_convert_type(x, dtype): the same bits read as `dtype`.",
)


pivots_to_permutation = _row(
    "lax_lu_pivots_to_permutation",
    lambda p, size: lax.linalg.lu_pivots_to_permutation(p, size),
    "lax.linalg.lu_pivots_to_permutation({0}, {size})",
    "lax.linalg.lu_pivots_to_permutation(pivots, size): LU's row swaps as a permutation.",
)


def _key(data: Any, impl: str) -> Any:
    return jax.random.wrap_key_data(data, impl=impl)


prng_seed = _row(
    "prng_seed",
    lambda s, impl: jax.random.key_data(jax.random.key(s, impl=impl)),
    "jax.random.key_data(jax.random.key({0}, impl={impl}))",
    "The key data of jax.random.key(seed, impl=impl).",
)


prng_bits = _row(
    "prng_bits",
    lambda k, impl, shape, dtype: jax.random.bits(_key(k, impl), shape, dtype),
    "jax.random.bits(jax.random.wrap_key_data({0}, impl={impl}), {shape}, {dtype})",
    "jax.random.bits of the key with data `k`.",
)


prng_split = _row(
    "prng_split",
    lambda k, impl, shape: jax.random.key_data(jax.random.split(_key(k, impl), shape)),
    "jax.random.key_data(jax.random.split(jax.random.wrap_key_data({0}, impl={impl}), {shape}))",
    "The key data of jax.random.split.",
)


prng_fold_in = _row(
    "prng_fold_in",
    lambda k, m, impl: jax.random.key_data(jax.random.fold_in(_key(k, impl), m)),
    "jax.random.key_data(jax.random.fold_in(jax.random.wrap_key_data({0}, impl={impl}), {1}))",
    "The key data of jax.random.fold_in.",
)


threefry_2x32 = _row(
    "threefry2x32",
    lambda k1, k2, x: jax.extend.random.threefry_2x32((k1, k2), x),
    "jax.extend.random.threefry_2x32(({0}, {1}), {2})",
    "The Threefry-2x32 hash of the uint32 array x under the key (k1, k2).",
)


def _callback_infer(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    return [(tuple(a.shape), np.dtype(a.dtype)) for a in attrs["result_avals"]]


def _callback_lower(em: Any, op: Op) -> None:
    """`jax.pure_callback(callback, result shapes, *args, vmap_method=...)`: the Python
    callback and the shapes are constants of the program."""
    callback = op.attrs["callback"]
    em.consts.append(lambda *xs: tuple(callback(*xs)))
    em.consts.append(
        tuple(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in op.attrs["result_avals"])
    )
    n = len(em.consts)
    args = "".join(f", {em.name(v)}" for v in op.inputs)
    kw = "".join(f", {k}={v!r}" for k, v in op.attrs["options"])
    em.assign(
        op.outputs, f"jax.pure_callback(_consts[{n - 2}], _consts[{n - 1}]{args}{kw})", unpack=True
    )


def pure_callback(
    callback: Callable[..., Any],
    result_avals: Sequence[Any],
    options: tuple[tuple[str, Any], ...],
    args: Sequence[Variable],
) -> list[Variable]:
    """jax.pure_callback's primitive: `callback` (flat arrays in, a sequence of arrays out)
    on `args`; `options` are its keyword arguments (vmap_method, or vectorized in older
    JAX). No gradient (JAX has none)."""
    return emit(
        "pure_callback",
        list(args),
        {"callback": callback, "result_avals": tuple(result_avals), "options": tuple(options)},
    )


register(
    "pure_callback", _callback_infer, None, _refused("pure_callback"), lower_stmt=_callback_lower
)
