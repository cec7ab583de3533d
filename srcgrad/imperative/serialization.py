"""`sg.save` / `sg.load`: a state_dict in NumPy's .npz format (PyTorch's torch.save /
torch.load of a state_dict, without pickle), and jax.numpy's save / load of one array.

    sg.save(model.state_dict(), "model.npz")       # PyTorch's order: (obj, f)
    model.load_state_dict(sg.load("model.npz"))    # {name: np.ndarray}
    sg.save("x.npy", x); x = sg.load("x.npy")      # jnp.save / jnp.load: (file, arr)

The two orders cannot be confused: PyTorch's first argument is a mapping, NumPy's a path or
a file.

The file holds one array per name and nothing else: loading runs no code (NumPy's
`allow_pickle=False`), so a file from elsewhere is safe to open. What is saved is a mapping
of string names to arrays (NumPy or JAX arrays, sg.Tensors, numbers); anything else (an
optimizer's nested state, a Module itself) is refused with the path to the offending entry.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

import os
from typing import Any, BinaryIO, Mapping

import jax.numpy as jnp
import numpy as np

from ..base.errors import SrcgradError, user_location
from .tensor import Tensor


class SaveError(SrcgradError, TypeError):
    """An object sg.save cannot write as arrays."""


def _array(name: str, value: Any) -> np.ndarray:
    if isinstance(value, Tensor):
        return np.asarray(value.value())
    if isinstance(value, (np.ndarray, int, float, bool, np.number)) or hasattr(value, "__array__"):
        out = np.asarray(value)
        if out.dtype != object:
            return out
    raise SaveError(
        f"sg.save: entry {name!r} is a {type(value).__name__}, not an array; sg.save writes "
        "a state_dict (a mapping of names to arrays) as .npz",
        loc=user_location(),
    )


def save(obj: Any, f: Any) -> None:
    """Write the state_dict `obj` to `f` (a path or a binary file) as .npz (a path without
    the .npz suffix gets none added: the file is written where it is named); or, called as
    jnp.save(file, arr), one array as .npy (pickle refused)."""
    if isinstance(obj, (str, os.PathLike)) or hasattr(obj, "write"):
        np.save(obj, _array("arr", f), allow_pickle=False)
        return
    if not isinstance(obj, Mapping):
        raise SaveError(
            f"sg.save writes a state_dict (a mapping of names to arrays), got "
            f"{type(obj).__name__}: pass model.state_dict()",
            loc=user_location(),
        )
    arrays = {}
    for name, value in obj.items():
        if not isinstance(name, str):
            raise SaveError(
                f"sg.save: the names must be strings, got {name!r}", loc=user_location()
            )
        arrays[name] = _array(name, value)
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as out:
            np.savez(out, **arrays)
    else:
        np.savez(f, **arrays)


def load(f: str | os.PathLike | BinaryIO, map_location: Any = None, **kwargs: Any) -> Any:
    """The state_dict saved in `f` (.npz) as {name: NumPy array}, in the saved order; a .npy
    file's array as a jax.Array (jnp.load's result). Never unpickles. `map_location` is
    accepted for PyTorch's signature: the arrays are on the host, and
    `model.load_state_dict` puts them where the model's parameters are."""
    loaded = np.load(f, allow_pickle=False)
    if isinstance(loaded, np.ndarray):
        return jnp.asarray(loaded)
    with loaded as z:
        return {k: z[k] for k in z.files}


__all__ = ["SaveError", "save", "load"]
