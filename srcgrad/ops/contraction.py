"""Contractions: matmul (batched, broadcasting), dot and einsum. The other products are
products.py, convolutions conv.py; sg.linalg's decompositions are linalg_decompositions.py,
its solves and the functions built on them linalg_functions.py.

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

import numpy as np

from ..base import dtypes
from ..core.builder import as_var, emit1
from ..base.errors import ShapeError
from ..ir.analysis import producer
from ..ir.program import Op, Variable
from ..core.registry import MULTILINEAR, OutType
from .rules import broadcast_shapes
from ..core.declare import Emitted, defop, public
from .elementwise import astype, multiply, where
from .grad_helpers import add_n, unbroadcast
from .reduce import sum as reduce_sum
from .shape import broadcast_to, reshape, swapaxes, transpose


def _jvp_matmul(op: Op, ts: list, tangents: Any) -> list:
    """t_a @ b + a @ t_b, each product written as jax's transpose rules write it (below)."""
    (a, b), (ta, tb) = op.inputs, ts
    terms = [_product(l, r) for l, r, t in ((ta, b, ta), (a, tb, tb)) if t is not None]
    return [terms[0] if len(terms) == 1 else add_n(terms)]  # of the output's shape and dtype


def _product(left: Variable, right: Variable) -> Variable:
    """`left @ right`; for a 2-D `left` made by a transpose (the grad maker's `x.T @ g`),
    `(right.T @ x).T`: the same product, with the varying operand on the left, as jax's
    dot transpose rules put it. XLA then lays out a batch of tangents (jax.vmap over a
    Jacobian's basis) row-major, which measured 10-20% faster for sg.hessian on CPU."""
    src = producer(left) if left.ndim == 2 and right.ndim == 2 else None
    if src is not None and src.type == "transpose":
        return transpose(emit1("matmul", [transpose(right), src.inputs[0]]))
    return emit1("matmul", [left, right])


def const_array(value: Any, dtype: Any = None) -> Variable:
    """A constant array (a mask, an identity) as a `constant` op of the program."""
    arr = np.asarray(value, dtype)
    return emit1(
        "constant",
        [],
        {"value": arr, "dtype": dtypes.canonical(arr.dtype), "shape": tuple(arr.shape)},
        base="c",
    )


# ---------------------------------------------------------------- matmul


def _matmul_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    a, b = inputs
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError("matmul needs inputs of rank at least 1")
    ash = (1,) + a.shape if a.ndim == 1 else a.shape
    bsh = b.shape + (1,) if b.ndim == 1 else b.shape
    if ash[-1] != bsh[-2]:
        raise ShapeError(f"contracting dimensions differ: {a.shape} @ {b.shape}")
    batch = broadcast_shapes(ash[:-2], bsh[:-2])
    shape = batch + (() if a.ndim == 1 else (ash[-2],)) + (() if b.ndim == 1 else (bsh[-1],))
    return [(shape, dtypes.promote(a.dtype, b.dtype))]


@public
def dot(a: Any, b: Any) -> Variable:
    """jnp.dot: a product with a scalar, else a contraction of a's last axis with b's
    second-to-last (its only axis if 1-D)."""
    a, b = as_var(a), as_var(b)
    if a.ndim == 0 or b.ndim == 0:
        return multiply(a, b)
    if b.ndim <= 2:
        return matmul(a, b)
    if a.shape[-1] != b.shape[-2]:
        raise ShapeError(f"dot of {a.shape} and {b.shape}: contracting dimensions differ", op="dot")
    la, lb = _LETTERS[: a.ndim - 1], _LETTERS[a.ndim - 1 : a.ndim + b.ndim - 2]
    return einsum(f"{la}k,{lb[:-1]}k{lb[-1]}->{la}{lb}", a, b)


def _g_matmul(op: Op, g: list, need: list) -> list:
    a, b = op.inputs
    a2 = reshape(a, (1,) + a.shape) if a.ndim == 1 else a
    b2 = reshape(b, b.shape + (1,)) if b.ndim == 1 else b
    nbatch = g[0].ndim - (a.ndim > 1) - (b.ndim > 1)
    g2 = reshape(g[0], g[0].shape[:nbatch] + (a2.shape[-2], b2.shape[-1]))
    ga = gb = None
    if need[0]:
        ga = reshape(unbroadcast(matmul(g2, swapaxes(b2, -1, -2)), a2.shape), a.shape)
    if need[1]:
        if b2.ndim == 2 and g2.ndim > 2:
            # A weight shared by every batch row: one dot over all rows, not a dot per batch
            # entry and a sum (a's batch dims equal g's, since b has none).
            rows = int(np.prod(a2.shape[:-1], dtype=np.int64))  # not -1: sizes may be 0
            a_rows = reshape(a2, (rows, a2.shape[-1]))
            gb = matmul(swapaxes(a_rows, -1, -2), reshape(g2, (rows, g2.shape[-1])))
        else:
            gb = unbroadcast(matmul(swapaxes(a2, -1, -2), g2), b2.shape)
        gb = reshape(gb, b.shape)
    return [ga, gb]


