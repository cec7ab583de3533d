"""Lowering: a Program becomes the source of one Python function over jax.numpy / lax."""
from __future__ import annotations

import functools
import itertools
import linecache
import math
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from srcgrad.ir import Block, Op, Program, Variable
from srcgrad.registry import REGISTRY
from srcgrad.verify import check

from .naming import identifier
from .passes import live_ops, loop_invariant

_SAFE_STR = re.compile(r"^[A-Za-z0-9_,\->]*$")
_counter = itertools.count()
_counter_lock = threading.Lock()
#: Array constants of at most this many elements are written into the source; larger ones
#: are passed in the `_consts` side table.
INLINE_CONST_SIZE = 16
_PAD = "    "  # every emitted function is at top level: its body is indented once


def literal(value: Any, dtype: np.dtype | None = None) -> str:
    """Python source for an attribute value; refuses anything that is not plain data.

    A float that is a value of `dtype` is written in that dtype's shortest round-tripping
    form (1e-06, not 9.999999974752427e-07, for a float32).
    """
    if isinstance(value, float) and isinstance(dtype, np.dtype) and dtype.kind == "f":
        value = dtype.type(value)
    if value is None or isinstance(value, (bool, np.bool_)):
        return repr(bool(value)) if value is not None else "None"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        f = float(value)
        if not math.isfinite(f):
            return f"float('{f}')"
        return str(value) if isinstance(value, np.floating) else repr(f)
    if isinstance(value, (complex, np.complexfloating)):
        return f"complex({literal(value.real)}, {literal(value.imag)})"
    if isinstance(value, (tuple, list)):
        items = ", ".join(literal(v) for v in value)
        return f"({items},)" if len(value) == 1 else f"({items})"
    if isinstance(value, np.dtype):
        return _dtype_literal(value)
    if isinstance(value, str) and _SAFE_STR.match(value):
        return repr(value)
    raise TypeError(f"attribute value {value!r} cannot be written into source")


@functools.lru_cache(maxsize=None)
def _dtype_literal(dtype: np.dtype) -> str:
    """`jnp.float32` for float32 (memoized: building `dtype.name` takes microseconds)."""
    if not hasattr(jnp, dtype.name):
        raise TypeError(f"dtype {dtype.name} has no jax.numpy name")
    return f"jnp.{dtype.name}"


def _traced(tree: Any) -> bool:
    return any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(tree))


class EagerLax:
    """`jax.lax` with `while_loop` and `cond` run as Python `while` / `if` over concrete
    arrays, so that a breakpoint in an emitted loop body (or grad body, or branch) fires
    once per iteration with real values. Under a JAX trace they are lax's own."""

    def __getattr__(self, name: str) -> Any:
        return getattr(lax, name)

    @staticmethod
    def while_loop(cond_fun: Callable[[Any], Any], body_fun: Callable[[Any], Any], init: Any) -> Any:
        carry = init
        while True:
            go = cond_fun(carry)
            if _traced((go, carry)):  # values of a JAX trace (captured or carried): lax's loop
                return lax.while_loop(cond_fun, body_fun, carry)
            if not bool(go):
                return carry
            carry = body_fun(carry)

    @staticmethod
    def cond(pred: Any, true_fun: Callable[[Any], Any], false_fun: Callable[[Any], Any],
             operands: Any) -> Any:
        if _traced((pred, operands)):
            return lax.cond(pred, true_fun, false_fun, operands)
        return true_fun(operands) if bool(pred) else false_fun(operands)


@dataclass
class Lowered:
    """Emitted source and the Python function compiled from it."""

    source: str
    fn: Callable[..., Any]
    filename: str
    code: Any = None
    namespace: dict[str, Any] = field(default_factory=dict)

    def eager_fn(self) -> Callable[..., Any]:
        """The same source run eagerly: loops and branches as Python `while` / `if` over
        concrete arrays (EagerLax), for stepping through them in a debugger."""
        namespace = dict(self.namespace, lax=EagerLax())
        exec(self.code, namespace)
        return namespace[self.fn.__name__]


class _Names(dict):
    """Variable → its identifier, made (unique among `taken`) on first use."""

    def __init__(self, taken: set[str]):
        super().__init__()
        self.taken = taken

    def __missing__(self, v: Variable) -> str:
        n = self[v] = identifier(v.name, self.taken)
        return n


class _Frame:
    """One emitted function: its lines, what it defines and reads, in order of emission."""

    __slots__ = ("lines", "params", "items")

    def __init__(self, params: Sequence[Variable] = ()):
        self.lines: list[str] = []
        self.params = params
        self.items: list[Op | Variable] = []  # emitted ops, and values read by statements

    def captures(self) -> list[Variable]:
        """Values the function reads but does not define: passed in as `captured`."""
        defined = set(self.params)
        reads: dict[Variable, None] = {}
        for item in self.items:
            if isinstance(item, Variable):
                reads[item] = None
                continue
            defined.update(item.outputs)
            if REGISTRY[item.type].lower_stmt is None:  # a statement records its own reads
                reads.update(dict.fromkeys(item.inputs))
        return [v for v in reads if v not in defined]


