"""PyTorch users' smaller needs: sg.save / sg.load (.npz, no pickle), sg.distributions.
Categorical, .to(device) / .cuda(), and the messages a PyTorch habit meets (dim=, a loop
called on Tensors) with tracebacks that show the user's frames only."""

from __future__ import annotations

import io
import sys
import traceback

import jax
import numpy as np
import pytest

import srcgrad as sg


def _srcgrad_frames(e: BaseException) -> list[str]:
    """srcgrad's frames in `e`'s traceback, less the entry point's own on Python 3.10 (its
    bare `raise` keeps that one: see srcgrad/base/traceback_filter.py)."""
    ours = [
        f.filename
        for f in traceback.extract_tb(e.__traceback__)
        if "/srcgrad/" in f.filename.replace("\\", "/")
    ]
    return ours[1:] if sys.version_info < (3, 11) else ours


@pytest.mark.parametrize("call", ["sum", "mean", "max", "method"])
def test_pytorch_dim_keyword_suggests_axis(call) -> None:
    x = np.ones((2, 3), np.float32)
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'dim'.*use axis=1") as info:
        if call == "method":
            sg.tensor(x).sum(dim=1)
        else:
            getattr(sg, call)(x, dim=1)
    assert "test_pytorch_extras.py" in str(info.value)
    if call != "method":  # (a Tensor method's own frame stays: it is the user's call site)
        assert _srcgrad_frames(info.value) == []
    with pytest.raises(TypeError, match=r"use keepdims=True"):
        sg.sum(x, axis=0, keepdim=True)


@pytest.mark.parametrize("loop", ["while_loop", "fori_loop"])
def test_loop_on_tensors_says_to_write_a_python_loop(loop) -> None:
    c = sg.tensor(np.float32(0))
    with pytest.raises(
        sg.TraceError, match=rf"sg.{loop} builds a loop.*write a Python loop"
    ) as info:
        if loop == "while_loop":
            sg.while_loop(lambda c: c < 3, lambda c: c + 1, c)
        else:
            sg.fori_loop(0, 3, lambda i, c: c + 1, c)
    assert _srcgrad_frames(info.value) == []
    assert float(sg.jit(lambda c: sg.while_loop(lambda c: c < 3, lambda c: c + 1, c))(0.0)) == 3


def test_backward_and_render_errors_show_no_srcgrad_frames() -> None:
    with pytest.raises(sg.GradientError) as info:
        sg.tensor(np.ones(3, np.float32)).backward()
    assert _srcgrad_frames(info.value) == []
    with pytest.raises(sg.SrcgradError, match="sg.render draws a Program") as info2:
        sg.render(42, "picture.svg")
    assert _srcgrad_frames(info2.value) == []


