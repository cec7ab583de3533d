"""`sg.Tensor`: an eager array for imperative mode (MXNet's NDArray with autograd info).

A Tensor holds a concrete `jax.Array`, or, as the result of a call recorded inside
`sg.autograd.record()` that nothing has read yet, its shape and dtype (`PENDING`): reading
`_value` computes it on the recording's tape (srcgrad/imperative/tape.py), where the Tensor has a
number. Its operators and methods are a jax.numpy array's (ArrayMethods, srcgrad/ir/
array_methods.py: the srcgrad ops). What needs the recording (backward, in-place operators,
item assignment) goes through hooks that srcgrad/wiring.py sets from imperative/autograd.py
and imperative/setitem.py, which import this module. A Tensor is a JAX pytree of one leaf, its
array, so `jax.jit`, `jax.tree_util` and optax take Tensors where they take arrays.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from ..base import dtypes
from ..core import habits
from ..base.errors import SrcgradError, user_location
from ..base.hooks import Hook
from ..base.traceback_filter import api_boundary
from .devices import parse_to, placed
from ..ir.array_methods import ArrayMethods

GRAD_REQS = ("write", "add", "null")
#: The type of a recorded result's value before it is computed (its shape and dtype).
PENDING = jax.ShapeDtypeStruct
BACKWARD: Hook[Callable[..., None]] = Hook(
    "srcgrad.imperative.tensor.BACKWARD",
    "backward(heads, head_grads, variables, retain_graph, create_graph) (imperative/autograd.py)",
)
FORGET: Hook[Callable[["Tensor"], None]] = Hook(
    "srcgrad.imperative.tensor.FORGET", "drop a Tensor's recorded history (imperative/autograd.py)"
)
INPLACE: Hook[Callable[["Tensor", Any, str], "Tensor"]] = Hook(
    "srcgrad.imperative.tensor.INPLACE",
    "t -= v and the other in-place operators (imperative/autograd.py)",
)
SETITEM: Hook[Callable[["Tensor", Any, Any], None]] = Hook(
    "srcgrad.imperative.tensor.SETITEM", "t[i] = v (imperative/setitem.py)"
)
IS_RECORDING: Hook[Callable[[], bool]] = Hook(
    "srcgrad.imperative.tensor.IS_RECORDING", "whether record() is on (imperative/autograd.py)"
)
CHECK_UPDATE: Hook[Callable[["Tensor", str], None]] = Hook(
    "srcgrad.imperative.tensor.CHECK_UPDATE",
    "refuse an in-place update of a Tensor the recording in progress read (imperative/autograd.py)",
)


class Tensor(ArrayMethods):
    """An eager array that can be recorded for backward (see `sg.autograd`)."""

    __slots__ = ("_v", "_tape", "_num", "grad", "grad_req", "name", "__weakref__")
    # NumPy arrays and scalars defer their binary operators to ours (np_array + tensor).
    __array_priority__ = 1000

    def __init__(self, value: Any, name: str | None = None):
        #: The array, or (a recorded result not computed yet) its jax.ShapeDtypeStruct.
        self._v: Any = value
        self._tape: Any = None  # the autograd Tape that recorded it
        self._num: int | None = None  # its number on that tape
        #: The gradient written by backward (a Tensor), None before `attach_grad`.
        self.grad: Tensor | None = None
        #: "write", "add" or "null" once `attach_grad` was called, else None.
        self.grad_req: str | None = None
        self.name = name

    # ------------------------------------------------------------ the array
    @property
    def _value(self) -> jax.Array:
        """The array, computed now if the recording has not computed it yet."""
        v = self._v
        if type(v) is PENDING:
            v = self._v = self._tape.value_of(self._num)
        return v

    @_value.setter
    def _value(self, value: jax.Array) -> None:
        self._v = value

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._v.shape)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self._v.dtype)

    @property
    def ndim(self) -> int:
        return len(self._v.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self._v.shape, dtype=np.int64))

    def value(self) -> jax.Array:
        """The array (DyNet's `loss.value()`)."""
        return self._value

    def numpy(self) -> np.ndarray:
        """A NumPy copy of the array. Inside `record()` a Tensor that is differentiated
        refuses (as PyTorch's does): use `t.detach().numpy()` for a constant copy."""
        if self._differentiated():
            raise habits.detached(self.name, "numpy")
        return np.asarray(self._value)

    def item(self) -> Any:
        """The one element as a Python number (allowed while recording, as in PyTorch: a
        number read for logging or a Python `if`, never recorded)."""
        return self._value.item()

    def tolist(self) -> Any:
        """The elements as nested Python lists of numbers (allowed while recording, as
        `item`)."""
        return np.asarray(self._value).tolist()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        """NumPy's conversion (`np.asarray(t)`, `np.exp(t)`): refused inside `record()` for a
        Tensor that is differentiated, whose gradient NumPy's result would silently drop."""
        if self._differentiated():
            raise habits.detached(self.name)
        out = np.asarray(self._value)
        return out if dtype is None else out.astype(dtype)

    def _differentiated(self) -> bool:
        """Recording now, and this Tensor is attached or a floating result of a live
        recording: a value NumPy would read as a constant while backward differentiates
        through it (a bool mask or an int index carries no gradient: NumPy may read it)."""
        if not IS_RECORDING():
            return False
        tape = self._tape
        return self.grad_req in ("write", "add") or (
            tape is not None and not tape.freed and dtypes.is_inexact(self.dtype)
        )

    def __float__(self) -> float:
        return float(self._value)

    def __int__(self) -> int:
        return int(self._value)

    def __bool__(self) -> bool:
        return bool(self._value)

    def __len__(self) -> int:
        return len(self._value)

    def __iter__(self) -> Any:
        return (self[i] for i in range(len(self)))

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        where = ""
        if self._tape is not None and not self._tape.freed:
            where = f", recorded by {self._tape.names[self._num]}"
        req = f", grad_req={self.grad_req!r}" if self.grad_req else ""
        return f"Tensor({np.asarray(self._value)!r}{req}{where})"

    # ------------------------------------------------------------ autograd
    def attach_grad(self, grad_req: str = "write") -> None:
        """Ask for this Tensor's gradient: backward writes it to `.grad` ("write"), adds it
        to `.grad` ("add"), or leaves it ("null"). As in MXNet, the Tensor becomes a new
        variable: ops recorded from now on differentiate with respect to it."""
        if grad_req not in GRAD_REQS:
            raise SrcgradError(
                f"attach_grad: grad_req must be one of {GRAD_REQS}, got {grad_req!r}",
                loc=user_location(),
            )
        if not dtypes.is_float(self.dtype):
            raise SrcgradError(
                f"attach_grad: only floating-point tensors take gradients, this "
                f"one is {self.dtype.name}",
                loc=user_location(),
            )
        self.grad_req = grad_req
        self.grad = None if grad_req == "null" else Tensor(zeros_like(self._value))
        FORGET(self)

    def assign(self, value: Any) -> None:
        """Replace the array in place (an optimizer's update), keeping `attach_grad`; the
        shape and dtype stay. Recorded tapes keep the value they read; a recorded result
        loses its history (later recordings read its new value as a constant). A tensor the
        recording in progress read is an error (as `t -= ...` there): its backward would
        differentiate at the old value."""
        CHECK_UPDATE(self, ".assign(...)")
        new = value._value if isinstance(value, Tensor) else _as_array(value, self.dtype)
        if tuple(new.shape) != self.shape:
            raise SrcgradError(
                f"assign: a value of shape {tuple(new.shape)} for a tensor of shape {self.shape}",
                loc=user_location(),
            )
        old = self._v
        new = new.astype(self.dtype)
        if isinstance(old, jax.Array) and getattr(old, "committed", False):
            new = jax.device_put(new, old.sharding)  # (model.to(device) placed it)
        self._value = new
        self._tape = self._num = None

    @property
    def requires_grad(self) -> bool:
        """PyTorch's name: True once `attach_grad` asked for a gradient (grad_req not "null").
        Setting True attaches (if not yet attached); False detaches (`.grad` is dropped)."""
        return self.grad_req in ("write", "add")

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        if flag and not self.requires_grad:
            self.attach_grad()
        elif not flag and self.grad_req is not None:
            self.grad_req, self.grad = None, None
            FORGET(self)

    def requires_grad_(self, flag: bool = True) -> "Tensor":
        """Set `requires_grad` and return the Tensor (PyTorch's spelling)."""
        self.requires_grad = flag
        return self

    def __isub__(self, other: Any) -> "Tensor":
        return INPLACE(self, other, "sub")

    def __iadd__(self, other: Any) -> "Tensor":
        return INPLACE(self, other, "add")

    def __imul__(self, other: Any) -> "Tensor":
        return INPLACE(self, other, "mul")

    def __itruediv__(self, other: Any) -> "Tensor":
        return INPLACE(self, other, "truediv")

    def __setitem__(self, index: Any, value: Any) -> None:
        """`t[index] = value`: `t` takes the functional update `t.at[index].set(value)`."""
        SETITEM(self, index, value)

    # ------------------------------------------------------------ devices and dtypes
    def to(self, *args: Any, **kwargs: Any) -> "Tensor":
        """PyTorch's `t.to(device)`, `t.to(dtype)`, `t.to(device, dtype)`, `t.to(other)`: a
        Tensor on that JAX device (see srcgrad/imperative/devices.py) and of that dtype; this
        Tensor itself when nothing changes. The cast is recorded (differentiable); moving a
        Tensor that the recording in progress differentiates is an error: move the data and
        the model (`model.to(device)`) before recording."""
        device, dtype = parse_to(args, dict(kwargs))
        out = self
        if dtype is not None and dtype != self.dtype:
            out = out.astype(dtype)
        if device is not None and device not in out._value.devices():
            if out._differentiated():
                raise SrcgradError(
                    f".to({device}): this tensor is being differentiated by the recording in "
                    "progress; move the inputs and the model (model.to(device)) before "
                    "record()",
                    loc=user_location(),
                )
            out = Tensor(placed(out._value, device), self.name)
        return out

    def cuda(self, device: int | None = None) -> "Tensor":
        """`to("cuda")` (`device` k: "cuda:k"); an error naming JAX's devices without a GPU."""
        return self.to("cuda" if device is None else f"cuda:{device}")

    def cpu(self) -> "Tensor":
        return self.to("cpu")

    @property
    def device(self) -> Any:
        """The JAX device holding the array."""
        return next(iter(self._value.devices()))

    def relocate(self, device: Any, dtype: Any) -> None:
        """Move this Tensor (and its `.grad`) to `device` and cast it to `dtype` if it is
        floating, in place (`Module.to`): the same Tensor, attached as before."""
        CHECK_UPDATE(self, ".to(...)")
        for holder in (self, self.grad):
            if holder is None:
                continue
            v = holder._value
            if dtype is not None and dtypes.is_float(holder.dtype) and v.dtype != dtype:
                v = v.astype(dtype)
            if device is not None:
                v = placed(v, device)
            holder._value = v
            holder._tape = holder._num = None

    def detach(self) -> "Tensor":
        """The same array as a new Tensor that is not recorded."""
        return Tensor(self._value, self.name)

    @api_boundary
    def backward(
        self, head_grad: Any = None, retain_graph: bool = False, create_graph: bool = False
    ) -> None:
        """`sg.autograd.backward([self], [head_grad], ...)`."""
        BACKWARD([self], [head_grad], None, retain_graph, create_graph)


def zeros_like(value: Any) -> Any:
    """Zeros shaped, typed and placed as `value`, made on the host once per shape, dtype and
    placement and then shared (a jax.Array is immutable): `jnp.zeros_like` compiles a
    program per new shape, which a fresh model's parameters all are, and costs a call per
    parameter per step (`zero_grad`)."""
    if isinstance(value, jax.Array) and not isinstance(value, jax.core.Tracer):
        committed = getattr(value, "committed", getattr(value, "_committed", True))
        key = (value.shape, value.dtype, value.sharding if committed else None)
        zeros = _ZEROS.get(key)
        if zeros is None:
            if len(_ZEROS) >= 256:
                _ZEROS.clear()
            zeros = _ZEROS[key] = jax.device_put(np.zeros(value.shape, value.dtype), key[2])
        return zeros
    return jnp.zeros_like(value)


#: Shared zeros by shape, dtype and placement (None: uncommitted), the last 256 kept.
_ZEROS: dict[tuple, jax.Array] = {}


def _as_array(value: Any, dtype: Any) -> Any:
    """`value` as a jax.Array of `dtype` (None: its own; a Python number's as srcgrad's
    inputs take it). A JAX array is cast on the device; anything else (a NumPy array, a
    number, a list) is cast on the host and put on the device, where `jnp.asarray` would
    compile a program per new shape to cast it."""
    if isinstance(value, jax.Array):
        return jnp.asarray(value, dtype)
    if dtype is None:
        dtype = (
            dtypes.scalar_dtype(value, None)
            if isinstance(value, (bool, int, float, complex))
            else np.asarray(value).dtype
        )
    return jax.device_put(np.asarray(value, dtype=dtypes.canonical(dtype)))


def tensor(
    array: Any, dtype: Any = None, name: str | None = None, requires_grad: bool = False
) -> Tensor:
    """An eager Tensor holding `array` as a `jax.Array` (Python floats become float32, as
    srcgrad's inputs do); `requires_grad=True` attaches it (PyTorch's spelling)."""
    if isinstance(array, Tensor):
        array = array._value
    out = Tensor(_as_array(array, dtype), name)
    if requires_grad:
        out.attach_grad()
    return out


def _unflatten(_: None, leaves: Any) -> Any:
    """A Tensor of the leaf; a traced srcgrad value stays itself (sg.grad(f)(tensor) traces
    `f` on Variables, not on Tensors holding them)."""
    from ..ir.program import Variable

    return leaves[0] if isinstance(leaves[0], Variable) else Tensor(leaves[0])


jax.tree_util.register_pytree_node(Tensor, lambda t: ((t._value,), None), _unflatten)
