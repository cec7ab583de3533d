"""A Python int in an index of a concrete array (`xs[t]`, `source[i:i + n]`) is a runtime
value: a loop over positions runs one program for every position, and reads what NumPy
reads (slices of every form, negative and out-of-range bounds), with jax.grad's gradients."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import srcgrad as sg
from srcgrad.compiled import eager

X = np.arange(42.0).reshape(6, 7)


def test_a_sliding_window_compiles_one_program_for_every_start() -> None:
    """`x[i:i + 3]` and `x[:, i:i + 2]` over every `i`: the programs made for the first two
    serve the others (before, each new `i` compiled a slice of its own)."""
    x = sg.tensor(X / 40, requires_grad=True)

    def f(np_: Any, x: Any, starts: range) -> Any:
        total = 0.0
        for i in starts:
            total = total + np_.sum(np_.tanh(x[i : i + 3]) * x[:, i : i + 2].sum())
        return total

    with sg.autograd.record():
        f(sg, x, range(2))
    made = len(eager.PROGRAMS)
    with sg.autograd.record():
        loss = f(sg, x, range(4))
    assert len(eager.PROGRAMS) == made
    loss.backward()
    want = jax.grad(lambda x: f(jnp, x, range(4)))(jnp.asarray(X / 40, jnp.float32))
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-5)


@pytest.mark.parametrize(
    "index",
    [
        np.s_[2:5],
        np.s_[-3:],
        np.s_[:-2],
        np.s_[3:100],
        np.s_[-100:2],
        np.s_[5:2],
        np.s_[::2],
        np.s_[1:6:2],
        np.s_[4:1:-1],
        np.s_[:],
        np.s_[0:6],
        np.s_[1:3, 2:6],
        np.s_[2, 1:4],
        np.s_[-1, -4:-1],
        np.s_[np.int64(1) : np.int64(4)],
        np.s_[..., 2:5],
        np.s_[None, 1:3],
    ],
)
def test_slices_read_what_numpy_reads(index: Any) -> None:
    x = sg.tensor(X, requires_grad=True)
    with sg.autograd.record():
        y = x[index]
        loss = sg.sum(y * y)
    np.testing.assert_array_equal(y.detach().numpy(), X.astype(np.float32)[index])
    np.testing.assert_array_equal(x.detach()[index].numpy(), X.astype(np.float32)[index])
    if y.size:
        loss.backward()
        want = jax.grad(lambda a: jnp.sum(a[index] ** 2))(jnp.asarray(X, jnp.float32))
        np.testing.assert_array_equal(x.grad.numpy(), want)
