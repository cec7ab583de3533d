"""The gradient of a checkpointed `while` (`checkpoints=k`): treeverse over k snapshots.

The forward loop (srcgrad/ops/checkpoint.py) leaves k snapshots of the carried state, each
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
"""
from __future__ import annotations

from typing import Any

from srcgrad.ir import Block, Op, Variable
from srcgrad.ops.checkpoint import FREE, Treeverse
from srcgrad.ops.control import cond, while_loop
from srcgrad.ops.creation import zeros, zeros_like
from srcgrad.ops.elementwise import (add, astype, equal, floor_divide, greater, less,
                                     less_equal, logical_or, subtract, where)
from srcgrad.ops.indexing import dynamic_index, dynamic_update_index
from srcgrad.ops.reduce import argmax, sum as reduce_sum

from .backward import backward_block

import numpy as np

INT32 = np.dtype(np.int32)


def _free(steps: Variable) -> Variable:
    """How many slots are free."""
    return reduce_sum(astype(equal(steps, FREE), INT32))


def _next(at: Variable, back: Variable, steps: Variable) -> Variable:
    """The step at which to store the next snapshot (FREE for none): `at + 1` while the
    steps left fit in the free slots, else midway to `back`; none when no slot is free or
    `back` is at most two steps ahead (the snapshot at `at` serves them)."""
    gap = subtract(back, at)
    free = _free(steps)
    out = where(less_equal(subtract(gap, 2), free), add(at, 1), add(at, floor_divide(gap, 2)))
    return where(logical_or(equal(free, 0), less_equal(gap, 2)), FREE, out)


def _load(back: Variable, slots: list[Variable], steps: Variable
          ) -> tuple[Variable, list[Variable], Variable]:
    """The latest snapshot before step `back`: (its step, its state, the steps with its
    slot freed if the next turn is from it)."""
    slot = argmax(where(less(steps, back), steps, -1))
    at = dynamic_index(steps, slot)
    last = equal(add(at, 1), back)
    return at, [dynamic_index(s, slot) for s in slots], dynamic_update_index(
        steps, where(last, FREE, at), slot)


def _store(save: Variable, at: Variable, val: list[Variable], slots: list[Variable],
           steps: Variable) -> tuple[list[Variable], Variable]:
    """Where `save`, `val` (the state of step `at`) in the first free slot."""
    slot = argmax(equal(steps, FREE))

    def put(buf: Variable, v: Variable) -> Variable:
        return dynamic_update_index(buf, where(save, v, dynamic_index(buf, slot)), slot)
    return [put(s, v) for s, v in zip(slots, val)], put(steps, at)


def outputs_unused(op: Op, gs: list) -> bool:
    """True when only the state's outputs have a gradient: the snapshots' do not (they
    do in a second-order gradient, which then records the loop as any other)."""
    from .control_grad import _is_zero
    info: Treeverse = op.attrs["treeverse"]
    m = info.n_leaves
    return all(g is None or _is_zero(g) for g in gs[1 + m:])


def treeverse_grad(op: Op, gs: list, need: list, carried: list[int],
                   caps: list[Variable]) -> list:
    """The gradients of a checkpointed `while` op's inputs; `carried` are the state leaves
    whose gradient flows back through the loop, `caps` the captured values that need one."""
    from .control_grad import _accumulate
    info: Treeverse = op.attrs["treeverse"]
    m = info.n_leaves
    n = len(op.attrs["body"].params)
    count = op.outputs[0]
    slots, steps = op.outputs[1 + m:1 + 2 * m], op.outputs[1 + 2 * m]
    at, val, steps = _load(count, slots, steps)
    grads = [gs[1 + j] if gs[1 + j] is not None else zeros_like(op.outputs[1 + j]) for j in carried]
    state = (at, count, _next(at, count, steps), val, grads,
             [zeros(c.shape, c.dtype) for c in caps], slots, steps)

    def step(s: Any) -> Any:
        at, back, nxt, val, grads, accs, slots, steps = s
        block = val[0].block.program.current_block()
        first = len(block.ops)
        out = info.step(val)
        run = Block(block.program, block.idx, block.parent_idx)  # a view of the body run
        run.ops = block.ops[first:]

        def turn() -> Any:
            got = backward_block(run, [(out[j], g) for j, g in zip(carried, grads)],
                                 [val[j] for j in carried] + caps, set())
            new_grads = [got[val[j]] if got[val[j]] is not None else zeros_like(val[j])
                         for j in carried]
            new_accs = [_accumulate(a, got[c]) if got[c] is not None else a
                        for a, c in zip(accs, caps)]
            back1 = subtract(back, 1)
            at1, val1, steps1 = _load(back1, slots, steps)
            return at1, back1, _next(at1, back1, steps1), val1, new_grads, new_accs, steps1

        def advance() -> Any:
            return add(at, 1), back, nxt, out, grads, accs, steps
        at, back, nxt, val, grads, accs, steps = cond(equal(add(at, 1), back), turn, advance)
        save = equal(at, nxt)
        slots, steps = _store(save, at, val, slots, steps)
        nxt = where(save, _next(at, back, steps), nxt)
        return at, back, nxt, val, grads, accs, slots, steps

    out = while_loop(lambda s: greater(s[1], 0), step, state)
    result: list = [None] * len(need)
    for j, g in zip(carried, out[4]):
        result[1 + j] = g if need[1 + j] else None
    acc_out = dict(zip(caps, out[5]))
    for i, c in enumerate(op.inputs[n:]):
        result[n + i] = acc_out.get(c)
    return result
