"""`sg.optim.lr_scheduler`: PyTorch's learning-rate schedulers (StepLR, MultiStepLR,
ExponentialLR, CosineAnnealingLR, LambdaLR, OneCycleLR, ReduceLROnPlateau).

Implemented in srcgrad/imperative/lr_scheduler.py.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

from ..imperative.lr_scheduler import *  # noqa: F403
from ..imperative.lr_scheduler import __all__  # noqa: F401
