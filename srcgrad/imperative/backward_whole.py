"""Compiling a tape's backward whole: its structure key, the ops to emit, the jitted function.

The key of a tape is its structure, never its values: the ops' fronts, how each call's
inputs are wired to earlier values, shapes, dtypes, static arguments. It is built while
recording: each entry is keyed once, as a step from the tape's node in a trie of the
structures seen, so equal recordings end on the same node and backward looks its compiled
program up by that node and the heads, in O(1). A structure is compiled when the cost rule
says so (srcgrad/imperative/cost_rule.py); before that its backward runs op by op
(srcgrad/imperative/backward_op_by_op.py).

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from ..ir.analysis import free_vars, walk_blocks
from ..base.cache import Slot, register
from ..ir.program import Op, Program, Variable
from ..transforms.backward import gradients
from ..transforms.lower_jax import lower_program
from . import cost_rule
from .cost_rule import Paid

_compiles = 0
_compiles_lock = threading.Lock()


def compile_count() -> int:
    """How many backward programs imperative mode has compiled (in this process)."""
    return _compiles


@dataclass
class Compiled:
    """A compiled backward: the tape values it is fed (by number), the constants the
    replayed ops captured, and which of the asked-for gradients it returns."""

    fn: Callable[..., Any]
    feeds: list[int]
    consts: list[Any]
    returned: list[bool]
    source: str
    #: The recorded results it also returns (a backward fed only the tape's inputs computes
    #: the forward too), by number.
    forward: list[int] = field(default_factory=list)


def plan(
    ops: Sequence[Op], fetch: Sequence[Variable], known: set[Variable]
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


def emit(
    prog: Program, ops: list[Op], feeds: list[Variable], fetch: list[Variable]
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
    same node, so the node itself (hashed by identity) is the key of what led to it.

    The first child is held inline (`key`, `child`), the others in `more`: most nodes are on
    one path only (a structure recorded once), and each object a recording keeps alive is
    walked by the garbage collector again and again (srcgrad/imperative/gc_pacing.py)."""

    __slots__ = ("key", "child", "more", "window")

    def __init__(self) -> None:
        self.key: tuple | None = None
        self.child: Node | None = None
        self.more: dict[tuple, Node] | None = None
        #: The local structure of a window of entries ending here, kept by
        #: srcgrad/imperative/backward_chunks.py (equal recordings number their values alike).
        self.window: Any = None

    @property
    def children(self) -> dict[tuple, Node]:
        """Every child, by the step that leads to it."""
        out = {} if self.child is None else {self.key: self.child}
        if self.more:
            out.update(self.more)
        return out

    def get(self, key: tuple) -> Node | None:
        """The child that `key` leads to, if any."""
        if self.key == key:
            return self.child
        more = self.more
        return None if more is None else more.get(key)

    def add(self, key: tuple) -> Node:
        """A new child for `key` (not a child yet)."""
        child = Node()
        if self.child is None:
            self.key, self.child = key, child
        else:
            if self.more is None:
                self.more = {}
            self.more[key] = child
        return child


class Trie:
    """The structures recorded so far, as paths of steps (the ops, inputs and values that
    one recorded call added), and per backward key its compiled backward and its account
    (srcgrad/imperative/cost_rule.py)."""

    def __init__(self) -> None:
        self.root = Node()
        self.size = 1
        self.entries: dict[tuple, Slot] = {}
        self.paid: dict[tuple, Paid] = {}

    def visit(self, key: tuple) -> tuple[Slot, Paid]:
        """The compiled backward's slot for `key` (a node and what backward asks of it), and
        its account (`runs`: the backwards of that key before this one)."""
        slot = self.entries.get(key)
        if slot is None:
            slot = self.entries.setdefault(key, Slot())
            self.paid[key] = Paid()
        return slot, self.paid[key]


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
    old.paid.clear()


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
    """A tape's structure, keyed while it is recorded: its path in the trie.

    Each recorded entry steps from the tape's node by its key: the op's front, its argument
    tree, and per leaf the number of the tape value read (numbers are given in order, so
    they are the wiring), a weak number's Python type or a static value's key, preceded by
    the shape, dtype and kind of each input the entry brought onto the tape. Equal
    recordings reach the same node; backward reads the node, so its key costs O(1).
    """

    __slots__ = ("trie", "node", "pending")

    def __init__(self) -> None:
        self.trie = _trie
        self.node = self.trie.root
        #: The inputs numbered since the last step (shape, dtype, kind each).
        self.pending: list[tuple] = []

    def step(self, key: tuple) -> Node:
        """Step by an entry's key (and the inputs pending); the node of the tape so far."""
        if self.pending:
            key = (tuple(self.pending), key)
            self.pending.clear()
        node = self.node
        child = node.get(key)
        if child is None:
            trie = self.trie
            if trie is _trie and trie.size >= TRIE_LIMIT:
                _renew()
            child = node.add(key)
            trie.size += 1
        self.node = child
        return child

    def flush(self) -> Node:
        """The node of the tape so far, with the inputs numbered since the last step."""
        return self.step(("inputs",)) if self.pending else self.node


