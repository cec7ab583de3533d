"""Grad makers for `while` and `cond`: recursive grad blocks and recorded residuals.

The backward of a sub-block runs in a grad block that reads forward values of that
sub-block (residuals). Those values do not exist outside the forward block, so after the
grad block is built (and its dead ops dropped), each residual it reads is rebuilt in the
grad block or passed out of the forward op:

* rebuilt (`Rebuild`): constants, a loop's counters (from the backward index), carried
  values the body returns unchanged (the loop's init), a branch's operands, and views and
  index arithmetic over those and over values of enclosing blocks (`xs[i]`); a value read
  only for its shape becomes zeros.
* `while`: any other residual is pushed into a stack (one slot per iteration, capacity =
  the loop's static bound or the capacity chosen by the caller) unless the loop stacks it
  already (an earlier gradient of the same loop, a user's scan output); the backward
  `while` counts k up to the trip count and runs the grad block for iteration
  count-1-k, newest first, reading that slot.
* `cond`: any other residual is returned from its branch (zeros from the other) unless the
  branch returns it already; the backward `cond` on the same predicate runs the taken
  branch's grad block.

Because the grad blocks are made of ordinary ops (and loops of ordinary `while` ops), the
result can be differentiated again.
"""
from __future__ import annotations

import re
from typing import Callable, Iterator, TypeVar

import numpy as np

from srcgrad import dtypes
from srcgrad.builder import constant_pool, emit
from srcgrad.config import config
from srcgrad.ir import Block, Op, Program, Variable
from srcgrad.ops.control import free_vars
from srcgrad.ops.creation import zeros
from srcgrad.ops.elementwise import add, less, less_equal, logical_and, subtract
from srcgrad.ops.reduce import max as reduce_max
from srcgrad.ops.indexing import dynamic_index, dynamic_update_index
from srcgrad.registry import REGISTRY, ZERO, grad_maker

from .backward import backward_block, forward_requires
from .lower_jax import live_ops

#: Stack capacity of an unbounded loop on its first run; overflow reruns with a larger one.
INITIAL_CAPACITY = 64
INT32 = np.dtype(np.int32)
T = TypeVar("T")
_RES_SUFFIX = re.compile(r"(_res(_\d+)?)+$")


def walk_blocks(block: Block) -> Iterator[Block]:
    yield block
    for op in block.ops:
        for sub in op.sub_blocks():
            yield from walk_blocks(sub)


def residuals(grad_block: Block, fwd: Block) -> list[Variable]:
    """Values of `fwd` that the grad block (or any block nested in it) reads."""
    seen: dict[Variable, None] = {}
    for blk in walk_blocks(grad_block):
        for op in blk.ops:
            for v in op.inputs:
                if v.block is fwd:
                    seen.setdefault(v, None)
        for v in blk.results:
            if v.block is fwd:
                seen.setdefault(v, None)
    return list(seen)


def residual_name(v: Variable) -> str:
    """`sin_0_res` for a residual of `sin_0` passed out of a branch; a residual passed on
    out of an enclosing branch keeps that name (its length does not grow with the depth)."""
    return _RES_SUFFIX.sub("", v.name.split("@")[0]) + "_res"


def substitute(grad_block: Block, mapping: dict[Variable, Variable]) -> None:
    for blk in walk_blocks(grad_block):
        for op in blk.ops:
            op.inputs = [mapping.get(v, v) for v in op.inputs]
        blk.results = [mapping.get(v, v) for v in blk.results]


def emit_at(block: Block, pos: int, make: Callable[[], T]) -> T:
    """Run `make` in `block` and move the ops it made to position `pos` of the block."""
    n = len(block.ops)
    with block.program.block_guard(block), constant_pool(None):
        out = make()
    new = block.ops[n:]
    del block.ops[n:]
    block.ops[pos:pos] = new
    return out


def emit_before(anchor: Op, make: Callable[[], T]) -> T:
    """Run `make` in the anchor's block and move the ops it made just before the anchor."""
    return emit_at(anchor.block, anchor.block.ops.index(anchor), make)


def _producer(v: Variable) -> Op | None:
    return next((op for op in v.block.ops if any(o is v for o in op.outputs)), None)


def _const_scalar(v: Variable) -> object:
    """The value of a scalar made by a `constant` or `fill_constant` op, else None."""
    src = _producer(v)
    if src is None or src.type not in ("constant", "fill_constant") or v.shape != ():
        return None
    return np.asarray(src.attrs["value"]).item()


