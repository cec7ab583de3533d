"""Custom derivative rules: `sg.custom_vjp` and `sg.custom_jvp`, as jax's.

A call of a decorated function is one op holding the function's body as a sub-block:

- `custom_vjp` runs `fwd` (outputs: the function's outputs, then the residuals). Its grad
  maker traces `bwd(residuals, cotangents)` into the gradient program, so `bwd`'s ops are
  ordinary ops there and can be differentiated again. Differentiated again (grad of grad),
  the op is differentiated through `fwd`'s own ops, traced again: as in jax, where the
  outer transformation sees `fwd` as ordinary code.
- `custom_jvp` runs `fun`. Its forward rule traces the user's `jvp` rule; its grad maker
  transposes that rule (linear in the tangents): the rule is traced on placeholder tangents
  and `backward_block` differentiates its tangent outputs with respect to them.

Forward mode through a `custom_vjp` op differentiates `fwd`'s ops (jax refuses jvp there).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import jax

from . import dtypes
from .builder import active_program, as_var, emit
from . import dispatch
from .errors import GradientError, SrcgradError, user_location
from .ir import Block, Op, Variable
from .ops.creation import zeros
from .registry import OutType, register
from .transforms.accumulate import is_zero
from .transforms.forward import backward_segment, jvp_rule, retraced
from .analysis import free_vars, live_ops

tree_flatten, tree_unflatten = jax.tree_util.tree_flatten, jax.tree_util.tree_unflatten


@dataclass(frozen=True)
class Rule:
    """A user function an op calls again (fwd, bwd or jvp), printed by its name."""

    fn: Callable[..., Any]

    def __call__(self, *args: Any) -> Any:
        return self.fn(*args)

    def __repr__(self) -> str:
        return getattr(self.fn, "__name__", "fn")


def _name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


def _refuse_closure(op: Op, need: Sequence[bool]) -> None:
    """A GradientError when the function reads a differentiated value it was not passed."""
    n = op.attrs["n_args"]
    for v, nd in zip(op.inputs[n:], need[n:]):
        if nd:
            raise GradientError(
                f"the {op.type} function {op.attrs['fun']!r} closes over {v.name} "
                f"({v.type_str()}), which is being differentiated; its rule cannot see it: "
                "pass it as an argument", op=op.type, loc=op.loc)


def _call(kind: str, fun: Callable[..., Any], body_fn: Callable[..., Any], args: tuple,
          attrs: dict[str, Any], n_results: Callable[[Any], tuple[list[Any], Any, int]]) -> Any:
    """Emit a `kind` op whose body is `body_fn(*args)`; returns the user-visible outputs."""
    prog = active_program(kind)
    parent = prog.current_block()
    leaves, in_tree = tree_flatten(args)
    ins = [as_var(v) for v in leaves]
    blk = prog.create_block(parent)
    params = [blk.add_param(v.name.split("@")[0], v.shape, v.dtype) for v in ins]
    with prog.block_guard(blk):
        results, out_tree, n_out = n_results(body_fn(*tree_unflatten(in_tree, params)))
        blk.results = [as_var(v) for v in results]
    outs = emit(kind, ins + free_vars(blk), dict(attrs, body=blk, n_args=len(ins), n_out=n_out,
                                                 in_tree=in_tree, out_tree=out_tree,
                                                 fun=Rule(fun)))
    blk.owner = parent.ops[-1]
    return tree_unflatten(out_tree, outs[:n_out])


def _body_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    return [(v.shape, v.dtype) for v in attrs["body"].results]


def _lower_body(em: Any, op: Op) -> None:
    fname = em.block_function(op.attrs["body"], "custom")
    em.assign(op.outputs, f"{fname}({em.tuple(op.inputs[:op.attrs['n_args']])})", unpack=True)


def _own(block: Block, start: int, op: Op) -> None:
    """Make the ops a grad maker added from `start` on part of `op`'s grad section (the
    backward walk over a traced rule gave them the rule's ops as origins)."""
    for new in block.ops[start:]:
        new.origin = op


def _tangent_zero(v: Variable) -> Variable:
    return zeros(v.shape, v.dtype)


class _Custom:
    """What custom_vjp and custom_jvp share: wrapping `fun`, and calls that check the rule was
    given, then emit the op (in a trace) or run eagerly."""

    rule = define = ""

    def __init__(self, fun: Callable[..., Any], nondiff_argnums: Sequence[int] = ()):
        kind = type(self).__name__
        if nondiff_argnums:
            raise SrcgradError(f"{kind}: nondiff_argnums is not supported; close over "
                               "non-differentiable values instead", loc=user_location())
        functools.update_wrapper(self, fun)
        self.fun = fun

    def _defined(self) -> bool:
        raise NotImplementedError

    def __call__(self, *args: Any) -> Any:
        if not self._defined():
            raise SrcgradError(f"no {self.rule} defined for the {type(self).__name__} function "
                               f"{_name(self.fun)}: call {self.define} first",
                               loc=user_location())
        return dispatch.call(self._emit, args, {})


