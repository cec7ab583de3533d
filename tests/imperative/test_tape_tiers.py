"""Imperative mode's backward tiers: a tape differentiated op by op (per-op vjp kernels,
srcgrad/imperative/backward_op_by_op.py), by chunks (recurring windows of entries compiled together,
srcgrad/imperative/backward_chunks.py) and compiled whole (srcgrad/imperative/backward_whole.py)
give the same
gradients, first and second order, which are jax.grad's; a tape of a new shape made of
known ops compiles no whole backward, and its recurring windows one chunk; a structure is
compiled on its `tape_compile_after`-th backward; recording does not grow memory. (Every backward
of the suite also runs both tiers and compares them:
tests/conftest.py sets SRCGRAD_ENABLE_CHECKS.)"""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any, Callable, Iterator

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import srcgrad as sg
from srcgrad.compiled import eager
from srcgrad.imperative import backward_chunks as tape_chunks, backward_op_by_op as tape_vjp
from srcgrad.imperative import compile_ahead
from srcgrad.base.cache import BoundedCache
from srcgrad.base.config import config
from srcgrad.imperative.tape import WeakRef
from support.util import compile_threads

RNG = np.random.default_rng(11)


@pytest.fixture
def tier(request: pytest.FixtureRequest) -> Iterator[None]:
    """Run the test with the tier named by the parameter only (checks off); "chunks" runs
    every window of two entries as a chunk, "op_by_op" none."""
    mp = pytest.MonkeyPatch()
    mp.setenv("SRCGRAD_ENABLE_CHECKS", "0")
    mp.setattr(config, "_tape_compile_after", 1 if request.param == "whole" else 10**9)
    mp.setattr(config, "_tape_compile_cold", request.param == "whole")
    mp.setattr(tape_chunks, "CHUNK", 2 if request.param == "chunks" else 0)
    mp.setattr(tape_chunks, "CHUNK_AFTER", 0)
    yield
    mp.undo()


def _rnn(np_: Any, w: Any, u: Any, xs: Any) -> Any:
    h = np_.zeros(3)
    for t in range(xs.shape[0]):
        h = np_.tanh(w @ h + u * xs[t])
    return np_.sum(h * h)


def _mixed(np_: Any, a: Any, b: Any) -> Any:
    c = a * a - 3.0 * b + b / 2.0  # a read twice, weak numbers both sides
    d = np_.where(c > 0, np_.exp(-c), c) + np_.maximum(a, b)
    e = d[::-1] * (2.0 - d) + (a if np_ is jnp else sg.stop_gradient(a)) * 0.0
    return np_.sum(e[1:] ** 2) + np_.sum(np_.sort(a)) * np_.max(b)


CASES: dict[str, tuple[Callable[..., Any], tuple]] = {
    "rnn": (
        _rnn,
        (RNG.standard_normal((3, 3)) * 0.5, RNG.standard_normal(3), RNG.standard_normal((6, 3))),
    ),
    "mixed": (_mixed, (RNG.standard_normal(5), RNG.standard_normal(5))),
}


def _imperative(f: Callable[..., Any], arrays: tuple, create_graph: bool = False) -> list:
    ts = [sg.tensor(a) for a in arrays]
    for t in ts:
        t.attach_grad()
    with sg.autograd.record():
        loss = f(sg, *ts)
        if create_graph:  # the gradient's squared norm, differentiated again
            gs = sg.autograd.grad(loss, ts, create_graph=True)
            loss = sum(sg.sum(g * g) for g in gs)
    loss.backward()
    return [t.grad.numpy() for t in ts]


#: Both tiers on each case, first and second order; the default run has one case per order.
TIER_CASES = [
    (t, n, o)
    for n, o in (("mixed", 1), ("rnn", 2), ("mixed", 2), ("rnn", 1))
    for t in ("whole", "op_by_op", "chunks")
]


@pytest.mark.parametrize(
    "tier,name,order",
    TIER_CASES[:6] + [pytest.param(*c, marks=pytest.mark.slow) for c in TIER_CASES[6:]],
    indirect=["tier"],
)
def test_each_tier_gives_jax_grads(tier: None, name: str, order: int) -> None:
    f, arrays = CASES[name]
    jf = lambda *xs: f(jnp, *xs)
    if order == 2:
        jf1 = jf
        jf = lambda *xs: sum(
            jnp.sum(g * g) for g in jax.grad(jf1, argnums=tuple(range(len(xs))))(*xs)
        )
    want = jax.grad(jf, argnums=tuple(range(len(arrays))))(*map(jnp.asarray, arrays))
    for g, w in zip(_imperative(f, arrays, create_graph=order == 2), want):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def test_a_wrong_tier_fails_the_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SRCGRAD_ENABLE_CHECKS", "1")
    real = tape_vjp.kernel

    def doubled(*args: Any) -> Any:
        vjp, tree = real(*args)
        return (lambda *xs: tuple(2 * g for g in vjp(*xs))), tree

    monkeypatch.setattr(tape_vjp, "kernel", doubled)
    with pytest.raises(AssertionError, match="tier"):
        _imperative(*CASES["mixed"])


