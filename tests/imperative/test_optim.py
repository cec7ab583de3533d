"""sg.optim step by step against optax on the same gradients (PyTorch's rules are optax's
for these settings: docs/imperative.md), and in-place updates under no_grad."""

from __future__ import annotations

import contextlib

import numpy as np
import optax
import pytest

import srcgrad as sg

SHAPES = [(3, 4), (4,)]
STEPS = 4


def _grads(step: int) -> list[np.ndarray]:
    rng = np.random.default_rng(100 + step)
    return [rng.standard_normal(s) for s in SHAPES]


def _init() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal(s) for s in SHAPES]


def _run_sg(make) -> list[list[np.ndarray]]:
    params = [sg.tensor(v) for v in _init()]
    for p in params:
        p.attach_grad()
    opt = make(params)
    out = []
    for t in range(STEPS):
        for p, g in zip(params, _grads(t)):
            p.grad = sg.tensor(g)
        opt.step()
        out.append([p.numpy() for p in params])
    return out


def _run_optax(tx) -> list[list[np.ndarray]]:
    params = _init()
    state = tx.init(params)
    out = []
    for t in range(STEPS):
        updates, state = tx.update(_grads(t), state, params)
        params = optax.apply_updates(params, updates)
        out.append([np.asarray(p) for p in params])
    return out


CASES = {
    "sgd": (lambda ps: sg.optim.SGD(ps, lr=0.1), optax.sgd(0.1)),
    "sgd_momentum_wd": (
        lambda ps: sg.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01),
        optax.chain(optax.add_decayed_weights(0.01), optax.sgd(0.1, momentum=0.9)),
    ),
    "sgd_nesterov": (
        lambda ps: sg.optim.SGD(ps, lr=0.05, momentum=0.8, nesterov=True),
        optax.sgd(0.05, momentum=0.8, nesterov=True),
    ),
    "adam": (
        lambda ps: sg.optim.Adam(ps, lr=0.01, betas=(0.8, 0.99), eps=1e-6),
        optax.adam(0.01, b1=0.8, b2=0.99, eps=1e-6),
    ),
    "adam_l2": (
        lambda ps: sg.optim.Adam(ps, lr=0.01, weight_decay=0.1),
        optax.chain(optax.add_decayed_weights(0.1), optax.adam(0.01)),
    ),
    "adamw": (
        lambda ps: sg.optim.AdamW(ps, lr=0.01, weight_decay=0.1),
        optax.adamw(0.01, weight_decay=0.1),
    ),
    "rmsprop": (
        lambda ps: sg.optim.RMSProp(ps, lr=0.01, alpha=0.9, eps=1e-6),
        optax.rmsprop(0.01, decay=0.9, eps=1e-6, eps_in_sqrt=False),
    ),
    "rmsprop_momentum_centered": (
        lambda ps: sg.optim.RMSProp(ps, lr=0.01, alpha=0.9, eps=1e-6, momentum=0.5, centered=True),
        optax.rmsprop(0.01, decay=0.9, eps=1e-6, eps_in_sqrt=False, momentum=0.5, centered=True),
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_matches_optax(name):
    make, tx = CASES[name]
    for got, want in zip(_run_sg(make), _run_optax(tx)):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def test_from_optax_matches_optax():
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(0.02))
    for got, want in zip(_run_sg(lambda ps: sg.optim.from_optax(tx, ps)), _run_optax(tx)):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def test_sgd_dampening_by_formula():
    """PyTorch's dampening (optax has none): b1 = g1; b2 = mu b1 + (1 - d) g2."""
    (got1, _), (got2, _) = [
        s for s in _run_sg(lambda ps: sg.optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.3))
    ][:2]
    p0, g1, g2 = _init()[0], _grads(0)[0], _grads(1)[0]
    b1 = g1
    b2 = 0.9 * b1 + 0.7 * g2
    np.testing.assert_allclose(got1, p0 - 0.1 * b1, rtol=1e-12)
    np.testing.assert_allclose(got2, p0 - 0.1 * b1 - 0.1 * b2, rtol=1e-12)


