"""`sg.jax_op(fn)`: any JAX function as one srcgrad op, differentiated by JAX's own rules.

    solve = sg.jax_op(lambda y0, args: diffrax.diffeqsolve(...).ys)   # JAX code, any rules
    sg.grad(lambda p: sg.sum(solve(y0, p) ** 2))(params)

The op's forward runs `jax.vjp(fn, ...)` and returns, after the function's outputs, the
residuals of its pullback (the leaves of the `vjp` function, whose structure is found once by
`jax.eval_shape`), so the gradient op replays JAX's pullback on them without running the
forward again (a loop gradient records them as it records any op output). The gradient op
and the forward-mode rule (`jax.jvp`) are jax ops themselves, so every order nests.
Arguments are pytrees of arrays; integer and bool arguments take no gradient. A function
JAX cannot differentiate (`pure_callback`, a `while_loop` under reverse mode) still runs
forward; its gradient is an error that quotes JAX's. A function with effects (an
`io_callback`, `jax.debug.callback`) is a `jax_effect` op, which no pass removes, hoists,
merges or recomputes: it runs on every call, its result used or not, as under `jax.jit`.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ..base import dtypes
from ..core.builder import as_var, emit
from ..core import dispatch
from ..base.errors import GradientError, SrcgradError, user_location
from ..ir.program import Op, Variable
from ..ops.creation import zeros
from ..ops.grad_helpers import is_known_zero
from ..core.registry import OutType, register
from ..ir.analysis import producer

tree_flatten, tree_unflatten = jax.tree_util.tree_flatten, jax.tree_util.tree_unflatten
Avals = tuple[tuple[tuple[int, ...], np.dtype], ...]


class JaxFn:
    """A flat JAX function `fn(*leaves) -> tuple of leaves` on fixed input shapes and dtypes:
    its outputs, its pullback's residuals and the functions derived from it (pullback replay,
    full vjp, jvp), each made once."""

    def __init__(
        self, fn: Callable[..., tuple], name: str, avals: Avals, fixed: frozenset[int] = frozenset()
    ):
        self.fn, self.name, self.avals = fn, name, avals
        # One jitted forward: eval_shape and every run share its trace, so the residuals'
        # structure found at trace time is the one each run returns (concrete and traced
        # inputs would otherwise linearize differently).
        self._forward = jax.jit(self._forward_impl)
        self.diff = tuple(
            i for i, (_, dt) in enumerate(avals) if dtypes.is_inexact(dt) and i not in fixed
        )
        self.res_tree: Any = None
        self.no_vjp: str | None = None
        specs = [jax.ShapeDtypeStruct(s, d) for s, d in avals]
        traced = jax.make_jaxpr(fn)(*specs)
        outs = traced.out_avals
        #: JAX effects (an io_callback, jax.debug.callback): the op is never removed,
        #: hoisted, merged or recomputed, as JAX keeps such an equation whose result is unused.
        self.effects = bool(traced.effects)
        self.out_avals: Avals = tuple((tuple(o.shape), np.dtype(o.dtype)) for o in outs)
        self.res_avals: Avals = ()
        if self.diff:
            try:
                both = jax.eval_shape(self.forward, *specs)
            except Exception as e:  # JAX has no derivative here: forward only
                self.no_vjp = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            else:
                self.res_avals = tuple(
                    (tuple(o.shape), np.dtype(o.dtype)) for o in both[len(outs) :]
                )
        self._derived: dict[str, JaxFn] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return self.name

    @property
    def n_out(self) -> int:
        return len(self.out_avals)

    def _pullback(self, xs: Sequence[Any]) -> tuple[tuple, Any]:
        """(outputs, vjp function) of fn in the differentiable arguments at `xs`."""

        def in_diff(*d: Any) -> tuple:
            full = list(xs)
            for i, v in zip(self.diff, d):
                full[i] = v
            return tuple(self.fn(*full))

        return jax.vjp(in_diff, *[xs[i] for i in self.diff])

    def forward(self, *xs: Any) -> tuple:
        """The outputs, then the pullback's residuals."""
        return self._forward(*[jnp.asarray(x, dt) for x, (_, dt) in zip(xs, self.avals)])

    def _forward_impl(self, *xs: Any) -> tuple:
        if not self.diff or self.no_vjp is not None:
            return tuple(self.fn(*xs))
        outs, pullback = self._pullback(xs)
        res, tree = tree_flatten(pullback)
        self.res_tree = tree
        return tuple(outs) + tuple(res)

    def cotangents(self, cts: Sequence[Any]) -> tuple:
        """Float cotangents for the inexact outputs, float0 zeros for the others."""
        it = iter(cts)
        return tuple(
            next(it) if dtypes.is_inexact(dt) else np.zeros(s, jax.dtypes.float0)
            for s, dt in self.out_avals
        )

    def derived(self, kind: str) -> JaxFn:
        """`replay` (residuals, cts) -> grads, `vjp` (xs, cts of outputs and residuals) ->
        grads, or `jvp` (xs, tangents of the differentiable xs) -> tangents of every
        inexact output and residual: as jax ops of their own (each differentiable again)."""
        with self._lock:
            made = self._derived.get(kind)
            if made is None:
                made = self._derived[kind] = self._make(kind)
            return made

    def _make(self, kind: str) -> JaxFn:
        n, nr = len(self.avals), len(self.res_avals)
        floats_out = [a for a in self.out_avals if dtypes.is_inexact(a[1])]
        diff_avals = [self.avals[i] for i in self.diff]
        if kind == "replay":

            def replay(*a: Any) -> tuple:
                return tuple(tree_unflatten(self.res_tree, list(a[:nr]))(self.cotangents(a[nr:])))

            return JaxFn(replay, f"vjp[{self.name}]", self.res_avals + tuple(floats_out))
        both = self.out_avals + self.res_avals
        floats_both = [a for a in both if dtypes.is_inexact(a[1])]
        if kind == "vjp":

            def full_vjp(*a: Any) -> tuple:
                xs, cts = a[:n], iter(a[n:])
                _, pull = jax.vjp(
                    lambda *d: self.forward(*_merge(xs, self.diff, d)), *[xs[i] for i in self.diff]
                )
                return tuple(
                    pull(
                        tuple(
                            next(cts) if dtypes.is_inexact(dt) else np.zeros(s, jax.dtypes.float0)
                            for s, dt in both
                        )
                    )
                )

            return JaxFn(full_vjp, f"vjp[{self.name}]", self.avals + tuple(floats_both))

        def tangents(*a: Any) -> tuple:
            xs, ts = a[:n], a[n:]
            _, out_t = jax.jvp(
                lambda *d: self.forward(*_merge(xs, self.diff, d)),
                tuple(xs[i] for i in self.diff),
                tuple(ts),
            )
            return tuple(t for t, (_, dt) in zip(out_t, both) if dtypes.is_inexact(dt))

        return JaxFn(tangents, f"jvp[{self.name}]", self.avals + tuple(diff_avals))


