"""The IR: Program → Block → Op / Variable.

A `Program` owns a list of `Block`s; `blocks[0]` is the global block. A block holds its ops
in order, its parameters (values passed in: loop-carried state, branch operands) and its
results (values passed out). Sub-blocks hang off control-flow ops through their attrs and
may read variables of enclosing blocks (lexical scoping).

Layer L1 (the IR): see docs/design.md.
"""

from __future__ import annotations

import contextlib
import math
import threading
from typing import Any, Callable, Iterator

import numpy as np

from ..base.dtypes import short
from ..base.hooks import Hook
from ..base.errors import ConcreteValueError, SourceLoc, TraceError, user_location
from .array_methods import ArrayMethods

Shape = tuple[int, ...]

#: NumPy's protocols on a traced value (`__array__`, `__array_ufunc__`,
#: `__array_function__`): srcgrad/core/habits.py runs NumPy's operators and functions that
#: have an sg twin, and names the sg op to use for the others.
NUMPY_PROTOCOL: Hook[dict[str, Callable[..., Any]]] = Hook(
    "srcgrad.ir.program.NUMPY_PROTOCOL", "NumPy's protocols on a traced value (core/habits.py)"
)
#: The verifier (srcgrad/core/verify.py) and the printer (srcgrad/ir/printer.py).
VERIFIER: Hook[Callable[["Program"], None]] = Hook(
    "srcgrad.ir.program.VERIFIER", "the verifier (srcgrad/core/verify.py)"
)
FORMATTER: Hook[Callable[["Program"], str]] = Hook(
    "srcgrad.ir.program.FORMATTER", "the printer (srcgrad/ir/printer.py)"
)


class Variable(ArrayMethods):
    """A typed value in a block: unique name, static shape, dtype; its operators and methods
    are a jax.numpy array's (ArrayMethods)."""

    __slots__ = ("name", "shape", "dtype", "stop_gradient", "block", "kind", "__weakref__")
    # NumPy arrays and scalars defer their binary operators to ours (np_array @ traced_value).
    __array_priority__ = 1000

    def __init__(
        self,
        name: str,
        shape: Shape,
        dtype: np.dtype,
        block: "Block",
        stop_gradient: bool = False,
        kind: str = "tmp",
    ):
        self.name = name
        self.shape = shape
        self.dtype = dtype
        self.block = block
        self.stop_gradient = stop_gradient
        self.kind = kind  # "tmp", "data", "param", "capture" or "block_param"

    __hash__ = object.__hash__

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def type_str(self) -> str:
        return f"{short(self.dtype)}[{','.join(map(str, self.shape))}]"

    def __repr__(self) -> str:
        return f"{self.name}: {self.type_str()}"

    def __bool__(self) -> bool:
        raise TraceError(
            f"the traced value {self!r} has no Python truth value; "
            "use sg.cond, sg.where or sg.while_loop for data-dependent control flow",
            loc=user_location(),
        )

    def __len__(self) -> int:
        if not self.shape:
            raise ConcreteValueError(
                f"len() of the 0-d traced value {self!r}: a 0-d array has no length (as in "
                "NumPy); x.shape and x.size give its static shape",
                loc=user_location(),
            )
        return self.shape[0]

    def _concrete(self, what: str) -> ConcreteValueError:
        return ConcreteValueError(
            f"{what} of the traced value {self!r} asks for its number, which exists only when "
            "the compiled function runs; keep it an array (sg ops take it as it is: "
            "sg.astype(x, int) for an integer value, sg.cond/sg.where to branch on it, "
            "sg.fori_loop/sg.while_loop to loop on it) or return it from the function and "
            "convert the result",
            loc=user_location(),
        )

    def __float__(self) -> float:
        raise self._concrete("float()")

    def __int__(self) -> int:
        raise self._concrete("int()")

    def __complex__(self) -> complex:
        raise self._concrete("complex()")

    def item(self, *args: Any) -> Any:
        """NumPy's item(): refused, a traced value has no Python number yet."""
        raise self._concrete("x.item()")

    def __iter__(self) -> Iterator["Variable"]:
        return (self[i] for i in range(len(self)))

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        return NUMPY_PROTOCOL.get()["__array__"](self, *args, **kwargs)

    def __array_ufunc__(self, *args: Any, **kwargs: Any) -> Any:
        return NUMPY_PROTOCOL.get()["__array_ufunc__"](self, *args, **kwargs)

    def __array_function__(self, *args: Any, **kwargs: Any) -> Any:
        return NUMPY_PROTOCOL.get()["__array_function__"](self, *args, **kwargs)


