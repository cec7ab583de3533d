"""srcgrad benchmarks: every workload side by side with its peer (`python -m benchmarks`).

from benchmarks import run, Settings
rows = run(["mlp"], quick=True, settings=Settings(reps=1, first_reps=1))
"""

from __future__ import annotations

from typing import Callable, Sequence

import jax

from . import checkpointed, cnn, fixed_point, gp, mlp, rnn, transformer
from .harness import Row, Settings, run_scaling, run_workload
from .workload import Workload


def _forward_mode(name: str) -> Callable[[bool], Workload]:
    """A workload of hessian.py, imported when built (`python -m benchmarks.hessian` runs
    that module as a script, which a package-level import would run twice)."""

    def build(quick: bool) -> Workload:
        from . import hessian

        return hessian.WORKLOADS[name](quick)

    return build


#: Workloads 1-5 (and 5b, "checkpointed"; 7, "gp"; "hessian" and "forward_loop") by name (each
#: module's `build(quick)` makes it); "transform" is workload 6.
WORKLOADS: dict[str, Callable[[bool], Workload]] = {
    "mlp": mlp.build,
    "cnn": cnn.build,
    "transformer": transformer.build,
    "rnn": rnn.build,
    "while": fixed_point.build,
    "checkpointed": checkpointed.build,
    "gp": gp.build,
    "hessian": _forward_mode("hessian"),
    "forward_loop": _forward_mode("forward_loop"),
}
NAMES = tuple(WORKLOADS) + ("transform",)

#: Transform sizes under --quick.
QUICK_SCALING = ((50, 200), (1, 1))


def run(
    names: Sequence[str] | None = None,
    quick: bool = False,
    settings: Settings | None = None,
    titles: list[str] | None = None,
    log: Callable[[str], None] = lambda s: None,
    strict: bool = True,
) -> list[Row]:
    """Run the named workloads (all by default) and return their rows.

    `titles`, if given, receives one line per workload describing its problem size. With
    `strict=False` a workload that raises is logged and skipped instead of ending the run.
    """
    s = settings or Settings()
    unknown = [n for n in names or () if n not in NAMES]
    if unknown:
        raise ValueError(f"unknown workload {unknown[0]!r}; choose from {', '.join(NAMES)}")
    cache = jax.config.jax_enable_compilation_cache
    jax.config.update("jax_enable_compilation_cache", False)  # first gradients compile afresh
    rows: list[Row] = []
    try:
        for name in names or NAMES:
            log(f"running {name} ...")
            try:
                rows += _run_one(name, quick, s, titles)
            except Exception as e:  # reported, the other workloads still run
                if strict:
                    raise
                log(f"{name} failed: {type(e).__name__}: {e}")
                if titles is not None:
                    titles.append(f"{name}: FAILED ({type(e).__name__}: {e})")
    finally:
        jax.config.update("jax_enable_compilation_cache", cache)
    return rows


def _run_one(name: str, quick: bool, s: Settings, titles: list[str] | None) -> list[Row]:
    if name == "transform":
        sizes, reps = QUICK_SCALING if quick else (s.scaling_sizes, s.scaling_reps)
        if titles is not None:
            titles.append(
                "transform, first gradient: chain of N elementwise ops (sin, cos, "
                "tanh, ...) + sum; MLP stack of N ops (tanh(h @ w + b), 8 wide) + sum "
                f"of squares; N = {', '.join(f'{n:,}' for n in sizes)}"
            )
        return run_scaling(sizes, reps)
    w = WORKLOADS[name](quick)
    if titles is not None:
        titles.append(f"{w.name}: {w.title}")
    return run_workload(w, s)


__all__ = ["run", "Settings", "Row", "WORKLOADS", "NAMES"]
