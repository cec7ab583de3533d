"""`sg.scipy.special`: jax.scipy.special's functions over traced values (and eagerly on
arrays), each with JAX's gradient. Declared in srcgrad/ops/special.py with
`namespace="scipy.special"`.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

from ..ops import exports_of

globals().update(exports_of("scipy.special"))

__all__ = sorted(exports_of("scipy.special"))
