"""IR analyses (layer L1): read-only questions about blocks, used by every layer above.

Which ops are live for some values, which values a block reads from enclosing blocks, the
blocks nested in a block, the op that makes a value. Rewriting passes are in transforms/.

Layer L1 (the IR): see docs/design.md.
"""

from __future__ import annotations

from typing import Callable, Iterator, Sequence

from .program import Block, Op, Variable


def walk_blocks(block: Block) -> Iterator[Block]:
    """`block` and every block nested in it, outermost first."""
    yield block
    for op in block.ops:
        for sub in op.sub_blocks():
            yield from walk_blocks(sub)


#: Op types with a side effect (sg.debug.print): never removed, hoisted, merged or
#: duplicated. Filled by registry.register(effect=True).
EFFECTS: set[str] = set()


def has_effect(op: Op) -> bool:
    """Whether `op` has a side effect, or holds a block with such an op (a loop that prints)."""
    if op.type in EFFECTS:
        return True
    if not op.block.program.effects:
        return False
    return any(has_effect(o) for sub in op.sub_blocks() for o in sub.ops)


#: Ops that stay in the block they were traced in, though their inputs do not change in a loop:
#: a barrier orders a computation inside its block; fill_zeros_like is left for XLA to fold.
PINNED = frozenset({"optimization_barrier", "fill_zeros_like"})


def loop_invariant_ops(
    ops: Sequence[Op], params: Sequence[Variable], movable: Callable[[Op], bool] = lambda op: True
) -> list[Op]:
    """The ops of a loop body (`ops`, in order; `params` its carried values) that compute the
    same values in every iteration and may be computed once before the loop: each reads only
    values from outside the body or of other such ops, holds no sub-block, has no effect (an
    effect stays in its loop, once per iteration), is not PINNED, and is `movable`.

    The one loop-invariance rule. Its two users differ only in `movable`: a loop traced by
    ops/blocks.py moves the work a gradient would record (`hoist_invariants`), the emitter
    (transforms/lower_jax.py) the cheap ops XLA does not move on its own."""
    varying = set(params)
    out = []
    for op in ops:
        if (
            op.sub_blocks()
            or op.type in PINNED
            or has_effect(op)
            or not movable(op)
            or any(v in varying for v in op.inputs)
        ):
            varying.update(op.outputs)
        else:
            out.append(op)
    return out


def live_ops(ops: Sequence[Op], needed: Sequence[Variable]) -> list[Op]:
    """The ops whose outputs (transitively) reach `needed`, and the effectful ones (with
    what they read), in order."""
    want = set(needed)
    keep = []
    for op in reversed(ops):
        if not want.isdisjoint(op.outputs) or has_effect(op):
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


def producer(v: Variable) -> Op | None:
    """The op of `v`'s block that makes `v` (None for a block parameter or program input)."""
    return next((op for op in v.block.ops if any(o is v for o in op.outputs)), None)


def branch_blocks(op: Op) -> list[Block]:
    """A `cond` op's branch blocks in index order: `[true, false]` for a bool predicate,
    `branch0, branch1, ...` for an integer index (lax.switch)."""
    if "true" in op.attrs:
        return [op.attrs["true"], op.attrs["false"]]
    return [op.attrs[f"branch{k}"] for k in range(len(op.sub_blocks()))]


def branch_attrs(op: Op, blocks: Sequence[Block]) -> dict[str, Block]:
    """The branch attrs of a `cond` with `blocks` as branches, in the form `op` has."""
    if "true" in op.attrs:
        return {"true": blocks[0], "false": blocks[1]}
    return {f"branch{k}": b for k, b in enumerate(blocks)}
