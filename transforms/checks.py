"""Capacity checks of loops nested in a body or a branch, carried out to the global block.

A differentiated `while` without `max_iters` reports its trip count (a capacity check) so
that the caller can size its records. The grad maker of an enclosing loop or branch lifts the
checks of its sub-blocks when it differentiates them; when the enclosing loop or branch is
not differentiated itself (an `sg.grad` inside the loop body of an `sg.jit` function), this
pass carries them out: a loop carries the largest count over its iterations, a branch
returns the count of the branch taken (0 from the others).

Layer L4 (transforms): see docs/design.md.
"""

from __future__ import annotations

from srcgrad.ir.analysis import branch_blocks
from srcgrad.base.errors import SrcgradError
from srcgrad.ir.program import Op, Program, Variable, program_guard
from srcgrad.ops.creation import zeros
from srcgrad.ops.elementwise import maximum

from .control_grad import new_carry, extend_loop, emit_before


def lift_checks(prog: Program) -> None:
    """Re-point every capacity check of `prog` at a value of its global block."""
    lifted = []
    with program_guard(prog):
        for lid, v, op in prog.capacity_checks:
            while v.block is not prog.global_block():
                v = _lift(v, op)
            lifted.append((lid, v, op))
    prog.capacity_checks = lifted


def _lift(v: Variable, loop: Op) -> Variable:
    """`v`, a count made in a sub-block, as a value of the block that holds the sub-block."""
    blk, prog = v.block, v.block.program
    owner = blk.owner
    if owner is not None and owner.type == "while" and blk is owner.attrs["body"]:
        init = emit_before(owner, lambda: zeros((), v.dtype))
        carry = new_carry(
            owner, init, lambda acc: maximum(acc, v), f"{v.name.split('@')[0]}@MAXITERS"
        )
        grown = extend_loop(owner, [carry])
        owner.inputs, owner.outputs = grown.inputs, grown.outputs  # in place: checks hold `owner`
        return carry.out
    if owner is not None and owner.type == "cond":
        for other in branch_blocks(owner):
            if other is not blk:
                with prog.block_guard(other):
                    other.results.append(zeros((), v.dtype))
        blk.results.append(v)
        out = owner.block.new_var(f"{v.name.split('@')[0]}_res", (), v.dtype)
        owner.outputs.append(out)
        return out
    raise SrcgradError(
        "a while loop without max_iters is differentiated inside another "
        "loop's condition; pass max_iters",
        op="while",
        loc=loop.loc,
    )
