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

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import jax

from ..base import conversion, dtypes
from ..core.builder import active_program, as_var, emit
from ..core import dispatch
from ..base.errors import GradientError, SrcgradError, user_location
from ..ir.program import Block, Op, Variable
from ..ops.creation import zeros
from ..core.registry import OutType, register
from ..ops.grad_helpers import is_known_zero
from ..transforms.forward import backward_segment, retraced
from ..ir.analysis import branch_blocks, free_vars, live_ops, walk_blocks
from ..base.traceback_filter import api_boundary

tree_flatten, tree_unflatten = jax.tree_util.tree_flatten, jax.tree_util.tree_unflatten


@dataclass(frozen=True)
class Rule:
    """A user function an op calls again (fwd, bwd or jvp), printed by its name."""

    fn: Callable[..., Any]

    def __call__(self, *args: Any) -> Any:
        return conversion.user_fn(self.fn)(*args)  # converted while its trace converts

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
                "pass it as an argument",
                op=op.type,
                loc=op.loc,
            )


def _call(
    kind: str,
    fun: Callable[..., Any],
    body_fn: Callable[..., Any],
    args: tuple,
    attrs: dict[str, Any],
    n_results: Callable[[Any], tuple[list[Any], Any, int]],
) -> Any:
    """Emit a `kind` op whose body is `body_fn(*args)`; returns the user-visible outputs."""
    prog = active_program(kind)
    parent = prog.current_block()
    leaves, in_tree = tree_flatten(args)
    ins = [as_var(v) for v in leaves]
    blk = prog.create_block(parent)
    params = [blk.add_param(v.name.split("@")[0], v.shape, v.dtype) for v in ins]
    with prog.block_guard(blk):
        body = conversion.user_fn(body_fn)
        results, out_tree, n_out = n_results(body(*tree_unflatten(in_tree, params)))
        blk.results = [as_var(v) for v in results]
    outs = emit(
        kind,
        ins + free_vars(blk),
        dict(
            attrs,
            body=blk,
            n_args=len(ins),
            n_out=n_out,
            in_tree=in_tree,
            out_tree=out_tree,
            fun=Rule(fun),
        ),
    )
    blk.owner = parent.ops[-1]
    return tree_unflatten(out_tree, outs[:n_out])


def _output_types(fun: Callable[..., Any], args: tuple) -> tuple[Any, list[str]]:
    """The pytree structure and the leaf types (`float32[3]`) of `fun(*args)`, traced into a
    scratch block of the current program that is dropped afterwards."""
    prog = active_program("custom_vjp")
    n_blocks, n_checks, n_caps = len(prog.blocks), len(prog.capacity_checks), len(prog.captures)
    leaves, in_tree = tree_flatten(args)
    blk = prog.create_block(prog.current_block())
    try:
        with prog.block_guard(blk):
            params = [blk.add_param("arg", v.shape, v.dtype) for v in map(as_var, leaves)]
            out, tree = tree_flatten(conversion.user_fn(fun)(*tree_unflatten(in_tree, params)))
            return tree, [as_var(v).type_str() for v in out]
    finally:  # forget the scratch block, and the arrays only it captured
        del prog.blocks[n_blocks:]
        del prog.capacity_checks[n_checks:]
        dropped = set(prog.captures[n_caps:])
        del prog.captures[n_caps:], prog.capture_values[n_caps:]
        for key in [k for k, (v, _) in prog.captured.items() if v in dropped]:
            del prog.captured[key]


def _paths(tree: Any) -> list[str]:
    """`[0]['w']`-style paths of the leaves of a pytree structure."""
    dummy = tree_unflatten(tree, [0] * tree.num_leaves)
    return [
        jax.tree_util.keystr(path) for path, _ in jax.tree_util.tree_flatten_with_path(dummy)[0]
    ]


def _body_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    return [(v.shape, v.dtype) for v in attrs["body"].results]


