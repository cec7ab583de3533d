"""`sg.scipy`: jax.scipy's namespaces over traced values (`sg.scipy.special`).

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

from . import special

__all__ = ["special"]
