"""`sg.autograd`: imperative mode's recording and backward (MXNet's names).

    with sg.autograd.record():
        y = sg.sum(sg.tanh(x) * x)
    y.backward()

Implemented in srcgrad/imperative/autograd.py.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

from ..imperative.autograd import (
    Tape,
    backward,
    compile_count,
    grad,
    is_recording,
    no_grad,
    pause,
    record,
    tape,
)

__all__ = [
    "record",
    "pause",
    "no_grad",
    "is_recording",
    "backward",
    "grad",
    "tape",
    "compile_count",
    "Tape",
]