def test_save_load_round_trip_without_pickle(tmp_path) -> None:
    model = sg.nn.Sequential(sg.nn.Linear(3, 4), sg.nn.LSTM(4, 2))
    path = tmp_path / "model.pt"
    sg.save(model.state_dict(), path)
    other = sg.nn.Sequential(sg.nn.Linear(3, 4), sg.nn.LSTM(4, 2))
    other.load_state_dict(sg.load(path))
    for (n, a), (m, b) in zip(model.named_parameters(), other.named_parameters()):
        assert n == m
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    buf = io.BytesIO()
    sg.save({"w": sg.tensor(np.arange(3.0, dtype=np.float32)), "step": 7}, buf)
    buf.seek(0)
    loaded = sg.load(buf)
    assert loaded["step"] == 7 and loaded["w"].dtype == np.float32
    with pytest.raises(sg.SrcgradError, match="entry 'opt' is a dict, not an array"):
        sg.save({"opt": {"lr": 0.1}}, tmp_path / "bad.npz")
    with pytest.raises(sg.SrcgradError, match="pass model.state_dict"):
        sg.save(model, tmp_path / "bad.npz")
    np.save(tmp_path / "obj.npy", np.array([{"code": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="allow_pickle"):
        sg.load(tmp_path / "obj.npy")
    sg.save(tmp_path / "x.npy", np.arange(4.0))  # jnp.save's order: (file, arr)
    got = sg.load(tmp_path / "x.npy")
    assert isinstance(got, jax.Array)
    np.testing.assert_array_equal(got, np.arange(4.0))


PROBS = np.array([[0.2, 0.3, 0.5], [0.1, 0.6, 0.3]], np.float32)


def test_categorical_log_prob_entropy_and_gradient_match_jax() -> None:
    action = np.array([2, 1])

    def reference(p):
        p = p / p.sum(-1, keepdims=True)
        lp = jax.numpy.log(p)
        return jax.numpy.take_along_axis(lp, action[:, None], 1).sum() - (p * lp).sum()

    p = sg.tensor(PROBS)
    p.attach_grad()
    with sg.autograd.record():
        m = sg.distributions.Categorical(p)
        loss = sg.sum(m.log_prob(action)) + sg.sum(m.entropy())
    loss.backward()
    np.testing.assert_allclose(loss.numpy(), reference(PROBS), rtol=1e-6)
    np.testing.assert_allclose(p.grad.numpy(), jax.grad(reference)(PROBS), rtol=1e-5, atol=1e-6)
    m2 = sg.distributions.Categorical(logits=np.log(PROBS) + 3.0)
    np.testing.assert_allclose(np.asarray(m2.probs), PROBS, rtol=1e-6)
    traced = sg.grad(lambda z: sg.sum(sg.distributions.Categorical(logits=z).log_prob(action)))
    want = jax.grad(
        lambda z: jax.numpy.take_along_axis(jax.nn.log_softmax(z), action[:, None], 1).sum()
    )
    np.testing.assert_allclose(traced(PROBS), want(PROBS), rtol=1e-5, atol=1e-6)


def test_categorical_samples_follow_the_probabilities() -> None:
    m = sg.distributions.Categorical(PROBS)
    s = m.sample((4000,), key=jax.random.PRNGKey(1)).numpy()
    assert s.shape == (4000, 2) and s.dtype.kind == "i"
    for row in range(2):
        freq = np.bincount(s[:, row], minlength=3) / 4000
        np.testing.assert_allclose(freq, PROBS[row], atol=0.03)  # ~4 standard errors
    with pytest.raises(sg.SrcgradError, match="either probs or logits"):
        sg.distributions.Categorical()


def test_to_device_and_cuda() -> None:
    model = sg.nn.Linear(2, 3)
    assert model.to("cpu") is model and model.weight.device == jax.devices("cpu")[0]
    x = sg.tensor(np.ones(2, np.float32))
    assert x.to("cpu") is x
    assert x.to(np.float16).dtype == np.float16
    if not any(d.platform == "gpu" for d in jax.devices()):
        with pytest.raises(RuntimeError, match="no gpu device"):
            model.cuda()
        with pytest.raises(RuntimeError, match="no gpu device"):
            x.to("cuda:0")
    with pytest.raises(sg.SrcgradError, match="a device .* got 'npu'"):
        x.to("npu")


def test_sparse_coo_tensor_and_mm_are_dense_and_differentiable() -> None:
    """gcn's torch.sparse_coo_tensor / torch.sparse.mm: duplicates summed (PyTorch's
    coalesce), the gradient in the values against jax.grad, a BCOO accepted."""
    from jax.experimental import sparse as jsparse

    idx = np.array([[0, 1, 1, 2, 0], [1, 0, 2, 2, 1]])
    v0 = np.array([1.0, 2.0, 3.0, 4.0, 5.0], np.float32)
    x = np.arange(6, dtype=np.float32).reshape(3, 2)

    def reference(v):
        a = jax.numpy.zeros((3, 3)).at[idx[0], idx[1]].add(v)
        return ((a @ x) ** 2).sum()

    v = sg.tensor(v0)
    v.attach_grad()
    with sg.autograd.record():
        adj = sg.sparse_coo_tensor(idx, v, (3, 3))
        y = sg.sum(sg.sparse.mm(adj, x) ** 2)
    y.backward()
    np.testing.assert_array_equal(adj.numpy(), [[0, 6, 0], [2, 0, 3], [0, 0, 4]])
    np.testing.assert_allclose(v.grad.numpy(), jax.grad(reference)(v0), rtol=1e-6)
    traced = sg.grad(lambda v: sg.sum(sg.sparse.mm(sg.sparse_coo_tensor(idx, v, (3, 3)), x) ** 2))
    np.testing.assert_allclose(traced(v0), jax.grad(reference)(v0), rtol=1e-6)
    eye = jsparse.BCOO.fromdense(np.eye(3, dtype=np.float32))
    np.testing.assert_array_equal(np.asarray(sg.sparse.spmm(eye, x)), x)
    with pytest.raises(sg.SrcgradError, match="out of the bounds"):
        sg.sparse_coo_tensor(idx, v0, (2, 3))


def test_dropout_functional_training_flag_and_recurrent_dropout() -> None:
    import srcgrad.nn.functional as F

    x = np.ones((200, 50), np.float32)
    assert F.dropout(x, 0.3, training=False) is x
    y = np.asarray(F.dropout(x, 0.3))  # PyTorch's default: training=True
    assert np.all((y == 0) | np.isclose(y, 1 / 0.7))
    assert abs((y == 0).mean() - 0.3) < 0.02  # 10,000 draws: ~4.5 standard errors
    assert np.all(np.asarray(F.dropout(x, 1.0)) == 0)
    with pytest.raises(sg.SrcgradError, match=r"p must be in \[0, 1\]"):
        F.dropout(x, 1.5)
    rnn = sg.nn.GRU(3, 4, num_layers=2, dropout=0.5)
    seq = np.random.default_rng(0).normal(size=(5, 2, 3)).astype(np.float32)
    rnn.eval()
    a, b = rnn(seq)[0].numpy(), rnn(seq)[0].numpy()
    np.testing.assert_array_equal(a, b)
    rnn.train()
    assert not np.allclose(rnn(seq)[0].numpy(), a)  # a mask between the layers


def test_grad_utilities_modules_and_init_shapes() -> None:
    lin = sg.nn.Linear(3, 2)
    lin.weight.grad = sg.tensor(np.array([[3.0, -4.0, 0.5], [0.0, 1.0, -2.0]], np.float32))
    lin.bias.grad = sg.tensor(np.array([5.0, -5.0], np.float32))
    sg.nn.utils.clip_grad_value_(lin.parameters(), 1.0)
    np.testing.assert_array_equal(lin.weight.grad.numpy(), [[1, -1, 0.5], [0, 1, -1]])
    vec = sg.nn.utils.parameters_to_vector(lin.parameters())
    assert vec.shape == (8,)
    sg.nn.utils.vector_to_parameters(np.arange(8.0, dtype=np.float32), lin.parameters())
    np.testing.assert_array_equal(lin.bias.numpy(), [6, 7])
    model = sg.nn.Sequential(sg.nn.Flatten(), sg.nn.Identity(), sg.nn.Unflatten(1, (2, 6)))
    assert model(np.zeros((4, 3, 2, 2), np.float32)).shape == (4, 2, 6)
    seen: list[str] = []
    model.apply(lambda m: seen.append(type(m).__name__))
    assert seen == ["Flatten", "Identity", "Unflatten", "Sequential"]  # children first
    assert [n for n, _ in model.named_modules()] == ["", "0", "1", "2"]
    assert len(model.children()) == 3
    init = sg.nn.init
    t = sg.tensor(np.zeros((4, 6), np.float32))
    np.testing.assert_array_equal(init.eye_(t).numpy(), np.eye(4, 6))
    np.testing.assert_array_equal(init.constant_(t, 0.5).numpy(), np.full((4, 6), 0.5))
    assert (init.sparse_(t, 0.5).numpy() == 0).sum(axis=0).tolist() == [2] * 6
    k = init.dirac_(sg.tensor(np.zeros((3, 2, 3, 3), np.float32))).numpy()
    assert k.sum() == 2 and k[0, 0, 1, 1] == 1 and k[1, 1, 1, 1] == 1


def test_optimizer_state_dict_round_trip() -> None:
    def run(opt_from=None):
        w = sg.tensor(np.array([1.0, -2.0], np.float32))
        w.attach_grad()
        opt = sg.optim.Adam([w], lr=0.1)
        if opt_from is not None:
            opt.load_state_dict(opt_from.state_dict())
            w.assign(opt_from.params[0].numpy())
        for _ in range(2):
            w.grad = sg.tensor(np.array([0.5, 1.0], np.float32))
            opt.step()
        return opt, w

    first, w1 = run()
    _, w2 = run(first)  # two steps more, from the saved moments and step count
    ref, w_ref = run()
    for _ in range(2):
        w_ref.grad = sg.tensor(np.array([0.5, 1.0], np.float32))
        ref.step()
    np.testing.assert_allclose(w2.numpy(), w_ref.numpy(), rtol=1e-6)
