"""The products in jax.numpy's names: outer, tensordot, inner, kron, cross, vdot, vecdot,
matvec and vecmat, as composites of reshapes, broadcasts and matmul/einsum (whose
gradients they take).

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

import builtins
from typing import Any, Sequence

import numpy as np

from ..base import dtypes
from ..core.builder import as_var
from ..base.errors import ShapeError
from ..ir.program import Variable
from .rules import broadcast_shapes, norm_axis
from .creation import zeros
from ..core.declare import public
from .elementwise import astype, conj, multiply, subtract
from .contraction import einsum, matmul
from .manip import moveaxis
from .shape import ravel
from .shape import broadcast_to, concatenate, expand_dims, reshape, transpose


@public
def outer(a: Any, b: Any, out: None = None) -> Variable:
    """jnp.outer: the flattened `a` times the flattened `b`, as a matrix."""
    if out is not None:
        raise ShapeError("out= is not supported", op="outer")
    x, y = as_var(a), as_var(b)
    return multiply(reshape(x, (x.size, 1)), reshape(y, (1, y.size)))


def _matrix(v: Variable, contracted: list[int], contracted_last: bool) -> Variable:
    """`v` as a matrix with the `contracted` axes (in that order) grouped into its last
    (or first) dimension and the other axes, in order, into the other. Where the contracted
    axes already lead or trail in order, a 2-D transpose of a reshape (which XLA folds into
    the dot) stands in for an N-D transpose."""
    free = [i for i in range(v.ndim) if i not in contracted]
    k = int(np.prod([v.shape[i] for i in contracted], dtype=np.int64))
    f = int(np.prod([v.shape[i] for i in free], dtype=np.int64))
    n = len(contracted)
    leading, trailing = contracted == list(range(n)), contracted == list(range(v.ndim - n, v.ndim))
    if contracted_last:
        if trailing:
            return reshape(v, (f, k))
        if leading:
            return transpose(reshape(v, (k, f)))
        return reshape(transpose(v, free + contracted), (f, k))
    if leading:
        return reshape(v, (k, f))
    if trailing:
        return transpose(reshape(v, (f, k)))
    return reshape(transpose(v, contracted + free), (k, f))


@public
def tensordot(
    a: Any,
    b: Any,
    axes: int | Sequence[Any] = 2,
    *,
    precision: Any = None,
    preferred_element_type: Any = None,
) -> Variable:
    """jnp.tensordot: contract the last `axes` axes of `a` with the first of `b`, or the
    axes named by a pair of sequences; one matmul after a transpose and reshape."""
    x, y = as_var(a), as_var(b)
    if isinstance(axes, (int, np.integer)):
        k = int(axes)
        if k < 0 or k > builtins.min(x.ndim, y.ndim):
            raise ShapeError(
                f"tensordot: axes={k} for {x.type_str()} and {y.type_str()}", op="tensordot"
            )
        ax, bx = list(range(x.ndim - k, x.ndim)), list(range(k))
    else:
        if len(axes) != 2:
            raise ShapeError(
                f"tensordot: axes must be an int or a pair, got {axes!r}", op="tensordot"
            )
        ax, bx = ([s] if isinstance(s, (int, np.integer)) else list(s) for s in axes)
        if len(ax) != len(bx):
            raise ShapeError(
                f"tensordot: axes {axes!r} name different numbers of axes", op="tensordot"
            )
        ax = [norm_axis(int(i), x.ndim) for i in ax]
        bx = [norm_axis(int(i), y.ndim) for i in bx]
    for i, j in zip(ax, bx):
        if x.shape[i] != y.shape[j]:
            raise ShapeError(
                f"tensordot: axis {i} of {x.type_str()} and axis {j} of {y.type_str()} differ",
                op="tensordot",
            )
    ma = _matrix(x, ax, contracted_last=True)
    mb = _matrix(y, bx, contracted_last=False)
    out = matmul(ma, mb)
    if preferred_element_type is not None:
        out = astype(out, preferred_element_type)
    return reshape(
        out,
        tuple(d for i, d in enumerate(x.shape) if i not in ax)
        + tuple(d for j, d in enumerate(y.shape) if j not in bx),
    )


@public
def inner(a: Any, b: Any) -> Variable:
    """jnp.inner: the sum product over the last axes (a product with a scalar)."""
    x, y = as_var(a), as_var(b)
    if x.ndim == 0 or y.ndim == 0:
        return multiply(x, y)
    return tensordot(x, y, ((x.ndim - 1,), (y.ndim - 1,)))


@public
def kron(a: Any, b: Any) -> Variable:
    """jnp.kron: the Kronecker product (shapes padded with leading ones to one rank)."""
    x, y = as_var(a), as_var(b)
    nd = builtins.max(x.ndim, y.ndim)
    xs, ys = (1,) * (nd - x.ndim) + x.shape, (1,) * (nd - y.ndim) + y.shape
    xa = reshape(x, tuple(d for s in xs for d in (s, 1)))
    yb = reshape(y, tuple(d for s in ys for d in (1, s)))
    return reshape(multiply(xa, yb), tuple(p * q for p, q in zip(xs, ys)))


@public
def cross(
    a: Any, b: Any, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis: int | None = None
) -> Variable:
    """jnp.cross of 3-vectors (or 2-vectors: the z component only when both are) along
    `axisa`/`axisb`, the result's vector axis at `axisc`; `axis` sets all three."""
    x, y = as_var(a), as_var(b)
    if axis is not None:
        axisa = axisb = axisc = axis
    x = moveaxis(x, norm_axis(axisa, x.ndim), -1) if x.ndim else x
    y = moveaxis(y, norm_axis(axisb, y.ndim), -1) if y.ndim else y
    if x.ndim == 0 or y.ndim == 0 or x.shape[-1] not in (2, 3) or y.shape[-1] not in (2, 3):
        raise ShapeError(
            f"cross needs vectors of length 2 or 3 along the axis, got "
            f"{x.type_str()} and {y.type_str()}",
            op="cross",
        )
    xc = [x[..., i] for i in range(x.shape[-1])]
    yc = [y[..., i] for i in range(y.shape[-1])]
    z3 = subtract(multiply(xc[0], yc[1]), multiply(xc[1], yc[0]))
    if len(xc) == 2 and len(yc) == 2:
        return z3
    zero = zeros((), dtypes.promote(x.dtype, y.dtype))
    x3, y3 = xc + [zero] * (3 - len(xc)), yc + [zero] * (3 - len(yc))
    c0 = subtract(multiply(x3[1], y3[2]), multiply(x3[2], y3[1]))
    c1 = subtract(multiply(x3[2], y3[0]), multiply(x3[0], y3[2]))
    parts = [c0, c1, z3]
    shape = broadcast_shapes(*(p.shape for p in parts))
    out = concatenate([expand_dims(broadcast_to(p, shape), -1) for p in parts], -1)
    return moveaxis(out, -1, norm_axis(axisc, out.ndim))


