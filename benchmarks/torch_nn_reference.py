"""Reference values from PyTorch for tests/imperative/test_torch_nn_reference.py.

    python -m benchmarks.torch_nn_reference   # needs torch; writes tests/data/torch_nn.npz

From fixed NumPy data and weights: the recurrent layers (state_dicts as PyTorch saves them,
outputs, final states, gradients), the losses and functions of torch.nn.functional (values
and input gradients, every reduction), pooling, the learning-rate schedulers' sequences,
L-BFGS's losses, and the statistics of torch.nn.init on a large tensor. One .npz of flat
keys ("rnn/LSTM/out", ...); PyTorch is not a test dependency: only this script imports it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "torch_nn.npz"
RNN_CASES = {  # name -> (class, kwargs)
    "RNN": ("RNN", dict(bidirectional=True, batch_first=True)),
    "RNN_relu": ("RNN", dict(nonlinearity="relu")),
    "LSTM": ("LSTM", dict(num_layers=2, bidirectional=True, batch_first=True)),
    "LSTM_plain": ("LSTM", dict()),
    "GRU": ("GRU", dict(num_layers=2, batch_first=True)),
}
IN, HID, N, L = 4, 5, 2, 3


def rnn_reference(torch: Any, store: dict[str, np.ndarray]) -> None:
    rng = np.random.default_rng(40)
    for name, (cls, kwargs) in RNN_CASES.items():
        torch.manual_seed(0)
        m = getattr(torch.nn, cls)(IN, HID, **kwargs)
        d = 2 if kwargs.get("bidirectional") else 1
        layers = kwargs.get("num_layers", 1)
        shape = (N, L, IN) if kwargs.get("batch_first") else (L, N, IN)
        x = torch.tensor(rng.normal(size=shape).astype(np.float32), requires_grad=True)
        h0 = torch.tensor(rng.normal(size=(layers * d, N, HID)).astype(np.float32))
        hx: Any = h0
        if cls == "LSTM":
            c0 = torch.tensor(rng.normal(size=(layers * d, N, HID)).astype(np.float32))
            hx = (h0, c0)
            store[f"rnn/{name}/c0"] = c0.numpy()
        out, h = m(x, hx)
        h_n, c_n = h if cls == "LSTM" else (h, None)
        r_out = torch.tensor(rng.normal(size=tuple(out.shape)).astype(np.float32))
        r_h = torch.tensor(rng.normal(size=tuple(h_n.shape)).astype(np.float32))
        loss = (out * r_out).sum() + (h_n * r_h).sum()
        if c_n is not None:
            loss = loss + c_n.sum()
            store[f"rnn/{name}/c_n"] = c_n.detach().numpy()
        loss.backward()
        for k, v in m.state_dict().items():
            store[f"rnn/{name}/state/{k}"] = v.numpy()
            store[f"rnn/{name}/grad/{k}"] = dict(m.named_parameters())[k].grad.numpy()
        store[f"rnn/{name}/x"] = x.detach().numpy()
        store[f"rnn/{name}/h0"] = h0.numpy()
        store[f"rnn/{name}/r_out"], store[f"rnn/{name}/r_h"] = r_out.numpy(), r_h.numpy()
        store[f"rnn/{name}/out"] = out.detach().numpy()
        store[f"rnn/{name}/h_n"] = h_n.detach().numpy()
        store[f"rnn/{name}/grad_x"] = x.grad.numpy()
    for cls in ("RNNCell", "LSTMCell", "GRUCell"):
        torch.manual_seed(1)
        cell = getattr(torch.nn, cls)(IN, HID)
        x = torch.tensor(rng.normal(size=(N, IN)).astype(np.float32), requires_grad=True)
        h = torch.tensor(rng.normal(size=(N, HID)).astype(np.float32))
        c = torch.tensor(rng.normal(size=(N, HID)).astype(np.float32))
        y = cell(x, (h, c)) if cls == "LSTMCell" else cell(x, h)
        total = sum((v * (i + 1)).sum() for i, v in enumerate(y if cls == "LSTMCell" else [y]))
        total.backward()
        for k, v in cell.state_dict().items():
            store[f"cell/{cls}/state/{k}"] = v.numpy()
        for key, v in {"x": x.detach(), "h": h, "c": c, "grad_x": x.grad}.items():
            store[f"cell/{cls}/{key}"] = v.numpy()
        for i, v in enumerate(y if cls == "LSTMCell" else [y]):
            store[f"cell/{cls}/y{i}"] = v.detach().numpy()


#: name -> (function name, the input's kind, kwargs); targets are drawn per kind.
LOSSES: dict[str, tuple[str, str, dict[str, Any]]] = {}
for _red in ("mean", "sum", "none"):
    LOSSES.update(
        {
            f"ce_{_red}": ("cross_entropy", "index", dict(reduction=_red)),
            f"ce_weight_{_red}": ("cross_entropy", "index", dict(reduction=_red, weight=True)),
            f"ce_smooth_{_red}": (
                "cross_entropy",
                "index",
                dict(reduction=_red, label_smoothing=0.2, weight=True),
            ),
            f"ce_probs_{_red}": ("cross_entropy", "probs", dict(reduction=_red)),
            f"ce_probs_smooth_{_red}": (
                "cross_entropy",
                "probs",
                dict(reduction=_red, label_smoothing=0.1, weight=True),
            ),
            f"ce_4d_{_red}": ("cross_entropy", "index4d", dict(reduction=_red)),
            f"nll_{_red}": ("nll_loss", "index", dict(reduction=_red, weight=True)),
            f"bce_{_red}": ("binary_cross_entropy", "prob", dict(reduction=_red, weight=True)),
            f"bcel_{_red}": (
                "binary_cross_entropy_with_logits",
                "binary",
                dict(reduction=_red, pos_weight=True),
            ),
            f"mse_{_red}": ("mse_loss", "real", dict(reduction=_red)),
            f"l1_{_red}": ("l1_loss", "real", dict(reduction=_red)),
            f"smooth_l1_{_red}": ("smooth_l1_loss", "real", dict(reduction=_red, beta=0.5)),
            f"huber_{_red}": ("huber_loss", "real", dict(reduction=_red, delta=0.7)),
            f"kl_{_red}": ("kl_div", "logprob", dict(reduction=_red)),
        }
    )
LOSSES["kl_batchmean"] = ("kl_div", "logprob", dict(reduction="batchmean"))
LOSSES["ce_ignore_2"] = ("cross_entropy", "index2", dict(ignore_index=2, weight=True))
LOSSES["nll_ignore_2_smooth"] = (
    "cross_entropy",
    "index2",
    dict(ignore_index=2, label_smoothing=0.3),
)


def loss_inputs(kind: str, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(input, target) of a loss: (6, 5) scores unless said otherwise."""
    x = rng.normal(size=(6, 5)).astype(np.float32)
    if kind == "index":
        return x, np.array([0, 4, 2, -100, 1, 2], np.int64)
    if kind == "index2":
        return x, np.array([0, 4, 2, 2, 1, 3], np.int64)
    if kind == "index4d":
        return rng.normal(size=(2, 3, 2, 2)).astype(np.float32), rng.integers(0, 3, (2, 2, 2))
    if kind == "probs":
        p = rng.random((6, 5)).astype(np.float32)
        return x, p / p.sum(1, keepdims=True)
    if kind == "prob":
        p = (1 / (1 + np.exp(-x))).astype(np.float32)
        return p, rng.random((6, 5)).astype(np.float32)
    if kind == "binary":
        return x, (rng.random((6, 5)) > 0.5).astype(np.float32)
    if kind == "logprob":
        lp = x - np.log(np.exp(x).sum(1, keepdims=True))
        t = rng.random((6, 5)).astype(np.float32)
        return lp.astype(np.float32), t / t.sum(1, keepdims=True)
    return x, rng.normal(size=(6, 5)).astype(np.float32)


