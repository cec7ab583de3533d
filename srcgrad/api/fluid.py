"""The Fluid-style program API: `sg.data`, `sg.parameter` and `sg.compile` of a Program built
under `program_guard` (the seed's `append_backward` / `gradients` act on it).

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ..core.builder import input_var
from ..base.errors import SrcgradError, user_location
from ..ir.program import Program, Variable
from ..transforms.control_grad import INITIAL_CAPACITY
from ..transforms.lower_jax import live_ops, lower_program


def data(name: str, shape: Sequence[int], dtype: Any = "float32") -> Variable:
    """A fed input that takes no gradient (Fluid's `data`, stop_gradient=True)."""
    return input_var(name, shape, dtype, "data")


def parameter(name: str, shape: Sequence[int], dtype: Any = "float32") -> Variable:
    """A trainable input: `append_backward` differentiates with respect to it by default."""
    return input_var(name, shape, dtype, "param")


def _global_values(program: Program) -> dict[str, Variable]:
    """The program's inputs and the outputs of its global block's ops, by name."""
    found = {v.name: v for v in program.inputs}
    for op in program.global_block().ops:
        found.update((v.name, v) for v in op.outputs)
    return found


def compile(
    program: Program,
    feed: Sequence[str | Variable],
    fetch: Sequence[str | Variable],
    *,
    jit: bool = True,
) -> Callable[..., list[Any]]:
    """Compile a Program: the result takes the `feed` arrays and returns the `fetch` values.

    `feed` and `fetch` name values by Variable or by name (`"x"`, `"w@GRAD"`).
    """
    by_name = {v.name: v for v in program.inputs}
    feeds = []
    for f in feed:
        v = by_name.get(f) if isinstance(f, str) else f
        if v is None or not any(v is p for p in program.inputs):
            raise SrcgradError(f"feed {f!r} is not an input of the program", loc=user_location())
        feeds.append(v)
    values = _global_values(program) if any(isinstance(f, str) for f in fetch) else {}
    fetch = [values.get(f, f) if isinstance(f, str) else f for f in fetch]
    for v in fetch:
        if not isinstance(v, Variable) or v.block is not program.global_block():
            raise SrcgradError(
                f"fetch {v!r} is not a value of the program's global block", loc=user_location()
            )
    wanted = list(fetch) + [v for _, v, _ in program.capacity_checks]
    read = {v for op in live_ops(program.global_block().ops, wanted) for v in op.inputs} | set(
        wanted
    )
    missing = [v.name for v in program.inputs if v in read and v not in set(feeds)]
    if missing:
        raise SrcgradError(
            f"the fetched values need the inputs {missing}, which are not in feed",
            loc=user_location(),
        )
    lowered = lower_program(
        program, feeds + program.captures, list(fetch), [v for _, v, _ in program.capacity_checks]
    )
    fn = lowered.jitted() if jit else lowered.eager_fn()
    checks = program.capacity_checks

    def run(*arrays: Any) -> list[Any]:
        if len(arrays) != len(feeds):
            raise SrcgradError(
                f"the program is fed {[v.name for v in feeds]}, got {len(arrays)} arrays",
                loc=user_location(),
            )
        for v, a in zip(feeds, arrays):
            if tuple(np.shape(a)) != v.shape:
                raise SrcgradError(
                    f"feed {v.name} is declared {v.type_str()}, got an array of "
                    f"shape {tuple(np.shape(a))}",
                    loc=user_location(),
                )
        outs, counts = fn(*arrays, *program.capture_values)
        _raise_on_overflow(checks, counts, program.capacities)
        return list(outs)

    run.source = lowered.source  # type: ignore[attr-defined]
    return run


def _raise_on_overflow(checks: list, counts: Sequence[Any], caps: dict[int, int]) -> None:
    for (lid, _, op), c in zip(checks, counts):
        if int(c) > caps.get(lid, INITIAL_CAPACITY):
            raise SrcgradError(
                f"the loop ran {int(c)} iterations, more than the "
                f"{caps.get(lid, INITIAL_CAPACITY)} its gradient recorded; "
                "pass max_iters to sg.while_loop",
                op="while",
                loc=op.loc,
            )


__all__ = ["data", "parameter", "compile"]
