"""`sg.scipy`: jax.scipy's namespaces over traced values (`sg.scipy.special`)."""
from __future__ import annotations

from . import special

__all__ = ["special"]
