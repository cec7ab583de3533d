"""Forward mode: a tangent op emitted next to each forward op.

`jvp_ops` re-appends a run of just-traced ops to their block, each followed by the ops that
compute the tangents of its outputs from the tangents of its inputs (`x@TANGENT`). Only
floating-point values that depend on a seeded input get a tangent; integers and bools never
do. Loops and branches are transformed in place: a `while` carries the tangents of its
carried values as extra carries (no records: forward mode needs none), a `cond` returns the
tangents of its outputs from both branches.

Per-op rules live in each op's registry row (`OpDef.jvp`, set by its declaration): LINEAR
ops apply themselves to the tangents, MULTILINEAR ones sum one term per operand, and a few
ops have explicit rules where they are declared (`while`, `cond` and `checkpoint` declare a
hook for theirs, written here: `jvp_while`, `jvp_cond`, `jvp_checkpoint`). Every
other differentiable op gets its rule from its grad maker by transposition: the grad maker,
called on a placeholder cotangent `c`, emits the linear map c -> J^T c as srcgrad ops;
`backward_block` over those ops with respect to `c`, seeded with the input tangents, emits
(J^T)^T t = J t. A new op thus has a forward rule as soon as it has a grad maker.

Layer L4 (transforms): see docs/design.md.
"""

from __future__ import annotations

from collections import ChainMap
from typing import Any, Callable, MutableMapping, Sequence

import jax

from srcgrad.base import dtypes
from srcgrad.ir.analysis import branch_blocks
from srcgrad.core.builder import as_var, emit, emit1, grad_section
from srcgrad.base.errors import GradientError
from srcgrad.ir.program import Block, Op, Variable
from srcgrad.ops.creation import full, zeros
from srcgrad.ops.grad_helpers import add_n, broadcasts_to, unbroadcast
from srcgrad.ops.shape import broadcast_to
from srcgrad.core.registry import LINEAR, MULTILINEAR, REGISTRY, ZERO

from .backward import backward_block, forward_requires
from srcgrad.ir.analysis import free_vars, live_ops

Tangents = MutableMapping[Variable, Variable]
#: rule(op, input tangents (None: zero), all tangents so far) -> one tangent per output
#: (None: zero). Called with `op` just appended to the current block.
JvpRule = Callable[[Op, list, Tangents], Sequence["Variable | None"]]


def tangent_name(v: Variable) -> str:
    return f"{v.name.split('@')[0]}@TANGENT"


def jvp_ops(ops: Sequence[Op], block: Block, tangents: Tangents) -> None:
    """Append `ops` (just cut from the end of `block`) back to it, each followed by the ops
    that compute its outputs' tangents; `tangents` maps values to their tangents and learns
    the new ones."""
    prog = block.program
    with prog.block_guard(block):
        for op in ops:
            block.ops.append(op)
            ts = [tangents.get(v) for v in op.inputs]
            if all(t is None for t in ts) or not any(
                dtypes.is_inexact(o.dtype) for o in op.outputs
            ):
                continue
            row = REGISTRY[op.type]
            if row.grad is ZERO:
                continue
            rule = row.jvp
            if isinstance(rule, str):
                rule = _KINDS[rule]
            if rule is None and row.grad is None:
                raise GradientError(
                    f"{op.type} has no derivative, and it lies on the differentiated path "
                    f"(inputs {', '.join(v.type_str() for v in op.inputs)})",
                    op=op.type,
                    loc=op.loc,
                )
            n_ops = len(block.ops)
            with grad_section(op):  # the tangent ops take the op's user location
                outs = (rule or _transposed)(op, ts, tangents)
                fitted = [
                    _fit(t, o) if t is not None and dtypes.is_inexact(o.dtype) else None
                    for o, t in zip(op.outputs, outs)
                ]
            made = {}
            for new in block.ops[n_ops:]:
                new.origin = None  # a tangent op sits next to its op, not in a grad section
                made.update(dict.fromkeys(new.outputs))
            for o, t in zip(op.outputs, fitted):
                if t is not None:
                    if t in made:
                        prog.rename(t, tangent_name(o))
                    tangents[o] = t


def _fit(t: Variable, o: Variable) -> Variable:
    """The tangent `t` of `o` in `o`'s shape and dtype."""
    if t.shape != o.shape:
        if not broadcasts_to(t.shape, o.shape):
            raise GradientError(
                f"the tangent of {o.name} has shape {t.shape}, expected {o.shape} "
                "(a forward rule is wrong)"
            )
        t = broadcast_to(t, o.shape)
    if t.dtype != o.dtype:
        t = emit1("convert", [t], {"dtype": o.dtype})
    return t


def _zeros_like(v: Variable) -> Variable:
    return zeros(v.shape, v.dtype)


