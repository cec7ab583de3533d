"""Item assignment on imperative Tensors: `t[i] = v` replaces `t`'s value by the functional
update `t.at[i].set(v)` and, under `record()`, rebinds its recorded variable to the update's,
so that the gradient reaches both the old value of `t` and `v` (`Tensor.__setitem__` calls
it through the hook `tensor.SETITEM`, which srcgrad/wiring.py sets).

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from ..core.builder import as_var
from ..core import dispatch
from ..base.errors import SrcgradError, user_location
from ..ir.program import Variable
from ..ops.elementwise import astype
from ..ops.shape import broadcast_to, reshape
from .tensor import Tensor


def _updated(x: Variable, pos: Variable, value: Any) -> Variable:
    """`x` with `value` written at the flat positions `pos`."""
    u = astype(as_var(value, like=x), x.dtype)
    if u.shape != pos.shape:
        u = broadcast_to(u, pos.shape)
    flat = reshape(x, (-1,))
    return reshape(flat.at[reshape(pos, (-1,))].set(reshape(u, (-1,))), x.shape)


def _concrete(index: Any) -> Any:
    return jax.tree_util.tree_map(
        lambda i: np.asarray(i) if isinstance(i, (Tensor, jax.Array)) else i,
        index,
        is_leaf=lambda i: isinstance(i, Tensor),
    )


def tensor_setitem(t: Tensor, index: Any, value: Any) -> None:
    """`t[index] = value` (also `t[index] += value`, which Python runs as a get and a set)."""
    from .autograd import is_recording

    if t.grad_req is not None and is_recording():
        raise SrcgradError(
            f"cannot assign items of {t!r} inside record(): it has attach_grad(), "
            "so its gradient is that of the value it held; assign into a copy "
            "(t2 = t * 1) instead",
            op="setitem",
            loc=user_location(),
        )
    try:
        pos = np.arange(t.size, dtype=np.int32).reshape(t.shape)[_concrete(index)]
    except (IndexError, TypeError) as e:
        raise SrcgradError(
            f"t[{index!r}] = ...: {e} (t is {t.dtype.name}{list(t.shape)})",
            op="setitem",
            loc=user_location(),
        ) from None
    new = dispatch.call(_updated, (t, np.asarray(pos), value), {})
    t._value, t._tape, t._num = new._value, new._tape, new._num
