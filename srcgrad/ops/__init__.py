"""The op set. Importing it fills the registry and gives traced values the method table.

Every user function is declared once (declare.defop / declare.public) and collected in
`declare.EXPORTS`; this package re-exports exactly those and the control-flow functions.

Layer L3 (the ops): see docs/design.md.
"""
from __future__ import annotations

from ..core import habits
from ..ir.program import Variable
# Importing the modules declares their ops (fills the registry and EXPORTS).
from . import (activations, bitwise, cumulative, functional, joining, logic, polynomial, contraction, control, construct, conv, creation, debug,
               linalg_decompositions as decomp, elementwise, grad_helpers, index_update, indexing,
               linalg_functions, manip, methods, nn, index_routines as numpy_index,
               math_functions as numpy_math, statistics as numpy_reductions,
               sets as numpy_sets, products, random, reduce, shape, sorting as sort_scan)
from .control import cond, fori_loop, switch, while_loop
from ..core.declare import exports_of
from .checkpoint import checkpoint
from .scan import scan

methods.install(Variable)
habits.install()
globals().update(exports_of(None))

__all__ = ["checkpoint", "cond", "fori_loop", "scan", "switch", "while_loop", *exports_of(None)]
