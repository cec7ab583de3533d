"""Grad makers for `while` and `cond`: recursive grad blocks and recorded residuals.

The backward of a sub-block runs in a grad block that reads forward values of that
sub-block (residuals). Those values do not exist outside the forward block, so after the
grad block is built, every residual it reads is passed out of the forward op:

* `while`: the forward loop pushes each residual into a stack (one slot per iteration,
  capacity = the loop's static bound or the capacity chosen by the caller) and counts its
  iterations; the backward `while` runs the grad block once per recorded iteration, newest
  first, reading slot k of each stack.
* `cond`: the forward cond returns each residual from its branch (zeros from the other);
  the backward `cond` on the same predicate runs the taken branch's grad block.

Only values the grad block reads are recorded; everything else of the body is neither stored
nor recomputed. Because the grad blocks are made of ordinary ops (and loops of ordinary
`while` ops), the result can be differentiated again.
"""
from __future__ import annotations

from typing import Callable, Iterator

import numpy as np

from srcgrad import dtypes
from srcgrad.builder import emit
from srcgrad.ir import Block, Op, Program, Variable
from srcgrad.ops.control import free_vars
from srcgrad.ops.elementwise import add, greater, subtract, zeros
from srcgrad.ops.reduce import max as reduce_max
from srcgrad.ops.shape import dynamic_index, dynamic_update_index
from srcgrad.registry import grad_maker

from .backward import backward_block, forward_requires

#: Stack capacity of an unbounded loop on its first run; overflow reruns with a larger one.
INITIAL_CAPACITY = 64
INT32 = np.dtype(np.int32)


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


def substitute(grad_block: Block, mapping: dict[Variable, Variable]) -> None:
    for blk in walk_blocks(grad_block):
        for op in blk.ops:
            op.inputs = [mapping.get(v, v) for v in op.inputs]
        blk.results = [mapping.get(v, v) for v in blk.results]


def emit_before(anchor: Op, make: Callable[[], Variable]) -> Variable:
    """Run `make` in the anchor's block and move the ops it made just before the anchor."""
    block = anchor.block
    n = len(block.ops)
    with block.program.block_guard(block):
        out = make()
    new = block.ops[n:]
    del block.ops[n:]
    at = block.ops.index(anchor)
    block.ops[at:at] = new
    return out


def add_carry(op: Op, init: Variable, update: Callable[[Variable], Variable]) -> tuple[Variable, Variable]:
    """Add a carried value to a forward `while`; returns (its body parameter, its final value)."""
    cond_b, body = op.attrs["cond"], op.attrs["body"]
    n = len(body.params)
    cond_b.add_param(init.name.split("@")[0], init.shape, init.dtype)
    param = body.add_param(init.name.split("@")[0], init.shape, init.dtype)
    with body.program.block_guard(body):
        body.results.append(update(param))
    op.inputs.insert(n, init)
    out = op.block.new_var(f"{init.name.split('@')[0]}_out", init.shape, init.dtype)
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


def _lift_checks(prog: Program, fwd: Block, outer: Callable[[Variable], Variable]) -> None:
    """Re-point capacity checks made inside `fwd` at values of the enclosing block."""
    prog.capacity_checks = [(lid, outer(v) if v.block is fwd else v, op)
                            for lid, v, op in prog.capacity_checks]


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
    if not carried:
        return [None] * len(op.inputs)
    capacity = op.attrs["max_iters"]
    bounded = capacity is not None
    if not bounded:
        capacity = prog.capacities.get(op.attrs["loop_id"], INITIAL_CAPACITY)
    zero_i = emit_before(op, lambda: zeros((), INT32))
    counter, count = add_carry(op, zero_i, lambda i: add(i, 1))

    # The grad block: params (k, carried grads, capture accumulators).
    gb = prog.create_block(outer_grad_block, forward_block_idx=body.idx)
    k = gb.add_param("k", (), INT32)
    dcarry = [gb.add_param(f"{body.params[j].name}@GRAD", body.params[j].shape, body.params[j].dtype)
              for j in carried]
    accs = [gb.add_param(f"{c.name}@GRAD_acc", c.shape, c.dtype) for c in req_caps]
    with prog.block_guard(gb):
        k1 = subtract(k, 1)
        n_head = len(gb.ops)
        wrt = [body.params[j] for j in carried] + req_caps
        grads = backward_block(body, [(body.results[j], d) for j, d in zip(carried, dcarry)], wrt, no_grad)
        new_dcarry = [grads[body.params[j]] if grads[body.params[j]] is not None
                      else zeros(body.params[j].shape, body.params[j].dtype) for j in carried]
        new_accs = [add(a, grads[c]) if grads[c] is not None else a for a, c in zip(accs, req_caps)]
    gb.results = [k1] + new_dcarry + new_accs

    # Record what the grad block reads: one stack per residual, slot i written at iteration i.
    needed = list(dict.fromkeys(residuals(gb, body) +
                                [v for _, v, _ in prog.capacity_checks if v.block is body]))
    stacks: dict[Variable, Variable] = {}
    for r in needed:
        init = emit_before(op, lambda r=r: zeros((capacity,) + r.shape, r.dtype))
        _, stacks[r] = add_carry(op, init, lambda s, r=r: dynamic_update_index(s, r, counter))
    n_tail = len(gb.ops)
    with prog.block_guard(gb):
        loads = {r: dynamic_index(stacks[r], k1) for r in needed}
    load_ops = gb.ops[n_tail:]
    del gb.ops[n_tail:]
    gb.ops[n_head:n_head] = load_ops
    substitute(gb, loads)

    def lift(v: Variable) -> Variable:
        with prog.block_guard(op.block):
            return reduce_max(stacks[v])
    _lift_checks(prog, body, lift)
    if not bounded:
        prog.capacity_checks.append((op.attrs["loop_id"], count, op))

    # The backward loop: k from the trip count down to 0.
    cond_b = prog.create_block(outer_grad_block)
    kc = cond_b.add_param("k", (), INT32)
    for v in gb.params[1:]:
        cond_b.add_param(v.name.split("@")[0], v.shape, v.dtype)
    with prog.block_guard(cond_b):
        cond_b.results = [greater(kc, 0)]
    init = [count] + [gs[j] for j in carried] + [zeros(c.shape, c.dtype) for c in req_caps]
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
        grad_blocks.append((fb, gb))
    for pos, (fb, gb) in enumerate(grad_blocks):
        other = grad_blocks[1 - pos][0]
        checks_here = [v for _, v, _ in prog.capacity_checks if v.block is fb]
        mapping: dict[Variable, Variable] = {}
        param_pos = {p: i for i, p in enumerate(fb.params)}
        for r in list(dict.fromkeys(residuals(gb, fb) + checks_here)):
            if r in param_pos:
                mapping[r] = operands[param_pos[r]]
                continue
            with prog.block_guard(other):
                other.results.append(zeros(r.shape, r.dtype))
            fb.results.append(r)
            out = op.block.new_var(f"{r.name.split('@')[0]}_res", r.shape, r.dtype)
            op.outputs.append(out)
            mapping[r] = out
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
