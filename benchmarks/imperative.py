"""Imperative mode: an MLP train loop recorded with `sg.autograd` against the same model's
`jax.jit(jax.value_and_grad)` step and eager (non-jit) `jax.value_and_grad`.

    python -m benchmarks.imperative [--quick] [--reps N] [--steps N] [--profile N]

Figures per model size: the time of one train step (forward, backward, SGD update) after
the first, the time of the backward alone (`loss.backward()` on a freshly recorded tape,
keying and freeing it included, against `jax.jit` of the `jax.vjp` function applied to its
residuals, the same on the residuals of a forward of its own that the call releases, and
that function run eagerly), and how many
programs each compiles over `--steps` steps (srcgrad: its backward, and the one-op eager
programs of the forward; jit: its step). Timings are interleaved (benchmarks/harness.py).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

import srcgrad as sg
from srcgrad.compiled import eager

from .harness import Row, Settings, block, interleaved
from .mlp import loss_jax
from .report import text_table
from .workload import Init

LR = 0.01


class Imperative:
    """The same MLP as sg.nn.Linear layers, trained with record / backward / SGD."""

    def __init__(self, params: list, x: Any, y: Any):
        self.layers = []
        for i, (w, b) in enumerate(params):
            layer = sg.nn.Linear(*w.shape, act="tanh" if i < len(params) - 1 else None, seed=i)
            layer.weight.assign(w.T)  # sg.nn.Linear's weight is (out, in)
            layer.bias.assign(b)
            self.layers.append(layer)
        self.params = [p for layer in self.layers for p in layer.params()]
        self.x, self.y = sg.tensor(x), sg.tensor(y)
        self.sgd = sg.optim.SGD(LR)

    def forward(self) -> sg.Tensor:
        with sg.autograd.record():
            h = self.x
            for layer in self.layers:
                h = layer(h)
            return -sg.mean(sg.sum(sg.log_softmax(h, axis=-1) * self.y, axis=-1))

    def step(self) -> list:
        loss = self.forward()
        loss.backward()
        self.sgd(self.params)
        return [loss.value()] + [p.value() for p in self.params]


def jit_step(params: list, x: Any, y: Any) -> Callable[[], Any]:
    vg = jax.value_and_grad(loss_jax)

    @jax.jit
    def step(p: list, x: Any, y: Any) -> tuple:
        value, g = vg(p, x, y)
        return value, jax.tree_util.tree_map(lambda a, b: a - LR * b, p, g)

    state = {"p": params}

    def run() -> Any:
        value, state["p"] = step(state["p"], x, y)
        return value, state["p"]

    run.compiled = step  # type: ignore[attr-defined]
    return run


def eager_step(params: list, x: Any, y: Any) -> Callable[[], Any]:
    vg = jax.value_and_grad(loss_jax)
    state = {"p": params}

    def run() -> Any:
        value, g = vg(state["p"], x, y)
        state["p"] = jax.tree_util.tree_map(lambda a, b: a - LR * b, state["p"], g)
        return value, state["p"]

    return run


def fresh_interleaved(
    fns: dict[str, tuple[Callable[[], Any], Callable[[Any], Any]]], reps: int, n: int
) -> dict[str, list[float]]:
    """Seconds per call of `run(prepare())`, timing only `run`: each sample prepares `n`
    inputs, then times the `n` calls; the variants alternate as in `interleaved`."""
    for prepare, run in fns.values():
        block(run(prepare()))
    samples: dict[str, list[float]] = {name: [] for name in fns}
    names = list(fns)
    for r in range(reps):
        for name in names if r % 2 == 0 else names[::-1]:
            prepare, run = fns[name]
            inputs = [prepare() for _ in range(n)]
            t0 = time.perf_counter()
            out = [run(a) for a in inputs]
            block(out)
            samples[name].append((time.perf_counter() - t0) / n)
    return samples


def _row(
    name: str,
    figure: str,
    unit: str,
    samples: dict[str, list[float]],
    mine: str,
    peer: str,
    target: float | None = None,
) -> Row:
    a, b = np.asarray(samples[mine]), np.asarray(samples[peer])
    return Row(
        name,
        figure,
        unit,
        float(np.median(a)) * 1e3,
        float(np.median(b)) * 1e3,
        mine,
        peer,
        target,
        paired_ratio=float(np.median(a / b)),
    )


def run_size(name: str, sizes: list[int], batch: int, s: Settings, steps: int) -> list[Row]:
    init = Init(1)
    params = [init.dense(a, b) for a, b in zip(sizes[:-1], sizes[1:])]
    x, y = init.normal(batch, sizes[0]), init.one_hot(batch, sizes[-1])
    imp, jit, eag = Imperative(params, x, y), jit_step(params, x, y), eager_step(params, x, y)

    # compile counts over `steps` steps, and after the first step
    backward0, eager0 = sg.autograd.compile_count(), len(eager.PROGRAMS)
    after_first = (0, 0, 0)
    for i in range(steps):
        block(imp.step())
        block(jit())
        if i == 0:
            after_first = (
                sg.autograd.compile_count(),
                len(eager.PROGRAMS),
                jit.compiled._cache_size(),
            )
    rows = [
        Row(
            name,
            f"backward compiles, {steps} steps",
            "",
            float(sg.autograd.compile_count() - backward0),
            float(jit.compiled._cache_size()),
            "imperative",
            "jax.jit",
        ),
        Row(
            name,
            f"eager op programs, {steps} steps",
            "",
            float(len(eager.PROGRAMS) - eager0),
            float("nan"),
            "imperative",
            "jax.jit",
        ),
        Row(
            name,
            f"compiles in steps 2-{steps} (jax.jit: {jit.compiled._cache_size() - after_first[2]})",
            "",
            float(sg.autograd.compile_count() + len(eager.PROGRAMS) - sum(after_first[:2])),
            float("nan"),
            "imperative",
            "jax.jit",
        ),
    ]

    step_samples = interleaved(
        {"imperative": imp.step, "jax.jit": jit, "jax eager": eag}, s.reps, s.sample_s
    )
    rows.append(_row(name, "train step", "ms", step_samples, "imperative", "jax eager", 1.0))
    rows.append(_row(name, "train step", "ms", step_samples, "imperative", "jax.jit"))

    # as (in, out)
    tree = [(w.value().T, b.value()) for w, b in zip(imp.params[::2], imp.params[1::2])]
    _, vjp_fn = jax.vjp(lambda p: loss_jax(p, x, y), tree)
    jit_fwd = jax.jit(lambda p: jax.vjp(lambda q: loss_jax(q, x, y), p)[1])
    jit_bwd = jax.jit(lambda f, ct: f(ct))
    one = jnp.ones((), jnp.float32)
    bwd_samples = fresh_interleaved(
        {
            # each timed backward differentiates a tape of its own, recorded before the clock
            # runs, and frees it (its values are released inside the timed call)
            "imperative": (
                lambda: block(imp.forward()),
                lambda loss: (loss.backward(), [p.grad.value() for p in imp.params])[1],
            ),
            "jax.jit vjp": (lambda: vjp_fn, lambda f: jit_bwd(f, one)),
            # the same, on the residuals of a forward of its own, released inside the timed call
            "jax.jit vjp, released": (
                lambda: [block(jit_fwd(tree))],
                lambda box: jit_bwd(box.pop(), one),
            ),
            "jax eager vjp": (lambda: vjp_fn, lambda f: f(one)),
        },
        s.reps,
        20,
    )
    rows.append(_row(name, "backward", "ms", bwd_samples, "imperative", "jax.jit vjp", 1.2))
    rows.append(_row(name, "backward", "ms", bwd_samples, "imperative", "jax.jit vjp, released"))
    rows.append(_row(name, "backward", "ms", bwd_samples, "imperative", "jax eager vjp"))
    agree = max(
        float(np.max(np.abs(np.asarray(p.grad.value()) - np.asarray(g).T)))
        for p, g in zip(imp.params, jax.tree_util.tree_leaves(jit_bwd(vjp_fn, one)))
    )
    rows.append(Row(name, "max abs. grad difference", "", agree, float("nan"), "imperative", "jax"))
    return rows


def profile_backward(n: int, sizes: list[int], batch: int, top: int = 15) -> None:
    """Print cProfile's top functions (by own time) over `n` backwards of the model, each on a
    tape of its own recorded before the profiler runs."""
    import cProfile
    import pstats

    init = Init(1)
    params = [init.dense(a, b) for a, b in zip(sizes[:-1], sizes[1:])]
    imp = Imperative(params, init.normal(batch, sizes[0]), init.one_hot(batch, sizes[-1]))
    block(imp.step())
    losses = [imp.forward() for _ in range(n)]
    block(losses)
    prof = cProfile.Profile()
    prof.enable()
    for loss in losses:
        loss.backward()
    prof.disable()
    block([p.grad.value() for p in imp.params])
    pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(top)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.imperative",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--quick", action="store_true", help="tiny sizes, 2 repetitions")
    ap.add_argument("--reps", type=int, default=None, help="samples per variant (default 21)")
    ap.add_argument("--steps", type=int, default=50, help="steps counted for compiles")
    ap.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="only profile N backwards of the small model (cProfile)",
    )
    args = ap.parse_args(argv)
    if args.profile:
        profile_backward(args.profile, [64, 128, 128, 10], 32)
        return 0
    s = Settings(reps=2, first_reps=1, sample_s=0.0) if args.quick else Settings()
    if args.reps:
        s.reps = args.reps
    models = (
        [("tiny", [8, 8, 4], 4)]
        if args.quick
        else [("small", [64, 128, 128, 10], 32), ("mlp", [784, 512, 512, 10], 256)]
    )
    rows: list[Row] = []
    for name, sizes, batch in models:
        print(
            f"running {name}: MLP {'-'.join(map(str, sizes))}, batch {batch} ...",
            file=sys.stderr,
            flush=True,
        )
        rows += run_size(name, sizes, batch, s, 3 if args.quick else args.steps)
    print(text_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
