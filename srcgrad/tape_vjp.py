"""Differentiating a tape op by op: the tier for structures not seen before.

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

from typing import Any, Callable

import jax
import jax.numpy as jnp

from . import dtypes, eager
from .builder import as_var
from .cache import register
from .dispatch import Weak
from .ops.creation import zeros_like
from .ops.grad_helpers import assign
from .tape import Ref, Tape, WeakRef
from .tensors import Tensor
from .transforms.backward import gradients

#: Kernels by (op front, argument tree, input positions, output positions).
_KERNELS: dict[tuple, tuple[Callable[..., Any], Any]] = register("tape_vjp", {})


def kernel(fn: Callable[..., Any], tree: Any, n_leaves: int, ins: tuple[int, ...],
           outs: tuple[int, ...]) -> tuple[Callable[..., Any], Any]:
    """The vjp kernel of `fn` (leaves `ins` differentiated, results `outs` seeded) and the
    tree of its arguments: the call's leaves, then one cotangent per seeded result."""
    key = (fn, tree, ins, outs)
    hit = _KERNELS.get(key)
    if hit is not None:
        return hit

    def vjp(*xs: Any) -> tuple:
        leaves = list(xs[:n_leaves])
        for i in ins:  # an independent copy per read: the partial derivative of each read
            leaves[i] = assign(as_var(leaves[i]))
        args, kwargs = jax.tree_util.tree_unflatten(tree, leaves)
        results = [as_var(v) for v in jax.tree_util.tree_leaves(fn(*args, **kwargs))]
        wrt = [leaves[i] for i in ins]
        gs = gradients([results[j] for j in outs], wrt, list(xs[n_leaves:]))
        return tuple(zeros_like(v) if g is None else g for v, g in zip(wrt, gs))
    vjp.__name__ = f"{getattr(fn, '__name__', 'op')}_vjp"
    vjp.__qualname__ = vjp.__name__
    ktree = jax.tree_util.tree_structure((tuple(range(n_leaves + len(outs))), {}))
    hit = _KERNELS[key] = (vjp, ktree)
    return hit


def run_op_by_op(tape: Tape, heads: list[int], seeds: list, xs: list[int | None],
                 create_graph: bool = False) -> list[Any]:
    """The gradients of the heads (seeded by `seeds`; None: ones) with respect to the tape
    values `xs`, entry by entry. With `create_graph` the seeds, kernels and sums are
    recorded onto the tape and the gradients are Tensors there."""
    values = tape.values
    active = {x for x in xs if x is not None}
    for e in tape.entries:
        for r in e.leaves:
            if type(r) is Ref and r.num in active:
                active.update(o for o in e.outs if dtypes.is_inexact(values[o].dtype))
                break
    cts: dict[int, Any] = {}
    for h, s in zip(heads, seeds):
        ct = _seed(tape, h, s, create_graph)
        cts[h] = cts[h] + ct if h in cts else ct
    for e in reversed(tape.entries):
        outs = tuple(i for i, o in enumerate(e.outs) if o in cts)
        if not outs:
            continue
        ins = tuple(i for i, r in enumerate(e.leaves) if type(r) is Ref and r.num in active)
        if ins:
            fn, ktree = kernel(e.fn, e.tree, len(e.leaves), ins, outs)
            leaves = [_leaf(tape, r, create_graph) for r in e.leaves]
            leaves += [cts[e.outs[i]] for i in outs]
            grads = (tape.record(fn, leaves, ktree) if create_graph else
                     eager.run(fn, leaves, ktree))
            for i, g in zip(ins, grads):
                n = e.leaves[i].num
                cts[n] = cts[n] + g if n in cts else g
        for i in outs:
            del cts[e.outs[i]]
    return [None if x is None else cts.get(x) for x in xs]


def _leaf(tape: Tape, r: Any, create_graph: bool) -> Any:
    """An entry's leaf as the kernel takes it: a value (a Tensor of the tape), a weak number."""
    if type(r) is Ref:
        value = tape.values[r.num]
        return tape.bind(value, r.num) if create_graph else value
    if type(r) is WeakRef:
        return Weak(r.value)
    return r


def _seed(tape: Tape, head: int, seed: Any, create_graph: bool) -> Any:
    value = tape.values[head]
    if seed is None:
        seed = jnp.ones(value.shape, value.dtype)
    if not create_graph or type(seed) is Tensor:
        return seed
    return Tensor(seed)


__all__ = ["kernel", "run_op_by_op"]
