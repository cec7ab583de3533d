"""`sg.nn.initializers`: jax.nn.initializers' initialisers over sg.random, with the same
numbers for the same key.

    init = sg.nn.initializers.glorot_normal()
    w = init(sg.random.PRNGKey(0), (3, 4))        # == jax.nn.initializers.glorot_normal()(...)

Each maker returns `init(key, shape, dtype=None)`; it runs eagerly on concrete keys and
inside traced code on traced keys.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from ..base import dtypes
from .. import random as _rnd
from ..core import dispatch
from ..base.errors import SrcgradError, user_location
from ..ops.construct import diagonal
from ..ops.creation import full
from ..ops.creation import zeros as _zeros
from ..ops.linalg_decompositions import qr
from ..ops.elementwise import sign
from ..ops.manip import moveaxis
from ..ops.shape import expand_dims, reshape, swapaxes

Initializer = Callable[..., Any]
_random = {n: getattr(_rnd, n) for n in _rnd.__all__}


def _with_default(body: Initializer, default: Any) -> Initializer:
    """The initialiser `init(key, shape, dtype=default)` of `body`: outside a trace one
    compiled eager call (not one per op), inside a trace the ops themselves."""

    def init(key: Any, shape: Sequence[int], dtype: Any = default) -> Any:
        args = (_rnd.key_data_of(key), _shape(shape), _dtype(dtype))
        return dispatch.call(body, args, {})

    init.__doc__ = body.__doc__
    return init


def _scalar(value: Any, dt: np.dtype) -> float:
    """`value` rounded to `dt`, as a Python number (written into the program, never captured)."""
    return float(np.asarray(value, dt))


def _dtype(dtype: Any) -> np.dtype:
    return dtypes.default_float() if dtype is None else dtypes.canonical(dtype)


def _shape(shape: Sequence[int] | int) -> tuple[int, ...]:
    return (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)


def _fail(message: str) -> SrcgradError:
    return SrcgradError(f"sg.nn.initializers: {message}", loc=user_location())


def zeros(key: Any, shape: Sequence[int], dtype: Any = None) -> Any:
    """jax.nn.initializers.zeros: an array of zeros (the key is not used)."""
    return _zeros(_shape(shape), _dtype(dtype))


def ones(key: Any, shape: Sequence[int], dtype: Any = None) -> Any:
    """jax.nn.initializers.ones: an array of ones."""
    return full(_shape(shape), 1, _dtype(dtype))


def constant(value: Any, dtype: Any = None) -> Initializer:
    """jax.nn.initializers.constant(value): `value` broadcast to the shape."""

    def body(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        return full(_shape(shape), value, _dtype(dtype))

    return _with_default(body, dtype)


def uniform(scale: float = 1e-2, dtype: Any = None) -> Initializer:
    """jax.nn.initializers.uniform(scale=1e-2): uniform in [0, scale)."""

    def body(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        dt = _dtype(dtype)
        return _random["uniform"](key, _shape(shape), dt) * _scalar(scale, dt)

    return _with_default(body, dtype)


def normal(stddev: float = 1e-2, dtype: Any = None) -> Initializer:
    """jax.nn.initializers.normal(stddev=1e-2)."""

    def body(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        dt = _dtype(dtype)
        return _random["normal"](key, _shape(shape), dt) * _scalar(stddev, dt)

    return _with_default(body, dtype)


def truncated_normal(
    stddev: float = 1e-2, dtype: Any = None, lower: float = -2.0, upper: float = 2.0
) -> Initializer:
    """jax.nn.initializers.truncated_normal(stddev=1e-2, lower=-2, upper=2)."""

    def body(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        dt = _dtype(dtype)
        return _random["truncated_normal"](key, lower, upper, _shape(shape), dt) * _scalar(
            stddev, dt
        )

    return _with_default(body, dtype)


def _axes_size(shape: tuple[int, ...], axes: int | Sequence[int]) -> int:
    return shape[axes] if isinstance(axes, int) else math.prod(shape[a] for a in axes)


def _fans(
    shape: tuple[int, ...], in_axis: Any, out_axis: Any, batch_axis: Any
) -> tuple[float, float]:
    """jax's _compute_fans: the receptive field is every axis not named."""
    if isinstance(in_axis, int) and in_axis == -2 and len(shape) <= 1:
        raise _fail(f"cannot compute fans of a {len(shape)}-D shape with the default in_axis")
    in_size, out_size = _axes_size(shape, in_axis), _axes_size(shape, out_axis)
    receptive = math.prod(shape) / in_size / out_size / _axes_size(shape, batch_axis)
    return in_size * receptive, out_size * receptive


