"""Fewer garbage collections while a tape is alive.

A recorded op leaves about eight small container objects (its entry, references, the node
of its structure) that live until backward frees the tape, and backward makes as many again.
CPython's cyclic collector runs a young collection every 700 such allocations; each one
moves the live tape's objects a generation up, and once enough have moved, a collection
walks every object of the process (JAX's included, some 300,000). Measured on a tree
network over new trees, that was a third of an op-by-op step's time. While a tape is alive
(from its first recorded op until backward frees it, or until it is dropped) the young
collections come every `YOUNG` allocations instead, so a step's garbage is collected after
the tape is freed, when it is dead: no fewer objects are collected, but they are not walked
again and again first, and at most `YOUNG` objects' worth of garbage waits meanwhile.

The collector's thresholds are the process's: the live tapes are counted across threads, the
thresholds found when the first one came are put back when the last one goes (unless
someone changed them meanwhile), and a process that turned automatic collection off (a
threshold of 0) or set a larger one keeps its own.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

import gc
import threading
import weakref
from typing import Callable

#: Allocations between young collections while a tape is alive (CPython's default is 700).
YOUNG = 20_000


class Pacer:
    """Counts the live tapes and sets the collector's young threshold while there are any."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._alive = 0
        self._saved: tuple[int, ...] | None = None

    def hold(self, owner: object) -> Callable[[], None]:
        """Pace collections while `owner` (a tape) lives; the returned function ends that
        early (it runs once at most: when `owner` is freed or collected)."""
        with self._lock:
            if self._alive == 0:
                now = gc.get_threshold()
                if 0 < now[0] < YOUNG:
                    self._saved = now
                    gc.set_threshold(YOUNG, *now[1:])
            self._alive += 1
        return weakref.finalize(owner, self._release)

    def _release(self) -> None:
        with self._lock:
            self._alive -= 1
            saved = self._saved
            if self._alive == 0 and saved is not None:
                self._saved = None
                if gc.get_threshold() == (YOUNG, *saved[1:]):
                    gc.set_threshold(*saved)


#: The pacer every tape holds (tests put a fresh one in its place).
PACER = Pacer()


def hold(owner: object) -> Callable[[], None]:
    """`PACER.hold(owner)`."""
    return PACER.hold(owner)


__all__ = ["PACER", "YOUNG", "Pacer", "hold"]