def loss_reference(torch: Any, store: dict[str, np.ndarray]) -> None:
    F = torch.nn.functional
    rng = np.random.default_rng(41)
    for name, (fn, kind, kwargs) in LOSSES.items():
        x, t = loss_inputs(kind, rng)
        kw = dict(kwargs)
        if kw.pop("weight", False):
            kw["weight"] = torch.tensor(rng.random(x.shape[1]).astype(np.float32) + 0.5)
            store[f"loss/{name}/weight"] = kw["weight"].numpy()
        if kw.pop("pos_weight", False):
            kw["pos_weight"] = torch.tensor(rng.random(x.shape[1]).astype(np.float32) + 0.5)
            store[f"loss/{name}/pos_weight"] = kw["pos_weight"].numpy()
        xt = torch.tensor(x, requires_grad=True)
        y = getattr(F, fn)(xt, torch.tensor(t), **kw)
        r = rng.normal(size=tuple(y.shape)).astype(np.float32)
        (y * torch.tensor(r)).sum().backward()
        for key, v in {
            "x": x,
            "t": t,
            "r": r,
            "y": y.detach().numpy(),
            "g": xt.grad.numpy(),
        }.items():
            store[f"loss/{name}/{key}"] = np.asarray(v)


#: Activations: name -> a torch function of one tensor.
def activations(torch: Any) -> dict[str, Callable[[Any], Any]]:
    F = torch.nn.functional
    return {
        "relu": F.relu,
        "relu6": F.relu6,
        "leaky_relu": lambda x: F.leaky_relu(x, 0.1),
        "hardtanh": F.hardtanh,
        "elu": F.elu,
        "selu": F.selu,
        "celu": lambda x: F.celu(x, 0.5),
        "gelu": F.gelu,
        "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
        "silu": F.silu,
        "mish": F.mish,
        "softplus": lambda x: F.softplus(x, beta=2.0, threshold=3.0),
        "softsign": F.softsign,
        "logsigmoid": F.logsigmoid,
        "hardswish": F.hardswish,
        "hardsigmoid": F.hardsigmoid,
        "hardshrink": F.hardshrink,
        "softshrink": F.softshrink,
        "tanhshrink": F.tanhshrink,
        "threshold": lambda x: F.threshold(x, 0.5, -2.0),
        "softmax": lambda x: F.softmax(x, dim=1),
        "log_softmax": lambda x: F.log_softmax(x, dim=0),
        "softmin": lambda x: F.softmin(x, dim=1),
        "glu": lambda x: F.glu(x, dim=1),
        "normalize": lambda x: F.normalize(x, p=3.0, dim=0),
    }