@defop("matmul", _matmul_rule, "jnp.matmul({0}, {1})", _g_matmul, jvp=_jvp_matmul)
def matmul(a: Any, b: Any) -> Emitted:
    """jnp.matmul: batched and broadcasting over leading axes; 1-D operands as vectors."""
    return [as_var(a), as_var(b)], {}


# ---------------------------------------------------------------- einsum

_LETTERS = "abcdefghijlmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"  # no "k": dot contracts over it
_ALL_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_OP_SUBSCRIPTS = re.compile(r"^[a-zA-Z]*(,[a-zA-Z]*)?->[a-zA-Z]*$")
_USER_SUBSCRIPTS = re.compile(r"^[a-zA-Z.]*(,[a-zA-Z.]*)*(->[a-zA-Z.]*)?$")


def _parse(subscripts: str, n: int) -> tuple[list[str], str]:
    """The terms of the einsum op's canonical subscripts (one or two operands, explicit output,
    no repeated letter in a term)."""
    if not _OP_SUBSCRIPTS.match(subscripts):
        raise ShapeError(f"einsum op subscripts {subscripts!r} are not canonical")
    lhs, _, out = subscripts.partition("->")
    ins = lhs.split(",")
    if len(ins) != n:
        raise ShapeError(f"einsum subscripts {subscripts!r} name {len(ins)} operands, got {n}")
    for term in ins + [out]:
        if len(set(term)) != len(term):
            raise ShapeError(f"einsum subscripts {subscripts!r} repeat a letter in one term")
    return ins, out


def _einsum_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    ins, out = _parse(attrs["subscripts"], len(inputs))
    sizes: dict[str, int] = {}
    for term, v in zip(ins, inputs):
        if len(term) != v.ndim:
            raise ShapeError(f"einsum term {term!r} does not match an operand of rank {v.ndim}")
        for c, d in zip(term, v.shape):
            if sizes.setdefault(c, d) != d:
                raise ShapeError(f"einsum index {c!r} has sizes {sizes[c]} and {d}")
    if any(c not in sizes for c in out):
        raise ShapeError(f"einsum output {out!r} names an index no operand has")
    dt = inputs[0].dtype
    for v in inputs[1:]:
        dt = dtypes.promote(dt, v.dtype)
    return [(tuple(sizes[c] for c in out), dt)]


def _einsum_to(
    target: str, shape: tuple[int, ...], terms: list[str], vals: list[Variable]
) -> Variable:
    """Contract `vals` to the subscript `target`, broadcasting indices they lack."""
    have = set("".join(terms))
    kept = "".join(c for c in target if c in have)
    r = einsum(",".join(terms) + "->" + kept, *vals)
    if kept == target:
        return r
    r = reshape(r, tuple(d if c in have else 1 for c, d in zip(target, shape)))
    return broadcast_to(r, shape)


def _g_einsum(op: Op, g: list, need: list) -> list:
    ins, out = _parse(op.attrs["subscripts"], len(op.inputs))
    grads: list[Variable | None] = []
    for k, (term, v) in enumerate(zip(ins, op.inputs)):
        if not need[k]:
            grads.append(None)
            continue
        others = [(t, o) for j, (t, o) in enumerate(zip(ins, op.inputs)) if j != k]
        grads.append(
            _einsum_to(
                term, v.shape, [out] + [t for t, _ in others], [g[0]] + [o for _, o in others]
            )
        )
    return grads


@defop(
    "einsum",
    _einsum_rule,
    lambda a, at: f"jnp.einsum({at['subscripts']}, {', '.join(a)})",
    _g_einsum,
    export="einsum",
    jvp=MULTILINEAR,
)
def _einsum_op(terms: Sequence[str], out: str, operands: Sequence[Variable]) -> Emitted:
    """One or two operands contracted to `out` (canonical subscripts)."""
    return list(operands), {"subscripts": ",".join(terms) + "->" + out}


def _interleaved(args: tuple) -> tuple[str, list[Any]]:
    """`(op, sublist, op, sublist, ..., [out])` as subscripts (ints 0..51 name indices)."""

    def term(sub: Sequence[Any]) -> str:
        out = ""
        for i in sub:
            if i is Ellipsis:
                out += "..."
            elif isinstance(i, (int, np.integer)) and 0 <= int(i) < len(_ALL_LETTERS):
                out += _ALL_LETTERS[int(i)]
            else:
                raise ShapeError(
                    f"einsum sublists hold ints in [0, 52) and Ellipsis, got {i!r}", op="einsum"
                )
        return out

    ops, subs = list(args[0::2]), list(args[1::2])
    out = None
    if len(ops) > len(subs):  # an odd count: the last item is the output sublist
        out = term(ops.pop())
    spec = ",".join(term(s) for s in subs)
    return (spec if out is None else f"{spec}->{out}"), ops