#: Ops the grad block recomputes instead of recording, when it has their inputs: reads and
#: views of values that do not change over the loop, and integer or bool index arithmetic.
VIEW_OPS = frozenset({"dynamic_index", "dynamic_slice", "slice", "reshape", "rev", "transpose"})
INDEX_OPS = frozenset({"add", "subtract", "multiply", "negative", "convert", "where", "less",
                       "less_equal", "greater", "greater_equal", "equal", "not_equal",
                       "logical_and", "logical_or", "logical_not"})


def _cheap(op: Op) -> bool:
    """A constant, a view, or integer/bool index arithmetic."""
    if op.sub_blocks():
        return False
    if not op.inputs or op.type in VIEW_OPS:
        return True
    return op.type in INDEX_OPS and all(o.dtype.kind in "biu" for o in op.outputs)


class Rebuild:
    """The values of a forward block that its grad block computes again instead of recording.

    `given` says how the grad block gets some parameters of `fwd` (a loop's init for a
    carried value the body passes through unchanged, `start + step * k` for a counter, the
    operand for a branch parameter). Values of enclosing blocks are at hand as they are.
    Constants, and views and index arithmetic over values at hand, are rebuilt; anything
    else is recorded.
    """

    def __init__(self, fwd: Block, given: dict[Variable, Callable[[], Variable]]):
        self.fwd = fwd
        self.given = given
        self.producer = {o: op for op in fwd.ops for o in op.outputs}
        self._can: dict[Variable, bool] = {}

    def can(self, v: Variable) -> bool:
        """True if the grad block can compute `v` again from values at hand."""
        if v.block is not self.fwd or v in self.given:
            return True
        if v not in self._can:
            src = self.producer.get(v)
            self._can[v] = src is not None and _cheap(src) and all(self.can(i) for i in src.inputs)
        return self._can[v]

    def emit(self, vs: list[Variable]) -> dict[Variable, Variable]:
        """Emit into the current block the ops that compute `vs`; map each to its copy."""
        out: dict[Variable, Variable] = {}

        def get(v: Variable) -> Variable:
            if v.block is not self.fwd:
                return v
            if v not in out:
                if v in self.given:
                    out[v] = self.given[v]()
                else:
                    src = self.producer[v]
                    ins = [get(i) for i in src.inputs]
                    base = re.sub(r"_[0-9]+$", "", src.outputs[0].name.split("@")[0])
                    out.update(zip(src.outputs, emit(src.type, ins, dict(src.attrs), base=base)))
            return out[v]
        return {v: get(v) for v in vs}


def shape_only_reads(grad_block: Block) -> set[Variable]:
    """The values the grad block reads only for their shape (`fill_zeros_like`).

    One walk over the grad block for all its residuals (a walk per residual made the
    gradient of D nested branches cost D^3).
    """
    returned: set[Variable] = set()
    other_use: set[Variable] = set()
    zeros_of: set[Variable] = set()
    for blk in walk_blocks(grad_block):
        returned.update(blk.results)
        for o in blk.ops:
            (zeros_of if o.type == "fill_zeros_like" else other_use).update(o.inputs)
    return zeros_of - other_use - returned


def add_carry(op: Op, init: Variable, update: Callable[[Variable], Variable],
              name: str) -> tuple[Variable, Variable]:
    """Add a carried value `name` to a forward `while`; returns (its body parameter, its final
    value). The initial value is renamed `name@INIT`, the final one `name`."""
    prog = op.block.program
    cond_b, body = op.attrs["cond"], op.attrs["body"]
    n = len(body.params)
    prog.rename(init, f"{name}@INIT")
    cond_b.add_param(name, init.shape, init.dtype)
    param = body.add_param(name, init.shape, init.dtype)
    with prog.block_guard(body):
        body.results.append(update(param))
    op.inputs.insert(n, init)
    out = op.block.new_var(name, init.shape, init.dtype, exact_name=True)
    op.outputs.append(out)
    return param, out


def _carried_requires(body: Block, init_need: list[bool], caps: list[Variable],
                      no_grad: set[Variable]) -> list[int]:
    """Carried values that carry a gradient: a fixed point over the loop body."""
    n = len(body.params)
    inexact = [dtypes.is_inexact(p.dtype) for p in body.params]
    req = {j for j in range(n) if init_need[j] and inexact[j]}
    while True:
        flows = forward_requires(body, [body.params[j] for j in req] + caps, no_grad)
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


def _is_zero(v: Variable) -> bool:
    """True for a gradient the walker filled with zeros (an output not on the loss's path)."""
    src = _producer(v)
    return src is not None and (src.type == "fill_zeros_like" or (
        src.type == "fill_constant" and src.attrs["value"] == 0))


