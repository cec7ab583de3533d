"""Contractions: matmul (batched, broadcasting), dot, einsum, and the convolution row (a
contraction over windows; its user functions and pooling are in conv.py). sg.linalg's
decompositions are in decomp.py, its solves and the functions built on them in
linalg_functions.py.

Layer L3 (the ops): see docs/design.md.
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Sequence

import jax
import numpy as np
from jax import lax

from ..base import dtypes
from ..core.builder import as_var, emit1
from ..base.errors import ShapeError
from ..ir.program import Op, Variable
from ..core.registry import MULTILINEAR, OutType
from .rules import broadcast_shapes
from ..core.declare import Emitted, defop, public
from .elementwise import astype, multiply, where
from .grad_helpers import unbroadcast
from .reduce import sum as reduce_sum
from .shape import broadcast_to, reshape, rev, swapaxes


def const_array(value: Any, dtype: Any = None) -> Variable:
    """A constant array (a mask, an identity) as a `constant` op of the program."""
    arr = np.asarray(value, dtype)
    return emit1("constant", [], {"value": arr, "dtype": dtypes.canonical(arr.dtype),
                                  "shape": tuple(arr.shape)}, base="c")


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
    la, lb = _LETTERS[:a.ndim - 1], _LETTERS[a.ndim - 1:a.ndim + b.ndim - 2]
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


@defop("matmul", _matmul_rule, "jnp.matmul({0}, {1})", _g_matmul)
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


def _einsum_to(target: str, shape: tuple[int, ...], terms: list[str], vals: list[Variable]) -> Variable:
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
        grads.append(_einsum_to(term, v.shape, [out] + [t for t, _ in others],
                                [g[0]] + [o for _, o in others]))
    return grads


@defop("einsum", _einsum_rule,
       lambda a, at: f"jnp.einsum({at['subscripts']}, {', '.join(a)})", _g_einsum,
       export="einsum", jvp=MULTILINEAR)
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
                raise ShapeError(f"einsum sublists hold ints in [0, 52) and Ellipsis, got {i!r}",
                                 op="einsum")
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
        raise ShapeError(f"einsum subscripts {subscripts!r} name {len(ins)} operands, got "
                         f"{len(shapes)}", op="einsum")
    fresh = [c for c in _ALL_LETTERS if c not in s]
    ranks = []
    for t, sh in zip(ins + [out], shapes + [None]):
        rest = t.replace("...", "", 1)
        if "." in rest:
            raise ShapeError(f"einsum term {t!r} has a stray '.' (ellipsis is '...')", op="einsum")
        if sh is not None:
            if len(rest) > len(sh) or ("..." not in t and len(rest) != len(sh)):
                raise ShapeError(f"einsum term {t!r} does not match an operand of shape "
                                 f"{tuple(sh)}", op="einsum")
            ranks.append(len(sh) - len(rest) if "..." in t else 0)
    nell = max(ranks, default=0)
    ell = "".join(fresh[:nell])
    terms = [t.replace("...", ell[nell - r:]) for t, r in zip(ins, ranks)]
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
            raise ShapeError(f"einsum index {c!r} has sizes {x.shape[p]} and {x.shape[q]}",
                             op="einsum")
        shape = [1] * x.ndim
        shape[p] = shape[q] = x.shape[p]
        mask = const_array(np.eye(x.shape[p], dtype=bool).reshape(shape))
        x = astype(reduce_sum(where(mask, x, 0), q), x.dtype)  # (a sum widens ints)
        term = term[:q] + term[q + 1:]
    return term, x


def _path(terms: list[str], out: str, shapes: list[tuple[int, ...]], optimize: Any) -> list:
    if optimize is False or len(terms) < 3:
        return [(0, 1)] * (len(terms) - 1)
    import opt_einsum
    how = "auto" if optimize is True else optimize
    path, _ = opt_einsum.contract_path(",".join(terms) + "->" + out, *shapes, shapes=True,
                                       optimize=how)
    return path


@public
def einsum(subscripts: Any, *operands: Any, out: None = None, optimize: Any = "auto",
           precision: None = None, preferred_element_type: None = None) -> Variable:
    """jnp.einsum: explicit or implicit output, `...`, repeated indices (diagonals), any
    number of operands (contracted pairwise along opt_einsum's path) and the interleaved form
    `einsum(x, [0, 1], y, [1, 2], [0, 2])`."""
    if out is not None or precision is not None or preferred_element_type is not None:
        raise ShapeError("out=, precision= and preferred_element_type= are not supported",
                         op="einsum")
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
            res = target if not items and not picked else "".join(
                dict.fromkeys(c for t, _ in pair for c in t if c in later))
            v = _einsum_op([t for t, _ in pair], res, [v for _, v in pair])
            if not picked:
                items.append((res, v))
                break
            picked.insert(0, (res, v))
    (t, v), = items
    return v if t == target else _einsum_op([t], target, [v])


def _broadcast_ellipsis(term: str, v: Variable, sizes: dict[str, int], ell: str) -> Variable:
    """`v` with its size-1 ellipsis axes broadcast to the other operands' sizes."""
    shape = tuple(sizes[c] if c in ell and d == 1 else d for c, d in zip(term, v.shape))
    return v if shape == v.shape else broadcast_to(v, shape)


# ---------------------------------------------------------------- convolution

def _spec_indices(spec: str, chars: str) -> tuple[int, ...]:
    return (spec.index(chars[0]), spec.index(chars[1])) + tuple(
        i for i, c in enumerate(spec) if c not in chars[:2])


@lru_cache(maxsize=1024)
def _conv_shape(lhs: tuple, rhs: tuple, dts: tuple, attrs: tuple) -> tuple[tuple[int, ...], np.dtype]:
    strides, padding, lhs_dil, rhs_dil, dn, groups, batch_groups = attrs
    out = jax.eval_shape(
        lambda a, b: lax.conv_general_dilated(a, b, strides, padding, lhs_dil, rhs_dil,
                                              lax.ConvDimensionNumbers(*dn), groups, batch_groups),
        jax.ShapeDtypeStruct(lhs, dts[0]), jax.ShapeDtypeStruct(rhs, dts[1]))
    return tuple(out.shape), np.dtype(out.dtype)


def _groups(attrs: dict[str, Any]) -> tuple[int, int]:
    """(feature_group_count, batch_group_count); an attr is present only when it is not 1."""
    return attrs.get("feature_group_count", 1), attrs.get("batch_group_count", 1)


def _conv_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    x, w = inputs
    key = (attrs["window_strides"], attrs["padding"], attrs["lhs_dilation"],
           attrs["rhs_dilation"], attrs["dimension_numbers"], *_groups(attrs))
    try:
        return [_conv_shape(x.shape, w.shape, (x.dtype, w.dtype), key)]
    except (TypeError, ValueError) as e:
        raise ShapeError(f"conv of {x.type_str()} with kernel {w.type_str()}: {e}") from None


def _conv_op(x: Variable, w: Variable, strides: tuple, padding: tuple, lhs_dil: tuple,
             rhs_dil: tuple, dn: tuple, feature_group_count: int = 1,
             batch_group_count: int = 1) -> Variable:
    """lax.conv_general_dilated as one `conv` op (`dn`: the three specs as index tuples)."""
    attrs = {"window_strides": tuple(strides), "padding": tuple(padding),
             "lhs_dilation": tuple(lhs_dil), "rhs_dilation": tuple(rhs_dil),
             "dimension_numbers": dn}
    if feature_group_count != 1:
        attrs["feature_group_count"] = int(feature_group_count)
    if batch_group_count != 1:
        attrs["batch_group_count"] = int(batch_group_count)
    return emit1("conv", [x, w], attrs)


def _dilate(shape: Sequence[int], dil: Sequence[int]) -> np.ndarray:
    return np.array([0 if s == 0 else 1 + d * (s - 1) for s, d in zip(shape, dil)])


def _swap(spec: tuple[int, ...]) -> tuple[int, ...]:
    return (spec[1], spec[0]) + spec[2:]


def _axis_out_of(src: int, size: int, x: Variable) -> Variable:
    """Split axis `src` of `x` into (size, rest) (JAX's _reshape_axis_out_of)."""
    shape = list(x.shape)
    shape[src:src + 1] = [size, shape[src] // size]
    return reshape(x, tuple(shape))


def _axis_into(src: int, dst: int, x: Variable) -> Variable:
    """Merge axis `src` into axis `dst` (numbered without `src`), `src` the major part
    (JAX's _reshape_axis_into)."""
    from .shape import transpose
    perm = [i for i in range(x.ndim) if i != src]
    perm.insert(dst, src)
    shape = [d for i, d in enumerate(x.shape) if i != src]
    shape[dst] *= x.shape[src]
    return reshape(transpose(x, perm), tuple(shape))


def _g_conv(op: Op, g: list, need: list) -> list:
    """The transposes of conv_general_dilated, stated as convolutions (as JAX does), grouped
    ones included (feature groups become batch groups of the kernel's gradient and back)."""
    x, w = op.inputs
    a = op.attrs
    groups, batch_groups = _groups(a)
    lhs_spec, rhs_spec, out_spec = a["dimension_numbers"]
    strides, padding = a["window_strides"], a["padding"]
    lhs_dil, rhs_dil = a["lhs_dilation"], a["rhs_dilation"]
    in_sp = [x.shape[i] for i in lhs_spec[2:]]
    k_sp = [w.shape[i] for i in rhs_spec[2:]]
    out_sp = [g[0].shape[i] for i in out_spec[2:]]
    lhs_d, rhs_d, out_d = _dilate(in_sp, lhs_dil), _dilate(k_sp, rhs_dil), _dilate(out_sp, strides)
    gx = gw = None
    if need[0]:
        before = rhs_d - np.array([lo for lo, _ in padding]) - 1
        after = lhs_d + rhs_d - 1 - out_d - before
        pads = tuple((int(b), int(e)) for b, e in zip(before, after))
        k = w
        if groups > 1 or batch_groups > 1:
            k = _axis_into(rhs_spec[0], rhs_spec[1],
                           _axis_out_of(rhs_spec[0], max(groups, batch_groups), w))
        gx = _conv_op(g[0], rev(k, rhs_spec[2:]), lhs_dil, pads, strides, rhs_dil,
                      (out_spec, _swap(rhs_spec), lhs_spec), max(groups, batch_groups))
        if batch_groups > 1:
            gx = _axis_into(lhs_spec[1], lhs_spec[0],
                            _axis_out_of(lhs_spec[1], batch_groups, gx))
    if need[1]:
        lo = np.array([p for p, _ in padding])
        hi = (out_d - lhs_d) + (rhs_d - lo - 1)
        pads = tuple((int(p), int(q)) for p, q in zip(lo, hi))
        gw = _conv_op(x, g[0], rhs_dil, pads, lhs_dil, strides,
                      (_swap(lhs_spec), _swap(out_spec), _swap(rhs_spec)),
                      feature_group_count=batch_groups, batch_group_count=groups)
    return [gx, gw]


def _lower_conv(args: list[str], attrs: dict[str, str]) -> str:
    groups = "".join(f", {k}={attrs[k]}" for k in ("feature_group_count", "batch_group_count")
                     if k in attrs)
    return (f"lax.conv_general_dilated({args[0]}, {args[1]}, {attrs['window_strides']}, "
            f"{attrs['padding']}, {attrs['lhs_dilation']}, {attrs['rhs_dilation']}, "
            f"lax.ConvDimensionNumbers(*{attrs['dimension_numbers']}){groups})")


def conv_padding(padding: Any, x: Variable, w: Variable, dn: tuple, strides: Sequence[int],
                 rhs_dilation: Sequence[int], op: str) -> tuple[tuple[int, int], ...]:
    """Explicit (low, high) pairs for `padding`: a string (SAME, SAME_LOWER, VALID) as
    lax.padtype_to_pads computes it for the dilated kernel, or the pairs themselves."""
    if isinstance(padding, str):
        if padding.upper() not in ("SAME", "SAME_LOWER", "VALID"):
            raise ShapeError(f"padding must be SAME, SAME_LOWER, VALID or explicit pairs, got "
                             f"{padding!r}", op=op)
        k_spatial = [w.shape[i] for i in dn[1][2:]]
        x_spatial = [x.shape[i] for i in dn[0][2:]]
        dil_k = tuple((k - 1) * d + 1 for k, d in zip(k_spatial, rhs_dilation))
        return tuple((int(lo), int(hi)) for lo, hi in lax.padtype_to_pads(
            x_spatial, dil_k, tuple(strides), padding.upper()))
    return tuple((int(lo), int(hi)) for lo, hi in padding)


def layout_specs(layout: str, op: str) -> tuple[str, str, str]:
    """(input, kernel, output) specs of a layout: NWC/NHWC/NDHWC (kernel WIO/HWIO/DHWIO) or
    NCW/NCHW/NCDHW (kernel OIW/OIHW/OIDHW)."""
    spatial = layout.replace("N", "").replace("C", "")
    if layout not in (f"N{spatial}C", f"NC{spatial}") or not spatial or len(set(layout)) < len(
            layout) or "O" in spatial or "I" in spatial:
        raise ShapeError(f"layout must be one of NWC, NHWC, NDHWC, NCW, NCHW, NCDHW (N, the "
                         f"spatial axes and C), got {layout!r}", op=op)
    kernel = spatial + "IO" if layout.endswith("C") else "OI" + spatial
    return layout, kernel, layout


@defop("conv", _conv_rule, _lower_conv, _g_conv, jvp=MULTILINEAR)
def conv(x: Any, w: Any, strides: Sequence[int] | None = None,
         padding: str | Sequence[tuple[int, int]] = "VALID", layout: str = "NHWC",
         rhs_dilation: Sequence[int] | None = None, *, feature_group_count: int = 1) -> Emitted:
    """N-d convolution (1-D, 2-D, 3-D, ...) given by `layout`: NHWC (kernel HWIO), NCHW
    (kernel OIHW), NWC/NCW, NDHWC/NCDHW; `feature_group_count` groups the input channels
    (depthwise: the channel count). Strides and dilation default to ones."""
    x, w = as_var(x), as_var(w)
    lhs_s, rhs_s, out_s = layout_specs(layout, "conv")
    if x.ndim != len(lhs_s) or w.ndim != len(lhs_s):
        raise ShapeError(f"conv with layout {layout} needs a {len(lhs_s)}-D input and kernel, "
                         f"got {x.type_str()} and {w.type_str()}", op="conv")
    n = len(lhs_s) - 2
    dn = (_spec_indices(lhs_s, "NC"), _spec_indices(rhs_s, "OI"), _spec_indices(out_s, "NC"))
    strides = (1,) * n if strides is None else tuple(int(s) for s in strides)
    rhs_dilation = (1,) * n if rhs_dilation is None else tuple(int(d) for d in rhs_dilation)
    attrs = {"window_strides": strides,
             "padding": conv_padding(padding, x, w, dn, strides, rhs_dilation, "conv"),
             "lhs_dilation": (1,) * n, "rhs_dilation": rhs_dilation, "dimension_numbers": dn}
    if feature_group_count != 1:
        attrs["feature_group_count"] = int(feature_group_count)
    return [x, w], attrs
