"""The one method table: the operators and methods of a jax.numpy array, as srcgrad ops.

`install(cls)` puts the same table on traced values (`Variable`, by srcgrad.ops) and on
imperative `Tensor`s (by srcgrad.imperative), so the two classes cannot drift: every entry
is an sg user function, which dispatches each call (traced, recorded or eager) itself.

Layer L3 (the ops): see docs/design.md.
"""
from __future__ import annotations

from typing import Any, Callable

from .. import dispatch
from . import elementwise as E
from . import contraction, indexing, linalg_functions, manip, reduce, shape, sort_scan

#: Binary operators: name -> the op; each also gets its reflected form (`__radd__`).
BINARY: dict[str, Callable[..., Any]] = {
    "add": E.add, "sub": E.subtract, "mul": E.multiply, "truediv": E.divide,
    "pow": E.power, "mod": E.remainder, "floordiv": E.floor_divide,
    "matmul": contraction.matmul, "and": E.logical_and, "or": E.logical_or,
}
COMPARISONS: dict[str, Callable[..., Any]] = {
    "__lt__": E.less, "__le__": E.less_equal, "__gt__": E.greater, "__ge__": E.greater_equal,
    "__eq__": E.equal, "__ne__": E.not_equal,
}
UNARY: dict[str, Callable[..., Any]] = {
    "__neg__": E.negative, "__invert__": E.logical_not, "__abs__": E.abs,
}
#: Methods that are the op itself (`x.sum(axis)` is `sg.sum(x, axis)`).
METHODS: dict[str, Callable[..., Any]] = {
    "astype": E.astype, "clip": E.clip, "round": E.round,
    "sum": reduce.sum, "mean": reduce.mean, "max": reduce.max, "min": reduce.min,
    "prod": reduce.prod, "argmax": reduce.argmax, "argmin": reduce.argmin,
    "var": reduce.var, "std": reduce.std,
    "dot": contraction.dot, "squeeze": shape.squeeze, "flatten": manip.ravel, "ravel": manip.ravel,
    "cumsum": sort_scan.cumsum, "cumprod": sort_scan.cumprod, "repeat": manip.repeat,
    "sort": sort_scan.sort, "argsort": sort_scan.argsort, "trace": linalg_functions.trace,
}

_getitem = dispatch.dispatched(indexing.getitem)


def _reflected(fn: Callable[..., Any]) -> Callable[[Any, Any], Any]:
    return lambda self, other: fn(other, self)


def _reshape(self: Any, *shape_: Any) -> Any:
    return shape.reshape(self, shape_[0] if len(shape_) == 1 else shape_)


def _transpose(self: Any, *axes: Any) -> Any:
    return shape.transpose(self, axes[0] if len(axes) == 1 and not isinstance(axes[0], int)
                           else axes or None)


def table() -> dict[str, Any]:
    """Every attribute `install` sets, by name."""
    out: dict[str, Any] = {}
    for name, fn in BINARY.items():
        out[f"__{name}__"] = fn
        out[f"__r{name}__"] = _reflected(fn)
    out.update(COMPARISONS)
    out.update(UNARY)
    out.update(METHODS)
    out["__pos__"] = lambda self: self
    out["__getitem__"] = _getitem
    out["at"] = property(indexing.at)
    out["T"] = property(lambda self: shape.transpose(self))
    out["reshape"] = _reshape
    out["transpose"] = _transpose
    return out


_TABLE = table()


def install(cls: type) -> None:
    """Give `cls` the operators and methods of a jax.numpy array (the srcgrad ops)."""
    for name, attr in _TABLE.items():
        setattr(cls, name, attr)
    cls.__hash__ = object.__hash__  # type: ignore[method-assign]  (__eq__ is elementwise)