class Op:
    """One operation: type, inputs, outputs, attrs and the user line that made it."""

    __slots__ = ("type", "inputs", "outputs", "attrs", "loc", "block", "origin")

    def __init__(
        self,
        type: str,
        inputs: list[Variable],
        outputs: list[Variable],
        attrs: dict[str, Any],
        loc: SourceLoc | None,
        block: "Block",
        origin: "Op | None" = None,
    ):
        self.type = type
        self.inputs = inputs
        self.outputs = outputs
        self.attrs = attrs
        self.loc = loc
        self.block = block
        self.origin = origin  # for a grad op: the forward op it differentiates

    def sub_blocks(self) -> list["Block"]:
        return [v for v in self.attrs.values() if isinstance(v, Block)]

    def __repr__(self) -> str:
        return f"<Op {self.type} {[v.name for v in self.outputs]}>"


class Block:
    """An ordered list of ops with parameters and results; may be nested in a parent block."""

    def __init__(self, program: "Program", idx: int, parent_idx: int, forward_block_idx: int = -1):
        self.program = program
        self.idx = idx
        self.parent_idx = parent_idx
        self.forward_block_idx = forward_block_idx
        self.ops: list[Op] = []
        self.params: list[Variable] = []
        self.results: list[Variable] = []
        self.owner: Op | None = None
        parent = self.parent
        self.depth: int = 0 if parent is None else parent.depth + 1
        #: The user's line of the outermost loop or branch this block is nested in.
        self.nest_loc: SourceLoc | None = None if parent is None else parent.nest_loc

    @property
    def parent(self) -> "Block | None":
        return self.program.blocks[self.parent_idx] if self.parent_idx >= 0 else None

    def is_ancestor_of(self, other: "Block") -> bool:
        """True if `other` is this block or nested inside it."""
        b: Block | None = other
        while b is not None:
            if b is self:
                return True
            b = b.parent
        return False

    def new_var(
        self,
        base: str,
        shape: Shape,
        dtype: np.dtype,
        *,
        kind: str = "tmp",
        stop_gradient: bool = False,
        exact_name: bool = False,
    ) -> Variable:
        """A uniquely named variable of this block. `shape` must be a tuple and `dtype` a NumPy
        dtype (the shape rules return them so; the verifier checks): this is the transform's
        innermost step, so nothing is converted here."""
        name = self.program.unique_name(base, exact=exact_name)
        return Variable(name, shape, dtype, self, stop_gradient, kind)

    def add_param(self, base: str, shape: Shape, dtype: np.dtype) -> Variable:
        var = self.new_var(base, shape, dtype, kind="block_param")
        self.params.append(var)
        return var

    def __repr__(self) -> str:
        return f"<Block {self.idx} parent={self.parent_idx} ops={len(self.ops)}>"


