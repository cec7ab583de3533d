"""PyTorch idioms that used to go silently wrong: std/var's correction, a list of tensors in
a Module, and sg.zeros outside record() (a jax.Array)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import srcgrad as sg

X = np.array([[1.0, 2.0, 4.0, 7.0], [0.5, -1.0, 3.0, 2.0]])


@pytest.mark.parametrize("name", ["std", "var"])
def test_std_and_var_take_correction_and_ddof(name: str) -> None:
    ours, ref = getattr(sg, name), getattr(np, name)
    for kw in ({"correction": 1}, {"ddof": 1}, {}):
        ddof = kw.get("correction", kw.get("ddof", 0))
        want = ref(X, axis=1, ddof=ddof)
        np.testing.assert_allclose(ours(X, axis=1, **kw), want, rtol=1e-12)
        np.testing.assert_allclose(sg.jit(lambda x: ours(x, axis=1, **kw))(X), want, rtol=1e-12)
        t = sg.tensor(X)  # PyTorch's x.std(correction=1), its default, on a Tensor
        np.testing.assert_allclose(getattr(t, name)(axis=1, **kw).numpy(), want, rtol=1e-12)
        g = sg.grad(lambda x: sg.sum(ours(x, axis=1, **kw)))(X)
        want_g = jax.grad(lambda x: jnp.sum(getattr(jnp, name)(x, axis=1, ddof=ddof)))(X)
        np.testing.assert_allclose(g, want_g, rtol=1e-10)
    nan = np.where(X > 6, np.nan, X)
    np.testing.assert_allclose(
        getattr(sg, "nan" + name)(nan, axis=1, correction=1),
        getattr(np, "nan" + name)(nan, axis=1, ddof=1),
        rtol=1e-12,
    )
    with pytest.raises(sg.SrcgradError, match="ddof=1 and correction=1 were both given"):
        ours(X, ddof=1, correction=1)


class _Cell(sg.nn.Module):
    def __init__(self) -> None:
        self.w = sg.tensor(np.ones((2, 2)), requires_grad=True)
        self.states = [sg.tensor(np.zeros(2))]  # a list of states, as PyTorch code keeps
        self.masks = {"a": sg.tensor(np.ones(2))}
        self.extra = sg.nn.ParameterList([sg.tensor(np.ones(2), requires_grad=True)])
        self.table = sg.nn.ParameterDict({"b": sg.tensor(np.ones(1), requires_grad=True)})
        self.blocks = sg.nn.ModuleList([sg.nn.Linear(2, 2)])


def test_a_plain_list_of_tensors_is_not_parameters_as_in_pytorch() -> None:
    cell = _Cell()
    names = [n for n, _ in cell.named_parameters()]
    assert names == ["w", "extra.0", "table.b", "blocks.0.weight", "blocks.0.bias"]
    assert list(cell.state_dict()) == names


def test_a_tensor_that_requires_grad_in_a_plain_list_is_an_error() -> None:
    cell = _Cell()
    cell.states.append(sg.tensor(np.ones(2), requires_grad=True))  # meant as a parameter?
    with pytest.raises(sg.SrcgradError, match=r"_Cell\.states\.1 .*sg\.nn\.ParameterList"):
        cell.parameters()


def test_sg_zeros_outside_record_is_a_jax_array_that_optimizers_refuse_clearly() -> None:
    w = sg.zeros(3)
    assert isinstance(w, jax.Array) and not isinstance(w, sg.Tensor)
    with sg.autograd.record():
        assert isinstance(sg.zeros(3), sg.Tensor)
    with pytest.raises(sg.SrcgradError, match=r"jax\.Arrays.*sg\.tensor\(value, requires_grad"):
        sg.optim.SGD([w], lr=0.1)
    x = sg.tensor(np.ones(3))
    with sg.autograd.record():
        loss = sg.sum(w * x)
    with pytest.raises(sg.GradientError, match="no inputs in the computational graph"):
        loss.backward()
