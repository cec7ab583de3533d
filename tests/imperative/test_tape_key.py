"""Imperative mode's compiled-backward cache: tapes that differ in structure (an attr, a shape,
a dtype, the wiring, which values were recorded, the head) never share a compiled backward;
equal ones compile once; `sg.clear_caches()` forgets the trie of structures; the trie is bounded."""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import srcgrad as sg
from srcgrad.core import dispatch
from srcgrad.imperative import backward_whole as tape_compile

RNG = np.random.default_rng(7)


def _backward(f: Callable[..., Any], *arrays: np.ndarray) -> list[np.ndarray]:
    """The gradients of `f` (on Tensors) with respect to every argument, by sg.autograd."""
    ts = [sg.tensor(a) for a in arrays]
    for t in ts:
        t.attach_grad()
    with sg.autograd.record():
        loss = f(*ts)
    loss.backward()
    return [t.grad.numpy() for t in ts]


def _check(f: Callable[..., Any], *arrays: np.ndarray) -> None:
    """sg.autograd's gradients of `f` equal jax.grad's (f written over sg or jnp by module)."""
    got = _backward(lambda *ts: f(sg, *ts), *arrays)
    want = jax.grad(lambda *xs: f(jnp, *xs), argnums=tuple(range(len(arrays))))(
        *[jnp.asarray(a) for a in arrays]
    )
    for g, w, a in zip(got, want, arrays):
        assert g.dtype == a.dtype
        np.testing.assert_allclose(g, w, rtol=1e-5 if a.dtype == np.float32 else 1e-12)


def _compiles_of(runs: list[Callable[[], None]]) -> int:
    """Backward compiles made by `runs`, each run twice in turn (the second round must reuse)."""
    before = sg.autograd.compile_count()
    for run in runs:
        run()
    first = sg.autograd.compile_count() - before
    for run in runs:
        run()
    assert sg.autograd.compile_count() - before == first, "an equal structure compiled again"
    return first


def _log_softmax_sum(axis: int) -> Callable[..., Any]:
    def f(np_: Any, x: Any) -> Any:
        return np_.sum(
            np_.tanh(x)
            * (sg.log_softmax(x, axis=axis) if np_ is sg else jax.nn.log_softmax(x, axis=axis))
        )

    return f


def test_structures_differing_only_in_an_attr_do_not_share() -> None:
    xv = RNG.standard_normal((3, 3))  # square: both axes give the same shapes
    assert (
        _compiles_of(
            [lambda: _check(_log_softmax_sum(0), xv), lambda: _check(_log_softmax_sum(1), xv)]
        )
        == 2
    )


def test_structures_differing_only_in_a_shape_or_a_dtype_do_not_share() -> None:
    f = lambda np_, x, w: np_.sum(np_.tanh(x @ w) * x.sum())
    a, b = RNG.standard_normal((2, 3)), RNG.standard_normal((3, 3))
    assert (
        _compiles_of(
            [
                lambda: _check(f, a, b),
                lambda: _check(f, RNG.standard_normal((4, 3)), b),
                lambda: _check(f, a.astype(np.float32), b.astype(np.float32)),
            ]
        )
        == 3
    )


def test_structures_differing_only_in_wiring_do_not_share() -> None:
    a, b = RNG.standard_normal(4), RNG.standard_normal(4)
    left = lambda np_, x, y: np_.sum(np_.sin(x * y + x))
    right = lambda np_, x, y: np_.sum(np_.sin(x * y + y))
    assert _compiles_of([lambda: _check(left, a, b), lambda: _check(right, a, b)]) == 2


def test_reading_an_input_again_after_attach_grad_is_other_wiring() -> None:
    xv = RNG.standard_normal(3)

    def run(reattach: bool) -> np.ndarray:
        x = sg.tensor(xv)
        x.attach_grad()
        with sg.autograd.record():
            y = x * x
            if reattach:
                x.attach_grad()  # x is a new variable from here on: y's reads are not it
            z = sg.sum(y * x)
        z.backward()
        return x.grad.numpy()

    before = sg.autograd.compile_count()
    for _ in range(2):
        np.testing.assert_allclose(run(False), 3 * xv**2, rtol=1e-12)
        np.testing.assert_allclose(run(True), xv**2, rtol=1e-12)
    assert sg.autograd.compile_count() - before == 2


