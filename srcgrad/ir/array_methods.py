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

_BINARY = ("add", "sub", "mul", "truediv", "pow", "mod", "floordiv", "matmul", "and", "or",
           "xor", "lshift", "rshift")
#: Every operator and method of the table; each binary operator also has its reflected form.
METHOD_NAMES: tuple[str, ...] = (
    *(f"__{n}__" for n in _BINARY), *(f"__r{n}__" for n in _BINARY),
    "__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__",
    "__neg__", "__pos__", "__invert__", "__abs__", "__getitem__",
    "astype", "clip", "round", "sum", "mean", "max", "min", "prod", "argmax", "argmin", "var",
    "std", "dot", "squeeze", "flatten", "ravel", "cumsum", "cumprod", "repeat", "sort",
    "argsort", "trace", "reshape", "transpose",
)
#: The table's entries read as properties (`x.T`, `x.at`): functions of the array alone.
PROPERTY_NAMES: tuple[str, ...] = ("T", "at")


def _check(table: Mapping[str, Callable[..., Any]]) -> None:
    want = set(METHOD_NAMES) | set(PROPERTY_NAMES)
    if set(table) != want:
        raise ValueError(f"the method table's names differ from ArrayMethods': missing "
                         f"{sorted(want - set(table))}, extra {sorted(set(table) - want)}")


METHOD_TABLE: Hook[Mapping[str, Callable[..., Any]]] = Hook(
    "srcgrad.ir.array_methods.METHOD_TABLE",
    "the operators and methods of an array, as sg functions (srcgrad/ops/methods.py)",
    on_set=_check)


def _method(name: str) -> Callable[..., Any]:
    # "_": error messages name the sg function the entry calls, not this frame (errors.py)
    def _entry(self: Any, *args: Any, **kwargs: Any) -> Any:
        return METHOD_TABLE.value[name](self, *args, **kwargs)
    _entry.__name__ = _entry.__qualname__ = name
    _entry.__doc__ = f"`{name}` of the method table (srcgrad/ops/methods.py)."
    return _entry


def _property(name: str) -> property:
    return property(lambda self: METHOD_TABLE.value[name](self),
                    doc=f"`{name}` of the method table (srcgrad/ops/methods.py).")


class ArrayMethods:
    """The operators and methods of a jax.numpy array, as srcgrad ops (see the module doc)."""

    __slots__ = ()
    # __eq__ is elementwise: instances hash by identity, as arrays would not.
    __hash__ = object.__hash__


for _name in METHOD_NAMES:
    setattr(ArrayMethods, _name, _method(_name))
for _name in PROPERTY_NAMES:
    setattr(ArrayMethods, _name, _property(_name))
