"""`sg.sparse`: PyTorch's `torch.sparse.mm` (`spmm`), computed densely (srcgrad has no
sparse layout); `sg.sparse_coo_tensor` builds the dense matrix.

Implemented in srcgrad/imperative/sparse.py.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

from ..imperative.sparse import mm

spmm = mm

__all__ = ["mm", "spmm"]
