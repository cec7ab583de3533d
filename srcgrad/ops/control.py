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

from ..core.builder import active_program, as_var, emit
from ..base.errors import SrcgradError, TraceError, user_location
from ..base.traceback_filter import api_boundary
from ..ir.program import current_program
from ..ir.program import Op, Variable
from ..base.hooks import Hook
from ..core.registry import GradFn, OutType, register
from ..ir.analysis import branch_blocks, free_vars
from .remat import checkpointed_while
from .elementwise import add, less
from .blocks import check_max_iters, new_params, trace_block, type_list, build_while

BOOL = np.dtype(bool)


def _needs_program(name: str) -> None:
    """Refuse a loop called outside a trace, saying what to write instead (imperative mode
    records each op as it runs, so a Python loop is its loop)."""
    if current_program() is None:
        raise TraceError(
            f"sg.{name} builds a loop into a traced program: call it inside a function "
            f"passed to sg.grad / sg.jit / sg.trace. Outside one (on sg.Tensors, under "
            f"sg.autograd.record(), or on arrays) write a Python loop instead: `while "
            f"cond(c): c = body(c)` / `for i in range(n): c = body(i, c)`",
            loc=user_location(),
        )


@api_boundary
def while_loop(
    cond_fun: Callable[[Any], Any],
    body_fun: Callable[[Any], Any],
    init_val: Any,
    *,
    max_iters: int | None = None,
    checkpoints: int | None = None,
) -> Any:
    """lax.while_loop over srcgrad values; `max_iters` bounds the trip count; `checkpoints=k`
    makes the gradient keep k snapshots of the carried state and recompute the rest."""
    _needs_program("while_loop")
    loc = user_location()
    max_iters = check_max_iters(max_iters, "while", loc)
    leaves, tree = jax.tree_util.tree_flatten(init_val)
    init = [as_var(v) for v in leaves]
    if checkpoints is not None:
        return checkpointed_while(
            cond_fun, body_fun, jax.tree_util.tree_unflatten(tree, init), max_iters, checkpoints
        )
    if max_iters is not None:
        init.append(as_var(np.int32(0)))
    out = build_while(
        cond_fun, body_fun, init, tree, loc, max_iters, counter=max_iters is not None, splat=False
    )
    return jax.tree_util.tree_unflatten(tree, out[: len(leaves)])


@api_boundary
def fori_loop(
    lower: Any,
    upper: Any,
    body_fun: Callable[[Any, Any], Any],
    init_val: Any,
    *,
    max_iters: int | None = None,
    checkpoints: int | None = None,
) -> Any:
    """lax.fori_loop; static bounds give the loop its trip count as a capacity.

    `max_iters` bounds the trip count of a loop with traced bounds (as for `while_loop`);
    `checkpoints=k` as for `while_loop`.
    """
    _needs_program("fori_loop")
    loc = user_location()
    max_iters = check_max_iters(max_iters, "fori_loop", loc)
    leaves, tree = jax.tree_util.tree_flatten(init_val)
    static = all(isinstance(b, (int, np.integer)) for b in (lower, upper))
    lo = as_var(lower, like=None if static else as_var(upper))
    hi = as_var(upper, like=lo)
    if lo.dtype.kind not in "iu" or lo.shape != ():
        raise SrcgradError(
            f"fori_loop bounds must be integer scalars, got {lo.type_str()}",
            op="fori_loop",
            loc=loc,
        )
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
        return checkpointed_while(
            lambda c: less(c[0], hi),
            lambda c: (add(c[0], 1), body_fun(*c)),
            (lo, init_val),
            bound,
            checkpoints,
        )[1]
    counter = max_iters is not None and (bound is None or int(max_iters) < bound)
    if counter:
        bound = int(max_iters)
        init.append(as_var(np.int32(0)))
    out = build_while(cond_fn, body_fn, init, full_tree, loc, bound, counter=counter, splat=False)
    return jax.tree_util.tree_unflatten(tree, out[1 : 1 + len(leaves)])


