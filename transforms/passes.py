"""IR passes shared by the backward pass and the lowering.

Small rewrites over blocks and the analyses only transforms need (the IR analyses that every
layer uses -- live ops, free values, block walks, loop invariance -- are
srcgrad/ir/analysis.py): which forward values a grad block reads, renaming uses, emitting ops
at a position of a block, and re-pointing capacity checks. Nothing here emits source or builds
gradients, so `backward` and `lower_jax` both import this module and not each other.

Layer L4 (transforms): see docs/design.md.
"""

from __future__ import annotations

import re
from typing import Callable, Sequence, TypeVar

import numpy as np

from srcgrad.ir.analysis import producer, walk_blocks
from srcgrad.core.builder import constant_pool
from srcgrad.ir.program import Block, Op, Program, Variable


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
    prog.capacity_checks = [
        (lid, v, new if op is old else op) for lid, v, op in prog.capacity_checks
    ]


T = TypeVar("T")


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


def repoint_checks(prog: Program, fwd: Block, outer: Callable[[Variable], Variable]) -> None:
    """Re-point capacity checks made inside `fwd` at values of the enclosing block."""
    prog.capacity_checks = [
        (lid, outer(v) if v.block is fwd else v, op) for lid, v, op in prog.capacity_checks
    ]
