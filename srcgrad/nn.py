"""`sg.nn`: jax.nn's functions and imperative layers.

    model = sg.nn.Sequential(sg.nn.Linear(3, 8, act="relu"), sg.nn.Linear(8, 1))
    with sg.autograd.record():
        loss = sg.mean(model(x) ** 2)
    loss.backward()

The activations are the srcgrad ops of jax.nn's names (`sg.nn.relu` is `sg.relu`). The
layers (`Module`, `Sequential`, `Linear`, `Conv1d/2d/3d`, `LayerNorm`, `Embedding`,
`Dropout`) hold attached Tensors and live in srcgrad/layers.py and srcgrad/conv_layers.py.

Layer L6 (front ends): see docs/design.md.
"""
from __future__ import annotations

from .conv_layers import Conv1d, Conv2d, Conv3d
from .layers import Dropout, Embedding, LayerNorm, Linear, Module, Sequential, activations

globals().update(activations())

__all__ = ["Module", "Sequential", "Linear", "Conv1d", "Conv2d", "Conv3d", "LayerNorm",
           "Embedding", "Dropout", *sorted(activations())]
