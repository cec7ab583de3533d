"""When imperative mode compiles: the cost rule (ski rental) for whole tapes and chunks.

A tape's backward runs op by op, each entry by its one-op program and its vjp kernel, or by
a program compiled for a *unit*: the tape's whole structure
(srcgrad/imperative/backward_whole.py) or a recurring window of entries, a chunk
(srcgrad/imperative/backward_chunks.py). A unit is compiled only once the time already spent
running it op by op, with what this backward would spend so, reaches what its compile is
expected to cost: the ski-rental rule, whose total is never more than twice that of the
better choice in hindsight (never compiling, or compiling at first sight). So a structure
that never recurs compiles nothing, a tape too long to compile quickly is not compiled whole
at first sight, and a structure that keeps recurring is compiled after about as much time
as its compile takes. Running op by op, a tape whose calls are of programs that never ran
(a fresh model's first step) would compile about two programs per call (the call's and its
vjp kernel's): that is part of what this backward would spend, so such a tape is compiled
whole at once when that is cheaper (`sg.config.tape_compile_cold`).

Every figure is measured as the program runs, by one clock (`RULE.clock`; tests replace
it, so the rule is deterministic there): a program's first call (its compile), a whole
backward's build and first call, a chunk program's first call, an op-by-op backward (blocked
until its gradients are computed, so work JAX dispatched asynchronously is counted). Each
kind of cost is an `Estimate` that starts from a figure measured on a 2-core CPU and follows
the measurements. A whole backward is timed again on its next runs and dropped for op by op
if it runs slower than the op-by-op backward did (a very long tape can compile into a
slower program): the rule keeps the faster tier. A tier switch changes which programs
compute the gradients, never what they compute (both tiers are checked against each other
under `SRCGRAD_ENABLE_CHECKS`).

With `sg.config.tape_compile_after` set to an int, the fixed rule of earlier versions
applies instead (backward_chunks.compile_after): nothing is timed.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence

import jax

#: How far each measurement moves an estimate (an exponential average).
WEIGHT = 0.25
#: Compiled runs timed (blocked) before the whole tier is judged against op by op.
JUDGED_AFTER = 3
#: The programs a chunk compiles: its forward, and a vjp per pattern of cotangents (an RNN
#: cell's windows of 16 entries: the forward and three patterns, 0.14-0.18 s each here).
CHUNK_PROGRAMS = 3


class Estimate:
    """Seconds for a unit of `size` (entries; 1 for a program): `base + per * size`, `per`
    following the measurements."""

    __slots__ = ("base", "per")

    def __init__(self, base: float, per: float):
        self.base = base
        self.per = per

    def __call__(self, size: int) -> float:
        return self.base + self.per * size

    def add(self, size: int, seconds: float) -> None:
        """A measurement: `seconds` for a unit of `size`."""
        per = max(seconds - self.base, 0.0) / max(size, 1)
        self.per += (per - self.per) * WEIGHT


class Paid:
    """A unit's account: what running it op by op cost so far (`rent`, compiles of new
    programs included), its op-by-op runs and their seconds without compiles (`op`), and
    once compiled the timed compiled runs (`fast`: their seconds); `slower` once the
    compiled program was found slower than op by op."""

    __slots__ = ("rent", "runs", "op", "op_runs", "fast", "fast_runs", "slower")

    def __init__(self) -> None:
        self.rent = 0.0
        self.runs = 0
        self.op = 0.0
        self.op_runs = 0
        self.fast = 0.0
        self.fast_runs = 0
        self.slower = False


class Rule:
    """The measured costs and the decisions: `whole` (a tape's structure), `chunks` (the
    windows of a tape)."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter):
        self.clock = clock
        #: A one-op program's or a vjp kernel's first call (its compile), per program.
        self.program = Estimate(0.0, 0.03)
        #: An entry run op by op (its one-op program and its vjp kernel), no compile.
        self.entry = Estimate(0.0, 25e-6)
        #: A whole backward's build and first call, per entry.
        self.whole_compile = Estimate(0.15, 0.006)
        #: A chunk program's first call (its forward, or one vjp), per entry.
        self.chunk_compile = Estimate(0.05, 0.007)
        #: Seconds spent in first calls so far (an op-by-op backward's share is its compiles).
        self.compiling = 0.0

    # ------------------------------------------------------------ decisions
    def whole(self, paid: Paid, n: int, never_run: Callable[[], int], cold: bool) -> bool:
        """Compile a tape of `n` entries whole now? Yes once its rent with what this backward
        would cost op by op (its entries, and if `cold` counts, two compiles per program
        that never ran: `never_run()`) reaches the whole backward's expected compile."""
        if paid.slower:
            return False
        today = paid.rent + self.entry(n)
        buy = self.whole_compile(n)
        if today >= buy:
            return True
        if not cold or today + 2 * n * self.program.per < buy:
            return False
        return today + 2 * never_run() * self.program.per >= buy

    def chunk(self, paid: Paid, size: int, count: int) -> bool:
        """Run a window structure of `size` entries, met `count` times in this tape, as a
        chunk? Yes once its rent with this tape's share reaches the compile of its programs
        (`CHUNK_PROGRAMS`: the forward and vjps for a few patterns of cotangents); otherwise
        this tape's share is paid. Buying spends the rent: a chunk its bounded cache has
        dropped (backward_chunks.CHUNK_LIMIT) pays again before it is compiled again."""
        share = count * self.entry(size)
        if paid.rent + share >= CHUNK_PROGRAMS * self.chunk_compile(size):
            paid.rent = 0.0
            return True
        paid.rent += share
        paid.runs += count
        return False

    # ------------------------------------------------------------ measurements
    def first_call(self, prog: Any, args: list) -> Any:
        """A one-op program's (or a kernel's) first call, timed: its compile (unless it was
        compiled ahead: `ahead` timed that)."""
        if prog.ahead:
            return prog.first_call(*args)
        t0 = self.clock()
        out = prog.first_call(*args)
        dt = self.clock() - t0
        self.program.add(1, dt)
        self.compiling += dt
        return out

    def ahead(
        self, jobs: list[tuple[Estimate, int]], compile_all: Callable[[], list[float]]
    ) -> None:
        """`compile_all()`, the compiles of programs of the kinds and sizes `jobs` at once (on
        a pool of threads, srcgrad/imperative/compile_ahead.py), which gives the seconds each
        took on its thread: the batch's wall time is what this backward spent, and each
        compile is charged its part of it (by its own seconds), as what compiling it cost
        where it was compiled. (Its own seconds, stretched by the others sharing the cores,
        would make a cold tape's op-by-op backward look dearer than it is.)"""
        t0 = self.clock()
        seconds = compile_all()
        wall = self.clock() - t0
        self.compiling += wall
        total = sum(seconds) or 1.0
        for (estimate, size), dt in zip(jobs, seconds):
            estimate.add(size, wall * dt / total)

    def compiled(self, estimate: Estimate, size: int, run: Callable[[], Any]) -> Any:
        """`run()`, the first call of a compiled unit (a whole backward's build and call, a
        chunk's program), timed into `estimate`."""
        t0 = self.clock()
        out = run()
        dt = self.clock() - t0
        estimate.add(size, dt)
        self.compiling += dt
        return out

    def op_by_op(self, paid: Paid, n: int, run: Callable[[], Any], chunked: bool) -> Any:
        """`run()`, an op-by-op backward of `n` entries (`chunked`: some ran as chunks),
        blocked until computed and timed: its rent; without chunks, the entries' rate."""
        t0, c0 = self.clock(), self.compiling
        out = jax.block_until_ready(run())
        dt = self.clock() - t0
        compiles = self.compiling - c0
        paid.rent += dt
        paid.runs += 1
        paid.op += dt - compiles
        paid.op_runs += 1
        if not chunked:
            self.entry.add(n, dt - compiles)
        return out

    def fast_run(self, paid: Paid, run: Callable[[], Any]) -> tuple[Any, bool]:
        """`run()`, a compiled whole backward: if its structure ran op by op before, its
        first `JUDGED_AFTER` runs after the compile are blocked and timed; the second item
        is True when they were slower than its op-by-op runs, so the tier must go back. (A
        structure compiled at first sight, its tape cold, has no op-by-op time to compare
        with: running it op by op to get one would compile a program per call.)"""
        if paid.fast_runs >= JUDGED_AFTER or not paid.op_runs:
            return run(), False
        t0 = self.clock()
        out = jax.block_until_ready(run())
        paid.fast += self.clock() - t0
        paid.fast_runs += 1
        if paid.fast_runs < JUDGED_AFTER:
            return out, False
        paid.slower = paid.fast / paid.fast_runs > paid.op / paid.op_runs
        return out, paid.slower


