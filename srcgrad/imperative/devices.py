"""PyTorch's `.to(device)`, `.cuda()` and `.cpu()` as JAX devices, and `.to(dtype)`.

    model.to("cuda")            # the first GPU of jax.devices("gpu"), or an error saying so
    x = sg.tensor(data).to("cuda:1")

A device is a `jax.Device`, or a string: "cpu", "cuda" / "gpu" (the first GPU), "cuda:k" /
"gpu:k" (the k-th), "tpu", "tpu:k"; an object with a `.type` and `.index` (a torch.device)
is read as its string. A Tensor's `.to` returns a new Tensor (itself when nothing changes);
a Module's moves or casts its parameters in place and returns the Module, as PyTorch's.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from ..base import dtypes
from ..base.errors import SrcgradError, user_location

#: PyTorch's device names -> JAX's platform names.
PLATFORMS = {"cpu": "cpu", "cuda": "gpu", "gpu": "gpu", "tpu": "tpu"}


class DeviceError(SrcgradError, RuntimeError):
    """A device that does not exist here (a RuntimeError, as PyTorch's), naming the ones
    that do."""


def device_of(spec: Any) -> jax.Device:
    """The jax.Device that `spec` names (see the module's docstring)."""
    if isinstance(spec, jax.Device):
        return spec
    text = str(spec) if hasattr(spec, "type") and not isinstance(spec, str) else spec
    if not isinstance(text, str):
        raise DeviceError(
            f"a device must be a jax.Device or a string such as 'cpu' or 'cuda:0', got "
            f"{type(spec).__name__}",
            loc=user_location(),
        )
    name, _, index = text.lower().partition(":")
    platform = PLATFORMS.get(name)
    if platform is None:
        raise DeviceError(
            f"unknown device {spec!r}: use 'cpu', 'cuda' / 'gpu', 'cuda:k' or 'tpu' "
            f"(JAX's devices here: {jax.devices()})",
            loc=user_location(),
        )
    try:
        found = jax.devices(platform)
    except RuntimeError:
        found = []
    k = int(index) if index else 0
    if k >= len(found):
        have = f"{len(found)} {platform} device(s)" if found else f"no {platform} device"
        hint = (
            " (a GPU needs jax with CUDA: pip install 'jax[cuda12]')" if platform == "gpu" else ""
        )
        raise DeviceError(
            f"device {spec!r}: JAX has {have}{hint}; its devices: {jax.devices()}",
            loc=user_location(),
        )
    return found[k]


def is_device(spec: Any) -> bool:
    """Whether a `.to(...)` argument names a device (else it is a dtype)."""
    if isinstance(spec, jax.Device) or (hasattr(spec, "type") and hasattr(spec, "index")):
        return True
    return isinstance(spec, str) and spec.lower().partition(":")[0] in PLATFORMS


def parse_to(args: tuple, kwargs: dict[str, Any]) -> tuple[jax.Device | None, np.dtype | None]:
    """(device, dtype) of PyTorch's `.to(device=None, dtype=None, non_blocking=False,
    copy=False)`, `.to(dtype)` and `.to(device, dtype)` forms."""
    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    kwargs.pop("non_blocking", None)
    kwargs.pop("copy", None)
    if kwargs:
        raise SrcgradError(f".to(): unexpected keywords {sorted(kwargs)}", loc=user_location())
    for a in args:
        if is_device(a):
            device = a
        elif _is_dtype(a):
            dtype = a
        elif hasattr(a, "dtype"):  # .to(other): the other array's device and dtype
            device, dtype = next(iter(_value(a).devices())), a.dtype
        else:
            raise SrcgradError(
                f".to(): expected a device ('cpu', 'cuda', 'cuda:k', 'tpu', a jax.Device), a "
                f"dtype or an array, got {repr(a) if isinstance(a, str) else type(a).__name__}",
                loc=user_location(),
            )
    dev = None if device is None else device_of(device)
    dt = None if dtype is None else checked_dtype(dtype)
    return dev, dt


def _is_dtype(a: Any) -> bool:
    try:
        np.dtype(a)
    except TypeError:
        return False
    return True


def _value(a: Any) -> Any:
    return a.value() if hasattr(a, "value") and callable(a.value) else a


def checked_dtype(dtype: Any) -> np.dtype:
    """`dtype` as JAX will hold it; a 64-bit type without jax_enable_x64 is an error (JAX
    would silently keep 32 bits)."""
    want = np.dtype(dtype)
    got = dtypes.canonical(want)
    if got != want:
        raise SrcgradError(
            f"{want.name} needs 64-bit mode: call jax.config.update('jax_enable_x64', True) "
            f"before making arrays (without it JAX holds {got.name})",
            loc=user_location(),
        )
    return want


def placed(value: Any, device: jax.Device) -> Any:
    """`value` (a jax.Array) on `device`."""
    return jax.device_put(value, device)


__all__ = ["DeviceError", "device_of", "is_device", "parse_to", "checked_dtype", "placed"]
