"""Control flow: `while_loop`, `fori_loop` and `cond`, whose bodies become nested blocks.

A `while` op reads its initial carried values and then the outer values its blocks capture;
`attrs["cond"]` maps the carried values to a bool scalar and `attrs["body"]` maps them to
their next values. A `cond` op reads the predicate (or a `switch`'s integer index), the
operands and the captures; its `true`/`false` blocks (a switch's `branch0, branch1, ...`)
map the operands to the results.

Layer L3 (the ops): see docs/design.md.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import numpy as np

from ..base import conversion as hooks
from ..core.builder import active_program, as_var, emit
from ..base.errors import SrcgradError, user_location
from ..ir.program import Block, Op, Variable
from ..core.registry import OutType, recomputable, register
from ..ir.analysis import branch_blocks, free_vars, has_effect
from .elementwise import add, less, logical_and

BOOL = np.dtype(bool)


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
        if (op.sub_blocks() or op.type in _PINNED or has_effect(op)
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


def _trace_block(block: Block, fn: Callable[..., Any], args: Sequence[Variable], tree: Any,
                 splat: bool) -> tuple[list[Variable], Any]:
    prog = block.program
    with prog.block_guard(block):
        tree_args = jax.tree_util.tree_unflatten(tree, list(args))
        fn = hooks.user_fn(fn)
        out = fn(*tree_args) if splat else fn(tree_args)
        leaves, out_tree = jax.tree_util.tree_flatten(out)
        return [as_var(v, like=a if isinstance(a, Variable) else None)
                for v, a in zip(leaves, list(args) + [None] * len(leaves))], out_tree


def _new_params(block: Block, like: Sequence[Variable], names: Sequence[str] = ()) -> list[Variable]:
    names = list(names) + [v.name.split("@")[0] for v in like[len(names):]]
    return [block.add_param(n, v.shape, v.dtype) for n, v in zip(names, like)]


def _types(vs: Sequence[Variable]) -> str:
    return "(" + ", ".join(v.type_str() for v in vs) + ")"


def _check_max_iters(max_iters: Any, op: str, loc: Any) -> int | None:
    """`max_iters` as a Python int: None, or a non-negative Python/NumPy integer (not a bool)."""
    if max_iters is None:
        return None
    if isinstance(max_iters, (bool, np.bool_)) or not isinstance(max_iters, (int, np.integer)):
        raise SrcgradError(f"max_iters must be a non-negative Python or NumPy int, got "
                           f"{type(max_iters).__name__} {max_iters!r}", op=op, loc=loc)
    if max_iters < 0:
        raise SrcgradError(f"max_iters must be >= 0, got {max_iters}", op=op, loc=loc)
    return int(max_iters)


class _Checkpointed:
    """`checkpoints=k` loops: srcgrad/ops/checkpoint.py builds them on `while_loop` and
    registers its builder here (`run`)."""

    run: Callable[..., Any]


CHECKPOINTED = _Checkpointed()


def while_loop(cond_fun: Callable[[Any], Any], body_fun: Callable[[Any], Any], init_val: Any, *,
               max_iters: int | None = None, checkpoints: int | None = None) -> Any:
    """lax.while_loop over srcgrad values; `max_iters` bounds the trip count; `checkpoints=k`
    makes the gradient keep k snapshots of the carried state and recompute the rest."""
    loc = user_location()
    max_iters = _check_max_iters(max_iters, "while", loc)
    leaves, tree = jax.tree_util.tree_flatten(init_val)
    init = [as_var(v) for v in leaves]
    if checkpoints is not None:
        return CHECKPOINTED.run(cond_fun, body_fun, jax.tree_util.tree_unflatten(tree, init),
                                  max_iters, checkpoints)
    if max_iters is not None:
        init.append(as_var(np.int32(0)))
    out = _while(cond_fun, body_fun, init, tree, loc, max_iters,
                 counter=max_iters is not None, splat=False)
    return jax.tree_util.tree_unflatten(tree, out[:len(leaves)])


def _while(cond_fun: Callable[..., Any], body_fun: Callable[..., Any], init: list[Variable], tree: Any,
           loc: Any, max_iters: int | None, counter: bool, splat: bool,
           names: Sequence[str] = ()) -> list[Variable]:
    prog = active_program("while_loop")
    parent = prog.current_block()
    n_user = len(init) - counter
    cond_b = prog.create_block(parent)
    params = _new_params(cond_b, init, names)
    pred, _ = _trace_block(cond_b, cond_fun, params[:n_user], tree, splat)
    if len(pred) != 1 or pred[0].shape != () or pred[0].dtype != BOOL:
        raise SrcgradError(f"the loop condition must return a bool scalar, got {_types(pred)}",
                           op="while", loc=loc)
    if counter:
        with prog.block_guard(cond_b):
            pred = [logical_and(pred[0], less(params[-1], int(max_iters)))]
    cond_b.results = pred
    body_b = prog.create_block(parent)
    params = _new_params(body_b, init, names)
    res, out_tree = _trace_block(body_b, body_fun, params[:n_user], tree, splat)
    if out_tree != tree:
        raise SrcgradError(f"the loop body must return the structure of its carried state: "
                           f"got {out_tree}, carried {tree}", op="while", loc=loc)
    bad = [(a, b) for a, b in zip(init, res) if (a.shape, a.dtype) != (b.shape, b.dtype)]
    if bad:
        raise SrcgradError("the loop body changes the shape or dtype of its carried state: "
                           f"carried {_types(init[:n_user])}, returned {_types(res)}",
                           op="while", loc=loc)
    if counter:
        with prog.block_guard(body_b):
            res.append(add(params[-1], 1))
    body_b.results = res
    hoist_invariants(body_b, parent)
    captures = list(dict.fromkeys(free_vars(cond_b) + free_vars(body_b)))
    attrs = {"cond": cond_b, "body": body_b, "max_iters": None if max_iters is None else int(max_iters),
             "loop_id": prog.loop_count}
    prog.loop_count += 1
    outs = emit("while", init + captures, attrs)
    cond_b.owner = body_b.owner = parent.ops[-1]
    return outs


def fori_loop(lower: Any, upper: Any, body_fun: Callable[[Any, Any], Any], init_val: Any, *,
              max_iters: int | None = None, checkpoints: int | None = None) -> Any:
    """lax.fori_loop; static bounds give the loop its trip count as a capacity.

    `max_iters` bounds the trip count of a loop with traced bounds (as for `while_loop`);
    `checkpoints=k` as for `while_loop`.
    """
    loc = user_location()
    max_iters = _check_max_iters(max_iters, "fori_loop", loc)
    leaves, tree = jax.tree_util.tree_flatten(init_val)
    static = all(isinstance(b, (int, np.integer)) for b in (lower, upper))
    lo = as_var(lower, like=None if static else as_var(upper))
    hi = as_var(upper, like=lo)
    if lo.dtype.kind not in "iu" or lo.shape != ():
        raise SrcgradError(f"fori_loop bounds must be integer scalars, got {lo.type_str()}",
                           op="fori_loop", loc=loc)
    init = [lo] + [as_var(v) for v in leaves]
    full_tree = jax.tree_util.tree_structure((0, jax.tree_util.tree_unflatten(tree, leaves)))

    def cond_fn(carry: Any) -> Variable:
        return less(carry[0], hi)

    def body_fn(carry: Any) -> Any:
        i, val = carry
        return (add(i, 1), body_fun(i, val))

    bound = max(0, int(upper) - int(lower)) if static else None
    if checkpoints is not None:
        if max_iters is not None:
            bound = int(max_iters) if bound is None else min(bound, int(max_iters))
        return CHECKPOINTED.run(lambda c: less(c[0], hi), lambda c: (add(c[0], 1), body_fun(*c)),
                                  (lo, init_val), bound, checkpoints)[1]
    counter = max_iters is not None and (bound is None or int(max_iters) < bound)
    if counter:
        bound = int(max_iters)
        init.append(as_var(np.int32(0)))
    out = _while(cond_fn, body_fn, init, full_tree, loc, bound, counter=counter, splat=False)
    return jax.tree_util.tree_unflatten(tree, out[1:1 + len(leaves)])


def cond(pred: Any, true_fun: Callable[..., Any], false_fun: Callable[..., Any], *operands: Any) -> Any:
    """lax.cond: `true_fun(*operands)` if `pred` else `false_fun(*operands)`."""
    loc = user_location()
    if isinstance(pred, (bool, np.bool_)):
        return true_fun(*operands) if pred else false_fun(*operands)
    p = as_var(pred)
    if p.shape != () or p.dtype != BOOL:
        raise SrcgradError(f"the predicate must be a bool scalar, got {p.type_str()}",
                           op="cond", loc=loc)
    return _branch_op(p, [true_fun, false_fun], ["true", "false"], operands, "cond", loc)


def switch(index: Any, branches: Sequence[Callable[..., Any]], *operands: Any) -> Any:
    """lax.switch: `branches[clamp(index, 0, len(branches) - 1)](*operands)`, one `cond` op
    whose branch blocks are `branch0, branch1, ...`."""
    loc = user_location()
    branches = list(branches)
    if not branches:
        raise SrcgradError("switch needs at least one branch", op="switch", loc=loc)
    if isinstance(index, (int, np.integer)) and not isinstance(index, (bool, np.bool_)):
        return branches[min(max(int(index), 0), len(branches) - 1)](*operands)
    i = as_var(index)
    if i.shape != () or i.dtype.kind not in "iu":
        raise SrcgradError(f"the index must be an integer scalar, got {i.type_str()}",
                           op="switch", loc=loc)
    if len(branches) == 1:
        return branches[0](*operands)
    names = [f"branch{k}" for k in range(len(branches))]
    return _branch_op(i, branches, names, operands, "switch", loc)


def _branch_op(index: Variable, fns: Sequence[Callable[..., Any]], names: Sequence[str],
               operands: tuple, what: str, loc: Any) -> Any:
    """Trace each of `fns` on `operands` into a branch block; emit the `cond` op."""
    prog = active_program(what)
    parent = prog.current_block()
    leaves, tree = jax.tree_util.tree_flatten(operands)
    ops_in = [as_var(v) for v in leaves]
    results, trees, blocks = [], [], []
    for fn in fns:
        blk = prog.create_block(parent)
        params = _new_params(blk, ops_in)
        res, out_tree = _trace_block(blk, fn, params, tree, splat=True)
        blk.results = res
        blocks.append(blk)
        results.append(res)
        trees.append(out_tree)
    for name, t, res in zip(names[1:], trees[1:], results[1:]):
        if t != trees[0]:
            raise SrcgradError(f"the branches return different structures: {names[0]} "
                               f"{trees[0]} and {name} {t}", op=what, loc=loc)
        if [(v.shape, v.dtype) for v in res] != [(v.shape, v.dtype) for v in results[0]]:
            raise SrcgradError(f"the branches return different shapes or dtypes: {names[0]} "
                               f"{_types(results[0])}, {name} {_types(res)}", op=what, loc=loc)
    caps = list(dict.fromkeys(v for blk in blocks for v in free_vars(blk)))
    outs = emit("cond", [index] + ops_in + caps,
                {**dict(zip(names, blocks)), "n_operands": len(ops_in)})
    for blk in blocks:
        blk.owner = parent.ops[-1]
    return jax.tree_util.tree_unflatten(trees[0], outs)


def _while_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    return [(v.shape, v.dtype) for v in attrs["body"].results]


def _cond_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    first = attrs["true"] if "true" in attrs else attrs["branch0"]
    return [(v.shape, v.dtype) for v in first.results]


def _lower_while(em: Any, op: Op) -> None:
    body = op.attrs["body"]
    n = len(body.params)
    cname = em.block_function(op.attrs["cond"], "cond")
    bname = em.block_function(body, "body")
    em.assign(op.outputs, f"lax.while_loop({cname}, {bname}, {em.tuple(op.inputs[:n])})", unpack=True)


def _lower_cond(em: Any, op: Op) -> None:
    """`lax.cond` for a bool predicate, `lax.switch` for an integer index."""
    n = op.attrs["n_operands"]
    operands = em.tuple(op.inputs[1:1 + n])
    if "true" in op.attrs:
        tname = em.block_function(op.attrs["true"], "true")
        fname = em.block_function(op.attrs["false"], "false")
        em.assign(op.outputs, f"lax.cond({em.name(op.inputs[0])}, {tname}, {fname}, "
                              f"{operands})", unpack=True)
        return
    names = [em.block_function(b, "branch") for b in branch_blocks(op)]
    em.assign(op.outputs, f"lax.switch({em.name(op.inputs[0])}, [{', '.join(names)}], "
                          f"{operands})", unpack=True)


register("while", _while_rule, None, None, lower_stmt=_lower_while)
register("cond", _cond_rule, None, None, lower_stmt=_lower_cond)

__all__ = ["while_loop", "fori_loop", "cond", "switch", "free_vars"]