# ---------------------------------------------------------------- custom_vjp

class custom_vjp(_Custom):
    """jax.custom_vjp: `f.defvjp(fwd, bwd)` gives `f` the gradient rule `bwd`.

    `fwd(*args) -> (out, residuals)` and `bwd(residuals, cotangent_of_out) -> tuple` (one
    cotangent per argument, None for zero) are written in srcgrad ops.
    """

    rule, define = "VJP", ".defvjp(fwd, bwd)"
    fwd: Callable[..., Any] | None = None
    bwd: Callable[..., Any] | None = None

    def defvjp(self, fwd: Callable[..., Any], bwd: Callable[..., Any]) -> None:
        self.fwd, self.bwd = fwd, bwd

    def _defined(self) -> bool:
        return self.fwd is not None

    def _emit(self, *args: Any) -> Any:
        attrs = {"fwd": Rule(self.fwd), "bwd": Rule(self.bwd)}

        def split(res: Any) -> tuple[list[Any], Any, int]:
            if not isinstance(res, (tuple, list)) or len(res) != 2:
                raise SrcgradError(f"custom_vjp: fwd {_name(self.fwd)} must return a pair "
                                   "(output, residuals)", loc=user_location())
            out, out_tree = tree_flatten(res[0])
            resid, attrs["res_tree"] = tree_flatten(res[1])
            return out + resid, out_tree, len(out)
        return _call("custom_vjp", self.fun, self.fwd, args, attrs, split)


def _custom_vjp_grad(op: Op, gs: list, need: list) -> list:
    """`bwd` on the residuals and the outputs' cotangents. An op whose `bwd` is already in
    the program (this is grad of grad) is differentiated through `fwd`'s own ops instead,
    as jax's outer transformation sees `fwd` as ordinary code."""
    _refuse_closure(op, need)
    a = op.attrs
    n, k = a["n_args"], a["n_out"]
    if a.get("differentiated"):
        grads = _through_fwd(op, gs, need)
    else:
        a["differentiated"] = True
        grads = _bwd(op, gs[:k])
    return [g if nd and dtypes.is_inexact(v.dtype) else None
            for v, g, nd in zip(op.inputs, grads + [None] * (len(op.inputs) - n), need)]


def _bwd(op: Op, gs: list) -> list:
    """The user's `bwd`, traced on the op's residuals and the outputs' cotangents: one
    gradient (or None) per argument leaf."""
    a = op.attrs
    n, k = a["n_args"], a["n_out"]
    outs, res = op.outputs[:k], op.outputs[k:]
    cts = [g if g is not None else zeros(o.shape, o.dtype) for g, o in zip(gs, outs)]
    primals = tree_unflatten(a["in_tree"], op.inputs[:n])
    got = a["bwd"](tree_unflatten(a["res_tree"], list(res)), tree_unflatten(a["out_tree"], cts))
    if not isinstance(got, (tuple, list)) or len(got) != len(primals):
        raise GradientError(f"custom_vjp: bwd {a['bwd']!r} must return a tuple of "
                            f"{len(primals)} cotangents (one per argument), got "
                            f"{type(got).__name__}", op="custom_vjp", loc=op.loc)
    grads: list = []
    for p, g in zip(primals, got):
        p_leaves, p_tree = tree_flatten(p)
        g_leaves = [None] * len(p_leaves) if g is None else p_tree.flatten_up_to(g)
        for v, gl in zip(p_leaves, g_leaves):
            gl = None if gl is None else as_var(gl, like=v)
            if gl is not None and gl.shape != v.shape:
                raise GradientError(f"custom_vjp: bwd {a['bwd']!r} returned a cotangent of "
                                    f"shape {gl.shape} for an argument of shape {v.shape}",
                                    op="custom_vjp", loc=op.loc)
            grads.append(gl)
    return grads


def _through_fwd(op: Op, gs: list, need: list) -> list:
    """The vjp of `fwd`'s own ops (outputs and residuals), fwd traced again into the grad
    block."""
    a = op.attrs
    n = a["n_args"]
    block = op.block.program.current_block()
    start = len(block.ops)
    copies = [as_var(v) for v in tree_flatten(tuple(a["fwd"](*tree_unflatten(
        a["in_tree"], op.inputs[:n]))))[0]]
    seeds = [(c, g) for c, g in zip(copies, gs) if g is not None and not is_zero(g)]
    wrt = list(dict.fromkeys(v for v, nd in zip(op.inputs[:n], need) if nd))
    got = backward_segment(block, start, seeds, wrt) if seeds else {}
    _own(block, start, op)
    return [got.get(v) for v in op.inputs[:n]]


