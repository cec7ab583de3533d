"""IR passes shared by the backward pass and the lowering.

Analyses and small rewrites over blocks: which ops are live, which values a block reads from
enclosing blocks, which forward values a grad block reads, renaming uses, and splitting a
loop body into loop-invariant and per-iteration ops. Nothing here emits source or builds
gradients, so `backward` and `lower_jax` both import this module and not each other.
"""
from __future__ import annotations

import re

from typing import Iterator, Sequence

import numpy as np

from srcgrad.ir import Block, Op, Variable
from srcgrad.registry import REGISTRY, REMAT_INDEX, REMAT_VIEW


def walk_blocks(block: Block) -> Iterator[Block]:
    """`block` and every block nested in it, outermost first."""
    yield block
    for op in block.ops:
        for sub in op.sub_blocks():
            yield from walk_blocks(sub)


def live_ops(ops: Sequence[Op], needed: Sequence[Variable]) -> list[Op]:
    """The ops whose outputs (transitively) reach `needed`, in order."""
    want = set(needed)
    keep = []
    for op in reversed(ops):
        if not want.isdisjoint(op.outputs):
            keep.append(op)
            want.update(op.inputs)
    keep.reverse()
    return keep


def free_vars(block: Block) -> list[Variable]:
    """Values a block reads from enclosing blocks, in order of first use."""
    seen: dict[Variable, None] = {}
    for op in block.ops:
        for v in op.inputs:
            if v.block is not block:
                seen.setdefault(v, None)
    for v in block.results:
        if v.block is not block:
            seen.setdefault(v, None)
    return list(seen)


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


def shape_only_reads(block: Block) -> set[Variable]:
    """The values `block` (with its nested blocks) reads only for their shape
    (`fill_zeros_like`).

    One walk for all residuals (a walk per residual made the gradient of D nested branches
    cost D^3).
    """
    returned: set[Variable] = set()
    other_use: set[Variable] = set()
    zeros_of: set[Variable] = set()
    for blk in walk_blocks(block):
        returned.update(blk.results)
        for o in blk.ops:
            (zeros_of if o.type == "fill_zeros_like" else other_use).update(o.inputs)
    return zeros_of - other_use - returned


_RES_SUFFIX = re.compile(r"(_res(_\d+)?)+$")


def residual_name(v: Variable) -> str:
    """`sin_0_res` for a residual of `sin_0` passed out of a branch; a residual passed on
    out of an enclosing branch keeps that name (its length does not grow with the depth)."""
    return _RES_SUFFIX.sub("", v.name.split("@")[0]) + "_res"


def substitute(block: Block, mapping: dict[Variable, Variable]) -> None:
    """Replace every use of a key of `mapping` in `block` (and nested blocks) by its value."""
    for blk in walk_blocks(block):
        for op in blk.ops:
            op.inputs = [mapping.get(v, v) for v in op.inputs]
        blk.results = [mapping.get(v, v) for v in blk.results]


def producer(v: Variable) -> Op | None:
    """The op of `v`'s block that makes `v` (None for a block parameter or program input)."""
    return next((op for op in v.block.ops if any(o is v for o in op.outputs)), None)


def const_scalar(v: Variable) -> object:
    """The value of a scalar made by a `constant` or `fill_constant` op, else None."""
    src = producer(v)
    if src is None or src.type not in ("constant", "fill_constant") or v.shape != ():
        return None
    return np.asarray(src.attrs["value"]).item()


def replace_op(old: Op, new: Op, made: Sequence[Block]) -> None:
    """Put `new` where `old` is in its block, and re-point what referred to `old`: the owner
    of its sub-blocks, capacity checks, and the origin of the ops its grad maker made (in
    `old`'s block, its sub-blocks and the blocks `made`, where the grad maker put them)."""
    block = old.block
    block.ops[block.ops.index(old)] = new
    for sub in new.sub_blocks():
        sub.owner = new
    for blk in dict.fromkeys([block, *new.sub_blocks(), *made]):
        for op in blk.ops:
            if op.origin is old:
                op.origin = new
    prog = block.program
    prog.capacity_checks = [(lid, v, new if op is old else op)
                            for lid, v, op in prog.capacity_checks]


def recomputable(op: Op) -> bool:
    """A constant, a view (REMAT_VIEW), or index arithmetic over integers (REMAT_INDEX): an
    op a gradient computes again rather than records."""
    if op.sub_blocks():
        return False
    remat = REGISTRY[op.type].remat
    if not op.inputs or remat == REMAT_VIEW:
        return True
    return remat == REMAT_INDEX and all(o.dtype.kind in "biu" for o in op.outputs)


#: Ops that stay where they were traced: a barrier orders a computation inside its block.
_PINNED = ("optimization_barrier", "fill_zeros_like")


def hoist_invariants(body: Block, parent: Block) -> list[Op]:
    """Move the loop-invariant work out of a just-traced loop body, to the end of `parent`
    (where the loop op is emitted next): each op that reads only values that do not change in
    the loop and that a gradient would record rather than recompute (`exp(a)` or a `solve`
    of captured arrays), with the invariant ops it reads. The body then reads its value as it
    reads any enclosing value, so a gradient reads it too instead of recording it every
    iteration; the forward computes it once (XLA hoists it out of the loop anyway).
    Returns the moved ops, in order."""
    varying = set(body.params)
    invariant: dict[Variable, Op] = {}
    for op in body.ops:
        if (op.sub_blocks() or op.type in _PINNED
                or any(v in varying for v in op.inputs)):
            varying.update(op.outputs)
        else:
            invariant.update(dict.fromkeys(op.outputs, op))
    need: set[Op] = set()
    todo = [op for op in dict.fromkeys(invariant.values()) if op.inputs and not recomputable(op)]
    while todo:
        op = todo.pop()
        if op not in need:
            need.add(op)
            todo.extend(invariant[v] for v in op.inputs if v in invariant)
    moved = [op for op in body.ops if op in need]
    if moved:
        body.ops = [op for op in body.ops if op not in need]
        for op in moved:
            op.block = parent
            for v in op.outputs:
                v.block = parent
        parent.ops.extend(moved)
    return moved


def loop_invariant(ops: Sequence[Op], body: Block) -> tuple[list[Op], list[Op]]:
    """Split a loop body's ops into those computed once before the loop and the rest.

    An op is hoisted when it reads only values from outside the body (or of hoisted ops) and
    its result is no larger than its largest input: the transposes and reshapes of captured
    weights that grad makers emit. XLA does not hoist such cheap ops out of while loops on
    its own. Ops without inputs (constants) stay in the body, where XLA folds them.
    """
    inner = set(body.params)
    hoisted, rest = [], []
    for op in ops:
        if (op.inputs and not op.sub_blocks() and op.type != "fill_zeros_like"
                and not any(v in inner for v in op.inputs)
                and max(v.size for v in op.outputs) <= max(v.size for v in op.inputs)):
            hoisted.append(op)
        else:
            rest.append(op)
            inner.update(op.outputs)
    return hoisted, rest
