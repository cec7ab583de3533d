"""Ops and helpers that gradients are built from: fan-in sums, renames, zeros, and the
reshapes that undo broadcasting and reductions. They emit raw ops (no user functions), so
every forward-op module can import them without a cycle.

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..core.builder import emit1
from ..base.errors import ShapeError
from ..ir.analysis import producer
from ..ir.program import Op, Shape, Variable
from ..core.registry import LINEAR, ZERO, OutType
from .rules import broadcast_shapes, same
from ..core.declare import defop


def _sum_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    first = inputs[0]
    for v in inputs[1:]:
        if v.shape != first.shape or v.dtype != first.dtype:
            raise ShapeError("sum (fan-in) needs inputs of one shape and dtype")
    return [(first.shape, first.dtype)]


@defop("assign", same, "{0}", (lambda op, g: g,), export=False, jvp=LINEAR)
def assign(x: Variable, base: str | None = None) -> Variable:
    """A copy of `x` under a new name (Fluid's assign)."""
    return emit1("assign", [x], base=base)


@defop(
    "sum",
    _sum_rule,
    lambda args, attrs: " + ".join(args),
    lambda op, g, need: [g[0] if n else None for n in need],
    export=False,
    jvp=LINEAR,
)
def add_n(xs: Sequence[Variable], base: str | None = None) -> Variable:
    """Fluid's `sum` op: the elementwise sum of same-typed values (gradient fan-in)."""
    return emit1("sum", list(xs), base=base)


def is_known_zero(g: Variable) -> bool:
    """True for a gradient that is zeros by construction: made by `fill_zeros_like` (the
    backward walk's zeros for an output nothing differentiates) or by a `fill_constant` of 0.
    A grad maker drops a term of it, as JAX drops symbolic zeros, rather than computing it
    (inf * 0 is nan); a loop's grad maker leaves its carry out."""
    src = producer(g)
    return src is not None and (
        src.type == "fill_zeros_like"
        or (src.type == "fill_constant" and src.attrs.get("value") == 0)
    )


@defop("fill_zeros_like", same, "jnp.zeros_like({0})", ZERO, export=False)
def fill_zeros_like(x: Variable) -> Variable:
    """Fluid's fill_zeros_like: zeros of `x`'s shape and dtype."""
    return emit1("fill_zeros_like", [x], base=f"{x.name}@ZERO")


def unbroadcast(g: Variable, shape: Shape) -> Variable:
    """Sum `g` down to `shape`, undoing NumPy broadcasting."""
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, d in enumerate(shape) if d == 1 and g.shape[lead + i] != 1
    )
    out = emit1("reduce_sum", [g], {"axes": axes, "keepdims": False}) if axes else g
    return out if out.shape == shape else emit1("reshape", [out], {"shape": shape})


def broadcasts_to(shape: Shape, target: Shape) -> bool:
    """True if NumPy broadcasting takes `shape` to `target` (and they differ)."""
    if shape == target or len(shape) > len(target):
        return False
    try:
        return broadcast_shapes(shape, target) == target
    except ShapeError:
        return False


def reduced_shape(shape: Shape, axes: tuple[int, ...], keepdims: bool) -> Shape:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def expand_reduced(g: Variable, op: Op) -> Variable:
    """Broadcast the gradient of a reduction back to the reduced input's shape."""
    x = op.inputs[0]
    keep = reduced_shape(x.shape, op.attrs["axes"], True)
    if g.shape != keep:
        g = emit1("reshape", [g], {"shape": keep})
    return g if g.shape == x.shape else emit1("broadcast_to", [g], {"shape": x.shape})
