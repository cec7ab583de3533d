"""How a tape's entries are cut into windows (srcgrad/imperative/backward_chunks.py): the
windows tile the tape in order whatever the programs its entries call, and a recurring unit
that windows of CHUNK entries would cut at different places is cut whole."""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

import pytest

from srcgrad.imperative import backward_chunks

PROGRAMS = [object() for _ in range(4)]


def _tapes(n: int, seed: int) -> list[list[Any]]:
    """`n` lists of the programs a tape's entries call: a head, a unit repeated, a tail."""
    rng = random.Random(seed)

    def some(k: int) -> list[Any]:
        return [rng.choice(PROGRAMS) for _ in range(k)]

    return [
        some(rng.randint(0, 60))
        + some(rng.randint(1, 12)) * rng.randint(0, 8)
        + some(rng.randint(0, 5))
        for _ in range(n)
    ]


@pytest.mark.parametrize("chunk", [2, 4, 16])
def test_windows_tile_the_tape(monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    """In order, without gaps or overlaps, and never reading past the tape's end, over 2,000
    random tapes (about one in a hundred made `_period` index past the end before its bound
    was fixed)."""
    monkeypatch.setattr(backward_chunks, "CHUNK", chunk)
    for progs in _tapes(2000, chunk):
        cuts = backward_chunks._periodic_cuts([SimpleNamespace(prog=p) for p in progs])
        assert [a for a, _, _ in cuts] == ([0] + [b for _, b, _ in cuts[:-1]] if cuts else [])
        assert (cuts[-1][1] if cuts else 0) == len(progs)
        assert all(b - a >= min(chunk // 4, 1) for a, b, may in cuts if may)
        found = backward_chunks._period(progs)
        if found is not None:
            p, start, stop = found
            assert stop <= len(progs)
            assert all(progs[i] is progs[i + p] for i in range(start, stop - p))


def test_a_unit_that_chunk_does_not_divide_is_cut_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backward_chunks, "CHUNK", 16)
    a, b, c = PROGRAMS[:3]
    cell = [a] + [b] * 23  # 24 entries, no shorter unit
    cuts = backward_chunks._periodic_cuts([SimpleNamespace(prog=p) for p in [c] + cell * 30])
    whole = [(x, y) for x, y, may in cuts if may and y - x == 24]
    assert len(whole) >= 28 and all((x - 1) % 24 == 0 for x, _ in whole)
