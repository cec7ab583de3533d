"""The one "known zero" test every grad maker uses (grad_helpers.is_known_zero): zeros made by
`fill_zeros_like` or by a `fill_constant` of 0 are known; any other value is not, zeros
computed at run time included (dropping them would be wrong if they were not zeros)."""

from __future__ import annotations

import numpy as np

import srcgrad as sg
from srcgrad.ops.grad_helpers import fill_zeros_like, is_known_zero


def test_zeros_by_construction_are_known_and_nothing_else_is() -> None:
    prog = sg.Program()
    with sg.program_guard(prog):
        x = sg.data("x", (3,), "float32")
        assert is_known_zero(fill_zeros_like(x))
        assert is_known_zero(sg.zeros((3,)))
        assert is_known_zero(sg.full((2,), -0.0))
        assert not is_known_zero(sg.full((2,), 1.0))
        assert not is_known_zero(sg.full((2,), np.nan))
        assert not is_known_zero(x)  # an input: no producer
        assert not is_known_zero(x * 0.0)  # zero at run time, not by construction
        assert not is_known_zero(sg.zeros((3,)) + x)
