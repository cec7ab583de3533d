"""`sg.from_jax`'s translation rows for calls, custom rules, control flow and linear algebra.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

import os
from typing import Any, Callable

import jax
import numpy as np

from ..core.builder import constant, emit
from .array_rules import Cx, Rule, refuse
from ..ir.program import Variable
from ..ops import lax_primitives as primitives
from ..ops import linalg_decompositions as decompositions
from ..ops import elementwise
from ..ops import linalg_functions
from ..ops import nn
from ..ops import shape
from ..ops import special
from ..ops.remat import checkpoint
from ..ops.control import cond, switch, while_loop
from ..ops.scan import scan

_JAX_DIR = os.path.dirname(os.path.abspath(jax.__file__)) + os.sep


# ---------------------------------------------------------------- calls and control flow


def _inline(key: str) -> Rule:
    """Call primitives (jit, closed_call, remat's body, custom rules' primal body): inline."""
    return lambda cx, a, p: cx.call(p[key], a)


def _remat(cx: Cx, a: list[Variable], p: dict) -> list[Variable]:
    """jax.checkpoint becomes sg.checkpoint: the gradient recomputes the body."""
    return list(checkpoint(lambda *xs: cx.call(p["jaxpr"], list(xs)))(*a))


#: custom_jvp functions of JAX whose rule srcgrad has as an op (matched by the function and
#: its file inside the jax package): readable rows with the same gradient as jax.grad's.
_JAX_CUSTOM_JVP: dict[str, Callable[..., Variable]] = {
    "relu": elementwise.relu,
    "relu6": nn.relu6,
    "logaddexp": elementwise.logaddexp,
    "log_ndtr": special.log_ndtr,
    "xlogy": special.xlogy,
    "xlog1py": special.xlog1py,
    "logit": special.logit,
    "_xlogx": lambda x: special.xlogy(x, x),
}


def _custom_jvp(cx: Cx, a: list[Variable], p: dict) -> Any:
    """JAX's own rules above as srcgrad ops; any other custom_jvp function as one jax_op (its
    rule gives the gradient), or its primal body inlined with `custom_rules=False`."""
    body = p["call_jaxpr"]
    info = getattr(body.jaxpr, "debug_info", None)
    where = getattr(info, "func_src_info", "") or ""
    name, _, path = where.partition(" at ")
    known = _JAX_CUSTOM_JVP.get(name)
    if known is not None and os.path.abspath(path.rsplit(":", 1)[0]).startswith(_JAX_DIR):
        return [known(*a[p["num_consts"] :])]
    return cx.fallback(a) if cx.custom_rules else cx.call(body, a)


def _custom_vjp(key: str) -> Rule:
    """A custom_vjp function: one jax_op (its fwd/bwd give the gradient), or its primal body
    inlined with `custom_rules=False` (`custom_vjp_call_jaxpr`: older JAX)."""
    return lambda cx, a, p: cx.fallback(a) if cx.custom_rules else cx.call(p[key], a)


def _matrix_of(matvec: Any, n_consts: int) -> tuple[int, bool] | None:
    """jnp.linalg.solve's matvec (and inv's): `A @ x` for a vector x, or `x @ A.T` for a matrix
    x; gives (the const's position, whether x is a matrix), or None for any other matvec."""
    jaxpr = getattr(matvec, "jaxpr", matvec)
    eqns = jaxpr.eqns
    if n_consts != 1 or not eqns or eqns[0].primitive.name != "dot_general":
        return None
    a, x = jaxpr.invars
    dot = eqns[0]
    (lc, rc), (lb, rb) = dot.params["dimension_numbers"]
    if list(dot.invars) != [a, x] or lb or rb or len(a.aval.shape) != 2:
        return None
    if len(eqns) == 1 and len(x.aval.shape) == 1 and (tuple(lc), tuple(rc)) == ((1,), (0,)):
        return 0, False
    if (
        len(eqns) == 2
        and eqns[1].primitive.name == "transpose"
        and len(x.aval.shape) == 2
        and (tuple(lc), tuple(rc)) == ((1,), (1,))
        and tuple(eqns[1].params["permutation"]) == (1, 0)
    ):
        return 0, True
    return None


def _custom_linear_solve(cx: Cx, a: list[Variable], p: dict) -> list[Variable]:
    """lax.custom_linear_solve: jnp.linalg.solve's and inv's (matvec `A @ x`) become
    `sg.linalg.solve(A, b)`, whose gradient is the solve's own adjoint; any other solve's primal
    function is inlined, so its gradient is that function's (right when the function computes
    the solve differentiably from its inputs, as JAX's own rule assumes the solve is exact)."""
    n = p["const_lengths"]
    b = a[sum(n) :]
    found = _matrix_of(p["jaxprs"].matvec, n.matvec)
    if found is not None and len(b) == 1:
        mat, transposed = a[found[0]], found[1]
        if transposed:
            return [
                shape.transpose(linalg_functions.solve(mat, shape.transpose(b[0], (1, 0))), (1, 0))
            ]
        return [linalg_functions.solve(mat, b[0])]
    start = n.matvec + n.vecmat
    return cx.call(p["jaxprs"].solve, a[start : start + n.solve] + b)


def _while(cx: Cx, a: list[Variable], p: dict) -> list[Variable]:
    nc, nb = p["cond_nconsts"], p["body_nconsts"]
    cconsts, bconsts, init = a[:nc], a[nc : nc + nb], a[nc + nb :]
    out = while_loop(
        lambda c: cx.call(p["cond_jaxpr"], cconsts + list(c))[0],
        lambda c: tuple(cx.call(p["body_jaxpr"], bconsts + list(c))),
        tuple(init),
        max_iters=cx.max_iters,
        checkpoints=cx.checkpoints,
    )
    return list(out)


def _cond(cx: Cx, a: list[Variable], p: dict) -> list[Variable]:
    """lax.cond / lax.switch: one `cond` op that runs branch `clamp(index, 0, n-1)`."""
    index, ops = a[0], a[1:]
    branches = p["branches"]
    fns = [lambda *xs, b=b: cx.call(b, list(xs)) for b in branches]
    if index.dtype == np.dtype(bool):
        return list(cond(index, fns[1], fns[0], *ops))
    return list(switch(index, fns, *ops))


def _scan_counts(p: dict) -> tuple[int, int]:
    """How many of a scan's operands are constants and carries: its `num_consts` and
    `num_carry` parameters, or (JAX 0.11 on) the lengths in its flat tree `ft_in` of
    (constants, carries, per-step inputs)."""
    if "num_consts" in p:
        return p["num_consts"], p["num_carry"]
    consts, carry, _ = p["ft_in"].unpack()
    return len(consts), len(carry)


def _scan(cx: Cx, a: list[Variable], p: dict) -> list[Variable]:
    nc, nk = _scan_counts(p)
    consts, init, xs = a[:nc], a[nc : nc + nk], a[nc + nk :]

    def step(carry: tuple, x: tuple) -> tuple:
        outs = cx.call(p["jaxpr"], consts + list(carry) + list(x))
        return tuple(outs[:nk]), tuple(outs[nk:])

    carry, ys = scan(
        step,
        tuple(init),
        tuple(xs),
        length=p["length"],
        reverse=p["reverse"],
        unroll=p.get("unroll", 1),
    )
    return list(carry) + list(ys)


def _triangular_solve(cx: Cx, a: list[Variable], p: dict) -> Variable:
    return decompositions.triangular_solve(
        a[0],
        a[1],
        left_side=p["left_side"],
        lower=p["lower"],
        transpose_a=p["transpose_a"],
        unit_diagonal=p["unit_diagonal"],
    )


def _eigh(cx: Cx, a: list[Variable], p: dict) -> list[Variable]:
    """eigh_p's (vectors, values); srcgrad's row sorts the values ascending, as lax's default."""
    if p.get("subset_by_index") is not None or not p.get("sort_eigenvalues", True):
        raise refuse("eigh", "subset_by_index and unsorted eigenvalues are not translated")
    return emit("eigh", [a[0]], {"lower": bool(p["lower"])})


def _svd(cx: Cx, a: list[Variable], p: dict) -> list[Variable]:
    """svd_p's (s,) or (s, u, vt)."""
    if p.get("subset_by_index") is not None:
        raise refuse("svd", "subset_by_index is not translated")
    if not p["compute_uv"]:
        return [decompositions.svd(a[0], compute_uv=False)]
    u, s, vt = decompositions.svd(a[0], full_matrices=p["full_matrices"])
    return [s, u, vt]


def _qr(cx: Cx, a: list[Variable], p: dict) -> list[Variable]:
    if p.get("pivoting"):
        raise refuse("qr", "pivoted QR is not translated")
    return list(decompositions.qr(a[0], mode="complete" if p["full_matrices"] else "reduced"))


def _platform_index(cx: Cx, a: list[Variable], p: dict) -> Variable:
    """lax.platform_dependent's branch: srcgrad compiles for CPU/GPU, never a listed special
    platform (such as 'mosaic'), so the default branch (None)."""
    names = list(p["platforms"])
    if None not in names:
        raise refuse("platform_index", f"no default branch among {names}")
    return constant(names.index(None), np.dtype(np.int32))


def _pure_callback(cx: Cx, a: list[Variable], p: dict) -> list[Variable]:
    options = tuple((k, p[k]) for k in ("vmap_method", "vectorized") if p.get(k) is not None)
    return primitives.pure_callback(p["callback"], p["result_avals"], options, a)


FLOW: dict[str, Rule] = {
    # linear algebra
    "cholesky": lambda cx, a, p: decompositions.lax_cholesky(a[0]),
    "lu": lambda cx, a, p: decompositions.lax_lu(a[0]),
    "triangular_solve": _triangular_solve,
    "eigh": _eigh,
    "svd": _svd,
    "qr": _qr,
    "lu_pivots_to_permutation": lambda cx, a, p: primitives.pivots_to_permutation(
        a[0], size=int(p["permutation_size"])
    ),
    "platform_index": _platform_index,
    # calls: inlined; custom rules: jax ops ("pjit" and "custom_vjp_call_jaxpr": names in
    # older JAX)
    "jit": _inline("jaxpr"),
    "pjit": _inline("jaxpr"),
    "closed_call": _inline("call_jaxpr"),
    "call": _inline("call_jaxpr"),
    "remat2": _remat,
    "custom_jvp_call": _custom_jvp,
    "custom_vjp_call": _custom_vjp("call_jaxpr"),
    "custom_vjp_call_jaxpr": _custom_vjp("fun_jaxpr"),
    "custom_linear_solve": _custom_linear_solve,
    "pure_callback": _pure_callback,
    # control flow
    "while": _while,
    "cond": _cond,
    "scan": _scan,
}
