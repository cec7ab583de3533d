"""Reverse mode: Fluid's append_backward over the block-structured IR.

`backward_block` is the one walk that every gradient goes through: it seeds the targets'
gradients, keeps only ops on a path from a differentiable input to a target, visits them
in reverse asking each op's grad maker for the gradients of the inputs that need one, sums
each down to its input's shape where the op broadcast it, and merges fan-in
(`x@GRAD@RENAME@n` + `sum`). Control-flow grad makers (control_grad.py) call it
recursively on their sub-blocks.

Layer L4 (transforms): see docs/design.md.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from srcgrad.base import dtypes
from srcgrad.core.builder import as_var, constant_pool, grad_section
from srcgrad.base.errors import GradientError, user_location
from srcgrad.ir.program import Block, Op, Program, Variable, current_program, program_guard
from srcgrad.ops.creation import full, zeros
from srcgrad.ops.elementwise import cast_gradient
from srcgrad.ops.grad_helpers import add_n, assign, broadcasts_to, fill_zeros_like, unbroadcast
from srcgrad.core.registry import REGISTRY, ZERO
from srcgrad.core.verify import check


def _differentiable(v: Variable, no_grad: set[Variable]) -> bool:
    return dtypes.is_inexact(v.dtype) and not v.stop_gradient and v not in no_grad


def forward_requires(
    block: Block, seeds: Iterable[Variable], no_grad: set[Variable]
) -> set[Variable]:
    """Values of `block` that depend differentiably on `seeds` (plus the seeds)."""
    req = {v for v in seeds if _differentiable(v, no_grad)}
    for op in block.ops:
        if REGISTRY[op.type].grad is ZERO:
            continue
        if not req.isdisjoint(op.inputs):
            for o in op.outputs:
                if _differentiable(o, no_grad):
                    req.add(o)
    return req


class _Partials:
    """The partial gradients written for each variable, merged on first read."""

    def __init__(self, block: Block):
        self.block = block
        self.parts: dict[Variable, list[Variable]] = {}
        self.done: dict[Variable, Variable] = {}
        self.named: set[Variable] = set()

    def add(self, var: Variable, grad: Variable, fresh: bool) -> None:
        if grad.shape != var.shape:
            raise GradientError(
                f"gradient of {var.name} has shape {grad.shape}, expected "
                f"{var.shape} (a grad maker is wrong)",
                loc=user_location(),
            )
        if grad.dtype != var.dtype:
            grad = cast_gradient(grad, var.dtype)
            fresh = True
        if not fresh or grad in self.named:
            grad = assign(grad)
        self.named.add(grad)
        self.parts.setdefault(var, []).append(grad)

    def get(self, var: Variable) -> Variable | None:
        out = self.done.get(var)
        if out is not None:
            return out
        parts = self.parts.get(var)
        if not parts:
            return None
        prog = self.block.program
        name = f"{var.name}@GRAD"
        if len(parts) == 1:
            prog.rename(parts[0], name)
            out = parts[0]
        else:
            for k, p in enumerate(parts):
                prog.rename(p, f"{name}@RENAME@{k}")
            out = add_n(parts, base=name)
            prog.rename(out, name)
        self.done[var] = out
        return out


def backward_block(
    fwd: Block,
    seeds: Sequence[tuple[Variable, Variable]],
    wrt: Sequence[Variable],
    no_grad: set[Variable],
) -> dict[Variable, Variable | None]:
    """Append to the current block the gradients of `seeds`' targets w.r.t. `wrt`.

    `fwd` is the block whose ops are differentiated; the grad ops go to the program's current
    block (the same block at top level, a grad block for a sub-block).
    """
    prog = fwd.program
    gblock = prog.current_block()
    requires = forward_requires(fwd, wrt, no_grad)
    useful = {t for t, _ in seeds if t in requires}
    path = []
    for op in reversed(fwd.ops):
        if not useful.isdisjoint(op.outputs) and not requires.isdisjoint(op.inputs):
            path.append(op)
            useful.update(requires.intersection(op.inputs))
    partials = _Partials(gblock)
    for target, g in seeds:
        if target in requires:
            partials.add(target, g, fresh=True)
    with constant_pool(gblock):
        for op in path:
            _differentiate(op, partials, requires, gblock)
    return {v: partials.get(v) for v in wrt}


def _differentiate(op: Op, partials: _Partials, requires: set[Variable], gblock: Block) -> None:
    """Append the grad ops of `op` and add the gradients of its inputs to `partials`."""
    with grad_section(op):  # a fan-in `sum` belongs to the section of the op it feeds
        gs = [partials.get(o) for o in op.outputs]
        missing = [g is None for g in gs]  # not `None in gs`: == on a Variable records an op
        if all(missing):
            return
        row = REGISTRY[op.type]
        if row.grad is None:
            raise GradientError(
                f"{op.type} has no gradient, and it lies on the differentiated path "
                f"(inputs {', '.join(v.type_str() for v in op.inputs)})",
                op=op.type,
                loc=op.loc,
            )
        inputs = list(op.inputs)  # grad makers of loops add inputs to the forward op
        need = [i in requires for i in inputs]
        n_ops = len(gblock.ops)
        if any(missing):
            gs = [
                _zero_grad(o, gblock) if g is None and dtypes.is_inexact(o.dtype) else g
                for o, g in zip(op.outputs, gs)
            ]
        # Consumed lazily: a maker that yields has each gradient unbroadcast before it goes on.
        in_grads = []
        for v, g, nd in zip(inputs, row.grad(op, gs, need), need):
            if g is not None and nd and broadcasts_to(v.shape, g.shape):
                g = unbroadcast(g, v.shape)
            in_grads.append(g)
        new = {o for new_op in gblock.ops[n_ops:] for o in new_op.outputs}
        for v, g, nd in zip(inputs, in_grads, need):
            if g is not None and nd:
                partials.add(v, g, fresh=g in new)


def _zero_grad(v: Variable, gblock: Block) -> Variable:
    if v.block is gblock:
        return fill_zeros_like(v)
    return zeros(v.shape, v.dtype)


def _check_in_program(vs: Sequence[Variable], prog: Program, what: str) -> None:
    for v in vs:
        if not isinstance(v, Variable) or v.block.program is not prog:
            raise GradientError(
                f"{what} {v!r} is not in a computational graph (not a value of "
                "the program being built)",
                loc=user_location(),
            )


def _owner(targets: Sequence[Any], what: str) -> Program:
    """The program the targets live in (Fluid's `loss.block.program`), still open for ops."""
    progs = []
    for t in targets:
        prog = t.block.program if isinstance(t, Variable) else None
        if prog is None or t.block not in prog.blocks:  # not a Variable, or a disposed trace
            raise GradientError(
                f"{what} {t!r} is not in a computational graph (not a value of a "
                "program: build it inside sg.program_guard or a traced function)",
                loc=user_location(),
            )
        if prog not in progs:
            progs.append(prog)
    if len(progs) > 1:
        raise GradientError(
            f"the {what}s {[t.name for t in targets]} belong to different programs",
            loc=user_location(),
        )
    if not progs:
        raise GradientError(f"no {what} given", loc=user_location())
    return progs[0]


def gradients(
    targets: Variable | Sequence[Variable],
    inputs: Variable | Sequence[Variable],
    target_gradients: Any = None,
    no_grad_set: Iterable[Variable] | None = None,
) -> list[Variable | None]:
    """Gradients of `targets` (seeded with `target_gradients`, default ones) w.r.t. `inputs`.

    The grad ops are appended to the program the targets live in, as Fluid does, whether or
    not its `program_guard` is still open. Returns one grad Variable per input, or None where
    the input does not affect the targets or takes no gradient (`sg.data`, stop_gradient,
    `no_grad_set`). A non-floating-point input, and a non-scalar target without a target
    gradient, raise GradientError.
    """
    ts = [targets] if isinstance(targets, Variable) else list(targets)
    prog = _owner(ts, "target")
    if current_program() is prog:
        return _gradients(prog, ts, inputs, target_gradients, no_grad_set)
    with program_guard(prog):
        return _gradients(prog, ts, inputs, target_gradients, no_grad_set)


def _gradients(
    prog: Program,
    ts: list[Variable],
    inputs: Variable | Sequence[Variable],
    target_gradients: Any,
    no_grad_set: Iterable[Variable] | None,
) -> list[Variable | None]:
    xs = [inputs] if isinstance(inputs, Variable) else list(inputs)
    _check_in_program(xs, prog, "input")
    block = prog.current_block()
    for t in ts:
        if t.block is not block:
            raise GradientError(
                f"target {t.name} is not a value of the block being built", loc=user_location()
            )
    for x in xs:
        if not dtypes.is_inexact(x.dtype):
            raise GradientError(
                f"cannot differentiate with respect to {x.name}: {x.type_str()} "
                "is not a floating-point type",
                loc=user_location(),
            )
    if target_gradients is None:
        tgs: list[Any] = [None] * len(ts)
    elif isinstance(target_gradients, (list, tuple)):
        tgs = list(target_gradients)
    else:
        tgs = [target_gradients]
    if len(tgs) != len(ts):
        raise GradientError(
            f"{len(tgs)} target gradients for {len(ts)} targets", loc=user_location()
        )
    seeds = []
    for t, g in zip(ts, tgs):
        if g is None:
            if not dtypes.is_inexact(t.dtype):
                raise GradientError(
                    f"target {t.name} ({t.type_str()}) is not floating-point", loc=user_location()
                )
            if t.shape != () and t.size != 1:
                raise GradientError(
                    f"target {t.name} ({t.type_str()}) is not a scalar: pass its "
                    "head gradient in target_gradients",
                    loc=user_location(),
                )
            g = full(t.shape, 1.0, t.dtype)
            prog.rename(g, f"{t.name}@GRAD")
        else:
            g = as_var(g, like=t)
            if g.shape != t.shape:
                raise GradientError(
                    f"head gradient for {t.name} has shape {g.shape}, expected {t.shape}",
                    loc=user_location(),
                )
            g = assign(g, base=f"{t.name}@GRAD")
        seeds.append((t, g))
    no_grad = set(no_grad_set or ())
    grads = backward_block(block, seeds, xs, no_grad)
    check(prog, "the backward pass")
    return [grads[x] for x in xs]


def append_backward(
    loss: Variable,
    parameter_list: Sequence[Variable | str] | None = None,
    no_grad_set: Iterable[Variable | str] | None = None,
) -> list[tuple[Variable, Variable]]:
    """Fluid's append_backward: gradients of a scalar loss for the parameters of the program
    the loss lives in (`loss.block.program`), inside or outside its `program_guard`."""
    prog = _owner([loss], "loss")
    if loss.shape != () and loss.size != 1:
        raise GradientError(
            f"the loss must be a scalar to seed its gradient, got "
            f"{loss.type_str()}; pass target gradients to sg.gradients instead",
            loc=user_location(),
        )
    by_name = {v.name: v for v in prog.inputs}

    def resolve(p: Variable | str) -> Variable:
        if isinstance(p, str):
            if p not in by_name:
                raise GradientError(f"{p!r} is not an input of the program", loc=user_location())
            return by_name[p]
        return p

    params = (
        [resolve(p) for p in parameter_list]
        if parameter_list is not None
        else [v for v in prog.inputs if v.kind == "param"]
    )
    no_grad = {resolve(v) for v in (no_grad_set or ())}
    grads = gradients([loss], params, None, no_grad)
    return [(p, g) for p, g in zip(params, grads) if g is not None]


__all__ = ["append_backward", "gradients", "backward_block", "forward_requires"]
