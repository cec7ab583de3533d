"""Compiling, several at once, the programs an op-by-op backward is about to call first.

Op by op, each program a tape calls for the first time (an entry's one-op program, a vjp
kernel for a pattern of cotangents, a chunk's forward or vjp) is an XLA compile, of 30-60
ms here for a one-op program, and a fresh model's first step calls dozens (an LSTM cell:
about 40). Which ones is known before the backward runs: the forward's programs are its
entries' and its chunks', and the vjps follow from the tape's structure (the reverse loop
run on shapes and dtypes, calling no program: `_backward_jobs`). XLA's compile releases the
GIL, so they are compiled on a pool of `WORKERS` threads before the backward runs them
(JAX's trace and lowering of each still take turns on the GIL). The programs are the ones
the backward would have compiled one by one, so the gradients are the same; a program the
pool could not compile compiles at its first call, as before.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, Callable, Sequence

import jax

from .backward_op_by_op import Pattern, kernel_program, reverse
from .cost_rule import RULE, Estimate
from .tape import Ref, Tape
from .tensor import PENDING

#: Threads compiling at once (one per core, up to 8); below 2 nothing is compiled ahead.
WORKERS = min(os.cpu_count() or 1, 8)

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def compile_ahead(tape: Tape, plan: Sequence[Any], heads: list[int], active: set[int]) -> None:
    """Compile on the pool the programs that the op-by-op backward of `tape` by the windows
    `plan` (of `heads`; `active`: the values that carry cotangents) would compile one by
    one: when some entry run op by op calls a program that never ran or, reading an active
    value, of an op that has no kernel yet, or a chunk is new; and there are two or more."""
    if WORKERS < 2 or not _new_programs(tape, plan, active):
        return
    jobs: dict[Any, Job] = {}
    _forward_jobs(tape, plan, jobs)
    _backward_jobs(tape, plan, heads, active, jobs)
    if len(jobs) >= 2:
        RULE.ahead(
            [(est, size) for _, est, size in jobs.values()],
            lambda: list(_threads().map(_compile, [run for run, _, _ in jobs.values()])),
        )


def _new_programs(tape: Tape, plan: Sequence[Any], active: set[int]) -> bool:
    """Whether the backward calls a program that never ran: an entry's one-op program, the
    kernel of an entry that reads an active value and whose op has none yet (an op on data
    alone never has one), a chunk's forward."""
    for w in plan:
        if w.chunk is not None:
            if w.chunk.forward() not in w.chunk.compiled:
                return True
            continue
        for e in tape.entries[w.start : w.stop]:
            if not e.prog.ran:
                return True
            if not e.prog.kernels:
                for r in e.leaves:
                    if type(r) is Ref and r.num in active:
                        return True
    return False


#: A compile to run on the pool, the estimate of its kind and its size (as `Estimate` takes).
Job = tuple[Callable[[], None], Estimate, int]


def _forward_jobs(tape: Tape, plan: Sequence[Any], jobs: dict[Any, Job]) -> None:
    """The programs that never ran that computing the forward calls (the entries' one-op
    programs, the chunks' forwards), with their arguments' shapes and dtypes."""
    values, entries = tape.values, tape.entries
    for w in plan:
        chunk = w.chunk
        if chunk is not None and w.uncomputed(tape):
            fn = chunk.forward()
            if fn not in chunk.compiled and fn not in jobs:
                run = partial(chunk.compile_ahead, fn, [_aval(values[n]) for n in w.reads])
                jobs[fn] = (run, RULE.chunk_compile, w.stop - w.start)
            continue
        for e in entries[w.start : w.stop]:
            prog = e.prog
            if e.outs and type(values[e.outs[0]]) is PENDING and not prog.ran:
                if not prog.ahead and prog not in jobs:
                    avals = [_aval(values[n]) for n in e.feed] + [_aval(c) for c in prog.captured]
                    jobs[prog] = (partial(prog.compile_ahead, avals), RULE.program, 1)


def _backward_jobs(
    tape: Tape, plan: Sequence[Any], heads: list[int], active: set[int], jobs: dict
) -> None:
    """The vjp kernels and chunk vjps that the backward will call for the first time: its
    reverse loop run with the cotangents' shapes and dtypes in place of their values,
    calling no program. (A chunk's window is run so too, for which values it gives a
    cotangent: those its vjp returns.)"""
    entries, values = tape.entries, tape.values
    cts: dict[int, Any] = {h: _aval(values[h]) for h in heads}

    def shapes(e: Any, pattern: Pattern, extra: list) -> list:
        return [_aval(values[e.leaves[group[0]].num]) for group in pattern[0]]

    def plan_kernel(e: Any, pattern: Pattern, extra: list) -> list:
        prog = e.prog
        kp = prog.kernels.get(pattern)
        if kp is None:
            kp = prog.kernels[pattern] = kernel_program(tape, e, pattern, extra)
        if not kp.ran and not kp.ahead and kp not in jobs:
            reads = e.feed[: len(e.feed) - len(prog.weak)]
            avals = (
                [_aval(values[n]) for n in reads]
                + list(extra)
                + [jax.ShapeDtypeStruct((), dt) for _, dt in kp.weak]
                + [_aval(c) for c in kp.captured]
            )
            jobs[kp] = (partial(kp.compile_ahead, avals), RULE.program, 1)
        return shapes(e, pattern, extra)

    for w in reversed(plan):
        if w.chunk is None:
            reverse(entries[w.start : w.stop], active, cts, plan_kernel)
            continue
        vjp = w.vjp(tape, active, cts)
        if vjp is None:
            continue
        if vjp.fn not in w.chunk.compiled and vjp.fn not in jobs:  # a cotangent: its value's shape
            numbers = (*w.reads, *vjp.own, *vjp.seeded, *vjp.gathered)
            run = partial(w.chunk.compile_ahead, vjp.fn, [_aval(values[n]) for n in numbers])
            jobs[vjp.fn] = (run, RULE.chunk_compile, w.stop - w.start)
        reverse(entries[w.start : w.stop], active, cts, shapes)


def _compile(run: Callable[[], None]) -> float:
    """One program compiled ahead (on a pool thread), and the seconds it took. A program
    that fails to compile here is left to its first call, which reports the error where
    the backward needs it."""
    t0 = RULE.clock()
    try:
        run()
    except Exception:  # the first call compiles it again and raises there
        pass
    return RULE.clock() - t0


def _aval(x: Any) -> jax.ShapeDtypeStruct:
    """A tape value's shape and dtype (its results are never weakly typed: each program's
    results have the dtypes of its Program's variables)."""
    if type(x) is PENDING:
        return x
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


def _threads() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="srcgrad-compile")
        return _pool


__all__ = ["WORKERS", "compile_ahead"]
