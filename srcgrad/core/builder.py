"""Appending ops to the block being built: type inference, constants, the program's inputs
and error context.

Layer L2 (core): see docs/design.md.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Sequence, cast

import jax
import numpy as np

from ..base import dtypes
from ..base.errors import ShapeError, SourceLoc, SrcgradError, TraceError, user_location
from .dispatch import Weak, leaf_types
from ..ir.program import Block, Op, Program, Variable, current_program
from .registry import REGISTRY


class _State(threading.local):
    """Per-thread builder state: the grad sections and constant pools being appended to."""

    def __init__(self) -> None:
        self.origin: list[Op] = []
        self.pools: list[tuple[Block, dict] | None] = []


_state = _State()


class grad_section:
    """Ops emitted inside differentiate `op`: they take its user location and origin.

    A class rather than a generator-based context manager: it is entered once per
    differentiated op, and a generator's setup and StopIteration cost several times more.
    """

    __slots__ = ("op",)

    def __init__(self, op: Op):
        self.op = op

    def __enter__(self) -> None:
        _state.origin.append(self.op)

    def __exit__(self, *exc: object) -> None:
        _state.origin.pop()


class constant_pool:
    """Scalar constants made inside share one `constant` op per value in `block`.

    `backward_block` opens one for the block it appends grad ops to, so the `1.0` of every
    tanh gradient is one op, not one per tanh. Sharing is safe only while ops are appended
    in order: code that inserts ops at earlier positions opens `constant_pool(None)`.
    """

    __slots__ = ("entry",)

    def __init__(self, block: Block | None):
        self.entry = (block, {}) if block is not None else None

    def __enter__(self) -> None:
        _state.pools.append(self.entry)

    def __exit__(self, *exc: object) -> None:
        _state.pools.pop()


def active_program(what: str) -> Program:
    prog = current_program()
    if prog is None:
        raise TraceError(
            f"{what} needs a traced program: call it inside a function passed to "
            "sg.grad/sg.jit/sg.trace or inside `with sg.program_guard(prog)`",
            loc=user_location(),
        )
    return prog


def describe(inputs: Sequence[Variable]) -> str:
    return ", ".join(f"{v.name}: {v.type_str()}" for v in inputs)


def emit(
    type_: str,
    inputs: Sequence[Variable],
    attrs: dict[str, Any] | None = None,
    base: str | None = None,
) -> list[Variable]:
    """Append one op to the current block and return its (typed) outputs."""
    prog = active_program(type_)
    block = prog.current_block()
    attrs = {} if attrs is None else attrs
    origins = _state.origin
    origin = origins[-1] if origins else None
    if origin is not None:
        # Grad ops may read forward values of a sibling block until the grad maker turns them
        # into recorded residuals; the verifier checks the finished program.
        loc = origin.loc
    else:
        loc = prog.loc if prog.loc is not None else user_location()
        for v in inputs:
            if v.block is not block and not _visible(v, block):
                raise TraceError(_escape_message(v, prog), op=type_, loc=loc)
    row = REGISTRY[type_]
    if row.effect:
        prog.effects = True
    try:
        types = row.infer(inputs, attrs)
    except ShapeError as e:
        raise ShapeError(f"{e.detail}; inputs: {describe(inputs)}", op=type_, loc=loc) from None
    name = base or type_
    outs = [block.new_var(name, shape, dt) for shape, dt in types]
    block.ops.append(Op(type_, list(inputs), outs, attrs, loc, block, origin))
    return outs


def emit1(
    type_: str,
    inputs: Sequence[Variable],
    attrs: dict[str, Any] | None = None,
    base: str | None = None,
) -> Variable:
    return emit(type_, inputs, attrs, base)[0]


def _escape_message(v: Variable, prog: Program) -> str:
    """Why `v` cannot be read here: it belongs to another trace, or escaped a nested block."""
    if v.block.program is not prog:
        return (
            f"{v.name} ({v.type_str()}) belongs to another trace (an earlier sg.grad/sg.jit "
            "trace or another Program) and cannot be used in this one; it leaked through a "
            "Python variable, a global or a closure: pass it as an argument instead"
        )
    return (
        f"{v.name} is used outside the block that defines it (a value made inside a loop "
        "or branch body escaped through a Python variable)"
    )


def _visible(v: Variable, block: Block) -> bool:
    return v.block.program is block.program and v.block.is_ancestor_of(block)


def constant(value: Any, dtype: np.dtype | None = None) -> Variable:
    """A constant: Python scalars are inlined; a NumPy or JAX array (a tracer of an enclosing
    JAX transformation included) or an sg.Tensor becomes an input of the program
    (`Program.capture`), fed on every call; other array-likes become program constants."""
    if isinstance(value, (bool, int, float, complex, np.generic)) and not isinstance(
        value, np.ndarray
    ):
        dt = dtypes.canonical(np.asarray(value).dtype if dtype is None else dtype)
        py = np.asarray(value).astype(dt).item()
        pools = _state.pools
        pool = pools[-1] if pools else None
        if pool is None or pool[0] is not active_program("constant").current_block():
            return emit1("constant", [], {"value": py, "dtype": dt, "shape": ()}, base="c")
        key = (dt, repr(py))  # repr tells 0.0 from -0.0
        shared = pool[1].get(key)
        if shared is None:
            shared = pool[1][key] = emit1(
                "constant", [], {"value": py, "dtype": dt, "shape": ()}, base="c"
            )
        return shared
    if isinstance(value, (np.ndarray, jax.Array)) or isinstance(value, leaf_types()):
        # Fed on every call, so that a captured NumPy array mutated later (or a Tensor
        # updated in place) is seen; a JAX tracer closed over is lifted the same way.
        dt = dtypes.canonical(cast(Any, value).dtype if dtype is None else dtype)
        return active_program("constant").capture(value, dt)
    arr = np.asarray(value)
    dt = dtypes.canonical(arr.dtype if dtype is None else dtype)
    if arr.dtype != dt:
        arr = arr.astype(dt)
    return emit1("constant", [], {"value": arr, "dtype": dt, "shape": tuple(arr.shape)}, base="c")


def as_var(x: Any, like: Variable | None = None) -> Variable:
    """`x` as a Variable; Python scalars take the dtype of `like` as JAX's weak types do.

    A `Weak` number (a Python number in an operand position of an eager or recorded call)
    becomes what the program being built lifts it to (`Program.lift_weak`: an input fed its
    value), or an inline constant where the program lifts nothing."""
    if isinstance(x, Variable):
        return x
    if type(x) is Weak:
        dt = dtypes.scalar_dtype(x.value, like.dtype if like is not None else None)
        prog = active_program("constant")
        v = x.var
        if v is not None and v.dtype == dt and v.block.program is prog:
            return v
        x.var = prog.lift_weak(x, dt) if prog.lift_weak is not None else constant(x.value, dt)
        return x.var
    if isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic):
        return constant(x, dtypes.scalar_dtype(x, like.dtype if like is not None else None))
    if isinstance(x, (np.ndarray, np.generic, jax.Array)) or hasattr(x, "__array__"):
        return constant(x)
    if isinstance(x, (list, tuple)) and x:
        return _sequence(x)
    raise TraceError(
        f"cannot use a {type(x).__name__} as an array in a traced program", loc=user_location()
    )


def as_pair(x: Any, y: Any) -> tuple[Variable, Variable]:
    """Two operands as Variables; a Python number takes the other one's dtype (JAX's weak
    typing), the first one's when both are numbers."""
    if isinstance(x, Variable):
        return x, as_var(y, like=x)
    y = as_var(y)
    return as_var(x, like=y), y


