"""Forward mode and Jacobians: `jvp`, `linearize`, `jacfwd`, `jacrev`, `hessian`, `hvp`.

Each follows the jax function of the same name. `jvp` traces the function and runs the
forward-mode transform (transforms/forward.py) over its ops, so the tangents are source next
to the primal ops. The Jacobians push a basis through `jvp` (columns) or pull one through
reverse mode (rows): on arrays, `jax.vmap` batches the compiled program over the basis;
inside a srcgrad trace, an `sg.scan` runs over it.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ..base import dtypes, conversion as hooks
from .functional import argnums_tuple, grad
from ..compiled.arguments import leaf_dtype
from ..compiled.transformed import Transformed
from ..core.dispatch import tracing
from ..core.builder import active_program, as_var
from ..base.errors import GradientError, SrcgradError, located, user_location
from ..ir.program import Variable
from ..ops.creation import ones, zeros
from ..ops.elementwise import astype
from ..ops.grad_helpers import assign
from ..ops.scan import scan
from ..ops.shape import reshape, transpose
from ..base.traceback_filter import api_boundary
from ..transforms.backward import gradients
from ..transforms.forward import jvp_ops, tangent_name

tree_flatten, tree_unflatten = jax.tree_util.tree_flatten, jax.tree_util.tree_unflatten


def _shape(x: Any) -> tuple[int, ...]:
    return x.shape if isinstance(x, Variable) else tuple(np.shape(x))


def _is_float(x: Any) -> bool:
    dt = x.dtype if isinstance(x, Variable) else leaf_dtype(x)
    return dtypes.is_inexact(np.dtype(dt)) and np.dtype(dt).kind != "V"


def _split_aux(out: Any, has_aux: bool, who: str) -> tuple[Any, Any]:
    if not has_aux:
        return out, None
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise GradientError(
            f"{who}(has_aux=True) needs the function to return a pair (output, aux)",
            loc=user_location(),
        )
    return out[0], out[1]


# ---------------------------------------------------------------- jvp


def _jvp_inline(
    fun: Callable[..., Any],
    primals: Sequence[Any],
    tangents: Sequence[Any],
    argnums: tuple[int, ...],
    has_aux: bool,
    name_inputs: bool = False,
) -> tuple:
    """Trace `fun(*primals)` and its tangent ops; `tangents` holds one tangent per float leaf
    of the primals at `argnums`. Returns (out, tangent_out[, aux]); an integer output's
    tangent is None."""
    block = active_program("jvp").current_block()
    args = list(primals)
    seeds: dict[Variable, Variable] = {}
    it = iter(tangents)
    for i in argnums:
        leaves, tree = tree_flatten(args[i])
        copies = []
        for v in leaves:
            v = as_var(v)
            if _is_float(v):
                c = assign(v, base=v.name.split("@")[0])
                t = as_var(next(it), like=c)
                if name_inputs:
                    block.program.rename(t, tangent_name(v))
                seeds[c] = t
                v = c
            copies.append(v)
        args[i] = tree_unflatten(tree, copies)
    start = len(block.ops)
    out, aux = _split_aux(hooks.user_fn(fun)(*args), has_aux, "jvp")
    leaves, out_tree = tree_flatten(out)
    outs = [as_var(v) for v in leaves]
    ops = block.ops[start:]
    del block.ops[start:]
    jvp_ops(ops, block, seeds)
    t_out = []
    with block.program.block_guard(block):
        for o in outs:
            t = seeds.get(o)
            if _is_float(o) and t is None:
                t = zeros(o.shape, o.dtype)
            t_out.append(t if _is_float(o) else None)
    res = (tree_unflatten(out_tree, outs), tree_unflatten(out_tree, t_out))
    return res + (aux,) if has_aux else res


def _float0(out: Any, t_out: Any) -> Any:
    """`t_out` with JAX's float0 zeros for the tangents of integer outputs (None here)."""
    o_leaves, tree = tree_flatten(out)
    t_leaves = tree.flatten_up_to(t_out)  # type: ignore[attr-defined]  # no jaxlib stub
    return tree_unflatten(
        tree,
        [
            np.zeros(_shape(o), jax.dtypes.float0) if t is None else t
            for o, t in zip(o_leaves, t_leaves)
        ],
    )


