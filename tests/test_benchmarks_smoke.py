"""The benchmark harness runs every workload once at a tiny size (no timing is asserted)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import benchmarks
from benchmarks import phases
from benchmarks.report import markdown, text_table


#: The while-loop workloads' peers need equinox (the `bench` extra); the rest runs without.
NAMES = tuple(
    n
    for n in benchmarks.NAMES
    if n not in ("while", "checkpointed") or importlib.util.find_spec("equinox") is not None
)
#: The default run's slice: a dense net, a while loop, forward mode; `-m slow` runs the
#: others (cnn, transformer, rnn, checkpointed, gp, forward_loop, transform).
DEFAULT = tuple(n for n in NAMES if n in ("mlp", "while", "hessian"))


def _run(names: tuple) -> list:
    settings = benchmarks.Settings(reps=1, first_reps=1, sample_s=0.0)
    return benchmarks.run(names, quick=True, settings=settings)


@pytest.fixture(scope="module")
def rows() -> list:
    return _run(DEFAULT)


def _check(rows: list, names: tuple) -> None:
    assert {r.workload for r in rows} == set(names)
    for name in set(names) & set(benchmarks.WORKLOADS):
        figures = {r.figure for r in rows if r.workload == name}
        assert {"step", "first gradient", "temp memory", "max rel. difference"} <= figures, name
    for r in rows:
        assert math.isfinite(r.srcgrad), r
        if r.figure == "max rel. difference":
            assert r.met, r  # srcgrad agrees with its peer


def test_every_workload_reports_and_agrees(rows: list) -> None:
    _check(rows, DEFAULT)


@pytest.mark.slow
def test_the_other_workloads_report_and_agree() -> None:
    others = tuple(n for n in NAMES if n not in DEFAULT)
    _check(_run(others), others)


def test_report_renders(rows: list) -> None:
    assert "srcgrad / peer" in text_table(rows)
    doc = markdown(rows, "python -m benchmarks --quick", ["tiny"], 1.0, "## Analysis\n")
    assert doc.count("\n| ") >= len(rows)


def test_only_and_unknown_names() -> None:
    settings = benchmarks.Settings(reps=1, first_reps=1, sample_s=0.0, figures=("agreement",))
    assert {r.workload for r in benchmarks.run(["mlp"], quick=True, settings=settings)} == {"mlp"}
    with pytest.raises(ValueError, match="unknown workload"):
        benchmarks.run(["nope"], quick=True)


def test_phases_runs(capsys: pytest.CaptureFixture) -> None:
    assert phases.main(["rnn", "1", "--quick"]) == 0
    out = capsys.readouterr().out
    assert "rnn srcgrad: trace+lower" in out and "rnn jax: trace+lower" in out
