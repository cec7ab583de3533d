"""The benchmark harness runs every workload once at a tiny size (no timing is asserted)."""
from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import benchmarks  # noqa: E402
from benchmarks import phases  # noqa: E402
from benchmarks.report import markdown, text_table  # noqa: E402


#: The while-loop workloads' peers need equinox (the `bench` extra); the rest runs without.
NAMES = tuple(n for n in benchmarks.NAMES if n not in ("while", "checkpointed")
              or importlib.util.find_spec("equinox") is not None)


@pytest.fixture(scope="module")
def rows() -> list:
    settings = benchmarks.Settings(reps=1, first_reps=1, sample_s=0.0)
    return benchmarks.run(NAMES, quick=True, settings=settings)


def test_every_workload_reports(rows: list) -> None:
    assert {r.workload for r in rows} == set(NAMES)
    for name in set(NAMES) & set(benchmarks.WORKLOADS):
        figures = {r.figure for r in rows if r.workload == name}
        assert {"step", "first gradient", "temp memory", "max rel. difference"} <= figures, name
    for r in rows:
        assert math.isfinite(r.srcgrad), r


def test_srcgrad_agrees_with_peers(rows: list) -> None:
    for r in rows:
        if r.figure == "max rel. difference":
            assert r.met, r


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
