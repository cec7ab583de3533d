"""Library settings (`sg.config`), read when a function is traced and compiled.

Layer L0 (base): see docs/design.md.
"""

from __future__ import annotations

import os
from typing import Any


class Config:
    """srcgrad's settings.

    max_loop_records: the most iterations a `while_loop` without `max_iters` may run under
        reverse mode. Its gradient records every iteration, in stacks sized by a search over
        powers of two; a loop still running past this many iterations stops and raises a
        SrcgradError naming the loop (so a loop whose condition never becomes false does not
        hang). Default 2**20.
    traceback_filtering: whether the tracebacks of errors leaving srcgrad leave out
        srcgrad's own frames (as JAX's traceback filtering), showing the user's lines only.
        Default True; the environment variable SRCGRAD_TRACEBACK_FILTERING=off (read at
        import) makes it False.
    tape_compile_after: None (the default) lets imperative mode compile by its cost rule: a
        tape's structure (its whole backward) or a recurring window of it (a chunk) is
        compiled once the time spent running it op by op, with what this backward would
        spend so, reaches what its compile is expected to cost, all measured as the program
        runs (srcgrad/imperative/cost_rule.py, docs/imperative.md). An int n is the fixed
        rule instead, deterministic: a structure is differentiated op by op on its first
        n - 1 sightings and compiled whole from the n-th on (a window runs as a chunk from
        its second sighting); 1 compiles every structure at once.
    tape_compile_cold: whether a cold tape (recorded calls of one-op programs that have
        never run: a fresh model's first step) may be compiled whole at first sight, since
        op by op would compile one program per such call and one per vjp kernel. Under the
        cost rule those compiles count as what op by op would spend now; under the fixed
        rule a tape at least half of whose calls are such is compiled at once. Default True.
    """

    __slots__ = (
        "_max_loop_records",
        "_traceback_filtering",
        "_tape_compile_after",
        "_tape_compile_cold",
    )

    def __init__(self) -> None:
        self._max_loop_records = 2**20
        self._traceback_filtering = os.environ.get(
            "SRCGRAD_TRACEBACK_FILTERING", "on"
        ).strip().lower() not in ("off", "0", "false", "no")
        self._tape_compile_after: int | None = None
        self._tape_compile_cold = True

    @property
    def max_loop_records(self) -> int:
        return self._max_loop_records

    @max_loop_records.setter
    def max_loop_records(self, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value < 2**31 - 1:
            raise ValueError(
                f"sg.config.max_loop_records must be an int in [1, 2**31 - 2], got {value!r}"
            )
        self._max_loop_records = value

    @property
    def traceback_filtering(self) -> bool:
        return self._traceback_filtering

    @traceback_filtering.setter
    def traceback_filtering(self, value: Any) -> None:
        if not isinstance(value, bool):
            raise ValueError(f"sg.config.traceback_filtering must be True or False, got {value!r}")
        self._traceback_filtering = value

    @property
    def tape_compile_after(self) -> int | None:
        return self._tape_compile_after

    @tape_compile_after.setter
    def tape_compile_after(self, value: Any) -> None:
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 1
        ):
            raise ValueError(
                "sg.config.tape_compile_after must be None (the cost rule) or an "
                f"int >= 1, got {value!r}"
            )
        self._tape_compile_after = value

    @property
    def tape_compile_cold(self) -> bool:
        return self._tape_compile_cold

    @tape_compile_cold.setter
    def tape_compile_cold(self, value: Any) -> None:
        if not isinstance(value, bool):
            raise ValueError(f"sg.config.tape_compile_cold must be True or False, got {value!r}")
        self._tape_compile_cold = value

    def __repr__(self) -> str:
        return (
            f"Config(max_loop_records={self.max_loop_records}, "
            f"traceback_filtering={self.traceback_filtering}, "
            f"tape_compile_after={self.tape_compile_after}, "
            f"tape_compile_cold={self.tape_compile_cold})"
        )


config = Config()
