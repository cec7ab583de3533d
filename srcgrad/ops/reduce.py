"""Reductions with `axis`/`keepdims`: sum, mean, max, min, prod, logsumexp, argmax, argmin.

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

from typing import Any, Sequence

import jax.numpy as jnp
import numpy as np
from jax import lax

from ..base import dtypes
from ..core.builder import as_var
from ..base.errors import ShapeError
from ..ir.program import Op, Variable
from ..core.registry import LINEAR, GradSpec, OutType, f32_f64
from .rules import jax_dtype, norm_axes, norm_axis, require_real
from ..core.declare import defop, named, public
from .creation import full
from .elementwise import astype, conj, divide, equal, exp, isnan, multiply, real, where
from .grad_helpers import expand_reduced, reduced_shape

Axis = int | Sequence[int] | None


def _reduce_rule(kind: str) -> Any:
    def infer(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
        x = inputs[0]
        axes = norm_axes(attrs["axes"], x.ndim)
        shape = reduced_shape(x.shape, axes, attrs["keepdims"])
        if kind == "index":
            require_real(x, what="argmax/argmin")  # (JAX refuses them too)
            return [(shape, dtypes.default_int())]
        if kind == "sum" and not dtypes.is_inexact(x.dtype):
            return [(shape, jax_dtype(jnp.sum, x.dtype))]
        if kind == "float":
            return [(shape, dtypes.to_inexact(x.dtype))]
        return [(shape, x.dtype)]

    return infer


def refuse_out(name: str, out: Any) -> None:
    """NumPy's `out=`: refused (JAX arrays are immutable), naming the function `name`."""
    if out is not None:
        raise ShapeError(
            "out= is not supported (JAX arrays are immutable); use the result", op=name
        )


def reduction(
    name: str, public_name: str, lower: str, grad: GradSpec, kind: str, **knobs: Any
) -> Any:
    """Declare a reduction over `axis` (None, an int or a tuple) with `keepdims`.

    NumPy's `dtype=` casts the input first and `out=` must be None, so numpy.sum(traced) works.
    """

    def front(
        x: Any,
        axis: Axis = None,
        dtype: Any = None,
        out: None = None,
        keepdims: bool = False,
        initial: Any = None,
        where: Any = None,
    ) -> Variable | tuple[list[Variable], dict]:
        refuse_out(public_name, out)
        x = as_var(x)
        if initial is not None or where is not None:
            return _with_initial(op, public_name, x, axis, dtype, keepdims, initial, where)
        if dtype is not None:
            x = astype(x, dtype)
            if kind == "sum" and jax_dtype(jnp.sum, x.dtype) != x.dtype:
                # an integer narrower than the default (int32 under x64) sums to the default
                # width: `dtype=` asks for the sum in its own (the same value, wrapped)
                return astype(op(x, axis, keepdims=keepdims), x.dtype)
        axes = norm_axes(axis, x.ndim) if x.ndim or axis is None else norm_axes(axis, 0)
        return [x], {"axes": axes, "keepdims": bool(keepdims)}

    named(
        front,
        public_name,
        f"jnp.{public_name}(x, axis=None, dtype=None, out=None, "
        "keepdims=False, initial=None, where=None).",
    )
    op = defop(
        name, _reduce_rule(kind), lower + "({0}, axis={axes}, keepdims={keepdims})", grad, **knobs
    )(front)
    return op


#: The identity each reduction starts from where `where` is False.
_IDENTITY = {"sum": 0, "prod": 1, "max": -np.inf, "min": np.inf}


def _with_initial(
    op: Any,
    name: str,
    x: Variable,
    axis: Axis,
    dtype: Any,
    keepdims: bool,
    initial: Any,
    where_: Any,
) -> Variable:
    """jnp's `initial=` (folded in as one more element) and `where=` (masked elements take
    the identity; a max/min over nothing needs `initial`)."""
    if name not in _IDENTITY:
        raise ShapeError(f"{name} takes no initial= or where=", op=name)
    if dtype is not None:
        x = astype(x, dtype)
    if where_ is not None:
        ident = _IDENTITY[name]
        if name in ("max", "min"):
            if initial is None:
                raise ShapeError(
                    f"{name} with where= needs initial= (a reduction over no "
                    "elements has no value)",
                    op=name,
                )
            if not dtypes.is_inexact(x.dtype):
                info = np.iinfo(x.dtype) if x.dtype.kind in "iu" else None
                ident = (info.min if name == "max" else info.max) if info else name == "min"
        x = where(as_var(where_), x, full((), ident, x.dtype))
    out = op(x, axis, keepdims=keepdims)
    if initial is None:
        return out
    init = astype(as_var(initial, like=out), out.dtype)
    from .elementwise import add, maximum, minimum, multiply as mul

    combine = {"sum": add, "prod": mul, "max": maximum, "min": minimum}[name]
    return combine(out, init)


