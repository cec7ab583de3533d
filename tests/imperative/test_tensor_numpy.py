"""NumPy reading a Tensor: refused inside record() where it would silently drop a gradient.

NumPy's result is a constant: `np.exp(t)` inside `record()` used to give the gradient of
`sum(np.exp(t) * t)` as e (the `* t` alone) instead of 2e. Every path NumPy converts through
(`__array__`: ufuncs, np.asarray/np.array, array functions, jnp.asarray; `.numpy()`) raises,
naming the user's line and the sg op to use; outside `record()` they all keep working, and
Python numbers (`item`, `float`, `tolist`) stay allowed while recording, as in PyTorch.
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import srcgrad as sg
from srcgrad.base.errors import SrcgradError


def _line() -> int:
    return sys._getframe(1).f_lineno


def _attached(name: str | None = None) -> sg.Tensor:
    t = sg.tensor(np.array([1.0, 0.5]), name=name)
    t.attach_grad()
    return t


def _jnp_reads_tensors() -> bool:
    """Whether jnp.asarray converts a Tensor through `__array__` (JAX 0.4.30 refuses it)."""
    try:
        jnp.asarray(sg.tensor([1.0]))
    except TypeError:
        return False
    return True


#: Each NumPy path that converts a Tensor, with the sg op the error must suggest (None: none).
PATHS = [
    ("np.exp", lambda t: np.exp(t), "sg.exp"),
    ("np.asarray", lambda t: np.asarray(t), None),
    ("np.array", lambda t: np.array(t), None),
    ("np.dot", lambda t: np.dot(t, t), "sg.dot"),
    ("np.float64", lambda t: np.float64(t), None),
    *([("jnp.asarray", lambda t: jnp.asarray(t), None)] if _jnp_reads_tensors() else []),
    ("numpy()", lambda t: t.numpy(), None),
]


def test_np_exp_of_an_attached_tensor_under_record_raises_at_the_users_line() -> None:
    t = _attached("w")
    with sg.autograd.record():
        with pytest.raises(SrcgradError) as e:
            line = _line() + 1
            sg.sum(np.exp(t) * t)
        with pytest.raises(SrcgradError) as alone:
            np.exp(t)  # the only call on its line: Python 3.10 finds it without columns
    for err, at in ((e.value, line), (alone.value, line + 2)):
        assert err.loc is not None and err.loc.filename == __file__ and err.loc.lineno == at
        assert "'w'" in str(err) and "silently lost" in str(err) and "detach()" in str(err)
    assert "use sg.exp instead of np.exp" in str(alone.value), str(alone.value)
    if sys.version_info >= (3, 11):  # the call's columns single out np.exp inside sg.sum(...)
        assert "use sg.exp instead of np.exp" in str(e.value), str(e.value)


def test_the_fix_the_error_names_gives_the_right_gradient() -> None:
    t = _attached()
    with sg.autograd.record():
        loss = sg.sum(sg.exp(t) * t)
    loss.backward()
    want = jax.grad(lambda x: jnp.sum(jnp.exp(x) * x))(np.array([1.0, 0.5]))
    np.testing.assert_allclose(t.grad.numpy(), want, rtol=1e-6)


@pytest.mark.parametrize("name,convert,suggest", PATHS, ids=[p[0] for p in PATHS])
def test_every_numpy_path_refuses_a_differentiated_tensor_under_record(
    name, convert, suggest
) -> None:
    t = _attached()
    with sg.autograd.record():
        y = t * 2.0  # a recorded result is differentiated too
        for value in (t, y):
            with pytest.raises(SrcgradError, match="silently lost") as e:
                convert(value)
            if suggest:
                assert suggest in str(e.value)
            assert e.value.loc is not None and e.value.loc.filename == __file__


@pytest.mark.parametrize("name,convert,suggest", PATHS, ids=[p[0] for p in PATHS])
def test_numpy_paths_work_where_no_gradient_is_lost(name, convert, suggest) -> None:
    t = _attached()
    want = convert(sg.tensor([1.0, 0.5]))  # a Tensor that nothing differentiates
    np.testing.assert_allclose(convert(t), want, rtol=1e-6)  # outside record()
    with sg.autograd.record():
        y = t * 1.0
        np.testing.assert_allclose(convert(t.detach()), want, rtol=1e-6)  # a constant copy
        with sg.autograd.pause():
            np.testing.assert_allclose(convert(y), want, rtol=1e-6)
    np.testing.assert_allclose(convert(y), want, rtol=1e-6)  # the recording is over


def test_masks_and_indices_stay_readable_while_recording() -> None:
    """A recorded bool or int result carries no gradient: NumPy reading it loses nothing
    (`y[x < 0] = 0.0` reads the mask)."""
    t = _attached()
    with sg.autograd.record():
        mask, idx = t < 0.8, sg.argmax(t)
        np.testing.assert_array_equal(np.asarray(mask), [False, True])
        assert int(np.asarray(idx)) == 0
        loss = sg.sum(sg.where(mask, t, 0.0) * 3.0)
    loss.backward()
    np.testing.assert_allclose(t.grad.numpy(), [0.0, 3.0])


def test_python_numbers_stay_allowed_while_recording() -> None:
    """PyTorch allows .item() (and float(), .tolist()) on a tensor that requires grad: a
    number for logging or a Python `if`, which cannot take part in the recorded math."""
    t = _attached()
    with sg.autograd.record():
        loss = sg.sum(t * t)
        assert loss.item() == pytest.approx(1.25)
        assert float(loss) == pytest.approx(1.25)
        assert t.tolist() == [1.0, 0.5]
        assert (loss > 1.0).item() is True
    loss.backward()
    np.testing.assert_allclose(t.grad.numpy(), [2.0, 1.0])
