"""`sg.from_jax(fn)`: existing JAX code as srcgrad ops, through its jaxpr.

    solve = sg.from_jax(jax_solver)               # a function written with jnp and lax
    sg.grad(lambda t: sg.sum(solve(t)))(theta)    # reverse mode through its lax.while_loop

Called inside a srcgrad trace, the function runs `jax.make_jaxpr(fn)` on the shapes and
dtypes of its (pytree) arguments and translates every equation into srcgrad ops in the block
being built; the translated ops carry the user's line that called it. Called on arrays it
compiles and runs the translation (as `sg.jit`). `RULES` is the translation table: one row
per JAX primitive, `rule(cx, args, params) -> value or list of values`.

Layer L6 (front ends): see docs/design.md.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Sequence

import jax
import numpy as np

try:
    from jax.extend.core import ClosedJaxpr, DropVar, Literal
except ImportError:  # older JAX (before jax.extend.core had them)
    from jax.core import ClosedJaxpr, DropVar, Literal  # type: ignore[no-redef]

from . import dtypes
from .api import Transformed
from .builder import as_var, constant, emit
from .errors import SrcgradError, user_location
from .ir import Variable
from .ops import decomp as D
from .ops import elementwise as E
from .ops import lax_ops as X
from .ops import linalg as L
from .ops import linalg_functions as LF
from .ops import nn as NN
from .ops import reduce as R
from .ops import shape as S
from .ops import sort_scan as SS
from .ops.checkpoint import _positive, checkpoint
from .ops.control import _check_max_iters, cond, while_loop
from .ops.creation import arange, full
from .ops.indexing import dynamic_slice, dynamic_update_slice
from .ops.scan import scan

Rule = Callable[["_Translator", list[Variable], dict[str, Any]], Any]
_JAX_DIR = os.path.dirname(os.path.abspath(jax.__file__)) + os.sep


def from_jax(fn: Callable[..., Any], max_iters: int | None = None, *,
             checkpoints: int | None = None) -> Transformed:
    """`fn`, a function over JAX arrays, as a function srcgrad traces (and differentiates).

    `max_iters` bounds every `lax.while_loop` in `fn` (as `sg.while_loop(max_iters=)`): give
    it when the gradient runs inside `jax.jit`, where srcgrad cannot size its loop records
    by running the loop first. `checkpoints=k` makes each while loop's gradient keep k
    snapshots and recompute the rest (as `sg.while_loop(checkpoints=)`).
    """
    loc = user_location()
    bound = _check_max_iters(max_iters, "from_jax", loc)
    if checkpoints is not None:
        checkpoints = _positive(checkpoints, "checkpoints", loc)

    def inline(*args: Any) -> Any:
        return translate(fn, args, bound, checkpoints)
    return Transformed(inline, fn, "from_jax", params=(bound, checkpoints))


def translate(fn: Callable[..., Any], args: tuple, max_iters: int | None = None,
              checkpoints: int | None = None) -> Any:
    """Append the ops of `fn`'s jaxpr on `args` (pytrees of Variables) to the current block."""
    leaves, tree = jax.tree_util.tree_flatten(args)
    leaves = [as_var(v) for v in leaves]
    specs = [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in leaves]
    closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(
        *jax.tree_util.tree_unflatten(tree, specs))
    outs = _Translator(max_iters, checkpoints).call(closed, leaves)
    return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(out_shape), outs)


