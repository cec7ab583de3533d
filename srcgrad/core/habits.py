"""JAX habits fail helpfully: a traced value handed to a jax.numpy, jax.nn or NumPy function.

JAX cannot interpret a srcgrad Variable, and its own error ("is not a valid JAX type") does
not say what to do. JAX's abstractification of a Variable (`register_with_jax`), NumPy's ufuncs
and array functions, and `__array__` (`NUMPY_PROTOCOL`, which srcgrad/wiring.py sets as the
IR's hook of that name) raise a TraceError that names the srcgrad op to use
instead and the user's file:line. NumPy's operators (`ndarray + traced`), its reductions
(`numpy.sum(traced)`) and its functions with an sg twin of the same signature go to srcgrad.

Layer L2 (core): see docs/design.md.
"""

from __future__ import annotations

import keyword
import linecache
import os
import re
import sys
from types import FrameType
from typing import Any, Callable

import numpy as np

from ..base.errors import SourceLoc, SrcgradError, TraceError, user_location
from ..ir.program import Variable

_NAME = re.compile(r"[A-Za-z_][\w.]*$")
#: A call of a dotted name in a line of source: `np.exp(`.
_CALL = re.compile(r"(?<![\w.])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\s*\(")
#: NumPy / jax.numpy names whose srcgrad op is spelled differently.
_ALIASES = {
    "absolute": "abs",
    "true_divide": "divide",
    "mod": "remainder",
    "dot_general": "einsum",
    "trace": "linalg.trace",
}
#: jax.lax's control flow: the srcgrad function that takes its place.
_CONTROL = {
    "while_loop": "sg.while_loop",
    "cond": "sg.cond",
    "scan": "sg.scan",
    "fori_loop": "sg.fori_loop",
    "switch": "sg.switch",
    "map": "sg.scan",
}
#: NumPy functions that run as the srcgrad op of the same name (NumPy's signature).
_NUMPY_FUNCTIONS = {
    np.sum,
    np.mean,
    np.max,
    np.min,
    np.prod,
    np.argmax,
    np.argmin,
    np.amax,
    np.amin,
    np.where,
    np.reshape,
    np.transpose,
    np.swapaxes,
    np.concatenate,
    np.stack,
    np.expand_dims,
    np.squeeze,
    np.matmul,
    np.dot,
    np.einsum,
    np.broadcast_to,
    np.take,
    np.zeros_like,
    np.ones_like,
    np.full_like,
}
#: NumPy's functions that run as the sg.linalg function of the same signature.
_NUMPY_LINALG = {
    np.trace: "linalg.trace",
    **{
        f: "linalg." + f.__name__
        for f in (
            np.linalg.norm,
            np.linalg.solve,
            np.linalg.inv,
            np.linalg.det,
            np.linalg.slogdet,
            np.linalg.cholesky,
            np.linalg.eigh,
            np.linalg.svd,
            np.linalg.qr,
            np.linalg.matrix_power,
        )
    },
}


def _library_dirs() -> tuple[str, ...]:
    import jax
    import jaxlib

    return tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep for m in (jax, jaxlib, np))


_LIBS: tuple[str, ...] = ()


def _user_frame() -> FrameType | None:
    """The innermost frame outside srcgrad, JAX and NumPy: the user's call."""
    global _LIBS
    _LIBS = _LIBS or _library_dirs()
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # srcgrad/
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith(_LIBS + (here,)) and not name.startswith("<srcgrad"):
            return frame
        frame = frame.f_back
    return None


