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

from ..base import dtypes
from ..compiled import eager
from ..core.builder import as_var
from ..base.cache import register
from ..core.dispatch import Weak
from ..ops.creation import zeros_like
from ..ops.elementwise import add
from ..ops.grad_helpers import assign
from .tape import Entry, Ref, Tape, WeakRef
from .tensor import Tensor
from ..transforms.backward import gradients

#: Kernels by (op front, argument tree, differentiated reads, seeded results, sums).
_KERNELS: dict[tuple, tuple[Callable[..., Any], Any]] = register("tape_vjp", {})


def kernel(
    fn: Callable[..., Any],
    tree: Any,
    n_leaves: int,
    groups: tuple[tuple[int, ...], ...],
    outs: tuple[int, ...],
    acc: tuple[bool, ...],
) -> tuple[Callable[..., Any], Any]:
    """The vjp kernel of `fn` and the tree of its arguments: the call's leaves, one cotangent
    per seeded result (`outs`), then the cotangent gathered so far of each group whose `acc`
    is set. A group is the leaf positions that read one tape value (`x * x` reads one value
    twice); the kernel returns one cotangent per group, the sum of its reads' partials plus
    what was gathered, so the backward adds nothing outside the kernels."""
    key = (fn, tree, groups, outs, acc)
    hit = _KERNELS.get(key)
    if hit is not None:
        return hit
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
                active.update(o for o in e.outs if dtypes.is_inexact(values[o].dtype))
                break
    return active


#: Runs one entry's vjp kernel: (entry, kernel, its argument tree, the cotangents it takes
#: after the entry's leaves) -> the cotangents of the groups it reads.
KernelRunner = Callable[[Entry, Callable[..., Any], Any, list], Sequence[Any]]


def reverse(
    entries: Sequence[Entry], active: set[int], cts: dict[int, Any], run: KernelRunner
) -> None:
    """Carry the cotangents `cts` (by number) back through `entries`, newest first: each
    entry with a cotangent on some result runs its vjp kernel (by `run`), which returns the
    cotangents of the active values it read, each with what was gathered so far added."""
    for e in reversed(entries):
        outs = tuple(i for i, o in enumerate(e.outs) if o in cts)
        if not outs:
            continue
        by_num: dict[int, list[int]] = {}
        for i, r in enumerate(e.leaves):
            if type(r) is Ref and r.num in active:
                by_num.setdefault(r.num, []).append(i)
        if by_num:
            nums = list(by_num)
            acc = tuple(n in cts for n in nums)
            fn, ktree = kernel(
                e.fn, e.tree, len(e.leaves), tuple(map(tuple, by_num.values())), outs, acc
            )
            extra = [cts[e.outs[i]] for i in outs] + [cts[n] for n, has in zip(nums, acc) if has]
            cts.update(zip(nums, run(e, fn, ktree, extra)))
        for i in outs:
            del cts[e.outs[i]]


def seeded(tape: Tape, heads: list[int], seeds: list, create_graph: bool) -> dict[int, Any]:
    """The heads' cotangents (by number): their seeds (None: ones), summed over repeats."""
    cts: dict[int, Any] = {}
    for h, s in zip(heads, seeds):
        ct = _seed(tape, h, s, create_graph)
        cts[h] = _add(cts[h], ct) if h in cts else ct
    return cts


def recording_runner(tape: Tape) -> KernelRunner:
    """Kernels recorded onto `tape` (create_graph): their results are Tensors there."""

    def run(e: Entry, fn: Callable[..., Any], tree: Any, extra: list) -> Sequence[Any]:
        return tape.record(fn, [_leaf(tape, r) for r in e.leaves] + extra, tree)

    return run


def eager_runner(tape: Tape) -> KernelRunner:
    """Kernels run by the eager interpreter on the tape's recorded values."""

    def run(e: Entry, fn: Callable[..., Any], tree: Any, extra: list) -> Sequence[Any]:
        return _run_kernel(tape, e, fn, tree, extra)

    return run


def _run_kernel(tape: Tape, e: Entry, fn: Callable[..., Any], tree: Any, extra: list) -> list:
    """The kernel `fn` on the entry's recorded leaves and the cotangents `extra`, by the eager
    interpreter; the entry's signature was taken when it was recorded."""
    leaves, arrays, weak = tape.call_leaves(e)
    parts, more, more_weak = eager.signature(extra)
    outs, _, _ = eager.evaluate(
        fn, leaves + extra, tree, e.parts + parts, arrays + more, weak + more_weak
    )
    return outs


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
    "active_values",
    "eager_runner",
    "kernel",
    "recording_runner",
    "reverse",
    "seeded",
]