class _Translator:
    """Evaluates jaxprs over srcgrad Variables, one RULES row per equation."""

    def __init__(self, max_iters: int | None, checkpoints: int | None = None):
        self.max_iters = max_iters
        self.checkpoints = checkpoints
        self._literals: dict[Variable, Any] = {}
        self._enclosing: list[Any] = []  # the equations whose sub-jaxprs are being translated

    def literal_value(self, v: Variable) -> Any:
        """The Python value of `v` if it was a literal of the jaxpr, else None."""
        return self._literals.get(v)

    def _literal(self, lit: Any) -> Variable:
        value = np.asarray(lit.val, dtype=lit.aval.dtype)[()]
        v = constant(value)
        self._literals[v] = value
        return v

    def call(self, jaxpr: Any, args: Sequence[Variable]) -> list[Variable]:
        """The outputs of `jaxpr` (open or closed) applied to `args`."""
        consts: list[Variable] = []
        if isinstance(jaxpr, ClosedJaxpr):
            consts = [_const(c) for c in jaxpr.consts]
            jaxpr = jaxpr.jaxpr
        env: dict[Any, Variable] = dict(zip(jaxpr.constvars, consts))
        env.update(zip(jaxpr.invars, args))

        def read(v: Any) -> Variable:
            return self._literal(v) if isinstance(v, Literal) else env[v]

        for eqn in jaxpr.eqns:
            name = eqn.primitive.name
            rule = RULES.get(name)
            where = [eqn, *reversed(self._enclosing)]
            if rule is None:
                raise _unsupported(name, where, "has no srcgrad translation")
            self._enclosing.append(eqn)
            try:
                out = rule(self, [read(v) for v in eqn.invars], eqn.params)
            finally:
                self._enclosing.pop()
            outs = list(out) if eqn.primitive.multiple_results else [out]
            for var, val in zip(eqn.outvars, outs):
                if not isinstance(var, DropVar):
                    env[var] = _typed(val, var.aval, name, where)
        return [read(v) for v in jaxpr.outvars]


# ---------------------------------------------------------------- values and errors

def _const(c: Any) -> Variable:
    """A closed-over array: a scalar is written into the program, an array is captured."""
    if np.ndim(c) == 0 and not isinstance(c, jax.core.Tracer):
        return constant(np.asarray(c)[()])
    return constant(c if isinstance(c, (jax.Array, np.ndarray)) else np.asarray(c))


def _typed(val: Any, aval: Any, prim: str, where: list[Any]) -> Variable:
    """`val` in the dtype of the jaxpr's variable; a shape that differs is a translation bug."""
    v = as_var(val)
    want = dtypes.canonical(aval.dtype)
    if v.dtype != want:
        v = E.astype(v, want)
    if v.shape != tuple(aval.shape):
        raise _unsupported(prim, where, f"was translated to shape {v.shape}, but JAX gives "
                           f"{tuple(aval.shape)} (a srcgrad bug; please report it)")
    return v


def _jax_line(where: list[Any]) -> str:
    """Where in the user's JAX function an equation came from: its own line, or (an equation
    inside a library's jitted function, such as jnp.fft.fft's) the enclosing call's."""
    try:
        from jax._src import source_info_util
        for eqn in where:
            line = source_info_util.summarize(eqn.source_info)
            if line:
                return line
    except Exception:  # a private JAX module: the message only loses a detail without it
        pass
    return "an unknown line"


def _unsupported(prim: str, where: list[Any], what: str) -> SrcgradError:
    """`where`: the equation, then the equations enclosing it, innermost first."""
    return SrcgradError(f"JAX primitive {prim!r} {what} (made at {_jax_line(where)}); "
                        "docs/jax_frontend.md lists the supported primitives",
                        op="from_jax", loc=user_location())


def _refuse(prim: str, why: str) -> SrcgradError:
    return SrcgradError(f"JAX primitive {prim!r}: {why}", op="from_jax", loc=user_location())


# ---------------------------------------------------------------- rules shared by rows

def _un(fn: Callable[[Variable], Variable]) -> Rule:
    return lambda cx, a, p: fn(a[0])


def _bin(fn: Callable[[Variable, Variable], Variable]) -> Rule:
    return lambda cx, a, p: fn(a[0], a[1])


def _bool_only(fn: Callable[..., Variable], prim: str) -> Rule:
    """and/or/xor/not: logical on bools; JAX's bitwise forms on integers are not translated."""
    def rule(cx: _Translator, a: list[Variable], p: dict) -> Variable:
        if any(v.dtype != np.dtype(bool) for v in a):
            raise _refuse(prim, f"bitwise {prim} on {a[0].type_str()} is not supported "
                          "(only the logical one, on bools)")
        return fn(*a)
    return rule