def _merge(xs: Sequence[Any], at: Sequence[int], vals: Sequence[Any]) -> list:
    full = list(xs)
    for i, v in zip(at, vals):
        full[i] = v
    return full


@functools.lru_cache(maxsize=1024)
def _spec(fn: Callable[..., tuple], name: str, avals: Avals, fixed: frozenset[int]) -> JaxFn:
    return JaxFn(fn, name, avals, fixed)


def apply(spec: JaxFn, inputs: Sequence[Variable]) -> list[Variable]:
    """Emit the `jax_op` of `spec` on `inputs`: its outputs (the residuals follow them in the
    op's outputs, not here)."""
    outs = emit("jax_effect" if spec.effects else "jax_op", list(inputs), {"fn": spec})
    return outs[: spec.n_out]


def call_flat(fn: Callable[..., tuple], name: str, inputs: Sequence[Variable]) -> list[Variable]:
    """The outputs of the flat JAX function `fn` on `inputs`, as one jax op (its JaxFn is
    made once per function and input signature). Inputs that cannot carry a gradient (made
    by `stop_gradient`, constants) are not differentiated by JAX either: some rules (lineax's
    solve state) require their tangents to be symbolic zeros, as they are under jax.grad."""
    avals = tuple((v.shape, v.dtype) for v in inputs)
    seen: dict[Variable, bool] = {}
    fixed = frozenset(i for i, v in enumerate(inputs) if _constant(v, seen))
    return apply(_spec(fn, name, avals, fixed), inputs)


def _constant(v: Variable, seen: dict[Variable, bool]) -> bool:
    """True if `v` depends on no input of the program (or only through stop_gradient): JAX's
    tangent of it would be a symbolic zero (equinox's custom rules assert that of their
    non-differentiable arguments)."""
    stack = [v]
    while stack:
        u = stack[-1]
        if u in seen:
            stack.pop()
            continue
        src = producer(u)
        if src is None:
            seen[u] = u.kind == "capture"
        elif src.type in ("stop_gradient", "constant") or not src.inputs:
            seen[u] = True
        else:
            todo = [w for w in src.inputs if w not in seen]
            if todo:
                stack.extend(todo)
                continue
            seen[u] = all(seen[w] for w in src.inputs)
        stack.pop()
    return seen[v]