#: Points with every kink of the activations above: 0, +-0.5, +-1, +-3, 6.
KINKS = np.array(
    [
        [-6.5, -3.0, -1.0, -0.5, -0.2, 0.0],
        [0.0, 0.3, 0.5, 1.0, 3.0, 6.0],
        [-2.0, 1.5, 2.5, 4.0, 7.0, -0.7],
    ],
    np.float32,
)


#: F.pad's modes -> their widths (last axis first, as PyTorch lists them).
PADS = {
    "constant": (1, 2, 0, 1),
    "reflect": (2, 1, 1, 2),
    "replicate": (3, 0, 2, 1),
    "circular": (1, 3, 2, 0),
}


def functional_reference(torch: Any, store: dict[str, np.ndarray]) -> None:
    store["act/x"] = KINKS
    for name, fn in activations(torch).items():
        x = torch.tensor(KINKS, requires_grad=True)
        y = fn(x)
        r = torch.tensor(np.linspace(-1, 1, y.numel(), dtype=np.float32).reshape(tuple(y.shape)))
        (y * r).sum().backward()
        store[f"act/{name}/y"] = y.detach().numpy()
        store[f"act/{name}/g"] = x.grad.numpy()
    x = torch.tensor(KINKS, requires_grad=True)
    w = torch.tensor(np.array([0.25, -0.5, 2.0, 0.0, 1.0, 0.1], np.float32))
    y = torch.nn.functional.prelu(x, w)
    (y * torch.tensor(np.linspace(-1, 1, 18, dtype=np.float32).reshape(3, 6))).sum().backward()
    store["prelu/w"], store["prelu/y"], store["prelu/g"] = (
        w.numpy(),
        y.detach().numpy(),
        x.grad.numpy(),
    )
    p = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)
    store["pad/x"] = p
    for mode, widths in PADS.items():
        store[f"pad/{mode}"] = torch.nn.functional.pad(torch.tensor(p), widths, mode=mode).numpy()
    z = np.arange(2 * 8 * 3 * 2, dtype=np.float32).reshape(2, 8, 3, 2)
    store["shuffle/x"] = z
    store["shuffle/y"] = torch.nn.functional.pixel_shuffle(torch.tensor(z), 2).numpy()
    store["unshuffle/y"] = torch.nn.functional.pixel_unshuffle(
        torch.tensor(z[..., :2, :]), 2
    ).numpy()