def _div(cx: _Translator, a: list[Variable], p: dict) -> Variable:
    """lax.div: true division of floats; integer division rounds toward zero."""
    x, y = a
    if dtypes.is_inexact(x.dtype):
        return E.divide(x, y)
    q = E.floor_divide(x, y)
    inexact = E.logical_and(E.not_equal(E.remainder(x, y), 0), E.not_equal(x < 0, y < 0))
    return E.where(inexact, q + 1, q)


def _rem(cx: _Translator, a: list[Variable], p: dict) -> Variable:
    """lax.rem: the remainder takes the sign of the dividend (C's fmod)."""
    x, y = a
    r = E.remainder(x, y)
    flip = E.logical_and(E.not_equal(r, 0), E.not_equal(r < 0, x < 0))
    return E.where(flip, r - y, r)


def _round(cx: _Translator, a: list[Variable], p: dict) -> Variable:
    x = a[0]
    if int(p.get("rounding_method", 0)) == 1:  # TO_NEAREST_EVEN, as jnp.round
        return E.round(x)
    return E.sign(x) * E.floor(E.abs(x) + 0.5)  # AWAY_FROM_ZERO, lax.round's default


def _select_n(cx: _Translator, a: list[Variable], p: dict) -> Variable:
    """select_n(which, *cases): cases[which]; a bool `which` picks between two."""
    which, cases = a[0], a[1:]
    if which.dtype == np.dtype(bool):
        return E.where(which, cases[1], cases[0]) if len(cases) == 2 else cases[0]
    out = cases[-1]
    for k in range(len(cases) - 2, -1, -1):
        out = E.where(E.equal(which, k), cases[k], out)
    return out


def _clamp(cx: _Translator, a: list[Variable], p: dict) -> Variable:
    """lax.clamp with JAX's derivative: `x` where lo < x < hi, `lo` where x < lo < hi, `hi`
    where hi < x; at a tie or a NaN nothing takes it."""
    lo, x, hi = a
    held = E.stop_gradient(E.minimum(E.maximum(x, lo), hi))
    inside = E.where(E.logical_and(x > lo, x < hi), x, held)
    return E.where(hi < x, hi, E.where(E.logical_and(lo > x, lo < hi), lo, inside))


def _convert(cx: _Translator, a: list[Variable], p: dict) -> Variable:
    return E.astype(a[0], dtypes.canonical(p["new_dtype"]))


def _reduce_precision(cx: _Translator, a: list[Variable], p: dict) -> Variable:
    x = a[0]
    info = np.finfo(x.dtype)
    if (p["exponent_bits"], p["mantissa_bits"]) != (info.nexp, info.nmant):
        raise _refuse("reduce_precision", f"rounding {x.type_str()} to {p['exponent_bits']} "
                      f"exponent and {p['mantissa_bits']} mantissa bits is not supported")
    return x


def _iota(cx: _Translator, a: list[Variable], p: dict) -> Variable:
    shape, dim = tuple(p["shape"]), p["dimension"]
    line = arange(0, shape[dim], dtype=dtypes.canonical(p["dtype"]))
    return S.broadcast_to(S.reshape(line, tuple(d if i == dim else 1 for i, d in enumerate(shape))),
                          shape)


def _broadcast_in_dim(cx: _Translator, a: list[Variable], p: dict) -> Variable:
    x, shape, dims = a[0], tuple(p["shape"]), tuple(p["broadcast_dimensions"])
    kept = [1] * len(shape)
    for d, size in zip(dims, x.shape):
        kept[d] = size
    return S.broadcast_to(S.reshape(x, tuple(kept)), shape)


def _pad_with(x: Variable, value: Variable | None, config: Sequence[tuple[int, int, int]]
              ) -> Variable:
    """lax.pad: `value` (None: zero) in the new positions; negative low/high padding crops."""
    grow = [(max(lo, 0), max(hi, 0), it) for lo, hi, it in config]
    out = S.lax_pad(x, grow)
    if value is not None:
        inside = S.lax_pad(full(x.shape, True, np.dtype(bool)), grow)
        out = E.where(inside, out, value)
    if any(lo < 0 or hi < 0 for lo, hi, _ in config):
        start = [max(-lo, 0) for lo, _, _ in config]
        limit = [d - max(-hi, 0) for d, (_, hi, _) in zip(out.shape, config)]
        out = S.slice(out, start, limit)
    return out


