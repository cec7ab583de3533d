"""Compiling a tape's backward: its structure key, the ops to emit, the jitted function.

The key of a tape is its structure, never its values: op types, how each op's inputs are
wired to earlier values, shapes, dtypes, attributes, and which values were recorded. It is
built incrementally (each op is keyed once, when first asked for), so a tape that grows by
`create_graph` or a repeated backward keys only its new ops.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import jax
import numpy as np

from .ir import Block, Op, Program, Variable
from .transforms.lower_jax import Emitter, Source, load
from .transforms.naming import identifier
from .transforms.passes import free_vars, walk_blocks
from .verify import check

#: Attribute types keyed by (type, value) at once (floats are keyed by repr: -0.0, nan).
_PLAIN = frozenset({int, bool, str, type(None)})

_compiles = 0
_compiles_lock = threading.Lock()


def compile_count() -> int:
    """How many backward programs imperative mode has compiled (in this process)."""
    return _compiles


@dataclass
class Compiled:
    """A compiled backward: the tape values it is fed (by position in the structure's
    numbering) and which of the asked-for gradients it returns."""

    fn: Callable[..., Any]
    feeds: list[int]
    returned: list[bool]
    source: str


def plan(ops: Sequence[Op], fetch: Sequence[Variable], known: set[Variable]
         ) -> tuple[list[Op], list[Variable]]:
    """The ops that compute `fetch` from the values in `known`, and the known values read."""
    want = set(fetch)
    keep = []
    for op in reversed(ops):
        if any(o in want and o not in known for o in op.outputs):
            keep.append(op)
            want.update(op.inputs)
            for sub in op.sub_blocks():
                for b in walk_blocks(sub):
                    want.update(free_vars(b))
    keep.reverse()
    return keep, [v for v in want if v in known]


def emit(prog: Program, ops: list[Op], feeds: list[Variable], fetch: list[Variable]
         ) -> tuple[Callable[..., Any], str]:
    """Emit `def tape_backward(*feeds): ... return fetch` and jit it."""
    global _compiles
    check(prog, "the tape's backward pass")
    em = Emitter()
    fname = identifier("tape_backward", em.taken)
    params = ", ".join(em.name(v) for v in feeds)
    start = len(em.lines)
    em.emit_ops(ops, fetch)
    em.line(f"return {em.tuple(fetch)}")
    parts = [[f"def {fname}({params}):"] + em.lines[start:]] + em.functions
    lowered = load(Source("\n\n".join("\n".join(p) for p in parts) + "\n", fname, em.consts))
    with _compiles_lock:
        _compiles += 1
    return jax.jit(lowered.fn), lowered.source


def structure(st: "Structure", program: Program, values: dict[Variable, Any]
              ) -> tuple[tuple, list[Variable], dict[Variable, int]]:
    """The tape's structure as a hashable key (op types, wiring, shapes, dtypes, attrs, and
    which values were recorded; never the values), its Variables in order of first
    appearance, and their positions. Ops are keyed once each, when first asked for."""
    ops = program.global_block().ops
    for op in ops[st.n_ops:]:
        st.parts.append(st.op_key(op))
    st.n_ops = len(ops)
    for v in program.inputs:  # inputs no op reads
        st.number(v)
    known = tuple([v in values for v in st.order])
    return (tuple(st.parts), known), st.order, st.num


class Structure:
    """The structure key of a tape's ops so far, and the numbering of their Variables."""

    def __init__(self) -> None:
        self.order: list[Variable] = []
        self.num: dict[Variable, int] = {}
        self.parts: list[Any] = []
        self.n_ops = 0

    def number(self, v: Variable) -> int:
        i = self.num.get(v)
        if i is None:
            i = self.num[v] = len(self.order)
            self.order.append(v)
            self.parts.append((v.shape, v.dtype, v.stop_gradient, v.kind))
        return i

    def op_key(self, op: Op) -> tuple:
        number = self.number
        ins = tuple([number(v) for v in op.inputs])
        attrs = tuple([(k, self.attr_key(a)) for k, a in op.attrs.items()]) if op.attrs else ()
        return op.type, ins, attrs, tuple([number(o) for o in op.outputs])

    def block_key(self, block: Block) -> tuple:
        head = tuple(self.number(v) for v in block.params)
        body = tuple(self.op_key(op) for op in block.ops)
        return head, body, tuple(self.number(v) for v in block.results)

    def attr_key(self, a: Any) -> Any:
        t = type(a)
        if t in _PLAIN or (t is tuple and all([type(x) is int for x in a])):
            return (t, a)  # the common attrs (axes, shapes, flags), without the checks below
        if isinstance(a, Block):
            return ("block", self.block_key(a))
        if isinstance(a, (float, np.floating)):
            return (type(a), repr(a))
        if isinstance(a, np.ndarray):
            return ("array", a.shape, a.dtype, a.tobytes())
        if isinstance(a, (list, tuple)):
            return (type(a), tuple(self.attr_key(x) for x in a))
        try:
            hash(a)
        except TypeError:
            return (type(a), repr(a))
        return (type(a), a)


__all__ = ["Compiled", "Structure", "compile_count", "emit", "plan", "structure"]
