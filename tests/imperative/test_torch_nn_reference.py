"""sg.nn / sg.optim's PyTorch names against PyTorch's own values (tests/data/torch_nn.npz,
written by benchmarks/torch_nn_reference.py from the same weights and data): recurrent
layers loading PyTorch's state_dicts as they are, the losses and functions of F with every
reduction, pooling, the schedulers' lr sequences, L-BFGS and nn.init's statistics. PyTorch
is not needed here.
"""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np
import pytest

import srcgrad as sg
import srcgrad.nn.functional as F
from benchmarks.torch_nn_reference import (
    INITS,
    LOSSES,
    OPTIMIZERS,
    PADS,
    POOLS,
    RNN_CASES,
    SCHEDULERS,
    WLM,
    lbfgs_problem,
    optimizer_problem,
)

DATA = Path(__file__).resolve().parent.parent / "data" / "torch_nn.npz"


@pytest.fixture(scope="module")
def ref() -> dict[str, np.ndarray]:
    with np.load(DATA) as z:
        return {k: z[k] for k in z.files}


def close(got, want, rtol=2e-5, atol=2e-6) -> None:
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=atol)


# ---------------------------------------------------------------- recurrent layers


@pytest.mark.parametrize("name", sorted(RNN_CASES))
def test_recurrent_layer_loads_pytorch_state_dict(ref, name) -> None:
    cls, kwargs = RNN_CASES[name]
    pre = f"rnn/{name}/"
    state = {k[len(pre + "state/") :]: v for k, v in ref.items() if k.startswith(pre + "state/")}
    m = getattr(sg.nn, cls)(4, 5, **kwargs)
    assert sorted(n for n, _ in m.named_parameters()) == sorted(state)
    m.load_state_dict(state)  # PyTorch's names, shapes and gate order, as they are
    x = sg.tensor(ref[pre + "x"])
    x.attach_grad()
    hx = ref[pre + "h0"] if cls != "LSTM" else (ref[pre + "h0"], ref[pre + "c0"])
    with sg.autograd.record():
        out, h = m(x, hx)
        h_n, c_n = h if cls == "LSTM" else (h, None)
        loss = sg.sum(out * ref[pre + "r_out"]) + sg.sum(h_n * ref[pre + "r_h"])
        if c_n is not None:
            loss = loss + sg.sum(c_n)
    loss.backward()
    close(out.numpy(), ref[pre + "out"])
    close(h_n.numpy(), ref[pre + "h_n"])
    if c_n is not None:
        close(c_n.numpy(), ref[pre + "c_n"])
    close(x.grad.numpy(), ref[pre + "grad_x"], rtol=1e-4, atol=1e-5)
    for k, p in m.named_parameters():
        close(p.grad.numpy(), ref[pre + "grad/" + k], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("cls", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cells_match_pytorch(ref, cls) -> None:
    pre = f"cell/{cls}/"
    cell = getattr(sg.nn, cls)(4, 5)
    cell.load_state_dict(
        {k[len(pre + "state/") :]: v for k, v in ref.items() if k.startswith(pre + "state/")}
    )
    x = sg.tensor(ref[pre + "x"])
    x.attach_grad()
    with sg.autograd.record():
        y = (
            cell(x, (ref[pre + "h"], ref[pre + "c"]))
            if cls == "LSTMCell"
            else cell(x, ref[pre + "h"])
        )
        ys = list(y) if cls == "LSTMCell" else [y]
        total = sum(sg.sum(v * (i + 1)) for i, v in enumerate(ys))
    total.backward()
    for i, v in enumerate(ys):
        close(v.numpy(), ref[pre + f"y{i}"])
    close(x.grad.numpy(), ref[pre + "grad_x"], rtol=1e-4, atol=1e-5)


def test_recurrent_defaults_shapes_and_errors() -> None:
    """PyTorch's init (uniform in +-1/sqrt(H)), an unbatched input, zero initial states."""
    m = sg.nn.GRU(3, 16, num_layers=2, dropout=0.5)
    w = m.weight_hh_l1.numpy()
    assert w.shape == (48, 16) and np.abs(w).max() <= 0.25 and np.abs(w).max() > 0.2
    m.eval()  # dropout between layers off: the unbatched input gives the batched rows
    x = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)
    out, h = m(x)
    out_b, h_b = m(x[:, None, :])
    assert out.shape == (4, 16) and h.shape == (2, 16)
    close(out.numpy(), out_b.numpy()[:, 0])
    with pytest.raises(sg.nn.RecurrentError, match="input_size"):
        m(np.zeros((4, 2, 5), np.float32))
    with pytest.raises(sg.nn.RecurrentError, match=r"Expected hidden size \(2, 2, 16\)"):
        m(np.zeros((4, 2, 3), np.float32), np.zeros((1, 2, 16), np.float32))


# ---------------------------------------------------------------- losses and functions


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_loss_matches_pytorch(ref, name) -> None:
    fn, _, kwargs = LOSSES[name]
    pre = f"loss/{name}/"
    kw = dict(kwargs)
    for key in ("weight", "pos_weight"):
        if kw.pop(key, False):
            kw[key] = ref[pre + key]
    x = sg.tensor(ref[pre + "x"])
    x.attach_grad()
    with sg.autograd.record():
        y = getattr(F, fn)(x, ref[pre + "t"], **kw)
        total = sg.sum(y * ref[pre + "r"])
    total.backward()
    close(y.numpy(), ref[pre + "y"])
    close(x.grad.numpy(), ref[pre + "g"], rtol=1e-4, atol=1e-6)


def test_loss_modules_and_errors(ref) -> None:
    pre = "loss/ce_smooth_mean/"
    loss = sg.nn.CrossEntropyLoss(ref[pre + "weight"], label_smoothing=0.2)
    close(loss(sg.tensor(ref[pre + "x"]), ref[pre + "t"]).numpy(), ref[pre + "y"])
    assert list(loss.parameters()) == []  # the class weights are a constant
    close(
        sg.nn.MSELoss(reduction="sum")(ref["loss/mse_sum/x"], ref["loss/mse_sum/t"]),
        ref["loss/mse_sum/y"],
    )
    with pytest.raises(F.FunctionalError, match="target 7 is out of bounds for 5 classes"):
        F.cross_entropy(np.zeros((2, 5), np.float32), np.array([1, 7]))
    with pytest.raises(F.FunctionalError, match="reduction must be one of"):
        F.mse_loss(np.zeros(2), np.zeros(2), reduction="avg")


def test_loss_gradient_matches_jax_grad() -> None:
    """cross_entropy with label smoothing and ignore_index, differentiated by srcgrad's
    traced path, against jax.grad of the same formula in jax.numpy."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(5, 4)).astype(np.float32)
    t = np.array([0, 3, -100, 1, 3])

    def reference(x):
        logp = jax.nn.log_softmax(x, axis=1)
        keep = t != -100
        nll = -jax.numpy.take_along_axis(logp, np.where(keep, t, 0)[:, None], 1)[:, 0]
        smooth = -logp.sum(1)
        per = 0.9 * nll + 0.1 / 4 * smooth
        return jax.numpy.sum(per * keep) / keep.sum()

    got = sg.grad(lambda x: F.cross_entropy(x, t, label_smoothing=0.1))(x)
    close(got, jax.grad(reference)(x), rtol=1e-5, atol=1e-7)


def test_every_activation_matches_pytorch(ref) -> None:
    names = {k.split("/")[1] for k in ref if k.startswith("act/") and k != "act/x"}
    for name in sorted(names):
        _activation(ref, name)


def _activation(ref, name: str) -> None:
    fns = {
        "leaky_relu": lambda x: F.leaky_relu(x, 0.1),
        "celu": lambda x: F.celu(x, 0.5),
        "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
        "softplus": lambda x: F.softplus(x, beta=2.0, threshold=3.0),
        "threshold": lambda x: F.threshold(x, 0.5, -2.0),
        "softmax": lambda x: F.softmax(x, dim=1),
        "log_softmax": lambda x: F.log_softmax(x, dim=0),
        "softmin": lambda x: F.softmin(x, dim=1),
        "glu": lambda x: F.glu(x, dim=1),
        "normalize": lambda x: F.normalize(x, p=3.0, dim=0),
    }
    fn = fns[name] if name in fns else getattr(F, name)
    x = sg.tensor(ref["act/x"])
    x.attach_grad()
    with sg.autograd.record():
        y = fn(x)
        r = np.linspace(-1, 1, y.size, dtype=np.float32).reshape(y.shape)
        total = sg.sum(y * r)
    total.backward()
    close(y.numpy(), ref[f"act/{name}/y"], atol=1e-6)
    # atol: jax.nn.gelu's float32 derivative at -6.5 is 6e-6 (PyTorch's 0; the true one 1e-9)
    close(x.grad.numpy(), ref[f"act/{name}/g"], rtol=1e-4, atol=1e-5)


def test_prelu_and_pad_match_pytorch(ref) -> None:
    x = sg.tensor(ref["act/x"])
    x.attach_grad()
    with sg.autograd.record():
        y = F.prelu(x, ref["prelu/w"])
        total = sg.sum(y * np.linspace(-1, 1, 18, dtype=np.float32).reshape(3, 6))
    total.backward()
    close(y.numpy(), ref["prelu/y"])
    close(x.grad.numpy(), ref["prelu/g"])
    for mode, widths in PADS.items():
        np.testing.assert_array_equal(
            np.asarray(F.pad(ref["pad/x"], widths, mode=mode)), ref[f"pad/{mode}"]
        )


def test_pixel_shuffle_matches_pytorch(ref) -> None:
    z = ref["shuffle/x"]
    np.testing.assert_array_equal(np.asarray(F.pixel_shuffle(z, 2)), ref["shuffle/y"])
    np.testing.assert_array_equal(
        np.asarray(F.pixel_unshuffle(z[..., :2, :], 2)), ref["unshuffle/y"]
    )
    np.testing.assert_array_equal(np.asarray(sg.nn.PixelShuffle(2)(z)), ref["shuffle/y"])


# ---------------------------------------------------------------- pooling


@pytest.mark.parametrize("name", sorted(POOLS))
def test_pooling_matches_pytorch(ref, name) -> None:
    fn, _, kwargs = POOLS[name]
    pre = f"pool/{name}/"
    x = sg.tensor(ref[pre + "x"])
    x.attach_grad()
    with sg.autograd.record():
        y = getattr(F, fn)(x, **kwargs)
        total = sg.sum(y * ref[pre + "r"])
    total.backward()
    close(y.numpy(), ref[pre + "y"])
    # ties (zeros after a ReLU): the gradient goes to the first largest element alone
    close(x.grad.numpy(), ref[pre + "g"])
    if pre + "idx" in ref:
        _, idx = getattr(F, fn)(ref[pre + "x"], **kwargs, return_indices=True)
        np.testing.assert_array_equal(np.asarray(idx), ref[pre + "idx"])


def test_pooling_modules_take_pytorchs_argument_order(ref) -> None:
    pre = "pool/max2d_pad_ceil/"
    m = sg.nn.MaxPool2d(3, 2, 1, 1, False, True)  # kernel, stride, padding, dilation, indices, ceil
    close(np.asarray(m(ref[pre + "x"])), ref[pre + "y"])


# ---------------------------------------------------------------- schedulers and L-BFGS


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_scheduler_lr_sequence_matches_pytorch(ref, name) -> None:
    opt_name, cls, kwargs = SCHEDULERS[name]
    p = sg.tensor(np.zeros(2, np.float32))
    p.attach_grad()
    opt = getattr(sg.optim, opt_name)(
        [p], lr=0.1, **({"momentum": 0.9} if opt_name == "SGD" else {})
    )
    sched = getattr(sg.optim.lr_scheduler, cls)(opt, **kwargs)
    lrs, moms = [opt.param_groups[0]["lr"]], []
    for metric in ref["sched/metrics"]:
        p.grad = sg.tensor(np.ones(2, np.float32))
        opt.step()
        sched.step(metric) if cls == "ReduceLROnPlateau" else sched.step()
        group = opt.param_groups[0]
        lrs.append(group["lr"])
        moms.append(group["betas"][0] if "betas" in group else group["momentum"])
        assert sched.get_last_lr() == [group["lr"]]
    close(lrs, ref[f"sched/{name}/lr"], rtol=1e-12, atol=0)
    close(moms, ref[f"sched/{name}/momentum"], rtol=1e-12, atol=0)


def test_changing_the_lr_compiles_nothing_new() -> None:
    p = sg.tensor(np.zeros(3, np.float32))
    p.attach_grad()
    opt = sg.optim.Adam([p], lr=0.1)
    sched = sg.optim.lr_scheduler.ExponentialLR(opt, 0.5)
    p.grad = sg.tensor(np.ones(3, np.float32))
    opt.step()
    jitted = opt._jitted  # a QuickJit: the update's jit with quick options, and its plain one
    traces = lambda: jitted.quick._cache_size() + jitted.plain._cache_size()
    before = traces()
    for _ in range(3):
        sched.step()
        opt.step()
    assert traces() == before
    assert opt.param_groups[0]["lr"] == 0.1 * 0.5**3


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_with_param_groups_matches_pytorch(ref, name) -> None:
    cls, groups, defaults = OPTIMIZERS[name]
    a, b = sg.tensor(ref["opt/a0"].copy()), sg.tensor(ref["opt/b0"].copy())
    a.attach_grad()
    b.attach_grad()
    opt = getattr(sg.optim, cls)(
        [{"params": [a], **groups[0]}, {"params": [b], **groups[1]}], **defaults
    )
    assert opt.param_groups[1]["lr"] == groups[1].get("lr", defaults["lr"])
    x, y = ref["opt/x"], ref["opt/y"]
    for _ in range(6):
        opt.zero_grad()
        with sg.autograd.record():
            loss = optimizer_problem(sg, a, b, x, y)
        loss.backward()
        opt.step()
    close(a.numpy(), ref[f"opt/{name}/a"], rtol=1e-5, atol=1e-6)
    close(b.numpy(), ref[f"opt/{name}/b"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("ls", ["none", "strong_wolfe"])
def test_lbfgs_matches_pytorch(ref, ls) -> None:
    a, b = sg.tensor(ref["lbfgs/a"]), sg.tensor(ref["lbfgs/b"])
    w = sg.tensor(ref["lbfgs/w0"].copy())
    w.attach_grad()
    opt = sg.optim.LBFGS(
        [w], lr=0.5, max_iter=4, history_size=3, line_search_fn=None if ls == "none" else ls
    )
    losses = []

    def closure():
        opt.zero_grad()
        with sg.autograd.record():
            loss = lbfgs_problem(sg, a, b, w)
        loss.backward()
        losses.append(loss.item())
        return loss

    evals = []
    for _ in range(2):
        opt.step(closure)
        evals.append(opt.lbfgs["func_evals"])
    np.testing.assert_array_equal(evals, ref[f"lbfgs/{ls}/evals"])
    close(losses, ref[f"lbfgs/{ls}/losses"], rtol=1e-5)
    close(w.numpy(), ref[f"lbfgs/{ls}/w"], rtol=1e-4, atol=1e-5)


def test_lbfgs_needs_a_closure() -> None:
    w = sg.tensor(np.zeros(2, np.float32))
    w.attach_grad()
    with pytest.raises(sg.SrcgradError, match="needs a closure"):
        sg.optim.LBFGS([w]).step()


# ---------------------------------------------------------------- nn.init


@pytest.mark.parametrize("name", sorted(INITS))
def test_init_statistics_match_pytorch(ref, name) -> None:
    t = sg.tensor(np.zeros((64, 32, 3, 3), np.float32))
    out = getattr(sg.nn.init, name)(t, **INITS[name], generator=np.random.default_rng(7))
    assert out is t and t.shape == (64, 32, 3, 3) and t.dtype == np.float32
    v = t.numpy()
    mean, std, lo, hi = ref[f"init/{name}/stats"]
    assert abs(v.mean() - mean) < 0.03 * std  # 18k draws: the mean's error is ~0.007 std
    assert abs(v.std(ddof=1) / std - 1) < 0.03
    if "uniform" in name or "trunc" in name:
        assert lo - 0.01 * std <= v.min() and v.max() <= hi + 0.01 * std


def test_init_gains_and_orthogonal(ref) -> None:
    gains = [
        sg.nn.init.calculate_gain(n, p)
        for n, p in [("relu", None), ("tanh", None), ("leaky_relu", 0.2), ("selu", None)]
    ]
    close(gains, ref["init/gains"], rtol=1e-12)
    w = sg.nn.init.orthogonal_(sg.tensor(np.zeros((3, 8), np.float32)), gain=2.0).numpy()
    close(w @ w.T, 4 * np.eye(3), atol=1e-5)
    with pytest.raises(sg.nn.init.InitError, match="fan in and fan out"):
        sg.nn.init.xavier_uniform_(sg.tensor(np.zeros(3, np.float32)))


# ---------------------------------------------------------------- a whole PyTorch example


class WordLanguageModel(sg.nn.Module):
    """pytorch/examples' word_language_model, as ported: Embedding -> LSTM -> Linear."""

    def __init__(self, ntoken: int, ninp: int, nhid: int, nlayers: int):
        self.encoder = sg.nn.Embedding(ntoken, ninp)
        self.rnn = sg.nn.LSTM(ninp, nhid, nlayers)
        self.decoder = sg.nn.Linear(nhid, ntoken)

    def forward(self, x, hidden):
        out, hidden = self.rnn(self.encoder(x), hidden)
        return self.decoder(out), hidden


def test_word_language_model_trains_as_pytorch(ref) -> None:
    """PyTorch's initial state_dict loaded as is, then SGD + clip_grad_norm_ + ExponentialLR
    with the hidden state carried (detached) between batches: PyTorch's losses, gradient
    norms and final weights."""
    c = WLM
    model = WordLanguageModel(c["ntoken"], c["ninp"], c["nhid"], c["nlayers"])
    state = {k[len("wlm/state/") :]: v for k, v in ref.items() if k.startswith("wlm/state/")}
    model.load_state_dict(state)
    opt = sg.optim.SGD(model.parameters(), lr=c["lr"])
    sched = sg.optim.lr_scheduler.ExponentialLR(opt, 0.5)
    zeros = np.zeros((c["nlayers"], c["batch"], c["nhid"]), np.float32)
    hidden = (sg.tensor(zeros), sg.tensor(zeros))
    losses, norms = [], []
    data = ref["wlm/data"]
    for step in range(c["steps"]):
        x, y = data[step, :-1], data[step, 1:]
        hidden = tuple(h.detach() for h in hidden)
        with sg.autograd.record():
            logits, hidden = model(x, hidden)
            loss = F.cross_entropy(sg.reshape(logits, (-1, c["ntoken"])), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        norms.append(float(sg.nn.utils.clip_grad_norm_(model.parameters(), c["clip"]).item()))
        opt.step()
        sched.step()
        losses.append(loss.item())
    close(losses, ref["wlm/losses"], rtol=1e-5)
    close(norms, ref["wlm/norms"], rtol=1e-4)
    for k, p in model.named_parameters():
        close(p.numpy(), ref[f"wlm/final/{k}"], rtol=1e-4, atol=1e-5)