def _pad(cx: _Translator, a: list[Variable], p: dict) -> Variable:
    return _pad_with(a[0], None if cx.literal_value(a[1]) == 0 else a[1], p["padding_config"])


def _dot_general(cx: _Translator, a: list[Variable], p: dict) -> Variable:
    """dot_general as an einsum: batch dimensions, then lhs free, then rhs free."""
    x, y = a
    (cx_, cy), (bx, by) = p["dimension_numbers"]
    pref = p.get("preferred_element_type")
    if _is_matmul(x.ndim, y.ndim, tuple(cx_), tuple(cy), tuple(bx), tuple(by)):
        r = L.matmul(x, y)
        return E.astype(r, dtypes.canonical(pref)) if pref is not None else r
    letters = iter("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    xs, ys = [""] * x.ndim, [""] * y.ndim
    for i, j in list(zip(bx, by)) + list(zip(cx_, cy)):
        xs[i] = ys[j] = next(letters)
    for t in (xs, ys):
        for i, c in enumerate(t):
            t[i] = c or next(letters)
    out = ("".join(xs[i] for i in bx) + "".join(c for i, c in enumerate(xs) if i not in bx + cx_)
           + "".join(c for i, c in enumerate(ys) if i not in by + cy))
    r = L.einsum(f"{''.join(xs)},{''.join(ys)}->{out}", x, y)
    return E.astype(r, dtypes.canonical(pref)) if pref is not None else r


def _is_matmul(nx: int, ny: int, cx: tuple, cy: tuple, bx: tuple, by: tuple) -> bool:
    """True when dot_general is what jnp.matmul computes: (..., k) @ (k[, n]), or a batched
    (B, m, k) @ (B, k, n) with the batch axes leading."""
    if not bx and not by:
        return nx >= 1 and ny in (1, 2) and cx == (nx - 1,) and cy == (0,)
    b = len(bx)
    return (bx == by == tuple(range(b)) and nx == ny == b + 2 and cx == (b + 1,)
            and cy == (b,))


def _conv(cx: _Translator, a: list[Variable], p: dict) -> Variable:
    if p["feature_group_count"] != 1 or p["batch_group_count"] != 1:
        raise _refuse("conv_general_dilated", "grouped convolutions (feature_group_count or "
                      "batch_group_count > 1) are not supported")
    dn = p["dimension_numbers"]
    pads = p["padding"]
    if isinstance(pads, str):
        raise _refuse("conv_general_dilated", f"string padding {pads!r} in a jaxpr")
    out = L._conv_op(a[0], a[1], p["window_strides"], tuple(tuple(q) for q in pads),
                     p["lhs_dilation"], p["rhs_dilation"],
                     (tuple(dn.lhs_spec), tuple(dn.rhs_spec), tuple(dn.out_spec)))
    pref = p.get("preferred_element_type")
    return E.astype(out, dtypes.canonical(pref)) if pref is not None else out


def _reduce_window(kind: str) -> Rule:
    """reduce_window_{sum,max,min} (pooling) as the reduction of one strided slice per window
    tap of the padded input; so its gradient is built from slice and pad (max/min: ties share
    the gradient equally, where JAX gives it to one tapped element)."""
    def rule(cx: _Translator, a: list[Variable], p: dict) -> Variable:
        x = a[0]
        win, strides = p["window_dimensions"], p["window_strides"]
        base, wdil = p["base_dilation"], p["window_dilation"]
        fill = {"sum": 0, "max": -np.inf, "min": np.inf}[kind]
        if not dtypes.is_inexact(x.dtype) and kind != "sum":
            fill = (np.iinfo(x.dtype).min if kind == "max" else np.iinfo(x.dtype).max)
        cfg = [(lo, hi, b - 1) for (lo, hi), b in zip(p["padding"], base)]
        xp = _pad_with(x, None if fill == 0 else constant(np.asarray(fill, x.dtype)[()]), cfg)
        out_shape = [(d - (k - 1) * wd - 1) // s + 1 if d > (k - 1) * wd else 0
                     for d, k, wd, s in zip(xp.shape, win, wdil, strides)]
        taps = []
        for offs in np.ndindex(*win):
            start = [o * wd for o, wd in zip(offs, wdil)]
            limit = [st + (n - 1) * s + 1 if n else st
                     for st, n, s in zip(start, out_shape, strides)]
            taps.append(S.slice(xp, start, limit, strides))
        if kind == "sum":
            out = taps[0]
            for t in taps[1:]:
                out = out + t
            return out
        stacked = S.stack(taps, axis=-1)
        return (R.max if kind == "max" else R.min)(stacked, -1)
    return rule


def _argminmax(fn: Callable[..., Variable]) -> Rule:
    def rule(cx: _Translator, a: list[Variable], p: dict) -> Variable:
        (axis,) = p["axes"]
        return E.astype(fn(a[0], axis), dtypes.canonical(p["index_dtype"]))
    return rule


def _reduce_bool(kind: str) -> Rule:
    def rule(cx: _Translator, a: list[Variable], p: dict) -> Variable:
        ints = E.astype(a[0], np.int32)
        if kind == "and":
            return E.equal(R.min(ints, tuple(p["axes"])), 1)
        return E.equal(R.max(ints, tuple(p["axes"])), 1)
    return rule


def _split(cx: _Translator, a: list[Variable], p: dict) -> list[Variable]:
    x, axis = a[0], p["axis"]
    outs, at = [], 0
    for n in p["sizes"]:
        start, limit = [0] * x.ndim, list(x.shape)
        start[axis], limit[axis] = at, at + int(n)
        outs.append(S.slice(x, start, limit))
        at += int(n)
    return outs


def _gather(cx: _Translator, a: list[Variable], p: dict) -> Variable:
    return X.gather(a[0], a[1], _dnums(p["dimension_numbers"]), p["slice_sizes"],
                    _mode(p["mode"], "gather"), p["fill_value"], p["indices_are_sorted"],
                    p["unique_indices"])


def _scatter(fn: Callable[..., Variable], prim: str) -> Rule:
    def rule(cx: _Translator, a: list[Variable], p: dict) -> Variable:
        if p.get("update_consts"):
            raise _refuse(prim, "a scatter with a custom combiner is not supported")
        return fn(a[0], a[1], a[2], _dnums(p["dimension_numbers"]), _mode(p["mode"], prim),
                  p["indices_are_sorted"], p["unique_indices"])
    return rule


def _dnums(dn: Any) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(int(d) for d in part) for part in dn)


