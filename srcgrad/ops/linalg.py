"""Deprecated: `srcgrad.ops.linalg` was renamed `srcgrad.ops.contraction` (it held matmul,
einsum and convolution, not `sg.linalg`). Importing it warns and gives the same objects.

Layer L3 (the ops): see docs/design.md.
"""
from __future__ import annotations

import warnings

from .contraction import *  # noqa: F401,F403
from .contraction import const_array, dot, einsum, matmul
from .conv import conv  # noqa: F401

warnings.warn("srcgrad.ops.linalg is renamed srcgrad.ops.contraction; import from there "
              "(the old name goes in a later release)", DeprecationWarning, stacklevel=2)
