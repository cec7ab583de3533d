"""XLA's compile options for programs whose compile counts for more than their speed, and a
`jax.jit` that compiles with them where JAX and XLA take them.

Layer L4 (transforms): see docs/design.md.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

import jax

#: XLA's compile options for programs whose compile counts for more than their speed: a
#: single op's (imperative mode's one-op programs and vjp kernels) and an optimizer's
#: elementwise update. XLA's CPU compiler then uses its older fusion emitters: an
#: arithmetic program compiles in about 60% of the time here (an `add` of two 97x52 arrays:
#: 16-22 against 27-37 ms; SGD's update of a 512-wide MLP: 55 against 80 ms; a `tanh` in
#: the same time) and runs as fast, but a program of many fused ops runs 5-12% slower (an
#: MLP's whole backward: its steady step went from 1.11-1.14x to 1.22x jax.jit's; an LSTM
#: cell's chunk), so srcgrad's other programs keep XLA's defaults.
QUICK_OPTIONS: dict[str, Any] = {"xla_cpu_use_fusion_emitters": False}
#: Whether XLA took QUICK_OPTIONS so far (False once it refused one: an older jaxlib).
_QUICK_TAKEN = [True]
_JIT_TAKES_OPTIONS = "compiler_options" in inspect.signature(jax.jit).parameters


def quick_options() -> dict[str, Any] | None:
    """QUICK_OPTIONS, or None where JAX's jit takes no compile options, XLA refused them, or
    the default backend is not the CPU (they are options of XLA's CPU compiler)."""
    return QUICK_OPTIONS if _QUICK_TAKEN[0] and _JIT_TAKES_OPTIONS and _on_cpu() else None


@functools.cache
def _on_cpu() -> bool:
    return jax.default_backend() == "cpu"


def nested_options(e: Exception) -> bool:
    """Whether JAX refused a call of a wrapper with compile options because it was made
    inside a trace: JAX takes compile options at the top level only."""
    return isinstance(e, ValueError) and "compiler_options" in str(e) and "top-level" in str(e)


def refused_options(e: Exception) -> bool:
    """Whether XLA refused a compile for an option it does not know (then none is given
    from now on)."""
    if "No such compile option" not in str(e):
        return False
    _QUICK_TAKEN[0] = False
    return True


class QuickJit:
    """`jax.jit(fn)` compiled with `quick_options()`; inside a trace, or once XLA refused
    them, the plain `jax.jit(fn)` (for an optimizer's update, called once a step)."""

    def __init__(self, fn: Callable[..., Any]):
        self.plain = jax.jit(fn)
        options = quick_options()
        self.quick = jax.jit(fn, compiler_options=options) if options else self.plain

    def __call__(self, *args: Any) -> Any:
        try:
            return self.quick(*args)
        except Exception as e:
            if nested_options(e):
                return self.plain(*args)
            if not refused_options(e):
                raise
            self.quick = self.plain
            return self.plain(*args)


__all__ = ["QUICK_OPTIONS", "QuickJit", "nested_options", "quick_options", "refused_options"]
