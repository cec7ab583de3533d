"""The public API: trace → append_backward → lower → jax.jit, cached per input signature."""
from __future__ import annotations

import contextlib
import functools
import gc
import inspect
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

import jax
import numpy as np

from . import dtypes
from .builder import active_program, as_var
from .errors import GradientError, SrcgradError, TraceError, user_location
from .ir import Program, Variable, current_program, program_guard
from .ops.creation import zeros
from .ops.elementwise import assign

from .transforms import control_grad  # noqa: F401  (registers the control-flow grad makers)
from .transforms.backward import append_backward, gradients
from .transforms.control_grad import INITIAL_CAPACITY
from .transforms.lower_jax import Lowered, live_ops, lower_program

#: The tracers of a jax.jit / make_jaxpr trace. Should a JAX release stop exposing them, no
#: tracer matches and every traced call goes through a nested jit: correct, a little slower
#: to compile.
_JaxprTracer: Any = getattr(jax.interpreters.partial_eval, "DynamicJaxprTracer", type(None))

_IDENT = re.compile(r"[^0-9A-Za-z_]+")


# ---------------------------------------------------------------- Fluid-style program API

def _input(name: str, shape: Sequence[int], dtype: Any, kind: str) -> Variable:
    prog = active_program(f"sg.{kind}")
    block = prog.global_block()
    if prog.current_block() is not block:
        raise TraceError(f"sg.{kind}({name!r}) must be declared in the global block",
                         loc=user_location())
    if any(v.name == name for v in prog.inputs):
        raise TraceError(f"the program already has an input named {name!r}", loc=user_location())
    var = block.new_var(name, tuple(int(s) for s in shape), dtypes.canonical(dtype), kind=kind,
                        stop_gradient=(kind == "data"), exact_name=True)
    prog.inputs.append(var)
    return var


def data(name: str, shape: Sequence[int], dtype: Any = "float32") -> Variable:
    """A fed input that takes no gradient (Fluid's `data`, stop_gradient=True)."""
    return _input(name, shape, dtype, "data")


def parameter(name: str, shape: Sequence[int], dtype: Any = "float32") -> Variable:
    """A trainable input: `append_backward` differentiates with respect to it by default."""
    return _input(name, shape, dtype, "param")


def compile(program: Program, feed: Sequence[str | Variable], fetch: Sequence[Variable], *,
            jit: bool = True) -> Callable[..., list[Any]]:
    """Compile a Program: the result takes the `feed` arrays and returns the `fetch` values."""
    by_name = {v.name: v for v in program.inputs}
    feeds = []
    for f in feed:
        v = by_name.get(f) if isinstance(f, str) else f
        if v is None or not any(v is p for p in program.inputs):
            raise SrcgradError(f"feed {f!r} is not an input of the program", loc=user_location())
        feeds.append(v)
    for v in fetch:
        if not isinstance(v, Variable) or v.block is not program.global_block():
            raise SrcgradError(f"fetch {v!r} is not a value of the program's global block",
                               loc=user_location())
    wanted = list(fetch) + [v for _, v, _ in program.capacity_checks]
    read = {v for op in live_ops(program.global_block().ops, wanted) for v in op.inputs} | set(wanted)
    missing = [v.name for v in program.inputs if v in read and v not in set(feeds)]
    if missing:
        raise SrcgradError(f"the fetched values need the inputs {missing}, which are not in feed",
                           loc=user_location())
    lowered = lower_program(program, feeds, list(fetch), [v for _, v, _ in program.capacity_checks])
    fn = jax.jit(lowered.fn) if jit else lowered.eager_fn()
    checks = program.capacity_checks

    def run(*arrays: Any) -> list[Any]:
        if len(arrays) != len(feeds):
            raise SrcgradError(f"the program is fed {[v.name for v in feeds]}, got {len(arrays)} "
                               "arrays", loc=user_location())
        for v, a in zip(feeds, arrays):
            if tuple(np.shape(a)) != v.shape:
                raise SrcgradError(f"feed {v.name} is declared {v.type_str()}, got an array of "
                                   f"shape {tuple(np.shape(a))}", loc=user_location())
        outs, counts = fn(*arrays)
        _raise_on_overflow(checks, counts, program.capacities)
        return list(outs)
    run.source = lowered.source  # type: ignore[attr-defined]
    return run


def _raise_on_overflow(checks: list, counts: Sequence[Any], caps: dict[int, int]) -> None:
    for (lid, _, op), c in zip(checks, counts):
        if int(c) > caps.get(lid, INITIAL_CAPACITY):
            raise SrcgradError(f"the loop ran {int(c)} iterations, more than the "
                               f"{caps.get(lid, INITIAL_CAPACITY)} its gradient recorded; "
                               "pass max_iters to sg.while_loop", op="while", loc=op.loc)


