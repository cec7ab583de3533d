"""srcgrad: reverse-mode differentiation by program transformation, emitted as JAX source.

    import srcgrad as sg
    df = sg.grad(f)          # f written over sg ops; df(x) runs compiled JAX code
    print(sg.source(df, x))  # the readable derivative source

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

from . import linalg, scipy
from . import ops as _ops
from .api.functional import (
    Transformed,
    append_backward,
    gradients,
    grad,
    jit,
    source,
    trace,
    trace_program,
    value_and_grad,
    vjp,
)
from .api.fluid import compile, data, parameter
from .base.cache import cache_info, clear_cache as clear_caches
from .base.config import config
from .api.custom import custom_jvp, custom_vjp
from .from_jax.translate import from_jax
from .from_jax.jax_op import jax_op
from .base.errors import GradientError, ShapeError, SrcgradError, TraceError
from .ir.program import Block, Op, Program, Variable, program_guard
from .ops import *  # noqa: F403  (exactly the declared ops: srcgrad.ops.__all__)
from .api.derivatives import hessian, hvp, jacfwd, jacrev, jvp, linearize
from .ops import constants as _constants
from .ops.constants import *  # noqa: F403  (jnp's constants, dtype names, shape/dtype utilities)
from .core.verify import VerifyError, verify
from . import autograd, debug, distributions, nn, optim, random, sparse
from .imperative.sparse import sparse_coo_tensor
from .imperative.serialization import load, save
from .imperative.tensor import Tensor, tensor
from .tools.graphviz import render, to_dot
from .convert import convert, no_convert
from .wiring import connect as _connect

_connect()

__version__ = "0.1.0"

__all__ = [
    # transforms
    "grad",
    "value_and_grad",
    "vjp",
    "jit",
    "trace",
    "trace_program",
    "source",
    "Transformed",
    "from_jax",
    "jax_op",
    "jvp",
    "linearize",
    "jacfwd",
    "jacrev",
    "hessian",
    "hvp",
    "custom_vjp",
    "custom_jvp",
    "convert",
    "no_convert",
    # Fluid-style programs
    "Program",
    "Block",
    "Op",
    "Variable",
    "program_guard",
    "data",
    "parameter",
    "gradients",
    "append_backward",
    "compile",
    "verify",
    # imperative mode and pictures
    "autograd",
    "nn",
    "optim",
    "distributions",
    "save",
    "load",
    "sparse",
    "sparse_coo_tensor",
    "random",
    "Tensor",
    "tensor",
    "to_dot",
    "render",
    # printing and stopping inside traced code; settings and the caches of compiled code
    "debug",
    "config",
    "clear_caches",
    "cache_info",
    # errors
    "SrcgradError",
    "TraceError",
    "ShapeError",
    "GradientError",
    "VerifyError",
    # the ops (control flow, then every declared op), and the sg.linalg and sg.scipy namespaces
    *_ops.__all__,
    "linalg",
    "scipy",
    # jax.numpy's constants, dtype names and shape/dtype utilities
    *_constants.__all__,
]
