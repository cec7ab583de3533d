"""`sg.nn.utils`: PyTorch's torch.nn.utils gradient helpers (clip_grad_norm_, ...).

Implemented in srcgrad/imperative/clip_grad.py.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

from ..imperative.clip_grad import *  # noqa: F403
from ..imperative.clip_grad import __all__  # noqa: F401