# ---------------------------------------------------------------- functional transforms

def _leaf_array(x: Any) -> Any:
    if isinstance(x, jax.core.Tracer) or isinstance(x, jax.Array):
        return x
    if isinstance(x, (bool, int, float, complex)):
        return np.asarray(x, dtypes.scalar_dtype(x, None))
    arr = np.asarray(x)
    return arr.astype(dtypes.canonical(arr.dtype), copy=False)


def _arg_names(fun: Callable[..., Any], args: tuple, tree_paths: list) -> list[str]:
    try:
        params = list(inspect.signature(fun).parameters)
    except (TypeError, ValueError):
        params = []
    names = []
    for path in tree_paths:
        first, rest = path[0], path[1:]
        pos = getattr(first, "idx", 0)
        base = params[pos] if pos < len(params) and params[pos] not in ("args", "kwargs") else f"arg{pos}"
        parts = [base] + [_IDENT.sub("", str(getattr(k, "key", getattr(k, "idx", getattr(k, "name", k)))))
                          for k in rest]
        names.append(_IDENT.sub("_", "_".join(p for p in parts if p)) or "x")
    return names


def _tracing(args: Any) -> bool:
    return any(isinstance(l, Variable) for l in jax.tree_util.tree_leaves(args))


def _as_vars(tree: Any) -> Any:
    return jax.tree_util.tree_map(as_var, tree)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while a program is traced and lowered.

    A transform allocates many long-lived objects (ops, variables, source lines), so the
    collector's passes over them cost time that grows with the program: up to half of a
    50,000-op transform, and the reason its time per op grew with N.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@dataclass
class _Entry:
    lowered: Lowered
    call: Callable[..., Any]
    out_tree: Any
    checks: list
    caps: dict[int, int] = field(default_factory=dict)


class Transformed:
    """A traced function: called on Variables it records inline; on arrays it compiles and runs."""

    def __init__(self, inline: Callable[..., Any], fun: Callable[..., Any], name: str, jit: bool = True):
        self._inline = inline
        self._fun = fun
        self._name = name
        self._jit = jit
        self._cache: dict[Any, _Entry] = {}
        self.compilations = 0
        functools.update_wrapper(self, fun, updated=())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs:
            args = self._positional(args, kwargs)
        if _tracing(args) or current_program() is not None:
            return self._inline(*_as_vars(args))
        return self._run(args)

    def _positional(self, args: tuple, kwargs: dict[str, Any]) -> tuple:
        """Keyword arguments bound to their positions in the function's signature."""
        try:
            bound = inspect.signature(self._fun).bind(*args, **kwargs)
        except (TypeError, ValueError) as e:
            raise TypeError(f"{self._name}: cannot bind the keyword arguments "
                            f"{sorted(kwargs)}: {e}") from None
        if bound.kwargs:
            raise TypeError(f"{self._name}: keyword-only arguments {sorted(bound.kwargs)} are not "
                            "supported; pass them positionally")
        return bound.args

    @_gc_paused()
    def trace(self, *args: Any, capacities: dict[int, int] | None = None) -> tuple[Program, list, Any, Any]:
        """The Program for these example arguments, its inputs, output leaves and output tree."""
        leaves, tree = jax.tree_util.tree_flatten(args)
        paths = [p for p, _ in jax.tree_util.tree_flatten_with_path(args)[0]]
        names = _arg_names(self._fun, args, paths)
        prog = Program()
        prog.capacities = dict(capacities or {})
        with program_guard(prog):
            ins = [_input(n if not any(v.name == n for v in prog.inputs) else f"{n}_{i}",
                          np.shape(l), _leaf_dtype(l), "data") for i, (n, l) in enumerate(zip(names, leaves))]
            for v in ins:
                v.stop_gradient = False
            out = self._inline(*jax.tree_util.tree_unflatten(tree, ins))
            out_leaves, out_tree = jax.tree_util.tree_flatten(out)
            out_vars = [as_var(v) for v in out_leaves]
        return prog, ins, out_vars, out_tree

    @_gc_paused()
    def lower(self, *args: Any, capacities: dict[int, int] | None = None) -> tuple[Lowered, Any, list]:
        prog, ins, outs, out_tree = self.trace(*args, capacities=capacities)
        for lid, v, op in prog.capacity_checks:
            if v.block is not prog.global_block():
                raise SrcgradError("a while loop without max_iters is differentiated inside "
                                   "another loop's body; pass max_iters", op="while", loc=op.loc)
        name = getattr(self._fun, "__name__", "fn")
        lowered = lower_program(prog, ins, outs, [v for _, v, _ in prog.capacity_checks],
                                name=name if self._name in ("jit", "trace") else f"{name}_{self._name}")
        checks = prog.capacity_checks
        prog.dispose()
        return lowered, out_tree, checks

    def _build(self, args: tuple, caps: dict[int, int]) -> _Entry:
        lowered, out_tree, checks = self.lower(*args, capacities=caps)
        self.compilations += 1
        call = jax.jit(lowered.fn) if self._jit else _eager(lowered.eager_fn())
        return _Entry(lowered, call, out_tree, checks, dict(caps))

    def _run(self, args: tuple) -> Any:
        leaves, tree = jax.tree_util.tree_flatten(args)
        arrays = [_leaf_array(l) for l in leaves]
        key = (tree, tuple((np.shape(a), _leaf_dtype(a)) for a in arrays), dtypes.x64())
        entry = self._cache.get(key)
        if entry is None:
            entry = self._cache[key] = self._build(jax.tree_util.tree_unflatten(tree, arrays), {})
        if entry.checks and any(isinstance(a, jax.core.Tracer) for a in arrays):
            op = entry.checks[0][2]
            raise SrcgradError(
                f"{self._name}: this while loop has a data-dependent trip count and no max_iters, "
                "so its gradient needs concrete inputs to size its records; inside jax.jit (or "
                "vmap) pass max_iters=N to sg.while_loop (or sg.fori_loop)", op="while", loc=op.loc)
        if self._jit and _in_jit_trace(arrays):
            # The ops join the caller's jaxpr, as jax.grad's would: a nested jit would be one
            # more call for XLA to compile and inline. Under an eager vmap or jax.grad the
            # nested jit stays, so that the gradient still runs as one compiled program.
            outs, _ = entry.lowered.fn(*arrays)
            return jax.tree_util.tree_unflatten(entry.out_tree, list(outs))
        while True:
            outs, counts = entry.call(*arrays)
            grow = {}
            for (lid, _, _), c in zip(entry.checks, counts):
                cap = entry.caps.get(lid, INITIAL_CAPACITY)
                if int(c) > cap:
                    grow[lid] = max(grow.get(lid, 0), 1 << (int(c) - 1).bit_length())
            if not grow:
                return jax.tree_util.tree_unflatten(entry.out_tree, list(outs))
            caps = {**entry.caps, **grow}
            entry = self._cache[key] = self._build(jax.tree_util.tree_unflatten(tree, arrays), caps)