def cond(
    pred: Any, true_fun: Callable[..., Any], false_fun: Callable[..., Any], *operands: Any
) -> Any:
    """lax.cond: `true_fun(*operands)` if `pred` else `false_fun(*operands)`."""
    loc = user_location()
    if isinstance(pred, (bool, np.bool_)):
        return true_fun(*operands) if pred else false_fun(*operands)
    p = as_var(pred)
    if p.shape != () or p.dtype != BOOL:
        raise SrcgradError(
            f"the predicate must be a bool scalar, got {p.type_str()}", op="cond", loc=loc
        )
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
        raise SrcgradError(
            f"the index must be an integer scalar, got {i.type_str()}", op="switch", loc=loc
        )
    if len(branches) == 1:
        return branches[0](*operands)
    names = [f"branch{k}" for k in range(len(branches))]
    return _branch_op(i, branches, names, operands, "switch", loc)


def _branch_op(
    index: Variable,
    fns: Sequence[Callable[..., Any]],
    names: Sequence[str],
    operands: tuple,
    what: str,
    loc: Any,
) -> Any:
    """Trace each of `fns` on `operands` into a branch block; emit the `cond` op."""
    prog = active_program(what)
    parent = prog.current_block()
    leaves, tree = jax.tree_util.tree_flatten(operands)
    ops_in = [as_var(v) for v in leaves]
    results, trees, blocks = [], [], []
    for fn in fns:
        blk = prog.create_block(parent)
        params = new_params(blk, ops_in)
        res, out_tree = trace_block(blk, fn, params, tree, splat=True)
        blk.results = res
        blocks.append(blk)
        results.append(res)
        trees.append(out_tree)
    for name, t, res in zip(names[1:], trees[1:], results[1:]):
        if t != trees[0]:
            raise SrcgradError(
                f"the branches return different structures: {names[0]} {trees[0]} and {name} {t}",
                op=what,
                loc=loc,
            )
        if [(v.shape, v.dtype) for v in res] != [(v.shape, v.dtype) for v in results[0]]:
            raise SrcgradError(
                f"the branches return different shapes or dtypes: {names[0]} "
                f"{type_list(results[0])}, {name} {type_list(res)}",
                op=what,
                loc=loc,
            )
    caps = list(dict.fromkeys(v for blk in blocks for v in free_vars(blk)))
    outs = emit(
        "cond", [index] + ops_in + caps, {**dict(zip(names, blocks)), "n_operands": len(ops_in)}
    )
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
    em.assign(
        op.outputs, f"lax.while_loop({cname}, {bname}, {em.tuple(op.inputs[:n])})", unpack=True
    )


def _lower_cond(em: Any, op: Op) -> None:
    """`lax.cond` for a bool predicate, `lax.switch` for an integer index."""
    n = op.attrs["n_operands"]
    operands = em.tuple(op.inputs[1 : 1 + n])
    if "true" in op.attrs:
        tname = em.block_function(op.attrs["true"], "true")
        fname = em.block_function(op.attrs["false"], "false")
        em.assign(
            op.outputs,
            f"lax.cond({em.name(op.inputs[0])}, {tname}, {fname}, {operands})",
            unpack=True,
        )
        return
    names = [em.block_function(b, "branch") for b in branch_blocks(op)]
    em.assign(
        op.outputs,
        f"lax.switch({em.name(op.inputs[0])}, [{', '.join(names)}], {operands})",
        unpack=True,
    )


#: The rules of `while` and `cond` in reverse and forward mode (transforms/control_grad.py,
#: transforms/cond_grad.py and transforms/forward.py: the layer above).
WHILE_GRAD: Hook[GradFn] = Hook(
    "srcgrad.ops.control.WHILE_GRAD", "the grad maker of while (transforms/control_grad.py)"
)
WHILE_JVP: Hook[Any] = Hook(
    "srcgrad.ops.control.WHILE_JVP", "the forward-mode rule of while (transforms/forward.py)"
)
COND_GRAD: Hook[GradFn] = Hook(
    "srcgrad.ops.control.COND_GRAD", "the grad maker of cond (transforms/cond_grad.py)"
)
COND_JVP: Hook[Any] = Hook(
    "srcgrad.ops.control.COND_JVP", "the forward-mode rule of cond (transforms/forward.py)"
)
register("while", _while_rule, None, WHILE_GRAD, lower_stmt=_lower_while, jvp=WHILE_JVP)
register("cond", _cond_rule, None, COND_GRAD, lower_stmt=_lower_cond, jvp=COND_JVP)

__all__ = ["while_loop", "fori_loop", "cond", "switch", "free_vars"]