class Program:
    """A whole traced program: blocks, unique names, the inputs and the block being built."""

    def __init__(self) -> None:
        self.blocks: list[Block] = [Block(self, 0, -1)]
        self.inputs: list[Variable] = []
        self._names: dict[str, int] = {}
        self._taken: set[str] = set()
        self._block_stack: list[Block] = [self.blocks[0]]
        self.loop_count = 0
        self.capacity_checks: list[tuple[int, Variable, Op]] = []
        self.capacities: dict[int, int] = {}
        #: Concrete arrays the traced code closed over: each is an input of the compiled
        #: function (fed its current value on every call), not a baked-in constant.
        self.captures: list[Variable] = []
        self.captured: dict[int, tuple[Variable, Any]] = {}
        self.capture_values: list[Any] = []
        #: How a `dispatch.Weak` number becomes a Variable here (an eager call's or a tape's
        #: input fed its value); None: an inline constant.
        self.lift_weak: Any = None
        #: The user's line the ops appended now are attributed to (a tape's entries are
        #: replayed at the line that recorded them); None: the line that appends them.
        self.loc: Any = None
        #: Checks `() -> bool` of code traced into the program from outside srcgrad's view
        #: (sg.from_jax's functions): a compiled program is stale once one returns False (a
        #: global or closed-over name of the function was rebound).
        self.watched: list[Any] = []
        #: True once an effectful op (sg.debug.print) is appended: only then do the passes
        #: look for effects inside control flow (analysis.has_effect).
        self.effects = False
        #: Variables that hold a typed PRNG key's uint32 data (an argument or a closed-over key),
        #: with its PRNG implementation: sg.from_jax gives the JAX function the key back.
        self.key_data: dict[Variable, Any] = {}

    def global_block(self) -> Block:
        return self.blocks[0]

    def current_block(self) -> Block:
        return self._block_stack[-1]

    def create_block(self, parent: Block, forward_block_idx: int = -1) -> Block:
        block = Block(self, len(self.blocks), parent.idx, forward_block_idx)
        if parent.depth == 0:  # a grad block takes its forward block's line
            block.nest_loc = (
                self.blocks[forward_block_idx].nest_loc
                if forward_block_idx >= 0
                else user_location()
            )
        self.blocks.append(block)
        return block

    @contextlib.contextmanager
    def block_guard(self, block: Block) -> Iterator[Block]:
        self._block_stack.append(block)
        try:
            yield block
        finally:
            self._block_stack.pop()

    def unique_name(self, base: str, exact: bool = False) -> str:
        """`base` itself if free and `exact`, else `base_N` with the next free N."""
        if exact and base not in self._taken:
            self._taken.add(base)
            return base
        n = self._names.get(base, 0)
        name = f"{base}_{n}"
        while name in self._taken:
            n += 1
            name = f"{base}_{n}"
        self._names[base] = n + 1
        self._taken.add(name)
        return name

    def capture(self, value: Any, dtype: np.dtype) -> Variable:
        """The input that feeds the concrete array `value` (one per array object)."""
        hit = self.captured.get(id(value))
        if hit is not None and hit[0].dtype == dtype:
            return hit[0]
        var = self.global_block().new_var(
            "captured", tuple(value.shape), dtype, kind="capture", stop_gradient=True
        )
        self.captures.append(var)
        self.captured.setdefault(id(value), (var, value))
        self.capture_values.append(value)
        return var

    def rename(self, var: Variable, new: str) -> None:
        """Give `var` the name `new` (made unique)."""
        if var.name == new:
            return
        self._taken.discard(var.name)
        var.name = self.unique_name(new, exact=True)

    def dispose(self) -> None:
        """Empty the program, breaking its reference cycles (block <-> op <-> variable).

        Reference counting then frees its ops and variables at once, where the cyclic
        collector would have to walk them all first. For a program nothing reads any more:
        `Transformed.lower` disposes of the one it traced once the source is emitted.
        """
        for block in self.blocks:
            block.ops.clear()
            block.params.clear()
            block.results.clear()
            block.owner = None
        self.blocks.clear()
        self.inputs.clear()
        self.captures.clear()
        self.captured.clear()
        self.capture_values.clear()
        self.key_data.clear()
        self._block_stack.clear()

    def verify(self) -> None:
        VERIFIER(self)

    def __str__(self) -> str:
        return FORMATTER(self)


class _Tracing(threading.local):
    """Per-thread trace state: the stack of programs being recorded into."""

    def __init__(self) -> None:
        self.programs: list[Program] = []


_tracing = _Tracing()


def current_program() -> Program | None:
    """The program that ops are being recorded into (in this thread), or None outside any trace."""
    programs = _tracing.programs
    return programs[-1] if programs else None


#: How many `program_guard` scopes are open, in all threads together: while none is, no
#: thread is tracing, which the fast path of a compiled call reads before (instead of)
#: asking `current_program()`.
OPEN_SCOPES = [0]
_scopes_lock = threading.Lock()


@contextlib.contextmanager
def program_guard(program: Program) -> Iterator[Program]:
    """Record ops into `program` inside the `with` body (Fluid's program_guard)."""
    programs = _tracing.programs
    programs.append(program)
    with _scopes_lock:
        OPEN_SCOPES[0] += 1
    try:
        yield program
    finally:
        programs.pop()
        with _scopes_lock:
            OPEN_SCOPES[0] -= 1