def _in_jit_trace(arrays: Sequence[Any]) -> bool:
    """True when the traced arrays belong to a jax.jit (make_jaxpr) trace itself, not to a
    vmap or grad transformation running on top of one or eagerly."""
    tracers = [a for a in arrays if isinstance(a, jax.core.Tracer)]
    return bool(tracers) and all(isinstance(t, _JaxprTracer) for t in tracers)


def _leaf_dtype(x: Any) -> np.dtype:
    if isinstance(x, (bool, int, float, complex)):
        return dtypes.scalar_dtype(x, None)
    return dtypes.canonical(np.dtype(x.dtype) if hasattr(x, "dtype") else np.asarray(x).dtype)


def _eager(fn: Callable[..., Any]) -> Callable[..., Any]:
    def run(*arrays: Any) -> Any:
        return fn(*[jax.numpy.asarray(a) for a in arrays])
    return run


def _argnums(argnums: int | Sequence[int]) -> tuple[tuple[int, ...], bool]:
    if isinstance(argnums, int):
        return (argnums,), True
    return tuple(argnums), False


def _diff_copies(args: tuple, argnums: tuple[int, ...], who: str) -> tuple[tuple, list[Variable]]:
    """Fresh copies of the differentiated arguments, so each is its own gradient target."""
    args = list(args)
    wrt: list[Variable] = []
    for i in argnums:
        if i >= len(args):
            raise GradientError(f"{who}: argnums {i} but only {len(args)} arguments were given",
                                loc=user_location())
        leaves, tree = jax.tree_util.tree_flatten(args[i])
        copies = []
        for v in leaves:
            if not dtypes.is_inexact(v.dtype):
                raise GradientError(f"{who} requires floating-point inputs, but argument {i} "
                                    f"has {v.type_str()} ({v.name})", loc=user_location())
            copies.append(assign(v, base=v.name.split("@")[0]))
        wrt += copies
        args[i] = jax.tree_util.tree_unflatten(tree, copies)
    return tuple(args), wrt


