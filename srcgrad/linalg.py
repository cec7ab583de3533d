"""`sg.linalg`: jax.numpy.linalg's functions (and jax.scipy.linalg's lu and solve_triangular)
over traced values. Declared in srcgrad/ops/linalg_decompositions.py and linalg_functions.py with
`public_in("linalg")`.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

from .ops import exports_of

globals().update(exports_of("linalg"))

__all__ = sorted(exports_of("linalg"))
