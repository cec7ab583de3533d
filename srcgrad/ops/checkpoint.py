"""Rematerialisation: `checkpoint(fn)` and checkpointed loops (`checkpoints=k`).

A `checkpoint` op holds `fn`'s body as a sub-block and runs it forward; its gradient (in
transforms/control_grad.py) calls `fn` again on the op's inputs in the grad block and
differentiates that fresh copy, so the forward pass keeps only the inputs.

A loop with `checkpoints=k` runs as two nested loops: an outer loop of at most k segments,
each a checkpointed inner loop of at most ceil(N / k) iterations, where N bounds the trip
count. Its gradient records the carried state once per segment (k snapshots) and, segment
by segment from the last, replays the segment's iterations with records and runs their
backward: the two-level (sqrt-style) schedule, with memory O(k + N / k) carries instead of
O(N).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import jax
import numpy as np

from ..builder import active_program, as_var, emit
from ..errors import SrcgradError, user_location
from ..ir import Op, Variable
from ..registry import OutType, register
from ..transforms.passes import free_vars
from .control import _trace_block, while_loop
from .elementwise import add, astype, less, logical_and

@dataclass(frozen=True)
class Retrace:
    """The function a `checkpoint` op runs, kept so that its gradient can run it again."""

    fn: Callable[..., Any]
    tree: Any

    def __call__(self, args: Sequence[Variable]) -> Any:
        return self.fn(*jax.tree_util.tree_unflatten(self.tree, list(args)))

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
        res, out_tree = _trace_block(blk, fn, params, tree, splat=True)
        blk.results = res
        outs = emit("checkpoint", ins + free_vars(blk),
                    {"body": blk, "fn": Retrace(fn, tree), "n_args": len(ins)})
        blk.owner = parent.ops[-1]
        return jax.tree_util.tree_unflatten(out_tree, outs)
    return wrapped


def checkpointed_while(cond_fun: Callable[[Any], Any], body_fun: Callable[[Any], Any],
                       init_val: Any, max_iters: int | None, checkpoints: int) -> Any:
    """`while_loop(cond_fun, body_fun, init_val, max_iters=...)` that keeps `checkpoints`
    snapshots of the carried state for its gradient (see the module docstring).

    Without `max_iters` the loop is sized for a capacity of iterations (64 on the first run)
    and reports its trip count, plus one if it stopped only for lack of segments, to the
    capacity search, which reruns it with a larger capacity.
    """
    loc = user_location()
    k = _positive(checkpoints, "checkpoints", loc)
    prog = active_program("while_loop")
    lid = None
    if max_iters is None:
        from ..transforms.control_grad import INITIAL_CAPACITY  # the transforms import the ops
        lid = prog.loop_count
        prog.loop_count += 1
        total = prog.capacities.get(lid, INITIAL_CAPACITY)
    else:
        total = int(max_iters)
    seg = -(-total // k)

    def go(state: Any) -> Any:
        t, v = state
        return logical_and(as_var(cond_fun(v)), less(t, total))

    def step(state: Any) -> Any:
        t, v = state
        return add(t, 1), body_fun(v)

    segment = checkpoint(lambda state: while_loop(go, step, state, max_iters=seg))
    t, out = while_loop(go, segment, (np.int32(0), init_val), max_iters=k)
    if lid is not None:
        prog.capacity_checks.append((lid, add(t, astype(as_var(cond_fun(out)), np.int32)),
                                     _last_while(prog.current_block().ops)))
    return out


def _last_while(ops: list[Op]) -> Op:
    return next(op for op in reversed(ops) if op.type == "while")


def _positive(value: Any, what: str, loc: Any) -> int:
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
    em.assign(op.outputs, f"{fname}({em.tuple(op.inputs[:op.attrs['n_args']])})", unpack=True)


register("checkpoint", _checkpoint_rule, None, None, lower_stmt=_lower_checkpoint)
register("optimization_barrier", lambda i, a: [(i[0].shape, i[0].dtype)],
         "lax.optimization_barrier({0})", _g_barrier)

__all__ = ["checkpoint"]