def _averaged(
    name: str, x: Any, axis: Axis, dtype: Any, out: None
) -> tuple[Variable, tuple[int, ...], int]:
    """`x` in the floating dtype an average is taken in, the reduced axes and their size."""
    refuse_out(name, out)
    x = as_var(x)
    if dtype is not None:
        x = astype(x, dtype)
    if not dtypes.is_inexact(x.dtype):
        x = astype(x, jax_dtype(jnp.mean, x.dtype))
    axes = norm_axes(axis, x.ndim)
    return x, axes, int(np.prod([x.shape[a] for a in axes], dtype=np.int64))


@public
def mean(
    x: Any, axis: Axis = None, dtype: Any = None, out: None = None, keepdims: bool = False
) -> Variable:
    """jnp.mean(x, axis=None, dtype=None, out=None, keepdims=False)."""
    x, axes, count = _averaged("mean", x, axis, dtype, out)
    total = sum(x, axes, keepdims=keepdims)
    return divide(total, float(count))


def _arg(name: str, kind: str) -> Any:
    """Declare argmax/argmin: the index of the extreme along one axis (None: flattened)."""

    def front(
        x: Any, axis: int | None = None, out: None = None, keepdims: bool = False
    ) -> Variable | tuple[list[Variable], dict]:
        refuse_out(name, out)
        x = as_var(x)
        if axis is None:
            from .shape import reshape

            flat = user(reshape(x, (-1,)), 0)
            return reshape(flat, (1,) * x.ndim) if keepdims else flat
        ax = norm_axis(axis, x.ndim)
        return [x], {"axes": (ax,), "axis": ax, "keepdims": bool(keepdims)}

    named(front, name, f"jnp.{name}(x, axis=None, out=None, keepdims=False).")
    user = defop(
        name, _reduce_rule(kind), f"jnp.{name}({{0}}, axis={{axis}}, keepdims={{keepdims}})", None
    )(front)
    return user


def _g_chooser(op: Op, g: Variable) -> Variable:
    """The elements equal to the extreme share its gradient equally; where the extreme is NaN
    every element of the slice takes NaN (jax.grad's g / 0 * 0), written out so that XLA's
    rewrite of `mask / count` into a select cannot turn it into 0."""
    x = op.inputs[0]
    out_b = expand_reduced(op.outputs[0], op)
    mask = astype(equal(x, out_b), x.dtype)
    count = sum(mask, op.attrs["axes"], keepdims=True)
    share = where(isnan(out_b), np.nan, divide(mask, count))
    return multiply(expand_reduced(g, op), share)


def _g_prod(op: Op, g: Variable) -> Variable:
    """Each element's derivative is the product of the others: the exclusive running products
    from both ends, multiplied. No division, so it is exact where the slice holds zeros,
    infinities or NaN (0 * inf is NaN only where jax.grad's is)."""
    from .shape import reshape, transpose
    from .cumulative import shift, lax_cumprod

    x = op.inputs[0]
    axes = op.attrs["axes"]
    kept = [a for a in range(x.ndim) if a not in axes]
    perm = kept + list(axes)
    moved = transpose(x, perm)
    n = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    flat = reshape(moved, moved.shape[: len(kept)] + (n,))
    last = flat.ndim - 1
    before = shift(lax_cumprod(flat, last), last, 1, 1.0)
    after = shift(lax_cumprod(flat, last, True), last, -1, 1.0)
    others = transpose(reshape(before * after, moved.shape), list(np.argsort(perm)))
    return multiply(expand_reduced(g, op), others)


def _g_logsumexp(op: Op, g: Variable) -> Variable:
    x = op.inputs[0]
    return multiply(expand_reduced(g, op), exp(x - expand_reduced(op.outputs[0], op)))


def _sum_fast(op: Op) -> bool:
    return not op.attrs["keepdims"] and f32_f64(op)


