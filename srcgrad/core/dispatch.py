"""One dispatch (layer L2): every sg op call asks `call` which interpreter runs it.

    traced   a program is being built (sg.grad / sg.jit / sg.trace, program_guard): the
             op's front appends it to the current block;
    tape     an sg.Tensor is among the arguments, or ops are being recorded
             (sg.autograd.record()): the imperative interpreter computes it and records it;
    eager    otherwise: the eager interpreter computes it with JAX.

No other module decides the mode. The eager and tape interpreters live in higher layers
(srcgrad/compiled/eager.py, srcgrad/imperative/autograd.py): they are the hooks `EAGER` and
`TAPE`, which srcgrad/wiring.py sets, as JAX's trace types register with its core.

A Python number passed where the op declares an array operand (`defop(..., operands=...)`)
is wrapped as a `Weak` value: it is weakly typed (it takes the other operand's dtype, as in
JAX) and, outside a trace, it is a runtime input of the compiled call, keyed by its position
and Python type but not by its value, so `3.0 - x` never reuses `x - 3.0`'s program and a
changing learning rate compiles nothing new. Attribute arguments (axes, shapes, an integer
exponent) stay static and are keyed by type and value.

Layer L2 (core): see docs/design.md.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, NamedTuple, Sequence

import jax
import numpy as np

from ..base.hooks import Hook
from ..ir.program import Variable, current_program
from ..base.errors import SrcgradError, user_location
from ..base.traceback_filter import leave_out_internal_frames

Leaves = list
Interpreter = Callable[[Callable[..., Any], Leaves, Any], Any]


class Weak:
    """A Python number in an operand position: weakly typed, fed at run time."""

    __slots__ = ("value", "var")

    def __init__(self, value: int | float | complex):
        self.value = value
        self.var: Any = None  # the Variable it was lifted to (builder.as_var)

    def __repr__(self) -> str:
        return f"Weak({self.value!r})"


class Operands:
    """Which parameters of a front are array operands: positions and keyword names."""

    __slots__ = ("positions", "names")

    def __init__(self, front: Callable[..., Any], names: Sequence[str]):
        params = list(inspect.signature(front).parameters)
        unknown = set(names) - set(params)
        if unknown:
            raise ValueError(f"{front.__name__}: operands {sorted(unknown)} are not parameters")
        self.names = frozenset(names)
        self.positions = tuple(i for i, p in enumerate(params) if p in self.names)


class TapeInterpreter(NamedTuple):
    """The imperative interpreter (srcgrad/imperative/autograd.py): `wants(leaves)` says
    whether it takes a call, `run(fn, leaves, tree)` records and computes it; `leaf_types`
    (sg.Tensor) are leaves of the calls' pytrees."""

    run: Interpreter
    wants: Callable[[Leaves], bool]
    leaf_types: tuple[type, ...]


def _no_tape(fn: Callable[..., Any], leaves: Leaves, tree: Any) -> Any:
    raise RuntimeError("srcgrad's tape interpreter is not set: import srcgrad")


def _tape_set(tape: TapeInterpreter) -> None:
    global _LEAF_TYPES
    _LEAF_TYPES = frozenset(tape.leaf_types)
    _PLAIN_LEAVES.update(tape.leaf_types)


#: The interpreters above the op layer, which srcgrad/wiring.py sets.
EAGER: Hook[Interpreter] = Hook(
    "srcgrad.core.dispatch.EAGER", "the eager interpreter (srcgrad/compiled/eager.py)"
)
TAPE: Hook[TapeInterpreter] = Hook(
    "srcgrad.core.dispatch.TAPE",
    "the tape interpreter (srcgrad/imperative/autograd.py)",
    default=TapeInterpreter(_no_tape, lambda leaves: False, ()),
    on_set=_tape_set,
)


def leaf_types() -> tuple[type, ...]:
    """The types that are leaves of an op call's pytree besides arrays (sg.Tensor)."""
    return TAPE.value.leaf_types


def tracing(args: Any) -> bool:
    """True when a call on `args` is traced: a program is being built, or a traced value is
    among the arguments. (A transformed function asks this to run inline, not compiled.)"""
    return tracing_leaves(jax.tree_util.tree_leaves(args))


def tracing_leaves(leaves: list) -> bool:
    """`tracing` of arguments already flattened."""
    if current_program() is not None:
        return True
    for leaf in leaves:
        if type(leaf) is Variable:
            return True
    return False


def _is_leaf(x: Any) -> bool:
    return type(x) in _LEAF_TYPES


#: TAPE's leaf types as a set, for the flattening of every call.
_LEAF_TYPES: frozenset[type] = frozenset()


_NUMBERS: dict[tuple[str, np.dtype], jax.Array] = {}
#: Puts a host scalar on the device through jax.jit's fast path (one program per dtype):
#: 6-10 us here, where `jax.device_put` and `jax.numpy.asarray` took 30-65 us.
_PUT = jax.jit(lambda a: a)


