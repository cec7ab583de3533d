"""`sg.nn.init`: PyTorch's torch.nn.init, filling Tensors in place (drawn on the host).

    sg.nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5))

Implemented in srcgrad/imperative/init.py.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

from ..imperative.init import *  # noqa: F403
from ..imperative.init import __all__  # noqa: F401