def _lower_body(em: Any, op: Op) -> None:
    fname = em.block_function(op.attrs["body"], "custom")
    em.assign(op.outputs, f"{fname}({em.tuple(op.inputs[: op.attrs['n_args']])})", unpack=True)


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
            raise SrcgradError(
                "nondiff_argnums is not supported; close over non-differentiable values instead",
                op=kind,
                loc=user_location(),
            )
        functools.update_wrapper(self, fun)
        self.fun = fun

    def _defined(self) -> bool:
        raise NotImplementedError

    def _emit(self, *args: Any) -> Any:
        raise NotImplementedError

    @api_boundary
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not self._defined():
            raise SrcgradError(
                f"no {self.rule} defined for the function {_name(self.fun)}: "
                f"call {self.define} first",
                op=type(self).__name__,
                loc=user_location(),
            )
        if kwargs or len(args) < self._required:
            args = self._positional(args, kwargs)
        return dispatch.call(self._emit, args, {})

    @functools.cached_property
    def _required(self) -> int:
        """How many arguments a positional call must give for the rules to see them all (a
        shorter call takes the defaults; -1 for a signature that cannot be read)."""
        try:
            params = inspect.signature(self.fun).parameters.values()
        except (TypeError, ValueError):
            return -1
        return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)

    def _positional(self, args: tuple, kwargs: dict[str, Any]) -> tuple:
        """Keyword arguments (and the defaults of the parameters left out) in their
        positions, as JAX's custom rules resolve them; the rules take positional arguments."""
        kind = type(self).__name__
        try:
            bound = inspect.signature(self.fun).bind(*args, **kwargs)
        except (TypeError, ValueError) as e:
            raise SrcgradError(
                f"{_name(self.fun)} called with {sorted(kwargs)}: {e}", op=kind, loc=user_location()
            ) from None
        bound.apply_defaults()
        if bound.kwargs:
            raise SrcgradError(
                f"{_name(self.fun)}: the keyword-only arguments "
                f"{sorted(bound.kwargs)} cannot be passed to a {kind} function "
                "(its rules take positional arguments; JAX refuses them too)",
                op=kind,
                loc=user_location(),
            )
        return bound.args


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

        want_tree, want = _output_types(self.fun, args)

        def split(res: Any) -> tuple[list[Any], Any, int]:
            if not isinstance(res, (tuple, list)) or len(res) != 2:
                raise SrcgradError(
                    f"fwd {_name(self.fwd)} must return a pair (output, residuals)",
                    op="custom_vjp",
                    loc=user_location(),
                )
            out, out_tree = tree_flatten(res[0])
            self._check_primal(out_tree, [as_var(v).type_str() for v in out], want_tree, want)
            resid, attrs["res_tree"] = tree_flatten(res[1])
            return out + resid, out_tree, len(out)

        return _call("custom_vjp", self.fun, self.fwd, args, attrs, split)

    def _check_primal(self, tree: Any, got: list[str], want_tree: Any, want: list[str]) -> None:
        """fwd's primal output must be what the function returns (jax's rule): it is the value
        every call of the function gives, differentiated or not."""
        fwd, fun = _name(self.fwd), _name(self.fun)
        if tree != want_tree:
            raise SrcgradError(
                f"fwd {fwd} returned a primal output of structure {tree}, the "
                f"function {fun} returns {want_tree}",
                op="custom_vjp",
                loc=user_location(),
            )
        for path, g, w in zip(_paths(tree), got, want):
            if g != w:
                raise SrcgradError(
                    f"fwd {fwd} returned a primal output{path} of {g}, the "
                    f"function {fun} returns {w} there; fwd must return the "
                    "function's output (shapes and dtypes equal)",
                    op="custom_vjp",
                    loc=user_location(),
                )


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
    return [
        g if nd and dtypes.is_inexact(v.dtype) else None
        for v, g, nd in zip(op.inputs, grads + [None] * (len(op.inputs) - n), need)
    ]


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
        raise GradientError(
            f"bwd {a['bwd']!r} must return a tuple of "
            f"{len(primals)} cotangents (one per argument), got "
            f"{type(got).__name__}",
            op="custom_vjp",
            loc=op.loc,
        )
    grads: list = []
    for i, (p, g) in enumerate(zip(primals, got)):
        p_leaves, p_tree = tree_flatten(p)
        g_leaves = [None] * len(p_leaves) if g is None else p_tree.flatten_up_to(g)  # type: ignore[attr-defined]  # no jaxlib stub
        for path, v, gl in zip(_paths(p_tree), p_leaves, g_leaves):
            if gl is not None and dtypes.is_inexact(v.dtype):  # jax ignores an int's (float0)
                gl = _typed_like(gl, v, f"bwd {a['bwd']!r}", f"argument {i}{path}", op)
            else:
                gl = None
            grads.append(gl)
    return grads


