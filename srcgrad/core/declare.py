"""Declaring an op: one `defop` makes its registry row, its user function and its export.

    @defop("sin", infer=float_rule, lower="jnp.sin({0})",
           grad=(lambda op, g: g * cos(op.inputs[0]),))
    def sin(x):
        return [as_var(x)], {}

The decorated function takes the user's arguments and returns `(inputs, attrs)` for the op
(or a finished Variable, when no op is needed); the decorator turns it into the user
function, whose every call goes through the one dispatch (srcgrad/core/dispatch.py): inside a
trace it appends the op, on Tensors it records it, otherwise it computes eagerly.
`operands` names the parameters that take arrays: a Python number there is weakly typed
and a runtime input of the compiled call, never a new program per value.
Composite user functions (built from other ops) are exported with `@public`; functions of a
namespace such as `sg.linalg` with `@public_in("linalg")` (or `defop(..., namespace="linalg")`),
under the qualified name `linalg.<name>`.

Layer L2 (core): see docs/design.md.
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable

from .builder import emit1
from .dispatch import dispatched
from ..ir.program import Variable
from .registry import GradSpec, InferFn, register

#: Every user function `sg.<name>` (or `sg.<namespace>.<name>`, keyed by that qualified
#: name), in declaration order.
EXPORTS: dict[str, Callable[..., Any]] = {}

Front = Callable[..., Any]
#: What a front returns: the op's inputs and attrs, or a finished value (no op needed).
Emitted = Variable | tuple[list[Variable], dict[str, Any]]


def _export(
    fn: Callable[..., Any], qualname: str, operands: tuple[str, ...] = ()
) -> Callable[..., Any]:
    _user_fn = dispatched(fn, operands)
    if qualname in EXPORTS:
        raise ValueError(f"sg.{qualname} is exported twice")
    EXPORTS[qualname] = _user_fn
    return _user_fn


def public(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Export `fn` as `sg.<name>`; called outside a trace it runs eagerly."""
    return _export(fn, fn.__name__)


def public_in(namespace: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Export the decorated function as `sg.<namespace>.<name>` (as `public` does)."""
    return lambda fn: _export(fn, f"{namespace}.{fn.__name__}")


def exports_of(namespace: str | None) -> dict[str, Callable[..., Any]]:
    """The user functions of `namespace` (None: the top level), by their short names."""
    prefix = "" if namespace is None else namespace + "."
    return {
        k[len(prefix) :]: f
        for k, f in EXPORTS.items()
        if k.startswith(prefix) and "." not in k[len(prefix) :]
    }


def named(fn: Front, name: str, doc: str) -> Front:
    """`fn` (a front made by a family helper) under the user-facing `name`, in tracebacks and
    error messages too (errors.ShapeError names the function the user called)."""
    code = fn.__code__.replace(co_name=name)
    if sys.version_info >= (3, 11):  # co_qualname is new in 3.11
        code = code.replace(co_qualname=name)
    fn.__code__ = code
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


def defop(
    name: str,
    infer: InferFn,
    lower: Any,
    grad: GradSpec,
    *,
    export: bool | str = True,
    base: str | None = None,
    namespace: str | None = None,
    operands: tuple[str, ...] = (),
    jvp: Any = None,
    remat: str | None = None,
    fast: tuple[str, Callable[..., bool]] | None = None,
) -> Callable[[Front], Callable[..., Any]]:
    """Register op `name` and make its user function from `front` (see the module doc).

    `grad` is a tuple of per-input functions `(op, g) -> gradient` (None for an input that
    takes none), a whole-op grad maker, ZERO or None (see registry.OpDef). `export=False`
    keeps the function internal (grad helpers); a string names the composite user function
    that reaches the op (`integer_pow` is reached by `sg.power`), itself exported by `@public`.
    `namespace` exports the function as `sg.<namespace>.<name>`. `operands` names the
    front's array parameters (see the module doc). `jvp`, `remat` and `fast` are the row's
    forward-mode rule, recompute policy and fast lowering (registry.OpDef).
    """

    def deco(front: Front) -> Callable[..., Any]:
        @functools.wraps(front)
        def _build(*args: Any, **kwargs: Any) -> Variable:
            made = front(*args, **kwargs)
            if isinstance(made, Variable):
                return made
            inputs, attrs = made
            return emit1(name, inputs, attrs, base=base)

        short = front.__name__ if namespace is None else f"{namespace}.{front.__name__}"
        user = export if isinstance(export, str) else short if export else None
        register(name, infer, lower, grad, public=user, remat=remat, jvp=jvp, fast=fast)
        return _export(_build, short, operands) if export is True else _build

    return deco
