"""sg.nn's Module layers against jax.numpy / lax references: forward values and gradients."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import srcgrad as sg
from support.util import compile_threads


def _grads_of(model, x, loss=lambda y: sg.sum(y * y)):
    with sg.autograd.record():
        out = loss(model(x))
    out.backward()
    return out


CONV_DN = {1: ("NCH", "OIH", "NCH"), 2: ("NCHW", "OIHW", "NCHW"), 3: ("NCDHW", "OIDHW", "NCDHW")}


@pytest.mark.parametrize(
    "rank,stride,padding,dilation",
    [
        (1, 2, 1, 1),
        (2, 1, "same", 2),
        (3, 2, 1, 1),
        pytest.param(2, (2, 1), (1, 0), 1, marks=pytest.mark.slow),
        pytest.param(3, 1, 0, (2, 1, 1), marks=pytest.mark.slow),
    ],
)
def test_conv_layers_match_lax(rank, stride, padding, dilation):
    layer = {1: sg.nn.Conv1d, 2: sg.nn.Conv2d, 3: sg.nn.Conv3d}[rank](
        2, 3, 3, stride=stride, padding=padding, dilation=dilation, seed=3, dtype="float64"
    )
    x = np.random.default_rng(rank).standard_normal((2, 2) + (7,) * rank)
    w, b = layer.weight.numpy(), layer.bias.numpy()
    strides = (stride,) * rank if isinstance(stride, int) else stride
    dil = (dilation,) * rank if isinstance(dilation, int) else dilation
    if padding == "same":
        pads = "SAME"
    else:
        p = (padding,) * rank if isinstance(padding, int) else padding
        pads = [(q, q) for q in p]

    def ref(w, b):
        y = lax.conv_general_dilated(
            x, w, strides, pads, rhs_dilation=dil, dimension_numbers=CONV_DN[rank]
        )
        return y + b.reshape((-1,) + (1,) * rank)

    with sg.autograd.record():
        y = layer(sg.tensor(x))
        loss = sg.sum(y * y)
    loss.backward()
    np.testing.assert_allclose(y.numpy(), ref(w, b), rtol=1e-10, atol=1e-12)
    gw, gb = jax.grad(lambda w, b: jnp.sum(ref(w, b) ** 2), argnums=(0, 1))(w, b)
    np.testing.assert_allclose(layer.weight.grad.numpy(), gw, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(layer.bias.grad.numpy(), gb, rtol=1e-9, atol=1e-10)


def test_conv_bad_input():
    with pytest.raises(sg.SrcgradError, match=r"Conv2d: the input must be \(N, C, 2 spatial"):
        sg.nn.Conv2d(1, 1, 3)(sg.tensor(np.zeros((3, 5, 5), np.float32)))
    with pytest.raises(sg.SrcgradError, match="kernel_size needs 3 values"):
        sg.nn.Conv3d(1, 1, (3, 3))


def test_layernorm_matches_jax():
    ln = sg.nn.LayerNorm((3, 4), dtype="float64")
    rng = np.random.default_rng(0)
    ln.weight.assign(rng.standard_normal((3, 4)))
    ln.bias.assign(rng.standard_normal((3, 4)))
    x = rng.standard_normal((2, 3, 4))

    def ref(w, b):
        m = x.mean(axis=(-2, -1), keepdims=True)
        v = ((x - m) ** 2).mean(axis=(-2, -1), keepdims=True)
        return (x - m) / jnp.sqrt(v + 1e-5) * w + b

    w, b = ln.weight.numpy(), ln.bias.numpy()
    np.testing.assert_allclose(ln(sg.tensor(x)).numpy(), ref(w, b), rtol=1e-10)
    xt = sg.tensor(x)
    xt.attach_grad()
    _grads_of(ln, xt, lambda y: sg.sum(sg.sin(y)))
    gw, gb = jax.grad(lambda w, b: jnp.sum(jnp.sin(ref(w, b))), argnums=(0, 1))(w, b)
    np.testing.assert_allclose(ln.weight.grad.numpy(), gw, rtol=1e-9)
    np.testing.assert_allclose(ln.bias.grad.numpy(), gb, rtol=1e-9)
    with pytest.raises(sg.SrcgradError, match=r"does not end in \(3, 4\)"):
        ln(sg.tensor(np.zeros((4, 3))))


def test_embedding_matches_take():
    emb = sg.nn.Embedding(6, 3, seed=1, dtype="float64")
    idx = np.array([[0, 5], [5, 2]])
    w = emb.weight.numpy()
    np.testing.assert_array_equal(emb(idx).numpy(), w[idx])
    _grads_of(emb, sg.tensor(idx))
    np.testing.assert_allclose(emb.weight.grad.numpy(), jax.grad(lambda w: jnp.sum(w[idx] ** 2))(w))
    with pytest.raises(sg.SrcgradError, match="indices must be integers"):
        emb(np.array([0.5]))


def test_embedding_index_out_of_range():
    """Concrete indices outside [0, n) are an IndexError, as PyTorch's (a NaN row before);
    under jax.jit (no values to check) jnp.take's fill mode: NaN past the end, a negative
    index from the end, as docs/imperative.md says."""
    emb = sg.nn.Embedding(5, 3, seed=0, dtype="float64")
    w = emb.weight.numpy()
    for bad, shown in (([0, 5], "index 5"), ([[1], [-1]], "index -1"), (sg.tensor([9]), "index 9")):
        with pytest.raises(
            IndexError, match=f"Embedding: {shown} is out of range for 5 embeddings"
        ) as info:
            emb(bad)
        assert isinstance(info.value, sg.nn.EmbeddingIndexError)
        assert isinstance(info.value, sg.SrcgradError) and "test_nn_layers.py" in str(info.value)
    with pytest.raises(IndexError, match="index 7"):
        sg.grad(lambda v: sg.sum(emb(np.array([1, 7])) * v))(np.ones(3))
    got = jax.jit(lambda i: emb(i).value())(np.array([4, 5, -1]))
    np.testing.assert_array_equal(got, jnp.take(w, np.array([4, 5, -1]), axis=0))
    assert np.isnan(got[1]).all() and (got[2] == w[4]).all()


def test_dropout():
    x = sg.tensor(np.ones((200, 50)))
    drop = sg.nn.Dropout(0.25, seed=7)
    y = drop(x).numpy()
    keep = jax.random.bernoulli(jax.random.split(jax.random.PRNGKey(7))[1], 0.75, (200, 50))
    np.testing.assert_array_equal(y, np.where(keep, 1 / 0.75, 0.0))
    assert not np.array_equal(drop(x).numpy(), y)  # a new mask per call
    xt = sg.tensor(np.ones((4, 5)))
    xt.attach_grad()
    with sg.autograd.record():
        out = drop(xt)
        loss = sg.sum(out)
    loss.backward()
    np.testing.assert_array_equal(xt.grad.numpy(), out.numpy())  # mask / (1 - p)
    drop.eval()
    assert drop(x) is x
    with pytest.raises(sg.SrcgradError, match=r"p must be in \[0, 1\]"):
        sg.nn.Dropout(1.5)
    assert np.all(sg.nn.Dropout(1.0)(x).numpy() == 0)  # PyTorch's p=1: all dropped


class Block(sg.nn.Module):
    def __init__(self):
        self.layers = [sg.nn.Linear(3, 4, act="tanh", seed=0), sg.nn.Dropout(0.5)]
        self.heads = {"a": sg.nn.Linear(4, 1, seed=1)}
        self.scale = sg.tensor(np.ones(1, np.float32))
        self.scale.requires_grad = True
        self.note = "not a parameter"

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.heads["a"](x) * self.scale


def test_module_collects_recursively():
    model = sg.nn.Sequential(Block(), sg.nn.LayerNorm(1))
    names = [n for n, _ in model.named_parameters()]
    assert names == [
        "0.layers.0.weight",
        "0.layers.0.bias",
        "0.heads.a.weight",
        "0.heads.a.bias",
        "0.scale",
        "1.weight",
        "1.bias",
    ]
    assert len(model.parameters()) == 7 and model.params() == model.parameters()
    assert all(m.training for m in model.modules())
    model.eval()
    assert not any(m.training for m in model.modules()) and len(model.modules()) == 6
    x = sg.tensor(np.ones((2, 3), np.float32))
    with sg.autograd.record():
        loss = sg.sum(model[0](x) ** 2)
    loss.backward()
    assert float(sg.sum(sg.abs(model[0].layers[0].weight.grad))) > 0
    model.zero_grad()
    assert all(not np.any(p.grad.numpy()) for p in model.parameters())


def test_state_dict_round_trip():
    a = sg.nn.Sequential(sg.nn.Linear(3, 4, seed=0), sg.nn.Linear(4, 2, seed=1))
    b = sg.nn.Sequential(sg.nn.Linear(3, 4, seed=5), sg.nn.Linear(4, 2, seed=6))
    state = a.state_dict()
    assert list(state) == ["0.weight", "0.bias", "1.weight", "1.bias"]
    w_before = b[0].weight
    b.load_state_dict(state)
    assert b[0].weight is w_before and w_before.requires_grad
    for (_, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        np.testing.assert_array_equal(p.numpy(), q.numpy())
    state["0.weight"][:] = 0  # a copy: the model is not changed
    assert np.any(a[0].weight.numpy())
    with pytest.raises(sg.SrcgradError, match=r"missing \['1.bias'\]"):
        b.load_state_dict({k: v for k, v in a.state_dict().items() if k != "1.bias"})
    with pytest.raises(sg.SrcgradError, match=r"0.bias has shape \(5,\)"):
        b.load_state_dict({**a.state_dict(), "0.bias": np.zeros(5)})


@pytest.mark.parametrize("din,dout", [(3, 3), (4, 2)])
def test_a_pytorch_state_dict_loads_as_pytorchs_layer(din, dout):
    """PyTorch's nn.Linear holds weight (out, in) and computes x @ W.T + b: its state_dict
    gives the same layer here (a square one used to load silently transposed)."""
    rng = np.random.default_rng(din * 10 + dout)
    w, b = rng.standard_normal((dout, din)), rng.standard_normal(dout)
    layer = sg.nn.Linear(din, dout, dtype="float64")
    assert layer.weight.shape == (dout, din)
    layer.load_state_dict({"weight": w, "bias": b})
    x = rng.standard_normal((5, din))
    np.testing.assert_allclose(layer(sg.tensor(x)).numpy(), x @ w.T + b, rtol=1e-12)
    np.testing.assert_array_equal(layer.state_dict()["weight"], w)


def test_linear_keeps_its_signature():
    a, b = sg.nn.Linear(3, 2, act="relu", seed=4), sg.nn.Linear(3, 2, "relu", seed=4)
    np.testing.assert_array_equal(a.weight.numpy(), b.weight.numpy())
    assert a.params() == [a.weight, a.bias] and isinstance(a, sg.nn.Module)
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    np.testing.assert_allclose(
        a(sg.tensor(x)).numpy(), np.maximum(x @ a.weight.numpy().T + a.bias.numpy(), 0), rtol=1e-6
    )
    with pytest.raises(sg.SrcgradError, match="unknown activation 'nope'"):
        sg.nn.Linear(3, 2, act="nope")


@pytest.mark.parametrize(
    "make,shape",
    [
        (
            lambda: sg.nn.Conv3d(2, 3, 3, stride=2, padding=1, seed=0, dtype="float64"),  # as above
            (2, 2, 7, 7, 7),
        ),
        (
            lambda: sg.nn.Sequential(
                sg.nn.Linear(3, 4, act="gelu", seed=1, dtype="float64"),
                sg.nn.LayerNorm(4, dtype="float64"),
            ),
            (2, 3),
        ),
    ],
)
def test_gradients_match_finite_differences(make, shape):
    """d loss along a random direction of every parameter: backward vs central differences."""
    model = make()
    rng = np.random.default_rng(5)
    x = sg.tensor(rng.standard_normal(shape))
    params = model.parameters()
    dirs = [rng.standard_normal(p.shape) for p in params]

    def loss() -> sg.Tensor:
        return sg.sum(sg.sin(model(x)))

    with sg.autograd.record():
        out = loss()
    out.backward()
    analytic = sum(float(np.sum(p.grad.numpy() * d)) for p, d in zip(params, dirs))
    base = [p.numpy().copy() for p in params]
    eps, vals = 1e-6, []
    for sign in (1, -1):
        for p, b, d in zip(params, base, dirs):
            p.assign(b + sign * eps * d)
        vals.append(loss().item())
    np.testing.assert_allclose(analytic, (vals[0] - vals[1]) / (2 * eps), rtol=1e-6)


def test_dropout_mask_is_no_structure():
    """A new mask each step is a new tape input value: the backward compiles once."""
    model = sg.nn.Sequential(sg.nn.Linear(3, 4, seed=0), sg.nn.Dropout(0.5, seed=0))
    x = sg.tensor(np.ones((2, 3), np.float32))
    counts = []
    for _ in range(3):
        with sg.autograd.record():
            loss = sg.sum(model(x))
        loss.backward()
        counts.append(sg.autograd.compile_count())
    assert counts[0] == counts[1] == counts[2]


def test_building_layers_compiles_nothing():
    """A fresh model's layers draw their initial weights on the host: jax.random compiled a
    program per new shape (0.2-0.9 s each), most of the time to a first training step. The
    draws follow the seed and the documented scales (LeCun normal; N(0, 1) rows; PyTorch's
    uniform bound for convolutions), in the dtype asked for."""
    with compile_threads() as compiles:
        layers = [
            sg.nn.Linear(301, 203, act="tanh", seed=4),
            sg.nn.Embedding(307, 211, seed=4),
            sg.nn.Conv2d(5, 209, 3, seed=4),
            sg.nn.Linear(301, 203, dtype="bfloat16"),
        ]
    assert compiles == []
    assert layers[3].weight.dtype == jnp.bfloat16
    lin, emb, conv, half = (np.asarray(layer.weight.numpy(), np.float64) for layer in layers)
    np.testing.assert_array_equal(lin, sg.nn.Linear(301, 203, seed=4).weight.numpy())
    assert not np.array_equal(lin, sg.nn.Linear(301, 203, seed=5).weight.numpy())
    np.testing.assert_allclose(
        [lin.std() * np.sqrt(301), emb.std(), half.std() * np.sqrt(301)], 1.0, rtol=0.03
    )
    bound = 1 / np.sqrt(5 * 9)
    assert conv.shape == (209, 5, 3, 3) and np.abs(conv).max() <= bound
    np.testing.assert_allclose(conv.std(), bound / np.sqrt(3), rtol=0.05)