def on_device(value: int | float | complex, dtype: np.dtype) -> jax.Array:
    """A Python number (a weak operand, an int index) as a device array of `dtype`, kept for
    the numbers seen last (`x * 2.0`, `emb[word]` then cost no transfer per call; a
    schedule's new values cost one each). Made outside any JAX trace, also when called
    inside one (an sg op in a user's jax.jit), so what is kept is never a tracer."""
    key = (repr(value), dtype)  # repr: 0.0 and -0.0 differ
    arr = _NUMBERS.get(key)
    if arr is None:
        if len(_NUMBERS) >= 256:
            _NUMBERS.clear()
        with jax.ensure_compile_time_eval():
            arr = _NUMBERS[key] = _PUT(np.asarray(value, dtype))
    return arr


def _number(x: Any) -> bool:
    t = type(x)
    return t is float or t is int or t is complex


def weaken(args: tuple, kwargs: dict[str, Any], operands: Operands) -> tuple[tuple, dict[str, Any]]:
    """`args`/`kwargs` with the Python numbers in operand positions wrapped as `Weak`."""
    n = len(args)
    for i in operands.positions:
        if i < n and _number(args[i]):
            args = tuple(
                Weak(a) if i in operands.positions and _number(a) else a for i, a in enumerate(args)
            )
            break
    if kwargs and any(k in operands.names and _number(v) for k, v in kwargs.items()):
        kwargs = {
            k: Weak(v) if k in operands.names and _number(v) else v for k, v in kwargs.items()
        }
    return args, kwargs


def call(
    fn: Callable[..., Any], args: tuple, kwargs: dict[str, Any], operands: Operands | None = None
) -> Any:
    """`fn(*args, **kwargs)` by the interpreter the arguments and the context pick."""
    if current_program() is not None:
        return fn(*args, **kwargs)
    return _outside(fn, args, kwargs, operands)


def _outside(
    fn: Callable[..., Any], args: tuple, kwargs: dict[str, Any], operands: Operands | None
) -> Any:
    """A call outside any trace: the tape's or the eager interpreter's."""
    if operands is not None:
        args, kwargs = weaken(args, kwargs, operands)
    leaves, tree = _flatten(args, kwargs)
    tape = TAPE.value
    if tape.wants(leaves):
        return tape.run(fn, leaves, tree)
    return EAGER.get()(fn, leaves, tree)


#: Types that are leaves as they are (the common arguments of an op call), besides the
#: registered leaf types; a call whose positional arguments are all of them is flattened
#: without walking a pytree.
_PLAIN_LEAVES = {float, int, bool, complex, str, Weak, type(np.zeros(0)), type(jax.numpy.zeros(0))}
_FLAT_TREES: dict[int, Any] = {}


def _flatten(args: tuple, kwargs: dict[str, Any]) -> tuple[list, Any]:
    """`tree_flatten((args, kwargs))` with sg.Tensor a leaf."""
    if not kwargs:
        plain = _PLAIN_LEAVES
        for a in args:
            if type(a) not in plain:
                break
        else:
            tree = _FLAT_TREES.get(len(args))
            if tree is None:
                tree = _FLAT_TREES[len(args)] = jax.tree_util.tree_structure(
                    (tuple(range(len(args))), {})
                )
            return list(args), tree
    return jax.tree_util.tree_flatten((args, kwargs), is_leaf=_is_leaf)


def dispatched(fn: Callable[..., Any], operands: Sequence[str] = ()) -> Callable[..., Any]:
    """`fn` (a traced front) as a user function that dispatches each call."""
    spec = Operands(fn, operands) if operands else None

    def _user_fn(*args: Any, **kwargs: Any) -> Any:  # "_": error messages name `fn`
        try:
            if current_program() is not None:
                return fn(*args, **kwargs)
            return _outside(fn, args, kwargs, spec)
        except Exception as e:  # the error shows the user's frames only (inline: no frame)
            hint = _keyword_hint(fn, kwargs) if isinstance(e, TypeError) else None
            if hint is None:
                leave_out_internal_frames(e)
                raise
        try:  # (outside the handler: the TypeError is not chained to this one)
            raise KeywordError(hint, loc=user_location())
        except KeywordError as k:
            leave_out_internal_frames(k)
            raise

    return functools.wraps(fn)(_user_fn)


#: PyTorch's keywords -> NumPy's, which srcgrad's ops take (`sg.sum(x, dim=0)`).
TORCH_KEYWORDS = {"dim": "axis", "keepdim": "keepdims"}


def _keyword_hint(fn: Callable[..., Any], kwargs: dict[str, Any]) -> str | None:
    """The message for a PyTorch keyword given where the op takes NumPy's, else None.
    srcgrad keeps NumPy's names alone: PyTorch's `dim` does not always mean `axis`
    (`torch.max(x, dim)` returns values and indices)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return None
    for torch_name, numpy_name in TORCH_KEYWORDS.items():
        if torch_name in kwargs and torch_name not in params and numpy_name in params:
            return (
                f"sg.{fn.__name__}() got an unexpected keyword argument {torch_name!r}: "
                f"srcgrad's ops take NumPy's keywords; use {numpy_name}={kwargs[torch_name]!r} "
                f"(PyTorch's {torch_name}=)"
            )
    return None


class KeywordError(SrcgradError, TypeError):
    """A keyword an op does not take, with the name it takes instead."""
