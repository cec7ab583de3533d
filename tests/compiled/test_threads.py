"""Tracing, compiling and calling gradients from many threads at once.

Trace state is per thread and the compile cache locks each key, so eight threads tracing
different functions (and the same ones) get the values and the source one thread alone gets.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

import srcgrad as sg
from srcgrad.ir.program import current_program

W = np.array([0.5, -1.0, 2.0])


def mlp(x: Any) -> Any:
    return sg.sum(sg.tanh(x * W + 0.1) ** 2)


def mlp_twin(x: Any) -> Any:
    return jnp.sum(jnp.tanh(x * W + 0.1) ** 2)


def solver(x: Any) -> Any:
    """A while loop with a data-dependent trip count (about 20 to 200 iterations)."""

    def body(c: Any) -> Any:
        s, k = c
        return sg.sin(s) * 0.9 + x, k + 1.0

    return sg.sum(sg.while_loop(lambda c: c[1] < 20.0 + 60.0 * sg.sum(x * x), body, (x, 0.0))[0])


def solver_twin(x: Any, n: int) -> Any:
    return jnp.sum(jax.lax.fori_loop(0, n, lambda i, s: jnp.sin(s) * 0.9 + x, x))


def solver_grad(x: np.ndarray) -> Any:
    """jax.grad of the solver at its trip count for `x`."""
    n = int(np.ceil(20.0 + 60.0 * float(np.sum(x * x))))
    return jax.grad(solver_twin)(x, n)


def branchy(x: Any) -> Any:
    return sg.cond(sg.sum(x) > 0, lambda v: sg.sum(sg.exp(v)), lambda v: sg.sum(v**3), x)


def branchy_twin(x: Any) -> Any:
    return jax.lax.cond(jnp.sum(x) > 0, lambda v: jnp.sum(jnp.exp(v)), lambda v: jnp.sum(v**3), x)


CASES: list[tuple[Callable, Callable]] = [
    (mlp, jax.grad(mlp_twin)),
    (solver, solver_grad),
    (branchy, jax.grad(branchy_twin)),
]


def _source(fun: Callable, x: np.ndarray) -> str:
    """The gradient's source, traced from this one line (the source names the caller's line)."""
    return sg.source(sg.grad(fun), x)


def test_eight_threads_of_gradients_agree_with_jax_and_with_each_other() -> None:
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(3) * s for s in (0.3, 0.6, 1.0, 1.4)]
    want = {
        (i, j): np.asarray(grad(x))
        for i, (_, grad) in enumerate(CASES)
        for j, x in enumerate(inputs)
    }
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []
    sources: list[dict[int, str]] = []
    checked = [0] * 8

    def worker(t: int) -> None:
        try:
            seen = {}
            barrier.wait()
            for rep in range(6):
                for i, (fun, _) in enumerate(CASES):
                    i = (i + t) % len(CASES)
                    fun = CASES[i][0]
                    g = sg.grad(fun, jit=rep > 0 or t % 2 == 0)  # some eager, most compiled
                    for j in range(len(inputs)):
                        j = (j + rep) % len(inputs)
                        np.testing.assert_allclose(g(inputs[j]), want[i, j], rtol=1e-9, atol=1e-12)
                        checked[t] += 1
                    seen[i] = _source(fun, inputs[0])
            sources.append(seen)
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors[0]
    assert checked == [6 * len(CASES) * len(inputs)] * 8
    alone = {i: _source(fun, inputs[0]) for i, (fun, _) in enumerate(CASES)}
    assert all(seen == alone for seen in sources)


def test_concurrent_first_calls_of_one_function_compile_once() -> None:
    def f(x: Any) -> Any:
        return sg.sum(sg.sin(x) * sg.cos(x))

    x = np.array([0.2, 0.4])
    grads = [sg.grad(f) for _ in range(8)]
    barrier = threading.Barrier(8)
    out: list[Any] = [None] * 8

    def call(t: int) -> None:
        barrier.wait()
        out[t] = grads[t](x)

    threads = [threading.Thread(target=call, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for o in out:
        np.testing.assert_allclose(o, np.cos(2 * x), rtol=1e-12)
    assert sum(g.compilations for g in grads) == 1


def test_tracing_in_one_thread_does_not_leak_into_another() -> None:
    prog = sg.Program()
    seen: list[Any] = []
    with sg.program_guard(prog):
        t = threading.Thread(target=lambda: seen.append(current_program()))
        t.start()
        t.join()
        assert current_program() is prog
    assert seen == [None]