def _mode(mode: Any, prim: str) -> str:
    name = getattr(mode, "name", str(mode)).upper()
    known = {"CLIP": "clip", "FILL_OR_DROP": "fill", "PROMISE_IN_BOUNDS": "promise_in_bounds"}
    if name not in known:
        raise _refuse(prim, f"indexing mode {name} is not supported")
    return known[name]


# ---------------------------------------------------------------- calls and control flow

def _inline(key: str) -> Rule:
    """Call primitives (jit, closed_call, remat's body, custom rules' primal body): inline."""
    return lambda cx, a, p: cx.call(p[key], a)


def _remat(cx: _Translator, a: list[Variable], p: dict) -> list[Variable]:
    """jax.checkpoint becomes sg.checkpoint: the gradient recomputes the body."""
    return list(checkpoint(lambda *xs: cx.call(p["jaxpr"], list(xs)))(*a))


#: custom_jvp functions of JAX whose rule srcgrad has as an op (matched by the function and
#: its file inside the jax package): their gradients then equal jax.grad's at the kinks too.
_JAX_CUSTOM_JVP: dict[str, Callable[..., Variable]] = {
    "relu": E.relu, "relu6": NN.relu6, "logaddexp": E.logaddexp,
}


def _custom_jvp(cx: _Translator, a: list[Variable], p: dict) -> Any:
    body = p["call_jaxpr"]
    info = getattr(body.jaxpr, "debug_info", None)
    where = getattr(info, "func_src_info", "") or ""
    name, _, path = where.partition(" at ")
    known = _JAX_CUSTOM_JVP.get(name)
    if known is not None and os.path.abspath(path.rsplit(":", 1)[0]).startswith(_JAX_DIR):
        return [known(*a[p["num_consts"]:])]
    return cx.call(body, a)


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
    if (len(eqns) == 2 and eqns[1].primitive.name == "transpose" and len(x.aval.shape) == 2
            and (tuple(lc), tuple(rc)) == ((1,), (1,))
            and tuple(eqns[1].params["permutation"]) == (1, 0)):
        return 0, True
    return None


