"""srcgrad: reverse-mode differentiation by program transformation, emitted as JAX source.

    import srcgrad as sg
    df = sg.grad(f)          # f written over sg ops; df(x) runs compiled JAX code
    print(sg.source(df, x))  # the readable derivative source

Layer L6 (front ends): see docs/design.md.
"""
from __future__ import annotations

import os as _os

from . import errors as _errors
from . import linalg, scipy
from . import ops as _ops
from .api import (Transformed, append_backward, gradients, grad, jit, source, trace,
                  trace_program, value_and_grad, vjp)
from .fluid import compile, data, parameter
from .cache import cache_info, clear_cache as clear_caches
from . import eager as _eager  # noqa: F401  (registers the eager interpreter)
from .config import config
from .custom import custom_jvp, custom_vjp
from .from_jax import from_jax
from .jax_op import jax_op
from .errors import GradientError, ShapeError, SrcgradError, TraceError
from .ir import Block, Op, Program, Variable, program_guard
from .ops import *  # noqa: F403  (exactly the declared ops: srcgrad.ops.__all__)
from .derivatives import hessian, hvp, jacfwd, jacrev, jvp, linearize
from . import printer as _printer  # noqa: F401  (registers Program.__str__)
from . import numpy_names as _numpy_names
from .numpy_names import *  # noqa: F403  (jnp's constants, dtype names, shape/dtype utilities)
from .verify import VerifyError, verify
from . import autograd, debug, nn, optim, random
from .tensors import Tensor, tensor
from .viz import render, to_dot
from .convert import convert, no_convert

_errors.register_internal_dir(_os.path.dirname(_os.path.abspath(__import__("srcgrad.transforms", fromlist=["_"]).__file__)))

__version__ = "0.1.0"

__all__ = [
    # transforms
    "grad", "value_and_grad", "vjp", "jit", "trace", "trace_program", "source", "Transformed",
    "from_jax", "jax_op",
    "jvp", "linearize", "jacfwd", "jacrev", "hessian", "hvp", "custom_vjp", "custom_jvp",
    "convert", "no_convert",
    # Fluid-style programs
    "Program", "Block", "Op", "Variable", "program_guard", "data", "parameter", "gradients",
    "append_backward", "compile", "verify",
    # imperative mode and pictures
    "autograd", "nn", "optim", "random", "Tensor", "tensor", "to_dot", "render",
    # printing and stopping inside traced code
    "debug",
    # errors
    "SrcgradError", "TraceError", "ShapeError", "GradientError", "VerifyError",
    # the ops (control flow, then every declared op), and the sg.linalg and sg.scipy namespaces
    *_ops.__all__, "linalg", "scipy",
    # jax.numpy's constants, dtype names and shape/dtype utilities
    *_numpy_names.__all__,
]
