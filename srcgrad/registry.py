"""The op registry: one row per op (shape/dtype rule, grad maker, JAX lowering)."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

if TYPE_CHECKING:
    from .ir import Op, Variable

OutType = tuple[tuple[int, ...], np.dtype]
InferFn = Callable[[Sequence["Variable"], dict[str, Any]], list[OutType]]
GradFn = Callable[["Op", list["Variable | None"], list[bool]], list["Variable | None"]]

#: Grad marker for ops that are piecewise constant: their gradient is zero everywhere.
ZERO = "zero"

#: `OpDef.remat` values: when a grad block may compute an op again instead of recording its
#: result per loop iteration. A view or read costs what loading a record costs; index
#: arithmetic is cheap only over integers and bools (its float twin is real work).
REMAT_VIEW = "view"
REMAT_INDEX = "index"


@dataclass(frozen=True)
class OpDef:
    """One registry row.

    `lower` is a format template over the argument names (`{0}`, `{1}`, …) and the attrs
    rendered as Python literals (`{axis}`), or a function `(args, attrs) -> str`. Control-flow
    ops lower through `lower_stmt(emitter, op)` instead. `grad` maps an op and the gradients
    of its outputs to the gradients of its inputs by emitting ordinary ops; ZERO marks a
    zero gradient and None an op that cannot be differentiated. `remat` says when a gradient
    recomputes the op rather than records it (REMAT_VIEW, REMAT_INDEX; None: never unless
    it has no inputs).
    """

    name: str
    infer: InferFn
    lower: str | Callable[[list[str], dict[str, Any]], str] | None
    grad: GradFn | str | None
    lower_stmt: Callable[[Any, "Op"], None] | None = None
    remat: str | None = None


REGISTRY: dict[str, OpDef] = {}


def register(name: str, infer: InferFn, lower: Any = None, grad: GradFn | str | None = None,
             lower_stmt: Callable[[Any, "Op"], None] | None = None) -> OpDef:
    """Add a row to the registry."""
    if name in REGISTRY:
        raise ValueError(f"op {name!r} is registered twice")
    row = OpDef(name, infer, lower, grad, lower_stmt)
    REGISTRY[name] = row
    return row


def grad_maker(name: str) -> Callable[[GradFn], GradFn]:
    """Decorator that sets the grad maker of an already registered op."""
    def deco(fn: GradFn) -> GradFn:
        REGISTRY[name] = replace(REGISTRY[name], grad=fn)
        return fn
    return deco


def set_remat(kind: str, *names: str) -> None:
    """Mark already registered ops as cheap to recompute (`kind`: REMAT_VIEW or REMAT_INDEX)."""
    for name in names:
        REGISTRY[name] = replace(REGISTRY[name], remat=kind)
