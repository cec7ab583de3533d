"""Recorded calls are computed when needed: reading a value computes what it depends on,
backward computes the rest (compiled: with the gradients in one program), and the values
and gradients are those of eager computation whichever way they were computed."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import srcgrad as sg
from srcgrad.base.errors import SrcgradError
from srcgrad.imperative.tensor import PENDING

RNG = np.random.default_rng(7)


def _model(x: Any, w: Any) -> tuple[Any, Any, Any]:
    h = sg.tanh(x @ w)
    side = sg.exp(h)  # read by nobody but the test
    return h, side, sg.sum(h * h)


def _jax_loss(x: Any, w: Any) -> Any:
    return jnp.sum(jnp.tanh(x @ w) ** 2)


@pytest.fixture
def data() -> tuple[np.ndarray, np.ndarray]:
    return RNG.standard_normal((4, 3)), RNG.standard_normal((3, 2))


def test_recording_computes_nothing_and_a_read_computes_only_what_it_needs(data: Any) -> None:
    xv, wv = data
    x, w = sg.tensor(xv), sg.tensor(wv)
    w.attach_grad()
    with sg.autograd.record():
        h, side, loss = _model(x, w)
        assert all(type(t._v) is PENDING for t in (h, side, loss))
        assert h.shape == (4, 2) and h.dtype == np.float64  # known without computing
        np.testing.assert_allclose(h.detach().numpy(), np.tanh(xv @ wv), rtol=1e-12)
        assert type(side._v) is PENDING and type(loss._v) is PENDING and loss._tape.lazy
        side.detach(), loss.detach()
        assert not loss._tape.lazy  # every call computed: backward is fed the values
    loss.backward()
    np.testing.assert_allclose(w.grad.numpy(), jax.grad(_jax_loss, 1)(xv, wv), rtol=1e-12)
    # after backward every recorded Tensor holds its value, read or not
    assert type(side._v) is not PENDING
    np.testing.assert_allclose(side.numpy(), np.exp(np.tanh(xv @ wv)), rtol=1e-12)
    np.testing.assert_allclose(loss.item(), np.sum(np.tanh(xv @ wv) ** 2), rtol=1e-12)


@pytest.mark.parametrize("read", ["nothing", "head", "middle"])
def test_each_tier_gives_the_same_values_whatever_was_read(data: Any, read: str) -> None:
    """Three sightings of one structure (op by op, then compiled twice), with the forward
    read before backward or not: the compiled backward fed the values and the one that
    computes the forward give jax.grad's gradient and the eager values."""
    xv, wv = data
    w = sg.tensor(wv)
    w.attach_grad()
    for _ in range(3):
        x = sg.tensor(xv)
        with sg.autograd.record():
            h, side, loss = _model(x, w)
        if read == "head":
            loss.item()
        elif read == "middle":
            h.numpy()
        loss.backward()
        np.testing.assert_allclose(w.grad.numpy(), jax.grad(_jax_loss, 1)(xv, wv), rtol=1e-12)
        np.testing.assert_allclose(side.numpy(), np.exp(np.tanh(xv @ wv)), rtol=1e-12)


def test_a_bad_call_still_raises_at_the_call(data: Any) -> None:
    x = sg.tensor(RNG.standard_normal((4, 3)))
    x.attach_grad()
    with sg.autograd.record():
        with pytest.raises(SrcgradError, match=r"test_lazy_record\.py:\d+"):
            x @ sg.tensor(np.ones((2, 2)))


def test_retain_graph_and_create_graph_read_the_computed_values() -> None:
    xv = RNG.standard_normal(3)
    x = sg.tensor(xv)
    x.attach_grad()
    with sg.autograd.record():
        y = sg.sum(sg.sin(x) * x)
    y.backward(retain_graph=True)
    g1 = x.grad.numpy()
    y.backward(create_graph=True)
    with sg.autograd.record():
        gg = sg.sum(x.grad * x.grad)
    gg.backward()
    f = lambda x: jnp.sum(jnp.sin(x) * x)
    np.testing.assert_allclose(g1, jax.grad(f)(xv), rtol=1e-12)
    want = jax.grad(lambda x: jnp.sum(jax.grad(f)(x) ** 2))(xv)
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-10)


def test_a_whole_backward_returns_only_what_live_tensors_hold(data: Any) -> None:
    """The compiled backward that computes the forward returns the results of live Tensors
    (here `side` and the loss, not `h`, which nobody holds); those read right afterwards."""
    from srcgrad.imperative import backward_whole as tape_compile

    xv, wv = data
    w = sg.tensor(wv)
    w.attach_grad()
    for _ in range(3):
        with sg.autograd.record():
            h, side, loss = _model(sg.tensor(xv), w)
        del h
        loss.backward()
        np.testing.assert_allclose(w.grad.numpy(), jax.grad(_jax_loss, 1)(xv, wv), rtol=1e-12)
        np.testing.assert_allclose(side.numpy(), np.exp(np.tanh(xv @ wv)), rtol=1e-12)
        np.testing.assert_allclose(loss.item(), _jax_loss(xv, wv), rtol=1e-12)
    fused = [
        s.entry
        for s in tape_compile._trie.entries.values()
        if s.entry is not None and s.entry.forward
    ]
    assert len(fused) == 1 and len(fused[0].forward) == 2, [c.forward for c in fused]