def variance_scaling(
    scale: float,
    mode: str,
    distribution: str,
    in_axis: Any = -2,
    out_axis: Any = -1,
    batch_axis: Any = (),
    dtype: Any = None,
) -> Initializer:
    """jax.nn.initializers.variance_scaling: a (truncated) normal or uniform sample with
    variance scale / fan (fan_in, fan_out, fan_avg or fan_geo_avg)."""

    def body(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        shape = _shape(shape)
        dt = _dtype(dtype)
        fan_in, fan_out = _fans(shape, in_axis, out_axis, batch_axis)
        denominators = {
            "fan_in": fan_in,
            "fan_out": fan_out,
            "fan_avg": (fan_in + fan_out) / 2,
            "fan_geo_avg": (fan_in * fan_out) ** 0.5,
        }
        if mode not in denominators:
            raise _fail(f"invalid mode for variance scaling: {mode!r}")
        variance = np.asarray(scale / denominators[mode], dt)
        if distribution == "truncated_normal":
            stddev = np.sqrt(variance) / np.asarray(0.87962566103423978, dt)
            return _random["truncated_normal"](key, -2, 2, shape, dt) * _scalar(stddev, dt)
        if distribution == "normal":
            return _random["normal"](key, shape, dt) * _scalar(np.sqrt(variance), dt)
        if distribution == "uniform":
            return _random["uniform"](key, shape, dt, -1) * _scalar(np.sqrt(3 * variance), dt)
        raise _fail(f"invalid distribution for variance scaling: {distribution!r}")

    return _with_default(body, dtype)


def _scaling(scale: float, mode: str, distribution: str, doc: str) -> Callable[..., Initializer]:
    def maker(
        in_axis: Any = -2, out_axis: Any = -1, batch_axis: Any = (), dtype: Any = None
    ) -> Initializer:
        return variance_scaling(scale, mode, distribution, in_axis, out_axis, batch_axis, dtype)

    maker.__doc__ = doc
    return maker


glorot_uniform = xavier_uniform = _scaling(
    1.0, "fan_avg", "uniform", "jax.nn.initializers.glorot_uniform (xavier_uniform)."
)
glorot_normal = xavier_normal = _scaling(
    1.0, "fan_avg", "truncated_normal", "jax.nn.initializers.glorot_normal (xavier_normal)."
)
lecun_uniform = _scaling(1.0, "fan_in", "uniform", "jax.nn.initializers.lecun_uniform.")
lecun_normal = _scaling(1.0, "fan_in", "truncated_normal", "jax.nn.initializers.lecun_normal.")
he_uniform = kaiming_uniform = _scaling(
    2.0, "fan_in", "uniform", "jax.nn.initializers.he_uniform (kaiming_uniform)."
)
he_normal = kaiming_normal = _scaling(
    2.0, "fan_in", "truncated_normal", "jax.nn.initializers.he_normal (kaiming_normal)."
)


def orthogonal(scale: float = 1.0, column_axis: int = -1, dtype: Any = None) -> Initializer:
    """jax.nn.initializers.orthogonal: a (semi-)orthogonal matrix from the QR factorisation
    of a normal sample, reshaped so that `column_axis` holds the columns."""

    def body(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        shape = _shape(shape)
        dt = _dtype(dtype)
        if len(shape) < 2:
            raise _fail("orthogonal needs at least a 2-D shape")
        if 0 in shape:
            return _zeros(shape, dt)
        n_cols = shape[column_axis]
        n_rows = math.prod(shape) // n_cols
        z = _random["normal"](key, (max(n_rows, n_cols), min(n_rows, n_cols)), dt)
        q, r = qr(z)
        q = q * expand_dims(sign(diagonal(r)), -2)
        if n_rows < n_cols:
            q = swapaxes(q, -1, -2)
        rest = tuple(d for i, d in enumerate(shape) if i != column_axis % len(shape))
        return moveaxis(reshape(q, rest + (n_cols,)), -1, column_axis) * _scalar(scale, dt)

    return _with_default(body, dtype)


__all__ = [
    "constant",
    "glorot_normal",
    "glorot_uniform",
    "he_normal",
    "he_uniform",
    "kaiming_normal",
    "kaiming_uniform",
    "lecun_normal",
    "lecun_uniform",
    "normal",
    "ones",
    "orthogonal",
    "truncated_normal",
    "uniform",
    "variance_scaling",
    "xavier_normal",
    "xavier_uniform",
    "zeros",
]
