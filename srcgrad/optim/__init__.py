"""`sg.optim`: optimizers that update attached Tensors in place from their `.grad`, with
PyTorch's update rules and defaults, and a bridge to optax.

    opt = sg.optim.Adam(model.parameters(), lr=1e-3)

Implemented in srcgrad/imperative/optim.py (LBFGS in lbfgs.py); `sg.optim.lr_scheduler`
holds PyTorch's learning-rate schedulers (srcgrad/imperative/lr_scheduler.py).

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

from . import lr_scheduler
from ..imperative.lbfgs import LBFGS
from ..imperative.optim import (
    SGD,
    Adadelta,
    Adagrad,
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
    "Adadelta",
    "Adagrad",
    "LBFGS",
    "lr_scheduler",
    "from_optax",
    "zero_grad",
]
