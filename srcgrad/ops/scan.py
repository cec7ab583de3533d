"""`scan`: jax.lax.scan over srcgrad values, built as a counted `while` loop.

The loop carries the step index `i` (0, 1, ..., length-1), the user's carry and one stack
per per-step output; the body reads `xs[t]` and writes `ys[t]` at `t = i` (or
`length-1-i` with `reverse`). So the gradient needs no new machinery: `xs[t]` is a view the
grad body recomputes, the stacks of `ys` double as records, and the trip count is static.

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import numpy as np

from ..base import conversion as hooks
from ..core.builder import active_program, as_var, emit
from ..base.errors import SrcgradError, user_location
from ..ir.program import Variable
from ..ir.analysis import free_vars
from .remat import positive_int, checkpoint
from .blocks import type_list, hoist_invariants
from .creation import zeros
from .elementwise import add, less, multiply, subtract, where
from .indexing import dynamic_index, dynamic_update_index
from .shape import broadcast_to, concatenate, reshape, stack

INT32 = np.dtype(np.int32)


def _scan_length(xs: list[Variable], length: int | None, loc: Any) -> int:
    """The trip count: `length`, or the common leading axis of the per-step inputs."""
    for v in xs:
        if v.ndim == 0:
            raise SrcgradError(
                f"scan inputs must have a leading axis to scan over, got {v.name}: {v.type_str()}",
                op="scan",
                loc=loc,
            )
    sizes = sorted({v.shape[0] for v in xs})
    if length is not None:
        if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or length < 0:
            raise SrcgradError(
                f"scan length must be a non-negative int, got {length!r}", op="scan", loc=loc
            )
        sizes = sorted(set(sizes) | {int(length)})
    if not sizes:
        raise SrcgradError("scan needs xs or length to know its trip count", op="scan", loc=loc)
    if len(sizes) > 1:
        raise SrcgradError(
            f"scan got inconsistent lengths {sizes} (length={length}, xs {type_list(xs)})",
            op="scan",
            loc=loc,
        )
    return sizes[0]


def scan(
    f: Callable[[Any, Any], tuple[Any, Any]],
    init: Any,
    xs: Any = None,
    length: int | None = None,
    reverse: bool = False,
    unroll: int | bool = 1,
    *,
    checkpoints: int | None = None,
) -> tuple[Any, Any]:
    """jax.lax.scan: `carry, y = f(carry, x)` for each `x` along the leading axis of `xs`;
    returns the final carry and the `y`s stacked (pytrees of arrays throughout).

    `unroll` as lax.scan's: `True`, or a number of at least the length (other than 1),
    writes every step out with no loop (as XLA gets it from JAX: jnp.polyval's scans are
    such); a smaller number still emits one loop iteration per step. `checkpoints=k` makes
    the gradient keep k snapshots of the carry and recompute the steps in between (as for
    `while_loop`).
    """
    loc = user_location()
    if not isinstance(unroll, (bool, int, np.integer)) or (
        not isinstance(unroll, bool) and unroll < 1
    ):
        raise SrcgradError(
            f"scan unroll must be a positive int or a bool, got {unroll!r}", op="scan", loc=loc
        )
    c_leaves, c_tree = jax.tree_util.tree_flatten(init)
    x_leaves, x_tree = jax.tree_util.tree_flatten(xs)
    carry = [as_var(v) for v in c_leaves]
    xv = [as_var(v) for v in x_leaves]
    n = _scan_length(xv, length, loc)
    if n and checkpoints is None and unroll is not False and (unroll is True or 1 < unroll >= n):
        return _unrolled(f, c_tree, carry, x_tree, xv, n, reverse, loc)
    if checkpoints is not None:
        k = positive_int(checkpoints, "checkpoints", loc)
        if n > 0:
            return _checkpointed_scan(
                f,
                jax.tree_util.tree_unflatten(c_tree, carry),
                jax.tree_util.tree_unflatten(x_tree, xv),
                n,
                reverse,
                k,
            )
    prog = active_program("scan")
    parent = prog.current_block()
    i0 = as_var(np.int32(0))
    cond_b = prog.create_block(parent)
    body = prog.create_block(parent)
    i = body.add_param("i", (), INT32)
    params = [body.add_param(v.name.split("@")[0], v.shape, v.dtype) for v in carry]
    with prog.block_guard(body):
        t = subtract(n - 1, i) if reverse else i
        # with no steps the body never runs, but XLA refuses to index an empty axis
        x_t = [
            dynamic_index(v, t, allow_negative_indices=False) if n else zeros(v.shape[1:], v.dtype)
            for v in xv
        ]
        new, ys, y_tree = _step(f, c_tree, params, x_tree, x_t, loc)
    stacked = ys if n else []  # with no steps, ys are empty arrays made outside the loop
    stacks = [
        body.add_param(f"{y.name.split('@')[0]}_ys", (n,) + y.shape, y.dtype) for y in stacked
    ]
    with prog.block_guard(body):
        body.results = (
            [add(i, 1)]
            + new
            + [
                dynamic_update_index(s, y, t, allow_negative_indices=False)
                for s, y in zip(stacks, stacked)
            ]
        )
    for p in body.params:
        cond_b.add_param(p.name, p.shape, p.dtype)
    with prog.block_guard(cond_b):
        cond_b.results = [less(cond_b.params[0], n)]
    inits = [zeros((n,) + y.shape, y.dtype) for y in ys]
    hoist_invariants(body, parent)
    captures = list(dict.fromkeys(free_vars(cond_b) + free_vars(body)))
    attrs = {"cond": cond_b, "body": body, "max_iters": n, "loop_id": prog.loop_count}
    prog.loop_count += 1
    outs = emit("while", [i0] + carry + inits[: len(stacks)] + captures, attrs, base="scan")
    cond_b.owner = body.owner = parent.ops[-1]
    k = 1 + len(carry)
    return (
        jax.tree_util.tree_unflatten(c_tree, outs[1:k]),
        jax.tree_util.tree_unflatten(y_tree, outs[k:] if n else inits),
    )


def _step(
    f: Callable[[Any, Any], tuple[Any, Any]],
    c_tree: Any,
    carry: list[Variable],
    x_tree: Any,
    x_t: list[Variable],
    loc: Any,
) -> tuple[list[Variable], list[Variable], Any]:
    """One step of the scanned function, checked: the new carry (its structure, shapes and
    dtypes those of `carry`), the step's outputs and their tree."""
    out = hooks.user_fn(f)(
        jax.tree_util.tree_unflatten(c_tree, carry), jax.tree_util.tree_unflatten(x_tree, x_t)
    )
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise SrcgradError("the scanned function must return a pair (carry, y)", op="scan", loc=loc)
    new_leaves, new_tree = jax.tree_util.tree_flatten(out[0])
    if new_tree != c_tree:
        raise SrcgradError(
            f"the scanned function must return the structure of its carry: "
            f"got {new_tree}, carried {c_tree}",
            op="scan",
            loc=loc,
        )
    new = [as_var(v, like=p) for v, p in zip(new_leaves, carry)]
    if [(v.shape, v.dtype) for v in new] != [(v.shape, v.dtype) for v in carry]:
        raise SrcgradError(
            "the scanned function changes the shape or dtype of its carry: "
            f"carried {type_list(carry)}, returned {type_list(new)}",
            op="scan",
            loc=loc,
        )
    y_leaves, y_tree = jax.tree_util.tree_flatten(out[1])
    return new, [as_var(v) for v in y_leaves], y_tree