class Emitter:
    """Writes one module: the program's function, one line per op, then one top-level
    function per sub-block (so nesting depth is not bounded by Python's indentation limit).

    A block function receives the outer values it reads as a `captured` tuple bound with
    `partial`; names are unique across the module, so a value keeps its name everywhere.
    """

    def __init__(self) -> None:
        self.frame = _Frame()
        self.lines = self.frame.lines
        self.taken: set[str] = set()
        self.names = _Names(self.taken)
        self.consts: list[Any] = []
        self.functions: list[list[str]] = []
        self._origin: tuple[Op, str] | None = None
        self._loc: Any = None
        self._recorded: dict[Block, set[Op]] = {}

    def name(self, v: Variable) -> str:
        self.frame.items.append(v)
        return self.names[v]

    def tuple(self, vs: Sequence[Variable]) -> str:
        self.frame.items.extend(vs)
        items = ", ".join([self.names[v] for v in vs])
        return f"({items},)" if len(vs) == 1 else f"({items})"

    def line(self, text: str) -> None:
        self.lines.append(_PAD + text)

    def assign(self, outs: Sequence[Variable], expr: str, unpack: bool = False) -> None:
        """`out = expr`, or `a, b = expr` when `unpack` (expr yields a tuple)."""
        if len(outs) == 1:
            lhs = self.names[outs[0]] + ("," if unpack else "")
        else:
            lhs = ", ".join([self.names[v] for v in outs])
        self.line(f"{lhs} = {expr}")

    def unpack(self, vs: Sequence[Variable], source: str) -> None:
        """`a, b = source` (`a, = source` for one value)."""
        self.line(f"{', '.join(self.names[v] for v in vs)}{',' if len(vs) == 1 else ''} = {source}")

    def block_function(self, block: Block, kind: str) -> str:
        """Emit the top-level `def kind_N(carry[, captured]): ...` (`operands` for a branch) of
        a sub-block; return the expression that passes it to lax: its name, or a `partial`
        binding the outer values it reads."""
        fname = identifier(f"{kind}_{block.idx}", self.taken)
        arg = "operands" if kind in ("true", "false") else "carry"
        ops: Sequence[Op] = block.ops
        if kind == "body":
            hoisted, ops = loop_invariant(live_ops(ops, block.results), block)
            self.emit_ops(hoisted, [v for op in hoisted for v in op.outputs])
        slot = len(self.functions)
        self.functions.append([])
        outer, saved = self.frame, (self._origin, self._loc)
        self.frame = _Frame(block.params)
        self.lines, self._origin, self._loc = self.frame.lines, None, None
        if block.params:
            self.unpack(block.params, arg)
        self.emit_ops(ops, block.results)
        results = block.results
        ret = self.name(results[0]) if kind == "cond" else self.tuple(results)
        self.line(f"return {ret}")
        captured = self.frame.captures()
        body = self.frame.lines
        self.frame, self.lines = outer, outer.lines
        self._origin, self._loc = saved
        if not captured:
            self.functions[slot] = [f"def {fname}({arg}):"] + body
            return fname
        n = 1 if block.params else 0  # after the line that unpacks the parameters
        self.functions[slot] = ([f"def {fname}({arg}, captured):"] + body[:n]
                                + [f"{_PAD}{', '.join(self.names[v] for v in captured)}"
                                   f"{',' if len(captured) == 1 else ''} = captured"] + body[n:])
        return f"partial({fname}, captured={self.tuple(captured)})"

    def emit_ops(self, ops: Sequence[Op], needed: Sequence[Variable]) -> None:
        names, lines = self.names, self.lines
        pad = _PAD
        live = live_ops(ops, needed)
        self.frame.items.extend(live)
        for op in live:
            self._comment(op)
            row = REGISTRY[op.type]
            if row.lower_stmt is not None:
                row.lower_stmt(self, op)
                continue
            if op.type == "constant":
                expr = self._constant(op)
            else:
                args = [names[v] for v in op.inputs]
                lower = row.lower
                if op.attrs:
                    attrs = _attr_literals(op.attrs)
                    expr = lower(args, attrs) if callable(lower) else lower.format(*args, **attrs)
                else:
                    expr = lower(args, {}) if callable(lower) else lower.format(*args)
            if len(op.outputs) == 1:  # self.assign, inlined: this is once per op
                lines.append(f"{pad}{names[op.outputs[0]]} = {expr}")
            else:
                self.assign(op.outputs, expr)

    def _comment(self, op: Op) -> None:
        fwd = op.origin
        if fwd is not None:
            what = "recorded for the grad of" if self._records(op) else "grad of"
            if self._origin is None or self._origin[0] is not fwd or self._origin[1] != what:
                where = f" in {fwd.loc.safe_where()}" if fwd.loc else ""
                out = f" -> {self.names[fwd.outputs[0]]}" if len(fwd.outputs) == 1 else ""
                self.line(f"# {what} {fwd.type}{out}{where}")
                self._origin, self._loc = (fwd, what), None
            return
        self._origin = None
        loc = op.loc
        if loc is not self._loc and loc is not None and loc != self._loc:
            self.line(f"# in {loc.safe_where()}")
            self._loc = loc

    def _records(self, op: Op) -> bool:
        """True for an op its grad maker put on the forward side (residual records, counters)."""
        fwd = op.origin
        if op.block is fwd.block:
            recorded = self._recorded.get(op.block)
            if recorded is None:  # one scan per block, not one per op
                recorded = self._recorded[op.block] = _recorded_ops(op.block)
            return op in recorded
        return any(sub.is_ancestor_of(op.block) for sub in fwd.sub_blocks())

    def _constant(self, op: Op) -> str:
        value, dt = op.attrs["value"], op.attrs["dtype"]
        if op.attrs["shape"] == () and isinstance(value, (bool, int, float, complex)):
            return f"jnp.array({literal(value, dt)}, {literal(dt)})"
        if np.size(value) <= INLINE_CONST_SIZE:
            return f"jnp.asarray({_array_literal(np.asarray(value).astype(dt), dt)}, {literal(dt)})"
        self.consts.append(jnp.asarray(value))
        return f"_consts[{len(self.consts) - 1}]"


