"""The Module forms of `sg.nn.functional`: activations (`ReLU`, `Tanh`, `GELU`, ...), losses
(`CrossEntropyLoss`, `MSELoss`, ...), pooling (`MaxPool2d`, ...), `Flatten`, `PixelShuffle`,
`Identity`, `PReLU`, with PyTorch's constructor signatures.

    model = sg.nn.Sequential(sg.nn.Conv2d(1, 8, 3), sg.nn.ReLU(), sg.nn.MaxPool2d(2),
                             sg.nn.Flatten(), sg.nn.Linear(8 * 13 * 13, 10))
    loss = sg.nn.CrossEntropyLoss(label_smoothing=0.1)(model(x), labels)

Each module of `TABLE` is made from its function: its constructor takes PyTorch's
parameters (by position or keyword, in PyTorch's order, which is not always the function's:
`MaxPool2d(..., return_indices, ceil_mode)`) with the function's defaults, and `forward`
calls the function with them. A loss's `weight` is a constant, not a
parameter (PyTorch's buffer): it is held as an array, outside `parameters()`.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

import numpy as np

from .. import ops as declared_ops
from . import functional as F
from . import losses, pooling
from .layers import Module, new_parameter
from .tensor import Tensor

#: The op namespace (its names are declared when srcgrad is imported: mypy cannot see them).
ops: Any = declared_ops

_MAX = "kernel_size stride padding dilation return_indices ceil_mode"
_AVG = "kernel_size stride padding ceil_mode count_include_pad divisor_override"

#: Module -> (its function, the constructor's parameters in PyTorch's order). The defaults
#: are the function's; an input-taking module has one input, a loss two (input, target).
TABLE: dict[str, tuple[Callable[..., Any], str]] = {
    "ReLU": (F.relu, "inplace"),
    "ReLU6": (F.relu6, "inplace"),
    "Hardtanh": (F.hardtanh, "min_val max_val inplace"),
    "LeakyReLU": (F.leaky_relu, "negative_slope inplace"),
    "ELU": (F.elu, "alpha inplace"),
    "CELU": (F.celu, "alpha inplace"),
    "SELU": (F.selu, "inplace"),
    "GELU": (F.gelu, "approximate"),
    "SiLU": (F.silu, "inplace"),
    "Mish": (F.mish, "inplace"),
    "Sigmoid": (F.sigmoid, ""),
    "Tanh": (F.tanh, ""),
    "LogSigmoid": (F.logsigmoid, ""),
    "Softsign": (F.softsign, ""),
    "Tanhshrink": (F.tanhshrink, ""),
    "Softplus": (F.softplus, "beta threshold"),
    "Hardswish": (F.hardswish, "inplace"),
    "Hardsigmoid": (F.hardsigmoid, "inplace"),
    "Hardshrink": (F.hardshrink, "lambd"),
    "Softshrink": (F.softshrink, "lambd"),
    "Threshold": (F.threshold, "threshold value inplace"),
    "GLU": (F.glu, "dim"),
    "Softmax": (F.softmax, "dim"),
    "Softmin": (F.softmin, "dim"),
    "LogSoftmax": (F.log_softmax, "dim"),
    "PixelShuffle": (F.pixel_shuffle, "upscale_factor"),
    "PixelUnshuffle": (F.pixel_unshuffle, "downscale_factor"),
    "MaxPool1d": (pooling.max_pool1d, _MAX),
    "MaxPool2d": (pooling.max_pool2d, _MAX),
    "MaxPool3d": (pooling.max_pool3d, _MAX),
    "AvgPool1d": (pooling.avg_pool1d, "kernel_size stride padding ceil_mode count_include_pad"),
    "AvgPool2d": (pooling.avg_pool2d, _AVG),
    "AvgPool3d": (pooling.avg_pool3d, _AVG),
    "AdaptiveAvgPool1d": (pooling.adaptive_avg_pool1d, "output_size"),
    "AdaptiveAvgPool2d": (pooling.adaptive_avg_pool2d, "output_size"),
    "MSELoss": (losses.mse_loss, "size_average reduce reduction"),
    "L1Loss": (losses.l1_loss, "size_average reduce reduction"),
    "SmoothL1Loss": (losses.smooth_l1_loss, "size_average reduce reduction beta"),
    "HuberLoss": (losses.huber_loss, "reduction delta"),
    "KLDivLoss": (losses.kl_div, "size_average reduce reduction log_target"),
    "BCELoss": (losses.binary_cross_entropy, "weight size_average reduce reduction"),
    "BCEWithLogitsLoss": (
        losses.binary_cross_entropy_with_logits,
        "weight size_average reduce reduction pos_weight",
    ),
    "NLLLoss": (losses.nll_loss, "weight size_average ignore_index reduce reduction"),
    "CrossEntropyLoss": (
        losses.cross_entropy,
        "weight size_average ignore_index reduce reduction label_smoothing",
    ),
}


def _module(name: str, fn: Callable[..., Any], names: str) -> type[Module]:
    """The Module class `name` whose constructor takes `names` (the function's parameters
    of those names, with its defaults) and whose forward calls `fn`."""
    params = inspect.signature(fn).parameters
    sig = inspect.Signature(
        [params[n].replace(kind=inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names.split()]
    )

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        self.options = {  # a Tensor weight as an array: a constant, not a parameter
            k: v.value() if isinstance(v, Tensor) else v for k, v in bound.arguments.items()
        }

    def forward(self: Any, *xs: Any) -> Any:
        return fn(*xs, **self.options)

    def __repr__(self: Any) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self.options.items() if np.ndim(v) == 0)
        return f"{name}({shown})"

    __init__.__signature__ = sig.replace(  # type: ignore[attr-defined]
        parameters=[inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        + list(sig.parameters.values())
    )
    doc = f"`torch.nn.{name}{sig}`: calls `F.{fn.__name__}` with these options."
    attrs = {"__init__": __init__, "forward": forward, "__repr__": __repr__, "__doc__": doc}
    cls = type(name, (Module,), attrs)
    cls.__module__ = __name__
    return cls


#: The classes of TABLE, by name (sg.nn exports them).
MODULES: dict[str, type[Module]] = {name: _module(name, *row) for name, row in TABLE.items()}


class Identity(Module):
    """`torch.nn.Identity`: returns its input (any constructor arguments are ignored)."""

    def __init__(self, *args: Any, **kwargs: Any):
        pass

    def forward(self, input: Any) -> Any:
        return input


class Flatten(Module):
    """`torch.nn.Flatten(start_dim=1, end_dim=-1)`: axes start_dim..end_dim merged."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input: Any) -> Any:
        return F.flatten(input, self.start_dim, self.end_dim)


class Unflatten(Module):
    """`torch.nn.Unflatten(dim, unflattened_size)`: axis `dim` split into that shape."""

    def __init__(self, dim: int, unflattened_size: tuple[int, ...]):
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, input: Any) -> Any:
        shape = tuple(input.shape)
        d = self.dim % len(shape)
        return ops.reshape(input, shape[:d] + self.unflattened_size + shape[d + 1 :])


class PReLU(Module):
    """`torch.nn.PReLU(num_parameters=1, init=0.25)`: x if x > 0 else a x, `a` learned (one,
    or one per channel)."""

    def __init__(
        self, num_parameters: int = 1, init: float = 0.25, device: Any = None, dtype: Any = None
    ):
        dt = "float32" if dtype is None else dtype
        self.weight = new_parameter(np.full((num_parameters,), init), "prelu_w", dt)
        if device is not None:
            self.to(device)

    def forward(self, input: Any) -> Any:
        return F.prelu(input, self.weight)


__all__ = ["TABLE", "MODULES", "Identity", "Flatten", "Unflatten", "PReLU"]