@jvp_rule("custom_vjp")
def _jvp_custom_vjp(op: Op, ts: list, tangents: Any) -> list:
    a = op.attrs
    res = a["fwd"](*tree_unflatten(a["in_tree"], op.inputs[:a["n_args"]]))
    return retraced(op, [as_var(v) for v in tree_flatten(tuple(res))[0]], tangents)


# ---------------------------------------------------------------- custom_jvp

class custom_jvp(_Custom):
    """jax.custom_jvp: `f.defjvp(jvp)` gives `f` the forward rule
    `jvp(primals, tangents) -> (primal_out, tangent_out)`, written in srcgrad ops and
    linear in the tangents; reverse mode transposes it."""

    rule, define = "JVP", ".defjvp(jvp)"
    jvp: Callable[..., Any] | None = None

    def defjvp(self, jvp: Callable[..., Any]) -> Callable[..., Any]:
        self.jvp = jvp
        return jvp

    def _defined(self) -> bool:
        return self.jvp is not None

    def _emit(self, *args: Any) -> Any:
        def split(out: Any) -> tuple[list[Any], Any, int]:
            leaves, tree = tree_flatten(out)
            return leaves, tree, len(leaves)
        return _call("custom_jvp", self.fun, self.fun, args, {"jvp": Rule(self.jvp)}, split)


def _apply_rule(op: Op, tangents: list[Variable]) -> list[Variable]:
    """The user's jvp rule at the op's inputs: its tangent outputs, one per output."""
    a = op.attrs
    n = a["n_args"]
    primals = tree_unflatten(a["in_tree"], op.inputs[:n])
    got = a["jvp"](primals, tree_unflatten(a["in_tree"], tangents))
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        raise GradientError(f"custom_jvp: the rule {a['jvp']!r} must return a pair "
                            "(primal_out, tangent_out)", op="custom_jvp", loc=op.loc)
    leaves, tree = tree_flatten(got[1], is_leaf=lambda x: x is None)  # None: a zero tangent
    if tree != a["out_tree"]:
        raise GradientError(f"custom_jvp: the rule {a['jvp']!r} returned tangents of structure "
                            f"{tree}, the function's output is {a['out_tree']}",
                            op="custom_jvp", loc=op.loc)
    outs = []
    for o, t in zip(op.outputs, leaves):
        t = zeros(o.shape, o.dtype) if t is None else as_var(t, like=o)
        if t.shape != o.shape:
            raise GradientError(f"custom_jvp: the rule {a['jvp']!r} returned a tangent of "
                                f"shape {t.shape} for an output of shape {o.shape}",
                                op="custom_jvp", loc=op.loc)
        outs.append(t)
    return outs


@jvp_rule("custom_jvp")
def _jvp_custom_jvp(op: Op, ts: list, tangents: Any) -> list:
    n = op.attrs["n_args"]
    _refuse_closure(op, [False] * n + [t is not None for t in ts[n:]])
    return _apply_rule(op, [t if t is not None else _tangent_zero(v)
                            for v, t in zip(op.inputs[:n], ts)])


def _custom_jvp_grad(op: Op, gs: list, need: list) -> list:
    """The transpose of the rule: differentiate its tangent outputs w.r.t. placeholder
    tangents (zeros it never reads for their values: the rule is linear in them)."""
    _refuse_closure(op, need)
    n = op.attrs["n_args"]
    block = op.block.program.current_block()
    start = len(block.ops)
    placeholders = [_tangent_zero(v) for v in op.inputs[:n]]
    t_out = _apply_rule(op, placeholders)
    seeds = [(t, g) for t, g, o in zip(t_out, gs, op.outputs)
             if g is not None and dtypes.is_inexact(o.dtype)]
    wrt = [p for p, v, nd in zip(placeholders, op.inputs, need)
           if nd and dtypes.is_inexact(v.dtype)]
    got = backward_segment(block, start, seeds, wrt)
    grads = [got.get(p) if nd else None for p, nd in zip(placeholders, need)]
    block.ops[start:] = live_ops(block.ops[start:], [g for g in grads if g is not None])
    _own(block, start, op)
    return grads + [None] * (len(op.inputs) - n)


register("custom_vjp", _body_rule, None, _custom_vjp_grad, lower_stmt=_lower_body)
register("custom_jvp", _body_rule, None, _custom_jvp_grad, lower_stmt=_lower_body)

__all__ = ["custom_vjp", "custom_jvp"]