#: Poolings: name -> (function, its input's spatial shape, kwargs).
POOLS: dict[str, tuple[str, tuple[int, ...], dict[str, Any]]] = {
    "max2d": ("max_pool2d", (7, 6), dict(kernel_size=2)),
    "max2d_pad_ceil": (
        "max_pool2d",
        (7, 6),
        dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    ),
    "max2d_dilated": ("max_pool2d", (7, 6), dict(kernel_size=2, stride=1, dilation=2)),
    "max1d": ("max_pool1d", (9,), dict(kernel_size=3, stride=2, padding=1)),
    "avg2d": ("avg_pool2d", (7, 6), dict(kernel_size=3, stride=2, padding=1)),
    "avg2d_nopad_ceil": (
        "avg_pool2d",
        (7, 6),
        dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    ),
    "avg2d_divisor": ("avg_pool2d", (7, 6), dict(kernel_size=2, divisor_override=3)),
    "avg1d": ("avg_pool1d", (9,), dict(kernel_size=4, stride=3, padding=2, ceil_mode=True)),
    "adaptive2d": ("adaptive_avg_pool2d", (7, 6), dict(output_size=(3, 4))),
    "adaptive1d": ("adaptive_avg_pool1d", (9,), dict(output_size=4)),
    "max3d": ("max_pool3d", (4, 5, 3), dict(kernel_size=2, stride=(1, 2, 1), padding=(1, 0, 1))),
    "avg3d": (
        "avg_pool3d",
        (4, 5, 3),
        dict(kernel_size=(2, 3, 2), count_include_pad=False, padding=1),
    ),
}


def pool_reference(torch: Any, store: dict[str, np.ndarray]) -> None:
    rng = np.random.default_rng(42)
    for name, (fn, spatial, kwargs) in POOLS.items():
        # after a ReLU: many ties (zeros) in the windows, where the gradient's owner matters
        x = np.maximum(rng.normal(size=(2, 3, *spatial)), 0).astype(np.float32)
        xt = torch.tensor(x, requires_grad=True)
        y = getattr(torch.nn.functional, fn)(xt, **kwargs)
        r = rng.normal(size=tuple(y.shape)).astype(np.float32)
        (y * torch.tensor(r)).sum().backward()
        store[f"pool/{name}/x"], store[f"pool/{name}/r"] = x, r
        store[f"pool/{name}/y"], store[f"pool/{name}/g"] = y.detach().numpy(), xt.grad.numpy()
        if fn.startswith("max"):
            _, idx = getattr(torch.nn.functional, fn)(xt, **kwargs, return_indices=True)
            store[f"pool/{name}/idx"] = idx.numpy()


#: Schedulers: name -> (optimizer, scheduler, kwargs); 14 steps each.
SCHEDULERS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "step": ("SGD", "StepLR", dict(step_size=3, gamma=0.5)),
    "multistep": ("SGD", "MultiStepLR", dict(milestones=[2, 5, 5, 9], gamma=0.3)),
    "exponential": ("SGD", "ExponentialLR", dict(gamma=0.8)),
    "cosine": ("SGD", "CosineAnnealingLR", dict(T_max=5, eta_min=0.01)),
    "onecycle_sgd": ("SGD", "OneCycleLR", dict(max_lr=1.0, total_steps=14)),
    "onecycle_adam_3": (
        "Adam",
        "OneCycleLR",
        dict(max_lr=0.5, total_steps=14, three_phase=True, anneal_strategy="linear"),
    ),
    "plateau": ("SGD", "ReduceLROnPlateau", dict(factor=0.5, patience=1, cooldown=1, min_lr=0.02)),
}
METRICS = [5.0, 4.0, 4.0, 4.1, 3.9, 3.9, 3.9, 3.9, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0]


