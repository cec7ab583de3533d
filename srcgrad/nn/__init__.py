"""`sg.nn`: PyTorch's torch.nn layers and jax.nn's functions, initialisers and layers.

    model = sg.nn.Sequential(sg.nn.Linear(3, 8), sg.nn.ReLU(), sg.nn.Linear(8, 1))
    with sg.autograd.record():
        loss = sg.nn.MSELoss()(model(x), y)
    loss.backward()

The activations are the srcgrad ops of jax.nn's names (`sg.nn.relu` is `sg.relu`; the rest of
jax.nn, such as `sg.nn.selu` and `sg.nn.dot_product_attention`, is declared in
ops/activations.py), and `sg.nn.initializers` holds jax.nn.initializers' initialisers.
PyTorch's names: the layers (`Module`, `Sequential`, `ModuleList`/`ModuleDict`,
`ParameterList`/`ParameterDict`, `Linear`, `Conv1d/2d/3d`, `LayerNorm`, `Embedding`,
`Dropout`: srcgrad/imperative/layers.py and conv_layers.py), the recurrent layers (`RNN`,
`LSTM`, `GRU` and their cells: recurrent.py), the Module forms of the functions
(`ReLU`, `CrossEntropyLoss`, `MaxPool2d`, `Flatten`, ...: functional_layers.py), and the
submodules `sg.nn.functional` (F), `sg.nn.init` and `sg.nn.utils`.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

from ..imperative import initializers
from ..imperative.conv_layers import Conv1d, Conv2d, Conv3d
from ..imperative.functional_layers import MODULES, Flatten, Identity, PReLU, Unflatten
from ..imperative.layers import (
    Dropout,
    Embedding,
    EmbeddingIndexError,
    LayerNorm,
    Linear,
    Module,
    ModuleDict,
    ModuleList,
    ParameterDict,
    ParameterList,
    Sequential,
    activations,
)
from ..imperative.recurrent import (
    GRU,
    LSTM,
    RNN,
    GRUCell,
    LSTMCell,
    RecurrentError,
    RNNBase,
    RNNCell,
    RNNCellBase,
)
from ..ops import exports_of
from . import functional, init, utils

globals().update(activations())
globals().update(exports_of("nn"))
globals().update(MODULES)

__all__ = [
    "Module",
    "Sequential",
    "ModuleList",
    "ModuleDict",
    "ParameterList",
    "ParameterDict",
    "Linear",
    "Conv1d",
    "Conv2d",
    "Conv3d",
    "LayerNorm",
    "Embedding",
    "EmbeddingIndexError",
    "Dropout",
    "RNNBase",
    "RNN",
    "LSTM",
    "GRU",
    "RNNCellBase",
    "RNNCell",
    "LSTMCell",
    "GRUCell",
    "RecurrentError",
    "Identity",
    "Flatten",
    "Unflatten",
    "PReLU",
    *sorted(MODULES),
    "functional",
    "init",
    "utils",
    "initializers",
    *sorted(set(activations()) | set(exports_of("nn"))),
]