#: A backward fed the recorded values (the forward was computed before it).
FED = "fed"


def key_of(
    tape: Any,
    heads: Sequence[int],
    seeds: Sequence[Any],
    xs: Sequence[int | None],
    forward: tuple[int, ...] | str | None,
) -> tuple:
    """The key of a backward: the tape's node, the heads, the seeds' shapes, the inputs, and
    `forward`: FED, or the recorded results that a backward computing the forward returns
    (None: every one; `Tape.wanted`)."""
    return (
        tape.structure.flush(),
        tuple(heads),
        tuple([None if s is None else (s.shape, s.dtype) for s in seeds]),
        tuple([-1 if x is None else x for x in xs]),
        forward,
    )


def run_whole(
    tape: Any,
    heads: list[int],
    seeds: list,
    xs: list[int | None],
    slot: Slot,
    forward: tuple[int, ...] | str | None,
) -> list[Any]:
    """The gradients' values, from the backward compiled for the tape's structure and
    `forward` (as `key_of`'s). Compiling it charges the tape's programs that never ran
    (`cost_rule.charge`): the compiled backward runs none of them."""
    entry = slot.entry
    if entry is None:
        with slot.lock:
            entry = slot.entry
            if entry is None:
                entry = slot.entry = build(tape, heads, seeds, xs, forward)
                cost_rule.charge(tape.entries)
    values = tape.values
    fed = [values[i] for i in entry.feeds] + entry.consts + [s for s in seeds if s is not None]
    outs = iter(entry.fn(*fed))
    got = [next(outs) if r else None for r in entry.returned]
    if entry.forward:
        tape.fill(entry.forward, outs)
    return got


def build(
    tape: Any,
    heads: list[int],
    seeds: list,
    xs: list[int | None],
    forward: tuple[int, ...] | str | None = FED,
) -> Compiled:
    """Differentiate the tape's Program (the grad ops are taken off again afterwards) and
    compile the ops the gradients need beyond the recorded values; unless `forward` is FED,
    the recorded results are not computed, so the program is fed the tape's inputs only,
    computes the forward with the backward, and returns the recorded results `forward`
    names as well (None: every one)."""
    prog = tape.program
    block = prog.global_block()
    head_vars = [tape.var(h) for h in heads]
    wrt = [tape.var(x) for x in xs if x is not None]
    n_ops, n_inputs = len(block.ops), len(prog.inputs)
    try:
        hg = [
            None
            if s is None
            else block.new_var(
                "head_grad", tuple(s.shape), np.dtype(s.dtype), kind="data", stop_gradient=True
            )
            for s in seeds
        ]
        prog.inputs.extend(v for v in hg if v is not None)
        gs = gradients(head_vars, wrt, hg) if wrt else []
        got = dict(zip(wrt, gs))
        fetch = [g for g in gs if g is not None]
        captured = tape.captured()
        known = set(tape.known_vars())
        returns: list[int] = []
        if forward != FED:
            returns = (
                [n for n, kind in enumerate(tape.kinds) if kind == "op"]
                if forward is None
                else list(forward)
            )
            fetch += [tape.var(n) for n in returns]
            known = {v for v in known if tape.kinds[tape.num_by_var(v)] != "op"}
        known.update(captured, [v for v in hg if v is not None])
        ops, feeds = plan(block.ops, fetch, known)
        numbered = sorted((v for v in feeds if tape.num_by_var(v) is not None), key=tape.num_by_var)
        consts = [v for v in feeds if tape.num_by_var(v) is None and v in captured]
        fn, source = emit(prog, ops, numbered + consts + [v for v in hg if v is not None], fetch)
        returned = [x is not None and got.get(tape.var(x)) is not None for x in xs]
        return Compiled(
            fn,
            [tape.num_by_var(v) for v in numbered],
            [captured[v] for v in consts],
            returned,
            source,
            returns,
        )
    finally:
        del block.ops[n_ops:]
        del prog.inputs[n_inputs:]


__all__ = [
    "FED",
    "Compiled",
    "Node",
    "Structure",
    "Trie",
    "build",
    "compile_count",
    "emit",
    "key_of",
    "plan",
    "run_whole",
]
