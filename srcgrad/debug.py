"""`sg.debug`: print values and stop inside traced code at run time, as `jax.debug`.

`sg.debug.print("x = {x}", x=x)` inside a function under `sg.jit`, `sg.grad`, a loop or a
branch body prints when the compiled program runs (each iteration of a loop), through
`jax.debug.print`; outside a trace (arrays, Tensors) it prints at once. The print is an
effectful op (srcgrad/ops/debug.py): passes never remove, hoist, merge or repeat it.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .core import dispatch
from .core.builder import as_var
from .ops import debug as _ops
from .imperative.tensor import Tensor


def _concrete(x: Any) -> Any:
    return jnp.asarray(np.asarray(x)) if isinstance(x, Tensor) else x


def print(fmt: str, *args: Any, **kwargs: Any) -> None:  # jax.debug's name
    """jax.debug.print(fmt, *args, **kwargs): `fmt` is formatted with `str.format` over the
    values when the program runs. Each argument is one array (a Python number or a list is
    taken as an array)."""
    if dispatch.tracing((args, kwargs)):
        _ops.emit_print(fmt, [as_var(a) for a in args], {k: as_var(v) for k, v in kwargs.items()})
        return
    args, kwargs = [_concrete(a) for a in args], {k: _concrete(v) for k, v in kwargs.items()}
    _ops.check_format(fmt, args, kwargs)
    jax.debug.print(fmt, *args, **kwargs)


def breakpoint() -> None:  # jax.debug's name
    """jax.debug.breakpoint(): stop in the debugger when the compiled program gets here (at
    once outside a trace)."""
    if dispatch.tracing(()):
        _ops.emit_breakpoint()
        return
    jax.debug.breakpoint()


__all__ = ["print", "breakpoint"]
