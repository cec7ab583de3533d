"""The garbage collector's pacing while a tape is alive (srcgrad/imperative/gc_pacing.py):
the young threshold is raised from the first recorded op until backward frees the tape or
the tape is dropped, and the process's own thresholds come back, or are kept when the user
set them otherwise."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.imperative import gc_pacing


@pytest.fixture(autouse=True)
def fresh_pacer(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pacer of the test's own: tapes other tests left alive count on the process's."""
    monkeypatch.setattr(gc_pacing, "PACER", gc_pacing.Pacer())


@pytest.fixture
def thresholds() -> Iterator[tuple[int, ...]]:
    """The default thresholds for the test, the process's own put back after it."""
    own = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield gc.get_threshold()
    gc.set_threshold(*own)


def _loss(w: sg.Tensor) -> sg.Tensor:
    with sg.autograd.record():
        return sg.sum(sg.tanh(w * 2.0))


def test_young_threshold_raised_while_the_tape_lives(thresholds: tuple[int, ...]) -> None:
    w = sg.tensor(np.ones(3, np.float32), requires_grad=True)
    loss = _loss(w)
    assert gc.get_threshold() == (gc_pacing.YOUNG, *thresholds[1:])
    loss.backward()
    assert gc.get_threshold() == thresholds
    np.testing.assert_allclose(w.grad.numpy(), 2 / np.cosh(2.0) ** 2, rtol=1e-6)


def test_dropped_tape_gives_the_thresholds_back(thresholds: tuple[int, ...]) -> None:
    w = sg.tensor(np.ones(3, np.float32), requires_grad=True)
    dropped = _loss(w)  # never differentiated
    del dropped
    loss = _loss(w)  # a new recording: the one before goes
    assert gc.get_threshold()[0] == gc_pacing.YOUNG
    loss.backward()
    assert gc.get_threshold() == thresholds


@pytest.mark.parametrize("own", [(0, 10, 10), (50_000, 10, 10)])
def test_a_process_own_thresholds_are_kept(own: tuple[int, int, int]) -> None:
    before = gc.get_threshold()
    gc.set_threshold(*own)
    try:
        w = sg.tensor(np.ones(3, np.float32), requires_grad=True)
        loss = _loss(w)
        assert gc.get_threshold() == own
        loss.backward()
        assert gc.get_threshold() == own
    finally:
        gc.set_threshold(*before)
