"""Differentiating a tape op by op: the vjp kernels and the reverse loop of the tier for
structures not seen before (srcgrad/imperative/backward_chunks.py drives it).

Each recorded entry is differentiated on its own, in reverse order, by its *vjp kernel*: a
function that re-traces the entry's op on a copy of each differentiated input (so each
read gets its partial derivative, also when the kernel is replayed into a tape whose values
depend on each other) and appends its grad ops with `gradients` (the
registry's grad makers, as the whole-tape backward uses), returning the cotangents of the
inputs asked for. The kernel runs through the eager interpreter, which compiles it once per
op, argument signature and cotangent pattern, the way JAX's eager mode caches an executable
per primitive: a tape of a new shape made of known ops compiles nothing. Under
`create_graph` the kernels are recorded onto the tape like any op, so their results can be
differentiated again (a kernel replayed into a Program is ordinary srcgrad ops).

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import numpy as np

from ..compiled import eager
from ..core.builder import as_var
from ..base.cache import register
from ..core.dispatch import Weak, on_device
from ..ops.creation import zeros_like
from ..ops.elementwise import add
from ..ops.grad_helpers import assign
from . import cost_rule
from .tape import Entry, Ref, Tape, WeakRef
from .tensor import Tensor
from ..transforms.backward import gradients

#: Kernels by (op front, argument tree, number of leaves, pattern).
_KERNELS: dict[tuple, tuple[Callable[..., Any], Any]] = register("tape_vjp", {})

#: What backward asks of one entry: the groups of leaf positions that read one active tape
#: value each, the results seeded with a cotangent, and per group whether a cotangent was
#: gathered for its value so far.
Pattern = tuple[tuple[tuple[int, ...], ...], tuple[int, ...], tuple[bool, ...]]


def kernel(e: Entry, pattern: Pattern) -> tuple[Callable[..., Any], Any]:
    """The vjp kernel of entry `e`'s op for `pattern` and the tree of its arguments: the
    call's leaves, one cotangent per seeded result, then the cotangent gathered so far of
    each group whose flag is set. A group is the leaf positions that read one tape value
    (`x * x` reads one value twice); the kernel returns one cotangent per group, the sum of
    its reads' partials plus what was gathered, so the backward adds nothing outside the
    kernels. Keyed by the op and the pattern, never by the entry's place on a tape."""
    fn, tree, n_leaves = e.fn, e.tree, len(e.leaves)
    key = (fn, tree, n_leaves, pattern)
    hit = _KERNELS.get(key)
    if hit is not None:
        return hit
    groups, outs, acc = pattern
    n_outs = len(outs)

    def vjp(*xs: Any) -> tuple:
        leaves = list(xs[:n_leaves])
        for group in groups:  # an independent copy per read: each read's partial derivative
            for i in group:
                leaves[i] = assign(as_var(leaves[i]))
        args, kwargs = jax.tree_util.tree_unflatten(tree, leaves)
        results = [as_var(v) for v in jax.tree_util.tree_leaves(fn(*args, **kwargs))]
        reads = [leaves[i] for group in groups for i in group]
        gs = iter(
            gradients([results[j] for j in outs], reads, list(xs[n_leaves : n_leaves + n_outs]))
        )
        gathered = iter(xs[n_leaves + n_outs :])
        out = []
        for group, has in zip(groups, acc):
            parts = [g for g in (next(gs) for _ in group) if g is not None]
            if has:
                parts.append(as_var(next(gathered)))
            total = parts[0] if parts else zeros_like(leaves[group[0]])
            for g in parts[1:]:
                total = add(total, g)
            out.append(total)
        return tuple(out)

    vjp.__name__ = f"{getattr(fn, '__name__', 'op')}_vjp"
    vjp.__qualname__ = vjp.__name__
    n_args = n_leaves + n_outs + sum(acc)
    hit = _KERNELS[key] = (vjp, jax.tree_util.tree_structure((tuple(range(n_args)), {})))
    return hit


def active_values(
    entries: Sequence[Entry], values: Sequence[Any], xs: Sequence[int | None]
) -> set[int]:
    """The values (by number) that depend on the inputs `xs` through inexact results: the
    ones whose cotangents backward carries."""
    active = {x for x in xs if x is not None}
    for e in entries:
        for r in e.leaves:
            if type(r) is Ref and r.num in active:
                for o, inexact in zip(e.outs, e.prog.inexact):
                    if inexact:
                        active.add(o)
                break
    return active


#: Runs one entry's vjp kernel: (entry, pattern, the cotangents it takes after the
#: entry's leaves) -> the cotangents of the groups it reads.
KernelRunner = Callable[[Entry, Pattern, list], Sequence[Any]]