def scheduler_reference(torch: Any, store: dict[str, np.ndarray]) -> None:
    for name, (opt_name, cls, kwargs) in SCHEDULERS.items():
        p = torch.nn.Parameter(torch.zeros(2))
        opt = getattr(torch.optim, opt_name)(
            [p], lr=0.1, **({"momentum": 0.9} if opt_name == "SGD" else {})
        )
        sched = getattr(torch.optim.lr_scheduler, cls)(opt, **kwargs)
        lrs, moms = [opt.param_groups[0]["lr"]], []
        for metric in METRICS:
            opt.step()
            sched.step(metric) if cls == "ReduceLROnPlateau" else sched.step()
            group = opt.param_groups[0]
            lrs.append(group["lr"])
            moms.append(group["betas"][0] if "betas" in group else group["momentum"])
        store[f"sched/{name}/lr"] = np.array(lrs)
        store[f"sched/{name}/momentum"] = np.array(moms)
    store["sched/metrics"] = np.array(METRICS)


def lbfgs_problem(lib: Any, a: Any, b: Any, w: Any) -> Any:
    """The loss L-BFGS minimises: sum((tanh(A w) - b)^2) + 0.1 sum(w^4) (lib: torch or sg)."""
    return lib.sum((lib.tanh(a @ w) - b) ** 2) + 0.1 * lib.sum(w**4)


def lbfgs_reference(torch: Any, store: dict[str, np.ndarray]) -> None:
    rng = np.random.default_rng(43)
    a = rng.normal(size=(6, 3)).astype(np.float32)
    b = rng.normal(size=(6,)).astype(np.float32)
    w0 = rng.normal(size=(3,)).astype(np.float32)
    store["lbfgs/a"], store["lbfgs/b"], store["lbfgs/w0"] = a, b, w0
    for ls in ("none", "strong_wolfe"):
        w = torch.tensor(w0.copy(), requires_grad=True)
        opt = torch.optim.LBFGS(
            [w], lr=0.5, max_iter=4, history_size=3, line_search_fn=None if ls == "none" else ls
        )
        losses: list[float] = []

        def closure() -> Any:
            opt.zero_grad()
            loss = lbfgs_problem(torch, torch.tensor(a), torch.tensor(b), w)
            loss.backward()
            losses.append(loss.item())
            return loss

        evals = []
        for _ in range(2):
            opt.step(closure)
            evals.append(opt.state[w]["func_evals"])
        store[f"lbfgs/{ls}/losses"] = np.array(losses)
        store[f"lbfgs/{ls}/evals"] = np.array(evals)
        store[f"lbfgs/{ls}/w"] = w.detach().numpy()


#: init functions -> kwargs, applied to a (64, 32, 3, 3) tensor: PyTorch's mean and std.
INITS: dict[str, dict[str, Any]] = {
    "uniform_": dict(a=-0.5, b=2.0),
    "normal_": dict(mean=0.3, std=2.0),
    "xavier_uniform_": dict(gain=1.5),
    "xavier_normal_": dict(),
    "kaiming_uniform_": dict(a=5**0.5),
    "kaiming_normal_": dict(mode="fan_out", nonlinearity="relu"),
    "trunc_normal_": dict(std=0.5, a=-0.6, b=0.9),
}


def init_reference(torch: Any, store: dict[str, np.ndarray]) -> None:
    torch.manual_seed(3)
    for name, kwargs in INITS.items():
        t = torch.empty(64, 32, 3, 3)
        getattr(torch.nn.init, name)(t, **kwargs)
        store[f"init/{name}/stats"] = np.array([t.mean(), t.std(), t.min(), t.max()], np.float64)
    store["init/gains"] = np.array(
        [
            torch.nn.init.calculate_gain(n, p)
            for n, p in [("relu", None), ("tanh", None), ("leaky_relu", 0.2), ("selu", None)]
        ]
    )


#: The word-language model of pytorch/examples, small: Embedding -> 2-layer LSTM -> Linear,
#: cross-entropy, SGD with clip_grad_norm_ and an ExponentialLR, the hidden state carried
#: (detached) from batch to batch.
WLM = dict(ntoken=11, ninp=6, nhid=7, nlayers=2, seq=5, batch=3, steps=4, lr=2.0, clip=0.25)


