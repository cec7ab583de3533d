"""Imperative mode's cost rule (srcgrad/imperative/cost_rule.py), deterministic under a clock
of the test's own: a tape of a structure never seen compiles nothing (a tree network over
new trees, an RNN over new lengths), a recurring one is compiled whole once its op-by-op
time reaches the compile, a cold tape is compiled whole when op by op would compile more,
a long one never at first sight, a compiled tier slower than op by op is dropped, and
recurring windows become chunks once they have paid; the gradients are jax.grad's in every
tier."""

from __future__ import annotations

from typing import Any, Callable, Iterator

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import srcgrad as sg
from srcgrad.base.cache import BoundedCache
from srcgrad.base.config import config
from srcgrad.compiled import eager
from srcgrad.imperative import backward_chunks, backward_whole, compile_ahead, cost_rule

RNG = np.random.default_rng(41)


class Clock:
    """A clock that advances by `step` seconds each time it is read."""

    def __init__(self, step: float = 1e-3):
        self.t = 0.0
        self.step = step

    def __call__(self) -> float:
        self.t += self.step
        return self.t


class Fixed(cost_rule.Estimate):
    """An estimate that measurements do not move."""

    def add(self, size: int, seconds: float) -> None:
        pass


@pytest.fixture
def rule(monkeypatch: pytest.MonkeyPatch) -> Iterator[cost_rule.Rule]:
    """The cost rule (no fixed count) with a fake clock, its priors and fresh accounts; checks
    off (they would compile the other tier); no compiles on the pool (its threads would read
    the clock in no fixed order)."""
    monkeypatch.setenv("SRCGRAD_ENABLE_CHECKS", "0")
    monkeypatch.setattr(compile_ahead, "WORKERS", 1)
    monkeypatch.setattr(config, "_tape_compile_after", None)
    rule, fresh = cost_rule.RULE, cost_rule.Rule(Clock())
    for name in ("clock", "program", "entry", "whole_compile", "chunk_compile", "compiling"):
        monkeypatch.setattr(rule, name, getattr(fresh, name))
    monkeypatch.setattr(backward_chunks, "_CHUNKS", BoundedCache(64))
    monkeypatch.setattr(backward_chunks, "_SEEN", {})
    yield rule


def _warm(monkeypatch: pytest.MonkeyPatch, step: Callable[[], None]) -> None:
    """Run `step` op by op (its programs' first calls), then forget the structures seen."""
    with monkeypatch.context() as m:
        m.setattr(config, "_tape_compile_cold", False)
        step()
    backward_whole._forget()


def _counts() -> tuple[int, int, int]:
    """Whole backwards compiled, one-op programs and kernels made, chunks made."""
    kernels = sum(len(p.kernels) for p in eager.PROGRAMS.values())
    return sg.autograd.compile_count(), len(eager.PROGRAMS) + kernels, len(backward_chunks._CHUNKS)


# ---------------------------------------------------------------- structures never seen


def _tree(rng: np.random.Generator, leaves: int) -> Any:
    if leaves == 1:
        return int(rng.integers(0, 6))
    left = int(rng.integers(1, leaves))
    return (_tree(rng, left), _tree(rng, leaves - left))


def _tree_loss(np_: Any, emb: Any, wl: Any, wr: Any, tree: Any) -> Any:
    def node(t: Any) -> Any:
        if isinstance(t, int):
            return emb[t]
        return np_.tanh(node(t[0]) @ wl + node(t[1]) @ wr)

    return np_.sum(node(tree) ** 2)


def _sentence_loss(np_: Any, emb: Any, wh: Any, words: list[int]) -> Any:
    h = np_.zeros(wh.shape[0])
    for k in words:
        h = np_.tanh(h @ wh + emb[k])
    return np_.sum(h * h)


def _grads(loss: Callable[..., Any], arrays: tuple, arg: Any) -> list[np.ndarray]:
    ts = [sg.tensor(a, requires_grad=True) for a in arrays]
    with sg.autograd.record():
        out = loss(sg, *ts, arg)
    out.backward()
    want = jax.grad(lambda *xs: loss(jnp, *xs, arg), argnums=tuple(range(len(arrays))))(
        *map(jnp.asarray, arrays)
    )
    for t, w in zip(ts, want):
        np.testing.assert_allclose(t.grad.numpy(), w, rtol=1e-10, atol=1e-12)
    return [t.grad.numpy() for t in ts]


