"""A recording for imperative mode: light tape entries, built into a Program only on demand.

Recording an op call costs a lookup of its one-op program (lowered the first time, which
checks the call) and one entry: the op's front, its argument tree, its leaves (a tape value
by number, a weak number, or a static value), the numbers of its results and the call's
signature. Nothing runs: every tape value (an input read, a weak number, an op result) has
a number, and a result holds its shape and dtype (`PENDING`) until it is computed -- when
read (`value_of`: the calls it depends on, by their one-op programs), or by backward (the
compiled backward's forward, `fill`; the op-by-op backward's `compute`). The entries key
the tape's structure as they are appended (one trie step each,
srcgrad/imperative/backward_whole.py),
so a backward over a structure seen before runs its compiled program without building any
IR; `program` replays the entries into an ordinary `Program` (named, verified, printable)
only when something asks for it: a first compile of the whole backward,
`sg.autograd.tape()`, a picture.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

import re
import weakref
from typing import Any, Callable, NamedTuple, Sequence

import jax
import numpy as np

from ..base import dtypes
from ..compiled import eager
from ..core.builder import as_var
from ..base.cache import static_key
from ..core.dispatch import Weak, on_device
from ..base.errors import SrcgradError, user_location
from ..ir.program import Program, Variable, program_guard
from . import cost_rule, gc_pacing
from .backward_whole import Structure
from .tensor import PENDING, Tensor

_SUFFIX = re.compile(r"_[0-9]+$")


class Ref:
    """A tape value read by an entry: its number."""

    __slots__ = ("num",)

    def __init__(self, num: int):
        self.num = num


class WeakRef:
    """A Python number in an operand position of an entry: its value, and the numbers of the
    inputs the op lifted it to (one per dtype it was given)."""

    __slots__ = ("value", "nums")

    def __init__(self, value: int | float | complex):
        self.value = value
        self.nums: dict[np.dtype, int] = {}


class Entry(NamedTuple):
    """One recorded op call."""

    fn: Callable[..., Any]
    tree: Any
    leaves: tuple
    outs: tuple[int, ...]
    loc: Any
    #: The call's signature, as `eager.signature` gives it (the vjp kernel's starts so).
    parts: tuple = ()
    #: The call's one-op program (`eager.program` of the signature): its kernels hang on it.
    prog: Any = None
    #: The numbers of the values the call reads (its `Ref` leaves, in order), then those of
    #: the weak numbers its program lifts: the program's inputs before its captured arrays.
    feed: tuple[int, ...] = ()


class Tape:
    """One recording: its entries and every tape value, by number."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        #: Per number: the concrete value, its kind ("param", "data", "op") and a name.
        self.values: list[Any] = []
        self.kinds: list[str] = []
        self.names: list[str] = []
        #: number -> index of the entry that computed it.
        self.producer: dict[int, int] = {}
        #: id(Tensor) -> (Tensor, number) for the Tensors read as inputs.
        self.leaves: dict[int, tuple[Tensor, int]] = {}
        #: The leaves read as attached inputs (kind "param"), in the order first read.
        self.params: list[tuple[Tensor, int]] = []
        #: Per earlier tape: its numbers copied onto this one (see `_import`).
        self.imported: dict[Tape, dict[int, int]] = {}
        self.structure = Structure()
        #: Per entry: its node in the trie of structures (the structure up to it).
        self.nodes: list[Any] = []
        self.freed = False
        #: How many entries are not computed (their results hold `PENDING`).
        self.uncomputed = 0
        #: The Tensors bound to results not computed when recorded (weakly): they take their
        #: values when the tape is freed.
        self.pending: list[weakref.ref] = []
        self._program: Program | None = None
        self._vars: list[Variable | None] = []
        self._done = 0  # entries replayed into `_program`
        self._num_by_var: dict[Variable, int] = {}
        #: The input numbers, and (once freed) their shapes and dtypes.
        self._inputs: list[int] = []
        self._avals: dict[int, tuple] = {}
        #: One `Ref` per value read (an entry's leaves share it).
        self._refs: dict[int, Ref] = {}
        #: Fewer garbage collections until the tape is freed (gc_pacing.py).
        self._paced = gc_pacing.hold(self)

    # ------------------------------------------------------------ numbers
    def num_of(self, t: Tensor) -> int:
        """The number of `t` here: its recorded result, its history copied from the live
        tape that recorded it, or an input fed its value."""
        if t._tape is self:
            return t._num
        hit = self.leaves.get(id(t))
        if hit is not None:
            return hit[1]
        if t._tape is not None and not t._tape.freed:
            return self._import(t._tape, t._num)
        attached = t.grad_req is not None
        n = self.input(t._value, "param" if attached else "data", t.name or "x")
        self.leaves[id(t)] = (t, n)
        if attached:
            self.params.append((t, n))
        return n

    def input(self, value: Any, kind: str, name: str, keyed: bool = True) -> int:
        """A new input number holding `value`; `keyed`: its shape, dtype and kind are a step
        of the structure (a weak number's are implied by the op that lifts it)."""
        n = len(self.values)
        self._inputs.append(n)
        self.values.append(value)
        self.kinds.append(kind)
        self.names.append(name)
        if keyed:
            self.structure.pending.append((tuple(value.shape), value.dtype, kind))
        return n

    def bind(self, value: Any, num: int) -> Tensor:
        """A Tensor of `value` recorded as `num`."""
        t = Tensor(value)
        t._tape, t._num = self, num
        return t

    # ------------------------------------------------------------ recording
    def record(self, fn: Callable[..., Any], leaves: list, tree: Any) -> Any:
        """`fn` on the leaves, appended as an entry (checked, not computed); its results as
        Tensors of this tape."""
        refs: list[Any] = []
        key: list[Any] = []
        args: list[Any] = []
        parts: list[Any] = []
        weak: list[Any] = []
        feed: list[int] = []
        interned = self._refs
        for leaf in leaves:
            t = type(leaf)
            if t is Tensor:
                value = leaf._v
                n = leaf._num if leaf._tape is self else self.num_of(leaf)
            elif t is Weak:
                refs.append(WeakRef(leaf.value))
                args.append(leaf)
                parts.append(type(leaf.value))
                key.append(parts[-1])
                weak.append(leaf.value)
                continue
            elif eager.is_array(leaf):
                value = leaf
                n = self.input(leaf, "data", "c")
            else:
                refs.append(leaf)
                args.append(leaf)
                parts.append(static_key(leaf))
                key.append(parts[-1])
                continue
            ref = interned.get(n)
            if ref is None:
                ref = interned[n] = Ref(n)
            refs.append(ref)
            args.append(value)
            parts.append((value.shape, value.dtype))
            key.append(n)
            feed.append(n)
        sig = tuple(parts)
        prog = eager.program(fn, args, tree, sig)  # checks the call; computes nothing
        if prog.weak:
            weak_refs = [r for r in refs if type(r) is WeakRef]
            for i, dt in prog.weak:
                n = weak_refs[i].nums[dt] = self.input(
                    on_device(weak[i], dt), "data", "c", keyed=False
                )
                feed.append(n)
        nums = self.add(
            fn,
            tree,
            tuple(refs),
            prog.avals,
            (fn, tree, *key),
            user_location(),
            sig,
            prog,
            tuple(feed),
        )
        pending = self.pending
        outs = []
        for v, n in zip(prog.avals, nums):
            t = Tensor(v)
            t._tape, t._num = self, n
            pending.append(weakref.ref(t))
            outs.append(t)
        if len(outs) == 1 and prog.out_tree.num_nodes == 1:  # one array: no tree to rebuild
            return outs[0]
        return jax.tree_util.tree_unflatten(prog.out_tree, outs)

    # ------------------------------------------------------------ values
    def value_of(self, num: int) -> Any:
        """The value of `num`, computing the recorded calls it depends on that are not
        computed yet (only those: a value nobody reads is never computed)."""
        values = self.values
        if type(values[num]) is PENDING:
            need: set[int] = set()
            stack = [num]
            while stack:
                e = self.producer[stack.pop()]
                if e not in need:
                    need.add(e)
                    stack.extend(
                        r.num
                        for r in self.entries[e].leaves
                        if type(r) is Ref and type(values[r.num]) is PENDING
                    )
            for e in sorted(need):
                self.compute(e, e + 1)
        return values[num]

    def compute(self, start: int = 0, stop: int | None = None) -> None:
        """Compute the recorded calls not computed yet (of entries `start:stop`), in
        recording order."""
        if not self.uncomputed:
            return
        values = self.values
        done = 0
        for e in self.entries[start:stop]:
            outs = e.outs
            if outs and type(values[outs[0]]) is PENDING:
                prog = e.prog
                if prog.ran:
                    got = prog.call(*[values[n] for n in e.feed], *prog.captured)[0]
                else:
                    got = cost_rule.first_call(
                        prog, [values[n] for n in e.feed] + list(prog.captured)
                    )[0]
                if len(outs) == 1:
                    values[outs[0]] = got[0]
                else:
                    for n, v in zip(outs, got):
                        values[n] = v
                done += 1
        self.uncomputed -= done

    def fill_window(self, start: int, stop: int, outs: Any) -> None:
        """The results of entries `start:stop`, none computed yet, computed elsewhere (a
        chunk's program), in order."""
        values = self.values
        it = iter(outs)
        for e in self.entries[start:stop]:
            for n in e.outs:
                values[n] = next(it)
        self.uncomputed -= stop - start

    def call_leaves(self, e: Entry) -> tuple[list, list, list]:
        """The leaves of an entry's call (values, weak numbers, static values), its arrays
        and its weak numbers' values, as `eager.evaluate` takes them."""
        leaves, arrays, weak = entry_leaves(e, self.values)
        return leaves, arrays, [r.value for r in weak]

    def fill(self, nums: list[int], outs: Any) -> None:
        """Values computed elsewhere (a compiled backward's forward) for the numbers `nums`
        (every result of each entry they are of)."""
        values = self.values
        for n, v in zip(nums, outs):
            if type(values[n]) is PENDING:
                values[n] = v
        self.uncomputed = sum(
            1 for e in self.entries if e.outs and type(values[e.outs[0]]) is PENDING
        )

    def wanted(self, every: bool) -> tuple[int, ...] | None:
        """The recorded results that a backward computing the forward must return: every one
        (`None`) if the tape is kept for another backward (`every`), else all the results of
        the entries whose results live Tensors still hold uncomputed (nobody else can read
        them)."""
        if every:
            return None
        values, producer, entries = self.values, self.producer, self.entries
        live = {
            producer[t._num]
            for t in (r() for r in self.pending)
            if t is not None and t._tape is self and type(values[t._num]) is PENDING
        }
        return tuple(n for e in sorted(live) for n in entries[e].outs)

    @property
    def lazy(self) -> bool:
        """True while some recorded call has not been computed."""
        return self.uncomputed > 0

    def add(
        self,
        fn: Callable[..., Any],
        tree: Any,
        refs: tuple,
        outs: Sequence[Any],
        key: tuple,
        loc: Any,
        parts: tuple,
        prog: Any,
        feed: tuple[int, ...],
    ) -> tuple[int, ...]:
        """Append an entry computing `outs` (their values) and step the structure by `key`;
        the results' numbers."""
        values = self.values
        start = len(values)
        index = len(self.entries)
        name = getattr(fn, "__name__", "op")
        if len(outs) == 1:  # most ops: no ranges, no loops
            values.append(outs[0])
            self.kinds.append("op")
            self.names.append(name)
            self.producer[start] = index
            nums: tuple[int, ...] = (start,)
        else:
            nums = tuple(range(start, start + len(outs)))
            values.extend(outs)
            self.kinds.extend(("op",) * len(outs))
            self.names.extend((name,) * len(outs))
            producer = self.producer
            for n in nums:
                producer[n] = index
        self.entries.append(Entry(fn, tree, refs, nums, loc, parts, prog, feed))
        if outs and type(outs[0]) is PENDING:
            self.uncomputed += 1
        self.nodes.append(self.structure.step(key))
        return nums

    def _import(self, src: "Tape", num: int) -> int:
        """Copy the entries of `src` that `num` depends on onto this tape (a Tensor recorded
        in an earlier record() scope keeps its history, as in MXNet), with their values."""
        mapped = self.imported.setdefault(src, {})
        if num in mapped:
            return mapped[num]
        need: set[int] = set()
        stack = [num]
        while stack:
            n = stack.pop()
            e = src.producer.get(n)
            if n in mapped or e is None or e in need:
                continue
            need.add(e)
            stack.extend(r.num for r in src.entries[e].leaves if type(r) is Ref)
        by_num = {n: t for t, n in src.leaves.values()}
        for e in sorted(need):
            entry = src.entries[e]
            refs: list[Any] = []
            key: list[Any] = []
            for r in entry.leaves:
                if type(r) is Ref:
                    n = mapped.get(r.num)
                    if n is None:  # an input of `src`: its Tensor's number here, or its value
                        t = by_num.get(r.num)
                        n = mapped[r.num] = (
                            self.num_of(t)
                            if t is not None
                            else self.input(src.values[r.num], "data", src.names[r.num])
                        )
                    refs.append(Ref(n))
                    key.append(n)
                elif type(r) is WeakRef:
                    w = WeakRef(r.value)
                    for dt, n in r.nums.items():
                        w.nums[dt] = self.input(src.values[n], "data", "c", keyed=False)
                    refs.append(w)
                    key.append(type(r.value))
                else:
                    refs.append(r)
                    key.append(static_key(r))
            nums = self.add(
                entry.fn,
                entry.tree,
                tuple(refs),
                [src.values[o] for o in entry.outs],
                (entry.fn, entry.tree, *key),
                entry.loc,
                entry.parts,
                entry.prog,
                feed_of(refs, entry.prog),
            )
            mapped.update(zip(entry.outs, nums))
        return mapped[num]

    # ------------------------------------------------------------ the Program
    @property
    def program(self) -> Program:
        """The tape as a Program: the entries replayed (traced) in order."""
        if self._program is None:
            self._program = Program()
        prog = self._program
        if self._done < len(self.entries):
            with program_guard(prog):
                for entry in self.entries[self._done :]:
                    self._replay(prog, entry)
            self._done = len(self.entries)
        return prog

    def var(self, num: int) -> Variable:
        """The Variable of `num` in `program` (an input is made on first use)."""
        vars_ = self._vars
        v = vars_[num] if num < len(vars_) else None
        if v is None:
            prog = self._program if self._program is not None else self.program
            kind = self.kinds[num]
            shape, dtype = (
                self._avals[num] if self.freed else (self.values[num].shape, self.values[num].dtype)
            )
            v = prog.global_block().new_var(
                _base(self.names[num]),
                tuple(shape),
                dtypes.canonical(np.dtype(dtype)),
                kind=kind,
                stop_gradient=kind != "param",
            )
            prog.inputs.append(v)
            self._know(num, v)
        return v

    def known_vars(self) -> list[Variable]:
        """The Variables of `program` that hold a recorded value."""
        return [v for v in self._vars if v is not None]

    def num_by_var(self, v: Variable) -> int | None:
        return self._num_by_var.get(v)

    def _know(self, num: int, v: Variable) -> None:
        vars_ = self._vars
        if len(vars_) <= num:
            vars_.extend([None] * (len(self.values) - len(vars_)))
        vars_[num] = v
        self._num_by_var.setdefault(v, num)

    def _replay(self, prog: Program, entry: Entry) -> None:
        leaves: list[Any] = []
        lifts: dict[int, WeakRef] = {}
        for r in entry.leaves:
            if type(r) is Ref:
                leaves.append(self.var(r.num))
            elif type(r) is WeakRef:
                w = Weak(r.value)
                lifts[id(w)] = r
                leaves.append(w)
            else:
                leaves.append(r)

        def lift(w: Weak, dt: np.dtype) -> Variable:
            n = lifts[id(w)].nums.get(dt)
            if n is None:
                raise SrcgradError(
                    f"{entry.fn.__name__}: replaying the tape gave a number "
                    f"{w.value!r} the dtype {dt}, which the recorded call did not"
                )
            return self.var(n)

        prog.lift_weak, prog.loc = lift, entry.loc
        try:
            args, kwargs = jax.tree_util.tree_unflatten(entry.tree, leaves)
            outs = [as_var(v) for v in jax.tree_util.tree_leaves(entry.fn(*args, **kwargs))]
        finally:
            prog.lift_weak = prog.loc = None
        for n, v in zip(entry.outs, outs):
            self._know(n, v)

    def captured(self) -> dict[Variable, Any]:
        """The constants the replayed ops captured, by Variable."""
        prog = self.program
        return dict(zip(prog.captures, prog.capture_values))

    # ------------------------------------------------------------ lifetime
    def free(self) -> None:
        """Drop the recorded values: a later backward over this tape is an error. The
        entries stay (`program` still shows the recording)."""
        if self.pending:
            for ref in self.pending:
                t = ref()
                if t is not None and type(t._v) is PENDING and t._tape is self:
                    t._v = self.value_of(t._num)
            self.pending = []
        values = self.values
        self._avals = {n: (values[n].shape, values[n].dtype) for n in self._inputs}
        self.freed = True
        self.values = []
        self.leaves.clear()
        self.params = []
        self.imported.clear()
        self._refs = {}
        self._paced()


