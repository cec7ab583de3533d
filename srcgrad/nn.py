"""`sg.nn`: jax.nn's functions, its initialisers and imperative layers.

    model = sg.nn.Sequential(sg.nn.Linear(3, 8, act="relu"), sg.nn.Linear(8, 1))
    with sg.autograd.record():
        loss = sg.mean(model(x) ** 2)
    loss.backward()

The activations are the srcgrad ops of jax.nn's names (`sg.nn.relu` is `sg.relu`; the rest of
jax.nn, such as `sg.nn.selu` and `sg.nn.dot_product_attention`, is declared in
ops/activations.py), and `sg.nn.initializers` holds jax.nn.initializers' initialisers. The
layers (`Module`, `Sequential`, `ModuleList`/`ModuleDict`, `ParameterList`/`ParameterDict`,
`Linear`, `Conv1d/2d/3d`, `LayerNorm`, `Embedding`, `Dropout`) hold attached Tensors and live
in srcgrad/imperative/layers.py and srcgrad/imperative/conv_layers.py.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

from .imperative import initializers
from .imperative.conv_layers import Conv1d, Conv2d, Conv3d
from .imperative.layers import (
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
from .ops import exports_of

globals().update(activations())
globals().update(exports_of("nn"))

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
    "initializers",
    *sorted(activations()),
    *sorted(exports_of("nn")),
]
