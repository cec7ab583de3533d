"""Compiling a tape's backward: its structure key, the ops to emit, the jitted function.

The key of a tape is its structure, never its values: op types, how each op's inputs are
wired to earlier values, shapes, dtypes, attributes, and which values were recorded. It is
built while recording: each recorded call's ops are keyed once, as a step from the tape's
node in a trie of the structures seen, so equal recordings end on the same node and
backward looks its compiled program up by that node and the heads, in O(1).

Layer L6 (front ends): see docs/design.md.
"""
from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from .cache import Slot, register
from .ir import Block, Op, Program, Variable
from .transforms.lower_jax import lower_program
from .analysis import free_vars, walk_blocks

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
    """`def tape_backward(*feeds): ... return fetch`, jitted, and its source."""
    global _compiles
    lowered = lower_program(prog, feeds, fetch, name="tape_backward", ops=ops)
    with _compiles_lock:
        _compiles += 1
    run = lowered.jitted()
    return (lambda *fed: run(*fed)[0]), lowered.source


class Node:
    """A structure prefix in the trie of recorded structures: equal recordings reach the
    same node, so the node itself (hashed by identity) is the key of what led to it."""

    __slots__ = ("children",)

    def __init__(self) -> None:
        self.children: dict[tuple, Node] = {}


class Trie:
    """The structures recorded so far, as paths of steps (the ops, inputs and values that
    one recorded call added), and the compiled backwards per node."""

    def __init__(self) -> None:
        self.root = Node()
        self.size = 1
        self.entries: dict[tuple, Slot] = {}

    def slot(self, key: tuple) -> Slot:
        """The compiled backward's slot for `key` (a node and what backward asks of it)."""
        slot = self.entries.get(key)
        return slot if slot is not None else self.entries.setdefault(key, Slot())


#: The trie new tapes enter; replaced (not grown) past `TRIE_LIMIT` nodes, so recordings
#: of ever-new structures hold at most that many nodes beyond the live tapes' own paths.
_trie = Trie()
TRIE_LIMIT = 1 << 15


def _forget() -> None:
    """`sg.clear_caches()`: a new trie, and the old one's compiled backwards dropped (a
    live tape that entered it compiles again)."""
    global _trie
    old, _trie = _trie, Trie()
    for slot in list(old.entries.values()):
        slot.entry = None
    old.entries.clear()


class _Backwards:
    """The trie and its compiled backwards, as one entry of the cache registry."""

    def clear(self) -> None:
        _forget()

    def __len__(self) -> int:
        return len(_trie.entries)


register("tapes", _Backwards())


def _renew() -> None:
    """Past `TRIE_LIMIT` nodes: new tapes enter a new trie; the old one (and its compiled
    backwards) goes with the last live tape that entered it."""
    global _trie
    _trie = Trie()


class Structure:
    """A tape's structure, keyed while it is recorded: its Variables numbered in order of
    first appearance and its path in the trie.

    Each recorded step (`advance`) keys the ops, inputs and values added since the last
    one: op types, input wiring (as numbers), attrs, output numbers, each new Variable's
    shape, dtype and kind, and the numbers of the Variables whose values were recorded.
    The step's key leads to a child node; backward reads the node, so its key costs O(1).
    """

    def __init__(self, program: Program) -> None:
        #: The tape's op list and input list (appended to in place).
        self.ops = program.global_block().ops
        self.inputs = program.inputs
        self.trie = _trie
        self.node = self.trie.root
        self.order: list[Variable] = []
        self.num: dict[Variable, int] = {}
        self.parts: list[Any] = []
        self.n_ops = 0
        self.n_inputs = 0
        #: Variables given a value since the last step.
        self.known: list[Variable] = []

    def advance(self) -> Node:
        """Key what was recorded since the last step; the node of the tape so far."""
        ops, inputs = self.ops, self.inputs
        if len(ops) == self.n_ops and len(inputs) == self.n_inputs and not self.known:
            return self.node
        parts = self.parts
        for op in ops[self.n_ops:]:
            parts.append(self.op_key(op))
        self.n_ops = len(ops)
        number = self.number
        for v in inputs[self.n_inputs:]:  # inputs no op reads
            number(v)
        self.n_inputs = len(inputs)
        if self.known:
            parts.append(("known", tuple([number(v) for v in self.known])))
            self.known.clear()
        key = tuple(parts)
        parts.clear()
        children = self.node.children
        child = children.get(key)
        if child is None:
            trie = self.trie
            if trie is _trie and trie.size >= TRIE_LIMIT:
                _renew()
            child = children.setdefault(key, Node())
            trie.size += 1
        self.node = child
        return child

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
            data = a.tobytes()  # a large array by a digest: the trie keeps its keys
            return ("array", a.shape, a.dtype,
                    data if len(data) <= 256 else hashlib.blake2b(data, digest_size=32).digest())
        if isinstance(a, (list, tuple)):
            return (type(a), tuple(self.attr_key(x) for x in a))
        try:
            hash(a)
        except TypeError:
            return (type(a), repr(a))
        return (type(a), a)


__all__ = ["Compiled", "Node", "Structure", "Trie", "compile_count", "emit", "plan"]