#: The rule imperative mode follows (tests give it a clock of their own).
RULE = Rule()


# ---------------------------------------------------------------- a tape's programs


def cold(entries: Sequence[Any]) -> bool:
    """True when at least half of a tape's entries call distinct one-op programs that have
    never run and were not charged to a whole compile yet (`charge`): differentiating op by
    op would compile about two programs per entry."""
    n, ran = len(entries), 0
    never: set[Any] = set()
    for e in entries:
        prog = e.prog
        if prog.ran or prog.charged:
            ran += 1
            if 2 * ran > n:
                return False
        else:
            never.add(prog)
    return 2 * len(never) >= n > 0


def never_run(entries: Sequence[Any]) -> int:
    """How many one-op programs that have never run a tape's entries call, each once (a
    program called again on the tape is a loop's body, a cell over a sentence's words: its
    compile serves every later structure made of that body, whatever its length), and that
    no whole compile was bought on account of yet (`charge`)."""
    calls: dict[Any, int] = {}
    for e in entries:
        prog = e.prog
        if not prog.ran and not prog.charged:
            calls[prog] = calls.get(prog, 0) + 1
    return sum(1 for k in calls.values() if k == 1)


def charge(entries: Sequence[Any]) -> None:
    """A whole compile was bought for a tape of these entries: the programs they call that
    never ran are not counted again (`never_run`). A compiled tape runs none of them, so
    without this every later tape of another structure made of the same ops (a sentence of
    a new length, the same layers under another loss) would be cold too, and be compiled
    whole on their account again and again."""
    for e in entries:
        if not e.prog.ran:
            e.prog.charged = True


def first_call(prog: Any, args: list) -> Any:
    """`RULE.first_call`: a program's first call, timed."""
    return RULE.first_call(prog, args)


__all__ = [
    "CHUNK_PROGRAMS",
    "JUDGED_AFTER",
    "RULE",
    "WEIGHT",
    "Estimate",
    "Paid",
    "Rule",
    "charge",
    "cold",
    "first_call",
    "never_run",
]