def test_dynet_form_and_lr_schedule():
    w = sg.tensor([1.0, 2.0])
    w.attach_grad()
    w.grad = sg.tensor([1.0, -1.0])
    sgd = sg.optim.SGD(0.5)
    sgd([w])
    np.testing.assert_allclose(w.numpy(), [0.5, 2.5])
    sgd.lr = 0.25
    sgd([w])
    np.testing.assert_allclose(w.numpy(), [0.25, 2.75])


def test_zero_grad_and_skip_unattached():
    a, b = sg.tensor([1.0, 2.0]), sg.tensor([3.0])
    a.attach_grad()
    opt = sg.optim.SGD([a, b], lr=1.0)
    with sg.autograd.record():
        loss = sg.sum(a * a) + sg.sum(b)
    loss.backward()
    opt.step()
    np.testing.assert_allclose(a.numpy(), [-1.0, -2.0])
    np.testing.assert_allclose(b.numpy(), [3.0])
    opt.zero_grad()
    np.testing.assert_array_equal(a.grad.numpy(), [0.0, 0.0])


def test_bad_params():
    with pytest.raises(sg.SrcgradError, match="parameters must be sg.Tensors"):
        sg.optim.Adam([np.zeros(3)])
    with pytest.raises(sg.SrcgradError, match="Nesterov"):
        sg.optim.SGD([], lr=0.1, nesterov=True)
    with pytest.raises(sg.SrcgradError, match="GradientTransformation"):
        sg.optim.from_optax(object(), [])


@pytest.mark.parametrize(
    "make, name",
    [
        (lambda ps: sg.optim.SGD(ps, lr=-0.1), "learning_rate -0.1"),
        (lambda ps: sg.optim.SGD(-0.1), "learning_rate -0.1"),
        (lambda ps: sg.optim.SGD(ps, lr=0.1, momentum=-0.9), "momentum -0.9"),
        (lambda ps: sg.optim.SGD(ps, lr=0.1, weight_decay=-1e-4), "weight_decay -0.0001"),
        (lambda ps: sg.optim.Adam(ps, lr=-1e-3), "learning_rate -0.001"),
        (lambda ps: sg.optim.Adam(ps, betas=(1.0, 0.999)), "beta_0 1.0"),
        (lambda ps: sg.optim.Adam(ps, betas=(0.9, -0.1)), "beta_1 -0.1"),
        (lambda ps: sg.optim.Adam(ps, eps=-1e-8), "epsilon -1e-08"),
        (lambda ps: sg.optim.AdamW(ps, lr=-1e-3), "learning_rate -0.001"),
        (lambda ps: sg.optim.AdamW(ps, weight_decay=-0.01), "weight_decay -0.01"),
        (lambda ps: sg.optim.RMSProp(ps, lr=-0.01), "learning_rate -0.01"),
        (lambda ps: sg.optim.RMSProp(ps, alpha=-0.5), "alpha -0.5"),
        (lambda ps: sg.optim.RMSProp(ps, momentum=-0.5), "momentum -0.5"),
    ],
)
def test_invalid_hyperparameters_are_value_errors_as_in_pytorch(make, name):
    """The ranges torch.optim checks (a negative learning rate used to ascend silently)."""
    w = sg.tensor([1.0])
    w.attach_grad()
    with pytest.raises(sg.optim.HyperparameterError, match=f"invalid {name}: it must be") as info:
        make([w])
    assert isinstance(info.value, ValueError) and isinstance(info.value, sg.SrcgradError)
    assert "test_optim.py" in str(info.value)
    opt = sg.optim.SGD([w], lr=0.1)
    with pytest.raises(ValueError, match="invalid learning_rate -1"):
        opt.lr = -1


# ---------------------------------------------------------------- PyTorch-style autograd


def test_requires_grad():
    x = sg.tensor([1.0, 2.0])
    assert not x.requires_grad
    x.requires_grad = True
    assert x.requires_grad and x.grad_req == "write"
    with sg.autograd.record():
        y = sg.sum(x**3)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 12.0])
    x.requires_grad = True  # already attached: the gradient stays
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 12.0])
    x.requires_grad = False
    assert x.grad is None and x.grad_req is None
    assert sg.tensor([1.0]).requires_grad_().requires_grad
    assert sg.tensor([1.0], requires_grad=True).grad_req == "write"
    with pytest.raises(sg.SrcgradError, match="floating-point"):
        sg.tensor([1, 2]).requires_grad = True