def _check_jvp_args(primals: Any, tangents: Any) -> list[Any]:
    """The tangents of the float leaves of `primals`, checked against them as jax.jvp does
    (its TypeError or ValueError, with the user's line)."""
    for what, v in (("primal", primals), ("tangent", tangents)):
        if not isinstance(v, (tuple, list)):
            raise located(
                TypeError,
                f"primal and tangent arguments to sg.jvp must be tuples "
                f"or lists; found {what} of type {type(v).__name__}",
            )
    p_leaves, p_tree = tree_flatten(tuple(primals))
    t_leaves, t_tree = tree_flatten(tuple(tangents))
    if p_tree != t_tree:
        raise located(
            TypeError,
            "primal and tangent arguments to sg.jvp must have the same "
            f"tree structure; primals have {p_tree} and tangents have {t_tree}",
        )
    out = []
    for i, (p, t) in enumerate(zip(p_leaves, t_leaves)):
        if _shape(p) != _shape(t):
            raise located(
                ValueError,
                f"sg.jvp called with different primal and tangent "
                f"shapes; got primal shape {_shape(p)} and tangent shape "
                f"{_shape(t)} (leaf {i})",
            )
        t_dt = t.dtype if hasattr(t, "dtype") else None
        if not _is_float(p):
            if t_dt is None or np.dtype(t_dt) != jax.dtypes.float0:
                got = type(t).__name__ if t_dt is None else np.dtype(t_dt).name
                raise located(
                    TypeError,
                    f"sg.jvp: the tangent of the integer primal leaf {i} "
                    f"must be float0 (jax.dtypes.float0), got {got}",
                )
            continue
        p_dt = p.dtype if isinstance(p, Variable) else leaf_dtype(p)
        if t_dt is not None and dtypes.canonical(np.dtype(t_dt)) != p_dt:
            raise located(
                TypeError,
                f"sg.jvp: primal and tangent dtypes differ at leaf {i}: "
                f"primal {np.dtype(p_dt).name}, tangent {np.dtype(t_dt).name}",
            )
        out.append(t if t_dt is not None or isinstance(t, Variable) else np.asarray(t, p_dt))
    return out


def _compiled_jvp(
    fun: Callable[..., Any], n: int, argnums: tuple[int, ...], has_aux: bool, who: str
) -> Transformed:
    """A Transformed taking the n primals, then the float tangents of the argnums' leaves."""

    def inline(*args: Any) -> Any:
        return _jvp_inline(fun, args[:n], args[n:], argnums, has_aux, name_inputs=True)

    return Transformed(inline, fun, who, params=(n, argnums, has_aux))


@api_boundary
def jvp(
    fun: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any], has_aux: bool = False
) -> tuple:
    """(fun(*primals), its directional derivative along `tangents`), as jax.jvp.

    The tangent program is srcgrad's forward-mode transform of `fun`'s IR: each op is
    followed by the ops of its tangent (`sg.source` shows them). Integer primals take
    float0 tangents, and integer outputs get float0 tangents, as in JAX.
    """
    t_leaves = _check_jvp_args(primals, tangents)
    every = tuple(range(len(primals)))
    if tracing((primals, tangents)):
        res = _jvp_inline(fun, tuple(primals), t_leaves, every, has_aux)
    else:
        res = _compiled_jvp(fun, len(primals), every, has_aux, "jvp")(*primals, *t_leaves)
    return (res[0], _float0(res[0], res[1])) + tuple(res[2:])


@api_boundary
def linearize(fun: Callable[..., Any], *primals: Any, has_aux: bool = False) -> tuple:
    """(fun(*primals), f_jvp[, aux]) as jax.linearize: f_jvp(*tangents) is the jvp at
    `primals`. f_jvp runs the jvp program (one compiled program, shared with the first
    call); XLA computes the primal part again on each call."""
    zero = [jax.tree_util.tree_map(_zero_tangent, p) for p in primals]
    res = jvp(fun, primals, zero, has_aux=has_aux)

    def f_jvp(*tangents: Any) -> Any:
        if len(tangents) != len(primals):
            raise located(
                TypeError,
                f"the linearized function takes {len(primals)} tangents, "
                f"one per primal; got {len(tangents)}",
            )
        return jvp(fun, primals, tangents, has_aux=has_aux)[1]

    return (res[0], f_jvp) + tuple(res[2:])


