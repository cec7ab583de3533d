"""Compiling, several at once, the programs an op-by-op backward is about to call first.

Op by op, each program a tape calls for the first time (an entry's one-op program, a vjp
kernel for a pattern of cotangents) is an XLA compile of 30-60 ms here, and a fresh model's
first step calls dozens (an LSTM cell: about 40). Which ones is known before the backward
runs: the forward's programs are its entries', and the kernels follow from the tape's
structure (the reverse loop run on shapes and dtypes, calling no program: `_kernel_jobs`).
XLA's compile releases the GIL, so they are compiled on a pool of `WORKERS` threads before
the backward runs them (JAX's trace and lowering of each still take turns on the GIL). The
programs are the ones the backward would have compiled one by one, so the gradients are
the same; a program the pool could not compile compiles at its first call, as before.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

import jax

from .backward_op_by_op import Pattern, active_values, kernel_program, reverse
from .cost_rule import RULE
from .tape import Tape
from .tensor import PENDING

#: Threads compiling at once (one per core, up to 8); below 2 nothing is compiled ahead.
WORKERS = min(os.cpu_count() or 1, 8)

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def compile_ahead(tape: Tape, plan: Sequence[Any], heads: list[int], xs: list[int | None]) -> None:
    """Compile on the pool the programs that the op-by-op backward of `tape` by the windows
    `plan` (of `heads`, with respect to `xs`) would compile one by one: when some entry run
    op by op calls a program that never ran or whose op has no kernel yet, and there are two
    or more."""
    if WORKERS < 2:
        return
    entries = tape.entries
    ranges = [(w.start, w.stop) for w in plan if w.chunk is None]
    if not any(not e.prog.ran or not e.prog.kernels for a, b in ranges for e in entries[a:b]):
        return
    jobs: dict[Any, list] = {}
    _forward_jobs(tape, ranges, jobs)
    _kernel_jobs(tape, plan, heads, xs, jobs)
    if len(jobs) >= 2:
        RULE.ahead(len(jobs), lambda: list(_threads().map(_compile, jobs.items())))


def _forward_jobs(tape: Tape, ranges: list[tuple[int, int]], jobs: dict[Any, list]) -> None:
    """The one-op programs that never ran of the entries to compute, with their arguments'
    shapes and dtypes."""
    values = tape.values
    for a, b in ranges:
        for e in tape.entries[a:b]:
            prog = e.prog
            if e.outs and type(values[e.outs[0]]) is PENDING and not prog.ran:
                if not prog.ahead and prog not in jobs:
                    jobs[prog] = [_aval(values[n]) for n in e.feed] + [
                        _aval(c) for c in prog.captured
                    ]


def _kernel_jobs(
    tape: Tape, plan: Sequence[Any], heads: list[int], xs: list[int | None], jobs: dict
) -> None:
    """The vjp kernels that the backward will call for the first time: its reverse loop run
    with the cotangents' shapes and dtypes in place of their values, calling no program. (A
    chunk's window stands for its vjp: its results' cotangents are taken, and each active
    value it reads is given one.)"""
    entries, values = tape.entries, tape.values
    active = active_values(entries, values, xs)
    cts: dict[int, Any] = {h: _aval(values[h]) for h in heads}

    def plan_kernel(e: Any, pattern: Pattern, extra: list) -> list:
        prog = e.prog
        kp = prog.kernels.get(pattern)
        if kp is None:
            kp = prog.kernels[pattern] = kernel_program(tape, e, pattern, extra)
        if not kp.ran and not kp.ahead and kp not in jobs:
            reads = e.feed[: len(e.feed) - len(prog.weak)]
            jobs[kp] = (
                [_aval(values[n]) for n in reads]
                + list(extra)
                + [jax.ShapeDtypeStruct((), dt) for _, dt in kp.weak]
                + [_aval(c) for c in kp.captured]
            )
        return [_aval(values[e.leaves[group[0]].num]) for group in pattern[0]]

    for w in reversed(plan):
        if w.chunk is None:
            reverse(entries[w.start : w.stop], active, cts, plan_kernel)
            continue
        own = [o for e in entries[w.start : w.stop] for o in e.outs]
        if any(o in cts for o in own):
            for o in own:
                cts.pop(o, None)
            cts.update((n, _aval(values[n])) for n in w.reads if n in active)


def _compile(job: tuple[Any, list]) -> None:
    """One program compiled ahead (on a pool thread). A program that fails to compile here
    is left to its first call, which reports the error where the backward needs it."""
    prog, avals = job
    try:
        prog.compile_ahead(avals)
    except Exception:  # the first call compiles it again and raises there
        pass


def _aval(x: Any) -> jax.ShapeDtypeStruct:
    if type(x) is PENDING:
        return x
    return jax.ShapeDtypeStruct(x.shape, x.dtype, weak_type=getattr(x, "weak_type", False))


def _threads() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="srcgrad-compile")
        return _pool


__all__ = ["WORKERS", "compile_ahead"]