@public
def vdot(a: Any, b: Any, *, precision: Any = None, preferred_element_type: Any = None) -> Variable:
    """jnp.vdot: the dot product of the flattened arrays, the first conjugated."""
    return matmul(ravel(conj(a)), ravel(b))


@public
def vecdot(
    x1: Any,
    x2: Any,
    /,
    *,
    axis: int = -1,
    precision: Any = None,
    preferred_element_type: Any = None,
) -> Variable:
    """jnp.vecdot: the dot product along `axis` (`x1` conjugated), broadcasting the others."""
    x1, x2 = conj(as_var(x1)), as_var(x2)
    x1, x2 = moveaxis(x1, axis, -1), moveaxis(x2, axis, -1)
    return einsum("...i,...i->...", x1, x2)


@public
def matvec(x1: Any, x2: Any, /) -> Variable:
    """jnp.matvec: batched matrix-vector product (..., m, n) x (..., n) -> (..., m)."""
    return matmul(as_var(x1), expand_dims(as_var(x2), -1))[..., 0]


@public
def vecmat(x1: Any, x2: Any, /) -> Variable:
    """jnp.vecmat: batched vector-matrix product (..., m) x (..., m, n) -> (..., n), the
    vector conjugated."""
    return matmul(expand_dims(conj(as_var(x1)), -2), as_var(x2))[..., 0, :]
