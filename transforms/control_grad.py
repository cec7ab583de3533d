"""Grad makers for `while` and `cond`: recursive grad blocks and recorded residuals.

The backward of a sub-block runs in a grad block that reads forward values of that
sub-block (residuals). Those values do not exist outside the forward block, so each
residual the grad block reads is rebuilt in the grad block or passed out of the forward op.

A `while` is differentiated in five phases (`while_grad`):

1. **choose the carried values** whose gradient flows backwards through the loop
   (`_carried`): those that need a gradient and can get a nonzero one;
2. **ensure an iteration counter** (`_with_counter`): an int32 carry that counts
   0, 1, ... (the loop's own, or a new one), whose final value is the trip count;
3. **build the grad body** (`_grad_body`): the gradient of one iteration, replaying
   iteration count-1-k at backward step k;
4. **plan each residual** (`_plan_residuals`): rebuild it (constants, counters, carried
   values the body returns unchanged, views and index arithmetic over those: ops whose
   registry row has `remat`), zeros (read only for its shape), read it from a stack the
   loop already has (an earlier gradient of the same loop, a user's scan output), or record
   it in a new stack (one slot per iteration); a loop nested in the body (or a `cond`
   holding one) runs again from its recorded inputs (replay.py) rather than have its
   stacks recorded per iteration; the records give a new forward loop op (`extend_loop`)
   that replaces the old one;
5. **emit the backward loop** (`_backward_loop`): k counts up to the trip count (a
   constant where the forward loop's is known, `counter < N` from a constant start as in a
   scan: `_static_trips`, so that XLA knows the backward loop's trip count too).

A loop with `checkpoints=k` (a `treeverse` attr) records nothing: after phase 1 its
gradient is transforms/treeverse.py's backward loop over the forward's k snapshots.

A `cond`'s gradient is in cond_grad.py. srcgrad/wiring.py sets these grad makers as the hooks
the `while`, `checkpoint` and `cond` rows declare.

Because the grad blocks are made of ordinary ops (and loops of ordinary `while` ops), the
result can be differentiated again.

Layer L4 (transforms): see docs/design.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import jax
import numpy as np

from srcgrad.base import dtypes
from srcgrad.core.builder import constant, constant_pool, emit
from srcgrad.base.config import config
from srcgrad.ir.program import Block, Op, Variable
from srcgrad.core.builder import as_var
from srcgrad.ops.remat import barrier
from srcgrad.ops.creation import zeros
from srcgrad.ops.elementwise import add, less, less_equal, logical_and, subtract
from srcgrad.ops.indexing import dynamic_index, dynamic_update_index
from srcgrad.ops.reduce import max as reduce_max
from srcgrad.core.registry import REGISTRY, ZERO
from srcgrad.ops.grad_helpers import is_known_zero

from .accumulate import accumulate
from .backward import backward_block, forward_requires
from .replay import Rebuild, replayed
from .treeverse import outputs_unused, treeverse_grad
from srcgrad.ir.analysis import free_vars, live_ops, producer

from .passes import (
    const_scalar,
    emit_at,
    emit_before,
    repoint_checks,
    replace_op,
    residuals,
    shape_only_reads,
    substitute,
)

#: Stack capacity of an unbounded loop on its first run; overflow reruns with a larger one.
INITIAL_CAPACITY = 64
INT32 = np.dtype(np.int32)


# ---------------------------------------------------------------- while: 1. carried values


def _carried_requires(body: Block, init_need: list[bool], caps: list[Variable]) -> list[int]:
    """Carried values that carry a gradient: a fixed point over the loop body."""
    n = len(body.params)
    inexact = [dtypes.is_inexact(p.dtype) for p in body.params]
    req = {j for j in range(n) if init_need[j] and inexact[j]}
    while True:
        flows = forward_requires(body, [body.params[j] for j in req] + caps, set())
        new = req | {j for j in range(n) if inexact[j] and body.results[j] in flows}
        if new == req:
            return sorted(req)
        req = new


def _influences(block: Block, targets: list[Variable]) -> set[Variable]:
    """The values of `block` (and captures) that `targets` depend on differentiably."""
    seen = set(targets)
    for op in reversed(block.ops):
        if REGISTRY[op.type].grad is not ZERO and any(o in seen for o in op.outputs):
            seen.update(op.inputs)
    return seen


def _carried(body: Block, gs: list, init_need: list[bool], caps: list[Variable]) -> list[int]:
    """The carried values whose gradient the backward loop carries: those that carry a
    gradient and can get a nonzero one, seeded at the loop's output or read by the body to
    make one that is (a fixed point).

    A convergence error carried only for the loop's condition is dropped here, so its
    gradient chain is neither built nor recorded.
    """
    carried = _carried_requires(body, init_need, caps)
    useful = {j for j in carried if not is_known_zero(gs[j])}
    while True:
        reach = _influences(body, [body.results[j] for j in useful])
        new = useful | {j for j in carried if body.params[j] in reach}
        if new == useful:
            return sorted(useful)
        useful = new


# ---------------------------------------------------------------- while: the forward loop op


@dataclass
class Carry:
    """A value to add to the carried state of a forward loop."""

    name: str
    init: Variable
    step: Callable[[Variable], Variable]  # its body parameter -> its next value
    out: Variable  # its final value, an output of the new loop op


def new_carry(loop: Op, init: Variable, step: Callable[[Variable], Variable], name: str) -> Carry:
    """A carried value `name` for `loop`: the initial value is renamed `name@INIT`, the final
    one is named `name`."""
    loop.block.program.rename(init, f"{name}@INIT")
    out = loop.block.new_var(name, init.shape, init.dtype, exact_name=True)
    return Carry(name, init, step, out)


def extend_loop(loop: Op, carries: list[Carry]) -> Op:
    """A new `while` op that carries `carries` after the loop's own carried values.

    Its cond and body blocks are the loop's, given the new parameters and body results; the
    caller puts it in the block in place of the original op (`replace_op`). Without carries,
    the loop itself.
    """
    if not carries:
        return loop
    cond_b, body = loop.attrs["cond"], loop.attrs["body"]
    n = len(body.params)
    for c in carries:
        cond_b.add_param(c.name, c.init.shape, c.init.dtype)
    params = [body.add_param(c.name, c.init.shape, c.init.dtype) for c in carries]
    with loop.block.program.block_guard(body):
        body.results += [c.step(p) for c, p in zip(carries, params)]
    inputs = loop.inputs[:n] + [c.init for c in carries] + loop.inputs[n:]
    return Op(
        "while",
        inputs,
        loop.outputs + [c.out for c in carries],
        dict(loop.attrs),
        loop.loc,
        loop.block,
        loop.origin,
    )


# ---------------------------------------------------------------- while: 2. the counter


def _counters(loop: Op) -> dict[Variable, tuple[Variable, int]]:
    """Carried integers of a loop that add or subtract 1 per iteration.

    Maps each such body parameter to (its init, step): in iteration i it holds init + step * i.
    """
    body = loop.attrs["body"]
    out: dict[Variable, tuple[Variable, int]] = {}
    for j, p in enumerate(body.params):
        res = body.results[j]
        src = producer(res) if res.block is body else None
        if p.dtype.kind not in "iu" or src is None or len(src.inputs) != 2:
            continue
        x, c = src.inputs
        if src.type == "add" and c is p:
            x, c = c, x
        step = const_scalar(c)
        if x is p and c is not p and src.type in ("add", "subtract") and step in (1, -1):
            out[p] = (loop.inputs[j], step if src.type == "add" else -step)
    return out


def _with_counter(
    loop: Op, counters: dict[Variable, tuple[Variable, int]]
) -> tuple[Op, Variable, Variable]:
    """The loop with an int32 carry counting 0, 1, ...: (loop, its body parameter, the trip
    count). The loop's own such counter if it has one, else a new carry `<loop>@ITERS`;
    `counters` learns it."""
    body = loop.attrs["body"]
    for j, p in enumerate(body.params):
        start, step = counters.get(p, (None, 0))
        if p.dtype == INT32 and step == 1 and const_scalar(start) == 0:
            return loop, p, loop.outputs[j]
    zero = emit_before(loop, lambda: zeros((), INT32))
    iters = new_carry(loop, zero, lambda i: add(i, 1), f"{loop.outputs[0].name}@ITERS")
    loop = extend_loop(loop, [iters])
    counter = body.params[-1]
    counters[counter] = (zero, 1)
    return loop, counter, iters.out


def _static_trips(loop: Op, counters: dict[Variable, tuple[Variable, int]]) -> int | None:
    """The trip count of a loop whose condition is `counter < N` for a counter that starts
    at a constant and adds 1 per iteration, and a constant N (a scan's loop): N - start,
    else None."""
    cond_b, body = loop.attrs["cond"], loop.attrs["body"]
    test = producer(cond_b.results[0])
    if test is None or test.type != "less" or test.block is not cond_b:
        return None
    x, bound = test.inputs
    limit = const_scalar(bound)
    j = next((j for j, p in enumerate(cond_b.params) if p is x), None)
    if j is None or not isinstance(limit, int):
        return None
    start, step = counters.get(body.params[j], (None, 0))
    first = None if start is None else const_scalar(start)
    if step != 1 or not isinstance(first, int):
        return None
    return max(0, limit - first)


def _iteration_value(start: Variable, step: int, k1: Variable) -> Variable:
    """`start + step * k1` in the dtype of `start`: a counter's value in iteration k1."""
    i = k1 if start.dtype == INT32 else emit("convert", [k1], {"dtype": start.dtype})[0]
    if step == 1 and const_scalar(start) == 0:
        return i
    return add(start, i) if step == 1 else subtract(start, i)


# ---------------------------------------------------------------- while: 3. the grad body


@dataclass
class GradBody:
    """The grad block of a loop body: params (k, carried grads, capture accumulators)."""

    block: Block
    k1: Variable  # the iteration it replays: count-1-k
    n_head: int  # ops before this index compute k1; residual loads go there


def _grad_body(
    body: Block, carried: list[int], caps: list[Variable], count: Variable, parent: Block
) -> GradBody:
    """The gradient of one iteration: from the carried values' gradients after iteration
    k1 to those before it, plus the captures' gradients added to their accumulators."""
    prog = body.program
    gb = prog.create_block(parent, forward_block_idx=body.idx)
    k = gb.add_param("k", (), INT32)
    dcarry = [
        gb.add_param(f"{body.params[j].name}@GRAD", body.params[j].shape, body.params[j].dtype)
        for j in carried
    ]
    accs = [gb.add_param(f"{c.name}@GRAD_acc", c.shape, c.dtype) for c in caps]
    with prog.block_guard(gb):
        k_next = add(k, 1)
        k1 = subtract(count, k_next)  # the iteration replayed: count-1, ..., 0
        n_head = len(gb.ops)
        wrt = [body.params[j] for j in carried] + caps
        grads = backward_block(
            body, [(body.results[j], d) for j, d in zip(carried, dcarry)], wrt, set()
        )
        new_dcarry = [
            grads[body.params[j]]
            if grads[body.params[j]] is not None
            else zeros(body.params[j].shape, body.params[j].dtype)
            for j in carried
        ]
        new_accs = [
            accumulate(a, grads[c]) if grads[c] is not None else a for a, c in zip(accs, caps)
        ]
        gb.results = [k_next] + new_dcarry + new_accs
    gb.ops[n_head:] = live_ops(gb.ops[n_head:], gb.results)  # k1's ops stay: the loads read it
    return GradBody(gb, k1, n_head)


# ---------------------------------------------------------------- while: 4. residuals


def _stacked(
    loop: Op, counters: dict[Variable, tuple[Variable, int]], slots: int
) -> dict[Variable, Variable]:
    """Body values the loop already stacks, slot i at iteration i: value -> the loop's output.

    These are the stacks of an earlier gradient of the same loop (grad of grad), or a user's
    scan output written with dynamic_update_index at a counter that starts at 0.
    """
    body = loop.attrs["body"]
    out: dict[Variable, Variable] = {}
    for j, p in enumerate(body.params):
        res = body.results[j]
        src = producer(res) if res.block is body else None
        if (
            src is None
            or src.type != "dynamic_update_index"
            or src.attrs.get("axis") != 0
            or src.inputs[0] is not p
            or p.shape[0] < slots
        ):
            continue
        start, step = counters.get(src.inputs[2], (None, 0))
        if step == 1 and const_scalar(start) == 0:
            out.setdefault(src.inputs[1], loop.outputs[j])
    return out


@dataclass
class ResidualPlan:
    """How the grad body gets each forward value of the loop body it reads."""

    rebuild: Rebuild
    rebuilt: list[Variable] = field(default_factory=list)  # computed again
    zeroed: list[Variable] = field(default_factory=list)  # read only for their shape
    stacks: dict[Variable, Variable] = field(default_factory=dict)  # read from a stack

    def loads(self, k1: Variable) -> dict[Variable, Variable]:
        """Emit the grad body's copies of the residuals (iteration k1); map each to its copy.
        Replayed loops read recorded values, so then the records are loaded first."""
        if not self.rebuild.replay:
            got = self.rebuild.emit(self.rebuilt)
            got.update((r, zeros(r.shape, r.dtype)) for r in self.zeroed)
            got.update(
                (r, dynamic_index(s, k1, allow_negative_indices=False))
                for r, s in self.stacks.items()
            )
            return got
        loaded = {
            r: dynamic_index(s, k1, allow_negative_indices=False) for r, s in self.stacks.items()
        }
        self.rebuild.given.update((r, lambda v=v: v) for r, v in loaded.items())
        got = self.rebuild.emit(self.rebuilt)
        got.update((r, zeros(r.shape, r.dtype)) for r in self.zeroed)
        got.update(loaded)
        return got


def _plan_residuals(
    fwd: Op,
    loop: Op,
    grad: GradBody,
    counter: Variable,
    counters: dict[Variable, tuple[Variable, int]],
    slots: int,
) -> tuple[Op, ResidualPlan, dict[Variable, Variable]]:
    """Plan each residual the grad body reads; returns the loop extended with the new
    stacks, the plan, and every stack by the body value it holds (the residuals, and the
    trip counts of inner loops that capacity checks read)."""
    body = loop.attrs["body"]
    given: dict[Variable, Callable[[], Variable]] = {
        p: (lambda v=loop.inputs[j]: v) for j, p in enumerate(body.params) if body.results[j] is p
    }
    for p, (start, step) in counters.items():
        given.setdefault(p, lambda start=start, step=step: _iteration_value(start, step, grad.k1))
    reads = residuals(grad.block, body)
    plan = ResidualPlan(Rebuild(body, given, replayed(body, reads)))
    recorded = []
    shape_only = shape_only_reads(grad.block)
    for r in reads:
        if plan.rebuild.can(r):
            plan.rebuilt.append(r)
        elif r in shape_only:
            plan.zeroed.append(r)
        else:
            recorded.append(r)
    if plan.rebuild.replay:
        recorded = list(dict.fromkeys(recorded + plan.rebuild.inputs_to_record(plan.rebuilt)))
    checks = [v for _, v, _ in body.program.capacity_checks if v.block is body]
    stacks = _stacked(loop, counters, slots)
    new = [r for r in dict.fromkeys(checks + recorded) if r not in stacks]
    inits = [emit_before(fwd, lambda r=r: zeros((slots,) + r.shape, r.dtype)) for r in new]
    carries = [
        new_carry(
            loop,
            init,
            lambda s, r=r: dynamic_update_index(s, r, counter, allow_negative_indices=False),
            f"{r.name}@STACK",
        )
        for r, init in zip(new, inits)
    ]
    loop = extend_loop(loop, carries)
    stacks.update((r, c.out) for r, c in zip(new, carries))
    plan.stacks = {r: stacks[r] for r in recorded}
    return loop, plan, stacks


# ---------------------------------------------------------------- while: 5. the backward loop


def _backward_loop(
    fwd: Op,
    grad: Block,
    count: Variable,
    dcarry: list[Variable],
    caps: list[Variable],
    capacity: int,
    parent: Block,
) -> list[Variable]:
    """`while k < count: grad(k, ...)` from the carried values' gradients `dcarry` and zero
    accumulators for `caps`: k counts up from 0 (a loop XLA can analyse, where a count-down
    one compiles to extra kernels) and the grad body replays iteration count-1-k."""
    prog = parent.program
    cond_b = prog.create_block(parent)
    kc = cond_b.add_param("k", (), INT32)
    for v in grad.params[1:]:
        cond_b.add_param(v.name, v.shape, v.dtype)
    with prog.block_guard(cond_b):
        cond_b.results = [less(kc, count)]
    init = [zeros((), INT32)] + dcarry + [zeros(c.shape, c.dtype) for c in caps]
    captured = list(dict.fromkeys(free_vars(cond_b) + free_vars(grad)))
    attrs = {"cond": cond_b, "body": grad, "max_iters": capacity, "loop_id": prog.loop_count}
    prog.loop_count += 1
    outs = emit("while", init + captured, attrs, base=f"{fwd.outputs[0].name}@GRAD_loop")
    cond_b.owner = grad.owner = parent.ops[-1]
    return outs[1:]


def _stop_at_limit(loop: Op, j: int) -> None:
    """Make an unbounded forward loop also stop once its iteration counter (carried value j)
    passes `config.max_loop_records`: its count then exceeds the limit, which the caller
    reports, instead of a loop whose condition never becomes false hanging."""
    cond_b = loop.attrs["cond"]
    with loop.block.program.block_guard(cond_b), constant_pool(None):
        cond_b.results = [
            logical_and(cond_b.results[0], less_equal(cond_b.params[j], config.max_loop_records))
        ]


def _checkpointed_grad(op: Op, gs: list, need: list, caps: list[Variable]) -> list:
    """A checkpointed loop: the carried state leaves (carries 1..m) whose gradient flows,
    then treeverse over its snapshots."""
    body = op.attrs["body"]
    m = op.attrs["treeverse"].n_leaves
    state = Block(body.program, body.idx, body.parent_idx)  # the body as a map of the state
    state.params, state.results, state.ops = (
        body.params[1 : 1 + m],
        body.results[1 : 1 + m],
        body.ops,
    )
    carried = _carried(state, gs[1 : 1 + m], need[1 : 1 + m], caps)
    if not carried:
        return [None] * len(op.inputs)
    return treeverse_grad(op, gs, need, carried, caps)


def while_grad(op: Op, gs: list, need: list) -> list:
    """The grad maker of `while` (the five phases of the module doc)."""
    prog = op.block.program
    parent = prog.current_block()
    body = op.attrs["body"]
    n = len(body.params)
    caps = list(dict.fromkeys(c for c, nd in zip(op.inputs[n:], need[n:]) if nd))
    if "treeverse" in op.attrs and outputs_unused(op, gs):
        return _checkpointed_grad(op, gs, need, caps)
    carried = _carried(body, gs, need[:n], caps)
    if not carried:
        return [None] * len(op.inputs)
    bounded = op.attrs["max_iters"] is not None
    capacity = (
        op.attrs["max_iters"]
        if bounded
        else prog.capacities.get(op.attrs["loop_id"], INITIAL_CAPACITY)
    )
    first_block = len(prog.blocks)  # the grad blocks made from here on
    counters = _counters(op)
    loop, counter, count = _with_counter(op, counters)
    trips = _static_trips(op, counters)
    # A known trip count (a scan's) as a constant: XLA then knows the backward loop's too.
    steps = constant(trips, INT32) if trips is not None and trips <= capacity else count
    grad = _grad_body(body, carried, caps, steps, parent)
    loop, plan, stacks = _plan_residuals(op, loop, grad, counter, counters, max(capacity, 1))
    substitute(grad.block, emit_at(grad.block, grad.n_head, lambda: plan.loads(grad.k1)))

    def lift(v: Variable) -> Variable:  # an inner loop's largest trip count over all iterations
        with prog.block_guard(op.block):
            return reduce_max(stacks[v])

    repoint_checks(prog, body, lift)
    if not bounded and not any(v is count for _, v, _ in prog.capacity_checks):
        prog.capacity_checks.append((op.attrs["loop_id"], count, op))
        _stop_at_limit(loop, next(j for j, p in enumerate(body.params) if p is counter))
    outs = _backward_loop(op, grad.block, steps, [gs[j] for j in carried], caps, capacity, parent)
    if loop is not op:
        replace_op(op, loop, prog.blocks[first_block:] + [parent])
    result: list = [None] * len(need)
    for j, g in zip(carried, outs):
        result[j] = g if need[j] else None
    acc_out = dict(zip(caps, outs[len(carried) :]))
    for i, c in enumerate(op.inputs[n:]):
        result[n + i] = acc_out.pop(c, None)  # a value captured twice: its gradient once
    return result


# ---------------------------------------------------------------- checkpoint


def checkpoint_grad(op: Op, gs: list, need: list) -> list:
    """Run the checkpointed function again on the op's inputs, in the grad block, and
    differentiate that copy: the forward pass keeps only the inputs."""
    gblock = op.block.program.current_block()
    n_before = len(gblock.ops)
    n = op.attrs["n_args"]
    leaves = jax.tree_util.tree_leaves(op.attrs["fn"]([barrier(v) for v in op.inputs[:n]]))
    outs = [as_var(v, like=o) for v, o in zip(leaves, op.outputs)]
    segment = Block(gblock.program, gblock.idx, gblock.parent_idx)  # a view of the new ops
    segment.ops = gblock.ops[n_before:]  # the barriers too: the inputs' grads pass through
    wrt = list(dict.fromkeys(v for v, nd in zip(op.inputs, need) if nd))
    seeds = [(o, g) for o, g in zip(outs, gs) if g is not None]
    grads = backward_block(segment, seeds, wrt, set())
    result: list = []
    for v, nd in zip(op.inputs, need):
        result.append(grads.pop(v, None) if nd else None)  # a repeated input: its grad once
    return result