def _array_literal(arr: np.ndarray, dtype: np.dtype) -> str:
    """`[[1.0, 2.0], [3.0, 4.0]]`: a small array as nested lists of literals in its dtype."""
    if arr.ndim == 0:
        return literal(arr.item(), dtype)
    return "[" + ", ".join(_array_literal(a, dtype) for a in arr) + "]"


def _recorded_ops(block: Block) -> set[Op]:
    """The grad ops of `block` that come before the forward op (of `block`) they differentiate."""
    seen: set[Op] = set()
    recorded = set()
    for op in block.ops:
        if op.origin is not None and op.origin.block is block and op.origin not in seen:
            recorded.add(op)
        seen.add(op)
    return recorded


def _attr_literals(attrs: dict[str, Any]) -> dict[str, str]:
    """An op's attrs as Python literals (`value` in the op's `dtype`)."""
    return {k: literal(v, attrs.get("dtype") if k == "value" else None) for k, v in attrs.items()}


@dataclass
class Source:
    """Emitted source of one function, before it is compiled."""

    text: str
    name: str
    consts: list[Any]


def emit_program(program: Program, feeds: Sequence[Variable], fetches: Sequence[Variable],
                 checks: Sequence[Variable] = (), name: str = "srcgrad_fn") -> Source:
    """Emit `def name(*feeds): ... return (fetches), (checks)`."""
    em = Emitter()
    fname = identifier(name, em.taken)
    params = ", ".join(em.name(v) for v in feeds)
    body_start = len(em.lines)
    em.emit_ops(program.global_block().ops, list(fetches) + list(checks))
    em.line(f"return {em.tuple(fetches)}, {em.tuple(checks)}")
    body = em.lines[body_start:]
    parts = [[f"def {fname}({params}):"] + body] + em.functions
    return Source("\n\n".join("\n".join(p) for p in parts) + "\n", fname, em.consts)


def load(src: Source) -> Lowered:
    """Compile emitted source under a registered file name (for tracebacks, inspect, pdb)."""
    with _counter_lock:
        n = next(_counter)
    filename = f"<srcgrad:{src.name}:{n}>"
    linecache.cache[filename] = (len(src.text), None, src.text.splitlines(True), filename)
    names: dict[str, Any] = {"jnp": jnp, "lax": lax, "jax": jax, "partial": functools.partial,
                             "_consts": src.consts}
    code = compile(src.text, filename, "exec")
    namespace = dict(names)
    exec(code, namespace)
    return Lowered(src.text, namespace[src.name], filename, code, names)


def lower_program(program: Program, feeds: Sequence[Variable], fetches: Sequence[Variable],
                  checks: Sequence[Variable] = (), name: str = "srcgrad_fn") -> Lowered:
    """Verify (with SRCGRAD_ENABLE_CHECKS=1), `emit_program`, then `load`."""
    check(program, "the transforms, before lowering")
    return load(emit_program(program, feeds, fetches, checks, name))
