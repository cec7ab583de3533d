"""Tier 2, gradients: every differentiable op's srcgrad gradient equals jax.grad's.

One table of op cases (the strategies come from test_ops.py). For each case hypothesis draws
static parameters, shapes and float32-representable values; for every float dtype variant,
`sg.grad` of `sum(op(*args) * cotangent)` (a fixed random cotangent) with respect to every float
argument must match `jax.grad` of the jax.numpy equivalent evaluated in float64, within float32
or float64 tolerance, and have the argument's dtype and shape. Values sit in each op's smooth
domain; ties are drawn on purpose where jax defines them (maximum/minimum split 0.5/0.5,
max/min reductions average). Then `check_grads` compares with float64 finite differences (and
jax.grad) on a sample per op, and to second order for a representative subset.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from jax import lax

import srcgrad as sg
from srcgrad.ops import shape as shape_ops
from srcgrad.testing import check_grads
from support.util import sliced
from test_ops import (
    ARRAY_INDEXERS,
    F32,
    F64,
    FLOATS,
    GRID,
    I32,
    I64,
    POS,
    SCALAR_INDEXERS,
    SIDE,
    Dom,
    Draw,
    R,
    along_axis,
    apply_operator,
    basic_index_args,
    broadcast_args,
    conv_args,
    conv_ours,
    conv_ref,
    dot_args,
    dus_ours,
    dus_ref,
    dynamic_index_args,
    dynamic_slice_args,
    dynamic_slice_ours,
    linalg_cases,
    dynamic_slice_ref,
    einsum_args,
    lax_pad,
    lax_pad_args,
    lax_slice_args,
    rev_args,
    scatter_add_args,
    scatter_add_ref,
    stat_args,
    swapaxes_args,
    elementwise,
    examples,
    expand_args,
    getitem,
    join_args,
    key,
    matmul_args,
    one_shape,
    pool_args,
    pool_ref,
    reduction,
    reshape_args,
    squeeze_args,
    take_args,
    traced_fill_args,
    traced_index_args,
    transpose_args,
    values,
    where_args,
)
from test_ops import (
    C_FORMS,
    CONCAT_FORMS,
    array_args,
    array_ours,
    array_ref,
    average_args,
    average_via,
    concat_args,
    diagonal_args,
    linspace_args,
    linspace_via,
    tri_args,
)

AWAY = Dom(away=0.25)
DISTINCT = Dom(distinct=True)  # for max_pool, whose ties jax breaks (select_and_scatter)
MIXED = FLOATS + ((F32, F64),)


@dataclass(frozen=True, eq=False)
class GradCase:
    """A differentiable op: its draw, the dtypes of its float arguments and FD domains."""

    name: str
    ours: Callable[..., Any]
    ref: Callable[..., Any]
    draw: Draw
    draw_dts: tuple[np.dtype, ...] = (F32,)
    variants: tuple[tuple[np.dtype, ...], ...] = FLOATS
    fd_doms: tuple[Dom, ...] = (R,)  # generic values for finite differences, per float argument
    second_order: bool = False
    finite_differences: bool = True  # False where the function is not what jax differentiates

    def __str__(self) -> str:
        return self.name


def unary(name: str, ref: Callable, dom: Dom = R, second_order: bool = False) -> GradCase:
    return GradCase(
        name, getattr(sg, name), ref, elementwise(dom), fd_doms=(dom,), second_order=second_order
    )


def binary(name: str, dom_x: Dom = R, dom_y: Dom = R, second_order: bool = False) -> GradCase:
    return GradCase(
        name,
        getattr(sg, name),
        getattr(jnp, name),
        elementwise(dom_x, dom_y),
        variants=MIXED,
        fd_doms=(dom_x, dom_y),
        second_order=second_order,
    )


def reducer(
    name: str,
    ours: Callable,
    ref: Callable,
    dom: Dom = R,
    min_side: int = 0,
    second_order: bool = False,
) -> GradCase:
    return GradCase(
        name,
        lambda x, axis, keepdims: ours(x, axis, keepdims=keepdims),
        lambda x, axis, keepdims: ref(x, axis=axis, keepdims=keepdims),
        reduction(dom, min_side),
        second_order=second_order,
    )


def integer_pow_args(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
    """x ** k for a Python int k (srcgrad's integer_pow), negative k away from zero."""
    k = data.draw(st.integers(-2, 3))
    shape = data.draw(one_shape())
    return {"k": k}, [values(data, shape, dts[0], AWAY if k < 0 else R)]


ARITHMETIC_CONSTANTS = {
    "float": float,
    "int": int,
    "np.float32": np.float32,
    "np.float64": np.float64,
    "ndarray": lambda v: np.array([v, 1.5]),
}


def arithmetic_args(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
    """x OP other / other OP x with a traced or a Python / NumPy constant `other`."""
    op = data.draw(st.sampled_from(["+", "-", "*", "/", "**"]))
    kind = data.draw(st.sampled_from(["traced"] + sorted(ARITHMETIC_CONSTANTS)))
    dom = Dom(0.5, 2.0) if op in ("/", "**") else R
    shape = (2,) if kind == "ndarray" else data.draw(one_shape(max_dims=2))
    params = {"op": op, "kind": kind, "left": data.draw(st.booleans())}
    x = values(data, shape, dts[0], dom)
    if kind == "traced":
        other = data.draw(hnp.broadcastable_shapes(shape, min_side=0, max_side=SIDE))
        return params, [x, values(data, other, dts[0], dom)]
    const = ARITHMETIC_CONSTANTS[kind](data.draw(st.sampled_from([2.0, 1.5])))
    return {**params, "const": const}, [x]


def float_result(draw: Draw) -> Draw:
    """`draw` with its `dtype` parameter None: the result stays floating (differentiable)."""

    def drawn(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
        params, args = draw(data, dts)
        return {**params, "dtype": None}, args

    return drawn


def astype_args(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
    return {"dtype": data.draw(st.sampled_from([F32, F64]))}, elementwise(R)(data, dts)[1]


def like_args(data: st.DataObject, dts: tuple[np.dtype, ...]) -> tuple[dict, list]:
    return {"fill": data.draw(st.sampled_from([0.5, 2]))}, elementwise(R)(data, dts)[1]


CASES: list[GradCase] = [
    unary("negative", jnp.negative),
    unary("exp", jnp.exp, second_order=True),
    unary("log", jnp.log, POS, second_order=True),
    unary("log1p", jnp.log1p, Dom(-0.875, 3.0)),
    unary("expm1", jnp.expm1),
    unary("sqrt", jnp.sqrt, POS),
    unary("rsqrt", lax.rsqrt, POS),
    unary("tanh", jnp.tanh, second_order=True),
    unary("sin", jnp.sin),
    unary("cos", jnp.cos),
    unary("abs", jnp.abs),
    unary("sign", jnp.sign),
    unary("square", jnp.square),
    unary("reciprocal", jnp.reciprocal, AWAY),
    unary("sigmoid", jax.nn.sigmoid),
    unary("tan", jnp.tan, Dom(-1.0, 1.0), second_order=True),
    unary("sinh", jnp.sinh),
    unary("cosh", jnp.cosh, second_order=True),
    unary("arcsin", jnp.arcsin, Dom(-0.75, 0.75), second_order=True),
    unary("arccos", jnp.arccos, Dom(-0.75, 0.75)),
    unary("arctan", jnp.arctan, second_order=True),
    unary("arcsinh", jnp.arcsinh),
    unary("arccosh", jnp.arccosh, Dom(1.25, 3.0)),
    unary("arctanh", jnp.arctanh, Dom(-0.75, 0.75), second_order=True),
    unary("log2", jnp.log2, POS),
    unary("log10", jnp.log10, POS),
    unary("exp2", jnp.exp2, second_order=True),
    unary("cbrt", jnp.cbrt, AWAY, second_order=True),
    unary("deg2rad", jnp.deg2rad),
    unary("radians", jnp.radians),
    unary("rad2deg", jnp.rad2deg),
    unary("degrees", jnp.degrees),
    unary("absolute", jnp.absolute),
    unary("fabs", jnp.fabs, AWAY),
    unary("real", jnp.real),
    unary("conj", jnp.conj),
    GradCase("imag", lambda x: sg.imag(x) + x, lambda x: jnp.imag(x) + x, elementwise(R)),
    GradCase(
        "clip",
        lambda x: sg.clip(x, -0.75, 0.75),
        lambda x: jnp.clip(x, -0.75, 0.75),
        elementwise(GRID),
        fd_doms=(GRID,),
    ),  # the bounds lie between grid points
    unary("relu", jax.nn.relu),
    unary("softplus", jax.nn.softplus),
    unary("erf", jax.scipy.special.erf),
    binary("add"),
    binary("subtract"),
    binary("multiply"),
    binary("divide", R, AWAY),
    binary("power", POS, Dom(-2.0, 2.0), second_order=True),
    binary("remainder", Dom(2.25, 2.75), Dom(1.5, 2.0)),
    binary("mod", Dom(2.25, 2.75), Dom(1.5, 2.0)),
    binary("true_divide", R, AWAY),
    binary("arctan2", AWAY, AWAY, second_order=True),
    binary("hypot", AWAY, AWAY, second_order=True),
    binary("logaddexp", second_order=True),
    binary("logaddexp2"),
    binary("heaviside", GRID, R),  # x / y in [1.125, 1.84]: smooth
    binary("maximum", GRID, GRID),
    binary("minimum", GRID, GRID),
    GradCase(
        "integer_pow", lambda x, k: x**k, lambda x, k: x**k, integer_pow_args, fd_doms=(AWAY,)
    ),
    GradCase(
        "operators + - * / **",
        apply_operator,
        apply_operator,
        arithmetic_args,
        fd_doms=(Dom(0.5, 2.0),),
    ),
    GradCase("where", sg.where, jnp.where, where_args(), variants=MIXED, second_order=True),
    GradCase(
        "astype",
        lambda x, dtype: sg.astype(x, dtype),
        lambda x, dtype: x.astype(dtype),
        astype_args,
        finite_differences=False,
    ),
    GradCase(
        "stop_gradient",
        lambda x: sg.stop_gradient(x) * x,
        lambda x: lax.stop_gradient(x) * x,
        elementwise(R),
        finite_differences=False,
    ),
    GradCase(
        "full_like",
        lambda x, fill: sg.full_like(x, fill) * x,
        lambda x, fill: jnp.full_like(x, fill) * x,
        like_args,
    ),
    GradCase(
        "full traced fill",
        lambda v, shape: sg.full(shape, v),
        lambda v, shape: jnp.full(shape, v),
        broadcast_args(),
    ),
    GradCase(
        "full_like traced fill", sg.full_like, jnp.full_like, traced_fill_args(True), variants=MIXED
    ),
    reducer("sum", sg.sum, jnp.sum),
    reducer("mean", sg.mean, jnp.mean),
    reducer("max", sg.max, jnp.max, GRID, min_side=1),
    reducer("min", sg.min, jnp.min, GRID, min_side=1),
    reducer("prod", sg.prod, jnp.prod, GRID),
    reducer("logsumexp", sg.logsumexp, jax.nn.logsumexp, second_order=True),
    GradCase("matmul", sg.matmul, jnp.matmul, matmul_args(), variants=MIXED, second_order=True),
    GradCase("dot", sg.dot, jnp.dot, dot_args()),
    GradCase(
        "einsum",
        lambda *xs, spec: sg.einsum(spec, *xs),
        lambda *xs, spec: jnp.einsum(spec, *xs),
        einsum_args(),
    ),
    GradCase("conv", conv_ours, conv_ref, conv_args(), second_order=True),
    GradCase("max_pool", sg.max_pool, pool_ref("max"), pool_args(DISTINCT)),
    GradCase("avg_pool", sg.avg_pool, pool_ref("avg"), pool_args()),
    GradCase("reshape", sg.reshape, jnp.reshape, reshape_args()),
    GradCase("transpose", sg.transpose, jnp.transpose, transpose_args()),
    GradCase("broadcast_to", sg.broadcast_to, jnp.broadcast_to, broadcast_args()),
    GradCase("swapaxes", sg.swapaxes, jnp.swapaxes, swapaxes_args()),
    GradCase("expand_dims", sg.expand_dims, jnp.expand_dims, expand_args()),
    GradCase("squeeze", sg.squeeze, jnp.squeeze, squeeze_args()),
    GradCase(
        "concatenate",
        lambda *xs, axis: sg.concatenate(xs, axis),
        lambda *xs, axis: jnp.concatenate(xs, axis),
        join_args(False),
        variants=MIXED,
    ),
    GradCase(
        "stack",
        lambda *xs, axis: sg.stack(xs, axis),
        lambda *xs, axis: jnp.stack(xs, axis),
        join_args(True),
    ),
    GradCase("getitem basic", getitem, getitem, basic_index_args()),
    GradCase(
        "getitem traced scalar",
        lambda x, i, how: SCALAR_INDEXERS[how](x, i),
        lambda x, i, how: SCALAR_INDEXERS[how](x, i),
        traced_index_args(SCALAR_INDEXERS, False),
        (F32, I32),
    ),
    GradCase(
        "getitem integer array",
        lambda x, i, how: ARRAY_INDEXERS[how](x, i),
        lambda x, i, how: ARRAY_INDEXERS[how](x, i),
        traced_index_args(ARRAY_INDEXERS, True),
        (F32, I64),
    ),
    GradCase(
        "dynamic_slice",
        dynamic_slice_ours,
        dynamic_slice_ref,
        dynamic_slice_args(False),
        (F32, I32),
    ),
    GradCase("dynamic_update_slice", dus_ours, dus_ref, dynamic_slice_args(True), (F32, I32)),
    GradCase("take", sg.take, jnp.take, take_args(), (F32, I32), second_order=True),
    GradCase(
        "slice",
        lambda x, start, limit, strides: sg.slice(x, start, limit, strides),
        lambda x, start, limit, strides: lax.slice(x, start, limit, strides),
        lax_slice_args(),
    ),
    GradCase("rev", lambda x, axes: sg.rev(x, axes), lambda x, axes: lax.rev(x, axes), rev_args()),
    GradCase(
        "pad lax config (the internal lax_pad)",
        shape_ops.lax_pad,
        lax_pad,
        lax_pad_args(),
        second_order=True,
    ),
    GradCase(
        "dynamic_index",
        sg.dynamic_index,
        lambda x, i, axis: lax.dynamic_index_in_dim(x, i, axis, keepdims=False),
        dynamic_index_args(False),
        (F32, I32),
    ),
    GradCase(
        "dynamic_update_index",
        sg.dynamic_update_index,
        lax.dynamic_update_index_in_dim,
        dynamic_index_args(True),
        (F32, I32),
    ),
    GradCase("scatter_add", sg.scatter_add, scatter_add_ref, scatter_add_args(), (F32, I32)),
    GradCase("softmax", sg.softmax, jax.nn.softmax, along_axis(), second_order=True),
    unary("silu", jax.nn.silu, second_order=True),
    unary("log_sigmoid", jax.nn.log_sigmoid, second_order=True),
    unary("relu6", jax.nn.relu6, Dom(-3.0, 8.0, away=0.25)),
    unary("leaky_relu", jax.nn.leaky_relu, AWAY),
    unary("elu", jax.nn.elu, AWAY, second_order=True),
    unary("gelu", jax.nn.gelu, second_order=True),
    GradCase(
        "gelu exact",
        lambda x: sg.gelu(x, approximate=False),
        lambda x: jax.nn.gelu(x, approximate=False),
        elementwise(R),
        second_order=True,
    ),
    GradCase("var", sg.var, jnp.var, stat_args(), second_order=True),
    # std has no derivative where all values are equal (sqrt at 0): jax gives NaN there
    GradCase("std", sg.std, jnp.std, stat_args(DISTINCT), second_order=True),
    GradCase("log_softmax", sg.log_softmax, jax.nn.log_softmax, along_axis()),
    binary("fmod", Dom(2.25, 2.75), Dom(1.5, 2.0)),
    unary("sinc", jnp.sinc, GRID, second_order=True),  # the grid holds 0: sinc's derivatives there
    binary("fmax", GRID, GRID),
    binary("fmin", GRID, GRID),
    GradCase("nan_to_num", sg.nan_to_num, jnp.nan_to_num, elementwise(R)),
    GradCase(
        "array", array_ours, array_ref, float_result(array_args), variants=MIXED, second_order=True
    ),
    GradCase(
        "asarray",
        lambda a, b, form, dtype: sg.asarray([a, b]),
        lambda a, b, form, dtype: jnp.asarray([a, b]),
        float_result(array_args),
    ),
    GradCase("tril", sg.tril, jnp.tril, tri_args(), second_order=True),
    GradCase("triu", sg.triu, jnp.triu, tri_args()),
    GradCase("diag", sg.diag, jnp.diag, tri_args(1), second_order=True),
    GradCase("diagonal", sg.diagonal, jnp.diagonal, diagonal_args()),
    GradCase(
        "linspace",
        linspace_via(sg),
        linspace_via(jnp),
        float_result(linspace_args),
        variants=MIXED,
        second_order=True,
    ),
    GradCase(
        "r_",
        lambda a, b, form: CONCAT_FORMS[form](sg.r_, a, b),
        lambda a, b, form: CONCAT_FORMS[form](jnp.r_, a, b),
        concat_args(CONCAT_FORMS),
        variants=MIXED,
    ),
    GradCase(
        "c_",
        lambda a, b, form: C_FORMS[form](sg.c_, a, b),
        lambda a, b, form: C_FORMS[form](jnp.c_, a, b),
        concat_args(C_FORMS),
    ),
    GradCase(
        "average",
        average_via(sg),
        average_via(jnp),
        average_args(),
        variants=MIXED,
        second_order=True,
    ),
    # Conditioned inputs (made in the draw): finite differences and second order are in
    # test_linalg.py; norm and trace take any values.
    *linalg_cases(
        lambda name, ours, ref, draw: GradCase(
            name,
            ours,
            ref,
            draw,
            draw_dts=(F64,),
            variants=((F64,),),
            finite_differences=name in ("linalg.norm", "linalg.trace"),
            second_order=name == "linalg.trace",
        ),
        True,
    ),
]


# ---------------------------------------------------------------- running a case


def with_floats(args: list[np.ndarray], floats: list[np.ndarray]) -> list[np.ndarray]:
    """`args` with its float arguments replaced, in order, by `floats`."""
    it = iter(floats)
    return [next(it) if a.dtype.kind == "f" else a for a in args]


def cast(args: list[np.ndarray], variant: tuple[np.dtype, ...]) -> list[np.ndarray]:
    """The float arguments cast to the variant's dtypes (cycled)."""
    floats = [a for a in args if a.dtype.kind == "f"]
    return with_floats(args, [a.astype(variant[i % len(variant)]) for i, a in enumerate(floats)])


def cotangent(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(shape).astype(dtype)


_GRADS: dict[tuple, tuple[sg.Transformed, Callable[..., Any]]] = {}


def grads(
    case: GradCase, params: dict[str, Any], argnums: tuple[int, ...]
) -> tuple[sg.Transformed, Callable[..., Any]]:
    """sg.grad and jitted jax.grad of `sum(op(*args) * ct)`, shared across examples."""
    k = key(case, params) + (argnums,)
    if k not in _GRADS:
        _GRADS[k] = (
            sg.grad(lambda ct, *xs: sg.sum(case.ours(*xs, **params) * ct), argnums),
            jax.jit(jax.grad(lambda ct, *xs: jnp.sum(case.ref(*xs, **params) * ct), argnums)),
        )
    return _GRADS[k]


@pytest.mark.parametrize("case", sliced(CASES, 2), ids=str)
@examples(6)
@given(data=st.data())
def test_grad_matches_jax(case: GradCase, data: st.DataObject) -> None:
    """sg.grad equals jax.grad (in float64) for every float dtype variant of the case."""
    check_against_jax(case, data)


def check_against_jax(case: GradCase, data: st.DataObject) -> None:
    """sg.grad of a drawn sample equals jax.grad's (float64), for each float dtype variant."""
    params, drawn = case.draw(data, case.draw_dts)
    argnums = tuple(i + 1 for i, a in enumerate(drawn) if a.dtype.kind == "f")
    ours, ref = grads(case, params, argnums)
    for variant in case.variants:
        args = cast(drawn, variant)
        out = jax.eval_shape(lambda *xs: case.ref(*xs, **params), *args)
        ct = cotangent(out.shape, out.dtype)
        got = ours(ct, *args)
        want = ref(ct.astype(F64), *cast(args, (F64,)))
        tol = 1e-5 if F32 in (out.dtype, *variant) else 1e-10
        for i, g, w in zip(argnums, got, want):
            what = f"{case.name} {params}: d/d arg {i - 1} on {[a.dtype.name for a in args]}"
            g = np.asarray(g)
            assert (g.dtype, g.shape) == (args[i - 1].dtype, args[i - 1].shape), what
            np.testing.assert_allclose(g, np.asarray(w), rtol=tol, atol=tol, err_msg=what)


def generic(args: list[np.ndarray], doms: tuple[Dom, ...]) -> list[np.ndarray]:
    """Fresh float64 values in the domains, almost surely without ties or kinks."""
    rng = np.random.default_rng(1)
    out = []
    for i, a in enumerate(a for a in args if a.dtype.kind == "f"):
        d = doms[i % len(doms)]
        lo = max(d.lo, d.away)
        v = rng.uniform(lo, d.hi, a.shape)
        out.append(v * rng.choice([-1.0, 1.0], a.shape) if d.away else v)
    return out


def check(case: GradCase, data: st.DataObject, order: int) -> None:
    """check_grads on a drawn non-empty sample, at generic float64 values; ints stay fixed."""
    params, drawn = case.draw(data, case.draw_dts)
    assume(all(a.size for a in drawn) and any(a.ndim for a in drawn))
    floats = generic(drawn, case.fd_doms)

    def fun(*xs: Any) -> Any:
        return case.ours(*with_floats(drawn, list(xs)), **params)

    def jax_fun(*xs: Any) -> Any:
        return case.ref(*with_floats(drawn, list(xs)), **params)

    check_grads(fun, floats, order=order, jax_fun=jax.jit(jax_fun), directions=1)


@pytest.mark.parametrize("case", sliced([c for c in CASES if c.finite_differences], 2), ids=str)
@examples(15, least=1)
@given(data=st.data())
def test_check_grads(case: GradCase, data: st.DataObject) -> None:
    """Float64 finite differences (and jax.grad) on a sample shape of the op."""
    check(case, data, order=1)


@pytest.mark.parametrize("case", sliced([c for c in CASES if c.second_order], 2), ids=str)
@examples(15, least=1)
@given(data=st.data())
def test_check_grads_second_order(case: GradCase, data: st.DataObject) -> None:
    """Gradients of gradients against finite differences and jax."""
    check(case, data, order=2)


def test_relu6_kinks_follow_jax() -> None:
    """jax.nn.relu6's derivative is 0 at both kinks (its custom rule), not max/min's 0.5:
    sg.nn.relu6's gradient and tangent agree there, and with NaN and infinities."""
    x = np.array([-np.inf, -1.0, 0.0, 3.0, 6.0, 7.0, np.inf, np.nan])
    ones = np.ones_like(x)
    np.testing.assert_array_equal(sg.nn.relu6(x), jax.nn.relu6(x))
    np.testing.assert_array_equal(
        sg.grad(lambda v: sg.sum(sg.nn.relu6(v)))(x),
        jax.grad(lambda v: jnp.sum(jax.nn.relu6(v)))(x),
    )
    np.testing.assert_array_equal(
        sg.jvp(sg.nn.relu6, (x,), (ones,))[1], jax.jvp(jax.nn.relu6, (x,), (ones,))[1]
    )