def test_structures_differing_only_in_which_values_were_recorded_do_not_share() -> None:
    """Copied history brings its recorded values: `tanh(x)` recorded as its own op has a
    value on the tape, inside one recorded call it has none (and backward recomputes it)."""
    xv = RNG.standard_normal(5)
    composite = lambda t: sg.tanh(t) * t

    def run(separately: bool) -> tuple[np.ndarray, list[str]]:
        x = sg.tensor(xv)
        x.attach_grad()
        with sg.autograd.record():
            y = sg.tanh(x) * x if separately else dispatch.call(composite, (x,), {})
        with sg.autograd.record():
            z = sg.sum(y * x)  # y's ops are copied onto this tape, with the values y's had
        ops = [op.type for op in sg.autograd.tape().global_block().ops]
        z.backward()
        return x.grad.numpy(), ops

    want = jax.grad(lambda x: jnp.sum(jnp.tanh(x) * x * x))(jnp.asarray(xv))
    before = sg.autograd.compile_count()
    (g_known, ops_known), (g_inner, ops_inner) = run(True), run(False)
    assert ops_known == ops_inner  # the same ops: only which values were recorded differs
    np.testing.assert_allclose(g_known, want, rtol=1e-12)
    np.testing.assert_allclose(g_inner, want, rtol=1e-12)
    assert sg.autograd.compile_count() - before == 2
    run(True), run(False)
    assert sg.autograd.compile_count() - before == 2


def test_two_heads_of_one_tape_do_not_share() -> None:
    xv = RNG.standard_normal(3)
    x = sg.tensor(xv)
    x.attach_grad()
    with sg.autograd.record():
        y = sg.sum(sg.sin(x))
        z = sg.sum(sg.sin(x) * x)
    before = sg.autograd.compile_count()
    y.backward(retain_graph=True)
    np.testing.assert_allclose(x.grad.numpy(), np.cos(xv), rtol=1e-12)
    z.backward(retain_graph=True)
    np.testing.assert_allclose(x.grad.numpy(), np.cos(xv) * xv + np.sin(xv), rtol=1e-12)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), np.cos(xv), rtol=1e-12)
    # y's first backward also computes the recorded forward (nothing was read before it); the
    # later ones are fed the values it computed: one program each, none shared between heads
    assert sg.autograd.compile_count() - before == 3


def test_clear_caches_forgets_the_trie_and_its_compiled_backwards() -> None:
    xv = RNG.standard_normal(3)
    f = lambda np_, x: np_.sum(np_.tanh(x) ** 2)
    before = sg.autograd.compile_count()
    _check(f, xv)
    _check(f, xv)
    assert sg.autograd.compile_count() - before == 1
    assert tape_compile._trie.root.children
    x = sg.tensor(xv)
    x.attach_grad()
    with sg.autograd.record():  # a live tape recorded before the clear
        live = sg.sum(sg.tanh(x) ** 2)
    sg.clear_caches()
    assert not tape_compile._trie.root.children and tape_compile._trie.size == 1
    _check(f, xv)
    assert sg.autograd.compile_count() - before == 2
    live.backward()  # its trie's compiled backward was dropped as well
    assert sg.autograd.compile_count() - before == 3
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.tanh(xv) * (1 - np.tanh(xv) ** 2), rtol=1e-12)


def test_the_trie_is_bounded_for_ever_new_structures(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tape_compile, "TRIE_LIMIT", 12)
    xv = RNG.standard_normal(3)
    tries = set()
    for i in range(8):  # each integer exponent is another structure: 4 new nodes per tape
        _check(lambda np_, x: np_.sum(np_.sin(x) ** (i + 1)), xv)
        trie = tape_compile._trie
        tries.add(id(trie))
        assert trie.size <= 12  # new tapes enter a new trie past the limit
    assert len(tries) > 1
    for _ in range(2):  # the second enters the trie that the first renewed, if it did
        _check(lambda np_, x: np_.sum(np_.sin(x) * 31.0), xv)
    before = sg.autograd.compile_count()
    _check(lambda np_, x: np_.sum(np_.sin(x) * 31.0), xv)  # cached
    assert sg.autograd.compile_count() == before


def test_arrays_met_by_recorded_ops_are_inputs_fed_their_values() -> None:
    """An array (not a Tensor) that a recorded op reads is a tape input keyed by its shape and
    dtype: a new value compiles nothing new, and the backward reads that value."""
    x = sg.tensor(RNG.standard_normal(4))
    x.attach_grad()
    before = sg.autograd.compile_count()
    for _ in range(4):
        c = RNG.standard_normal(4)
        with sg.autograd.record():
            loss = sg.sum(sg.sin(x * c))
        loss.backward()
        np.testing.assert_allclose(x.grad.numpy(), c * np.cos(x.numpy() * c), rtol=1e-12)
    assert sg.autograd.compile_count() - before <= 1
