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


def literal(value: Any) -> str:
    """Python source for an attribute value; refuses anything that is not plain data."""
    if value is None or isinstance(value, (bool, np.bool_)):
        return repr(bool(value)) if value is not None else "None"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        f = float(value)
        return repr(f) if math.isfinite(f) else f"float('{f}')"
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
        self._origin: Op | None = None
        self._loc: Any = None

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
        """Emit `def kind_N(carry): ...` for a sub-block and return its name."""
        fname = identifier(f"{kind}_{block.idx}", self.taken)
        arg = "carry"
        self.line(f"def {fname}({arg}):")
        self.indent += 1
        saved = self._origin, self._loc
        if block.params:
            self.line(f"{', '.join(self.name(p) for p in block.params)}{',' if len(block.params) == 1 else ''} = {arg}")
        self.emit_ops(block.ops, block.results)
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
                attrs = {k: literal(v) for k, v in op.attrs.items()}
                lower = row.lower
                expr = lower(args, attrs) if callable(lower) else lower.format(*args, **attrs)
                self.assign(op.outputs, expr)

    def _comment(self, op: Op) -> None:
        if op.origin is not None:
            if op.origin is not self._origin:
                fwd = op.origin
                where = f" ({fwd.loc.safe()})" if fwd.loc else ""
                outs = ", ".join(self.name(v) for v in fwd.outputs)
                self.line(f"# grad of {fwd.type} -> {outs}{where}")
                self._origin = fwd
            return
        self._origin = None
        if op.loc is not None and op.loc != self._loc:
            self.line(f"# {op.loc.safe()}")
            self._loc = op.loc

    def _constant(self, op: Op) -> str:
        value, dt = op.attrs["value"], op.attrs["dtype"]
        if op.attrs["shape"] == () and isinstance(value, (bool, int, float, complex)):
            return f"jnp.array({literal(value)}, {literal(dt)})"
        self.consts.append(jnp.asarray(value))
        return f"_consts[{len(self.consts) - 1}]"


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