def _zero_tangent(p: Any) -> Any:
    if isinstance(p, Variable):
        return zeros(p.shape, p.dtype) if _is_float(p) else np.zeros(p.shape, jax.dtypes.float0)
    dt = leaf_dtype(p)
    return np.zeros(_shape(p), dt if _is_float(p) else jax.dtypes.float0)


@api_boundary
def hvp(fun: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any]) -> Any:
    """The Hessian-vector product of a scalar `fun`: `jvp(grad(fun), primals, tangents)[1]`
    (forward over reverse; the Hessian is never formed)."""
    return jvp(grad(fun), primals, tangents)[1]


# ---------------------------------------------------------------- Jacobians


class _Basis:
    """The flattened float leaves of the differentiated arguments, and their standard basis."""

    def __init__(self, args: tuple, argnums: tuple[int, ...], who: str, outputs: bool = False):
        self.trees, self.leaves = [], []
        for i in argnums:
            if i >= len(args):
                raise GradientError(
                    f"{who}: argnums {i} but only {len(args)} arguments were given",
                    loc=user_location(),
                )
            leaves, tree = tree_flatten(args[i])
            for v in leaves:
                if not _is_float(v):
                    dt = v.dtype if isinstance(v, Variable) else leaf_dtype(v)
                    where = "the output" if outputs else f"argument {i}"
                    raise GradientError(
                        f"{who} requires real floating-point "
                        f"{'outputs' if outputs else 'inputs'}, but {where} has a "
                        f"leaf of dtype {np.dtype(dt).name}",
                        loc=user_location(),
                    )
            self.trees.append(tree)
            self.leaves += leaves
        self.shapes = [_shape(v) for v in self.leaves]
        self.dtypes = [v.dtype if isinstance(v, Variable) else leaf_dtype(v) for v in self.leaves]
        self.sizes = [int(np.prod(s, dtype=np.int64)) for s in self.shapes]
        self.offsets = np.cumsum([0] + self.sizes).tolist()
        self.total = self.offsets[-1]

    def columns(self) -> list[np.ndarray]:
        """Per leaf, the basis along it: (total, *shape), one-hot across all leaves."""
        eye = np.eye(self.total)
        return [
            eye[:, a : a + s].reshape((self.total,) + shape).astype(dt)
            for a, s, shape, dt in zip(self.offsets, self.sizes, self.shapes, self.dtypes)
        ]

    def split(self, row: Any) -> list[Any]:
        """A traced basis row (total,) cut into one tangent per leaf."""
        return [
            astype(reshape(row[a : a + s], shape), dt)
            for a, s, shape, dt in zip(self.offsets, self.sizes, self.shapes, self.dtypes)
        ]

    def tree(self, per_leaf: list[Any], single: bool) -> Any:
        """`per_leaf` (one value per leaf) in the structure of the differentiated arguments."""
        out, k = [], 0
        for tree in self.trees:
            n = tree.num_leaves  # type: ignore[attr-defined]  # no jaxlib stub
            out.append(tree_unflatten(tree, per_leaf[k : k + n]))
            k += n
        return out[0] if single else tuple(out)


def _place(block: Any, shape: tuple, in_shape: tuple, rows_first: bool, xp: Any) -> Any:
    """A (size, n) or (n, size) slab of Jacobian entries as shape + in_shape."""
    if rows_first:  # (in_size, *out): jacfwd pushes one input direction per row
        return xp.reshape(xp.moveaxis(block, 0, -1), shape + in_shape)
    return xp.reshape(block, shape + in_shape)


