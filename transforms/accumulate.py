"""Gradient accumulation shared by the loop grad makers (transforms/control_grad.py and
transforms/treeverse.py): adding a per-iteration gradient to its accumulator.

Layer L4 (transforms): see docs/design.md.
"""

from __future__ import annotations

from srcgrad.ir.analysis import producer
from srcgrad.ir.program import Variable
from srcgrad.ops.elementwise import add
from srcgrad.ops.indexing import dynamic_index, dynamic_update_index


def accumulate(acc: Variable, g: Variable) -> Variable:
    """`acc + g`; when g is zeros with one slot written (the grad of reading `x[i]`), only
    that slot of `acc` is updated, so the cost does not grow with the size of `acc`."""
    src = producer(g)
    if src is not None and src.type == "dynamic_update_index":
        base = producer(src.inputs[0])
        if (
            base is not None
            and base.type == "fill_constant"
            and base.attrs["value"] == 0
            and acc.dtype == g.dtype
        ):
            _, value, i = src.inputs
            slot = add(dynamic_index(acc, i, **src.attrs), value)
            return dynamic_update_index(acc, slot, i, **src.attrs)
    return add(acc, g)
