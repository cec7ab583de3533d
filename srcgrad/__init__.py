"""srcgrad: reverse-mode differentiation by program transformation, emitted as JAX source.

    import srcgrad as sg
    df = sg.grad(f)          # f written over sg ops; df(x) runs compiled JAX code
    print(sg.source(df, x))  # the readable derivative source
"""
from __future__ import annotations

import os as _os

from . import errors as _errors
from . import ops as _ops
from .api import (Transformed, append_backward, compile, data, gradients, grad, jit, parameter,
                  source, trace, value_and_grad, vjp)
from .errors import GradientError, ShapeError, SrcgradError, TraceError
from .ir import Block, Op, Program, Variable, program_guard
from .ops import *  # noqa: F403
from .ops import checkpoint, cond, fori_loop, scan, while_loop
from .verify import VerifyError, verify

_errors.register_internal_dir(_os.path.dirname(_os.path.abspath(__import__("srcgrad.transforms", fromlist=["_"]).__file__)))

__version__ = "0.1.0"