def entry_leaves(e: Entry, values: Any) -> tuple[list, list, list[WeakRef]]:
    """The leaves of an entry's call with its reads taken from `values` (by number): the
    leaves (values, `Weak` numbers, static values), its arrays, and its weak numbers'
    WeakRefs, in order."""
    leaves: list[Any] = []
    arrays: list[Any] = []
    weak: list[WeakRef] = []
    for r in e.leaves:
        t = type(r)
        if t is Ref:
            v = values[r.num]
            leaves.append(v)
            arrays.append(v)
        elif t is WeakRef:
            leaves.append(Weak(r.value))
            weak.append(r)
        else:
            leaves.append(r)
    return leaves, arrays, weak


def feed_of(refs: Any, prog: Any) -> tuple[int, ...]:
    """An entry's `feed` from its leaves and its program: the numbers read, then those of
    the weak numbers the program lifts."""
    weak = [r for r in refs if type(r) is WeakRef]
    return tuple(r.num for r in refs if type(r) is Ref) + tuple(
        weak[i].nums[dt] for i, dt in prog.weak
    )


def _base(name: str) -> str:
    """`tanh` for `tanh_3`: the base that a copied Variable is named after."""
    return _SUFFIX.sub("", name) or name


__all__ = ["Entry", "Ref", "Tape", "WeakRef", "entry_leaves", "feed_of"]