def _carried_useful(body: Block, carried: list[int], gs: list) -> list[int]:
    """Of the carried values with a gradient, those whose gradient can be nonzero: seeded at
    the loop's output, or read by the body to make one that is (a fixed point).

    A convergence error carried only for the loop's condition is dropped here, so its
    gradient chain is neither built nor recorded.
    """
    useful = {j for j in carried if not _is_zero(gs[j])}
    while True:
        reach = _influences(body, [body.results[j] for j in useful])
        new = useful | {j for j in carried if body.params[j] in reach}
        if new == useful:
            return sorted(useful)
        useful = new


def _lift_checks(prog: Program, fwd: Block, outer: Callable[[Variable], Variable]) -> None:
    """Re-point capacity checks made inside `fwd` at values of the enclosing block."""
    prog.capacity_checks = [(lid, outer(v) if v.block is fwd else v, op)
                            for lid, v, op in prog.capacity_checks]


def _counters(op: Op) -> dict[Variable, tuple[Variable, int]]:
    """Carried integers of a loop that add or subtract 1 per iteration.

    Maps each such body parameter to (its init, step): in iteration i it holds init + step * i.
    """
    body = op.attrs["body"]
    out: dict[Variable, tuple[Variable, int]] = {}
    for j, p in enumerate(body.params):
        res = body.results[j]
        src = _producer(res) if res.block is body else None
        if p.dtype.kind not in "iu" or src is None or len(src.inputs) != 2:
            continue
        x, c = src.inputs
        if src.type == "add" and c is p:
            x, c = c, x
        step = _const_scalar(c)
        if x is p and c is not p and src.type in ("add", "subtract") and step in (1, -1):
            out[p] = (op.inputs[j], step if src.type == "add" else -step)
    return out


def _iteration_value(start: Variable, step: int, k1: Variable) -> Variable:
    """`start + step * k1` in the dtype of `start`: a counter's value in iteration k1."""
    i = k1 if start.dtype == INT32 else emit("convert", [k1], {"dtype": start.dtype})[0]
    if step == 1 and _const_scalar(start) == 0:
        return i
    return add(start, i) if step == 1 else subtract(start, i)


def _accumulate(acc: Variable, g: Variable) -> Variable:
    """`acc + g`; when g is zeros with one slot written (the grad of reading `x[i]`), only
    that slot of `acc` is updated, so the cost does not grow with the size of `acc`."""
    src = _producer(g)
    if src is not None and src.type == "dynamic_update_index":
        base = _producer(src.inputs[0])
        if (base is not None and base.type == "fill_constant" and base.attrs["value"] == 0
                and acc.dtype == g.dtype):
            _, value, i = src.inputs
            slot = add(dynamic_index(acc, i, **src.attrs), value)
            return dynamic_update_index(acc, slot, i, **src.attrs)
    return add(acc, g)


def _records(op: Op, counters: dict[Variable, tuple[Variable, int]], slots: int
             ) -> dict[Variable, Variable]:
    """Body values the loop already stacks, slot i at iteration i: value -> the loop's output.

    These are the stacks of an earlier gradient of the same loop (grad of grad), or a user's
    scan output written with dynamic_update_index at a counter that starts at 0.
    """
    body = op.attrs["body"]
    out: dict[Variable, Variable] = {}
    for j, p in enumerate(body.params):
        res = body.results[j]
        src = _producer(res) if res.block is body else None
        if (src is None or src.type != "dynamic_update_index" or src.attrs.get("axis") != 0
                or src.inputs[0] is not p or p.shape[0] < slots):
            continue
        start, step = counters.get(src.inputs[2], (None, 0))
        if step == 1 and _const_scalar(start) == 0:
            out.setdefault(src.inputs[1], op.outputs[j])
    return out


def _stop_at_limit(op: Op, j: int) -> None:
    """Make an unbounded forward loop also stop once its iteration counter (carried value j)
    passes `config.max_loop_records`: its count then exceeds the limit, which the caller
    reports, instead of a loop whose condition never becomes false hanging."""
    cond_b = op.attrs["cond"]
    with op.block.program.block_guard(cond_b), constant_pool(None):
        cond_b.results = [logical_and(cond_b.results[0],
                                      less_equal(cond_b.params[j], config.max_loop_records))]