class _Jacobian(Transformed):
    """The function `sg.jacfwd` / `sg.jacrev` returns: batched with jax.vmap on arrays, an
    `sg.scan` over the basis inside a srcgrad trace (and so in `sg.trace` / `sg.source`).

    A Transformed, so that the programs of transformations applied on top of it (the jvp of
    `hessian`) are cached under the user's function.
    """

    def __init__(
        self, fun: Callable[..., Any], argnums: int | Sequence[int], has_aux: bool, forward: bool
    ):
        self.fun, self.has_aux, self.forward = fun, has_aux, forward
        self.nums, self.single = argnums_tuple(argnums)
        self.who = "jacfwd" if forward else "jacrev"
        super().__init__(self._traced, fun, self.who, params=(self.nums, self.single, has_aux))

    def __call__(self, *args: Any) -> Any:
        if tracing(args):
            return self._traced(*args)
        return (self._fwd_arrays if self.forward else self._rev_arrays)(args)

    def _traced(self, *args: Any) -> Any:
        args = jax.tree_util.tree_map(as_var, args)
        return (self._fwd_traced if self.forward else self._rev_traced)(args)

    def _result(self, basis: _Basis, out: Any, per_out: list[list[Any]], aux: Any) -> Any:
        o_leaves, o_tree = tree_flatten(out)
        jac = tree_unflatten(o_tree, [basis.tree(cols, self.single) for cols in per_out])
        return (jac, aux) if self.has_aux else jac

    # -- on arrays: jax.vmap over the compiled program

    def _fwd_arrays(self, args: tuple) -> Any:
        basis = _Basis(args, self.nums, self.who)
        compiled = _compiled_jvp(self.fun, len(args), self.nums, self.has_aux, "jacfwd")

        def push(*cols: Any) -> Any:
            res = compiled(*args, *cols)
            return res[0], res[1], res[2] if self.has_aux else None

        out, t_out, aux = _over_basis(push, compiled, args, basis.columns())
        o_leaves, o_tree = tree_flatten(out)
        per_out = []
        for o, t in zip(o_leaves, o_tree.flatten_up_to(t_out)):  # type: ignore[attr-defined]  # no jaxlib stub
            if t is None:
                per_out.append([np.zeros(np.shape(o) + s, jax.dtypes.float0) for s in basis.shapes])
                continue
            per_out.append(
                [
                    _place(t[a : a + n], np.shape(o), s, True, jnp)
                    for a, n, s in zip(basis.offsets, basis.sizes, basis.shapes)
                ]
            )
        return self._result(basis, out, per_out, aux)

    def _rev_arrays(self, args: tuple) -> Any:
        basis = _Basis(args, self.nums, self.who)
        fun, nums, has_aux, n = self.fun, self.nums, self.has_aux, len(args)
        out = jax.eval_shape(
            Transformed(
                lambda *a: _split_aux(hooks.user_fn(fun)(*a), has_aux, "jacrev"),
                fun,
                "jacrev_shape",
                params=(has_aux,),
            ),
            *args,
        )
        rows = _Basis((out[0],), (0,), "jacrev", outputs=True)

        def pull(*a: Any) -> Any:
            grads, _, aux = _pullback(fun, a[:n], a[n:], nums, has_aux)
            return grads, aux

        compiled = Transformed(pull, fun, "jacrev", params=(n, nums, has_aux))
        _, grads, aux = _over_basis(
            lambda *cts: (None,) + tuple(compiled(*args, *cts)), compiled, args, rows.columns()
        )
        per_out = [
            [_place(g[a : a + size], shape, s, False, jnp) for g, s in zip(grads, basis.shapes)]
            for a, size, shape in zip(rows.offsets, rows.sizes, rows.shapes)
        ]
        return self._result(basis, out[0], per_out, aux)

    # -- inside a srcgrad trace: sg.scan over the basis

    def _fwd_traced(self, args: tuple) -> Any:
        basis = _Basis(args, self.nums, self.who)
        fun, nums, has_aux = self.fun, self.nums, self.has_aux
        out, aux = _split_aux(hooks.user_fn(fun)(*args), has_aux, "jacfwd")

        def step(carry: Any, row: Variable) -> Any:
            t_out = _jvp_inline(fun, args, basis.split(row), nums, has_aux)[1]
            return carry, [t for t in tree_flatten(t_out)[0]]

        _, cols = scan(step, (), np.eye(basis.total, dtype=dtypes.default_float()))
        o_leaves = tree_flatten(out)[0]
        cols_it = iter(cols)
        per_out = []
        for o in o_leaves:
            if not _is_float(o):
                per_out.append([np.zeros(o.shape + s, jax.dtypes.float0) for s in basis.shapes])
                continue
            t = next(cols_it)
            per_out.append(
                [
                    _place(t[a : a + n], o.shape, s, True, _VarOps)
                    for a, n, s in zip(basis.offsets, basis.sizes, basis.shapes)
                ]
            )
        return self._result(basis, out, per_out, aux)

    def _rev_traced(self, args: tuple) -> Any:
        basis = _Basis(args, self.nums, self.who)
        fun, nums, has_aux = self.fun, self.nums, self.has_aux
        grads, out, aux = _pullback(fun, args, None, nums, has_aux)  # ones: one row if scalar
        rows = _Basis((out,), (0,), "jacrev", outputs=True)
        if rows.total == 1:
            grads = [reshape(g, (1,) + g.shape) for g in grads]
        else:

            def step(carry: Any, row: Variable) -> Any:
                return carry, _pullback(fun, args, rows.split(row), nums, has_aux)[0]

            _, grads = scan(step, (), np.eye(rows.total, dtype=dtypes.default_float()))
        per_out = [
            [_place(g[a : a + size], shape, s, False, _VarOps) for g, s in zip(grads, basis.shapes)]
            for a, size, shape in zip(rows.offsets, rows.sizes, rows.shapes)
        ]
        return self._result(basis, out, per_out, aux)


