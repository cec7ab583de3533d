"""The one method table: the operators and methods of a jax.numpy array, as srcgrad ops.

`table()` is what `ArrayMethods` (srcgrad/ir/array_methods.py), the base class of traced
values and of imperative Tensors, calls (srcgrad/wiring.py sets it), so the two classes
cannot drift: every entry is an sg user function, which dispatches each call (traced,
recorded or eager) itself.

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..core import dispatch
from ..base.errors import ShapeError, user_location
from ..ir.program import Variable, current_program
from . import bitwise as bitwise_ops
from . import elementwise
from . import (
    contraction,
    cumulative,
    index_update,
    indexing,
    linalg_functions,
    logic,
    manip,
    reduce,
    shape,
    sorting,
)


def _is_bool(x: Any) -> bool:
    """Whether an operand is boolean (a Python bool, or an array or traced value of dtype bool)."""
    if isinstance(x, (bool, np.bool_)):
        return True
    dt = getattr(x, "dtype", None)
    return dt is not None and np.dtype(dt) == np.bool_


def _by_dtype(logical: Callable[..., Any], bitwise: Callable[..., Any]) -> Callable[..., Any]:
    """jax.numpy's `&`, `|`, `^`, `~`: logical on bools, bitwise otherwise (`~5 == -6`)."""

    def op(*xs: Any) -> Any:
        return (logical if all(_is_bool(x) for x in xs) else bitwise)(*xs)

    op.__name__ = op.__qualname__ = bitwise.__name__
    op.__doc__ = f"{logical.__name__} on bools, {bitwise.__name__} otherwise (as jax.numpy)."
    return op


#: Binary operators: name -> the op; each also gets its reflected form (`__radd__`).
BINARY: dict[str, Callable[..., Any]] = {
    "add": elementwise.add,
    "sub": elementwise.subtract,
    "mul": elementwise.multiply,
    "truediv": elementwise.divide,
    "pow": elementwise.power,
    "mod": elementwise.remainder,
    "floordiv": elementwise.floor_divide,
    "matmul": contraction.matmul,
    "and": _by_dtype(elementwise.logical_and, bitwise_ops.bitwise_and),
    "or": _by_dtype(elementwise.logical_or, bitwise_ops.bitwise_or),
    "xor": _by_dtype(logic.logical_xor, bitwise_ops.bitwise_xor),
    "lshift": bitwise_ops.left_shift,
    "rshift": bitwise_ops.right_shift,
}
COMPARISONS: dict[str, Callable[..., Any]] = {
    "__lt__": elementwise.less,
    "__le__": elementwise.less_equal,
    "__gt__": elementwise.greater,
    "__ge__": elementwise.greater_equal,
    "__eq__": elementwise.equal,
    "__ne__": elementwise.not_equal,
}
UNARY: dict[str, Callable[..., Any]] = {
    "__neg__": elementwise.negative,
    "__invert__": _by_dtype(elementwise.logical_not, bitwise_ops.invert),
    "__abs__": elementwise.abs,
}
#: Methods that are the op itself (`x.sum(axis)` is `sg.sum(x, axis)`).
METHODS: dict[str, Callable[..., Any]] = {
    "astype": elementwise.astype,
    "clip": elementwise.clip,
    "round": elementwise.round,
    "sum": reduce.sum,
    "mean": reduce.mean,
    "max": reduce.max,
    "min": reduce.min,
    "prod": reduce.prod,
    "argmax": reduce.argmax,
    "argmin": reduce.argmin,
    "var": reduce.var,
    "std": reduce.std,
    "dot": contraction.dot,
    "squeeze": shape.squeeze,
    "flatten": shape.ravel,
    "ravel": shape.ravel,
    "cumsum": cumulative.cumsum,
    "cumprod": cumulative.cumprod,
    "repeat": manip.repeat,
    "sort": sorting.sort,
    "argsort": sorting.argsort,
    "trace": linalg_functions.trace,
}

_getitem_op = dispatch.dispatched(indexing.getitem)


def _getitem(x: Any, index: Any) -> Any:
    """`x[index]`. Traced, an int index and a slice's bounds are static (a slice of the
    program); on a concrete array (eager, or a Tensor) they are checked against the shape now
    and passed as runtime int32 values, so `xs[t]` and `xs[t:t + n]` in a Python loop compile
    one program for every `t`, not one per `t` (a slice keeps its size static: it is the
    result's shape)."""
    if current_program() is None and type(x) is not Variable:
        index = _runtime_ints(x, index)
    return _getitem_op(x, index)


def _is_int(i: Any) -> bool:
    return type(i) is int or isinstance(i, np.integer)


_INT32 = np.dtype(np.int32)


def _runtime_ints(x: Any, index: Any) -> Any:
    """The int items of a plain index (ints and slices only) as int32 device arrays, in
    range (the last ones seen are kept: a loop over words transfers nothing per call); a
    slice of step 1 that takes part of its axis as a `SliceAt` of its size from a runtime
    start."""
    items = index if type(index) is tuple else (index,)
    shape = getattr(x, "shape", None)
    if shape is None or len(items) > len(shape):
        return index
    out: list[Any] = []
    changed = False
    for axis, (i, d) in enumerate(zip(items, shape)):
        if _is_int(i):
            i = int(i)
            if not -d <= i < d:
                raise ShapeError(
                    f"index {i} is out of bounds for axis {axis} of size {d}",
                    op="getitem",
                    loc=user_location(),
                )
            out.append(dispatch.on_device(i % d, _INT32))
            changed = True
        elif type(i) is slice:
            part = _part(i, d)
            out.append(i if part is None else part)
            changed = changed or part is not None
        else:
            return index
    if not changed:
        return index
    return tuple(out) if type(index) is tuple else out[0]


def _part(s: slice, d: int) -> indexing.SliceAt | None:
    """A slice of step 1 taking 1 to d - 1 elements of an axis of size `d` as a `SliceAt`;
    None for any other slice (kept static)."""
    if s.step not in (None, 1) or (s.start is None and s.stop is None):
        return None
    if not (s.start is None or _is_int(s.start)) or not (s.stop is None or _is_int(s.stop)):
        return None
    lo, hi, _ = s.indices(d)
    n = hi - lo
    if not 0 < n < d:
        return None
    return indexing.SliceAt(dispatch.on_device(lo, _INT32), n)


def _reflected(fn: Callable[..., Any]) -> Callable[[Any, Any], Any]:
    return lambda self, other: fn(other, self)


def _reshape(self: Any, *shape_: Any) -> Any:
    return shape.reshape(self, shape_[0] if len(shape_) == 1 else shape_)


def _transpose(self: Any, *axes: Any) -> Any:
    return shape.transpose(
        self, axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else axes or None
    )


def table() -> dict[str, Any]:
    """Every operator and method of an array, by name (`T` and `at` are read as properties:
    functions of the array alone)."""
    out: dict[str, Any] = {}
    for name, fn in BINARY.items():
        out[f"__{name}__"] = fn
        out[f"__r{name}__"] = _reflected(fn)
    out.update(COMPARISONS)
    out.update(UNARY)
    out.update(METHODS)
    out["__pos__"] = lambda self: self
    out["__getitem__"] = _getitem
    out["at"] = index_update.at
    out["T"] = shape.transpose
    out["reshape"] = _reshape
    out["transpose"] = _transpose
    return out