def wlm_reference(torch: Any, store: dict[str, np.ndarray]) -> None:
    torch.manual_seed(5)
    c = WLM
    model = torch.nn.ModuleDict(
        {
            "encoder": torch.nn.Embedding(c["ntoken"], c["ninp"]),
            "rnn": torch.nn.LSTM(c["ninp"], c["nhid"], c["nlayers"]),
            "decoder": torch.nn.Linear(c["nhid"], c["ntoken"]),
        }
    )
    for k, v in model.state_dict().items():
        store[f"wlm/state/{k}"] = v.numpy().copy()
    rng = np.random.default_rng(44)
    data = rng.integers(0, c["ntoken"], (c["steps"], c["seq"] + 1, c["batch"]))
    store["wlm/data"] = data
    opt = torch.optim.SGD(model.parameters(), lr=c["lr"])
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, 0.5)
    zeros = torch.zeros(c["nlayers"], c["batch"], c["nhid"])
    hidden = (zeros, zeros)
    losses, norms = [], []
    for step in range(c["steps"]):
        x, y = torch.tensor(data[step, :-1]), torch.tensor(data[step, 1:])
        hidden = tuple(h.detach() for h in hidden)
        out, hidden = model["rnn"](model["encoder"](x), hidden)
        logits = model["decoder"](out).reshape(-1, c["ntoken"])
        loss = torch.nn.functional.cross_entropy(logits, y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), c["clip"])))
        opt.step()
        sched.step()
        losses.append(loss.item())
    store["wlm/losses"], store["wlm/norms"] = np.array(losses), np.array(norms)
    for k, v in model.state_dict().items():
        store[f"wlm/final/{k}"] = v.numpy().copy()


#: Optimizers new to sg.optim, with parameter groups: name -> (class, groups' options
#: for parameters a and b, defaults).
OPTIMIZERS: dict[str, tuple[str, list[dict[str, Any]], dict[str, Any]]] = {
    "adadelta": ("Adadelta", [{}, {"lr": 0.5}], dict(lr=1.0, rho=0.8, weight_decay=0.01)),
    "adagrad": (
        "Adagrad",
        [{}, {"lr_decay": 0.1}],
        dict(lr=0.1, lr_decay=0.01, weight_decay=0.01, initial_accumulator_value=0.1),
    ),
    "adam_groups": ("Adam", [{"lr": 0.1}, {"betas": (0.5, 0.9)}], dict(lr=0.01, betas=(0.8, 0.99))),
}


def optimizer_problem(lib: Any, a: Any, b: Any, x: Any, y: Any) -> Any:
    """The loss the optimizers take 6 steps on (lib: torch or sg)."""
    return lib.sum((lib.tanh(x @ a) - y) ** 2) + lib.sum(b**2 * lib.sum(x, 0))


def optimizer_reference(torch: Any, store: dict[str, np.ndarray]) -> None:
    rng = np.random.default_rng(45)
    x, y = rng.normal(size=(5, 3)).astype(np.float32), rng.normal(size=(5, 2)).astype(np.float32)
    a0, b0 = rng.normal(size=(3, 2)).astype(np.float32), rng.normal(size=(3,)).astype(np.float32)
    store["opt/x"], store["opt/y"], store["opt/a0"], store["opt/b0"] = x, y, a0, b0
    for name, (cls, groups, defaults) in OPTIMIZERS.items():
        a = torch.tensor(a0.copy(), requires_grad=True)
        b = torch.tensor(b0.copy(), requires_grad=True)
        opt = getattr(torch.optim, cls)(
            [{"params": [a], **groups[0]}, {"params": [b], **groups[1]}], **defaults
        )
        for _ in range(6):
            opt.zero_grad()
            optimizer_problem(torch, a, b, torch.tensor(x), torch.tensor(y)).backward()
            opt.step()
        store[f"opt/{name}/a"], store[f"opt/{name}/b"] = a.detach().numpy(), b.detach().numpy()


def main() -> None:
    import torch

    store: dict[str, np.ndarray] = {}
    for make in (
        rnn_reference,
        loss_reference,
        functional_reference,
        pool_reference,
        scheduler_reference,
        lbfgs_reference,
        init_reference,
        wlm_reference,
        optimizer_reference,
    ):
        make(torch, store)
    store["torch_version"] = np.array(torch.__version__)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT, **store)
    print(f"wrote {OUT}: {len(store)} arrays, {OUT.stat().st_size} bytes")


if __name__ == "__main__":
    main()
