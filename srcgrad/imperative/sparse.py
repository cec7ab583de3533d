"""PyTorch's sparse products as gcn uses them (`torch.sparse_coo_tensor`, `torch.sparse.mm`),
computed densely: srcgrad has no sparse layout.

    adj = sg.sparse_coo_tensor(indices, values, (n, n))   # a DENSE (n, n) array
    h = sg.sparse.mm(adj, x @ w)                          # adj @ (x @ w)

`sparse_coo_tensor` scatters `values` at `indices` (2, nnz) into a dense array of `size`,
summing duplicates as PyTorch's coalesce does, differentiably in `values`; `mm` is the
matrix product, and also takes a `jax.experimental.sparse.BCOO` (made dense first). The
memory and time are a dense product's (n^2 for an n-node graph): fine for gcn's Cora (2,708
nodes), not for a graph of millions of nodes, which needs jax.experimental.sparse in plain
JAX code.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .. import ops as declared_ops
from ..base.errors import SrcgradError, user_location
from .tensor import Tensor

#: The op namespace (its names are declared when srcgrad is imported: mypy cannot see them).
ops: Any = declared_ops


def sparse_coo_tensor(
    indices: Any, values: Any, size: Sequence[int] | None = None, dtype: Any = None
) -> Any:
    """A dense array of shape `size` holding `values` (nnz,) at `indices` (ndim, nnz),
    duplicates summed (`size` None: the largest index + 1 along each axis)."""
    idx = np.asarray(indices.value() if isinstance(indices, Tensor) else indices)
    if idx.ndim != 2 or idx.dtype.kind not in "iu":
        raise SrcgradError(
            f"sparse_coo_tensor: indices must be integers of shape (ndim, nnz), got "
            f"{idx.dtype}{list(idx.shape)}",
            loc=user_location(),
        )
    shape = tuple(int(s) for s in size) if size is not None else tuple(idx.max(axis=1) + 1)
    if len(shape) != idx.shape[0] or (idx.size and (idx.min() < 0 or (idx.max(1) >= shape).any())):
        raise SrcgradError(
            f"sparse_coo_tensor: indices {idx.shape[0]}-D out of the bounds of size {shape}",
            loc=user_location(),
        )
    vals = values if dtype is None else ops.astype(values, dtype)
    return ops.zeros(shape, vals.dtype).at[tuple(idx)].add(vals)


def mm(mat1: Any, mat2: Any) -> Any:
    """`torch.sparse.mm(mat1, mat2)`: mat1 @ mat2, dense (a BCOO is made dense first)."""
    todense = getattr(mat1, "todense", None)
    if todense is not None and not isinstance(mat1, (np.ndarray, Tensor)):
        mat1 = todense()
    return ops.matmul(mat1, mat2)


__all__ = ["sparse_coo_tensor", "mm"]
