"""Forward values a grad block computes again instead of recording them (`Rebuild`), and
inner loops it runs again (`replayed`, `replay_op`).

Constants, views and index arithmetic over values at hand are rebuilt where the grad block
reads them; anything else is recorded, except the outputs of a loop nested in the body. The
grad body of a loop reads the records of the loops nested in its body (their stacks and
trip counts). Recording those per outer iteration multiplies the capacities down the nest
(64^depth slots for unbounded loops, the product of the `max_iters` for bounded ones), so
the grad body runs the inner loop (or the branch that holds it) again from its inputs, which
are recorded per outer iteration like any other residual: each level's records are sized by
its own capacity, and memory is the sum over the levels, not the product. The cost is one
more forward run of each inner loop per enclosing level (checkpointing at loop boundaries).

`replayed` finds the ops to run again; `replay_op` emits a copy of one, with copies of its
sub-blocks, so that differentiating the copy (a second-order gradient extends its blocks)
leaves the forward op as it is.

Layer L4 (transforms): see docs/design.md.
"""

from __future__ import annotations

import re
from typing import Callable, Sequence

from srcgrad.ir.analysis import walk_blocks
from srcgrad.core.builder import emit
from srcgrad.ir.program import Block, Op, Variable
from srcgrad.core.registry import recomputable


def holds_loop(op: Op) -> bool:
    """True for a `while` op, or an op with a `while` somewhere in its sub-blocks."""
    return op.type == "while" or any(
        o.type == "while" for sub in op.sub_blocks() for blk in walk_blocks(sub) for o in blk.ops
    )


def replayed(body: Block, reads: Sequence[Variable]) -> set[Op]:
    """The ops of `body` holding a loop whose outputs the grad block reads, directly or
    through ops it recomputes (views, index arithmetic)."""
    producer = {o: op for op in body.ops for o in op.outputs}
    out: set[Op] = set()
    seen: set[Variable] = set()
    todo = list(reads)
    while todo:
        v = todo.pop()
        if v in seen:
            continue
        seen.add(v)
        src = producer.get(v)
        if src is None:
            continue
        if holds_loop(src):
            out.add(src)
        elif recomputable(src):
            todo.extend(src.inputs)
    return out


def _base(v: Variable) -> str:
    return re.sub(r"_[0-9]+$", "", v.name)


def _copy_ops(ops: Sequence[Op], into: Block, vmap: dict[Variable, Variable]) -> None:
    """Append copies of `ops` to `into`, reading `vmap`'s copies; `vmap` learns the outputs."""
    for op in ops:
        attrs = {
            k: _copy_block(v, into, vmap) if isinstance(v, Block) else v
            for k, v in op.attrs.items()
        }
        outs = [
            into.new_var(_base(o), o.shape, o.dtype, stop_gradient=o.stop_gradient)
            for o in op.outputs
        ]
        vmap.update(zip(op.outputs, outs))
        new = Op(op.type, [vmap.get(i, i) for i in op.inputs], outs, attrs, op.loc, into, op.origin)
        into.ops.append(new)
        for sub in new.sub_blocks():
            sub.owner = new


def _copy_block(block: Block, parent: Block, vmap: dict[Variable, Variable]) -> Block:
    new = block.program.create_block(parent, forward_block_idx=block.forward_block_idx)
    for p in block.params:
        vmap[p] = new.add_param(_base(p), p.shape, p.dtype)
    _copy_ops(block.ops, new, vmap)
    new.results = [vmap.get(r, r) for r in block.results]
    return new


def replay_op(op: Op, inputs: list[Variable]) -> list[Variable]:
    """Append to the current block a copy of `op` (and of its sub-blocks) reading `inputs`;
    return its outputs."""
    into = op.block.program.current_block()
    vmap = dict(zip(op.inputs, inputs))
    _copy_ops([op], into, vmap)
    return into.ops[-1].outputs


class Rebuild:
    """The values of a forward block that its grad block computes again instead of recording.

    `given` says how the grad block gets some parameters of `fwd` (a loop's init for a
    carried value the body passes through unchanged, `start + step * k` for a counter, the
    operand for a branch parameter). Values of enclosing blocks are at hand as they are.
    Constants, and views and index arithmetic over values at hand, are rebuilt; the ops in
    `replay` (loops nested in `fwd`, see `replayed`) run again from their inputs, which are
    rebuilt or recorded (`inputs_to_record`); anything else is recorded.
    """

    def __init__(
        self,
        fwd: Block,
        given: dict[Variable, Callable[[], Variable]],
        replay: set[Op] | None = None,
    ):
        self.fwd = fwd
        self.given = given
        self.replay = replay or set()  # inner loops run again from their inputs (replay.py)
        self.producer = {o: op for op in fwd.ops for o in op.outputs}
        self._can: dict[Variable, bool] = {}

    def can(self, v: Variable) -> bool:
        """True if the grad block can compute `v` again from values at hand."""
        if v.block is not self.fwd or v in self.given:
            return True
        if v not in self._can:
            src = self.producer.get(v)
            self._can[v] = src is not None and (
                src in self.replay or (recomputable(src) and all(self.can(i) for i in src.inputs))
            )
        return self._can[v]

    def inputs_to_record(self, vs: list[Variable]) -> list[Variable]:
        """The inputs of the replayed ops that computing `vs` runs which cannot be computed
        again: the caller records them."""
        out: dict[Variable, None] = {}
        seen: set[Variable] = set()
        todo = list(vs)
        while todo:
            v = todo.pop()
            if v.block is not self.fwd or v in self.given or v in seen:
                continue
            seen.add(v)
            for i in self.producer[v].inputs:
                if self.can(i):
                    todo.append(i)
                else:
                    out.setdefault(i, None)
        return list(out)

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
                    if src in self.replay:
                        out.update(zip(src.outputs, replay_op(src, ins)))
                        return out[v]
                    name = src.outputs[0].name  # a replayed loop's records keep their names
                    base = re.sub(
                        r"_[0-9]+$", "", name if name.endswith("@INIT") else name.split("@")[0]
                    )
                    out.update(zip(src.outputs, emit(src.type, ins, dict(src.attrs), base=base)))
            return out[v]

        return {v: get(v) for v in vs}
