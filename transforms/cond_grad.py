"""The grad maker of `cond` (and `switch`): one grad block per branch, under one backward
`cond` op on the same predicate or index.

A branch's residuals (the values of the branch its grad block reads) are rebuilt in the
grad block (operands, constants, views), zeros there (read for their shape only), or
returned from the branch as new outputs of the forward op (zeros from the branches not
taken), which gives a new forward `cond` op. Branches share those outputs per type, as
JAX's cond does: the op returns, for each shape and dtype, the most residuals one branch
needs rather than the sum over branches.

Layer L4 (transforms): see docs/design.md.
"""

from __future__ import annotations

from srcgrad.base import dtypes
from srcgrad.ir.analysis import branch_attrs, branch_blocks
from srcgrad.core.builder import emit
from srcgrad.ir.program import Block, Op, Variable
from srcgrad.ops.creation import zeros

from .backward import backward_block
from srcgrad.ir.analysis import free_vars, live_ops

from .passes import (
    emit_at,
    repoint_checks,
    replace_op,
    residual_name,
    residuals,
    shape_only_reads,
    substitute,
)
from .replay import Rebuild


def _cond_branch_grad(
    op: Op, fb: Block, outer: Block, wanted: list[int], out_idx: list[int]
) -> Block:
    """The grad block of one branch: from the outputs' gradients to those of `wanted` inputs."""
    prog = op.block.program
    n = op.attrs["n_operands"]
    gb = prog.create_block(outer, forward_block_idx=fb.idx)
    dparams = [
        gb.add_param(f"{op.outputs[j].name}@GRAD", op.outputs[j].shape, op.outputs[j].dtype)
        for j in out_idx
    ]
    wrt = [fb.params[i - 1] if i <= n else op.inputs[i] for i in wanted]
    with prog.block_guard(gb):
        grads = backward_block(
            fb, [(fb.results[j], d) for j, d in zip(out_idx, dparams)], wrt, set()
        )
        gb.results = [grads[w] if grads[w] is not None else zeros(w.shape, w.dtype) for w in wrt]
    gb.ops = live_ops(gb.ops, gb.results)
    return gb


def _branch_reads(op: Op, fb: Block, gb: Block) -> tuple[dict[Variable, Variable], list[Variable]]:
    """The values of branch `fb` that its grad block `gb` reads: those rebuilt in `gb`
    (operands, constants, views) or zeros there (read for their shape), as a mapping, and
    the rest, which `fb` must return (capacity checks first)."""
    prog = op.block.program
    operands = op.inputs[1 : 1 + op.attrs["n_operands"]]
    checks_here = [v for _, v, _ in prog.capacity_checks if v.block is fb]
    rebuild = Rebuild(fb, {p: (lambda v=v: v) for p, v in zip(fb.params, operands)})
    reads = residuals(gb, fb)
    shape_only = shape_only_reads(gb)
    zeroed = [r for r in reads if not rebuild.can(r) and r in shape_only]

    def rebuilt() -> dict[Variable, Variable]:
        got = rebuild.emit([r for r in reads if rebuild.can(r)])
        got.update((r, zeros(r.shape, r.dtype)) for r in zeroed)
        return got

    mapping = emit_at(gb, 0, rebuilt)
    return mapping, list(dict.fromkeys(checks_here + [r for r in reads if r not in mapping]))


def _pass_residuals(
    op: Op, branches: list[Block], grads: list[Block], outs: list[Variable]
) -> None:
    """Give each grad block the values of its branch that it reads (`_branch_reads`): those
    the branch does not rebuild are returned from it as new outputs appended to `outs`.
    Branches share an output for residuals of the same type (zeros from a branch that has
    none there; the output is then named after the op, `cond_1_res`), as JAX's cond does: the
    op returns, per type, the most residuals one branch needs rather than the sum over
    branches. A capacity check gets an output of its own, so that its value is the taken
    branch's count or 0."""
    prog = op.block.program
    slots: list[tuple[tuple, bool]] = []  # (shape, dtype), shared
    fills: list[dict[int, Variable]] = []
    reads = [_branch_reads(op, fb, gb) for fb, gb in zip(branches, grads)]
    for fb, (_, passing) in zip(branches, reads):
        checks = {v for _, v, _ in prog.capacity_checks if v.block is fb}
        done = set(fb.results)
        fill: dict[int, Variable] = {}
        for r in passing:
            if r in done:
                continue
            done.add(r)
            kind = ((r.shape, r.dtype), r not in checks)
            k = next(
                (k for k, t in enumerate(slots) if t == kind and kind[1] and k not in fill),
                len(slots),
            )
            if k == len(slots):
                slots.append(kind)
            fill[k] = r
        fills.append(fill)
    base = f"{op.outputs[0].name.split('@')[0]}_res" if op.outputs else "cond_res"
    new = []
    for k, ((shape, dtype), _) in enumerate(slots):
        users = [fill[k] for fill in fills if k in fill]
        new.append(
            op.block.new_var(residual_name(users[0]) if len(users) == 1 else base, shape, dtype)
        )
    for fb, gb, fill, (mapping, passing) in zip(branches, grads, fills, reads):
        passed = dict(reversed(list(zip(fb.results, op.outputs))))
        passed.update((r, new[k]) for k, r in fill.items())
        mapping.update((r, passed[r]) for r in passing)
        substitute(gb, mapping)
        repoint_checks(prog, fb, lambda v, m=mapping: m[v])
        with prog.block_guard(fb):
            fb.results.extend(
                fill[k] if k in fill else zeros(v.shape, v.dtype) for k, v in enumerate(new)
            )
    outs.extend(new)


def cond_grad(op: Op, gs: list, need: list) -> list:
    """The grad maker of `cond` and `switch` (see the module doc)."""
    prog = op.block.program
    outer = prog.current_block()
    first_block = len(prog.blocks)
    n = op.attrs["n_operands"]
    # A value captured twice (a substitution can make two captures one value) takes its
    # gradient once: the branch's gradient of a captured value is its whole gradient.
    first = {id(op.inputs[i]): i for i in range(len(op.inputs) - 1, n, -1)}
    wanted = [
        i for i in range(1, len(op.inputs)) if need[i] and (i <= n or first[id(op.inputs[i])] == i)
    ]
    out_idx = [j for j, o in enumerate(op.outputs) if dtypes.is_inexact(o.dtype)]
    branches = branch_blocks(op)
    grads = [_cond_branch_grad(op, fb, outer, wanted, out_idx) for fb in branches]
    outs = list(op.outputs)
    _pass_residuals(op, branches, grads, outs)
    caps = list(dict.fromkeys(v for gb in grads for v in free_vars(gb)))
    g_outs = emit(
        "cond",
        [op.inputs[0]] + [gs[j] for j in out_idx] + caps,
        {**branch_attrs(op, grads), "n_operands": len(out_idx)},
        base="cond_grad",
    )
    for gb in grads:
        gb.owner = outer.ops[-1]
    if len(outs) > len(op.outputs):
        replace_op(
            op,
            Op("cond", op.inputs, outs, dict(op.attrs), op.loc, op.block, op.origin),
            prog.blocks[first_block:] + [outer],
        )
    result: list = [None] * len(need)
    for i, g in zip(wanted, g_outs):
        result[i] = g
    return result
