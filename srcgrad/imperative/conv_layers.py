"""`Conv1d`, `Conv2d`, `Conv3d`: PyTorch's convolution layers over `sg.conv` (2-D, NCHW).

Layouts are PyTorch's: inputs (N, C, *spatial), kernels (O, I, *kernel), and the same
default initialisation (uniform in +-1/sqrt(fan_in), weight and bias). A 1-D convolution
is a 2-D one over a height of 1; a 3-D one sums 2-D convolutions over the kernel's depth,
each on the input planes that depth offset reads (strided slices), so every rank is
differentiated by srcgrad's rules for `conv`, slicing and reshapes.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from ..ops import manip
from ..ops import shape as shape_ops
from ..ops.conv import conv
from ..base.errors import SrcgradError, user_location
from .layers import Module, new_parameter
from .seeds import seeded_rng

Pads = tuple[tuple[int, int], ...]


def _tuple(v: int | Sequence[int], n: int, what: str) -> tuple[int, ...]:
    out = (v,) * n if isinstance(v, int) else tuple(int(x) for x in v)
    if len(out) != n:
        raise SrcgradError(f"Conv{n}d: {what} needs {n} values, got {v!r}", loc=user_location())
    return out


def _pads(padding: Any, kernel: tuple[int, ...], dilation: tuple[int, ...]) -> Pads:
    """(lo, hi) per spatial axis for an int, a tuple, "valid" or "same" (stride 1)."""
    n = len(kernel)
    if isinstance(padding, str):
        if padding.lower() == "valid":
            return ((0, 0),) * n
        if padding.lower() == "same":
            total = [d * (k - 1) for k, d in zip(kernel, dilation)]
            return tuple((t // 2, t - t // 2) for t in total)
        raise SrcgradError(
            f"Conv{n}d: padding must be an int, a tuple, 'valid' or 'same', got {padding!r}",
            loc=user_location(),
        )
    return tuple((p, p) for p in _tuple(padding, n, "padding"))


class _ConvNd(Module):
    rank = 2

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | Sequence[int],
        stride: int | Sequence[int] = 1,
        padding: Any = 0,
        dilation: int | Sequence[int] = 1,
        bias: bool = True,
        *,
        seed: int | None = None,
        dtype: Any = "float32",
    ):
        n = self.rank
        self.kernel = _tuple(kernel_size, n, "kernel_size")
        self.stride = _tuple(stride, n, "stride")
        self.dilation = _tuple(dilation, n, "dilation")
        self.padding = _pads(padding, self.kernel, self.dilation)
        if isinstance(padding, str) and padding.lower() == "same" and set(self.stride) != {1}:
            raise SrcgradError(
                f"Conv{n}d: padding='same' needs stride 1, got {self.stride}", loc=user_location()
            )
        bound = 1 / math.sqrt(in_channels * math.prod(self.kernel))
        rng = seeded_rng(seed)
        shape = (out_channels, in_channels, *self.kernel)
        self.weight = new_parameter(rng.uniform(-bound, bound, shape), f"conv{n}d_w", dtype)
        self.bias = (
            new_parameter(rng.uniform(-bound, bound, (out_channels,)), f"conv{n}d_b", dtype)
            if bias
            else None
        )

    def forward(self, x: Any) -> Any:
        n = self.rank
        if x.ndim != n + 2:
            raise SrcgradError(
                f"Conv{n}d: the input must be (N, C, {n} spatial axes), got shape {tuple(x.shape)}",
                loc=user_location(),
            )
        y = self._conv(x)
        if self.bias is None:
            return y
        return y + self.bias.reshape((-1,) + (1,) * n)

    def _conv(self, x: Any) -> Any:
        raise NotImplementedError


def _conv2d(x: Any, w: Any, stride: Sequence[int], pads: Pads, dilation: Sequence[int]) -> Any:
    return conv(
        x, w, strides=tuple(stride), padding=pads, layout="NCHW", rhs_dilation=tuple(dilation)
    )


class Conv2d(_ConvNd):
    """`torch.nn.Conv2d`: (N, C, H, W) with a kernel (O, C, KH, KW)."""

    rank = 2

    def _conv(self, x: Any) -> Any:
        return _conv2d(x, self.weight, self.stride, self.padding, self.dilation)


class Conv1d(_ConvNd):
    """`torch.nn.Conv1d`: (N, C, L) with a kernel (O, C, K)."""

    rank = 1

    def _conv(self, x: Any) -> Any:
        y = _conv2d(
            shape_ops.expand_dims(x, 2),
            shape_ops.expand_dims(self.weight, 2),
            (1, *self.stride),
            ((0, 0), *self.padding),
            (1, *self.dilation),
        )
        return shape_ops.squeeze(y, 2)


class Conv3d(_ConvNd):
    """`torch.nn.Conv3d`: (N, C, D, H, W) with a kernel (O, C, KD, KH, KW)."""

    rank = 3

    def _conv(self, x: Any) -> Any:
        (lo, hi), pads = self.padding[0], self.padding[1:]
        if lo or hi:
            x = manip.pad(x, ((0, 0), (0, 0), (lo, hi), (0, 0), (0, 0)))
        n, c, depth = x.shape[:3]
        sd, dd = self.stride[0], self.dilation[0]
        d_out = (depth - dd * (self.kernel[0] - 1) - 1) // sd + 1
        if d_out <= 0:
            raise SrcgradError(
                f"Conv3d: the padded depth {depth} is smaller than the dilated "
                f"kernel depth {dd * (self.kernel[0] - 1) + 1}",
                loc=user_location(),
            )
        out = None
        for kd in range(self.kernel[0]):
            start = kd * dd
            planes = x[:, :, start : start + sd * (d_out - 1) + 1 : sd]  # (N, C, d_out, H, W)
            planes = shape_ops.transpose(planes, (0, 2, 1, 3, 4)).reshape(
                (n * d_out, c) + x.shape[3:]
            )
            y = _conv2d(planes, self.weight[:, :, kd], self.stride[1:], pads, self.dilation[1:])
            out = y if out is None else out + y
        out = out.reshape((n, d_out) + tuple(out.shape[1:]))
        return shape_ops.transpose(out, (0, 2, 1, 3, 4))


__all__ = ["Conv1d", "Conv2d", "Conv3d"]