# ---------------------------------------------------------------- generic: by transposition


def _transposed(op: Op, ts: list, tangents: Tangents) -> list:
    """J t from the op's grad maker: transpose the linear map c -> J^T c it emits."""
    block = op.block.program.current_block()
    start = len(block.ops)
    # Any value serves (the map is linear in c), but not zero: grad makers read a zero
    # cotangent as "nothing differentiates this output" and drop its terms (eigh, svd).
    cts = [full(o.shape, 1, o.dtype) if dtypes.is_inexact(o.dtype) else None for o in op.outputs]
    placeholders = [c for c in cts if c is not None]
    is_placeholder = set(placeholders)
    need = [t is not None for t in ts]
    seeds, direct = [], []
    for v, g, t in zip(op.inputs, REGISTRY[op.type].grad(op, cts, need), ts):
        if g is None or t is None:
            continue
        if broadcasts_to(v.shape, g.shape):
            g = unbroadcast(g, v.shape)
        (direct if g in is_placeholder else seeds).append((g, t))
    got = backward_segment(block, start, seeds, placeholders) if seeds else {}
    outs = []
    for c in cts:
        terms = [t for g, t in direct if g is c] + ([got[c]] if got.get(c) is not None else [])
        outs.append(_total(terms, c) if terms else None)
    block.ops[start:] = live_ops(block.ops[start:], [o for o in outs if o is not None])
    return outs


def backward_segment(
    block: Block, start: int, seeds: list[tuple[Variable, Variable]], wrt: list[Variable]
) -> dict[Variable, Variable | None]:
    """`backward_block` over the ops of `block` from `start` on (a traced rule), keeping
    the names of the seed gradients (the walk would name each after its target)."""
    names = {g: g.name for _, g in seeds}
    segment = Block(block.program, block.idx, block.parent_idx)  # a view of the new ops
    segment.ops = block.ops[start:]
    got = backward_block(segment, seeds, wrt, set())
    for g, name in names.items():
        block.program.rename(g, name)
    return got


# ---------------------------------------------------------------- explicit rules


def _filled(op: Op, ts: list) -> list[Variable]:
    """The op's inputs with each float input replaced by its tangent (zeros if it has none)."""
    return [
        t if t is not None else (_zeros_like(v) if dtypes.is_inexact(v.dtype) else v)
        for v, t in zip(op.inputs, ts)
    ]


def _linear(op: Op, ts: list, tangents: Tangents) -> list:
    """A linear op (in its float inputs together): the op itself, applied to the tangents."""
    return emit(op.type, _filled(op, ts), dict(op.attrs))


def _multilinear(op: Op, ts: list, tangents: Tangents) -> list:
    """A multilinear op: one term per operand with a tangent, that operand replaced by it."""
    terms = []
    for i, t in enumerate(ts):
        if t is not None:
            ins = list(op.inputs)
            ins[i] = t
            terms.append(emit1(op.type, ins, dict(op.attrs)))
    return [_total(terms, op.outputs[0])]


def _total(terms: list[Variable], out: Variable) -> Variable:
    """The sum of tangent terms, each broadcast and cast to `out`'s shape and dtype."""
    fitted = [_fit(t, out) if (t.shape, t.dtype) != (out.shape, out.dtype) else t for t in terms]
    return fitted[0] if len(fitted) == 1 else add_n(fitted)


# ---------------------------------------------------------------- control flow


def _active_results(block: Block, seeds: list[Variable], results: list[Variable]) -> list[int]:
    """Positions of `results` that depend differentiably on `seeds` within `block`."""
    req = forward_requires(block, seeds, set())
    return [j for j, r in enumerate(results) if dtypes.is_inexact(r.dtype) and r in req]


def _transform_block(
    blk: Block, tangents: Tangents, seeds: dict[Variable, Variable], wanted: list[int]
) -> list[Variable]:
    """Transform a sub-block in place: its ops get tangent ops, its results gain the tangents
    of `results[wanted]`. `seeds` maps its parameters to their tangent parameters; values of
    enclosing blocks keep the tangents in `tangents`. Returns the new results."""
    inner: Tangents = ChainMap(dict(seeds), tangents)
    ops, blk.ops = blk.ops, []
    jvp_ops(ops, blk, inner)
    with blk.program.block_guard(blk):
        extra = []
        for j in wanted:
            r = blk.results[j]
            extra.append(inner[r] if r in inner else _zeros_like(r))
    blk.results = blk.results + extra
    return extra


def _new_outputs(op: Op, wanted: list[int]) -> list[Variable]:
    return [
        op.block.new_var(tangent_name(op.outputs[j]), op.outputs[j].shape, op.outputs[j].dtype)
        for j in wanted
    ]


