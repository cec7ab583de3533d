"""PyTorch's `torch.nn.init` (`sg.nn.init`): initialisers that fill a Tensor in place, with
PyTorch's names, signatures, fan computation and gains.

    sg.nn.init.xavier_uniform_(layer.weight)
    sg.nn.init.orthogonal_(conv.weight, sg.nn.init.calculate_gain("relu"))

Each draws on the host with NumPy (`generator=`: a `numpy.random.Generator`; default, a new
one from the process's seed counter), so no shape compiles a program, and writes the values
into the Tensor in place (`Tensor.assign`: the same Tensor, attached as before, keeping its
dtype and device); each returns the Tensor. The numbers are not PyTorch's (another random
generator) but their distributions are: fans as PyTorch computes them (a weight (out, in,
*kernel): fan_in = in * prod(kernel), fan_out = out * prod(kernel)).

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..base.errors import SrcgradError, user_location
from .seeds import seeded_rng
from .tensor import Tensor

#: calculate_gain's table (leaky_relu and selu below).
GAINS = {
    "linear": 1.0,
    "conv1d": 1.0,
    "conv2d": 1.0,
    "conv3d": 1.0,
    "conv_transpose1d": 1.0,
    "conv_transpose2d": 1.0,
    "conv_transpose3d": 1.0,
    "sigmoid": 1.0,
    "tanh": 5.0 / 3,
    "relu": math.sqrt(2.0),
    "selu": 3.0 / 4,
}


class InitError(SrcgradError, ValueError):
    """A bad argument of an `sg.nn.init` function: a ValueError, as PyTorch's."""


def _fail(who: str, message: str) -> InitError:
    return InitError(f"sg.nn.init.{who}: {message}", loc=user_location())


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain of `nonlinearity` (leaky_relu: sqrt(2 / (1 + slope^2)), slope
    `param`, default 0.01)."""
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = float(param)
        else:
            raise _fail("calculate_gain", f"negative_slope {param!r} is not a valid number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity not in GAINS:
        raise _fail("calculate_gain", f"unsupported nonlinearity {nonlinearity!r}")
    return GAINS[nonlinearity]


def fans(tensor: Tensor, who: str = "init") -> tuple[int, int]:
    """(fan_in, fan_out) of a weight (out, in, *kernel), as PyTorch computes them."""
    shape = tuple(tensor.shape)
    if len(shape) < 2:
        raise _fail(who, f"fan in and fan out need a tensor of 2 or more axes, got {shape}")
    receptive = int(np.prod(shape[2:], dtype=np.int64))
    return shape[1] * receptive, shape[0] * receptive


def _fan(tensor: Tensor, mode: str, who: str) -> int:
    if mode not in ("fan_in", "fan_out"):
        raise _fail(who, f"mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = fans(tensor, who)
    return fan_in if mode == "fan_in" else fan_out


def _rng(generator: Any) -> np.random.Generator:
    return seeded_rng(None) if generator is None else generator


def _write(tensor: Tensor, value: np.ndarray, who: str) -> Tensor:
    if not isinstance(tensor, Tensor):
        raise _fail(who, f"expected an sg.Tensor to fill in place, got {type(tensor).__name__}")
    tensor.assign(np.asarray(value, dtype=tensor.dtype))
    return tensor


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator: Any = None) -> Tensor:
    """Values uniform in [a, b)."""
    return _write(tensor, _rng(generator).uniform(a, b, tensor.shape), "uniform_")


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator: Any = None) -> Tensor:
    return _write(tensor, _rng(generator).normal(mean, std, tensor.shape), "normal_")


def trunc_normal_(
    tensor: Tensor,
    mean: float = 0.0,
    std: float = 1.0,
    a: float = -2.0,
    b: float = 2.0,
    generator: Any = None,
) -> Tensor:
    """N(mean, std) truncated to [a, b] (bounds in values, not in standard deviations),
    by redrawing the values outside."""
    if not a < b:
        raise _fail("trunc_normal_", f"the bounds must satisfy a < b, got a={a}, b={b}")
    rng = _rng(generator)
    values = rng.normal(mean, std, tensor.shape)
    outside = (values < a) | (values > b)
    for _ in range(1000):
        if not outside.any():
            break
        values[outside] = rng.normal(mean, std, int(outside.sum()))
        outside = (values < a) | (values > b)
    else:
        raise _fail("trunc_normal_", f"[{a}, {b}] holds too little of N({mean}, {std}^2)")
    return _write(tensor, values, "trunc_normal_")


def constant_(tensor: Tensor, val: float) -> Tensor:
    return _write(tensor, np.full(tensor.shape, val), "constant_")


def zeros_(tensor: Tensor) -> Tensor:
    return _write(tensor, np.zeros(tensor.shape), "zeros_")


def ones_(tensor: Tensor) -> Tensor:
    return _write(tensor, np.ones(tensor.shape), "ones_")


def eye_(tensor: Tensor) -> Tensor:
    """The identity of a 2-D tensor (ones on the diagonal of a non-square one)."""
    if tensor.ndim != 2:
        raise _fail("eye_", f"only 2-D tensors, got shape {tuple(tensor.shape)}")
    return _write(tensor, np.eye(*tensor.shape), "eye_")


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """A convolution kernel (out, in, *k) that passes its input through (the identity on the
    first min(out, in) channels of each group), as PyTorch's."""
    shape = tuple(tensor.shape)
    if len(shape) not in (3, 4, 5) or shape[0] % groups:
        raise _fail("dirac_", f"a 3-, 4- or 5-D tensor with out divisible by {groups}, got {shape}")
    out = np.zeros(shape)
    per = shape[0] // groups
    centre = tuple(k // 2 for k in shape[2:])
    for g in range(groups):
        for d in range(min(per, shape[1])):
            out[(g * per + d, d) + centre] = 1.0
    return _write(tensor, out, "dirac_")


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator: Any = None) -> Tensor:
    """Uniform in +-gain sqrt(6 / (fan_in + fan_out)) (Glorot)."""
    fan_in, fan_out = fans(tensor, "xavier_uniform_")
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return _write(tensor, _rng(generator).uniform(-bound, bound, tensor.shape), "xavier_uniform_")


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator: Any = None) -> Tensor:
    """N(0, gain^2 2 / (fan_in + fan_out))."""
    fan_in, fan_out = fans(tensor, "xavier_normal_")
    std = gain * math.sqrt(2.0 / (fan_in + fan_out))
    return _write(tensor, _rng(generator).normal(0.0, std, tensor.shape), "xavier_normal_")


