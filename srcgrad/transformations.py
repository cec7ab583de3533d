"""Deprecated: `srcgrad.transformations` was renamed `srcgrad.derivatives` (it sat beside the
`transforms/` package and read like it). Importing it warns and gives the same functions.

Layer L6 (front ends): see docs/design.md.
"""
from __future__ import annotations

import warnings

from .api.derivatives import *  # noqa: F401,F403
from .api.derivatives import __all__  # noqa: F401

warnings.warn("srcgrad.transformations is renamed srcgrad.derivatives; import from there "
              "(the old name goes in a later release)", DeprecationWarning, stacklevel=2)
