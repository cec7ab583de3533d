"""Gradient checking and hypothesis strategies for property tests of srcgrad gradients.

    from hypothesis import given
    from srcgrad.testing import arrays, check_grads, settings, shapes

    @settings()                                    # no deadline: a new shape compiles
    @given(arrays(shapes(max_dims=2, distinct=3)))
    def test_f(x):
        check_grads(f, (x,), order=2, jax_fun=f_jnp)

`check_grads` compares srcgrad's gradients with central finite differences along random
directions in float64, and with `jax.grad` of `jax_fun` when one is given. Without global
x64 it runs the comparison in a float64 scope (`jax.enable_x64(True)`) and leaves the
setting as it was, so float32 programs are checked without `jax_enable_x64`. It converts
Python control flow on traced values as `sg.grad` does.

Hypothesis allows an example 200 ms by default; srcgrad compiles each new input shape
(0.3-1.6 s on a laptop's CPU), so `settings()` turns the deadline off, and
`shapes(distinct=N)` draws from N fixed shapes, so most examples reuse a compiled program.
A derivative holds each loop's trip count fixed (docs/control_flow.md): a loop that runs
zero times at an input (Newton's iteration started at its fixed point) differentiates as
the identity there, which hypothesis finds at once; `assume` the input away from it
(docs/testing.md has the example). The strategies and `settings` need hypothesis
(`pip install 'srcgrad[testing]'`).

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .api import functional as api
from .base import conversion, dtypes
from .ops import reduce
from .ops.elementwise import multiply


def _scalarize(
    fun: Callable[..., Any], cts: list[np.ndarray], reduce_sum: Callable, mul: Callable
) -> Callable[..., Any]:
    def scalar(*args: Any) -> Any:
        leaves = jax.tree_util.tree_leaves(fun(*args))
        total = None
        for leaf, ct in zip(leaves, cts):
            term = reduce_sum(mul(leaf, ct))
            total = term if total is None else total + term
        return total

    return scalar


def _directional(
    f: Callable[..., Any], args: list[np.ndarray], v: list[np.ndarray], eps: float
) -> float:
    plus = f(*[a + eps * d for a, d in zip(args, v)])
    minus = f(*[a - eps * d for a, d in zip(args, v)])
    return float((np.asarray(plus) - np.asarray(minus)) / (2 * eps))


def check_grads(
    fun: Callable[..., Any],
    args: Sequence[Any],
    order: int = 1,
    jax_fun: Callable[..., Any] | None = None,
    *,
    argnums: int | Sequence[int] | None = None,
    eps: float = 1e-6,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    fd_rtol: float = 1e-4,
    directions: int = 3,
    seed: int = 0,
) -> None:
    """Assert srcgrad's gradients of `fun` match finite differences (and jax.grad of `jax_fun`).

    `args` are pytrees (arrays, scalars, nested tuples/lists/dicts of them). The arguments in
    `argnums` (default: all) are differentiated, every leaf of them cast to float64; the
    others are passed unchanged. Non-scalar outputs are reduced with a fixed random
    cotangent. `order=2` also checks the gradient of the gradient. Without global x64 the
    check runs in a float64 scope.
    """
    if not dtypes.x64():
        with dtypes.x64_scope():  # finite differences need float64; only this check sees it
            return check_grads(
                fun,
                args,
                order,
                jax_fun,
                argnums=argnums,
                eps=eps,
                rtol=rtol,
                atol=atol,
                fd_rtol=fd_rtol,
                directions=directions,
                seed=seed,
            )
    nums = (
        tuple(range(len(args)))
        if argnums is None
        else ((argnums,) if isinstance(argnums, int) else tuple(argnums))
    )
    leaves, rebuild = _flatten_args(list(args), nums)
    fun = _on_leaves(fun, rebuild)
    jax_fun = None if jax_fun is None else _on_leaves(jax_fun, rebuild)
    _check_leaves(
        fun,
        leaves,
        order,
        jax_fun,
        eps=eps,
        rtol=rtol,
        atol=atol,
        fd_rtol=fd_rtol,
        directions=directions,
        seed=seed,
    )


def _flatten_args(
    args: list[Any], nums: tuple[int, ...]
) -> tuple[list[np.ndarray], Callable[[Sequence[Any]], list[Any]]]:
    """The float64 leaves of the differentiated arguments, and a function that puts leaves
    back into the full argument list."""
    for i in nums:
        if not -len(args) <= i < len(args):
            raise ValueError(f"check_grads: argnums {i} but only {len(args)} arguments were given")
    nums = tuple(i % len(args) for i in nums)
    flat = [jax.tree_util.tree_flatten(args[i]) for i in nums]
    leaves = [np.asarray(leaf, np.float64) for ls, _ in flat for leaf in ls]
    sizes = [len(ls) for ls, _ in flat]

    def rebuild(xs: Sequence[Any]) -> list[Any]:
        full, pos = list(args), 0
        for i, (_, tree), n in zip(nums, flat, sizes):
            full[i] = jax.tree_util.tree_unflatten(tree, list(xs[pos : pos + n]))
            pos += n
        return full

    return leaves, rebuild


def _on_leaves(
    fun: Callable[..., Any], rebuild: Callable[[Sequence[Any]], list[Any]]
) -> Callable[..., Any]:
    return lambda *xs: conversion.user_fn(fun)(*rebuild(xs))  # converted as sg.grad converts


def _check_leaves(
    fun: Callable[..., Any],
    args: list[np.ndarray],
    order: int,
    jax_fun: Callable[..., Any] | None,
    *,
    eps: float,
    rtol: float,
    atol: float,
    fd_rtol: float,
    directions: int,
    seed: int,
) -> None:
    """check_grads on a function of flat float64 arrays, all differentiated."""
    rng = np.random.default_rng(seed)
    outs = jax.tree_util.tree_leaves(api.jit(fun)(*args))
    cts = [rng.standard_normal(np.shape(o)) for o in outs]
    f = _scalarize(fun, cts, reduce.sum, multiply)
    argnums = tuple(range(len(args)))
    if jax_fun is not None:
        jf = _scalarize(jax_fun, cts, jnp.sum, jnp.multiply)
        _compare_to_jax(f, jf, args, argnums, order, rtol, atol, rng)
    f_jit = api.jit(f)
    for _ in range(directions):
        _check_fd(f, f_jit, args, argnums, rng, eps, fd_rtol)
    if order >= 2:
        v = [rng.standard_normal(a.shape) for a in args]

        def grad_dot_v(*xs: Any) -> Any:
            gs = api.grad(f, argnums)(*xs)
            return _scalarize(lambda *a: gs, v, reduce.sum, multiply)()

        _check_leaves(
            grad_dot_v,
            args,
            order - 1,
            None,
            eps=eps,
            rtol=rtol,
            atol=atol,
            fd_rtol=fd_rtol * 10,
            directions=directions,
            seed=seed + 1,
        )


def _check_fd(
    f: Callable,
    f_jit: Callable,
    args: list,
    argnums: tuple,
    rng: np.random.Generator,
    eps: float,
    fd_rtol: float,
) -> None:
    v = [rng.standard_normal(a.shape) for a in args]
    grads = api.grad(f, argnums)(*args)
    analytic = float(sum(np.vdot(np.asarray(g), d) for g, d in zip(grads, v)))
    numeric = _directional(f_jit, args, v, eps)
    if not abs(analytic - numeric) <= fd_rtol * max(1.0, abs(numeric), abs(analytic)):
        raise AssertionError(
            f"directional derivative: srcgrad {analytic!r}, finite differences {numeric!r}"
        )


def _compiled(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` (a JAX reference) under `jax.jit`: one compile, where running it eagerly compiles
    one program per primitive; run as it is when it cannot be traced (Python control flow
    on values: JAX's tracer conversion errors are all `JAXTypeError`s)."""
    jitted = jax.jit(fn)

    def call(*args: Any) -> Any:
        try:
            return jitted(*args)
        except jax.errors.JAXTypeError:
            return fn(*args)

    return call


