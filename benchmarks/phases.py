"""`python -m benchmarks.phases NAME [REPS] [--quick]`: where a workload's first gradient goes.

For each variant of workload NAME (mlp, cnn, transformer, rnn): trace and lower its
`jax.jit` step (for srcgrad this includes srcgrad's own transform), XLA's compile, and the
first run, in milliseconds, medians over REPS rounds that alternate the variants (fresh
functions each time, JAX's persistent compilation cache off), plus the number of fusion
kernels in the optimized HLO. `--quick` uses the tiny sizes. Diagnostic only; the report's
figures come from `python -m benchmarks`.
"""

from __future__ import annotations

import re
import sys
import time

import jax
import numpy as np

from . import WORKLOADS
from .workload import Variant, Workload


def _once(w: Workload, v: Variant) -> tuple[float, float, float, int]:
    step = v.make()
    t0 = time.perf_counter()
    lowered = step.lower(*w.args)
    t1 = time.perf_counter()
    compiled = lowered.compile()
    t2 = time.perf_counter()
    jax.block_until_ready(compiled(*w.args))
    t3 = time.perf_counter()
    kernels = len(re.findall(r"^\s*(?:ROOT )?\S+ = \S+ fusion\(", compiled.as_text(), re.M))
    return t1 - t0, t2 - t1, t3 - t2, kernels


def _report(name: str, w: Workload, reps: int) -> None:
    for v in w.variants:  # warm-up round: what every first call shares
        _once(w, v)
    samples: dict[str, list[tuple[float, float, float, int]]] = {v.name: [] for v in w.variants}
    for r in range(reps):
        for v in w.variants if r % 2 == 0 else w.variants[::-1]:
            samples[v.name].append(_once(w, v))
    for v_name, s in samples.items():
        trace, comp, run, kernels = np.median(np.array(s), axis=0)
        print(
            f"{name} {v_name}: trace+lower {trace * 1e3:.1f} ms, XLA compile {comp * 1e3:.1f} ms, "
            f"first run {run * 1e3:.1f} ms, total {(trace + comp + run) * 1e3:.1f} ms, "
            f"{kernels:.0f} fusions"
        )


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    args = [a for a in argv if a != "--quick"]
    if not args or args[0] not in WORKLOADS or args[0] == "while":
        raise SystemExit(
            "usage: python -m benchmarks.phases {mlp,cnn,transformer,rnn} [REPS] [--quick]"
        )
    name, reps = args[0], int(args[1]) if len(args) > 1 else 9
    cache = jax.config.jax_enable_compilation_cache
    jax.config.update("jax_enable_compilation_cache", False)  # every round compiles afresh
    try:
        _report(name, WORKLOADS[name](quick), reps)
    finally:
        jax.config.update("jax_enable_compilation_cache", cache)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
