"""Helpers shared by the test files."""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterator

import jax
import numpy as np


def normal_arrays(rng: np.random.Generator) -> Callable[..., np.ndarray]:
    """`arr(*shape, scale=1.0)`: standard-normal float64 arrays drawn from `rng`."""

    def arr(*shape: int, scale: float = 1.0) -> np.ndarray:
        return rng.standard_normal(shape) * scale

    return arr


def assert_tree_close(got: Any, want: Any, rtol: float = 1e-10, atol: float = 1e-12) -> None:
    """Same pytree structure, leaf shapes and (within tolerance) values."""
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        assert np.shape(a) == np.shape(b)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def close(got: Any, want: Any, tol: float = 1e-9) -> None:
    """`assert_tree_close` with one tolerance, relative and absolute."""
    assert_tree_close(got, want, rtol=tol, atol=tol)


def sliced(cases: list, every: int, name: Callable[[Any], str] = str, unpack: bool = False) -> list:
    """`cases` as pytest params where all but every `every`-th is marked `slow`: the default
    run keeps a representative slice, `-m slow` runs the rest (docs/testing.md). `unpack`:
    each case is a tuple of several parameters' values."""
    import pytest

    if unpack:
        return [
            pytest.param(*c, marks=() if i % every == 0 else pytest.mark.slow)
            for i, c in enumerate(cases)
        ]
    return [
        c if i % every == 0 else pytest.param(c, marks=pytest.mark.slow, id=name(c))
        for i, c in enumerate(cases)
    ]


@contextlib.contextmanager
def compile_threads() -> Iterator[list[str]]:
    """`with compile_threads() as names:` the name of the thread that ran each XLA compile in
    the body (jax.monitoring's backend-compile events). JAX 0.4.30, the floor, has no public
    way to remove a listener; its private one is used there."""

    def listen(name: str, secs: float, **kw: Any) -> None:
        if "backend_compile" in name:
            names.append(threading.current_thread().name)

    names: list[str] = []
    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        yield names
    finally:
        unregister = getattr(jax.monitoring, "unregister_event_duration_listener", None)
        if unregister is None:
            from jax._src import monitoring

            unregister = monitoring._unregister_event_duration_listener_by_callback
        unregister(listen)