@grad_maker("while")
def _while_grad(op: Op, gs: list, need: list) -> list:
    prog = op.block.program
    outer_grad_block = prog.current_block()
    body = op.attrs["body"]
    n = len(body.params)
    caps = op.inputs[n:]  # a copy: recording inserts carried values before the captures
    req_caps = [c for c, nd in zip(caps, need[n:]) if nd]
    no_grad: set[Variable] = set()
    carried = _carried_requires(body, need[:n], req_caps, no_grad)
    carried = _carried_useful(body, carried, gs)
    if not carried:
        return [None] * len(op.inputs)
    capacity = op.attrs["max_iters"]
    bounded = capacity is not None
    if not bounded:
        capacity = prog.capacities.get(op.attrs["loop_id"], INITIAL_CAPACITY)
    slots = max(capacity, 1)
    counters = _counters(op)
    zero_start = [j for j, p in enumerate(body.params) if p.dtype == INT32
                  and counters.get(p, (None, 0))[1] == 1 and _const_scalar(counters[p][0]) == 0]
    if zero_start:
        counter, count = body.params[zero_start[0]], op.outputs[zero_start[0]]
    else:
        zero_i = emit_before(op, lambda: zeros((), INT32))
        counter, count = add_carry(op, zero_i, lambda i: add(i, 1), f"{op.outputs[0].name}@ITERS")
        counters[counter] = (zero_i, 1)

    # The grad block: params (k, carried grads, capture accumulators).
    gb = prog.create_block(outer_grad_block, forward_block_idx=body.idx)
    k = gb.add_param("k", (), INT32)
    dcarry = [gb.add_param(f"{body.params[j].name}@GRAD", body.params[j].shape, body.params[j].dtype)
              for j in carried]
    accs = [gb.add_param(f"{c.name}@GRAD_acc", c.shape, c.dtype) for c in req_caps]
    with prog.block_guard(gb):
        k_next = add(k, 1)
        k1 = subtract(count, k_next)  # the iteration replayed: count-1, ..., 0
        n_head = len(gb.ops)
        wrt = [body.params[j] for j in carried] + req_caps
        grads = backward_block(body, [(body.results[j], d) for j, d in zip(carried, dcarry)], wrt, no_grad)
        new_dcarry = [grads[body.params[j]] if grads[body.params[j]] is not None
                      else zeros(body.params[j].shape, body.params[j].dtype) for j in carried]
        new_accs = [_accumulate(a, grads[c]) if grads[c] is not None else a
                    for a, c in zip(accs, req_caps)]
        gb.results = [k_next] + new_dcarry + new_accs
    gb.ops[n_head:] = live_ops(gb.ops[n_head:], gb.results)  # k1's ops stay: the loads read it

    # What the grad block reads of iteration k1: a carried value the body passes through
    # unchanged is the loop's init, a counter is rebuilt from k1, constants, views and index
    # arithmetic over those are recomputed, a value the loop already stacks is read from that
    # stack; each other value gets a stack, written at slot i in iteration i.
    given: dict[Variable, Callable[[], Variable]] = {
        p: (lambda v=op.inputs[j]: v) for j, p in enumerate(body.params) if body.results[j] is p}
    for p, (start, step) in counters.items():
        given.setdefault(p, lambda start=start, step=step: _iteration_value(start, step, k1))
    rebuild = Rebuild(body, given)
    checks = [v for _, v, _ in prog.capacity_checks if v.block is body]
    reads = residuals(gb, body)
    cheap = [r for r in reads if rebuild.can(r)]
    shape_only = shape_only_reads(gb)
    zeroed = {r for r in reads if not rebuild.can(r) and r in shape_only}
    records = _records(op, counters, slots)
    for r in dict.fromkeys(checks + [r for r in reads if not rebuild.can(r) and r not in zeroed]):
        if r not in records:
            init = emit_before(op, lambda r=r: zeros((slots,) + r.shape, r.dtype))
            push = lambda s, r=r: dynamic_update_index(s, r, counter, allow_negative_indices=False)
            _, records[r] = add_carry(op, init, push, f"{r.name}@STACK")

    def loads() -> dict[Variable, Variable]:
        got = rebuild.emit(cheap)
        got.update((r, zeros(r.shape, r.dtype)) for r in reads if r in zeroed)
        got.update((r, dynamic_index(records[r], k1, allow_negative_indices=False))
                   for r in reads if r not in got)
        return got
    substitute(gb, emit_at(gb, n_head, loads))

    def lift(v: Variable) -> Variable:
        with prog.block_guard(op.block):
            return reduce_max(records[v])
    _lift_checks(prog, body, lift)
    if not bounded and not any(v is count for _, v, _ in prog.capacity_checks):
        prog.capacity_checks.append((op.attrs["loop_id"], count, op))
        _stop_at_limit(op, next(j for j, p in enumerate(body.params) if p is counter))

    # The backward loop: k counts up from 0 to the trip count (a loop XLA can analyse, where a
    # count-down one compiles to extra kernels) and replays iteration count-1-k.
    cond_b = prog.create_block(outer_grad_block)
    kc = cond_b.add_param("k", (), INT32)
    for v in gb.params[1:]:
        cond_b.add_param(v.name, v.shape, v.dtype)
    with prog.block_guard(cond_b):
        cond_b.results = [less(kc, count)]
    init = [zeros((), INT32)] + [gs[j] for j in carried] + [zeros(c.shape, c.dtype) for c in req_caps]
    bcaps = list(dict.fromkeys(free_vars(cond_b) + free_vars(gb)))
    attrs = {"cond": cond_b, "body": gb, "max_iters": capacity, "loop_id": prog.loop_count}
    prog.loop_count += 1
    outs = emit("while", init + bcaps, attrs, base=f"{op.outputs[0].name}@GRAD_loop")
    cond_b.owner = gb.owner = outer_grad_block.ops[-1]
    result: list = [None] * len(need)
    for pos, j in enumerate(carried):
        result[j] = outs[1 + pos] if need[j] else None
    acc_out = dict(zip(req_caps, outs[1 + len(carried):]))
    for i, c in enumerate(caps):
        result[n + i] = acc_out.get(c)
    return result