def _unrolled(
    f: Callable[[Any, Any], tuple[Any, Any]],
    c_tree: Any,
    carry: list[Variable],
    x_tree: Any,
    xs: list[Variable],
    n: int,
    reverse: bool,
    loc: Any,
) -> tuple[Any, Any]:
    """`scan` with its `n` steps written out one after the other (no loop)."""
    outs: list[list[Variable]] = [[] for _ in range(n)]
    y_tree = None
    for t in range(n - 1, -1, -1) if reverse else range(n):
        carry, outs[t], y_tree = _step(f, c_tree, carry, x_tree, [v[t] for v in xs], loc)
    ys = [stack([step[j] for step in outs]) for j in range(len(outs[0]))]
    return (jax.tree_util.tree_unflatten(c_tree, carry), jax.tree_util.tree_unflatten(y_tree, ys))


def _checkpointed_scan(
    f: Callable[[Any, Any], tuple[Any, Any]], init: Any, xs: Any, n: int, reverse: bool, k: int
) -> tuple[Any, Any]:
    """`scan` as an outer scan over at most k segments of ceil(n/k) steps, each an inner scan
    under `checkpoint` (a two-level schedule: the per-step outputs cannot live in
    snapshots, as a checkpointed loop's state does). When k does not divide
    n, the inputs are padded with copies of their last step, and the padded steps leave the
    carry unchanged (their outputs are cut off)."""
    seg = -(-n // k)
    n_seg = -(-n // seg)
    pad = n_seg * seg - n

    def split(x: Variable) -> Variable:
        if pad:
            x = concatenate([x, broadcast_to(x[n - 1 : n], (pad,) + x.shape[1:])])
        return reshape(x, (n_seg, seg) + x.shape[1:])

    def segment(c: Any, chunk: Any) -> Any:
        xs_j, j = chunk

        def step(c: Any, xi: Any) -> Any:
            x, i = xi
            new, y = f(c, x)
            if pad:
                valid = less(add(multiply(j, seg), i), n)
                new = jax.tree_util.tree_map(lambda a, b: where(valid, a, b), new, c)
            return new, y

        return scan(step, c, (xs_j, np.arange(seg, dtype=np.int32)), reverse=reverse)

    steps = np.arange(n_seg, dtype=np.int32)
    c, ys = scan(
        checkpoint(segment), init, (jax.tree_util.tree_map(split, xs), steps), reverse=reverse
    )
    return c, jax.tree_util.tree_map(lambda y: reshape(y, (n_seg * seg,) + y.shape[2:])[:n], ys)


__all__ = ["scan"]