def reverse(
    entries: Sequence[Entry], active: set[int], cts: dict[int, Any], run: KernelRunner
) -> None:
    """Carry the cotangents `cts` (by number) back through `entries`, newest first: each
    entry with a cotangent on some result runs its vjp kernel (by `run`), which returns the
    cotangents of the active values it read, each with what was gathered so far added."""
    pop = cts.pop
    for e in reversed(entries):
        eo = e.outs
        if len(eo) == 1:
            if eo[0] not in cts:
                continue
            outs: tuple[int, ...] = _FIRST
            extra = [pop(eo[0])]
        else:
            outs = tuple([i for i, o in enumerate(eo) if o in cts])
            if not outs:
                continue
            extra = [pop(eo[i]) for i in outs]
        by_num: dict[int, Any] = {}
        i = 0
        for r in e.leaves:
            if type(r) is Ref and r.num in active:
                n = r.num
                g = by_num.get(n)
                by_num[n] = (i,) if g is None else g + (i,)
            i += 1
        if by_num:
            acc = tuple([n in cts for n in by_num])
            if True in acc:
                extra += [cts[n] for n, has in zip(by_num, acc) if has]
            cts.update(zip(by_num, run(e, (tuple(by_num.values()), outs, acc), extra)))


#: The pattern's seeded results of an entry with one result.
_FIRST = (0,)


def seeded(tape: Tape, heads: list[int], seeds: list, create_graph: bool) -> dict[int, Any]:
    """The heads' cotangents (by number): their seeds (None: ones), summed over repeats."""
    cts: dict[int, Any] = {}
    for h, s in zip(heads, seeds):
        ct = _seed(tape, h, s, create_graph)
        cts[h] = _add(cts[h], ct) if h in cts else ct
    return cts


def recording_runner(tape: Tape) -> KernelRunner:
    """Kernels recorded onto `tape` (create_graph): their results are Tensors there."""

    def run(e: Entry, pattern: Pattern, extra: list) -> Sequence[Any]:
        fn, tree = kernel(e, pattern)
        return tape.record(fn, [_leaf(tape, r) for r in e.leaves] + extra, tree)

    return run


def eager_runner(tape: Tape) -> KernelRunner:
    """Kernels run by their programs on the tape's recorded values: each entry's kernel
    program hangs on its one-op program (`kernels`, by pattern), so it is found without
    building a key of the call's signature."""
    values = tape.values

    def run(e: Entry, pattern: Pattern, extra: list) -> Sequence[Any]:
        prog = e.prog
        kp = prog.kernels.get(pattern)
        if kp is None:
            kp = prog.kernels[pattern] = kernel_program(tape, e, pattern, extra)
        feed = e.feed
        args = [values[n] for n in (feed[: len(feed) - len(prog.weak)] if prog.weak else feed)]
        args += extra
        if kp.weak:
            args += _lifted(e, kp.weak, values)
        if kp.ran:
            return kp.call(*args, *kp.captured)[0]
        return cost_rule.first_call(kp, args + list(kp.captured))[0]

    return run


def kernel_program(tape: Tape, e: Entry, pattern: Pattern, extra: list) -> Any:
    """The program of entry `e`'s kernel for `pattern` and the cotangents `extra` (arrays,
    or their shapes and dtypes), lowered, not run."""
    fn, tree = kernel(e, pattern)
    leaves, _, _ = tape.call_leaves(e)
    parts, _, _ = eager.signature(extra)
    return eager.program(fn, leaves + extra, tree, e.parts + parts)


def _lifted(e: Entry, lifts: tuple, values: list) -> list:
    """The values of the weak numbers a kernel lifts: those the recording lifted at the
    same dtype are tape values, the others are put on the device."""
    weak = [r for r in e.leaves if type(r) is WeakRef]
    out = []
    for i, dt in lifts:
        n = weak[i].nums.get(dt)
        out.append(values[n] if n is not None else on_device(weak[i].value, dt))
    return out


def _add(a: Any, b: Any) -> Any:
    return a + b


def _leaf(tape: Tape, r: Any) -> Any:
    """An entry's leaf as a recorded kernel takes it: a Tensor of the tape, a weak number."""
    if type(r) is Ref:
        return tape.bind(tape.values[r.num], r.num)
    if type(r) is WeakRef:
        return Weak(r.value)
    return r


def _seed(tape: Tape, head: int, seed: Any, create_graph: bool) -> Any:
    value = tape.values[head]
    if seed is None:  # a host array: a kernel's input, not a program of its own
        seed = np.ones(value.shape, value.dtype)
    if not create_graph or type(seed) is Tensor:
        return seed
    return Tensor(seed)


__all__ = [
    "KernelRunner",
    "Pattern",
    "active_values",
    "eager_runner",
    "kernel",
    "kernel_program",
    "recording_runner",
    "reverse",
    "seeded",
]