def _sentence_rnn(np_: Any, w: Any, emb: Any, words: list[int]) -> Any:
    """DyNet's RNN: one embedding row per word, a tanh cell per step."""
    h = np_.zeros(3)
    for k in words:
        h = np_.tanh(w @ h + emb[k])
    return np_.sum(h * h)


def _fresh_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """No chunk compiled or window key seen by the tests run before in this process."""
    monkeypatch.setattr(tape_chunks, "_CHUNKS", BoundedCache(64))
    monkeypatch.setattr(tape_chunks, "_SEEN", {})


def _every_window_a_chunk(monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    """Never a whole backward; windows of `chunk` entries, each a chunk at first sight."""
    monkeypatch.setenv("SRCGRAD_ENABLE_CHECKS", "0")
    monkeypatch.setattr(config, "_tape_compile_after", 10**9)
    monkeypatch.setattr(config, "_tape_compile_cold", False)
    monkeypatch.setattr(tape_chunks, "CHUNK", chunk)
    monkeypatch.setattr(tape_chunks, "CHUNK_AFTER", 0)
    _fresh_chunks(monkeypatch)


def test_sentences_of_new_lengths_compile_only_their_chunks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An RNN over a sentence of a length never seen runs on kernels it has (the word index
    is a runtime int: emb[k] is one program for every k): no whole backward, no per-op
    program, and its recurring windows (of four cells, and of the last cells one by one)
    compile once each, as chunks."""
    monkeypatch.setenv("SRCGRAD_ENABLE_CHECKS", "0")
    _fresh_chunks(monkeypatch)
    w, emb = RNG.standard_normal((3, 3)) * 0.5, RNG.standard_normal((7, 3))
    _imperative(lambda np_, w, emb: _sentence_rnn(np_, w, emb, [1, 2, 4]), (w, emb))
    programs, compiles = len(eager.PROGRAMS), sg.autograd.compile_count()
    for words in ([3, 0, 6, 2], [5, 5, 2, 4, 1], [6, 0, 1, 2, 3, 4, 5], [2] * 13):
        got = _imperative(lambda np_, w, emb: _sentence_rnn(np_, w, emb, words), (w, emb))
        want = jax.grad(lambda *a: _sentence_rnn(jnp, *a, words), argnums=(0, 1))(w, emb)
        for g, wg in zip(got, want):
            np.testing.assert_allclose(g, wg, rtol=1e-10)
    assert sg.autograd.compile_count() == compiles
    assert len(eager.PROGRAMS) == programs
    assert len(tape_chunks._CHUNKS) == 2


def test_a_chunk_is_fed_the_python_numbers_of_each_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """A chunk compiled on one tape serves the next with other Python numbers in it (they
    are its inputs, never its constants)."""
    _every_window_a_chunk(monkeypatch, 4)
    w = RNG.standard_normal((3, 3)) * 0.5

    def f(np_: Any, w: Any, c: float) -> Any:
        h = np_.ones(3)
        for _ in range(6):
            h = np_.tanh(w @ h * c + (1.0 - c))
        return np_.sum(h * h)

    for c in (0.5, 0.75, 2.0):
        got = _imperative(lambda np_, w: f(np_, w, c), (w,))[0]
        np.testing.assert_allclose(got, jax.grad(lambda w: f(jnp, w, c))(w), rtol=1e-10)
    assert len(tape_chunks._CHUNKS) > 0


def test_windows_are_aligned_to_a_cell_whose_length_chunk_does_not_divide(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A cell of six entries unrolled over time steps, with windows of four: cut from the
    first entry, the windows would fall at three places in the cell (three structures, each
    a third as often); cut at the cell's period they are whole cells (the fewest cells with
    at least four entries: one), one structure, one chunk, with the gradients of jax.grad."""
    _every_window_a_chunk(monkeypatch, 4)
    w, u = RNG.standard_normal((3, 3)) * 0.5, RNG.standard_normal((3, 3)) * 0.5

    def f(np_: Any, w: Any, u: Any) -> Any:
        h = np_.ones(3)
        for _ in range(12):  # six entries a step: matmul, tanh, matmul, sin, multiply, add
            h = np_.tanh(w @ h) * np_.sin(u @ h) + h
        return np_.sum(h * h)

    got = _imperative(f, (w, u))
    want = jax.grad(lambda w, u: f(jnp, w, u), argnums=(0, 1))(w, u)
    for g, wg in zip(got, want):
        np.testing.assert_allclose(g, wg, rtol=1e-10)
    assert len(tape_chunks._CHUNKS) == 1


def test_a_chunk_that_cannot_be_compiled_runs_entry_by_entry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A kernel lifting a weak number at a dtype the recording did not lift it to (it would
    be a constant of the chunk) sends its windows back to the entry-by-entry path."""
    _every_window_a_chunk(monkeypatch, 2)
    real = tape_chunks.Chunk.__init__

    def lost_lifts(self: Any, template: list, n_reads: int) -> None:
        for e in template:
            for r in e.leaves:
                if type(r) is WeakRef:
                    r.nums = {}
        real(self, template, n_reads)

    monkeypatch.setattr(tape_chunks.Chunk, "__init__", lost_lifts)
    a = RNG.standard_normal(4)
    f = lambda np_, a: np_.sum(np_.sin(a * 1.5) * 2.5 + 0.25)
    got = _imperative(f, (a,))[0]
    np.testing.assert_allclose(got, jax.grad(lambda a: f(jnp, a))(a), rtol=1e-10)
    weak = [
        any(type(r) is WeakRef for e in c.template for r in e.leaves)
        for c in tape_chunks._CHUNKS.values()
    ]
    assert [c.broken for c in tape_chunks._CHUNKS.values()] == weak == [True, True, False]


def test_a_structure_compiles_on_its_nth_backward(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SRCGRAD_ENABLE_CHECKS", "0")
    monkeypatch.setattr(config, "_tape_compile_after", 3)
    monkeypatch.setattr(config, "_tape_compile_cold", False)
    x = sg.tensor(RNG.standard_normal(4))
    x.attach_grad()
    counts = []
    for _ in range(4):
        with sg.autograd.record():
            loss = sg.sum(sg.cos(x) * sg.sinh(x) * 1.25)
        loss.backward()
        counts.append(sg.autograd.compile_count())
    assert counts[0] == counts[1] < counts[2] == counts[3]
    with pytest.raises(ValueError, match="tape_compile_after"):
        sg.config.tape_compile_after = 0


def test_a_cold_structure_compiles_whole_at_first_sight(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh model's first step (shapes no program has run at) compiles its whole backward
    at once, unless `tape_compile_cold` is off; a new structure of calls that have run does
    not. (Shapes of this test only, so the programs are cold whatever ran before.)"""
    monkeypatch.setenv("SRCGRAD_ENABLE_CHECKS", "0")

    def step(n: int, more: bool = False) -> None:
        x, a = RNG.standard_normal((3, n)), RNG.standard_normal((n, n + 2)) * 0.2
        f = lambda np_, a: (
            np_.mean(np_.tanh(np_.tanh(x @ a) * 1.5) ** 2) * (np_.sum(a) if more else 1.0)
        )
        got = _imperative(f, (a,))[0]
        np.testing.assert_allclose(got, jax.grad(lambda a: f(jnp, a))(a), rtol=1e-10)

    counts = [sg.autograd.compile_count()]
    monkeypatch.setattr(config, "_tape_compile_cold", False)
    step(37)  # op by op: its calls' programs run
    counts.append(sg.autograd.compile_count())
    monkeypatch.setattr(config, "_tape_compile_cold", True)
    step(41)  # cold: whole at first sight
    counts.append(sg.autograd.compile_count())
    step(37, more=True)  # a new structure, most of its calls ran: op by op
    counts.append(sg.autograd.compile_count())
    assert np.diff(counts).tolist() == [0, 1, 0]


def test_a_kernel_that_hands_its_cotangent_on_compiles_and_runs_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The vjp of `a + b` (shapes alike, nothing gathered yet) is its cotangent twice: it is
    handed on as it is, with no program compiled or dispatched (a tree network's node adds:
    a sixth of its kernels). Shapes of this test only: the forward add is its one compile."""
    monkeypatch.setenv("SRCGRAD_ENABLE_CHECKS", "0")
    monkeypatch.setattr(config, "_tape_compile_after", 10**9)
    monkeypatch.setattr(config, "_tape_compile_cold", False)
    a, b = (sg.tensor(RNG.standard_normal((7, 29)).astype(np.float32)) for _ in range(2))
    a.attach_grad()
    b.attach_grad()
    seed = jnp.asarray(RNG.standard_normal((7, 29)), jnp.float32)
    with compile_threads() as compiles:
        with sg.autograd.record():
            y = a + b
        y.backward(seed)
    assert len(compiles) == 1
    np.testing.assert_array_equal(a.grad.numpy(), seed)
    np.testing.assert_array_equal(b.grad.numpy(), seed)


@pytest.mark.parametrize("chunk", [0, 4])
def test_a_fresh_models_op_by_op_backward_compiles_its_programs_on_the_pool(
    monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """A first backward op by op (shapes of this test only) compiles the one-op programs
    and vjp kernels it needs, or with windows of `chunk` entries its chunks' forwards and
    vjps, on the pool's threads before it runs them: none compiles when the backward calls
    it, and the gradients are jax.grad's."""
    monkeypatch.setenv("SRCGRAD_ENABLE_CHECKS", "0")
    monkeypatch.setattr(config, "_tape_compile_after", 10**9)
    monkeypatch.setattr(config, "_tape_compile_cold", False)
    monkeypatch.setattr(tape_chunks, "CHUNK", chunk)
    monkeypatch.setattr(tape_chunks, "CHUNK_AFTER", 0)
    monkeypatch.setattr(compile_ahead, "WORKERS", 2)
    x, a = RNG.standard_normal((3, 43 + chunk)), RNG.standard_normal((43 + chunk, 45)) * 0.2
    f = lambda np_, a: np_.mean(np_.tanh(np_.sin(x @ a) * 1.5) ** 2)
    t = sg.tensor(a)
    t.attach_grad()
    with sg.autograd.record():
        loss = f(sg, t)
    with compile_threads() as threads:
        loss.backward()
    np.testing.assert_allclose(t.grad.numpy(), jax.grad(lambda a: f(jnp, a))(a), rtol=1e-10)
    assert len(threads) >= (3 if chunk else 10)  # op by op: 5 programs, 5 kernels at least
    assert all(name.startswith("srcgrad-compile") for name in threads), threads


def test_a_backward_whose_programs_all_ran_plans_no_compiles(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Once a structure's programs have run, its op-by-op backwards look for nothing to
    compile ahead (the dry run of the reverse loop costs about what the loop does), also
    when an entry reads data alone and so never has a kernel (an LSTM's `x[:, t]`)."""
    monkeypatch.setenv("SRCGRAD_ENABLE_CHECKS", "0")
    monkeypatch.setattr(config, "_tape_compile_after", 10**9)
    monkeypatch.setattr(config, "_tape_compile_cold", False)
    monkeypatch.setattr(tape_chunks, "CHUNK", 0)
    monkeypatch.setattr(compile_ahead, "WORKERS", 2)
    planned = []
    plan = compile_ahead._forward_jobs
    monkeypatch.setattr(compile_ahead, "_forward_jobs", lambda *a: planned.append(plan(*a)))
    xs = sg.tensor(RNG.standard_normal((6, 47)))
    w = sg.tensor(RNG.standard_normal(47), requires_grad=True)
    for t in range(4):
        with sg.autograd.record():
            loss = sg.sum(sg.tanh(xs[t] * w) ** 2)
        loss.backward()
        np.testing.assert_allclose(
            w.grad.numpy(),
            jax.grad(lambda w: jnp.sum(jnp.tanh(xs.numpy()[t] * w) ** 2))(w.numpy()),
            rtol=1e-10,
        )
    assert len(planned) == 1


def test_recording_keeps_memory_flat() -> None:
    layers = [sg.nn.Linear(8, 8, act="tanh", seed=i) for i in range(2)]
    params = [p for layer in layers for p in layer.params()]
    sgd = sg.optim.SGD(0.01)
    x = sg.tensor(RNG.standard_normal((4, 8)).astype(np.float32))

    def step(lr: float) -> None:
        with sg.autograd.record():
            h = x
            for layer in layers:
                h = layer(h)
            loss = sg.mean(h * h) * lr  # a new Python number every step
        loss.backward()
        sgd(params)

    for i in range(270):  # the eager interpreter keeps the last 256 numbers on the device
        step(1.0 + i)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for i in range(300):
            step(0.5 + i * 1e-3)
        gc.collect()
        grown = sum(d.size_diff for d in tracemalloc.take_snapshot().compare_to(before, "filename"))
    finally:
        tracemalloc.stop()
    assert grown < 2**20, f"{grown} bytes kept over 300 recorded steps"
