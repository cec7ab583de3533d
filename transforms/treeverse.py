"""The gradient of a checkpointed `while` (`checkpoints=k`): treeverse over k snapshots.

The forward loop (srcgrad/ops/remat.py) leaves k snapshots of the carried state, each
with its step number. The backward is one `while` loop whose state is a primal position
(`at`: the step of `val`), a cotangent position (`back`: the gradient is that of the state
of step `back`), and the snapshots. Each iteration runs the body once on `val`, then either

- **advances** (`at + 1 < back`): `val` becomes the body's result, `at` moves on; or
- **turns** (`at + 1 == back`): the gradient of that body run moves the cotangent back one
  step, and `val` is reloaded from the latest snapshot before the new `back`;

and afterwards stores `val` in a free slot when `at` reaches the next planned snapshot:
midway to `back` (bisection), or every step once the steps left fit in the free slots. A
snapshot is freed when the turn after the load reaches it. Memory: the k snapshots and
one body run; time: a few forward runs per step, as in revolve.

Layer L4 (transforms): see docs/design.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from srcgrad.core.builder import active_program
from srcgrad.ir.program import Block, Op, Variable
from srcgrad.ops.remat import FREE, Treeverse
from srcgrad.ops.control import cond, while_loop
from srcgrad.ops.creation import arange, zeros, zeros_like
from srcgrad.ops.elementwise import (
    add,
    astype,
    equal,
    floor_divide,
    greater,
    less,
    less_equal,
    logical_and,
    logical_or,
    maximum,
    minimum,
    subtract,
    where,
)
from srcgrad.ops.indexing import dynamic_index, dynamic_update_index, scatter_add
from srcgrad.ops.reduce import sum as reduce_sum
from srcgrad.ops.shape import reshape
from srcgrad.ops.grad_helpers import is_known_zero

from .accumulate import accumulate
from .backward import backward_block

INT32 = np.dtype(np.int32)


def _order(steps: Variable) -> tuple[Variable, Variable]:
    """The slots in step order, free slots last (a permutation: the backward uses the slots
    as a stack through it), and how many are filled."""
    k = steps.shape[0]
    i = arange(k, dtype=INT32)
    a, b = reshape(steps, (k, 1)), reshape(steps, (1, k))  # slot j ranks before slot i
    tie = logical_and(equal(b, a), less(reshape(i, (1, k)), reshape(i, (k, 1))))
    before = logical_or(less(b, a), tie)
    rank = reduce_sum(astype(before, INT32), 1)
    return scatter_add(zeros((k,), INT32), rank, i), reduce_sum(astype(less(steps, FREE), INT32))


def _next(at: Variable, back: Variable, top: Variable, k: int) -> Variable:
    """The step at which to store the next snapshot (FREE for none): `at + 1` while the
    steps left fit in the free slots, else midway to `back`; none when no slot is free or
    `back` is at most two steps ahead (the snapshot at `at` serves them)."""
    gap = subtract(back, at)
    free = subtract(k, top)
    out = where(less_equal(subtract(gap, 2), free), add(at, 1), add(at, floor_divide(gap, 2)))
    return where(logical_or(equal(free, 0), less_equal(gap, 2)), FREE, out)


def _load(
    back: Variable, top: Variable, order: Variable, slots: list[Variable], steps: Variable
) -> tuple[Variable, list[Variable], Variable]:
    """The latest snapshot (before step `back`): (its step, its state, the stack's new size:
    the snapshot is popped if the next turn is from it)."""
    pos = maximum(subtract(top, 1), 0)
    slot = dynamic_index(order, pos, allow_negative_indices=False)
    at = dynamic_index(steps, slot, allow_negative_indices=False)
    return (
        at,
        [dynamic_index(s, slot, allow_negative_indices=False) for s in slots],
        where(equal(add(at, 1), back), pos, top),
    )


def _store(
    save: Variable,
    at: Variable,
    val: list[Variable],
    top: Variable,
    order: Variable,
    slots: list[Variable],
    steps: Variable,
) -> tuple[list[Variable], Variable, Variable]:
    """Where `save`, push `val` (the state of step `at`)."""
    slot = dynamic_index(order, minimum(top, steps.shape[0] - 1), allow_negative_indices=False)

    def put(buf: Variable, v: Variable) -> Variable:
        keep = dynamic_index(buf, slot, allow_negative_indices=False)
        return dynamic_update_index(buf, where(save, v, keep), slot, allow_negative_indices=False)

    return [put(s, v) for s, v in zip(slots, val)], put(steps, at), add(top, astype(save, INT32))


def read_leaves(op: Op) -> list[int]:
    """The state leaves the loop body reads (the others need no snapshot and no backward
    value: the body run gets zeros for them)."""
    body = op.attrs["body"]
    m = op.attrs["treeverse"].n_leaves
    snapshots = {id(r) for r in body.results[1 + m : 1 + 2 * m]}
    used = {
        id(v) for o in body.ops if not any(id(x) in snapshots for x in o.outputs) for v in o.inputs
    }
    return [j for j in range(m) if id(body.params[1 + j]) in used]


def outputs_unused(op: Op, gs: list) -> bool:
    """True when only the state's outputs have a gradient: the snapshots' do not (they
    do in a second-order gradient, which then records the loop as any other)."""
    info: Treeverse = op.attrs["treeverse"]
    m = info.n_leaves
    return all(g is None or is_known_zero(g) for g in gs[1 + m :])


def treeverse_grad(op: Op, gs: list, need: list, carried: list[int], caps: list[Variable]) -> list:
    """The gradients of a checkpointed `while` op's inputs; `carried` are the state leaves
    whose gradient flows back through the loop, `caps` the captured values that need one."""
    info: Treeverse = op.attrs["treeverse"]
    m, k = info.n_leaves, info.k
    n = len(op.attrs["body"].params)
    read = read_leaves(op)
    count = op.outputs[0]
    slots, steps = [op.outputs[1 + m + j] for j in read], op.outputs[1 + 2 * m]
    order, top = _order(steps)
    at, val, top = _load(count, top, order, slots, steps)
    grads = [gs[1 + j] if gs[1 + j] is not None else zeros_like(op.outputs[1 + j]) for j in carried]
    state = (
        at,
        count,
        _next(at, count, top, k),
        top,
        val,
        grads,
        [zeros(c.shape, c.dtype) for c in caps],
        slots,
        steps,
    )

    def step(s: Any) -> Any:
        at, back, nxt, top, val, grads, accs, slots, steps = s
        full_val = [zeros_like(op.outputs[1 + j]) for j in range(m)]
        for j, v in zip(read, val):
            full_val[j] = v
        block = active_program("while_loop").current_block()
        first = len(block.ops)
        out = info.step(full_val)
        run = Block(block.program, block.idx, block.parent_idx)  # a view of the body run
        run.ops = block.ops[first:]

        def turn() -> Any:
            got = backward_block(
                run,
                [(out[j], g) for j, g in zip(carried, grads)],
                [full_val[j] for j in carried] + caps,
                set(),
            )
            new_grads = [
                got[full_val[j]] if got[full_val[j]] is not None else zeros_like(full_val[j])
                for j in carried
            ]
            new_accs = [
                accumulate(a, got[c]) if got[c] is not None else a for a, c in zip(accs, caps)
            ]
            back1 = subtract(back, 1)
            at1, val1, top1 = _load(back1, top, order, slots, steps)
            return at1, back1, _next(at1, back1, top1, k), top1, val1, new_grads, new_accs

        def advance() -> Any:
            return add(at, 1), back, nxt, top, [out[j] for j in read], grads, accs

        at, back, nxt, top, val, grads, accs = cond(equal(add(at, 1), back), turn, advance)
        save = equal(at, nxt)
        slots, steps, top = _store(save, at, val, top, order, slots, steps)
        nxt = where(save, _next(at, back, top, k), nxt)
        return at, back, nxt, top, val, grads, accs, slots, steps

    out = while_loop(lambda s: greater(s[1], 0), step, state)
    result: list = [None] * len(need)
    for j, g in zip(carried, out[5]):
        result[1 + j] = g if need[1 + j] else None
    acc_out = dict(zip(caps, out[6]))
    for i, c in enumerate(op.inputs[n:]):
        result[n + i] = acc_out.get(c)
    return result
