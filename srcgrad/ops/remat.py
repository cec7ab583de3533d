"""Rematerialisation: `checkpoint(fn)` and checkpointed loops (`checkpoints=k`).

A `checkpoint` op holds `fn`'s body as a sub-block and runs it forward; its gradient (in
transforms/control_grad.py) calls `fn` again on the op's inputs in the grad block and
differentiates that fresh copy, so the forward pass keeps only the inputs.

A loop with `checkpoints=k` is a `while` op that also carries k snapshot slots of its
state. Step 0 stays in slot 0; each later step's state is written over a spare snapshot
(free, or dispensable: earlier than one of a higher level) at level 0, else over the latest
snapshot one level up, which makes the earlier ones of lower level dispensable (Wang and
Moin's dynamic checkpointing, online: the trip count need not be known). The op's
`treeverse` attr marks it for its gradient (transforms/treeverse.py), which runs the body
again from the snapshots; memory is k states whatever the trip count, with or without
`max_iters`.

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import jax
import numpy as np

from ..core.builder import active_program, as_var, emit
from ..base.errors import SrcgradError, user_location
from ..ir.program import Op, Variable
from ..base.hooks import Hook
from ..core.registry import LINEAR, GradFn, OutType, register
from ..ir.analysis import free_vars
from .blocks import trace_block, build_while
from ..base import conversion
from .creation import arange, full, zeros
from .elementwise import add, greater, less, logical_and, where
from .indexing import dynamic_index, dynamic_update_index
from .reduce import argmax
from .shape import reshape


@dataclass(frozen=True)
class Retrace:
    """The function a `checkpoint` op runs, kept so that its gradient can run it again."""

    fn: Callable[..., Any]
    tree: Any

    def __call__(self, args: Sequence[Variable]) -> Any:
        return conversion.user_fn(self.fn)(*jax.tree_util.tree_unflatten(self.tree, list(args)))

    def __repr__(self) -> str:
        return getattr(self.fn, "__name__", "fn")


def checkpoint(fn: Callable[..., Any]) -> Callable[..., Any]:
    """jax.checkpoint: the same function, whose gradient recomputes `fn`'s intermediates
    from its inputs instead of keeping them."""

    @functools.wraps(fn)
    def wrapped(*args: Any) -> Any:
        prog = active_program("checkpoint")
        parent = prog.current_block()
        leaves, tree = jax.tree_util.tree_flatten(args)
        ins = [as_var(v) for v in leaves]
        blk = prog.create_block(parent)
        params = [blk.add_param(v.name.split("@")[0], v.shape, v.dtype) for v in ins]
        res, out_tree = trace_block(blk, fn, params, tree, splat=True)
        blk.results = res
        outs = emit(
            "checkpoint",
            ins + free_vars(blk),
            {"body": blk, "fn": Retrace(fn, tree), "n_args": len(ins)},
        )
        blk.owner = parent.ops[-1]
        return jax.tree_util.tree_unflatten(out_tree, outs)

    return wrapped


@dataclass(frozen=True)
class Treeverse:
    """What the gradient of a checkpointed `while` op needs to run its body again.

    The op carries (step, the user's state leaves, one k-slot buffer per leaf, the step each
    slot holds, the placement's levels and dispensable flags); `fn` is the user's body.
    """

    fn: Callable[[Any], Any]
    tree: Any
    k: int
    n_leaves: int

    def step(self, leaves: Sequence[Variable]) -> list[Variable]:
        """The body run on `leaves` in the current block: the next state's leaves."""
        state = jax.tree_util.tree_unflatten(self.tree, list(leaves))
        out = jax.tree_util.tree_leaves(conversion.user_fn(self.fn)(state))
        return [as_var(v, like=a) for v, a in zip(out, leaves)]

    def __repr__(self) -> str:
        return f"treeverse(k={self.k})"


#: The step a free slot holds: later than any step.
FREE = int(np.iinfo(np.int32).max)


def checkpointed_while(
    cond_fun: Callable[[Any], Any],
    body_fun: Callable[[Any], Any],
    init_val: Any,
    max_iters: int | None,
    checkpoints: int,
) -> Any:
    """`while_loop(cond_fun, body_fun, init_val, max_iters=...)` whose gradient keeps
    `checkpoints` snapshots of the carried state (see the module docstring)."""
    loc = user_location()
    k = positive_int(checkpoints, "checkpoints", loc)
    leaves, tree = jax.tree_util.tree_flatten(init_val)
    init = [as_var(v) for v in leaves]
    info = Treeverse(body_fun, tree, k, len(init))
    if k == 1:  # the initial state is the only snapshot
        slots, steps = [reshape(v, (1,) + v.shape) for v in init], zeros((1,), np.int32)
    else:
        slots, steps = [zeros((k,) + v.shape, v.dtype) for v in init], full((k,), FREE, np.int32)
    state = (np.int32(0), init, slots, steps, zeros((k,), np.int32), full((k,), True, bool))

    def go(s: Any) -> Any:
        more = as_var(cond_fun(jax.tree_util.tree_unflatten(tree, s[1])))
        return more if max_iters is None else logical_and(more, less(s[0], max_iters))

    def step(s: Any) -> Any:
        t, val, slots, steps, levels, spare = s
        if k > 1:
            slot, steps, levels, spare = _place(t, steps, levels, spare)
            slots = [dynamic_update_index(b, v, slot) for b, v in zip(slots, val)]
        return add(t, 1), info.step(val), slots, steps, levels, spare

    prog = active_program("while_loop")
    flat, stree = jax.tree_util.tree_flatten(state)
    outs = build_while(
        go, step, [as_var(v) for v in flat], stree, loc, max_iters, counter=False, splat=False
    )
    loop = prog.current_block().ops[-1]
    loop.attrs["treeverse"] = info
    return jax.tree_util.tree_unflatten(tree, outs[1 : 1 + len(init)])


def _place(
    t: Variable, steps: Variable, levels: Variable, spare: Variable
) -> tuple[Variable, Variable, Variable, Variable]:
    """Where the state of step t goes (Wang and Moin's dynamic checkpointing): into a spare
    slot (free, or dispensable: earlier than a snapshot of a higher level) at level 0, else
    over the latest snapshot at its level + 1, which makes every earlier snapshot of a lower
    level dispensable. Step 0 takes slot 0, which is never spare again. Returns (slot,
    steps, levels, spare) after the write."""
    latest_spare = argmax(where(spare, steps, -1))
    any_spare = dynamic_index(spare, latest_spare)
    latest = argmax(steps)
    slot = where(any_spare, latest_spare, latest)
    level = where(any_spare, 0, add(dynamic_index(levels, latest), 1))
    levels = dynamic_update_index(levels, level, slot)
    later = greater(arange(steps.shape[0], dtype=np.int32), 0)  # slot 0 keeps step 0
    spare = where(
        any_spare, dynamic_update_index(spare, False, slot), logical_and(less(levels, level), later)
    )
    return slot, dynamic_update_index(steps, t, slot), levels, spare


def positive_int(value: Any, what: str, loc: Any) -> int:
    """`value` as a positive Python int (`checkpoints=`); anything else is an error."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise SrcgradError(f"{what} must be a positive int, got {value!r}", op="while", loc=loc)
    return int(value)


def _checkpoint_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    return [(v.shape, v.dtype) for v in attrs["body"].results]


def barrier(x: Variable) -> Variable:
    """`x`, which XLA may not merge with an equal computation (lax.optimization_barrier):
    a recomputation from it stays a recomputation instead of reusing the forward values."""
    return emit("optimization_barrier", [x])[0]


def _g_barrier(op: Op, gs: list, need: list) -> list:
    return [gs[0]]


def _lower_checkpoint(em: Any, op: Op) -> None:
    fname = em.block_function(op.attrs["body"], "remat")
    em.assign(op.outputs, f"{fname}({em.tuple(op.inputs[: op.attrs['n_args']])})", unpack=True)


#: The rules of `checkpoint` in reverse and forward mode (transforms/control_grad.py and
#: transforms/forward.py, the layer above).
CHECKPOINT_GRAD: Hook[GradFn] = Hook(
    "srcgrad.ops.remat.CHECKPOINT_GRAD", "the grad maker of checkpoint (transforms/control_grad.py)"
)
CHECKPOINT_JVP: Hook[Any] = Hook(
    "srcgrad.ops.remat.CHECKPOINT_JVP",
    "the forward-mode rule of checkpoint (transforms/forward.py)",
)
register(
    "checkpoint",
    _checkpoint_rule,
    None,
    CHECKPOINT_GRAD,
    lower_stmt=_lower_checkpoint,
    jvp=CHECKPOINT_JVP,
)
#: jax 0.4.30 (the declared floor) has the barrier only under its private name.
_BARRIER = (
    "lax.optimization_barrier({0})"
    if hasattr(jax.lax, "optimization_barrier")
    else "jax._src.ad_checkpoint._optimization_barrier({0})"
)
register(
    "optimization_barrier",
    lambda i, a: [(i[0].shape, i[0].dtype)],
    _BARRIER,
    _g_barrier,
    jvp=LINEAR,
)

__all__ = ["checkpoint"]