def _typed_like(g: Any, v: Variable, rule: str, what: str, op: Op) -> Variable:
    """A value a rule returned for `v` (a cotangent, a tangent, a primal output): of `v`'s
    shape and, for a float `v`, its dtype (casting would hide the rule's mistake). A Python
    number is weakly typed and takes `v`'s dtype."""
    weak = isinstance(g, (int, float)) and not isinstance(g, bool)
    gv = as_var(g, like=v) if weak else as_var(g)
    if gv.shape != v.shape or (dtypes.is_inexact(v.dtype) and not weak and gv.dtype != v.dtype):
        raise GradientError(
            f"{rule} returned {gv.type_str()} for {what}, which is "
            f"{v.type_str()}: it must have the same shape and dtype",
            op=op.type,
            loc=op.loc,
        )
    return gv


def _through_fwd(op: Op, gs: list, need: list) -> list:
    """The vjp of `fwd`'s own ops (outputs and residuals), fwd traced again into the grad
    block."""
    a = op.attrs
    n = a["n_args"]
    block = op.block.program.current_block()
    start = len(block.ops)
    copies = [
        as_var(v)
        for v in tree_flatten(tuple(a["fwd"](*tree_unflatten(a["in_tree"], op.inputs[:n]))))[0]
    ]
    seeds = [(c, g) for c, g in zip(copies, gs) if g is not None and not is_known_zero(g)]
    wrt = list(dict.fromkeys(v for v, nd in zip(op.inputs[:n], need) if nd))
    got = backward_segment(block, start, seeds, wrt) if seeds else {}
    _own(block, start, op)
    return [got.get(v) for v in op.inputs[:n]]


def _jvp_custom_vjp(op: Op, ts: list, tangents: Any) -> list:
    a = op.attrs
    res = a["fwd"](*tree_unflatten(a["in_tree"], op.inputs[: a["n_args"]]))
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
        raise GradientError(
            f"the rule {a['jvp']!r} must return a pair (primal_out, tangent_out)",
            op="custom_jvp",
            loc=op.loc,
        )
    rule = f"the rule {a['jvp']!r}"
    for part, what in ((got[0], "primal outputs"), (got[1], "tangents")):
        tree = tree_flatten(part, is_leaf=lambda x: x is None)[1]  # None: a zero tangent
        if tree != a["out_tree"]:
            raise GradientError(
                f"{rule} returned {what} of structure {tree}, the function's "
                f"output is {a['out_tree']}",
                op="custom_jvp",
                loc=op.loc,
            )
    paths = _paths(a["out_tree"])
    for path, o, p in zip(paths, op.outputs, tree_flatten(got[0])[0]):
        _typed_like(p, o, rule, f"the primal output{path}", op)
    outs = []
    for path, o, t in zip(paths, op.outputs, tree_flatten(got[1], is_leaf=lambda x: x is None)[0]):
        outs.append(
            zeros(o.shape, o.dtype)
            if t is None
            else _typed_like(t, o, rule, f"the tangent of output{path}", op)
        )
    return outs


def _jvp_custom_jvp(op: Op, ts: list, tangents: Any) -> list:
    n = op.attrs["n_args"]
    _refuse_closure(op, [False] * n + [t is not None for t in ts[n:]])
    return _apply_rule(
        op, [t if t is not None else _tangent_zero(v) for v, t in zip(op.inputs[:n], ts)]
    )


