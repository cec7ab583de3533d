"""Eager calls: an op called on concrete arrays outside any trace computes with JAX.

The call is traced once per (function, static arguments, array shapes and dtypes) into a
one-call Program, lowered by srcgrad's own pipeline and jitted, as jax.numpy's own functions
are; later calls run it on the arrays directly (JAX tracers of an outer jax.jit, grad or vmap
included: the call joins their computation). Array leaves (NumPy, JAX and NumPy scalars) are the program's inputs;
everything else (Python numbers, shapes, axes, dtypes) is static and part of the key.
An `sg.Tensor` among the arguments hands the call to imperative mode (srcgrad/autograd.py).
"""
from __future__ import annotations

from typing import Any, Callable

import jax
import numpy as np

from . import dtypes
from .builder import as_var
from .ir import Program, program_guard
from .tensors import Tensor

_CACHE: dict[Any, tuple[Callable[..., Any], Any]] = {}
_CACHE_LIMIT = 4096


def _is_array(x: Any) -> bool:
    return isinstance(x, (np.ndarray, np.generic, jax.Array, jax.core.Tracer))


def _static_key(x: Any) -> Any:
    try:
        hash(x)
    except TypeError:
        return (type(x), repr(x))
    return (type(x), x)


def _is_tensor(x: Any) -> bool:
    return isinstance(x, Tensor)


def call_eagerly(fn: Callable[..., Any], args: tuple, kwargs: dict[str, Any]) -> Any:
    """`fn(*args, **kwargs)` on concrete values, as a JAX computation."""
    leaves, tree = jax.tree_util.tree_flatten((args, kwargs), is_leaf=_is_tensor)
    for leaf in leaves:
        if isinstance(leaf, Tensor):
            from .autograd import apply
            return apply(fn, leaves, tree)
    return call_leaves(fn, leaves, tree)


def call_leaves(fn: Callable[..., Any], leaves: list, tree: Any) -> Any:
    """`call_eagerly` on the flattened arguments (arrays and static values, no Tensors)."""
    arrays, statics, avals = [], [], []
    for leaf in leaves:
        if _is_array(leaf):
            arrays.append(leaf)
            avals.append((leaf.shape, leaf.dtype))
        else:
            statics.append(_static_key(leaf))
    where = tuple(_is_array(leaf) for leaf in leaves)  # sg.subtract(1.0, a) vs (a, 1.0)
    key = (fn, tree, where, tuple(statics), tuple(avals), dtypes.x64())
    entry = _CACHE.get(key)
    if entry is None:
        if len(_CACHE) >= _CACHE_LIMIT:
            _CACHE.clear()
        entry = _CACHE[key] = _lower(fn, leaves, tree, avals)
    run, out_tree = entry
    outs, _ = run(*arrays)
    return jax.tree_util.tree_unflatten(out_tree, list(outs))


def _lower(fn: Callable[..., Any], leaves: list, tree: Any, avals: list) -> tuple[Callable[..., Any], Any]:
    """Trace `fn` on fresh inputs in place of the array leaves and lower the one-call Program."""
    from .transforms.lower_jax import lower_program
    prog = Program()
    block = prog.global_block()
    prog.inputs.extend(block.new_var(f"x{i}", tuple(shape), dtypes.canonical(np.dtype(dt)),
                                     kind="data", stop_gradient=True, exact_name=True)
                       for i, (shape, dt) in enumerate(avals))
    ins = iter(prog.inputs)
    with program_guard(prog):
        traced = [next(ins) if _is_array(leaf) else leaf for leaf in leaves]
        args, kwargs = jax.tree_util.tree_unflatten(tree, traced)
        out = fn(*args, **kwargs)
        out_leaves, out_tree = jax.tree_util.tree_flatten(out)
        outs = [as_var(v) for v in out_leaves]
    name = getattr(fn, "__name__", "op")
    lowered = lower_program(prog, list(prog.inputs), outs, [], name=f"eager_{name}")
    prog.dispose()
    return jax.jit(lowered.fn), out_tree