@pytest.mark.parametrize("case", ["tree network", "rnn"])
def test_a_structure_never_seen_compiles_nothing(rule: cost_rule.Rule, case: str) -> None:
    """Past the first tape (which compiles the ops' programs and kernels), tapes of new
    structures made of those ops compile nothing: no whole backward, no program or kernel,
    no chunk."""
    rng = np.random.default_rng(0)
    if case == "tree network":
        arrays = (
            RNG.standard_normal((6, 3)),
            RNG.standard_normal((3, 3)) * 0.5,
            RNG.standard_normal((3, 3)) * 0.5,
        )
        loss, first = _tree_loss, ((0, 1), (2, (3, 4)))
        new = [_tree(rng, n) for n in (5, 7, 6, 9, 12)]
    else:
        arrays = (RNG.standard_normal((6, 3)), RNG.standard_normal((3, 3)) * 0.5)
        loss, first = _sentence_loss, [1, 2, 3]
        new = [[int(k) for k in rng.integers(0, 6, n)] for n in (4, 9, 17, 33, 40)]
    _grads(loss, arrays, first)
    before = _counts()
    for arg in new:
        _grads(loss, arrays, arg)
    assert _counts() == before


# ---------------------------------------------------------------- a recurring structure


def _step(x: sg.Tensor) -> None:
    with sg.autograd.record():
        loss = sg.sum(sg.tanh(x * 1.5) ** 2)
    loss.backward()
    want = jax.grad(lambda a: jnp.sum(jnp.tanh(a * 1.5) ** 2))(jnp.asarray(x.numpy()))
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-10)


def _paid() -> cost_rule.Paid:
    """The account of the one structure run since the trie was forgotten."""
    trie = backward_whole._trie
    found = [p for p in trie.paid.values() if p.runs or p.fast_runs]
    assert len(found) == 1
    return found[0]