@grad_maker("cond")
def _cond_grad(op: Op, gs: list, need: list) -> list:
    prog = op.block.program
    outer_grad_block = prog.current_block()
    n = op.attrs["n_operands"]
    pred, operands = op.inputs[0], op.inputs[1:1 + n]
    wanted = [i for i in range(1, len(op.inputs)) if need[i]]
    out_idx = [j for j, o in enumerate(op.outputs) if dtypes.is_inexact(o.dtype)]
    grad_blocks = []
    for key in ("true", "false"):
        fb = op.attrs[key]
        gb = prog.create_block(outer_grad_block, forward_block_idx=fb.idx)
        dparams = [gb.add_param(f"{op.outputs[j].name}@GRAD", op.outputs[j].shape, op.outputs[j].dtype)
                   for j in out_idx]
        wrt = [fb.params[i - 1] if i <= n else op.inputs[i] for i in wanted]
        with prog.block_guard(gb):
            grads = backward_block(fb, [(fb.results[j], d) for j, d in zip(out_idx, dparams)],
                                   wrt, set())
            gb.results = [grads[w] if grads[w] is not None else zeros(w.shape, w.dtype) for w in wrt]
        gb.ops = live_ops(gb.ops, gb.results)
        grad_blocks.append((fb, gb))
    for pos, (fb, gb) in enumerate(grad_blocks):
        other = grad_blocks[1 - pos][0]
        checks_here = [v for _, v, _ in prog.capacity_checks if v.block is fb]
        rebuild = Rebuild(fb, {p: (lambda v=v: v) for p, v in zip(fb.params, operands)})
        reads = residuals(gb, fb)
        shape_only = shape_only_reads(gb)
        zeroed = {r for r in reads if not rebuild.can(r) and r in shape_only}

        def rebuilt(rebuild: Rebuild = rebuild, reads: list = reads, zeroed: set = zeroed
                    ) -> dict[Variable, Variable]:
            got = rebuild.emit([r for r in reads if rebuild.can(r)])
            got.update((r, zeros(r.shape, r.dtype)) for r in reads if r in zeroed)
            return got
        mapping = emit_at(gb, 0, rebuilt)
        passed: dict[Variable, Variable] = {}
        for r, out in zip(fb.results, op.outputs):
            passed.setdefault(r, out)
        for r in dict.fromkeys(checks_here + [r for r in reads if r not in mapping]):
            if r not in passed:
                with prog.block_guard(other):
                    other.results.append(zeros(r.shape, r.dtype))
                fb.results.append(r)
                passed[r] = op.block.new_var(residual_name(r), r.shape, r.dtype)
                op.outputs.append(passed[r])
            mapping[r] = passed[r]
        substitute(gb, mapping)
        _lift_checks(prog, fb, lambda v, m=mapping: m[v])
    caps_b = list(dict.fromkeys(free_vars(grad_blocks[0][1]) + free_vars(grad_blocks[1][1])))
    ins = [pred] + [gs[j] for j in out_idx] + caps_b
    outs = emit("cond", ins, {"true": grad_blocks[0][1], "false": grad_blocks[1][1],
                              "n_operands": len(out_idx)}, base="cond_grad")
    grad_blocks[0][1].owner = grad_blocks[1][1].owner = outer_grad_block.ops[-1]
    result: list = [None] * len(need)
    for i, g in zip(wanted, outs):
        result[i] = g
    return result