def _compare_to_jax(
    f: Callable,
    jf: Callable,
    args: list,
    argnums: tuple,
    order: int,
    rtol: float,
    atol: float,
    rng: np.random.Generator,
) -> None:
    ours = api.grad(f, argnums)(*args)
    theirs = _compiled(jax.grad(jf, argnums))(*args)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        np.testing.assert_allclose(
            np.asarray(a),
            np.asarray(b),
            rtol=rtol,
            atol=atol,
            err_msg=f"gradient of argument {i} differs from jax.grad",
        )
    if order >= 2:
        v = [rng.standard_normal(a.shape) for a in args]
        hv_ours = api.grad(
            lambda *x: _scalarize(lambda *a: api.grad(f, argnums)(*a), v, reduce.sum, multiply)(*x),
            argnums,
        )(*args)
        hv_jax = _compiled(
            jax.grad(
                lambda *x: sum(jnp.vdot(g, d) for g, d in zip(jax.grad(jf, argnums)(*x), v)),
                argnums,
            )
        )(*args)
        for i, (a, b) in enumerate(zip(hv_ours, hv_jax)):
            np.testing.assert_allclose(
                np.asarray(a),
                np.asarray(b),
                rtol=rtol * 10,
                atol=atol * 10,
                err_msg=f"second derivative of argument {i} differs from JAX",
            )