def _expand(subscripts: str, shapes: list[tuple[int, ...]]) -> tuple[list[str], str, str]:
    """Terms and output with `...` replaced by fresh letters (right-aligned, as NumPy
    broadcasts), the implicit output made explicit; also returns the ellipsis letters."""
    s = subscripts.replace(" ", "")
    if not _USER_SUBSCRIPTS.match(s):
        raise ShapeError(f"invalid einsum subscripts {subscripts!r}", op="einsum")
    lhs, arrow, out = s.partition("->")
    ins = lhs.split(",")
    if len(ins) != len(shapes):
        raise ShapeError(
            f"einsum subscripts {subscripts!r} name {len(ins)} operands, got {len(shapes)}",
            op="einsum",
        )
    fresh = [c for c in _ALL_LETTERS if c not in s]
    ranks = []
    for t, sh in zip(ins + [out], shapes + [None]):
        rest = t.replace("...", "", 1)
        if "." in rest:
            raise ShapeError(f"einsum term {t!r} has a stray '.' (ellipsis is '...')", op="einsum")
        if sh is not None:
            if len(rest) > len(sh) or ("..." not in t and len(rest) != len(sh)):
                raise ShapeError(
                    f"einsum term {t!r} does not match an operand of shape {tuple(sh)}", op="einsum"
                )
            ranks.append(len(sh) - len(rest) if "..." in t else 0)
    nell = max(ranks, default=0)
    ell = "".join(fresh[:nell])
    terms = [t.replace("...", ell[nell - r :]) for t, r in zip(ins, ranks)]
    if arrow:
        out = out.replace("...", ell)
    else:
        letters = "".join(t.replace("...", "") for t in ins)
        out = ell + "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    return terms, out, ell


def _diagonals(term: str, x: Variable) -> tuple[str, Variable]:
    """A term with a repeated index (`ii`) reduced to its diagonal."""
    while len(set(term)) != len(term):
        c = next(c for c in term if term.count(c) > 1)
        p, q = term.index(c), term.index(c, term.index(c) + 1)
        if x.shape[p] != x.shape[q]:
            raise ShapeError(
                f"einsum index {c!r} has sizes {x.shape[p]} and {x.shape[q]}", op="einsum"
            )
        shape = [1] * x.ndim
        shape[p] = shape[q] = x.shape[p]
        mask = const_array(np.eye(x.shape[p], dtype=bool).reshape(shape))
        x = astype(reduce_sum(where(mask, x, 0), q), x.dtype)  # (a sum widens ints)
        term = term[:q] + term[q + 1 :]
    return term, x


def _path(terms: list[str], out: str, shapes: list[tuple[int, ...]], optimize: Any) -> list:
    if optimize is False or len(terms) < 3:
        return [(0, 1)] * (len(terms) - 1)
    import opt_einsum

    how = "auto" if optimize is True else optimize
    path, _ = opt_einsum.contract_path(
        ",".join(terms) + "->" + out, *shapes, shapes=True, optimize=how
    )
    return path


@public
def einsum(
    subscripts: Any,
    *operands: Any,
    out: None = None,
    optimize: Any = "auto",
    precision: None = None,
    preferred_element_type: None = None,
) -> Variable:
    """jnp.einsum: explicit or implicit output, `...`, repeated indices (diagonals), any
    number of operands (contracted pairwise along opt_einsum's path) and the interleaved form
    `einsum(x, [0, 1], y, [1, 2], [0, 2])`."""
    if out is not None or precision is not None or preferred_element_type is not None:
        raise ShapeError(
            "out=, precision= and preferred_element_type= are not supported", op="einsum"
        )
    if not isinstance(subscripts, str):
        subscripts, ops = _interleaved((subscripts,) + operands)
    else:
        ops = list(operands)
    vs = [as_var(o) for o in ops]
    terms, target, ell = _expand(subscripts, [v.shape for v in vs])
    items = [_diagonals(t, v) for t, v in zip(terms, vs)]
    sizes: dict[str, int] = {}
    for t, v in items:
        for c, d in zip(t, v.shape):
            if sizes.get(c, 1) == 1:
                sizes[c] = d
    items = [(t, _broadcast_ellipsis(t, v, sizes, ell)) for t, v in items]
    if len(items) == 1:
        t, v = items[0]
        return v if t == target else _einsum_op([t], target, [v])
    for contraction in _path([t for t, _ in items], target, [v.shape for _, v in items], optimize):
        picked = [items[i] for i in contraction]
        for i in sorted(contraction, reverse=True):
            del items[i]
        while True:  # the picked operands, two at a time
            pair, picked = picked[:2], picked[2:]
            later = set(target).union(*(set(t) for t, _ in items + picked))
            res = (
                target
                if not items and not picked
                else "".join(dict.fromkeys(c for t, _ in pair for c in t if c in later))
            )
            v = _einsum_op([t for t, _ in pair], res, [v for _, v in pair])
            if not picked:
                items.append((res, v))
                break
            picked.insert(0, (res, v))
    ((t, v),) = items
    return v if t == target else _einsum_op([t], target, [v])


def _broadcast_ellipsis(term: str, v: Variable, sizes: dict[str, int], ell: str) -> Variable:
    """`v` with its size-1 ellipsis axes broadcast to the other operands' sizes."""
    shape = tuple(sizes[c] if c in ell and d == 1 else d for c, d in zip(term, v.shape))
    return v if shape == v.shape else broadcast_to(v, shape)
