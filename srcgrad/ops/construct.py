"""Array creation beyond the fills (creation.py): sg.array/asarray over nested lists of
traced values, copy, empty(_like), eye, identity, tri/tril/triu, diag/diagonal/diagflat,
vander, linspace/logspace/geomspace, meshgrid, fromfunction and the index expressions
sg.r_ / sg.c_.

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ..base import dtypes
from ..core.builder import as_var
from ..core import dispatch
from ..base.errors import ShapeError
from ..ir.program import Variable
from ..core.registry import ZERO, OutType
from .rules import broadcast_shapes, norm_axis
from .creation import arange, full, zeros
from ..core.declare import EXPORTS, Emitted, defop, public
from .elementwise import astype, exp, floor, log, logical_not, where
from .shape import broadcast_to, concatenate, expand_dims, lax_pad, reshape, stack, transpose
from .shape import slice as lax_slice
from .operands import promoted
from .shape import ravel
from . import elementwise


def _abstract(obj: Any) -> Any:
    """`obj` with traced values and arrays as shape/dtype structs (Python numbers stay weak)."""
    if isinstance(obj, (list, tuple)):
        return type(obj)(_abstract(o) for o in obj)
    if isinstance(obj, Variable):
        return jax.ShapeDtypeStruct(obj.shape, obj.dtype)
    if isinstance(obj, (np.ndarray, np.generic, jax.Array)):
        return jax.ShapeDtypeStruct(np.shape(obj), obj.dtype)
    return obj


def _jnp_type(op: str, fn: Any, *objs: Any) -> jax.ShapeDtypeStruct:
    """The shape and dtype jax.numpy's `fn` gives for these (possibly nested) arguments."""
    structs = [_abstract(o) for o in objs]
    flat, tree = jax.tree_util.tree_flatten(structs)
    arrays = [i for i, leaf in enumerate(flat) if isinstance(leaf, jax.ShapeDtypeStruct)]

    def run(*avals: Any) -> Any:
        leaves = list(flat)
        for i, a in zip(arrays, avals):
            leaves[i] = a
        return fn(*jax.tree_util.tree_unflatten(tree, leaves))

    try:
        return jax.eval_shape(run, *[flat[i] for i in arrays])
    except (TypeError, ValueError) as e:
        raise ShapeError(str(e).split("\n")[0], op=op) from None


def _build(obj: Any, dtype: np.dtype) -> Variable:
    if isinstance(obj, (list, tuple)):
        return stack([_build(o, dtype) for o in obj])
    if isinstance(obj, (bool, int, float, complex)):
        return full((), obj, dtype)
    return astype(as_var(obj), dtype)


@public
def array(
    object: Any, dtype: Any = None, copy: bool = True, order: str | None = "K", ndmin: int = 0
) -> Variable:
    """jnp.array over nested lists/tuples of traced values, arrays and Python numbers (the
    dtype jax.numpy gives them: Python numbers are weak); the items are stacked."""
    if isinstance(object, Variable):
        out = object if dtype is None else astype(object, dtype)
    else:
        want = _jnp_type("array", lambda o: jnp.array(o, dtype=dtype), object)
        dt = dtypes.canonical(want.dtype)
        if want.size == 0 or not isinstance(object, (list, tuple)):
            out = zeros(tuple(want.shape), dt) if want.size == 0 else astype(as_var(object), dt)
        else:
            out = _build(object, dt)
    if out.ndim < ndmin:
        out = reshape(out, (1,) * (ndmin - out.ndim) + out.shape)
    return out


@public
def asarray(
    a: Any, dtype: Any = None, order: str | None = None, copy: bool | None = None
) -> Variable:
    """jnp.asarray: `sg.array` without a copy (srcgrad's values are immutable anyway)."""
    return array(a, dtype)


# ---------------------------------------------------------------- eye, tri and their kin


def _matrix_rule(inputs: Any, attrs: dict[str, Any]) -> list[OutType]:
    return [((attrs["N"], attrs["M"]), attrs["dtype"])]


def _matrix_attrs(N: int, M: int | None, k: int, dtype: Any) -> dict[str, Any]:
    dt = dtypes.canonical(dtype)
    n = int(N)
    m = n if M is None else int(M)
    if n < 0 or m < 0:
        raise ShapeError(f"negative dimensions are not allowed: N={n}, M={m}")
    return {"N": n, "M": m, "k": int(k), "dtype": dt}


