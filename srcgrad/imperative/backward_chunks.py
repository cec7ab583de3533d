"""The op-by-op tier of imperative backward, with its recurring runs of entries compiled.

A tape whose structure has not been seen before is differentiated entry by entry, by the
per-op programs and vjp kernels of srcgrad/imperative/backward_op_by_op.py. Define-by-run
code repeats itself, though: an RNN cell over a sentence, a layer over a tree's nodes. So
the entries are cut into windows of `CHUNK` entries from the first (the rest into windows
of a quarter of that), or of whole units where the tape repeats a unit that `CHUNK` would
cut at different places (`_periodic_cuts`), and each window is keyed by its *local
structure*: its entries' ops, signatures and wiring, with the values it reads from before
it numbered by first read and its own results in order. The windows of a cell repeated
over a sentence share that key, whatever the sentence's length. A window whose local
structure has paid for its compile (the cost rule, srcgrad/imperative/cost_rule.py: its
windows' op-by-op time, in earlier tapes and this one, reaches the expected compile of its
programs) runs as a *chunk*: one jitted program computes its results, and one its vjp.
Both are made of the very per-op programs and vjp kernels the entry-by-entry path calls,
traced together, so the gradients are the same. The other windows and the last few
entries run entry by entry.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax

from ..base import dtypes
from ..compiled import eager
from ..base.cache import BoundedCache, register
from ..base.config import config
from .tape import Entry, Ref, Tape, WeakRef, entry_leaves, feed_of
from .backward_op_by_op import (
    active_values,
    eager_runner,
    kernel,
    recording_runner,
    reverse,
    seeded,
)
from .compile_ahead import compile_ahead
from .cost_rule import RULE, Paid
from .tensor import PENDING
from ..core.verify import checks_enabled

#: Entries per window; 0 runs every entry on its own.
CHUNK = 16
#: Under the fixed rule (`sg.config.tape_compile_after` an int): a window runs as a chunk
#: once its key was seen this many times before. Otherwise the cost rule decides.
CHUNK_AFTER = 1
#: Per local structure, by its hash: its account (the cost rule's rent; the fixed rule's
#: sightings); dropped whole past `_SEEN_LIMIT` keys. Two structures of one hash share an
#: account, which only moves when they are compiled (each is compiled as itself: chunks
#: are kept by their whole key); a hash keeps no objects for the garbage collector to walk.
_SEEN: dict[int, Paid] = register("tape_chunk_keys", {})
_SEEN_LIMIT = 1 << 12


class _Unchunkable(Exception):
    """A kernel lifts a weak number at a dtype its recording did not lift it to (it would be
    a constant of the compiled chunk): that window runs entry by entry."""


class Chunk:
    """The compiled programs of one local structure: `template` is its entries renumbered
    (the values read from before first, by slot, then the window's results), `forward`
    computes the results from the reads, `backward(pattern)` the vjp for one pattern of
    cotangents."""

    def __init__(self, template: list[Entry], n_reads: int):
        self.template = template
        self.n_reads = n_reads
        self.n_own = sum(len(e.outs) for e in template)
        #: Set when a kernel cannot be chunked (`_Unchunkable`): its windows run entry by entry.
        self.broken = False
        self._forward: Callable[..., Any] | None = None
        self._backward: dict[tuple, tuple[Callable[..., Any], list[int]]] = {}
        #: The programs compiled so far: called once (a first call is a compile, timed by
        #: the cost rule), or compiled ahead.
        self.compiled: set[Any] = set()

    def call(self, fn: Callable[..., Any], args: list) -> Any:
        """`fn(*args)`, one of this chunk's programs; its first call timed (its compile)."""
        if fn in self.compiled:
            return fn(*args)
        out = RULE.compiled(RULE.chunk_compile, len(self.template), lambda: fn(*args))
        self.compiled.add(fn)
        return out

    def compile_ahead(self, fn: Callable[..., Any], avals: list) -> None:
        """Compile `fn`, one of this chunk's programs, for arguments of these shapes and
        dtypes without running it (srcgrad/imperative/compile_ahead.py; safe on a pool
        thread): its first call then only runs."""
        fn.lower(*avals).compile()  # type: ignore[attr-defined]
        self.compiled.add(fn)

    def forward(self) -> Callable[..., Any]:
        """`(*reads) -> results`, jitted."""
        if self._forward is None:
            template, n_reads = self.template, self.n_reads

            def chunk_forward(*reads: Any) -> tuple:
                values = list(reads)
                for e in template:
                    values.extend(_call(e, e.fn, e.tree, values, []))
                return tuple(values[n_reads:])

            self._forward = jax.jit(chunk_forward)
        return self._forward

    def backward(
        self, seeds: tuple[int, ...], act: tuple[int, ...], acc: tuple[int, ...]
    ) -> tuple[Callable[..., Any], list[int]]:
        """`(*reads, *results, *seeds' cotangents, *acc's gathered cotangents) -> the
        cotangents of the read slots listed in the second item` (filled on the first call),
        jitted: `seeds` are the results with a cotangent, `act` the active reads, `acc` those
        of them with a cotangent gathered so far."""
        key = (seeds, act, acc)
        hit = self._backward.get(key)
        if hit is not None:
            return hit
        template, n_vals = self.template, self.n_reads + self.n_own
        returned: list[int] = []

        def chunk_vjp(*args: Any) -> tuple:
            values, rest = list(args[:n_vals]), args[n_vals:]
            cts = dict(zip((self.n_reads + j for j in seeds), rest))
            cts.update(zip(acc, rest[len(seeds) :]))
            reverse(
                template,
                active_values(template, values, act),
                cts,
                lambda e, pattern, extra: _call(e, *kernel(e, pattern), values, extra),
            )
            returned[:] = [k for k in act if k in cts]
            return tuple(cts[k] for k in returned)

        hit = self._backward[key] = (jax.jit(chunk_vjp), returned)
        return hit


#: How many chunks are kept (the earliest made go first). A chunk's programs (its forward
#: and a vjp or two) hold about 7 MiB here, and a network over random trees keeps buying
#: chunks of window structures that recur across trees (58 by 20,000 steps, 86 by 50,000,
#: fewer and fewer): the bound caps what they can hold (about 900 MiB) above that working
#: set. Kept to 32 they churned (56 made by 20,000 steps), each rebuy a compile, and the
#: memory of dropped chunks did not all go back to the system. A dropped chunk pays again before
#: it is compiled again.
CHUNK_LIMIT = 128
#: Chunks by local structure.
_CHUNKS = register("tape_chunks", BoundedCache(CHUNK_LIMIT))


class Window(NamedTuple):
    """Entries `start:stop` of a tape, and their chunk (None: entry by entry); `reads` are
    the numbers of the values the window reads from before it, by slot."""

    start: int
    stop: int
    chunk: Chunk | None
    reads: tuple[int, ...]

    def uncomputed(self, tape: Tape) -> bool:
        """Whether none of its entries is computed yet (its chunk's forward computes them)."""
        values = tape.values
        return all(type(values[e.outs[0]]) is PENDING for e in tape.entries[self.start : self.stop])

    def vjp(self, tape: Tape, active: set[int], cts: dict[int, Any]) -> ChunkVjp | None:
        """Its chunk's vjp for the cotangents gathered so far (`cts`; `active`: the values
        that carry one), or None when none of its results has one."""
        own = [o for e in tape.entries[self.start : self.stop] for o in e.outs]
        seeds = tuple(j for j, o in enumerate(own) if o in cts)
        if not seeds:
            return None
        reads = self.reads
        act = tuple(k for k, n in enumerate(reads) if n in active)
        acc = tuple(k for k in act if reads[k] in cts)
        fn, returned = self.chunk.backward(seeds, act, acc)
        return ChunkVjp(fn, returned, own, [own[j] for j in seeds], [reads[k] for k in acc])


class ChunkVjp(NamedTuple):
    """A window's chunk vjp as called: `fn(*values of the reads, *values of own, *cotangents
    of seeded, *cotangents of gathered)` gives the cotangents of the read slots `returned`
    (filled at its first trace)."""

    fn: Callable[..., Any]
    returned: list[int]
    #: The window's results, by number.
    own: list[int]
    #: Those of them with a cotangent.
    seeded: list[int]
    #: The reads with a cotangent gathered so far.
    gathered: list[int]


def _cuts(n: int, at: int = 0) -> list[tuple[int, int, bool]]:
    """Entries `at:at + n` as windows `(start, stop, may be a chunk)`: of `CHUNK` entries
    from the first, then the rest in windows of a quarter of that (an RNN's last cells),
    then what is left. Fewer than `CHUNK` entries are one window, never a chunk."""
    if not CHUNK or n < CHUNK:
        return [(at, at + n, False)] if n else []
    full = n - n % CHUNK
    small = max(CHUNK // 4, 1)
    rest = n - (n - full) % small
    return (
        [(at + a, at + a + CHUNK, True) for a in range(0, full, CHUNK)]
        + [(at + a, at + a + small, True) for a in range(full, rest, small)]
        + ([(at + rest, at + n, False)] if rest < n else [])
    )


#: The longest recurring unit (entries) `_period` looks for.
MAX_PERIOD = 256


def _period(progs: list[Any]) -> tuple[int, int, int] | None:
    """The recurring unit in the middle of a tape whose entries call the programs `progs`
    (a cell unrolled over time steps): its length `p` (the least that repeats there) and
    the stretch `start:stop` around the middle where every entry calls the program the
    entry `p` after it calls, except the last `p`; None if there is none."""
    n = len(progs)
    mid = n // 2
    for p in range(1, min(MAX_PERIOD, (n - mid) // 2) + 1):  # two units from the middle
        if all(progs[i] is progs[i + p] for i in range(mid, mid + p)):
            break
    else:
        return None
    start = mid
    while start > 0 and progs[start - 1] is progs[start - 1 + p]:
        start -= 1
    stop = mid + p
    while stop + p <= n - 1 and progs[stop] is progs[stop + p]:
        stop += 1
    return p, start, stop + p


def _periodic_cuts(entries: list[Entry]) -> list[tuple[int, int, bool]]:
    """The tape's windows (`_cuts`), aligned to its recurring unit where windows of
    `CHUNK` entries would not be: a unit of `p` entries that `CHUNK` is not a multiple of,
    nor `p` of `CHUNK` (an LSTM cell of 24 entries), puts the windows of `CHUNK` entries
    over its stretch at different places in the unit, so they would have `p / gcd(p,
    CHUNK)` structures where one would do. There the windows are of whole units (the
    least number of them with at least `CHUNK` entries); before and after, `_cuts`."""
    n = len(entries)
    found = _period([e.prog for e in entries]) if CHUNK and n >= 2 * CHUNK else None
    if found is None:
        return _cuts(n)
    p, start, stop = found
    if p % CHUNK == 0 or CHUNK % p == 0:
        return _cuts(n)
    size = p * -(-CHUNK // p)
    k = (stop - start) // size
    if k < 2:
        return _cuts(n)
    end = start + k * size
    return (
        _cuts(start) + [(a, a + size, True) for a in range(start, end, size)] + _cuts(n - end, end)
    )


def windows(tape: Tape) -> list[Window]:
    """The tape's entries cut into windows, each with its chunk if the rule runs its local
    structure as one: the cost rule (srcgrad/imperative/cost_rule.py), or under
    `sg.config.tape_compile_after` the fixed rule (`CHUNK_AFTER` sightings before)."""
    entries = tape.entries
    cuts = []
    for a, b, may in _periodic_cuts(entries):
        key, reads = _local_at(tape, a, b) if may else (None, ())
        cuts.append((a, b, key, reads))
    chosen = _by_cost(cuts) if config.tape_compile_after is None else _by_count(cuts)
    out = []
    for (a, b, key, reads), chunked in zip(cuts, chosen):
        chunk = None
        if chunked:
            chunk = _CHUNKS.get(key)
            if chunk is None:
                chunk = _CHUNKS.put(key, Chunk(_template(entries, a, b, reads), len(reads)))
            if chunk.broken:
                chunk = None
        out.append(Window(a, b, chunk, reads))
    return out


def _account(key: tuple) -> Paid:
    h = hash(key)
    paid = _SEEN.get(h)
    if paid is None:
        if len(_SEEN) >= _SEEN_LIMIT:
            _SEEN.clear()
        paid = _SEEN[h] = Paid()
    return paid


def _by_count(cuts: list[tuple]) -> list[bool]:
    """The fixed rule: a window whose key was seen `CHUNK_AFTER` times before is a chunk."""
    out = []
    for _, _, key, _ in cuts:
        if key is None:
            out.append(False)
            continue
        paid = _account(key)
        out.append(paid.runs >= CHUNK_AFTER)
        paid.runs += 1
    return out


def _by_cost(cuts: list[tuple]) -> list[bool]:
    """The cost rule, once per local structure of this tape (its windows all count): a
    structure already compiled runs as its chunk; another once it has paid for it."""
    counts: dict[tuple, int] = {}
    for _, _, key, _ in cuts:
        if key is not None:
            counts[key] = counts.get(key, 0) + 1
    chosen = {}
    for key, count in counts.items():
        compiled = _CHUNKS.get(key)
        chosen[key] = (compiled is not None and not compiled.broken) or RULE.chunk(
            _account(key), len(key[0]), count
        )
    return [key is not None and chosen[key] for _, _, key, _ in cuts]


def _local_at(tape: Tape, a: int, b: int) -> tuple[tuple | None, tuple[int, ...]]:
    """`_local` of entries `a:b`, kept on the trie node of entry `b - 1` from the second
    time it is asked for: equal recordings reach equal nodes and number their values alike
    (the numbers a call reads are part of its step), so the window's key and reads are the
    node's. (A node reached once, the usual case of structures never seen before, keeps
    nothing: each object kept is walked by the garbage collector again and again.)
    SRCGRAD_ENABLE_CHECKS recomputes them and compares."""
    node = tape.nodes[b - 1]
    tag = (a, CHUNK, dtypes.x64())
    hit = node.window
    if hit is not None and hit is not _ONCE and hit[0] == tag:
        got = hit[1]
        if checks_enabled() and got != _local(tape.entries, a, b):
            raise AssertionError(
                f"tape chunks: the window {a}:{b} kept on its trie node is not the tape's"
            )
        return got
    got = _local(tape.entries, a, b)
    node.window = _ONCE if hit is None else (tag, got)
    return got


#: What a trie node keeps the first time its window's structure is asked for.
_ONCE = ("once",)


def _local(entries: list[Entry], a: int, b: int) -> tuple[tuple | None, tuple[int, ...]]:
    """The local structure of entries `a:b` (None if one has no results) and the numbers of
    the values they read from before, in the order first read."""
    slots: dict[int, int] = {}
    own: dict[int, int] = {}
    key = []
    for e in entries[a:b]:
        if not e.outs:
            return None, ()
        wiring: list[Any] = []
        for r in e.leaves:
            t = type(r)
            if t is Ref:
                j = own.get(r.num)  # a result of this window: by its place among them
                wiring.append(slots.setdefault(r.num, len(slots)) if j is None else ~j)
            elif t is WeakRef:
                wiring.append(
                    tuple((dt, slots.setdefault(n, len(slots))) for dt, n in r.nums.items())
                )
        for o in e.outs:
            own[o] = len(own)
        key.append((e.fn, e.tree, e.parts, tuple(wiring)))
    return (tuple(key), dtypes.x64()), tuple(slots)


def _template(entries: list[Entry], a: int, b: int, reads: tuple[int, ...]) -> list[Entry]:
    """Entries `a:b` renumbered: slot k of `reads` is k, the window's results follow."""
    local = {n: k for k, n in enumerate(reads)}
    out = []
    for e in entries[a:b]:
        leaves: list[Any] = []
        for r in e.leaves:
            if type(r) is Ref:
                leaves.append(Ref(local[r.num]))
            elif type(r) is WeakRef:
                w = WeakRef(r.value)
                w.nums = {dt: local[n] for dt, n in r.nums.items()}
                leaves.append(w)
            else:
                leaves.append(r)
        for o in e.outs:
            local[o] = len(local)
        out.append(
            Entry(
                e.fn,
                e.tree,
                tuple(leaves),
                tuple(local[o] for o in e.outs),
                None,
                e.parts,
                e.prog,
                feed_of(leaves, e.prog),
            )
        )
    return out


def _call(e: Entry, fn: Callable[..., Any], tree: Any, values: list, extra: list) -> list:
    """`fn` (the entry's op or its vjp kernel) on the entry's leaves and `extra`, inside a
    chunk's trace: the per-op program the eager interpreter runs, fed the weak numbers the
    recording lifted (never a constant, so the chunk serves every value)."""
    leaves, arrays, weak = entry_leaves(e, values)
    parts = e.parts + tuple((x.shape, x.dtype) for x in extra)
    prog = eager.program(fn, leaves + extra, tree, parts)
    lifted = []
    for i, dt in prog.weak:
        n = weak[i].nums.get(dt)
        if n is None:
            raise _Unchunkable
        lifted.append(values[n])
    outs, _ = prog.staged()(*arrays, *extra, *lifted, *prog.captured)
    return outs


def _compute(tape: Tape, plan: list[Window]) -> None:
    """Compute the entries not computed yet: a chunked window whose entries are all pending
    by its forward program, the others entry by entry."""
    if not tape.uncomputed:
        return
    values = tape.values
    for w in plan:
        if w.chunk is not None and w.uncomputed(tape):
            try:
                outs = w.chunk.call(w.chunk.forward(), [values[n] for n in w.reads])
            except _Unchunkable:
                w.chunk.broken = True
            else:
                tape.fill_window(w.start, w.stop, outs)
                continue
        tape.compute(w.start, w.stop)


def _backward(tape: Tape, w: Window, active: set[int], cts: dict[int, Any]) -> bool:
    """Window `w`'s vjp by its chunk; False if it must run entry by entry."""
    vjp = w.vjp(tape, active, cts)
    if vjp is None:
        return True
    values = tape.values
    try:
        outs = w.chunk.call(
            vjp.fn,
            [values[n] for n in (*w.reads, *vjp.own)]
            + [cts[n] for n in (*vjp.seeded, *vjp.gathered)],
        )
    except _Unchunkable:
        w.chunk.broken = True
        return False
    for n in vjp.seeded:
        del cts[n]
    cts.update((w.reads[k], g) for k, g in zip(vjp.returned, outs))
    return True


def run_op_by_op(
    tape: Tape,
    heads: list[int],
    seeds: list,
    xs: list[int | None],
    create_graph: bool = False,
    plan: list[Window] | None = None,
) -> list[Any]:
    """The gradients of the heads (seeded by `seeds`; None: ones) with respect to the tape
    values `xs`, by windows (`plan`, default `windows(tape)`): chunks where they recur,
    entry by entry elsewhere. With `create_graph` every kernel is recorded onto the tape
    (entry by entry) and the gradients are Tensors there."""
    if create_graph:
        tape.compute()
        cts = seeded(tape, heads, seeds, True)
        reverse(
            tape.entries, active_values(tape.entries, tape.values, xs), cts, recording_runner(tape)
        )
    else:
        if plan is None:
            plan = windows(tape)
        active = active_values(tape.entries, tape.values, xs)
        compile_ahead(tape, plan, heads, active)
        _compute(tape, plan)
        cts = seeded(tape, heads, seeds, False)
        run = eager_runner(tape)
        for w in reversed(plan):
            if w.chunk is None or not _backward(tape, w, active, cts):
                reverse(tape.entries[w.start : w.stop], active, cts, run)
    return [None if x is None else cts.get(x) for x in xs]


__all__ = ["CHUNK", "CHUNK_AFTER", "Chunk", "Window", "run_op_by_op", "windows"]
