"""Lowering: a Program becomes the source of one Python function over jax.numpy / lax."""
from __future__ import annotations

import functools
import itertools
import linecache
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from srcgrad.ir import Block, Op, Program, Variable
from srcgrad.registry import REGISTRY

from .naming import identifier
from .passes import live_ops, loop_invariant

_SAFE_STR = re.compile(r"^[A-Za-z0-9_,\->]*$")
_counter = itertools.count()


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


class Emitter:
    """Writes one function: one line per op, nested functions for sub-blocks."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.indent = 1
        self.taken: set[str] = set()
        self.names = _Names(self.taken)
        self.consts: list[Any] = []
        self._origin: tuple[Op, str] | None = None
        self._loc: Any = None
        self._recorded: dict[Block, set[Op]] = {}

    def name(self, v: Variable) -> str:
        return self.names[v]

    def tuple(self, vs: Sequence[Variable]) -> str:
        items = ", ".join([self.names[v] for v in vs])
        return f"({items},)" if len(vs) == 1 else f"({items})"

    def line(self, text: str) -> None:
        self.lines.append("    " * self.indent + text)

    def assign(self, outs: Sequence[Variable], expr: str, unpack: bool = False) -> None:
        """`out = expr`, or `a, b = expr` when `unpack` (expr yields a tuple)."""
        if len(outs) == 1:
            lhs = self.names[outs[0]] + ("," if unpack else "")
        else:
            lhs = ", ".join([self.names[v] for v in outs])
        self.line(f"{lhs} = {expr}")

    def block_function(self, block: Block, kind: str) -> str:
        """Emit `def kind_N(carry): ...` (`operands` for a branch) for a sub-block; return its name."""
        fname = identifier(f"{kind}_{block.idx}", self.taken)
        arg = "operands" if kind in ("true", "false") else "carry"
        ops: Sequence[Op] = block.ops
        if kind == "body":
            hoisted, ops = loop_invariant(live_ops(ops, block.results), block)
            self.emit_ops(hoisted, [v for op in hoisted for v in op.outputs])
        self.line(f"def {fname}({arg}):")
        self.indent += 1
        saved = self._origin, self._loc
        if block.params:
            self.line(f"{', '.join(self.name(p) for p in block.params)}{',' if len(block.params) == 1 else ''} = {arg}")
        self.emit_ops(ops, block.results)
        results = block.results
        ret = self.name(results[0]) if kind == "cond" else self.tuple(results)
        self.line(f"return {ret}")
        self._origin, self._loc = saved
        self.indent -= 1
        return fname

    def emit_ops(self, ops: Sequence[Op], needed: Sequence[Variable]) -> None:
        names, lines = self.names, self.lines
        pad = "    " * self.indent
        for op in live_ops(ops, needed):
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
                where = f" ({fwd.loc.safe()})" if fwd.loc else ""
                out = f" -> {self.names[fwd.outputs[0]]}" if len(fwd.outputs) == 1 else ""
                self.line(f"# {what} {fwd.type}{out}{where}")
                self._origin, self._loc = (fwd, what), None
            return
        self._origin = None
        loc = op.loc
        if loc is not self._loc and loc is not None and loc != self._loc:
            self.line(f"# {loc.safe()}")
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
        self.consts.append(jnp.asarray(value))
        return f"_consts[{len(self.consts) - 1}]"


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
    return Source("\n".join([f"def {fname}({params}):"] + body) + "\n", fname, em.consts)


def load(src: Source) -> Lowered:
    """Compile emitted source under a registered file name (for tracebacks, inspect, pdb)."""
    filename = f"<srcgrad:{src.name}:{next(_counter)}>"
    linecache.cache[filename] = (len(src.text), None, src.text.splitlines(True), filename)
    names: dict[str, Any] = {"jnp": jnp, "lax": lax, "jax": jax, "_consts": src.consts}
    code = compile(src.text, filename, "exec")
    namespace = dict(names)
    exec(code, namespace)
    return Lowered(src.text, namespace[src.name], filename, code, names)


def lower_program(program: Program, feeds: Sequence[Variable], fetches: Sequence[Variable],
                  checks: Sequence[Variable] = (), name: str = "srcgrad_fn") -> Lowered:
    """`emit_program`, then `load`."""
    return load(emit_program(program, feeds, fetches, checks, name))