def _call_text(frame: FrameType) -> str | None:
    """The source of the call expression `frame` is executing (Python 3.11's positions;
    None without them)."""
    try:
        pos = list(frame.f_code.co_positions())[frame.f_lasti // 2]  # type: ignore[attr-defined]
    except (AttributeError, IndexError):
        return None
    line, end, col, end_col = pos
    if line is None or col is None:
        return None
    lines = [linecache.getline(frame.f_code.co_filename, n) for n in range(line, (end or line) + 1)]
    if len(lines) == 1:
        return lines[0][col:end_col]
    return lines[0][col:] + "".join(lines[1:])


def _called_at(frame: FrameType) -> str | None:
    """The dotted name of the function `frame` is calling: from the call's own text, or
    (Python 3.10 has no column positions) the only call on the line whose names the frame's
    code reads (`sg.jit(lambda a: jnp.exp(a))`: the lambda reads jnp and exp, not jit)."""
    text = _call_text(frame)
    if text is not None:
        return _callee(text)
    code = frame.f_code
    known = set(code.co_names + code.co_varnames + code.co_freevars + code.co_cellvars)
    line = linecache.getline(code.co_filename, frame.f_lineno)
    names = [
        n for n in _CALL.findall(line) if not keyword.iskeyword(n) and set(n.split(".")) <= known
    ]
    return names[0] if len(names) == 1 else None


def _callee(call: str) -> str | None:
    """`jnp.tanh` from `jnp.tanh(x + 1)`: the dotted name before the last top-level call."""
    text = call.rstrip()
    if not text.endswith(")"):
        return None
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(text[i], 0)
        if depth == 0:
            match = _NAME.search(text[:i].rstrip())
            return match.group(0) if match else None
    return None


def _user_call(fallback: str | None) -> tuple[SourceLoc | None, str | None]:
    """The user's file:line and the function called there (`np.exp`), else `fallback`."""
    frame = _user_frame()
    loc = SourceLoc(frame.f_code.co_filename, frame.f_lineno) if frame else user_location()
    callee = _called_at(frame) if frame else None
    return loc, callee or fallback


def _sg_name(callee: str) -> str | None:
    """The srcgrad op that takes the place of the JAX or NumPy function `callee`, if any."""
    from .declare import EXPORTS

    name = ".".join(callee.split(".")[-2:])  # jnp.linalg.solve: sg.linalg.solve
    if name not in EXPORTS:
        name = callee.rsplit(".", 1)[-1]
        name = name if name in EXPORTS else _ALIASES.get(name, name)
    return name if name in EXPORTS else None


def misuse(value: Variable, fallback: str | None = None) -> TraceError:
    """The error for `value` handed to a JAX or NumPy function: which sg op to use instead."""
    loc, callee = _user_call(fallback)
    head = f"the srcgrad value {value!r} was passed to"
    if callee is None:
        return TraceError(
            f"{head} a JAX or NumPy function, which cannot read it; use the sg.* "
            "op of the same name",
            loc=loc,
        )
    last = callee.rsplit(".", 1)[-1]
    if last in _CONTROL and (callee != last or last != "map"):  # not Python's map
        return TraceError(
            f"{head} {callee}, which cannot trace srcgrad values; use "
            f"{_CONTROL[last]} (jax.lax's arguments, differentiable by srcgrad), "
            "or wrap the whole JAX function with sg.from_jax",
            loc=loc,
        )
    if callee != last and isinstance(np.sctypeDict.get(last), type):  # np.int64(v): a cast
        return TraceError(
            f"{head} {callee}, which cannot read it; to cast it, use "
            f"v.astype({callee}) (or sg.astype(v, {callee})) instead of "
            f"{callee}(v)",
            loc=loc,
        )
    name = _sg_name(callee)
    if name is not None:
        return TraceError(
            f"{head} {callee}, which cannot read it; use sg.{name} instead of {callee}", loc=loc
        )
    return TraceError(
        f"{head} {callee}, which cannot read it, and srcgrad has no "
        f"{callee.rsplit('.', 1)[-1]} yet; write it with sg.* ops",
        loc=loc,
    )


def detached(name: str | None, method: str | None = None) -> SrcgradError:
    """The error for NumPy reading a Tensor that `record()` differentiates (`name`: the
    Tensor's, if it has one): NumPy's result would be a constant, and the gradient through it
    silently lost. `method`: the Tensor method called (`numpy`); else the NumPy function is
    the one called at the user's line."""
    loc, callee = _user_call(None)
    tensor = f"the tensor {name!r}" if name else "a tensor"
    if method is not None:
        head, callee = f".{method}() of {tensor} that record() differentiates", None
    else:
        head = f"{callee or 'a NumPy function'} read {tensor} that record() differentiates"
    name_sg = _sg_name(callee) if callee else None
    fix = (
        f"use sg.{name_sg} instead of {callee} (it records), or"
        if name_sg
        else "compute with sg.* ops instead, or"
    )
    return SrcgradError(
        f"{head}, and cannot record it: the gradient through its result "
        f"would be silently lost; {fix} take a constant copy with "
        "`t.detach().numpy()` (or convert outside record())",
        loc=loc,
    )


def _aval(value: Variable) -> Any:
    raise misuse(value)


def array(self: Variable, *args: Any, **kwargs: Any) -> Any:
    """`__array__`: a traced value has no NumPy array; the error names the op to use."""
    raise misuse(self)


_OPERATOR_UFUNCS = {
    np.add: "add",
    np.subtract: "subtract",
    np.multiply: "multiply",
    np.true_divide: "divide",
    np.power: "power",
    np.remainder: "remainder",
    np.floor_divide: "floor_divide",
    np.matmul: "matmul",
    np.less: "less",
    np.less_equal: "less_equal",
    np.greater: "greater",
    np.greater_equal: "greater_equal",
    np.equal: "equal",
    np.not_equal: "not_equal",
    np.bitwise_and: "logical_and",
    np.bitwise_or: "logical_or",
}


def array_ufunc(self: Variable, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
    """`ndarray OP traced` runs the srcgrad op; other ufuncs (np.tanh) name the op to use."""
    from .declare import EXPORTS

    name = _OPERATOR_UFUNCS.get(ufunc)
    if name is not None and method == "__call__" and not kwargs:
        return EXPORTS[name](*inputs)
    raise misuse(self, f"np.{ufunc.__name__}")


def array_function(
    self: Variable, func: Callable[..., Any], types: Any, args: tuple, kwargs: dict[str, Any]
) -> Any:
    """numpy.sum(traced) and the like run the srcgrad op; other functions name the op to use."""
    from .declare import EXPORTS

    name = _NUMPY_LINALG.get(func) or _ALIASES.get(func.__name__, func.__name__)
    if (func in _NUMPY_FUNCTIONS or func in _NUMPY_LINALG) and name in EXPORTS:
        return EXPORTS[name](*args, **kwargs)
    raise misuse(self, f"np.{func.__name__}")


#: NumPy's protocols on a traced value (the IR's NUMPY_PROTOCOL hook).
NUMPY_PROTOCOL: dict[str, Callable[..., Any]] = {
    "__array__": array,
    "__array_ufunc__": array_ufunc,
    "__array_function__": array_function,
}


def register_with_jax() -> None:
    """Make JAX's abstractification of a Variable raise `misuse` (see the module doc)."""
    from jax._src import core, dtypes  # JAX's tables of array-like types; no public hook

    table = getattr(core, "pytype_aval_mappings", None)
    if isinstance(table, dict):
        table[Variable] = _aval
    register = getattr(dtypes, "register_canonicalize_value_handler", None)
    if register is not None:
        register(Variable, _aval)