def _custom_linear_solve(cx: _Translator, a: list[Variable], p: dict) -> list[Variable]:
    """lax.custom_linear_solve: jnp.linalg.solve's and inv's (matvec `A @ x`) become
    `sg.linalg.solve(A, b)`, whose gradient is the solve's own adjoint; any other solve's primal
    function is inlined, so its gradient is that function's (right when the function computes
    the solve differentiably from its inputs, as JAX's own rule assumes the solve is exact)."""
    n = p["const_lengths"]
    b = a[sum(n):]
    found = _matrix_of(p["jaxprs"].matvec, n.matvec)
    if found is not None and len(b) == 1:
        mat, transposed = a[found[0]], found[1]
        if transposed:
            return [S.transpose(LF.solve(mat, S.transpose(b[0], (1, 0))), (1, 0))]
        return [LF.solve(mat, b[0])]
    start = n.matvec + n.vecmat
    return cx.call(p["jaxprs"].solve, a[start:start + n.solve] + b)


def _while(cx: _Translator, a: list[Variable], p: dict) -> list[Variable]:
    nc, nb = p["cond_nconsts"], p["body_nconsts"]
    cconsts, bconsts, init = a[:nc], a[nc:nc + nb], a[nc + nb:]
    out = while_loop(lambda c: cx.call(p["cond_jaxpr"], cconsts + list(c))[0],
                     lambda c: tuple(cx.call(p["body_jaxpr"], bconsts + list(c))),
                     tuple(init), max_iters=cx.max_iters, checkpoints=cx.checkpoints)
    return list(out)


def _cond(cx: _Translator, a: list[Variable], p: dict) -> list[Variable]:
    """lax.cond / lax.switch: branch `clamp(index, 0, n-1)`, as nested two-way conds."""
    index, ops = a[0], a[1:]
    branches = p["branches"]

    def pick(k: int) -> Callable[..., Any]:
        if k == len(branches) - 1:
            return lambda *xs: cx.call(branches[k], list(xs))
        if index.dtype == np.dtype(bool):
            return lambda *xs: cond(index, pick(1), lambda *ys: cx.call(branches[0], list(ys)), *xs)
        return lambda *xs: cond(E.less_equal(index, k), lambda *ys: cx.call(branches[k], list(ys)),
                                pick(k + 1), *xs)
    return list(pick(0)(*ops)) if len(branches) > 1 else cx.call(branches[0], ops)


def _scan(cx: _Translator, a: list[Variable], p: dict) -> list[Variable]:
    nc, nk = p["num_consts"], p["num_carry"]
    consts, init, xs = a[:nc], a[nc:nc + nk], a[nc + nk:]

    def step(carry: tuple, x: tuple) -> tuple:
        outs = cx.call(p["jaxpr"], consts + list(carry) + list(x))
        return tuple(outs[:nk]), tuple(outs[nk:])
    carry, ys = scan(step, tuple(init), tuple(xs), length=p["length"], reverse=p["reverse"])
    return list(carry) + list(ys)


def _sort(cx: _Translator, a: list[Variable], p: dict) -> list[Variable]:
    """lax.sort by one key (jnp.sort, argsort's sort of (x, iota)): the other operands follow
    the key's permutation."""
    if p["num_keys"] != 1:
        raise _refuse("sort", f"sorting by {p['num_keys']} keys is not translated")
    axis = p["dimension"]
    values, perm = SS._sorted("sort", a[0], axis, None, None, p["is_stable"], False)
    return [values] + [SS.take_along_axis(x, perm, axis) for x in a[1:]]