def _custom_jvp_grad(op: Op, gs: list, need: list) -> list:
    """The transpose of the rule: differentiate its tangent outputs w.r.t. placeholder
    tangents (zeros it never reads for their values: the rule is linear in them)."""
    _refuse_closure(op, need)
    n = op.attrs["n_args"]
    block = op.block.program.current_block()
    start = len(block.ops)
    placeholders = [_tangent_zero(v) for v in op.inputs[:n]]
    t_out = _apply_rule(op, placeholders)
    rule_ops = block.ops[start:]
    tangential = _tangential(rule_ops, placeholders)
    traced_rule = {id(o) for o in rule_ops}
    seeds = [
        (t, g)
        for t, g, o in zip(t_out, gs, op.outputs)
        if g is not None and dtypes.is_inexact(o.dtype)
    ]
    wrt = [
        p for p, v, nd in zip(placeholders, op.inputs, need) if nd and dtypes.is_inexact(v.dtype)
    ]
    got = backward_segment(block, start, seeds, wrt)
    grads = [got.get(p) if nd else None for p, nd in zip(placeholders, need)]
    block.ops[start:] = live_ops(block.ops[start:], [g for g in grads if g is not None])
    _require_linear(op, [o for o in block.ops[start:] if id(o) not in traced_rule], tangential)
    _own(block, start, op)
    return grads + [None] * (len(op.inputs) - n)


def _reads(op: Op) -> list[Variable]:
    """What `op` reads: its inputs and what its blocks read from outside them."""
    return list(op.inputs) + [
        v for sub in op.sub_blocks() for b in walk_blocks(sub) for v in free_vars(b)
    ]


def _tangential(ops: Sequence[Op], tangents: Iterable[Variable]) -> set[Variable]:
    """The values of `ops` (a traced jvp rule) that depend on the `tangents`: every output of
    an op that reads one, but a `cond`'s outputs one by one (a converted `if` returns a flag
    beside the tangent, and the flag does not depend on it)."""
    out = set(tangents)
    for o in ops:
        if o.type == "cond" and o.inputs[0] not in out:
            out.update(_cond_tangential(o, out))
        elif any(v in out for v in _reads(o)):
            out.update(o.outputs)
    return out


def _cond_tangential(op: Op, tangential: set[Variable]) -> list[Variable]:
    """The outputs of a `cond` (its index not tangential) that some branch computes from
    `tangential` values: its operands (the branch's parameters) or what it captures."""
    n = op.attrs["n_operands"]
    hit = [False] * len(op.outputs)
    for blk in branch_blocks(op):
        inner = tangential | {
            p for p, v in zip(blk.params, op.inputs[1 : 1 + n]) if v in tangential
        }
        inner = _tangential(blk.ops, inner)
        hit = [h or r in inner for h, r in zip(hit, blk.results)]
    return [o for o, h in zip(op.outputs, hit) if h]


def _require_linear(op: Op, ops: Sequence[Op], tangential: set[Variable]) -> None:
    """JAX's check, by structure: the transpose of a rule linear in the tangents (its
    backward `ops`) reads no value that depends on them (the gradient of t * t is 2 t g, of
    sin(t) cos(t) g). A rule that is not is a GradientError naming the rule's op (JAX cannot
    transpose it either); a `fill_zeros_like` reads only a shape."""
    for o in ops:
        if o.type == "fill_zeros_like" or not any(v in tangential for v in _reads(o)):
            continue
        culprit = o.origin if o.origin is not None else o
        where = f" ({culprit.type} at {culprit.loc})" if culprit.loc is not None else ""
        raise GradientError(
            f"the rule {op.attrs['jvp']!r} is not linear in the tangents: its "
            f"tangent output depends on them through a nonlinear op{where}; "
            "reverse mode transposes the rule, which needs it linear (JAX "
            "refuses such a rule too)",
            op="custom_jvp",
            loc=op.loc,
        )


register(
    "custom_vjp", _body_rule, None, _custom_vjp_grad, lower_stmt=_lower_body, jvp=_jvp_custom_vjp
)
register(
    "custom_jvp", _body_rule, None, _custom_jvp_grad, lower_stmt=_lower_body, jvp=_jvp_custom_jvp
)

__all__ = ["custom_vjp", "custom_jvp"]