@defop("eye", _matrix_rule, "jnp.eye({N}, {M}, {k}, dtype={dtype})", ZERO)
def eye(N: int, M: int | None = None, k: int = 0, dtype: Any = None) -> Emitted:
    """jnp.eye(N, M=None, k=0, dtype=float): ones on the k-th diagonal."""
    return [], _matrix_attrs(N, M, k, dtypes.default_float() if dtype is None else dtype)


@public
def identity(n: int, dtype: Any = None) -> Variable:
    """jnp.identity(n, dtype=float)."""
    return eye(n, dtype=dtype)


@defop("tri", _matrix_rule, "jnp.tri({N}, {M}, {k}, dtype={dtype})", ZERO)
def tri(N: int, M: int | None = None, k: int = 0, dtype: Any = None) -> Emitted:
    """jnp.tri(N, M=None, k=0, dtype=None): ones on and below the k-th diagonal, of jnp.tri's
    default dtype (float32 up to JAX 0.10, the default float from JAX 0.11)."""
    return [], _matrix_attrs(N, M, k, _tri_default(dtypes.x64()) if dtype is None else dtype)


@functools.cache
def _tri_default(x64: bool) -> np.dtype:
    """The installed jnp.tri's default dtype, with 64-bit types on or off (`x64`)."""
    return np.dtype(jax.eval_shape(lambda: jnp.tri(1)).dtype)


def _matrix_arg(name: str, m: Any) -> Variable:
    m = as_var(m)
    if m.ndim < 2:
        raise ShapeError(f"{name} needs an array of rank >= 2, got {m.type_str()}", op=name)
    return m


@public
def tril(m: Any, k: int = 0) -> Variable:
    """jnp.tril: `m` (rank >= 2) with the entries above the k-th diagonal zeroed."""
    m = _matrix_arg("tril", m)
    return where(tri(*m.shape[-2:], k=k, dtype=bool), m, zeros((), m.dtype))


@public
def triu(m: Any, k: int = 0) -> Variable:
    """jnp.triu: `m` (rank >= 2) with the entries below the k-th diagonal zeroed."""
    m = _matrix_arg("triu", m)
    return where(logical_not(tri(*m.shape[-2:], k=k - 1, dtype=bool)), m, zeros((), m.dtype))


