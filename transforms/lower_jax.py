"""Lowering: a Program becomes the source of one Python function over jax.numpy / lax."""
from __future__ import annotations

import itertools
import linecache
import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from srcgrad.ir import Block, Op, Program, Variable
from srcgrad.registry import REGISTRY

from .naming import identifier

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
        if not hasattr(jnp, value.name):
            raise TypeError(f"dtype {value.name} has no jax.numpy name")
        return f"jnp.{value.name}"
    if isinstance(value, str) and _SAFE_STR.match(value):
        return repr(value)
    raise TypeError(f"attribute value {value!r} cannot be written into source")


@dataclass
class Lowered:
    """Emitted source and the Python function compiled from it."""

    source: str
    fn: Callable[..., Any]
    filename: str


class Emitter:
    """Writes one function: one line per op, nested functions for sub-blocks."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.indent = 1
        self.names: dict[Variable, str] = {}
        self.taken: set[str] = set()
        self.consts: list[Any] = []
        self._origin: tuple[Op, str] | None = None
        self._loc: Any = None
        self._positions: dict[Block, dict[Op, int]] = {}

    def name(self, v: Variable) -> str:
        n = self.names.get(v)
        if n is None:
            n = self.names[v] = identifier(v.name, self.taken)
        return n

    def tuple(self, vs: Sequence[Variable]) -> str:
        items = ", ".join(self.name(v) for v in vs)
        return f"({items},)" if len(vs) == 1 else f"({items})"

    def line(self, text: str) -> None:
        self.lines.append("    " * self.indent + text)

    def assign(self, outs: Sequence[Variable], expr: str, unpack: bool = False) -> None:
        """`out = expr`, or `a, b = expr` when `unpack` (expr yields a tuple)."""
        lhs = ", ".join(self.name(v) for v in outs) + ("," if unpack and len(outs) == 1 else "")
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
        for op in live_ops(ops, needed):
            self._comment(op)
            row = REGISTRY[op.type]
            if row.lower_stmt is not None:
                row.lower_stmt(self, op)
            elif op.type == "constant":
                self.assign(op.outputs, self._constant(op))
            else:
                args = [self.name(v) for v in op.inputs]
                attrs = {k: literal(v, op.attrs.get("dtype") if k == "value" else None)
                         for k, v in op.attrs.items()}
                lower = row.lower
                expr = lower(args, attrs) if callable(lower) else lower.format(*args, **attrs)
                self.assign(op.outputs, expr)

    def _comment(self, op: Op) -> None:
        if op.origin is not None:
            fwd = op.origin
            what = "recorded for the grad of" if _records(op, self._position) else "grad of"
            if (fwd, what) != self._origin:
                where = f" ({fwd.loc.safe()})" if fwd.loc else ""
                out = f" -> {self.name(fwd.outputs[0])}" if len(fwd.outputs) == 1 else ""
                self.line(f"# {what} {fwd.type}{out}{where}")
                self._origin, self._loc = (fwd, what), None
            return
        self._origin = None
        if op.loc is not None and op.loc != self._loc:
            self.line(f"# {op.loc.safe()}")
            self._loc = op.loc

    def _position(self, op: Op) -> int:
        """The index of `op` in its block (one scan per block, not one per op)."""
        pos = self._positions.get(op.block)
        if pos is None:
            pos = self._positions[op.block] = {o: i for i, o in enumerate(op.block.ops)}
        return pos[op]

    def _constant(self, op: Op) -> str:
        value, dt = op.attrs["value"], op.attrs["dtype"]
        if op.attrs["shape"] == () and isinstance(value, (bool, int, float, complex)):
            return f"jnp.array({literal(value, dt)}, {literal(dt)})"
        self.consts.append(jnp.asarray(value))
        return f"_consts[{len(self.consts) - 1}]"


def _records(op: Op, position: Callable[[Op], int]) -> bool:
    """True for an op its grad maker put on the forward side (residual records, counters)."""
    fwd = op.origin
    if op.block is fwd.block:
        return position(op) < position(fwd)
    return any(sub.is_ancestor_of(op.block) for sub in fwd.sub_blocks())


def loop_invariant(ops: Sequence[Op], body: Block) -> tuple[list[Op], list[Op]]:
    """Split a loop body's ops into those computed once before the loop and the rest.

    An op is hoisted when it reads only values from outside the body (or of hoisted ops) and
    its result is no larger than its largest input: the transposes and reshapes of captured
    weights that grad makers emit. XLA does not hoist such cheap ops out of while loops on
    its own. Ops without inputs (constants) stay in the body, where XLA folds them.
    """
    inner = set(body.params)
    hoisted, rest = [], []
    for op in ops:
        if (op.inputs and not op.sub_blocks() and op.type != "fill_zeros_like"
                and not any(v in inner for v in op.inputs)
                and max(v.size for v in op.outputs) <= max(v.size for v in op.inputs)):
            hoisted.append(op)
        else:
            rest.append(op)
            inner.update(op.outputs)
    return hoisted, rest


def live_ops(ops: Sequence[Op], needed: Sequence[Variable]) -> list[Op]:
    """The ops whose outputs (transitively) reach `needed`, in order."""
    want = set(needed)
    keep = []
    for op in reversed(ops):
        if any(v in want for v in op.outputs):
            keep.append(op)
            want.update(op.inputs)
    keep.reverse()
    return keep


def lower_program(program: Program, feeds: Sequence[Variable], fetches: Sequence[Variable],
                  checks: Sequence[Variable] = (), name: str = "srcgrad_fn") -> Lowered:
    """Emit `def name(*feeds): ... return (fetches), (checks)` and compile it."""
    em = Emitter()
    fname = identifier(name, em.taken)
    params = ", ".join(em.name(v) for v in feeds)
    body_start = len(em.lines)
    em.emit_ops(program.global_block().ops, list(fetches) + list(checks))
    ret = f"return {em.tuple(fetches)}, {em.tuple(checks)}"
    em.line(ret)
    body = em.lines[body_start:]
    header = [f"def {fname}({params}):"]
    source = "\n".join(header + body) + "\n"
    filename = f"<srcgrad:{fname}:{next(_counter)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict[str, Any] = {"jnp": jnp, "lax": lax, "jax": jax, "_consts": em.consts}
    exec(compile(source, filename, "exec"), namespace)
    return Lowered(source, namespace[fname], filename)