def _replace(op: Op, inputs: list[Variable], outputs: list[Variable], attrs: dict[str, Any]) -> Op:
    """Put a new op in place of `op` (the last op of its block) and re-point what named it."""
    new = Op(op.type, inputs, outputs, attrs, op.loc, op.block, op.origin)
    block = op.block
    block.ops[block.ops.index(op)] = new
    for sub in new.sub_blocks():
        sub.owner = new
    prog = block.program
    prog.capacity_checks = [(lid, v, new if o is op else o) for lid, v, o in prog.capacity_checks]
    return new


def jvp_while(op: Op, ts: list, tangents: Tangents) -> list:
    """The loop carries the tangents of its active carried values after its own."""
    cond_b, body = op.attrs["cond"], op.attrs["body"]
    n = len(body.params)
    caps = {c: tangents[c] for c in op.inputs[n:] if c in tangents}
    active = {j for j in range(n) if ts[j] is not None}
    while True:  # a carried value is active if its result depends on an active one
        seeds = [body.params[j] for j in sorted(active)] + list(caps)
        new = active | set(_active_results(body, seeds, body.results))
        if new == active:
            break
        active = new
    wanted = sorted(active)
    if not wanted:
        return [None] * len(op.outputs)
    block = op.block
    block.ops.pop()  # the tangents' initial values go before the loop
    inits = [ts[j] if ts[j] is not None else _zeros_like(op.inputs[j]) for j in wanted]
    block.ops.append(op)
    params = {}
    for j in wanted:
        p = body.params[j]
        cond_b.add_param(tangent_name(p), p.shape, p.dtype)
        params[p] = body.add_param(tangent_name(p), p.shape, p.dtype)
    _transform_block(body, tangents, params, wanted)
    outs = _new_outputs(op, wanted)
    captured = list(dict.fromkeys(free_vars(cond_b) + free_vars(body)))
    _replace(op, op.inputs[:n] + inits + captured, op.outputs + outs, dict(op.attrs))
    result: list = [None] * len(op.outputs)
    for j, t in zip(wanted, outs):
        result[j] = t
    return result


def jvp_cond(op: Op, ts: list, tangents: Tangents) -> list:
    """Each branch also returns the tangents of the outputs, from the operands' tangents
    (extra operands) and the tangents of the values it reads from enclosing blocks."""
    n = op.attrs["n_operands"]
    branches = branch_blocks(op)
    seeded = [i for i in range(n) if ts[1 + i] is not None]
    caps = [c for c in op.inputs[1 + n :] if c in tangents]
    wanted = sorted(
        {
            j
            for blk in branches
            for j in _active_results(blk, [blk.params[i] for i in seeded] + caps, blk.results)
        }
    )
    if not wanted:
        return [None] * len(op.outputs)
    for blk in branches:
        params = {
            blk.params[i]: blk.add_param(
                tangent_name(blk.params[i]), blk.params[i].shape, blk.params[i].dtype
            )
            for i in seeded
        }
        _transform_block(blk, tangents, params, wanted)
    outs = _new_outputs(op, wanted)
    operands = op.inputs[1 : 1 + n] + [ts[1 + i] for i in seeded]
    captured = list(dict.fromkeys(v for blk in branches for v in free_vars(blk)))
    _replace(
        op,
        [op.inputs[0]] + operands + captured,
        op.outputs + outs,
        dict(op.attrs, n_operands=len(operands)),
    )
    result: list = [None] * len(op.outputs)
    for j, t in zip(wanted, outs):
        result[j] = t
    return result


def retraced(op: Op, outs: Sequence[Any], tangents: Tangents) -> list:
    """The tangents of `op`'s outputs from `outs`: a copy of its body just traced (after `op`)
    on its own inputs. The copy's ops get tangent ops; `op` keeps computing the primal."""
    block = op.block
    start = block.ops.index(op) + 1
    new = block.ops[start:]
    del block.ops[start:]
    jvp_ops(new, block, tangents)
    return [tangents.get(v) if isinstance(v, Variable) else None for v in outs]


def jvp_checkpoint(op: Op, ts: list, tangents: Tangents) -> list:
    """Forward mode through `sg.checkpoint`: differentiate a copy of the function's ops (the
    tangents need the intermediates, which a remat boundary would only recompute)."""
    outs = op.attrs["fn"](op.inputs[: op.attrs["n_args"]])
    leaves = [as_var(v) for v in jax.tree_util.tree_leaves(outs)]
    return retraced(op, leaves, tangents)


_KINDS: dict[str, JvpRule] = {LINEAR: _linear, MULTILINEAR: _multilinear}

__all__ = [
    "jvp_ops",
    "retraced",
    "tangent_name",
    "backward_segment",
    "jvp_while",
    "jvp_cond",
    "jvp_checkpoint",
]