@public
def diagonal(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Variable:
    """jnp.diagonal: the `offset` diagonal of the (axis1, axis2) planes, as a last axis."""
    a = as_var(a)
    if a.ndim < 2:
        raise ShapeError(f"diagonal needs an array of rank >= 2, got {a.type_str()}", op="diagonal")
    a1, a2 = norm_axis(axis1, a.ndim), norm_axis(axis2, a.ndim)
    if a1 == a2:
        raise ShapeError("axis1 and axis2 cannot be the same", op="diagonal")
    t = transpose(a, [i for i in range(a.ndim) if i not in (a1, a2)] + [a1, a2])
    n, m = t.shape[-2:]
    lead = t.shape[:-2]
    flat = reshape(t, lead + (n * m,))
    k = int(offset)
    length = max(0, min(n, m - k) if k >= 0 else min(n + k, m))
    first = k if k >= 0 else -k * m
    lo, hi = (first, first + (length - 1) * (m + 1) + 1) if length else (0, 0)
    return lax_slice(flat, (0,) * len(lead) + (lo,), lead + (hi,), (1,) * len(lead) + (m + 1,))


@public
def diag(v: Any, k: int = 0) -> Variable:
    """jnp.diag: a 1-D `v` on the k-th diagonal of a square matrix, or a 2-D `v`'s k-th
    diagonal."""
    v = as_var(v)
    if v.ndim == 2:
        return diagonal(v, k)
    if v.ndim != 1:
        raise ShapeError(f"diag needs a 1-D or 2-D array, got {v.type_str()}", op="diag")
    k = int(k)
    n = v.shape[0] + abs(k)
    padded = lax_pad(v, [(0, abs(k), 0)])
    col = reshape(padded, (n, 1) if k >= 0 else (1, n))
    return where(eye(n, n, k, dtype=bool), col, zeros((), v.dtype))


# ---------------------------------------------------------------- linspace


@public
def linspace(
    start: Any,
    stop: Any,
    num: int = 50,
    endpoint: bool = True,
    retstep: bool = False,
    dtype: Any = None,
    axis: int = 0,
) -> Any:
    """jnp.linspace: `num` evenly spaced values from `start` to `stop` (arrays broadcast;
    differentiable in both), jax.numpy's formula `start * (1 - t) + stop * t`."""
    num = int(num)
    if num < 0:
        raise ShapeError(f"number of samples, {num}, must be non-negative", op="linspace")
    out_type, step_type = _jnp_type(
        "linspace", lambda a, b: jnp.linspace(a, b, num, endpoint, True, dtype, axis), start, stop
    )
    dt, cdt = dtypes.canonical(out_type.dtype), dtypes.canonical(step_type.dtype)
    lo, hi = (
        astype(as_var(v) if not isinstance(v, (int, float, bool)) else full((), v, cdt), cdt)
        for v in (start, stop)
    )
    bshape = broadcast_shapes(lo.shape, hi.shape)
    lo, hi = broadcast_to(lo, bshape), broadcast_to(hi, bshape)
    ax = len(bshape) + axis + 1 if axis < 0 else axis
    bounds = list(bshape)
    bounds.insert(ax, 1)
    div = num - 1 if endpoint else num
    if num > 1:
        delta = (hi - lo) / float(div)
        shape = [1] * len(bounds)
        shape[ax] = div
        step = reshape(arange(div, dtype=cdt) / float(div), tuple(shape))
        out = reshape(lo, tuple(bounds)) * (1.0 - step) + reshape(hi, tuple(bounds)) * step
        if endpoint:
            out = concatenate([out, expand_dims(hi, ax)], ax)
    elif num == 1:
        delta = full((), np.nan, cdt) if endpoint else hi - lo
        out = reshape(lo, tuple(bounds))
    else:
        delta = full((), np.nan, cdt)
        out = zeros(tuple(out_type.shape), cdt)
    if dt.kind in "iu" and out.dtype.kind not in "iu":
        out = floor(out)
    out = astype(out, dt)
    return (out, delta) if retstep else out


# ---------------------------------------------------------------- r_ and c_


class _AxisConcat:
    """An index expression that concatenates its items (NumPy's r_ / c_): arrays, traced
    values and numbers, and slices with static bounds (`a:b:n*1j` is linspace's n points).
    A leading directive string 'axis,ndmin,trans1d' (or 'r' / 'c') is read as NumPy does."""

    def __init__(self, name: str, axis: int, ndmin: int, trans1d: int):
        self.__name__ = name
        self.axis, self.ndmin, self.trans1d = axis, ndmin, trans1d
        self.like = getattr(jnp, name)  # jax.numpy's twin gives the result dtype

    def __getitem__(self, key: Any) -> Any:
        return dispatch.call(self._concat, (key,), {})

    def _concat(self, key: Any) -> Variable:
        items = list(key) if isinstance(key, tuple) else [key]
        for it in items:
            if isinstance(it, slice) and any(
                isinstance(b, Variable) for b in (it.start, it.stop, it.step)
            ):
                raise ShapeError("slice bounds must be static Python numbers", op=self.__name__)
        like = _jnp_type(self.__name__, lambda *its: self.like[tuple(its)], *items)
        dt = dtypes.canonical(like.dtype)
        axis, ndmin, trans1d, matrix = self.axis, self.ndmin, self.trans1d, -1
        if items and isinstance(items[0], str):
            directive = items.pop(0)
            if directive in ("r", "c"):
                matrix = 0 if directive == "r" else 1
            else:
                try:
                    given = [int(p) for p in directive.split(",")]
                except ValueError:
                    raise ShapeError(
                        f"could not understand directive {directive!r}", op=self.__name__
                    ) from None
                axis, ndmin, trans1d = (given + [axis, ndmin, trans1d][len(given) :])[:3]
        parts = []
        for it in items:
            if isinstance(it, str):
                raise ShapeError("a string directive must come first", op=self.__name__)
            if isinstance(it, slice):
                v, item_ndim = self._grid(it), 0
            else:
                v = array(it)
                item_ndim = v.ndim
            v = array(v, ndmin=ndmin)
            if trans1d != -1 and ndmin > item_ndim:
                order = list(range(ndmin))
                shift = ndmin - abs(ndmin + trans1d + 1) % ndmin
                v = transpose(v, order[shift:] + order[:shift])
            parts.append(astype(v, dt))
        out = concatenate(parts, axis)
        if matrix != -1 and out.ndim == 1:
            out = expand_dims(out, matrix)
        return out

    def _grid(self, s: slice) -> Variable:
        start = s.start or 0
        step = s.step or 1
        if isinstance(step, complex):
            return linspace(start, s.stop, int(abs(step)))
        return arange(start, s.stop, step)

    def __len__(self) -> int:
        return 0


def _export(name: str, obj: Any) -> Any:
    if name in EXPORTS:
        raise ValueError(f"sg.{name} is exported twice")
    EXPORTS[name] = obj
    return obj


r_ = _export("r_", _AxisConcat("r_", 0, 1, -1))
c_ = _export("c_", _AxisConcat("c_", -1, 2, 0))


@public
def meshgrid(
    *xi: Any, copy: bool = True, sparse: bool = False, indexing: str = "xy"
) -> list[Variable]:
    """jnp.meshgrid(*xi, sparse=False, indexing='xy'): coordinate arrays from 1-D arrays."""
    if indexing not in ("xy", "ij"):
        raise ShapeError(f"indexing must be 'xy' or 'ij', got {indexing!r}", op="meshgrid")
    xs = [ravel(as_var(x)) for x in xi]
    n = len(xs)
    shape = [x.shape[0] for x in xs]
    if indexing == "xy" and n >= 2:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, x in enumerate(xs):
        axis = (1 if i == 0 else 0 if i == 1 else i) if indexing == "xy" and n >= 2 else i
        s = [1] * n
        s[axis] = x.shape[0]
        v = reshape(x, tuple(s))
        out.append(v if sparse else broadcast_to(v, tuple(shape)))
    return out


@public
def copy(a: Any, order: None = None) -> Variable:
    """jnp.copy: the same values (arrays are immutable)."""
    return as_var(a)


@public
def empty(shape: Any, dtype: Any = None, device: Any = None) -> Variable:
    """jnp.empty: zeros (as jnp.empty gives)."""
    return zeros(shape, dtype)


@public
def empty_like(
    prototype: Any, dtype: Any = None, shape: Any = None, device: Any = None
) -> Variable:
    """jnp.empty_like: zeros like `prototype`."""
    p = as_var(prototype)
    return zeros(p.shape if shape is None else shape, p.dtype if dtype is None else dtype)


@public
def logspace(
    start: Any,
    stop: Any,
    num: int = 50,
    endpoint: bool = True,
    base: float = 10.0,
    dtype: Any = None,
    axis: int = 0,
) -> Variable:
    """jnp.logspace: base ** linspace(start, stop, num)."""
    from .construct import linspace

    lin = linspace(start, stop, num, endpoint, dtype=None, axis=axis)
    out = exp(lin * float(np.log(base)))
    return out if dtype is None else astype(out, dtype)


@public
def geomspace(
    start: Any, stop: Any, num: int = 50, endpoint: bool = True, dtype: Any = None, axis: int = 0
) -> Variable:
    """jnp.geomspace: a geometric sequence from start to stop (same signs; complex ones: on
    the logarithmic spiral from start's direction, as jnp's)."""
    from .construct import linspace

    s, e = promoted(start, stop, inexact=True)
    if s.dtype.kind == "c":  # jnp's: sign(s) * exp(linspace(log(s / sign(s)), log(e / sign(s))))
        turn = s / astype(abs(s), s.dtype)
        out = turn * exp(linspace(log(s / turn), log(e / turn), num, endpoint, axis=axis))
        return out if dtype is None else astype(out, dtype)
    lin = linspace(log(abs(s)), log(abs(e)), num, endpoint, axis=axis)
    mag = exp(lin)
    out = where(s < 0, -mag, mag)
    return out if dtype is None else astype(out, dtype)


@public
def diagflat(v: Any, k: int = 0) -> Variable:
    """jnp.diagflat: a 2-D array with the flattened `v` on diagonal k."""
    from .construct import diag

    return diag(ravel(as_var(v)), k)


@public
def fromfunction(
    function: Callable[..., Any], shape: Sequence[int], *, dtype: Any = float, **kwargs: Any
) -> Any:
    """jnp.fromfunction: `function` called on the index grids (broadcast, one per axis)."""
    shape = tuple(shape)
    grids = [
        arange(n, dtype=dtype).reshape(tuple(n if d == i else 1 for d in range(len(shape))))
        for i, n in enumerate(shape)
    ]
    out = function(*grids, **kwargs)
    return jax.tree_util.tree_map(lambda v: elementwise.add(zeros(shape, as_var(v).dtype), v), out)


@public
def vander(x: Any, N: int | None = None, increasing: bool = False) -> Variable:
    """jnp.vander: the Vandermonde matrix, columns x**(N-1) ... x**0 (or increasing)."""
    x = as_var(x)
    if x.ndim != 1:
        raise ShapeError(f"vander takes a 1-D array, got {x.type_str()}", op="vander")
    n = x.shape[0] if N is None else int(N)
    if n == 0:
        from .creation import zeros

        return zeros((x.shape[0], 0), x.dtype)
    cols = [x**0] + [x**k for k in range(1, n)]
    m = stack(cols, -1)
    return m if increasing else m[:, ::-1]