def _over_basis(
    call: Callable[..., tuple], compiled: Transformed, args: tuple, columns: list[np.ndarray]
) -> tuple:
    """`call(*basis_vector)` -> (unbatched, batched, unbatched) for every basis vector, the
    middle part stacked: jax.vmap, or (for a program that sizes its loop records on
    concrete inputs: a data-dependent while loop under reverse mode) one call per vector."""
    batched = jax.vmap(call, out_axes=(None, 0, None))
    if any(isinstance(x, jax.core.Tracer) for x in tree_flatten(args)[0]) or not columns:
        return batched(*columns)
    if not compiled.records_loops():
        try:
            return batched(*columns)
        except SrcgradError:
            if not compiled.records_loops():
                raise
    outs = [call(*[c[k] for c in columns]) for k in range(columns[0].shape[0])]
    stacked = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *[o[1] for o in outs])
    return outs[0][0], stacked, outs[0][2]


class _VarOps:
    """`moveaxis(x, 0, -1)` and `reshape` over traced values, for `_place`."""

    @staticmethod
    def moveaxis(x: Variable, src: int, dst: int) -> Variable:
        return transpose(x, tuple(range(1, x.ndim)) + (0,))

    reshape = staticmethod(reshape)


def _pullback(
    fun: Callable[..., Any],
    args: Sequence[Any],
    cts: Sequence[Any] | None,
    argnums: tuple[int, ...],
    has_aux: bool,
) -> tuple[list[Variable], Any, Any]:
    """The gradients of <fun(*args), cts> w.r.t. the float leaves at `argnums` (one
    cotangent per output leaf; None: ones), the output and the aux output."""
    args = list(args)
    wrt: list[Variable] = []
    for i in argnums:
        leaves, tree = tree_flatten(args[i])
        copies = [assign(as_var(v), base=as_var(v).name.split("@")[0]) for v in leaves]
        wrt += copies
        args[i] = tree_unflatten(tree, copies)
    out, aux = _split_aux(hooks.user_fn(fun)(*args), has_aux, "jacrev")
    outs = [as_var(v) for v in tree_flatten(out)[0]]
    for o in outs:
        if not _is_float(o):
            raise GradientError(
                f"jacrev requires real floating-point outputs, got {o.type_str()}",
                loc=user_location(),
            )
    seeds = (
        [ones(o.shape, o.dtype) for o in outs]
        if cts is None
        else [as_var(c, like=o) for c, o in zip(cts, outs)]
    )
    grads = gradients(outs, wrt, seeds)
    return [g if g is not None else zeros(x.shape, x.dtype) for g, x in zip(grads, wrt)], out, aux


@api_boundary
def jacfwd(
    fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """The Jacobian of `fun` by forward mode (jax.jacfwd): one jvp per input direction,
    batched over the basis. Output leaves of shape S and inputs of shape I give S + I."""
    return _Jacobian(fun, argnums, has_aux, forward=True)


@api_boundary
def jacrev(
    fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """The Jacobian of `fun` by reverse mode (jax.jacrev): one vjp per output direction,
    batched over the basis."""
    return _Jacobian(fun, argnums, has_aux, forward=False)


@api_boundary
def hessian(
    fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """The Hessian of a scalar `fun` (jax.hessian): forward over reverse,
    `jacfwd(jacrev(fun))`: the gradient program's jvp, batched over the input basis."""
    return jacfwd(jacrev(fun, argnums, has_aux), argnums, has_aux)


__all__ = ["jvp", "linearize", "hvp", "jacfwd", "jacrev", "hessian"]
