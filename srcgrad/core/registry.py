"""The op registry: one row per op (shape/dtype rule, grad maker, JAX lowering).

Rows are declared with `srcgrad.ops.declare.defop`, which also makes the op's user function;
`register` is the bare form for ops whose user function is not one emit (control flow).

Layer L2 (core): see docs/design.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from ..ir.analysis import EFFECTS, has_effect

if TYPE_CHECKING:
    from ..ir.program import Op, Variable

OutType = tuple[tuple[int, ...], np.dtype]
InferFn = Callable[[Sequence["Variable"], dict[str, Any]], list[OutType]]
GradFn = Callable[["Op", list["Variable | None"], list[bool]], Iterable["Variable | None"]]
#: The gradient of one input from the gradient of the op's (only) output.
InputGrad = Callable[["Op", "Variable"], "Variable"]
GradSpec = GradFn | Sequence["InputGrad | None"] | str | None

#: Grad marker for ops that are piecewise constant: their gradient is zero everywhere.
ZERO = "zero"

#: `OpDef.remat` values: when a grad block may compute an op again instead of recording its
#: result per loop iteration. A view or read costs what loading a record costs; index
#: arithmetic is cheap only over integers and bools (its float twin is real work).
REMAT_VIEW = "view"
REMAT_INDEX = "index"

#: `OpDef.jvp` kinds, whose rules transforms/forward.py implements: a linear op (in its float
#: inputs together) applied to the tangents; a multilinear op, one term per operand.
LINEAR = "linear"
MULTILINEAR = "multilinear"

_F32_F64 = frozenset({np.dtype("float32"), np.dtype("float64")})


def f32_f64(op: "Op") -> bool:
    """A fast form's condition: every input is float32 or float64 (where jax.numpy might
    compute otherwise: it upcasts float16 sums, for one)."""
    return all(v.dtype in _F32_F64 for v in op.inputs)


def always(op: "Op") -> bool:
    """A fast form's condition: it holds for every input srcgrad's shape rule accepts."""
    return True


@dataclass(frozen=True)
class OpDef:
    """One registry row.

    `lower` is a format template over the argument names (`{0}`, `{1}`, …) and the attrs
    rendered as Python literals (`{axis}`), or a function `(args, attrs) -> str`. Control-flow
    ops lower through `lower_stmt(emitter, op)` instead. `grad(op, out_grads, need)` yields
    (or returns) one gradient per input by emitting ordinary ops, None where `need` is False;
    the backward walk sums each down to its input's shape (unbroadcasting) and drops the
    ones no input needs. ZERO marks a zero gradient and None an op that cannot be
    differentiated. `public` names the user function (`sg.<public>`), None for internal ops.
    `remat` says when a
    gradient recomputes the op rather than records it (REMAT_VIEW, REMAT_INDEX; None: never
    unless it has no inputs). `jvp` is the forward-mode rule: LINEAR, MULTILINEAR or a
    function `(op, input tangents, tangents) -> output tangents` (None: forward mode
    differentiates the grad maker's linearization). `fast` is a second lowering
    `(template, when)` used where `when(op)` holds: the `lax` call jax.numpy would make,
    which JAX traces in about half the time.
    """

    name: str
    infer: InferFn
    lower: str | Callable[[list[str], dict[str, Any]], str] | None
    grad: GradFn | str | None
    lower_stmt: Callable[[Any, "Op"], None] | None = None
    public: str | None = None
    remat: str | None = None
    jvp: Any = None
    fast: tuple[str, Callable[["Op"], bool]] | None = None
    effect: bool = False

    @property
    def differentiable(self) -> bool:
        """False for ops with no gradient and for piecewise-constant ones (gradient zero)."""
        return self.grad is not None and self.grad is not ZERO


REGISTRY: dict[str, OpDef] = {}


def per_input(fns: Sequence[InputGrad | None]) -> GradFn:
    """A grad maker from one function per input, each called only where its input needs it."""

    def grad(op: "Op", g: list, need: list) -> Iterator["Variable | None"]:
        for fn, n in zip(fns, need):
            yield fn(op, g[0]) if n and fn is not None else None

    return grad


def register(
    name: str,
    infer: InferFn,
    lower: Any = None,
    grad: GradSpec = None,
    lower_stmt: Callable[[Any, "Op"], None] | None = None,
    public: str | None = None,
    *,
    remat: str | None = None,
    jvp: Any = None,
    fast: tuple[str, Callable[["Op"], bool]] | None = None,
    effect: bool = False,
) -> OpDef:
    """Add a row to the registry; `grad` may be a tuple of per-input gradient functions.
    `effect`: the op has a side effect (analysis.EFFECTS: never removed, hoisted, merged or
    recomputed)."""
    if name in REGISTRY:
        raise ValueError(f"op {name!r} is registered twice")
    if isinstance(grad, (tuple, list)):
        grad = per_input(grad)
    row = OpDef(name, infer, lower, grad, lower_stmt, public, remat, jvp, fast, effect)
    REGISTRY[name] = row
    if effect:
        EFFECTS.add(name)
    return row


def recomputable(op: Op) -> bool:
    """A constant, a view (REMAT_VIEW), or index arithmetic over integers (REMAT_INDEX): an
    op a gradient computes again rather than records."""
    if op.sub_blocks() or has_effect(op):
        return False
    remat = REGISTRY[op.type].remat
    if not op.inputs or remat == REMAT_VIEW:
        return True
    return remat == REMAT_INDEX and all(o.dtype.kind in "biu" for o in op.outputs)