sum = reduction(
    "reduce_sum",
    "sum",
    "jnp.sum",
    (lambda op, g: expand_reduced(g, op),),
    "sum",
    jvp=LINEAR,  # lax.reduce_sum is not public in jax 0.4.30, the floor
    fast=("lax.reduce_sum({0}, {axes})", _sum_fast) if hasattr(lax, "reduce_sum") else None,
)
max = reduction("reduce_max", "max", "jnp.max", (_g_chooser,), "same")
min = reduction("reduce_min", "min", "jnp.min", (_g_chooser,), "same")
prod = reduction("reduce_prod", "prod", "jnp.prod", (_g_prod,), "sum")
logsumexp = reduction("logsumexp", "logsumexp", "jax.nn.logsumexp", (_g_logsumexp,), "float")
argmax = _arg("argmax", "index")
argmin = _arg("argmin", "index")


def correction_of(name: str, ddof: float, correction: float | None) -> float:
    """The number subtracted from the count: `correction` (the Array API's and PyTorch's
    name) or NumPy's `ddof`, not both."""
    if correction is None:
        return ddof
    if ddof != 0:
        raise ShapeError(
            f"ddof={ddof} and correction={correction} were both given; they are "
            "one setting (the number subtracted from the count): pass one",
            op=name,
        )
    return correction


@public
def var(
    x: Any,
    axis: Axis = None,
    dtype: Any = None,
    out: None = None,
    ddof: int = 0,
    keepdims: bool = False,
    *,
    correction: float | None = None,
) -> Variable:
    """jnp.var(x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, correction=None):
    the population variance by default (divided by N, as NumPy's and JAX's); `ddof=1` or
    `correction=1` gives the unbiased estimate (divided by N - 1), PyTorch's default."""
    ddof = correction_of("var", ddof, correction)
    x, axes, count = _averaged("var", x, axis, dtype, out)
    centered = x - mean(x, axes, keepdims=True)
    return divide(sum(squared_magnitude(centered), axes, keepdims=keepdims), float(count - ddof))


def squared_magnitude(v: Variable) -> Variable:
    """v * v; of a complex v, real(v * conj(v)) (jnp.var's: a real result)."""
    return real(v * conj(v)) if v.dtype.kind == "c" else v * v


@public
def std(
    x: Any,
    axis: Axis = None,
    dtype: Any = None,
    out: None = None,
    ddof: int = 0,
    keepdims: bool = False,
    *,
    correction: float | None = None,
) -> Variable:
    """jnp.std(x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, correction=None):
    the population standard deviation by default (NumPy's and JAX's); `ddof=1` or
    `correction=1` gives PyTorch's default, the square root of the unbiased variance."""
    from .elementwise import sqrt

    return sqrt(var(x, axis, dtype, out, correction_of("std", ddof, correction), keepdims))


@public
def average(
    a: Any, axis: Axis = None, weights: Any = None, returned: bool = False, keepdims: bool = False
) -> Any:
    """jnp.average: the mean, or with `weights` (of `a`'s shape, or 1-D along an int `axis`)
    sum(a * w) / sum(w); `returned` also gives the sum of the weights, shaped like the result."""
    from .shape import broadcast_to, reshape, transpose

    a = as_var(a)
    axes = norm_axes(axis, a.ndim)
    if weights is None:
        avg = mean(astype(a, jax_dtype(jnp.average, a.dtype)), axis, keepdims=keepdims)
        total = full((), int(np.prod([a.shape[d] for d in axes], dtype=np.int64)), avg.dtype)
    else:
        w = as_var(weights)
        dt = jax_dtype(lambda x, y: jnp.average(x, weights=y), a.dtype, w.dtype)
        a, w = astype(a, dt), astype(w, dt)
        if a.shape != w.shape:
            if axis is None:
                raise ShapeError(
                    "axis must be given when the shapes of a and weights differ", op="average"
                )
            given = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
            order = [norm_axis(int(d), a.ndim) for d in given]
            if w.shape != tuple(a.shape[d] for d in order):
                raise ShapeError(
                    f"weights of shape {w.shape} do not match a {a.type_str()} along axis {axis}",
                    op="average",
                )
            w = transpose(w, list(np.argsort(order)))
            w = reshape(w, tuple(d if i in axes else 1 for i, d in enumerate(a.shape)))
        total = sum(w if w.shape == a.shape else broadcast_to(w, a.shape), axes, keepdims=keepdims)
        avg = divide(sum(a * w, axes, keepdims=keepdims), total)
    if not returned:
        return avg
    return avg, (total if total.shape == avg.shape else broadcast_to(total, avg.shape))