# ---------------------------------------------------------------- hypothesis strategies


def _hypothesis() -> Any:
    """The hypothesis package, or an error that says which extra installs it."""
    try:
        import hypothesis
        import hypothesis.extra.numpy
    except ImportError:
        raise ModuleNotFoundError(
            "srcgrad.testing's strategies and settings need hypothesis: "
            "pip install 'srcgrad[testing]' (or hypothesis)"
        ) from None
    return hypothesis


def settings(**changes: Any) -> Any:
    """hypothesis.settings for property tests over srcgrad (a decorator, above `@given`): no
    deadline (a new input shape compiles a program, 0.3-1.6 s, past hypothesis's 200 ms) and
    the too-slow health check off, 25 examples; `changes` override any setting.
    `hypothesis.settings.register_profile("srcgrad", settings())` makes it a profile."""
    hyp = _hypothesis()
    base = {
        "deadline": None,
        "max_examples": 25,
        "suppress_health_check": [hyp.HealthCheck.too_slow],
    }
    return hyp.settings(**{**base, **changes})


def shapes(
    min_dims: int = 0,
    max_dims: int = 3,
    min_side: int = 1,
    max_side: int = 4,
    *,
    distinct: int | None = None,
) -> Any:
    """Array shapes (0-d included when min_dims is 0; size-0 axes when min_side is 0).
    `distinct=N`: drawn from N fixed shapes of those bounds (the smallest first, the rest
    spread over the range), so examples reuse compiled programs."""
    hnp = _hypothesis().extra.numpy
    if distinct is None:
        return hnp.array_shapes(
            min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side
        )
    from hypothesis import strategies as st

    if distinct < 1:
        raise ValueError(f"shapes: distinct must be at least 1, got {distinct}")
    rng = np.random.default_rng(distinct)
    pool = [(min_side,) * min_dims]
    for _ in range(64 * distinct):
        if len(pool) == distinct:
            break
        shape = tuple(
            int(s)
            for s in rng.integers(min_side, max_side + 1, rng.integers(min_dims, max_dims + 1))
        )
        if shape not in pool:
            pool.append(shape)
    return st.sampled_from(pool)


def broadcast_shapes(
    num_shapes: int = 2, min_dims: int = 0, max_dims: int = 3, min_side: int = 1, max_side: int = 4
) -> Any:
    """Tuples of `num_shapes` mutually broadcast-compatible shapes."""
    hnp = _hypothesis().extra.numpy
    return hnp.mutually_broadcastable_shapes(
        num_shapes=num_shapes,
        min_dims=min_dims,
        max_dims=max_dims,
        min_side=min_side,
        max_side=max_side,
    ).map(lambda r: r.input_shapes)


def arrays(
    shape: Any,
    dtype: Any = np.float64,
    min_value: float = -3.0,
    max_value: float = 3.0,
    exclude_zero: bool = False,
) -> Any:
    """Arrays of a shape (or a shape strategy) with finite values in [min_value, max_value]."""
    hnp = _hypothesis().extra.numpy
    from hypothesis import strategies as st

    dt = np.dtype(dtype)
    if dt.kind == "f":
        elements = st.floats(
            min_value,
            max_value,
            allow_nan=False,
            allow_infinity=False,
            width=min(64, dt.itemsize * 8),
        )
        if exclude_zero:
            elements = elements.filter(lambda x: abs(x) > 1e-3)
    elif dt.kind in "iu":
        elements = st.integers(int(min_value), int(max_value))
    else:
        elements = st.booleans()
    return hnp.arrays(dt, shape, elements=elements)


__all__ = ["check_grads", "settings", "shapes", "broadcast_shapes", "arrays"]
