"""`sg.random`: jax.random's key-based generators, one row each, lowered to jax.random calls.

A key is a uint32[2] array, as `jax.random.PRNGKey` makes it (typed keys from
`jax.random.key` are turned into their data by srcgrad/random.py before they get here), so
the same key gives the same numbers as jax.random. No gradient flows into a key; the
affine arguments of `uniform` (minval, maxval) and whatever a user computes from a sample
(`loc + scale * normal(key)`) are ordinary differentiable ops.

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable, Sequence

import jax
import numpy as np

from ..base import dtypes
from ..core.builder import as_var
from ..base.errors import ShapeError
from ..ir.program import Variable
from ..core.registry import ZERO, OutType
from ..core.declare import Emitted, defop, public_in
from .elementwise import astype, less, maximum

KEY = np.dtype(np.uint32)
Shape = Sequence[int]


@lru_cache(maxsize=1024)
def _eval(fn: Callable[..., Any], avals: tuple, attrs: tuple) -> OutType:
    out = jax.eval_shape(
        lambda *xs: fn(*xs, **dict(attrs)), *[jax.ShapeDtypeStruct(s, d) for s, d in avals]
    )
    return tuple(out.shape), np.dtype(out.dtype)


def _rule(fn: Callable[..., Any]) -> Callable[..., list[OutType]]:
    """The shape/dtype rule of a row: what `fn` (the jax.random call) gives on these inputs."""

    def infer(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
        avals = tuple((v.shape, v.dtype) for v in inputs)
        try:
            return [_eval(fn, avals, tuple(sorted(attrs.items())))]
        except (TypeError, ValueError) as e:
            raise ShapeError(f"{fn.__name__} on {[v.type_str() for v in inputs]}: {e}") from None

    return infer


def _key(key: Any, op: str) -> Variable:
    k = as_var(key)
    if k.shape[-1:] != (2,) or k.dtype != KEY:
        raise ShapeError(
            f"sg.random.{op} needs a key: a uint32[2] array (jax.random.PRNGKey, "
            f"sg.random.PRNGKey) or a typed key, got {k.type_str()}",
            op=f"random.{op}",
        )
    return k


def _shape(shape: Shape | int | None) -> tuple[int, ...]:
    if shape is None:
        return ()
    return (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)


def _float(dtype: Any) -> np.dtype:
    dt = dtypes.default_float() if dtype is None else dtypes.canonical(dtype)
    if not dtypes.is_float(dt):
        raise ShapeError(f"sg.random needs a float dtype here, got {dt}", op="random")
    return dt


def _seed(seed: Any) -> Emitted:
    s = as_var(seed)
    if s.shape != () or s.dtype.kind not in "iub":
        raise ShapeError(f"a seed is an integer scalar, got {s.type_str()}", op="random.PRNGKey")
    return [s], {}


@defop("random_key", _rule(jax.random.PRNGKey), "jax.random.PRNGKey({0})", ZERO, namespace="random")
def PRNGKey(seed: Any) -> Emitted:
    """jax.random.PRNGKey(seed): a uint32[2] key (the default threefry implementation)."""
    return _seed(seed)


@public_in("random")
def key(seed: Any) -> Variable:
    """jax.random.key(seed)'s numbers as a raw uint32[2] key (the same as PRNGKey: srcgrad
    values carry no key dtype; typed keys are accepted wherever a key is taken)."""
    return PRNGKey(seed)


@defop(
    "random_split",
    _rule(jax.random.split),
    "jax.random.split({0}, {num})",
    ZERO,
    namespace="random",
)
def split(key: Any, num: int = 2) -> Emitted:
    """jax.random.split(key, num=2): `num` new keys, uint32[num, 2]."""
    return [_key(key, "split")], {"num": int(num)}


@defop(
    "random_fold_in",
    _rule(jax.random.fold_in),
    "jax.random.fold_in({0}, {1})",
    ZERO,
    namespace="random",
)
def fold_in(key: Any, data: Any) -> Emitted:
    """jax.random.fold_in(key, data): a key that folds the integer `data` into `key`."""
    d = as_var(data)
    if d.shape != () or d.dtype.kind not in "iu":
        raise ShapeError(
            f"fold_in's data is an integer scalar, got {d.type_str()}", op="random.fold_in"
        )
    return [_key(key, "fold_in"), d], {}


@defop(
    "random_normal",
    _rule(jax.random.normal),
    "jax.random.normal({0}, {shape}, {dtype})",
    ZERO,
    namespace="random",
)
def normal(key: Any, shape: Shape = (), dtype: Any = None) -> Emitted:
    """jax.random.normal(key, shape=(), dtype=float): standard normal samples."""
    return [_key(key, "normal")], {"shape": _shape(shape), "dtype": _float(dtype)}


@defop(
    "random_uniform",
    _rule(jax.random.uniform),
    "jax.random.uniform({0}, {shape}, {dtype})",
    ZERO,
    export="random.uniform",
)
def _uniform01(key: Variable, shape: tuple[int, ...], dtype: np.dtype) -> Emitted:
    return [key], {"shape": shape, "dtype": dtype}


@public_in("random")
def uniform(
    key: Any, shape: Shape = (), dtype: Any = None, minval: Any = 0.0, maxval: Any = 1.0
) -> Variable:
    """jax.random.uniform(key, shape=(), dtype=float, minval=0., maxval=1.): samples in
    [minval, maxval), computed as JAX does (max(minval, u * (maxval - minval) + minval) of
    the [0, 1) sample u), so minval and maxval are differentiable."""
    dt = _float(dtype)
    u = _uniform01(_key(key, "uniform"), _shape(shape), dt)
    plain = (
        isinstance(minval, (int, float))
        and isinstance(maxval, (int, float))
        and float(minval) == 0.0
        and float(maxval) == 1.0
    )
    if plain:
        return u
    lo, hi = astype(as_var(minval), dt), astype(as_var(maxval), dt)
    return maximum(lo, u * (hi - lo) + lo)


@public_in("random")
def bernoulli(key: Any, p: Any = 0.5, shape: Shape | None = None, mode: str = "low") -> Variable:
    """jax.random.bernoulli(key, p=0.5, shape=None): True with probability p, as
    uniform(key, shape, p.dtype) < p (mode 'low', JAX's default)."""
    if mode != "low":
        raise ShapeError(
            f"bernoulli supports mode='low' (JAX's default), got {mode!r}", op="random.bernoulli"
        )
    pv = as_var(p)
    if not dtypes.is_float(pv.dtype):
        pv = astype(pv, dtypes.default_float())
    out_shape = pv.shape if shape is None else _shape(shape)
    return less(_uniform01(_key(key, "bernoulli"), out_shape, pv.dtype), pv)


def _categorical(key: Any, logits: Any, axis: int, shape: Any) -> Any:
    return jax.random.categorical(key, logits, axis, shape)


@defop(
    "random_categorical",
    _rule(_categorical),
    "jax.random.categorical({0}, {1}, {axis}, {shape})",
    ZERO,
    namespace="random",
)
def categorical(key: Any, logits: Any, axis: int = -1, shape: Shape | None = None) -> Emitted:
    """jax.random.categorical(key, logits, axis=-1, shape=None): indices drawn with
    probabilities softmax(logits) along `axis` (the Gumbel-max draw JAX makes)."""
    lg = as_var(logits)
    if not dtypes.is_float(lg.dtype):
        raise ShapeError(
            f"categorical needs float logits, got {lg.type_str()}", op="random.categorical"
        )
    return [_key(key, "categorical"), lg], {
        "axis": int(axis),
        "shape": None if shape is None else _shape(shape),
    }


def _randint(key: Any, lo: Any, hi: Any, shape: tuple, dtype: Any) -> Any:
    return jax.random.randint(key, shape, lo, hi, dtype)


@defop(
    "random_randint",
    _rule(_randint),
    "jax.random.randint({0}, {shape}, {1}, {2}, {dtype})",
    ZERO,
    namespace="random",
)
def randint(key: Any, shape: Shape, minval: Any, maxval: Any, dtype: Any = None) -> Emitted:
    """jax.random.randint(key, shape, minval, maxval, dtype=int): integers in [minval, maxval)."""
    dt = dtypes.default_int() if dtype is None else dtypes.canonical(dtype)
    if dt.kind not in "iu":
        raise ShapeError(f"randint needs an integer dtype, got {dt}", op="random.randint")
    lo, hi = as_var(minval), as_var(maxval)
    return [_key(key, "randint"), lo, hi], {"shape": _shape(shape), "dtype": dt}


def _range_permutation(key: Any, n: int) -> Any:
    return jax.random.permutation(key, n)


@defop(
    "random_permutation",
    _rule(_range_permutation),
    "jax.random.permutation({0}, {n})",
    ZERO,
    export="random.permutation",
)
def _permuted_range(key: Variable, n: int) -> Emitted:
    return [key], {"n": n}


@public_in("random")
def permutation(key: Any, x: Any, axis: int = 0, independent: bool = False) -> Variable:
    """jax.random.permutation(key, x, axis=0): a permutation of range(x) for an int `x`, else
    `x` shuffled along `axis` (a gather, so differentiable in `x`)."""
    from .indexing import take

    k = _key(key, "permutation")
    if isinstance(x, (int, np.integer)):
        return _permuted_range(k, int(x))
    xv = as_var(x)
    if xv.ndim == 0:
        raise ShapeError(
            "permutation of a 0-d array: pass an int or an array", op="random.permutation"
        )
    if independent and xv.ndim != 1:
        raise ShapeError("independent=True is supported for 1-D x only", op="random.permutation")
    from .rules import norm_axis

    ax = norm_axis(axis, xv.ndim)
    return take(xv, _permuted_range(k, xv.shape[ax]), axis=ax)


def _truncated(key: Any, lo: Any, hi: Any, shape: Any, dtype: Any) -> Any:
    return jax.random.truncated_normal(key, lo, hi, shape, dtype)


@defop(
    "random_truncated_normal",
    _rule(_truncated),
    "jax.random.truncated_normal({0}, {1}, {2}, {shape}, {dtype})",
    None,
    namespace="random",
)
def truncated_normal(
    key: Any, lower: Any, upper: Any, shape: Shape | None = None, dtype: Any = None
) -> Emitted:
    """jax.random.truncated_normal(key, lower, upper, shape=None, dtype=float): normal samples
    within (lower, upper). Not differentiable in lower and upper (a clear error if asked)."""
    dt = _float(dtype)
    lo, hi = astype(as_var(lower), dt), astype(as_var(upper), dt)
    return [_key(key, "truncated_normal"), lo, hi], {
        "shape": None if shape is None else _shape(shape),
        "dtype": dt,
    }
