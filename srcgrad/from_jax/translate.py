"""`sg.from_jax(fn)`: existing JAX code as srcgrad ops, through its jaxpr.

    solve = sg.from_jax(jax_solver)               # a function written with jnp and lax
    sg.grad(lambda t: sg.sum(solve(t)))(theta)    # reverse mode through its lax.while_loop

Called inside a srcgrad trace, the function runs `jax.make_jaxpr(fn)` on the shapes and
dtypes of its (pytree) arguments and translates every equation into srcgrad ops in the block
being built; the translated ops carry the user's line that called it. Called on arrays it
compiles and runs the translation (as `sg.jit`). `RULES` is the translation table: one row
per JAX primitive, `rule(cx, args, params) -> value or list of values`. A primitive without a
row, and (with `custom_rules=True`) a `custom_jvp` / `custom_vjp` function, becomes one
`sg.jax_op`: JAX runs it and differentiates it with its own rules.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable, Sequence

import jax
import numpy as np

try:
    from jax.extend.core import ClosedJaxpr, DropVar, Literal
except ImportError:  # older JAX (before jax.extend.core had them)
    from jax.core import ClosedJaxpr, DropVar, Literal  # type: ignore[attr-defined,no-redef]
try:  # JAX's dead-code elimination, with its rules for scan carries and cond outputs
    from jax._src.interpreters.partial_eval import dce_jaxpr
except ImportError:  # pragma: no cover - a JAX without it: translate the jaxpr as traced
    dce_jaxpr = None

from ..base import dtypes
from ..compiled.transformed import Transformed
from ..core.builder import as_var, constant
from ..base.cache import bindings, same_bindings
from ..base.errors import SrcgradError, user_location
from .flow_rules import FLOW
from .random_rules import KEYED, RANDOM
from .array_rules import BASIC, Rule
from ..ir.program import Variable, current_program
from .jax_op import call_flat
from ..ops import elementwise
from ..ops.remat import positive_int
from ..ops.blocks import check_max_iters

RULES: dict[str, Rule] = {**BASIC, **FLOW, **RANDOM}
#: Rows that take typed PRNG keys (as their data); any other equation on keys is a jax_op.
_ON_KEYS = frozenset(
    {
        "random_wrap",
        "random_unwrap",
        "random_seed",
        "random_bits",
        "random_split",
        "random_fold_in",
        "jit",
        "pjit",
        "closed_call",
        "call",
        "while",
        "cond",
        "scan",
        "remat2",
    }
)


def from_jax(
    fn: Callable[..., Any],
    max_iters: int | None = None,
    *,
    checkpoints: int | None = None,
    custom_rules: bool = True,
) -> Transformed:
    """`fn`, a function over JAX arrays, as a function srcgrad traces (and differentiates).

    `max_iters` bounds every `lax.while_loop` in `fn` (as `sg.while_loop(max_iters=)`): give
    it when the gradient runs inside `jax.jit`, where srcgrad cannot size its loop records
    by running the loop first. `checkpoints=k` makes each while loop's gradient keep k
    snapshots and recompute the rest (as `sg.while_loop(checkpoints=)`). `custom_rules`
    (default) runs `jax.custom_jvp` / `jax.custom_vjp` functions as `sg.jax_op`s, so their
    rules give the gradient; False differentiates their primal bodies instead.
    """
    loc = user_location()
    bound = check_max_iters(max_iters, "from_jax", loc)
    if checkpoints is not None:
        checkpoints = positive_int(checkpoints, "checkpoints", loc)
    custom_rules = bool(custom_rules)

    def inline(*args: Any) -> Any:
        return translate(fn, args, bound, checkpoints, custom_rules)

    return Transformed(inline, fn, "from_jax", params=(bound, checkpoints, custom_rules))


def translate(
    fn: Callable[..., Any],
    args: tuple,
    max_iters: int | None = None,
    checkpoints: int | None = None,
    custom_rules: bool = True,
) -> Any:
    """Append the ops of `fn`'s jaxpr on `args` (pytrees of Variables) to the current block.

    The jaxpr is made afresh each time (JAX's own trace cache would keep the arrays a global
    held when first traced), and the program records what `fn` reads by name, so a compiled
    caller is traced again when one of those is rebound. A typed PRNG key travels as its
    uint32 data (`Program.key_data`): the JAX function is given the key.
    """
    raw, tree = jax.tree_util.tree_flatten(args)
    leaves, specs = [], []
    prog = current_program()
    for a in raw:
        leaves.append(as_var(a))
        impl = prog.key_data.get(leaves[-1]) if prog is not None else None
        spec = jax.ShapeDtypeStruct(leaves[-1].shape, leaves[-1].dtype)
        if impl is not None:
            spec = jax.eval_shape(lambda d, i=impl: jax.random.wrap_key_data(d, impl=i), spec)
        specs.append(spec)
    closed, out_shape = jax.make_jaxpr(lambda *a: fn(*a), return_shape=True)(
        *jax.tree_util.tree_unflatten(tree, specs)
    )
    closed = _pruned(closed)
    if prog is not None:
        prog.watched.append(_unchanged(fn))
    outs = _Translator(max_iters, checkpoints, custom_rules).call(closed, leaves)
    return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(out_shape), outs)


def _pruned(closed: ClosedJaxpr) -> ClosedJaxpr:
    """`closed` without its dead equations and dead scan carries (JAX's `dce_jaxpr`): a
    library's loop state that no output reads (diffrax's bounded loops, nested scans, carry
    some) would otherwise be carried, copied and differentiated."""
    if dce_jaxpr is None:
        return closed
    jaxpr, _ = dce_jaxpr(closed.jaxpr, [True] * len(closed.jaxpr.outvars), instantiate=True)
    return ClosedJaxpr(jaxpr, closed.consts)


class _Translator:
    """Evaluates jaxprs over srcgrad Variables, one RULES row per equation."""

    def __init__(
        self, max_iters: int | None, checkpoints: int | None = None, custom_rules: bool = True
    ):
        self.max_iters = max_iters
        self.checkpoints = checkpoints
        self.custom_rules = custom_rules
        self.eqn: Any = None
        self._enclosing: list[Any] = []  # the equations whose sub-jaxprs are being translated
        self._literals: dict[Variable, Any] = {}

    def literal_value(self, v: Variable) -> Any:
        """The Python value of `v` if it was a literal of the jaxpr, else None."""
        return self._literals.get(v)

    def _literal(self, lit: Any) -> Variable:
        value = np.asarray(lit.val, dtype=lit.aval.dtype)[()]
        v = constant(value)
        self._literals[v] = value
        return v

    def call(self, jaxpr: Any, args: Sequence[Variable]) -> list[Variable]:
        """The outputs of `jaxpr` (open or closed) applied to `args`."""
        consts: list[Variable] = []
        if isinstance(jaxpr, ClosedJaxpr):
            consts = [_const(c) for c in jaxpr.consts]
            jaxpr = jaxpr.jaxpr
        env: dict[Any, Variable] = dict(zip(jaxpr.constvars, consts))
        env.update(zip(jaxpr.invars, args))

        def read(v: Any) -> Variable:
            return self._literal(v) if isinstance(v, Literal) else env[v]

        for eqn in jaxpr.eqns:
            name = eqn.primitive.name
            self.eqn = eqn
            ins = [read(v) for v in eqn.invars]
            rule = RULES.get(name)
            avals = [v.aval for v in list(eqn.invars) + eqn.outvars]
            if rule is not None and name not in _ON_KEYS:
                # Rows see real values only, and key data (not keys) where a row is written
                # for it (KEYED: shapes of key arrays, whose data has the key's axes last).
                if any(_complex(av) for av in avals):
                    rule = None
                elif any(dtypes.key_impl(av) is not None for av in avals):
                    rule = KEYED.get(name)
            where = [eqn, *reversed(self._enclosing)]
            self._enclosing.append(eqn)
            try:
                out = self.fallback(ins) if rule is None else rule(self, ins, eqn.params)
            finally:
                self._enclosing.pop()
            outs = list(out) if eqn.primitive.multiple_results else [out]
            for var, val in zip(eqn.outvars, outs):
                if not isinstance(var, DropVar):
                    env[var] = _typed(val, var.aval, name, where)
        return [read(v) for v in jaxpr.outvars]

    def fallback(self, args: Sequence[Variable]) -> Any:
        """The current equation as one `sg.jax_op`: JAX evaluates and differentiates it (key
        values travel as their uint32 data)."""
        eqn = self.eqn
        prim, params = eqn.primitive, eqn.params
        in_keys = [dtypes.key_impl(v.aval) for v in eqn.invars]
        out_keys = [dtypes.key_impl(v.aval) for v in eqn.outvars]

        def bound(*xs: Any) -> tuple:
            xs = [
                x if k is None else jax.random.wrap_key_data(x, impl=k) for x, k in zip(xs, in_keys)
            ]
            got = prim.get_bind_params(params)
            subfuns, bind_params = got if isinstance(got, tuple) else ((), got)  # older JAX: a pair
            out = prim.bind(*subfuns, *xs, **bind_params)
            out = list(out) if prim.multiple_results else [out]
            return tuple(o if k is None else jax.random.key_data(o) for o, k in zip(out, out_keys))

        try:
            outs = call_flat(bound, prim.name, list(args))
        except SrcgradError:
            raise
        except Exception as e:
            raise _unsupported(
                prim.name,
                [eqn, *reversed(self._enclosing)],
                f"could not run as a jax_op ({type(e).__name__}: "
                f"{str(e).splitlines()[0] if str(e) else ''})",
            ) from e
        return outs if prim.multiple_results else outs[0]


# ---------------------------------------------------------------- values and errors


def _unchanged(fn: Callable[..., Any]) -> Callable[[], bool]:
    """A check that `fn` still reads the objects it reads now by name (held weakly: a
    program does not keep the function alive; a dead one is stale)."""
    now = bindings(fn)
    try:
        ref: Callable[[], Any] = weakref.ref(fn)
    except TypeError:  # a callable that cannot be held weakly
        ref = lambda: fn
    return lambda: (f := ref()) is not None and same_bindings(bindings(f), now)


def _complex(aval: Any) -> bool:
    """Complex values are JAX's alone: srcgrad's rows and gradients are for real values."""
    dt = getattr(aval, "dtype", None)
    return (
        dt is not None and dtypes.key_impl(aval) is None and np.issubdtype(dt, np.complexfloating)
    )


def _const(c: Any) -> Variable:
    """A closed-over array: a scalar is written into the program, an array is captured."""
    if dtypes.key_impl(c) is not None:
        c = jax.random.key_data(c)
    if np.ndim(c) == 0 and not isinstance(c, jax.core.Tracer):
        return constant(np.asarray(c)[()])
    return constant(c if isinstance(c, (jax.Array, np.ndarray)) else np.asarray(c))


def _typed(val: Any, aval: Any, prim: str, where: list[Any]) -> Variable:
    """`val` in the dtype of the jaxpr's variable; a shape that differs is a translation bug.
    A typed PRNG key is its uint32 key data."""
    v = as_var(val)
    impl = dtypes.key_impl(aval)
    shape = tuple(aval.shape) + (tuple(impl.key_shape) if impl is not None else ())
    want = np.dtype(np.uint32) if impl is not None else dtypes.canonical(aval.dtype)
    if v.dtype != want:
        v = elementwise.astype(v, want)
    if v.shape != shape:
        raise _unsupported(
            prim,
            where,
            f"was translated to shape {v.shape}, but JAX gives "
            f"{shape} (a srcgrad bug; please report it)",
        )
    return v


def _jax_line(where: list[Any]) -> str:
    """Where in the user's JAX function an equation came from: its own line, or (an equation
    inside a library's jitted function, such as jnp.fft.fft's) the enclosing call's."""
    try:
        from jax._src import source_info_util

        for eqn in where:
            line = source_info_util.summarize(eqn.source_info)
            if line:
                return line
    except Exception:  # a private JAX module: the message only loses a detail without it
        pass
    return "an unknown line"


def _unsupported(prim: str, where: list[Any], what: str) -> SrcgradError:
    """`where`: the equation, then the equations enclosing it, innermost first."""
    return SrcgradError(
        f"JAX primitive {prim!r} {what} (made at {_jax_line(where)}); "
        "docs/jax_frontend.md lists the supported primitives",
        op="from_jax",
        loc=user_location(),
    )


__all__ = ["from_jax", "translate", "RULES"]