def _value_and_grad_inline(fun: Callable[..., Any], argnums: int | Sequence[int], has_aux: bool,
                           who: str) -> Callable[..., Any]:
    nums, single = _argnums(argnums)

    def inline(*args: Any) -> Any:
        args, wrt = _diff_copies(args, nums, who)
        out = fun(*args)
        aux = None
        if has_aux:
            if not isinstance(out, (tuple, list)) or len(out) != 2:
                raise GradientError(f"{who}(has_aux=True) needs the function to return a pair "
                                    "(output, aux)", loc=user_location())
            out, aux = out
        out = as_var(out)
        if out.shape != ():
            raise GradientError(f"{who} needs a scalar output, got {out.type_str()}; use sg.vjp "
                                "for non-scalar outputs", loc=user_location())
        grads = gradients([out], wrt)
        grads = [g if g is not None else zeros(x.shape, x.dtype) for g, x in zip(grads, wrt)]
        it = iter(grads)
        per_arg = [jax.tree_util.tree_map(lambda _: next(it), args[i]) for i in nums]
        g = per_arg[0] if single else tuple(per_arg)
        return ((out, aux) if has_aux else out), g
    return inline


def grad(fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False, *,
         jit: bool = True) -> Transformed:
    """The gradient of a scalar function (jax.grad's contract), by source transformation."""
    vg = _value_and_grad_inline(fun, argnums, has_aux, "grad")

    def inline(*args: Any) -> Any:
        value, g = vg(*args)
        return (g, value[1]) if has_aux else g
    return Transformed(inline, fun, "grad", jit)


def value_and_grad(fun: Callable[..., Any], argnums: int | Sequence[int] = 0,
                   has_aux: bool = False, *, jit: bool = True) -> Transformed:
    """The value and gradient of a scalar function (jax.value_and_grad's contract)."""
    return Transformed(_value_and_grad_inline(fun, argnums, has_aux, "value_and_grad"), fun,
                       "value_and_grad", jit)


def _vjp_inline(fun: Callable[..., Any], primals: tuple) -> tuple[Any, Callable[[Any], tuple]]:
    primals, wrt = _diff_copies(tuple(primals), tuple(range(len(primals))), "vjp")
    out = fun(*primals)
    out_leaves, out_tree = jax.tree_util.tree_flatten(out)
    out_vars = [as_var(v) for v in out_leaves]

    def vjp_fn(ct: Any) -> tuple:
        ct_leaves, ct_tree = jax.tree_util.tree_flatten(ct)
        if ct_tree != out_tree:
            raise GradientError(f"vjp: cotangent structure {ct_tree} differs from the output's "
                                f"{out_tree}", loc=user_location())
        targets = [(o, c) for o, c in zip(out_vars, ct_leaves) if dtypes.is_inexact(o.dtype)]
        grads = gradients([o for o, _ in targets], wrt, [c for _, c in targets]) if targets else [None] * len(wrt)
        grads = [g if g is not None else zeros(x.shape, x.dtype) for g, x in zip(grads, wrt)]
        it = iter(grads)
        return tuple(jax.tree_util.tree_map(lambda _: next(it), p) for p in primals)
    return jax.tree_util.tree_unflatten(out_tree, out_vars), vjp_fn


def vjp(fun: Callable[..., Any], *primals: Any) -> tuple[Any, Callable[[Any], tuple]]:
    """(fun(*primals), vjp_fn): vjp_fn maps an output cotangent to the inputs' cotangents."""
    if _tracing(primals) or current_program() is not None:
        return _vjp_inline(fun, _as_vars(primals))
    out = jit(fun)(*primals)

    def pullback(primals: tuple, ct: Any) -> tuple:
        _, fn = _vjp_inline(fun, primals)
        return fn(ct)
    compiled = Transformed(pullback, fun, "vjp")
    return out, lambda ct: compiled(tuple(primals), ct)


def jit(fun: Callable[..., Any], *, jit: bool = True) -> Transformed:
    """Trace `fun` once per input signature, lower it to JAX source and compile it."""
    return Transformed(fun, fun, "jit", jit)


def _as_transformed(fun: Callable[..., Any]) -> Transformed:
    return fun if isinstance(fun, Transformed) else Transformed(fun, fun, "trace")


def trace(fun: Callable[..., Any], *example_args: Any) -> Program:
    """The IR of `fun` on arguments shaped like `example_args` (grad ops included for sg.grad)."""
    return _as_transformed(fun).trace(*example_args)[0]


def source(fun: Callable[..., Any], *example_args: Any) -> str:
    """The Python source srcgrad emits for `fun` on these example arguments."""
    return _as_transformed(fun).lower(*example_args)[0].source


__all__ = ["data", "parameter", "compile", "grad", "value_and_grad", "vjp", "jit", "trace",
           "source", "append_backward", "gradients", "Transformed"]
