"""The operators and methods of a jax.numpy array, for traced values and Tensors alike.

`ArrayMethods` is the base class of `Variable` (and of the imperative `Tensor`): each of its
operators (`x + y`, `x[i]`, `x @ w`, ...) and methods (`x.sum()`, `x.T`, `x.at[i].set(v)`, ...)
calls the entry of the same name in the op layer's method table (srcgrad/ops/methods.py,
which srcgrad/wiring.py sets into `METHOD_TABLE`). Every entry is an sg user function, which
dispatches each call (traced, recorded or eager) itself, so the two classes cannot drift.

Layer L1 (the IR): see docs/design.md.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from ..base.hooks import Hook

#: The names of ArrayMethods' entries (each `_method` and `_property` adds its own).
ENTRY_NAMES: list[str] = []


def _check(table: Mapping[str, Callable[..., Any]]) -> None:
    want = set(ENTRY_NAMES)
    if set(table) != want:
        raise ValueError(
            f"the method table's names differ from ArrayMethods': missing "
            f"{sorted(want - set(table))}, extra {sorted(set(table) - want)}"
        )


METHOD_TABLE: Hook[Mapping[str, Callable[..., Any]]] = Hook(
    "srcgrad.ir.array_methods.METHOD_TABLE",
    "the operators and methods of an array, as sg functions (srcgrad/ops/methods.py)",
    on_set=_check,
)


def _method(name: str) -> Callable[..., Any]:
    ENTRY_NAMES.append(name)

    # "_": error messages name the sg function the entry calls, not this frame (errors.py)
    def _entry(self: Any, *args: Any, **kwargs: Any) -> Any:
        return METHOD_TABLE.value[name](self, *args, **kwargs)

    _entry.__name__ = _entry.__qualname__ = name
    _entry.__doc__ = f"`{name}` of the method table (srcgrad/ops/methods.py)."
    return _entry


def _property(name: str) -> property:
    ENTRY_NAMES.append(name)
    return property(
        lambda self: METHOD_TABLE.value[name](self),
        doc=f"`{name}` of the method table (srcgrad/ops/methods.py).",
    )


class ArrayMethods:
    """The operators and methods of a jax.numpy array, as srcgrad ops (see the module doc)."""

    __slots__ = ()
    # __eq__ is elementwise: instances hash by identity, as arrays would not.
    __hash__ = object.__hash__

    __add__ = _method("__add__")
    __sub__ = _method("__sub__")
    __mul__ = _method("__mul__")
    __truediv__ = _method("__truediv__")
    __pow__ = _method("__pow__")
    __mod__ = _method("__mod__")
    __floordiv__ = _method("__floordiv__")
    __matmul__ = _method("__matmul__")
    __and__ = _method("__and__")
    __or__ = _method("__or__")
    __xor__ = _method("__xor__")
    __lshift__ = _method("__lshift__")
    __rshift__ = _method("__rshift__")
    __radd__ = _method("__radd__")
    __rsub__ = _method("__rsub__")
    __rmul__ = _method("__rmul__")
    __rtruediv__ = _method("__rtruediv__")
    __rpow__ = _method("__rpow__")
    __rmod__ = _method("__rmod__")
    __rfloordiv__ = _method("__rfloordiv__")
    __rmatmul__ = _method("__rmatmul__")
    __rand__ = _method("__rand__")
    __ror__ = _method("__ror__")
    __rxor__ = _method("__rxor__")
    __rlshift__ = _method("__rlshift__")
    __rrshift__ = _method("__rrshift__")
    __lt__ = _method("__lt__")
    __le__ = _method("__le__")
    __gt__ = _method("__gt__")
    __ge__ = _method("__ge__")
    __eq__ = _method("__eq__")
    __ne__ = _method("__ne__")
    __neg__ = _method("__neg__")
    __pos__ = _method("__pos__")
    __invert__ = _method("__invert__")
    __abs__ = _method("__abs__")
    __getitem__ = _method("__getitem__")
    astype = _method("astype")
    clip = _method("clip")
    round = _method("round")
    sum = _method("sum")
    mean = _method("mean")
    max = _method("max")
    min = _method("min")
    prod = _method("prod")
    argmax = _method("argmax")
    argmin = _method("argmin")
    var = _method("var")
    std = _method("std")
    dot = _method("dot")
    squeeze = _method("squeeze")
    flatten = _method("flatten")
    ravel = _method("ravel")
    cumsum = _method("cumsum")
    cumprod = _method("cumprod")
    repeat = _method("repeat")
    sort = _method("sort")
    argsort = _method("argsort")
    trace = _method("trace")
    reshape = _method("reshape")
    transpose = _method("transpose")
    T = _property("T")
    at = _property("at")
