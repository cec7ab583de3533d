"""The functional API: `sg.grad`, `value_and_grad`, `vjp`, `jit`, `trace`, `source` (each a
`Transformed`, srcgrad/compiled/transformed.py; the Fluid-style program API is
srcgrad/api/fluid.py).

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Sequence

import jax
import numpy as np

from ..base import dtypes, conversion as hooks
from ..core.builder import active_program, as_var
from ..core.dispatch import tracing
from ..base.errors import GradientError, SrcgradError, user_location
from ..ir.program import Program, Variable
from ..ops.creation import zeros
from ..ops.grad_helpers import assign
from ..ops.linalg_functions import trace as linalg_trace
from ..base.traceback_filter import api_boundary
from ..compiled.arguments import arg_names, as_vars, key_type, leaf_dtype, static_positions
from ..compiled.transformed import Transformed
from ..transforms.backward import append_backward, gradients


def argnums_tuple(argnums: int | Sequence[int]) -> tuple[tuple[int, ...], bool]:
    if isinstance(argnums, int):
        return (argnums,), True
    return tuple(argnums), False


def _param_name(fun: Callable[..., Any], i: int) -> str:
    """The name of `fun`'s positional parameter `i` ("argument i" when it has none)."""
    try:
        params = [
            p
            for p in inspect.signature(fun).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        params = []
    return f"argument {i} ({params[i].name!r})" if i < len(params) else f"argument {i}"


def _diff_copies(
    args: tuple, argnums: tuple[int, ...], who: str, fun: Callable[..., Any] | None = None
) -> tuple[tuple, list[Variable]]:
    """Fresh copies of the differentiated arguments, so each is its own gradient target.

    Only real floating-point arguments are differentiable: an integer or complex one raises
    a GradientError naming the user's parameter (complex differentiation is not supported).
    """
    args = list(args)
    wrt: list[Variable] = []
    for i in argnums:
        if i >= len(args):
            raise GradientError(
                f"{who}: argnums {i} but only {len(args)} arguments were given", loc=user_location()
            )
        leaves, tree = jax.tree_util.tree_flatten(args[i])
        copies = []
        keys = active_program(who).key_data
        for v in leaves:
            if v in keys:
                name = _param_name(fun, i) if fun is not None else f"argument {i}"
                raise GradientError(
                    f"{who} requires floating-point inputs, but {name} is a "
                    f"PRNG key: {key_type(v, keys[v])} ({v.name}); keys take no "
                    "gradient: differentiate with respect to the other "
                    "arguments (argnums)",
                    loc=user_location(),
                )
            if not dtypes.is_float(v.dtype):
                what = {"c": "complex", "b": "bool"}.get(v.dtype.kind, "integer")
                hint = (
                    (
                        "; srcgrad differentiates real functions only: pass the real and "
                        "imaginary parts as separate arguments"
                    )
                    if what == "complex"
                    else ""
                )
                name = _param_name(fun, i) if fun is not None else f"argument {i}"
                raise GradientError(
                    f"{who} requires floating-point inputs, but {name} is "
                    f"{what}: {v.type_str()} ({v.name}){hint}",
                    loc=user_location(),
                )
            copies.append(assign(v, base=v.name.split("@")[0]))
        wrt += copies
        args[i] = jax.tree_util.tree_unflatten(tree, copies)
    return tuple(args), wrt


def _value_and_grad_inline(
    fun: Callable[..., Any], argnums: int | Sequence[int], has_aux: bool, who: str
) -> Callable[..., Any]:
    nums, single = argnums_tuple(argnums)

    def inline(*args: Any) -> Any:
        args, wrt = _diff_copies(args, nums, who, fun)
        out = hooks.user_fn(fun)(*args)
        aux = None
        if has_aux:
            if not isinstance(out, (tuple, list)) or len(out) != 2:
                raise GradientError(
                    f"{who}(has_aux=True) needs the function to return a pair (output, aux)",
                    loc=user_location(),
                )
            out, aux = out
        elif isinstance(out, (tuple, list, dict)):
            raise GradientError(
                f"{who} needs a scalar output, but the function returned a "
                f"{type(out).__name__} of {len(out)} values; if it returns "
                f"(loss, aux), pass has_aux=True to sg.{who}",
                loc=user_location(),
            )
        out = as_var(out)
        if out.shape != ():
            raise GradientError(
                f"{who} needs a scalar output, got {out.type_str()}; use sg.vjp "
                "for non-scalar outputs",
                loc=user_location(),
            )
        if not dtypes.is_float(out.dtype):
            raise GradientError(
                f"{who} needs a real floating-point output, got {out.type_str()}"
                + ("; srcgrad differentiates real functions only" if out.dtype.kind == "c" else ""),
                loc=user_location(),
            )
        grads = gradients([out], wrt)
        grads = [g if g is not None else zeros(x.shape, x.dtype) for g, x in zip(grads, wrt)]
        it = iter(grads)
        per_arg = [jax.tree_util.tree_map(lambda _: next(it), args[i]) for i in nums]
        g = per_arg[0] if single else tuple(per_arg)
        return ((out, aux) if has_aux else out), g

    return inline


@api_boundary
def grad(
    fun: Callable[..., Any],
    argnums: int | Sequence[int] = 0,
    has_aux: bool = False,
    *,
    static_argnums: int | Sequence[int] = (),
    jit: bool = True,
) -> Transformed:
    """The gradient of a scalar function (jax.grad's contract), by source transformation.

    Arguments at `static_argnums` are passed to `fun` as Python values (strings, flags, ints
    used as Python numbers); they must be hashable, and each value compiles its own program.
    """
    vg = _value_and_grad_inline(fun, argnums, has_aux, "grad")
    _check_static(argnums, static_argnums, "grad")

    def inline(*args: Any) -> Any:
        value, g = vg(*args)
        return (g, value[1]) if has_aux else g

    return Transformed(inline, fun, "grad", jit, (argnums_tuple(argnums), has_aux), static_argnums)


@api_boundary
def value_and_grad(
    fun: Callable[..., Any],
    argnums: int | Sequence[int] = 0,
    has_aux: bool = False,
    *,
    static_argnums: int | Sequence[int] = (),
    jit: bool = True,
) -> Transformed:
    """The value and gradient of a scalar function (jax.value_and_grad's contract)."""
    _check_static(argnums, static_argnums, "value_and_grad")
    return Transformed(
        _value_and_grad_inline(fun, argnums, has_aux, "value_and_grad"),
        fun,
        "value_and_grad",
        jit,
        (argnums_tuple(argnums), has_aux),
        static_argnums,
    )


def _check_static(
    argnums: int | Sequence[int], static_argnums: int | Sequence[int], who: str
) -> None:
    both = set(argnums_tuple(argnums)[0]) & set(static_positions(static_argnums, who))
    if both:
        raise SrcgradError(
            f"{who}: argument {sorted(both)[0]} is both differentiated (argnums) "
            "and static (static_argnums)",
            loc=user_location(),
        )


def _vjp_inline(fun: Callable[..., Any], primals: tuple) -> tuple[Any, Callable[[Any], tuple]]:
    primals, wrt = _diff_copies(tuple(primals), tuple(range(len(primals))), "vjp", fun)
    out = hooks.user_fn(fun)(*primals)
    out_leaves, out_tree = jax.tree_util.tree_flatten(out)
    out_vars = [as_var(v) for v in out_leaves]
    for o in out_vars:
        if o.dtype.kind == "c":
            raise GradientError(
                f"vjp: the output {o.name} is complex ({o.type_str()}); srcgrad "
                "differentiates real functions only",
                loc=user_location(),
            )

    def vjp_fn(ct: Any) -> tuple:
        ct_leaves, ct_tree = jax.tree_util.tree_flatten(ct)
        if ct_tree != out_tree:
            raise GradientError(
                f"vjp: cotangent structure {ct_tree} differs from the output's {out_tree}",
                loc=user_location(),
            )
        targets = [(o, c) for o, c in zip(out_vars, ct_leaves) if dtypes.is_inexact(o.dtype)]
        grads = (
            gradients([o for o, _ in targets], wrt, [c for _, c in targets])
            if targets
            else [None] * len(wrt)
        )
        grads = [g if g is not None else zeros(x.shape, x.dtype) for g, x in zip(grads, wrt)]
        it = iter(grads)
        return tuple(jax.tree_util.tree_map(lambda _: next(it), p) for p in primals)

    return jax.tree_util.tree_unflatten(out_tree, out_vars), vjp_fn


def _refuse_complex(fun: Callable[..., Any], primals: tuple) -> None:
    """A GradientError at `sg.vjp` time (not from the returned function) for a complex primal."""
    for i, p in enumerate(primals):
        if any(np.iscomplexobj(l) for l in jax.tree_util.tree_leaves(p)):
            raise GradientError(
                f"vjp requires floating-point inputs, but {_param_name(fun, i)}"
                " is complex; srcgrad differentiates real functions only",
                loc=user_location(),
            )


@api_boundary
def vjp(fun: Callable[..., Any], *primals: Any) -> tuple[Any, Callable[[Any], tuple]]:
    """(fun(*primals), vjp_fn): vjp_fn maps an output cotangent to the inputs' cotangents.

    Every primal must be floating point (an integer one has no cotangent to return here,
    where jax.vjp would give a float0 one): pass integers through a closure instead.
    """
    _check_vjp_primals(fun, primals)
    if tracing(primals):
        return _vjp_inline(fun, as_vars(primals))
    _refuse_complex(fun, primals)
    out = jit(fun)(*primals)
    if any(np.iscomplexobj(o) for o in jax.tree_util.tree_leaves(out)):
        raise GradientError(
            "vjp: the function's output is complex; srcgrad differentiates real functions only",
            loc=user_location(),
        )

    def pullback(primals: tuple, ct: Any) -> tuple:
        _, fn = _vjp_inline(fun, primals)
        return fn(ct)

    compiled = Transformed(pullback, fun, "vjp", params=(len(primals),))
    return out, lambda ct: compiled(tuple(primals), ct)


def _check_vjp_primals(fun: Callable[..., Any], primals: tuple) -> None:
    """A GradientError, at sg.vjp time, naming the first primal that is not floating point."""
    with_paths = jax.tree_util.tree_flatten_with_path(primals)[0]
    for (_, leaf), name in zip(with_paths, arg_names(fun, primals, [p for p, _ in with_paths])):
        if dtypes.key_impl(leaf) is not None:
            raise GradientError(
                f"vjp: the primal {name!r} is a PRNG key ({leaf.dtype}"
                f"{list(np.shape(leaf))}); vjp differentiates every primal, so "
                "each must be floating point (close over keys instead)",
                loc=user_location(),
            )
        dt = leaf.dtype if isinstance(leaf, Variable) else leaf_dtype(leaf)
        if not dtypes.is_inexact(dt):
            raise GradientError(
                f"vjp: the primal {name!r} is {np.dtype(dt).name}; vjp "
                "differentiates every primal, so each must be floating point "
                "(close over integer arguments instead)",
                loc=user_location(),
            )


@api_boundary
def jit(
    fun: Callable[..., Any], *, static_argnums: int | Sequence[int] = (), jit: bool = True
) -> Transformed:
    """Trace `fun` once per input signature (and static argument values), lower it to JAX
    source and compile it."""
    return Transformed(fun, fun, "jit", jit, static_argnums=static_argnums)


def _as_transformed(fun: Callable[..., Any]) -> Transformed:
    return fun if isinstance(fun, Transformed) else Transformed(fun, fun, "trace")


@api_boundary
def trace_program(fun: Callable[..., Any], *example_args: Any) -> Program:
    """The IR of `fun` on arguments shaped like `example_args` (grad ops included for sg.grad)."""
    return _as_transformed(fun).trace(*example_args)[0]


#: NumPy's matrix-trace parameters, which a traced function cannot take.
_TRACE_KEYWORDS = ("offset", "axis1", "axis2", "dtype", "out")


def trace(a: Any, *args: Any, **kwargs: Any) -> Any:
    """NumPy's name, two functions: `sg.trace(x, offset=0, axis1=0, axis2=1, dtype=None)` of
    an array is its matrix trace (`sg.linalg.trace`, as `np.trace` / `jnp.trace`);
    `sg.trace(fun, *example_args)` of a callable is `sg.trace_program`, the IR."""
    if not callable(a):
        return linalg_trace(a, *args, **kwargs)
    if kwargs:
        wrong = ", ".join(f"{k}=" for k in kwargs)
        hint = (
            " (the matrix trace's parameters: its first argument must be an array, not a function)"
            if set(kwargs) <= set(_TRACE_KEYWORDS)
            else ""
        )
        raise SrcgradError(
            f"sg.trace(fun, *example_args) traces the function "
            f"{getattr(a, '__name__', type(a).__name__)} and takes no keyword "
            f"arguments, got {wrong}{hint}; sg.trace_program(fun, *example_args) "
            "is the same tracer",
            loc=user_location(),
        )
    return trace_program(a, *args)


@api_boundary
def source(fun: Callable[..., Any], *example_args: Any) -> str:
    """The Python source srcgrad emits for `fun` on these example arguments."""
    return _as_transformed(fun).lower(*example_args)[0].source


__all__ = [
    "argnums_tuple",
    "grad",
    "value_and_grad",
    "vjp",
    "jit",
    "trace",
    "trace_program",
    "source",
    "append_backward",
    "gradients",
    "Transformed",
]
