"""`sg.nn.functional` (`import srcgrad.nn.functional as F`): PyTorch's torch.nn.functional,
with its signatures, defaults and layouts.

    import srcgrad.nn.functional as F
    loss = F.cross_entropy(model(x), labels)

Activations and tensor functions live in srcgrad/imperative/functional.py, the losses in
losses.py and pooling in pooling.py.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

from ..imperative import functional as _functional_module
from ..imperative import losses as _losses_module
from ..imperative import pooling as _pooling_module
from ..imperative.functional import *  # noqa: F403
from ..imperative.losses import *  # noqa: F403
from ..imperative.pooling import *  # noqa: F403

__all__ = [*_functional_module.__all__, *_losses_module.__all__, *_pooling_module.__all__]
