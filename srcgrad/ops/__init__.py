"""The op set. Importing it fills the registry and gives traced values their operators.

Every user function is declared once (declare.defop / declare.public) and collected in
`declare.EXPORTS`; this package re-exports exactly those and the control-flow functions.
"""
from __future__ import annotations

from typing import Any

from .. import habits
from ..builder import as_var
from ..ir import Variable
# Importing the modules declares their ops (fills the registry and EXPORTS).
from . import (activations, bitwise, control, construct, conv, creation, decomp, elementwise, grad_helpers,  # noqa: F401
               indexing, linalg, linalg_functions, manip, nn, numpy_build, numpy_index, numpy_math,
               numpy_reductions, numpy_sets,
               products, random, reduce, shape, sort_scan)
from .control import cond, fori_loop, while_loop
from .declare import exports_of
from .checkpoint import checkpoint
from .scan import scan

E = elementwise


def _swap(fn: Any) -> Any:
    return lambda self, other: fn(as_var(other, like=self), self)


def _install_operators() -> None:
    """Give Variable the operators of a jax.numpy array."""
    ops = {
        "__add__": E.add, "__sub__": E.subtract, "__mul__": E.multiply,
        "__truediv__": E.divide, "__pow__": E.power, "__mod__": E.remainder,
        "__floordiv__": E.floor_divide, "__matmul__": linalg.matmul,
        "__lt__": E.less, "__le__": E.less_equal, "__gt__": E.greater,
        "__ge__": E.greater_equal, "__eq__": E.equal, "__ne__": E.not_equal,
        "__and__": E.logical_and, "__or__": E.logical_or,
    }
    for name, fn in ops.items():
        setattr(Variable, name, fn)
    for name, fn in {"__radd__": E.add, "__rsub__": E.subtract, "__rmul__": E.multiply,
                     "__rtruediv__": E.divide, "__rpow__": E.power, "__rmod__": E.remainder,
                     "__rfloordiv__": E.floor_divide,
                     "__rmatmul__": linalg.matmul}.items():
        setattr(Variable, name, _swap(fn))
    Variable.__neg__ = E.negative
    Variable.__pos__ = lambda self: self
    Variable.__invert__ = E.logical_not
    Variable.__abs__ = E.abs
    Variable.__getitem__ = indexing.getitem
    Variable.at = property(indexing.at)
    Variable.__hash__ = object.__hash__
    Variable.T = property(lambda self: shape.transpose(self))
    Variable.astype = E.astype
    Variable.reshape = lambda self, *s: shape.reshape(self, s[0] if len(s) == 1 else s)
    Variable.transpose = lambda self, *axes: shape.transpose(
        self, axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else axes or None)
    Variable.sum = reduce.sum
    Variable.mean = reduce.mean
    Variable.max = reduce.max
    Variable.min = reduce.min
    Variable.prod = reduce.prod
    Variable.argmax = reduce.argmax
    Variable.argmin = reduce.argmin
    Variable.var = reduce.var
    Variable.std = reduce.std
    Variable.clip = E.clip
    Variable.round = E.round
    Variable.dot = linalg.dot
    Variable.squeeze = shape.squeeze
    Variable.flatten = Variable.ravel = manip.ravel
    Variable.cumsum = sort_scan.cumsum
    Variable.cumprod = sort_scan.cumprod
    Variable.repeat = manip.repeat
    Variable.sort = sort_scan.sort
    Variable.argsort = sort_scan.argsort
    Variable.trace = linalg_functions.trace


_install_operators()
habits.install()
globals().update(exports_of(None))

__all__ = ["checkpoint", "cond", "fori_loop", "scan", "while_loop", *exports_of(None)]
