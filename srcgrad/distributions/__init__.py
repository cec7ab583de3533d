"""`sg.distributions`: PyTorch's torch.distributions names (Categorical).

Implemented in srcgrad/imperative/distributions.py.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

from ..imperative.distributions import *  # noqa: F403
from ..imperative.distributions import __all__  # noqa: F401