def test_inplace_update_under_no_grad():
    """The PyTorch loop: w -= lr * w.grad keeps w the same attached Tensor."""
    x = np.array([[1.0, 2.0], [3.0, -1.0]])
    w = sg.tensor([0.5, -0.5])
    w.requires_grad = True
    w0 = w
    ref = np.array([0.5, -0.5])
    for _ in range(3):
        with sg.autograd.record():
            loss = sg.sum(sg.tanh(sg.tensor(x) @ w) ** 2)
        loss.backward()
        with sg.autograd.no_grad():
            w -= 0.1 * w.grad
        z = np.tanh(x @ ref)
        ref = ref - 0.1 * (x.T @ (2 * z * (1 - z**2)))
    assert w is w0 and w.requires_grad
    np.testing.assert_allclose(w.numpy(), ref, rtol=1e-12)
    with sg.autograd.no_grad():
        w *= 2.0
        w += 1.0
        w /= 4.0
    np.testing.assert_allclose(w.numpy(), (ref * 2 + 1) / 4, rtol=1e-12)


def test_inplace_while_recording_is_functional():
    x = sg.tensor([1.0, 2.0])
    x.attach_grad()
    with sg.autograd.record():
        y = x * 1.0
        y0 = y
        y -= x * x
        loss = sg.sum(y)
    assert y is not y0
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), [1 - 2.0, 1 - 4.0])


def test_inplace_errors():
    w = sg.tensor([1.0, 2.0])
    w.attach_grad()
    with pytest.raises(sg.SrcgradError, match=r"-=: the result has shape \(2, 2\)"):
        w -= sg.tensor([[1.0], [2.0]])
    i = sg.tensor([1, 2])
    with pytest.raises(sg.SrcgradError, match="the result is float.*int.*cannot hold"):
        i -= 0.5
    i += 1
    np.testing.assert_array_equal(i.numpy(), [2, 3])
    with sg.autograd.record():
        _ = w * 2.0
        with sg.autograd.no_grad(), pytest.raises(sg.SrcgradError, match="recording in progress"):
            w -= 1.0


def test_assign_agrees_with_inplace_on_a_tensor_the_recording_read():
    """w.assign(v) of a tensor the recording in progress read is the error `w -= ...` there
    is (it returned the gradient at the old value); after backward it updates."""
    w = sg.tensor([1.0, 2.0])
    w.attach_grad()
    for paused in (False, True):
        with sg.autograd.record():
            loss = sg.sum(w * w)
            with (
                sg.autograd.no_grad() if paused else contextlib.nullcontext(),
                pytest.raises(
                    sg.SrcgradError, match=r"tensor.assign\(...\): the recording in progress"
                ),
            ):
                w.assign([5.0, 5.0])
        loss.backward()
        np.testing.assert_allclose(w.grad.numpy(), [2.0, 4.0])
    w.assign([5.0, 5.0])
    np.testing.assert_allclose(w.numpy(), [5.0, 5.0])


def test_inplace_on_recorded_result_drops_history():
    x = sg.tensor([1.0, 2.0])
    x.attach_grad()
    with sg.autograd.record():
        y = x * 3.0
    y += 1.0  # not recording: in place; y is now a constant
    with sg.autograd.record():
        loss = sg.sum(y * x)
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), [4.0, 7.0])


def test_assign_on_recorded_result_drops_history():
    """assign used to keep the old history: the forward read the new value, the gradient
    the old history's (6 x here instead of the constant's [4, 7])."""
    x = sg.tensor([1.0, 2.0])
    x.attach_grad()
    with sg.autograd.record():
        y = x * 3.0
    y.assign(y.numpy() + 1.0)
    with sg.autograd.record():
        loss = sg.sum(y * x)
    loss.backward()
    assert loss.item() == 18.0
    np.testing.assert_allclose(x.grad.numpy(), [4.0, 7.0])