def kaiming_uniform_(
    tensor: Tensor,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Any = None,
) -> Tensor:
    """Uniform in +-gain sqrt(3 / fan) (He), gain of `nonlinearity` with slope `a`."""
    fan = _fan(tensor, mode, "kaiming_uniform_")
    bound = calculate_gain(nonlinearity, a) * math.sqrt(3.0 / fan)
    return _write(tensor, _rng(generator).uniform(-bound, bound, tensor.shape), "kaiming_uniform_")


def kaiming_normal_(
    tensor: Tensor,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Any = None,
) -> Tensor:
    """N(0, gain^2 / fan) (He)."""
    fan = _fan(tensor, mode, "kaiming_normal_")
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return _write(tensor, _rng(generator).normal(0.0, std, tensor.shape), "kaiming_normal_")


def orthogonal_(tensor: Tensor, gain: float = 1.0, generator: Any = None) -> Tensor:
    """A (semi-)orthogonal matrix times `gain`, from the QR of a Gaussian (the sign of R's
    diagonal folded in); a tensor of more axes is flattened to (shape[0], rest)."""
    if tensor.ndim < 2:
        raise _fail("orthogonal_", f"only tensors of 2 or more axes, got {tuple(tensor.shape)}")
    rows = tensor.shape[0]
    cols = tensor.size // rows
    flat = _rng(generator).normal(0.0, 1.0, (rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _write(tensor, gain * q.reshape(tensor.shape), "orthogonal_")


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01, generator: Any = None) -> Tensor:
    """N(0, std) with a fraction `sparsity` of each column set to zero (2-D only)."""
    if tensor.ndim != 2:
        raise _fail("sparse_", f"only 2-D tensors, got {tuple(tensor.shape)}")
    rng = _rng(generator)
    rows, cols = tensor.shape
    values = rng.normal(0.0, std, (rows, cols))
    zeros = int(math.ceil(sparsity * rows))
    for c in range(cols):
        values[rng.permutation(rows)[:zeros], c] = 0.0
    return _write(tensor, values, "sparse_")


__all__ = [
    "InitError",
    "calculate_gain",
    "uniform_",
    "normal_",
    "trunc_normal_",
    "constant_",
    "zeros_",
    "ones_",
    "eye_",
    "dirac_",
    "xavier_uniform_",
    "xavier_normal_",
    "kaiming_uniform_",
    "kaiming_normal_",
    "orthogonal_",
    "sparse_",
]
