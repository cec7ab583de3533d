"""The traced forms of converted statements: an `if` on a traced value becomes a `cond` op
whose branches return the names they assign; a loop becomes a `while` op carrying the names
its body assigns and reads (as sg.cond / sg.while_loop build them).

Layer L6 (front ends): see docs/design.md.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import numpy as np

from ..core.builder import active_program, as_var, emit
from ..base.errors import SrcgradError, SourceLoc
from ..ir.program import Block, Variable
from ..ops.blocks import build_while
from ..ops.creation import zeros
from ..ops.elementwise import astype, not_equal
from ..ir.analysis import free_vars
from .jumps import RET
from .undefined import Undefined, undefined

BOOL = np.dtype(bool)
_ARRAYISH = (Variable, bool, int, float, np.ndarray, np.generic, jax.Array)


def predicate(p: Any, what: str, loc: SourceLoc | None) -> Variable:
    """A traced condition as a bool scalar (a number tests `!= 0`, as Python's truth)."""
    v = as_var(p)
    if v.shape != ():
        raise SrcgradError(f"the condition of this {what} is a traced {v.type_str()} array, which "
                           "has no single truth value; reduce it with sg.any or sg.all",
                           op=what, loc=loc)
    return v if v.dtype == BOOL else not_equal(v, 0)


def _zeros_like(tree: Any) -> Any:
    return jax.tree_util.tree_map(lambda l: zeros(as_var(l).shape, as_var(l).dtype), tree)


def _leaves(value: Any, name: str, what: str, loc: SourceLoc | None) -> tuple[list, Any]:
    leaves, tree = jax.tree_util.tree_flatten(value)
    for l in leaves:
        if not isinstance(l, _ARRAYISH):
            raise SrcgradError(f"`{name}` holds a {type(l).__name__} that this {what} on a traced "
                               "value cannot carry: only arrays, numbers and lists/tuples of them "
                               "can be carried out of a converted branch or loop", op=what, loc=loc)
    return leaves, tree


def traced_if(pred: Any, true_fn: Callable[..., tuple], false_fn: Callable[..., tuple],
              state: tuple, names: Sequence[str], loc: SourceLoc | None) -> tuple:
    """`if pred:` on a traced `pred`: one `cond` op, its outputs the names the branches set."""
    p = predicate(pred, "if", loc)
    prog = active_program("if")
    parent = prog.current_block()
    blocks: list[Block] = []
    results = []
    for fn in (true_fn, false_fn):
        blk = prog.create_block(parent)
        with prog.block_guard(blk):
            results.append(list(fn(*state)))
        blocks.append(blk)
    merged: list[Any] = []
    outs: list[tuple[int, Any, int]] = []  # (name index, tree, number of leaves)
    res_t: list[Variable] = []
    res_f: list[Variable] = []
    for i, nm in enumerate(names):
        a, b = results[0][i], results[1][i]
        merged.append(a)
        if a is b or (undefined(a) and undefined(b)):
            continue
        if undefined(a) or undefined(b):
            if not nm.startswith(RET):
                merged[i] = Undefined(nm, f"is assigned in only one branch of the `if` at {loc}, "
                                          "whose condition is a traced value, and used after it: "
                                          "assign it before the `if` or in both branches")
                continue
            side = 0 if undefined(a) else 1  # a return value: the other branch's zeros
            with prog.block_guard(blocks[side]):
                filler = _zeros_like(b if side == 0 else a)
            a, b = (filler, b) if side == 0 else (a, filler)
        la, ta = _leaves(a, nm, "if", loc)
        lb, tb = _leaves(b, nm, "if", loc)
        if ta != tb:
            raise SrcgradError(f"`{nm}` has a different structure in the two branches: {ta} and "
                               f"{tb}", op="if", loc=loc)
        va, vb = _pair(blocks, la, lb)
        bad = [(x, y) for x, y in zip(va, vb) if (x.shape, x.dtype) != (y.shape, y.dtype)]
        if bad:
            x, y = bad[0]
            raise SrcgradError(f"`{nm}` is {x.type_str()} after the true branch and {y.type_str()} "
                               "after the false branch of this `if` on a traced value; both "
                               "branches must give it the same shape and dtype", op="if", loc=loc)
        outs.append((i, ta, len(va)))
        res_t += va
        res_f += vb
    blocks[0].results, blocks[1].results = res_t, res_f
    caps = list(dict.fromkeys(free_vars(blocks[0]) + free_vars(blocks[1])))
    vals = emit("cond", [p] + caps, {"true": blocks[0], "false": blocks[1], "n_operands": 0})
    blocks[0].owner = blocks[1].owner = parent.ops[-1]
    it = iter(vals)
    for i, tree, n in outs:
        merged[i] = jax.tree_util.tree_unflatten(tree, [next(it) for _ in range(n)])
    return tuple(merged)


def _pair(blocks: list[Block], la: list, lb: list) -> tuple[list[Variable], list[Variable]]:
    """The leaves of the two branches as Variables, each made in its branch's block; a Python
    number takes the dtype of the other branch's value."""
    prog = blocks[0].program
    va, vb = [], []
    for x, y in zip(la, lb):
        with prog.block_guard(blocks[0]):
            vx = as_var(x, like=y if isinstance(y, Variable) else None)
        with prog.block_guard(blocks[1]):
            vy = as_var(y, like=vx)
        if not isinstance(x, Variable) and vx.dtype != vy.dtype and vx.shape == () == vy.shape:
            with prog.block_guard(blocks[0]):
                vx = as_var(x, like=vy)
        va.append(vx)
        vb.append(vy)
    return va, vb


def traced_loop(test: Callable[..., Any], body: Callable[..., tuple], state: tuple,
                names: Sequence[str], carried: Sequence[int], pending: Sequence[int],
                loc: SourceLoc | None, max_iters: int | None, counter: bool) -> tuple:
    """A `while` op carrying `state[i]` for i in `carried` (and, at types found by tracing the
    body once, `pending`: names first assigned in the loop and read after it).

    `test(*state)` and `body(*state)` take and return the whole state. Returns the state after
    the loop: carried names get the loop's outputs; the body's temporaries are undefined."""
    active_program("while")
    state = list(state)
    numbers = [i for i in carried
               if not all(isinstance(l, Variable) for l in jax.tree_util.tree_leaves(state[i]))]
    if pending or numbers:
        types = _body_types(body, state, names, list(carried), loc)
        for i in pending:
            if i in types:
                tree, specs = types[i]
                state[i] = jax.tree_util.tree_unflatten(tree, [zeros(sh, dt) for sh, dt in specs])
        pending = [i for i in pending if types.get(i) is not None]
        for i in numbers:
            state[i] = _recast(state[i], types.get(i))
    keep = sorted(set(carried) | set(pending))
    init_vals = tuple(state[i] for i in keep)
    leaves, tree = jax.tree_util.tree_flatten(init_vals)
    for i in keep:
        _leaves(state[i], names[i], "loop", loc)
    init = [as_var(l) for l in leaves]
    kinds = [(v.shape, v.dtype, v.type_str()) for v in init]

    def full(carry: tuple) -> list:
        s = list(state)
        for i, v in zip(keep, carry):
            s[i] = v
        return s

    def cond_fun(carry: tuple) -> Variable:
        return predicate(test(*full(carry)), "loop", loc)

    def body_fun(carry: tuple) -> tuple:
        out = body(*full(carry))
        new = tuple(out[i] for i in keep)
        for i, v in zip(keep, new):
            if undefined(v):
                raise SrcgradError(f"`{names[i]}` is carried by this loop on a traced value, but "
                                   "one iteration leaves it unassigned", op="loop", loc=loc)
        got, got_tree = jax.tree_util.tree_flatten(new)
        if got_tree != tree:
            raise SrcgradError(
                f"the loop changes the structure of its state {list(names[i] for i in keep)}: "
                f"{tree} before, {got_tree} after one iteration (a list that grows "
                "in a loop on a traced value cannot be carried: preallocate an array "
                "and assign its items)",
                op="loop",
                loc=loc,
            )
        for leaf, (shape, dt, ts), nm in zip(got, kinds, _leaf_names(keep, state, names)):
            v = as_var(leaf, like=None) if isinstance(leaf, Variable) else leaf
            if isinstance(v, Variable) and (v.shape, v.dtype) != (shape, dt):
                raise SrcgradError(
                    f"the loop carries `{nm}` as {ts} but one iteration makes it "
                    f"{v.type_str()}; a value carried by a loop on a traced value must keep its "
                    "shape and dtype (give it its final shape and dtype before the loop)",
                    op="loop", loc=loc)
        return new

    if counter:
        init.append(as_var(np.int32(0)))
    outs = build_while(cond_fun, body_fun, init, tree, loc, max_iters, counter=counter, splat=False,
                  names=[n.lstrip("_") for n in _leaf_names(keep, state, names)])
    done = jax.tree_util.tree_unflatten(tree, outs[:len(leaves)])
    result: list[Any] = [Undefined(nm, f"is assigned only inside the loop at {loc}, which runs "
                                       "on a traced value, and is read after it: assign it "
                                       "before the loop") for nm in names]
    for i, v in zip(keep, done):
        result[i] = v
    return tuple(result)


def _leaf_names(keep: Sequence[int], state: list, names: Sequence[str]) -> list[str]:
    out = []
    for i in keep:
        out += [names[i]] * len(jax.tree_util.tree_leaves(state[i]))
    return out


def _recast(value: Any, types: Any) -> Any:
    """Python numbers carried into a loop, as the dtypes the body gives them."""
    leaves, tree = jax.tree_util.tree_flatten(value)
    if types is None or types[0] != tree:
        return value
    out = []
    for l, (shape, dt) in zip(leaves, types[1]):
        v = as_var(l)
        out.append(astype(v, dt) if not isinstance(l, Variable) and v.shape == shape
                   and v.dtype != dt else v)
    return jax.tree_util.tree_unflatten(tree, out)


def test_becomes_traced(test: Callable[..., Any], body: Callable[..., tuple], state: tuple) -> bool:
    """True if the loop's test is a traced value after one run of the body (from a trace in a
    scratch block that is then dropped): then the loop is traced from its first iteration
    instead of running that one in Python."""
    prog = active_program("while")
    n_blocks, n_loops = len(prog.blocks), prog.loop_count
    blk = prog.create_block(prog.current_block())
    with prog.block_guard(blk):
        try:
            t = test(*body(*state))
        except Exception:  # the loop then runs in Python and raises there
            t = None
    del prog.blocks[n_blocks:]
    prog.loop_count = n_loops
    return isinstance(t, Variable)


def _body_types(body: Callable[..., tuple], state: list, names: Sequence[str],
                carried: list[int], loc: SourceLoc | None) -> dict[int, Any]:
    """The (shape, dtype) trees the body gives each name, from one trace of it in a scratch
    block that is then dropped."""
    prog = active_program("while")
    parent = prog.current_block()
    n_blocks, n_loops = len(prog.blocks), prog.loop_count
    blk = prog.create_block(parent)
    s = list(state)
    with prog.block_guard(blk):
        for i in carried:
            leaves, tree = jax.tree_util.tree_flatten(s[i])
            s[i] = jax.tree_util.tree_unflatten(
                tree, [blk.add_param(names[i].lstrip("_") or "v", v.shape, v.dtype)
                       for v in (as_var(l) for l in leaves)])
        try:
            out = body(*s)
        except SrcgradError:
            out = None
    del prog.blocks[n_blocks:]
    prog.loop_count = n_loops
    if out is None:
        return {}
    types: dict[int, Any] = {}
    for i, v in enumerate(out):
        leaves, tree = jax.tree_util.tree_flatten(v)
        if not undefined(v) and leaves and all(isinstance(l, Variable) for l in leaves):
            types[i] = (tree, [(l.shape, l.dtype) for l in leaves])
    return types