def _cumulative(fn: Callable[..., Variable]) -> Rule:
    return lambda cx, a, p: fn(a[0], p["axis"], p["reverse"])


def _triangular_solve(cx: _Translator, a: list[Variable], p: dict) -> Variable:
    return D.triangular_solve(a[0], a[1], left_side=p["left_side"], lower=p["lower"],
                              transpose_a=p["transpose_a"], unit_diagonal=p["unit_diagonal"])


def _eigh(cx: _Translator, a: list[Variable], p: dict) -> list[Variable]:
    """eigh_p's (vectors, values); srcgrad's row sorts the values ascending, as lax's default."""
    if p.get("subset_by_index") is not None or not p.get("sort_eigenvalues", True):
        raise _refuse("eigh", "subset_by_index and unsorted eigenvalues are not translated")
    return emit("eigh", [a[0]], {"lower": bool(p["lower"])})


def _svd(cx: _Translator, a: list[Variable], p: dict) -> list[Variable]:
    """svd_p's (s,) or (s, u, vt)."""
    if p.get("subset_by_index") is not None:
        raise _refuse("svd", "subset_by_index is not translated")
    if not p["compute_uv"]:
        return [D.svd(a[0], compute_uv=False)]
    u, s, vt = D.svd(a[0], full_matrices=p["full_matrices"])
    return [s, u, vt]


def _qr(cx: _Translator, a: list[Variable], p: dict) -> list[Variable]:
    if p.get("pivoting"):
        raise _refuse("qr", "pivoted QR is not translated")
    return list(D.qr(a[0], mode="complete" if p["full_matrices"] else "reduced"))


def _platform_index(cx: _Translator, a: list[Variable], p: dict) -> Variable:
    """lax.platform_dependent's branch: srcgrad compiles for CPU/GPU, never a listed special
    platform (such as 'mosaic'), so the default branch (None)."""
    names = list(p["platforms"])
    if None not in names:
        raise _refuse("platform_index", f"no default branch among {names}")
    return constant(names.index(None), np.dtype(np.int32))


def _identity(cx: _Translator, a: list[Variable], p: dict) -> Any:
    return a[0]


# ---------------------------------------------------------------- the table

