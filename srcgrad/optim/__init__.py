"""`sg.optim`: optimizers that update attached Tensors in place from their `.grad`, with
PyTorch's update rules and defaults, and a bridge to optax.

    opt = sg.optim.Adam(model.parameters(), lr=1e-3)

Implemented in srcgrad/imperative/optim.py.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

from ..imperative.optim import (
    SGD,
    Adam,
    AdamW,
    HyperparameterError,
    Optimizer,
    RMSprop,
    RMSProp,
    from_optax,
    zero_grad,
)

__all__ = [
    "Optimizer",
    "HyperparameterError",
    "SGD",
    "Adam",
    "AdamW",
    "RMSProp",
    "RMSprop",
    "from_optax",
    "zero_grad",
]
