"""Where imperative mode's random numbers come from: a process-wide seed counter, NumPy's
generators for initial weights (drawn on the host) and jax.random keys for masks and samples.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

import itertools

import jax
import numpy as np

_seeds = itertools.count()


def seeded_rng(seed: int | None) -> np.random.Generator:
    """The generator of a layer's initial weights: NumPy's, on the host. `jax.random` would
    compile a program per new shape (0.2-0.9 s each on a 2-core CPU: most of a fresh model's
    time to its first step). `seed` None: the next seed of the process's counter."""
    return np.random.default_rng(next(_seeds) if seed is None else seed)


def new_key(seed: int | None) -> jax.Array:
    """A jax.random key from `seed` (None: the next seed of the counter)."""
    return jax.random.PRNGKey(next(_seeds) if seed is None else seed)


class KeyStream:
    """A stream of jax.random keys: `next()` splits a new one off (a Dropout's masks, a
    distribution's samples)."""

    __slots__ = ("key",)

    def __init__(self, seed: int | None = None):
        self.key = new_key(seed)

    def next(self) -> jax.Array:
        self.key, sub = jax.random.split(self.key)
        return sub


__all__ = ["seeded_rng", "new_key", "KeyStream"]