class _Sequences:
    """How a list with traced elements becomes one array: `sg.stack`, registered by
    srcgrad/ops/shape.py (the ops are built on this module)."""

    stack: Callable[[list[Variable]], Variable]


SEQUENCES = _Sequences()


def _sequence(x: list | tuple) -> Variable:
    """A list or tuple of numbers and arrays as one array, as NumPy reads it; with a traced
    element, the elements are stacked (Python numbers take that element's dtype)."""
    leaves = jax.tree_util.tree_leaves(x)
    first = next((v for v in leaves if isinstance(v, Variable)), None)
    if first is None:
        if np.asarray(x).dtype.kind not in "biufc":
            raise TraceError(
                f"cannot use this {type(x).__name__} as an array: {x!r:.80}", loc=user_location()
            )
        return constant(x)  # a program constant (an ndarray would be a captured input)
    return SEQUENCES.stack([as_var(e, like=first) for e in x])


def fail(message: str, op: str | None = None, loc: SourceLoc | None = None) -> SrcgradError:
    return SrcgradError(message, op=op, loc=loc or user_location())


def input_var(name: str, shape: Sequence[int], dtype: Any, kind: str) -> Variable:
    """Declare an input of the program being built, in its global block: `kind` "data" (no
    gradient, sg.data and a transformed function's arguments) or "param" (sg.parameter)."""
    prog = active_program(f"sg.{kind}")
    block = prog.global_block()
    if prog.current_block() is not block:
        raise TraceError(
            f"sg.{kind}({name!r}) must be declared in the global block", loc=user_location()
        )
    if name in prog._taken and any(v.name == name for v in prog.inputs):  # O(1) when free
        raise TraceError(f"the program already has an input named {name!r}", loc=user_location())
    var = block.new_var(
        name,
        _static_shape(name, shape, kind),
        dtypes.canonical(dtype),
        kind=kind,
        stop_gradient=(kind == "data"),
        exact_name=True,
    )
    prog.inputs.append(var)
    return var


def _static_shape(name: str, shape: Sequence[int], kind: str) -> tuple[int, ...]:
    """The declared shape as a tuple of non-negative ints, or a TraceError naming the input.

    Programs are traced once with static shapes: a `None` / `-1` batch dimension has no
    size to trace with, so it is refused here rather than failing later inside an op.
    """
    dims = (shape,) if isinstance(shape, (int, np.integer)) else shape
    try:
        dims = tuple(dims)
    except TypeError:
        dims = None
    if dims is None or not all(
        isinstance(d, (int, np.integer)) and not isinstance(d, (bool, np.bool_)) and d >= 0
        for d in dims
    ):
        raise TraceError(
            f"sg.{kind}({name!r}) has shape {shape!r}: every dimension must be a "
            "non-negative int. srcgrad traces static shapes, so a None or -1 (batch) "
            "dimension is not supported; declare the size you will feed (build one "
            "program per batch size, or use sg.grad/sg.jit, which specialise per "
            "input shape)",
            loc=user_location(),
        )
    return tuple(int(d) for d in dims)