def test_a_recurring_structure_compiles_once_it_has_paid(
    rule: cost_rule.Rule, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ski rental: op by op while the time spent so (with this backward's) is less than the
    expected compile, compiled from the backward where it reaches it, and never again."""
    x = sg.tensor(RNG.standard_normal(5), requires_grad=True)
    _warm(monkeypatch, lambda: _step(x))
    step = rule.clock.step  # type: ignore[attr-defined]
    rule.entry = Fixed(0.0, 0.0)  # this backward's own share: none
    rule.whole_compile = cost_rule.Estimate(4.5 * step, 0.0)
    compiles = []
    for _ in range(8):
        _step(x)
        compiles.append(sg.autograd.compile_count())
    # An op-by-op backward reads the clock twice: its rent is one step. The sixth backward
    # finds 5 steps paid, at least the 4.5 the compile costs.
    assert np.diff(compiles).tolist() == [0, 0, 0, 0, 1, 0, 0]
    paid = _paid()
    assert paid.op_runs == 5 and paid.rent == pytest.approx(5 * step)


def test_a_compiled_tier_slower_than_op_by_op_is_dropped(
    rule: cost_rule.Rule, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The compiled whole backward is timed on its next runs; slower than the op-by-op runs
    were, it is dropped and the structure runs op by op from then on, never compiled again."""
    x = sg.tensor(RNG.standard_normal(5), requires_grad=True)
    _warm(monkeypatch, lambda: _step(x))
    clock = rule.clock
    rule.entry = cost_rule.Estimate(0.0, 0.0)
    rule.whole_compile = cost_rule.Estimate(0.5 * clock.step, 0.0)  # type: ignore[attr-defined]
    before = sg.autograd.compile_count()
    _step(x)  # op by op: one step paid
    _step(x)  # compiled
    assert sg.autograd.compile_count() == before + 1 and _paid().fast_runs == 0
    clock.step *= 3  # type: ignore[attr-defined]  # the compiled runs take three times as long
    for _ in range(cost_rule.JUDGED_AFTER):
        _step(x)
    paid = _paid()
    assert paid.slower and paid.fast_runs == cost_rule.JUDGED_AFTER and paid.op_runs == 1
    for _ in range(3):
        _step(x)
    assert paid.op_runs == 4 and sg.autograd.compile_count() == before + 1


# ---------------------------------------------------------------- cold and long tapes


def _cold_mlp(n: int) -> None:
    """Two dense layers of shapes no other test uses (their programs never ran)."""
    a, b = RNG.standard_normal((n, n + 1)) * 0.3, RNG.standard_normal((n + 1, 2)) * 0.3
    x = RNG.standard_normal((3, n))
    _grads(lambda np_, a, b, _: np_.mean(np_.tanh(np_.tanh(x @ a) @ b) ** 2), (a, b), None)


def test_a_cold_tape_compiles_whole_when_op_by_op_would_compile_more(
    rule: cost_rule.Rule, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh model's first step calls programs that never ran, each once: op by op would
    compile two programs each, so the whole backward (one compile) is cheaper; not so with
    `tape_compile_cold` off, nor when a program's compile is estimated cheap."""
    rule.program = cost_rule.Estimate(0.0, 0.05)
    rule.whole_compile = cost_rule.Estimate(0.1, 0.01)
    before = sg.autograd.compile_count()
    _cold_mlp(43)  # 6 entries: 2 * 6 * 0.05 = 0.6 s op by op against 0.16 s whole
    assert sg.autograd.compile_count() == before + 1
    monkeypatch.setattr(config, "_tape_compile_cold", False)
    _cold_mlp(47)
    assert sg.autograd.compile_count() == before + 1
    monkeypatch.setattr(config, "_tape_compile_cold", True)
    rule.program = cost_rule.Estimate(0.0, 0.005)  # 2 * 6 * 0.005 = 0.06 s < 0.16 s
    _cold_mlp(53)
    assert sg.autograd.compile_count() == before + 1


def test_programs_that_never_ran_buy_one_whole_compile_not_one_per_structure(
    rule: cost_rule.Rule,
) -> None:
    """A cold tape compiled whole runs none of its one-op programs, so they stay never run:
    the next tape of another structure made of the same ops (here the same layers with
    another reduction) must not be compiled whole on their account again. It runs op by op
    (compiling the programs once, for every structure to come); before, each new structure
    (each new sentence length in the benchmark's RNN row, when a program's compile was
    estimated at 0.15 s) was compiled whole at about 0.5 s a step."""
    rule.program = cost_rule.Estimate(0.0, 0.05)
    rule.whole_compile = cost_rule.Estimate(0.1, 0.01)
    _three_reductions(59)


def test_under_the_fixed_rule_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """`sg.config.tape_compile_after` set: a cold tape is compiled whole at first sight, and
    its programs are charged there as well."""
    monkeypatch.setenv("SRCGRAD_ENABLE_CHECKS", "0")
    monkeypatch.setattr(config, "_tape_compile_after", 2)
    monkeypatch.setattr(config, "_tape_compile_cold", True)
    _three_reductions(61)


def _three_reductions(n: int) -> None:
    """Three tapes of the same two layers (shapes no other test uses: their programs never
    ran) with another reduction each: one whole compile, for the first."""
    before = sg.autograd.compile_count()
    a, b = RNG.standard_normal((n, n + 1)) * 0.3, RNG.standard_normal((n + 1, 2)) * 0.3
    x = RNG.standard_normal((3, n))
    for reduce in ("mean", "sum", "max"):

        def loss(np_: Any, a: Any, b: Any, _: Any) -> Any:
            return getattr(np_, reduce)(np_.tanh(np_.tanh(x @ a) @ b) ** 2)

        _grads(loss, (a, b), None)
    assert sg.autograd.compile_count() == before + 1


def test_a_looping_cold_tape_runs_op_by_op(rule: cost_rule.Rule) -> None:
    """A cold RNN over a long sentence (an LSTM over a long sequence) calls its cell's
    programs once per word: those compiles serve every later length, so they are not
    charged to this structure, and its whole backward (a compile per entry) would cost far
    more than running it: it runs op by op."""
    rule.program = cost_rule.Estimate(0.0, 0.05)
    rule.whole_compile = cost_rule.Estimate(0.1, 0.01)
    before = sg.autograd.compile_count()
    emb, wh = RNG.standard_normal((5, 11)), RNG.standard_normal((11, 11)) * 0.3
    words = [int(k) for k in np.random.default_rng(1).integers(0, 5, 60)]
    _grads(_sentence_loss, (emb, wh), words)  # its cell's 4 programs, 60 times each
    assert sg.autograd.compile_count() == before


# ---------------------------------------------------------------- chunks


def test_recurring_windows_become_chunks_once_they_have_paid(
    rule: cost_rule.Rule, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A window structure met often enough (in this tape and earlier ones) to pay for its
    programs runs as a chunk, with the same gradients."""
    monkeypatch.setattr(backward_chunks, "CHUNK", 4)
    emb, wh = RNG.standard_normal((5, 3)), RNG.standard_normal((3, 3)) * 0.5
    _grads(_sentence_loss, (emb, wh), [1, 2])
    rule.entry = cost_rule.Estimate(0.0, 0.0)  # only the rent counts
    rule.whole_compile = cost_rule.Estimate(1e9, 0.0)  # never whole
    rule.chunk_compile = cost_rule.Estimate(0.0, 2.0 / cost_rule.CHUNK_PROGRAMS)  # 8 s
    words = [0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1]  # 12 cells: 12 windows of one structure
    _grads(_sentence_loss, (emb, wh), words)
    assert len(backward_chunks._CHUNKS) == 0  # 12 windows at 0 s each paid nothing
    rule.entry = cost_rule.Estimate(0.0, 0.25)  # a window of 4 entries: 1 s of rent
    _grads(_sentence_loss, (emb, wh), words[:5])  # 5 windows: 5 s paid, less than 8
    assert len(backward_chunks._CHUNKS) == 0
    _grads(_sentence_loss, (emb, wh), words)  # 5 s paid, and this tape's 12 windows
    assert len(backward_chunks._CHUNKS) == 1


def test_a_dropped_chunk_pays_again_before_it_is_compiled_again(
    rule: cost_rule.Rule, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Buying a chunk spends its rent: once its bounded cache has dropped it, its windows run
    entry by entry until they have paid for its compile again (a network over random trees
    keeps meeting new window structures; rebuying a dropped one at once would compile on
    every drop)."""
    monkeypatch.setattr(backward_chunks, "CHUNK", 4)
    emb, wh = RNG.standard_normal((5, 3)), RNG.standard_normal((3, 3)) * 0.5
    _grads(_sentence_loss, (emb, wh), [1, 2])
    rule.entry = Fixed(0.0, 0.25)  # a window of 4 entries: 1 s of rent
    rule.whole_compile = Fixed(1e9, 0.0)  # never whole
    rule.chunk_compile = Fixed(0.0, 2.0 / cost_rule.CHUNK_PROGRAMS)  # 8 s, as measured
    words = [0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1]  # 12 windows of one structure: 12 s
    _grads(_sentence_loss, (emb, wh), words[:5])  # 5 windows: 5 s, less than 8
    assert len(backward_chunks._CHUNKS) == 0
    _grads(_sentence_loss, (emb, wh), words)  # bought: the 5 s paid are spent
    (cell,) = backward_chunks._CHUNKS._data  # the cell's window structure
    backward_chunks._CHUNKS.clear()  # dropped, as the bound drops the earliest
    _grads(_sentence_loss, (emb, wh), words[:5])  # 5 windows: 5 s, less than 8
    assert backward_chunks._CHUNKS.get(cell) is None
    _grads(_sentence_loss, (emb, wh), words[:5])  # 10 s paid since it was bought
    assert backward_chunks._CHUNKS.get(cell) is not None


def test_tape_compile_after_takes_none_or_a_positive_int(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "_tape_compile_after", 2)
    sg.config.tape_compile_after = None
    assert sg.config.tape_compile_after is None
    sg.config.tape_compile_after = 5
    for bad in (0, -1, True, 2.0, "2"):
        with pytest.raises(ValueError, match="tape_compile_after"):
            sg.config.tape_compile_after = bad


def test_compiles_on_the_pool_are_charged_their_part_of_its_wall_time(
    rule: cost_rule.Rule,
) -> None:
    """Programs compiled ahead together (srcgrad/imperative/compile_ahead.py): the batch's
    wall time is what the backward spent compiling, and each program's estimate moves by its
    part of it, in proportion to the seconds it took on its thread."""
    program, chunk = rule.program.per, rule.chunk_compile.per
    before = rule.compiling
    rule.ahead([(rule.program, 1), (rule.chunk_compile, 16)], lambda: [1.0, 3.0])
    wall = rule.clock.step  # type: ignore[attr-defined]  # two reads of the clock
    w = cost_rule.WEIGHT
    assert rule.compiling - before == pytest.approx(wall)
    assert rule.program.per == pytest.approx(program + (wall / 4 - program) * w)
    per = (max(wall * 3 / 4 - rule.chunk_compile.base, 0.0) / 16 - chunk) * w
    assert rule.chunk_compile.per == pytest.approx(chunk + per)
