"""Tracing a user's function into a nested block, and the `while` op built from two of them
(the condition and the body), as `while_loop`, `fori_loop`, checkpointed loops, `scan` and
converted Python loops build it; loop-invariant work leaves a just-traced body.

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import numpy as np

from ..base import conversion
from ..base.errors import SrcgradError
from ..core.builder import active_program, as_var, emit
from ..core.registry import recomputable
from ..ir.analysis import free_vars, loop_invariant_ops
from ..ir.program import Block, Op, Variable
from .elementwise import add, less, logical_and

BOOL = np.dtype(bool)


def hoist_invariants(body: Block, parent: Block) -> list[Op]:
    """Move the loop-invariant work out of a just-traced loop body, to the end of `parent`
    (where the loop op is emitted next): each op that reads only values that do not change in
    the loop and that a gradient would record rather than recompute (`exp(a)` or a `solve`
    of captured arrays), with the invariant ops it reads. The body then reads its value as it
    reads any enclosing value, so a gradient reads it too instead of recording it every
    iteration; the forward computes it once (XLA hoists it out of the loop anyway).
    Returns the moved ops, in order."""
    invariant = {v: op for op in loop_invariant_ops(body.ops, body.params) for v in op.outputs}
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


def trace_block(
    block: Block, fn: Callable[..., Any], args: Sequence[Variable], tree: Any, splat: bool
) -> tuple[list[Variable], Any]:
    """Call `fn` on `args` (unflattened by `tree`; as separate arguments when `splat`) with
    its ops appended to `block`: its results as Variables, and their tree."""
    prog = block.program
    with prog.block_guard(block):
        tree_args = jax.tree_util.tree_unflatten(tree, list(args))
        fn = conversion.user_fn(fn)
        out = fn(*tree_args) if splat else fn(tree_args)
        leaves, out_tree = jax.tree_util.tree_flatten(out)
        return [
            as_var(v, like=a if isinstance(a, Variable) else None)
            for v, a in zip(leaves, list(args) + [None] * len(leaves))
        ], out_tree


def new_params(block: Block, like: Sequence[Variable], names: Sequence[str] = ()) -> list[Variable]:
    """Parameters of `block` typed as `like`, named `names` (else after `like`'s names)."""
    names = list(names) + [v.name.split("@")[0] for v in like[len(names) :]]
    return [block.add_param(n, v.shape, v.dtype) for n, v in zip(names, like)]


def type_list(vs: Sequence[Variable]) -> str:
    """`(f32[3], i32[])`: the types of `vs`, for error messages."""
    return "(" + ", ".join(v.type_str() for v in vs) + ")"


def check_max_iters(max_iters: Any, op: str, loc: Any) -> int | None:
    """`max_iters` as a Python int: None, or a non-negative Python/NumPy integer (not a bool)."""
    if max_iters is None:
        return None
    if isinstance(max_iters, (bool, np.bool_)) or not isinstance(max_iters, (int, np.integer)):
        raise SrcgradError(
            f"max_iters must be a non-negative Python or NumPy int, got "
            f"{type(max_iters).__name__} {max_iters!r}",
            op=op,
            loc=loc,
        )
    if max_iters < 0:
        raise SrcgradError(f"max_iters must be >= 0, got {max_iters}", op=op, loc=loc)
    return int(max_iters)


def build_while(
    cond_fun: Callable[..., Any],
    body_fun: Callable[..., Any],
    init: list[Variable],
    tree: Any,
    loc: Any,
    max_iters: int | None,
    counter: bool,
    splat: bool,
    names: Sequence[str] = (),
) -> list[Variable]:
    """Trace `cond_fun` and `body_fun` over the carried values `init` into two blocks and
    emit the `while` op; `counter` adds a step counter that stops the loop at `max_iters`.
    Its outputs (the counter's last, when there is one)."""
    prog = active_program("while_loop")
    parent = prog.current_block()
    n_user = len(init) - counter
    cond_b = prog.create_block(parent)
    params = new_params(cond_b, init, names)
    pred, _ = trace_block(cond_b, cond_fun, params[:n_user], tree, splat)
    if len(pred) != 1 or pred[0].shape != () or pred[0].dtype != BOOL:
        raise SrcgradError(
            f"the loop condition must return a bool scalar, got {type_list(pred)}",
            op="while",
            loc=loc,
        )
    if counter:
        with prog.block_guard(cond_b):
            pred = [logical_and(pred[0], less(params[-1], int(max_iters)))]
    cond_b.results = pred
    body_b = prog.create_block(parent)
    params = new_params(body_b, init, names)
    res, out_tree = trace_block(body_b, body_fun, params[:n_user], tree, splat)
    if out_tree != tree:
        raise SrcgradError(
            f"the loop body must return the structure of its carried state: "
            f"got {out_tree}, carried {tree}",
            op="while",
            loc=loc,
        )
    bad = [(a, b) for a, b in zip(init, res) if (a.shape, a.dtype) != (b.shape, b.dtype)]
    if bad:
        raise SrcgradError(
            "the loop body changes the shape or dtype of its carried state: "
            f"carried {type_list(init[:n_user])}, returned {type_list(res)}",
            op="while",
            loc=loc,
        )
    if counter:
        with prog.block_guard(body_b):
            res.append(add(params[-1], 1))
    body_b.results = res
    hoist_invariants(body_b, parent)
    captures = list(dict.fromkeys(free_vars(cond_b) + free_vars(body_b)))
    attrs = {
        "cond": cond_b,
        "body": body_b,
        "max_iters": None if max_iters is None else int(max_iters),
        "loop_id": prog.loop_count,
    }
    prog.loop_count += 1
    outs = emit("while", init + captures, attrs)
    cond_b.owner = body_b.owner = parent.ops[-1]
    return outs
