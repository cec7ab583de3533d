"""The op set: one module per category of jax.numpy (and of lax, nn, random and
scipy.special). Importing it declares every op: the registry's rows and the user functions.

Every user function is declared once (declare.defop / declare.public) and collected in
`declare.EXPORTS`; this package re-exports exactly those and the control-flow functions.

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

from ..core.declare import exports_of
from . import (
    activations,
    bitwise,
    construct,
    contraction,
    control,
    conv,
    creation,
    cumulative,
    debug,
    elementwise,
    functional,
    grad_helpers,
    index_routines,
    index_update,
    indexing,
    joining,
    lax_primitives,
    linalg_decompositions,
    linalg_functions,
    logic,
    manip,
    math_functions,
    methods,
    nn,
    polynomial,
    products,
    random,
    reduce,
    remat,
    sets,
    shape,
    sorting,
    special,
    statistics,
)
from .control import cond, fori_loop, switch, while_loop
from .remat import checkpoint
from .scan import scan

#: The op modules (and scan.py, imported for `scan`); importing them declared every op.
MODULES = (
    activations,
    bitwise,
    construct,
    contraction,
    control,
    conv,
    creation,
    cumulative,
    debug,
    elementwise,
    functional,
    grad_helpers,
    index_routines,
    index_update,
    indexing,
    joining,
    lax_primitives,
    linalg_decompositions,
    linalg_functions,
    logic,
    manip,
    math_functions,
    methods,
    nn,
    polynomial,
    products,
    random,
    reduce,
    remat,
    sets,
    shape,
    sorting,
    special,
    statistics,
)

globals().update(exports_of(None))

__all__ = ["checkpoint", "cond", "fori_loop", "scan", "switch", "while_loop", *exports_of(None)]
