"""Connecting the layers: every hook a lower layer declares is set here, in one place.

A lower layer never imports a higher one; where it needs something only a higher layer
provides, it declares a `Hook` (srcgrad/base/hooks.py) and calls it. `connect()`, which
srcgrad/__init__.py calls once, sets each of them; reading this function shows every arrow
that runs up the layers.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

import os

from .base import conversion, errors
from .compiled import eager
from .convert import convert_for_retry, explain_failure, runtime, wants_conversion
from .core import dispatch, habits, verify
from .imperative import autograd, setitem, tensor
from .ir import array_methods, printer, program
from .ops import control, methods, remat
from .transforms import cond_grad, control_grad, forward


def connect() -> None:
    """Set every hook of the layers below (idempotent)."""
    # L0 base: what the error messages and the conversion retry need from above.
    errors.TRACED_TYPES.set((program.Variable,))
    errors.register_internal_dir(os.path.dirname(os.path.abspath(control_grad.__file__)))
    conversion.CONVERT.set(convert_for_retry)
    conversion.WANTS_CONVERSION.set(wants_conversion)
    conversion.EXPLAIN_FAILURE.set(explain_failure)
    conversion.LOOP_HINT.set(runtime.loop_hint)
    # L1 the IR: the printer, the verifier, the method table, NumPy's protocols.
    program.FORMATTER.set(printer.format_program)
    program.VERIFIER.set(verify.verify)
    array_methods.METHOD_TABLE.set(methods.table())
    program.NUMPY_PROTOCOL.set(habits.NUMPY_PROTOCOL)
    habits.register_with_jax()
    # L2 the dispatch: the eager and the tape interpreters.
    dispatch.EAGER.set(eager.run)
    dispatch.TAPE.set(autograd.INTERPRETER)
    # L3 the ops: the rules of control flow, written with the transforms of L4.
    control.WHILE_GRAD.set(control_grad.while_grad)
    control.WHILE_JVP.set(forward.jvp_while)
    control.COND_GRAD.set(cond_grad.cond_grad)
    control.COND_JVP.set(forward.jvp_cond)
    remat.CHECKPOINT_GRAD.set(control_grad.checkpoint_grad)
    remat.CHECKPOINT_JVP.set(forward.jvp_checkpoint)
    # L6 imperative: what a Tensor's methods need from the recording.
    tensor.BACKWARD.set(autograd.run_backward)
    tensor.FORGET.set(autograd.forget)
    tensor.INPLACE.set(autograd.inplace)
    tensor.SETITEM.set(setitem.tensor_setitem)
    tensor.IS_RECORDING.set(autograd.is_recording)
    tensor.CHECK_UPDATE.set(autograd.check_update)