def jax_op(fn: Callable[..., Any], *, name: str | None = None) -> Callable[..., Any]:
    """`fn`, a JAX function of pytrees of arrays, as one srcgrad op with JAX's derivatives.

    Inside a srcgrad trace a call appends one `jax_op` op (its outputs' shapes and dtypes from
    `jax.eval_shape`); on arrays it runs eagerly. The reverse rule replays `jax.vjp`'s
    pullback on residuals the forward kept, the forward rule is `jax.jvp`; both are jax ops
    again, so higher orders nest. Close over static (non-array) values.
    """
    label = name or getattr(fn, "__name__", type(fn).__name__)
    flats: dict[Any, Callable[..., tuple]] = {}

    def flat_for(in_tree: Any) -> tuple[Callable[..., tuple], list]:
        """One flat function per input structure (cached: its JaxFn is then reused)."""
        hit = flats.get(in_tree)
        if hit is None:
            box: list = []

            def flat(*leaves: Any) -> tuple:
                out_leaves, out_tree = tree_flatten(fn(*tree_unflatten(in_tree, list(leaves))))
                if not box:
                    box.append(out_tree)
                return tuple(out_leaves)

            hit = flats[in_tree] = (flat, box)
        return hit

    def traced(*args: Any) -> Any:
        leaves, in_tree = tree_flatten(args)
        ins = [as_var(v) for v in leaves]
        flat, box = flat_for(in_tree)
        try:
            outs = call_flat(flat, label, ins)
        except GradientError:
            raise
        except Exception as e:
            if isinstance(e, SrcgradError):
                raise
            raise SrcgradError(
                f"jax_op {label}: JAX cannot evaluate it on "
                f"{', '.join(v.type_str() for v in ins)}: {type(e).__name__}: {e}",
                op="jax_op",
                loc=user_location(),
            ) from e
        return tree_unflatten(box[0], outs)

    @functools.wraps(fn)
    def call(*args: Any) -> Any:
        return dispatch.call(traced, args, {})

    return call


# ---------------------------------------------------------------- the registry row


def _infer(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    spec: JaxFn = attrs["fn"]
    got = tuple((v.shape, v.dtype) for v in inputs)
    if got != spec.avals:
        raise SrcgradError(f"jax_op {spec.name}: made for {spec.avals}, called on {got}")
    return [(s, d) for s, d in spec.out_avals + spec.res_avals]


def _lower(em: Any, op: Op) -> None:
    spec: JaxFn = op.attrs["fn"]
    em.consts.append(spec.forward)
    call = f"_consts[{len(em.consts) - 1}]({', '.join(em.name(v) for v in op.inputs)})"
    if op.outputs:
        em.assign(op.outputs, call, unpack=True)
    else:  # an effect with no result (jax.debug.callback)
        em.line(call)


def _refuse(op: Op, spec: JaxFn, why: str | None = None) -> GradientError:
    return GradientError(
        f"JAX cannot differentiate {spec.name} ({why or spec.no_vjp}); it is "
        "on the differentiated path",
        op="jax_op",
        loc=op.loc,
    )


def _derived(op: Op, kind: str, inputs: list[Variable]) -> list[Variable]:
    """`apply` of the op's derived function `kind`; JAX's refusal (found when it is traced:
    a while loop's pullback, say) as a GradientError at the op."""
    spec: JaxFn = op.attrs["fn"]
    try:
        return apply(spec.derived(kind), inputs)
    except SrcgradError:
        raise
    except Exception as e:
        text = str(e).splitlines()[0] if str(e) else ""
        raise _refuse(op, spec, f"{type(e).__name__}: {text}") from e


def _grad(op: Op, gs: list, need: list) -> list:
    spec: JaxFn = op.attrs["fn"]
    k = spec.n_out
    live = [
        g is not None and not is_known_zero(g) and dtypes.is_inexact(o.dtype)
        for g, o in zip(gs, op.outputs)
    ]
    if not any(need[i] for i in spec.diff) or not any(live):
        return [None] * len(op.inputs)  # no cotangent reaches it (JAX's symbolic zero)
    if spec.no_vjp is not None:
        raise _refuse(op, spec)
    outs, res = op.outputs[:k], op.outputs[k:]

    def ct(g: Variable | None, o: Variable) -> Variable:
        return g if g is not None else zeros(o.shape, o.dtype)

    if not any(live[k:]):  # first order: JAX's pullback on the kept residuals
        cts = [ct(g, o) for g, o in zip(gs[:k], outs) if dtypes.is_inexact(o.dtype)]
        got = _derived(op, "replay", list(res) + cts)
    else:  # the residuals are differentiated too (grad of grad): vjp of forward, recomputed
        cts = [ct(g, o) for g, o in zip(gs, op.outputs) if dtypes.is_inexact(o.dtype)]
        got = _derived(op, "vjp", list(op.inputs) + cts)
    grads: list = [None] * len(op.inputs)
    for i, g in zip(spec.diff, got):
        grads[i] = g if need[i] else None
    return grads


def _jvp(op: Op, ts: list, tangents: Any) -> list:
    spec: JaxFn = op.attrs["fn"]
    if not any(ts[i] is not None for i in spec.diff):
        return [None] * len(op.outputs)
    tin = [
        ts[i] if ts[i] is not None else zeros(op.inputs[i].shape, op.inputs[i].dtype)
        for i in spec.diff
    ]
    got = iter(_derived(op, "jvp", list(op.inputs) + tin))
    return [next(got) if dtypes.is_inexact(o.dtype) else None for o in op.outputs]


register("jax_op", _infer, None, _grad, lower_stmt=_lower, jvp=_jvp)
#: A jax op whose function has effects (analysis.EFFECTS).
register("jax_effect", _infer, None, _grad, lower_stmt=_lower, jvp=_jvp, effect=True)

__all__ = ["jax_op", "call_flat", "JaxFn"]