RULES: dict[str, Rule] = {
    # elementwise, one argument
    "neg": _un(E.negative), "sign": _un(E.sign), "floor": _un(E.floor), "ceil": _un(E.ceil),
    "round": _round, "is_finite": _un(E.isfinite), "abs": _un(E.abs), "square": _un(E.square),
    "exp": _un(E.exp), "exp2": _un(E.exp2), "log": _un(E.log), "log1p": _un(E.log1p),
    "expm1": _un(E.expm1), "sqrt": _un(E.sqrt), "rsqrt": _un(E.rsqrt), "cbrt": _un(E.cbrt),
    "sin": _un(E.sin), "cos": _un(E.cos), "tan": _un(E.tan), "asin": _un(E.arcsin),
    "acos": _un(E.arccos), "atan": _un(E.arctan), "sinh": _un(E.sinh), "cosh": _un(E.cosh),
    "tanh": _un(E.tanh), "asinh": _un(E.arcsinh), "acosh": _un(E.arccosh),
    "atanh": _un(E.arctanh), "logistic": _un(E.sigmoid), "erf": _un(E.erf),
    "erfc": _un(lambda x: 1.0 - E.erf(x)),
    "integer_pow": lambda cx, a, p: E.integer_pow(a[0], int(p["y"])),
    "not": _bool_only(E.logical_not, "not"),
    # elementwise, two or more arguments
    "add": _bin(E.add), "add_any": _bin(E.add), "sub": _bin(E.subtract),
    "mul": _bin(E.multiply), "div": _div,
    "rem": _rem, "pow": _bin(E.power), "max": _bin(E.maximum), "min": _bin(E.minimum),
    "atan2": _bin(E.arctan2), "and": _bool_only(E.logical_and, "and"),
    "or": _bool_only(E.logical_or, "or"), "xor": _bool_only(E.not_equal, "xor"),
    "eq": _bin(E.equal), "ne": _bin(E.not_equal), "lt": _bin(E.less), "le": _bin(E.less_equal),
    "gt": _bin(E.greater), "ge": _bin(E.greater_equal), "select_n": _select_n, "clamp": _clamp,
    # types and values
    "convert_element_type": _convert, "reduce_precision": _reduce_precision, "iota": _iota,
    "stop_gradient": _un(E.stop_gradient), "copy": _identity,
    "device_put": lambda cx, a, p: list(a), "sharding_constraint": _identity,
    "optimization_barrier": lambda cx, a, p: list(a),
    "debug_print": lambda cx, a, p: [], "debug_callback": lambda cx, a, p: [],  # dropped
    # shapes
    "broadcast_in_dim": _broadcast_in_dim,
    "reshape": lambda cx, a, p: S.reshape(a[0], tuple(p["new_sizes"])),
    "squeeze": lambda cx, a, p: S.squeeze(a[0], tuple(p["dimensions"])),
    "transpose": lambda cx, a, p: S.transpose(a[0], tuple(p["permutation"])),
    "rev": lambda cx, a, p: S.rev(a[0], tuple(p["dimensions"])),
    "concatenate": lambda cx, a, p: S.concatenate(a, p["dimension"]), "pad": _pad,
    "slice": lambda cx, a, p: S.slice(a[0], p["start_indices"], p["limit_indices"],
                                      p["strides"] or (1,) * a[0].ndim),
    "split": _split,
    # indexing
    "dynamic_slice": lambda cx, a, p: dynamic_slice(a[0], a[1:], p["slice_sizes"]),
    "dynamic_update_slice": lambda cx, a, p: dynamic_update_slice(a[0], a[1], a[2:]),
    "gather": _gather, "scatter-add": _scatter(X.scatter_add, "scatter-add"),
    "scatter": _scatter(X.scatter, "scatter"),
    # contractions
    "dot_general": _dot_general, "conv_general_dilated": _conv,
    # reductions
    "reduce_sum": lambda cx, a, p: R.sum(a[0], tuple(p["axes"])),
    "reduce_max": lambda cx, a, p: R.max(a[0], tuple(p["axes"])),
    "reduce_min": lambda cx, a, p: R.min(a[0], tuple(p["axes"])),
    "reduce_prod": lambda cx, a, p: R.prod(a[0], tuple(p["axes"])),
    "reduce_and": _reduce_bool("and"), "reduce_or": _reduce_bool("or"),
    "argmax": _argminmax(R.argmax), "argmin": _argminmax(R.argmin),
    "reduce_window_sum": _reduce_window("sum"), "reduce_window_max": _reduce_window("max"),
    "reduce_window_min": _reduce_window("min"),
    "cumsum": _cumulative(SS.lax_cumsum), "cumprod": _cumulative(SS.lax_cumprod),
    "cummax": _cumulative(SS.cummax), "cummin": _cumulative(SS.cummin), "sort": _sort,
    # linear algebra
    "cholesky": lambda cx, a, p: D.lax_cholesky(a[0]), "lu": lambda cx, a, p: D.lax_lu(a[0]),
    "triangular_solve": _triangular_solve, "eigh": _eigh, "svd": _svd, "qr": _qr,
    "platform_index": _platform_index,
    # calls: inlined ("pjit" and "custom_vjp_call_jaxpr" are their names in older JAX)
    "jit": _inline("jaxpr"), "pjit": _inline("jaxpr"), "closed_call": _inline("call_jaxpr"),
    "call": _inline("call_jaxpr"), "remat2": _remat, "custom_jvp_call": _custom_jvp,
    "custom_vjp_call": _inline("call_jaxpr"), "custom_vjp_call_jaxpr": _inline("fun_jaxpr"),
    "custom_linear_solve": _custom_linear_solve,
    # control flow
    "while": _while, "cond": _cond, "scan": _scan,
}

__all__ = ["from_jax", "translate", "RULES"]
