"""Complex inputs through every op of the tables: jax.numpy's values, dtypes and gradients, or
a clear refusal.

Each forward case of the op tables (the ones test_op_coverage.py reads: test_ops, test_manip,
test_special, test_jnp_extra, test_nn_functions, test_conv) runs with its float arguments made
complex (x + i cos(3x + k)). srcgrad's result under sg.jit and eagerly, and the dtypes the
traced program declares, must be jax.numpy's. Where jax.numpy refuses the complex input,
srcgrad must refuse it too with its own error naming the complex dtype at the user's line
(not a JAX error from the compiled code); REFUSED lists, by the text of their errors,
srcgrad's refusals of complex values that jax.numpy takes, with the reason. Where the result
has a floating-point part, sg.grad of a real function of it (sum(real(out) * a + imag(out) *
b)) with respect to the real and imaginary parts of the inputs must be jax.grad's (JAX's
convention for complex cotangents). Every fourth case runs by default, all of them with
`-m slow` (docs/testing.md); test_the_parts_of_complex_values covers the parts (real, imag,
conj, angle, ...) always.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax import lax

import srcgrad as sg
from srcgrad.ops import shape as shape_ops
import test_conv
import test_jnp_extra
import test_manip
import test_nn_functions
import test_ops
import test_special
from support.util import sliced

#: srcgrad's refusals of complex values that jax.numpy takes (by the text of the error), and
#: why; docs/api.md says the same.
REFUSED: dict[str, str] = {
    "sort of complex values is not supported": (
        "sort and what is built on it (argsort, unique, the set functions) do not order "
        "complex values (JAX's order is lexicographic)"
    ),
    "of complex matrices": (
        "the gradients of cholesky, eigh, svd and qr (and of what is built on them) are for "
        "real matrices; their values are JAX's"
    ),
}


def complexify(a: Any, k: int) -> Any:
    """A float array made complex (a deterministic imaginary part); anything else unchanged."""
    if isinstance(a, np.ndarray) and a.dtype.kind == "f":
        dt = np.complex64 if a.dtype == np.float32 else np.complex128
        finite = np.isfinite(a)
        return (a + 1j * np.where(finite, np.cos(3.0 * np.where(finite, a, 0.0) + k), 0.5)).astype(
            dt
        )
    return a


def _outcome(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception as e:
        return e


def _leaves(out: Any) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(out)]


def _assert_refused(got: Any, what: str) -> None:
    assert isinstance(got, sg.SrcgradError), (
        f"{what}: expected srcgrad's refusal of a complex input, got "
        + (f"{type(got).__name__}: {got}" if isinstance(got, Exception) else "a value")
    )
    assert "c64" in str(got) or "c128" in str(got) or "complex" in str(got), f"{what}: {got}"
    assert " (at " in str(got), f"{what}: no user location in {got}"


def _documented(got: Any) -> bool:
    """Whether `got` is one of srcgrad's REFUSED refusals."""
    return isinstance(got, sg.SrcgradError) and any(k in str(got) for k in REFUSED)


def _assert_same(got: Any, want: Any, what: str) -> None:
    assert not isinstance(got, Exception), f"{what}: srcgrad raises {type(got).__name__}: {got}"
    got, want = _leaves(got), _leaves(want)
    assert len(got) == len(want), what
    for a, b in zip(got, want):
        assert (a.dtype, a.shape) == (b.dtype, b.shape), (
            f"{what}: srcgrad gives {a.dtype}{list(a.shape)}, jax.numpy {b.dtype}{list(b.shape)}"
        )
        if a.dtype.kind in "biu":
            np.testing.assert_array_equal(a, b, err_msg=what)
        else:
            tol = 2e-5 if a.dtype in (np.float32, np.complex64) else 1e-10
            np.testing.assert_allclose(a, b, rtol=tol, atol=tol, err_msg=what)


def _scalar(m: Any, out: Any, cts: list[tuple[np.ndarray, np.ndarray]]) -> Any:
    """sum(real(out) * a + imag(out) * b) over the floating-point leaves of `out`."""
    total = 0.0
    for leaf, (a, b) in zip(
        [x for x in jax.tree_util.tree_leaves(out) if jnp.dtype(x.dtype).kind in "fc"], cts
    ):
        total = total + m.sum(m.real(leaf) * a) + m.sum(m.imag(leaf) * b)
    return total


def check(
    name: str,
    ours: Callable[..., Any],
    ref: Callable[..., Any],
    args: list[Any],
    eager: bool = True,
) -> None:
    """Values and declared dtypes (sg.jit, and eagerly unless `eager` is False), refusals,
    then gradients (see the module doc). `ours` and `ref` take `args`; the value and the
    gradient compile as one program."""
    spots = [i for i, a in enumerate(args) if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
    cargs = [complexify(a, i) for i, a in enumerate(args)]
    want = _outcome(lambda: jax.jit(ref)(*cargs))
    got_once = _outcome(lambda: (ours if eager else sg.jit(ours))(*cargs))
    if isinstance(want, Exception) or _documented(got_once):
        _assert_refused(_outcome(lambda: sg.jit(ours)(*cargs)), f"{name} (sg.jit)")
        _assert_refused(got_once, f"{name} (eager)")
        return
    _assert_same(got_once, want, f"{name} ({'eager' if eager else 'sg.jit'})")
    rng = np.random.default_rng(0)
    cts = [
        (rng.standard_normal(x.shape), rng.standard_normal(x.shape))
        for x in _leaves(want)
        if x.dtype.kind in "fc"
    ]
    parts = [p for i in spots for p in (np.real(cargs[i]), np.imag(cargs[i]))]
    nums = tuple(range(len(parts)))

    def with_grad(m: Any, fn: Callable[..., Any], grad: Callable[..., Any]) -> Callable[..., Any]:
        def full(parts: tuple) -> list[Any]:
            out = list(cargs)
            for j, i in enumerate(spots):
                out[i] = parts[2 * j] + parts[2 * j + 1] * 1j
            return out

        def both(*parts: Any) -> Any:
            loss = lambda *p: _scalar(m, fn(*full(p)), cts)
            return fn(*full(parts)), (grad(loss, nums)(*parts) if cts else ())

        return both

    theirs = _outcome(lambda: jax.jit(with_grad(jnp, ref, jax.grad))(*parts))
    if isinstance(theirs, Exception):  # JAX has no gradient here: values only
        theirs, ours_jit = (want, ()), sg.jit(lambda *p: (ours(*cargs), ()))
    else:
        ours_jit = sg.jit(with_grad(sg, ours, sg.grad))
    got = _outcome(lambda: ours_jit(*parts))
    if isinstance(got, Exception):  # the values alone, then the gradient's error
        _assert_same(_outcome(lambda: sg.jit(ours)(*cargs)), want, f"{name} (sg.jit)")
        assert isinstance(got, sg.GradientError) and _documented(got), f"{name} gradient: {got}"
        return
    _assert_same(got[0], theirs[0], f"{name} (sg.jit)")
    declared = [v.dtype for v in ours_jit.trace(*parts)[2]]
    assert declared == [x.dtype for x in _leaves(theirs)], (
        f"{name}: the program declares {declared}"
    )
    _assert_same(got[1], theirs[1], f"{name} gradient")


# ---------------------------------------------------------------- the tables


def _has_float(case: Any) -> bool:
    return any(any(d.kind == "f" for d in dts) for dts in case.variants)


DRAWN = [
    c
    for c in test_ops.CASES + test_manip.CASES + test_special.CASES
    if _has_float(c) and c.ours is not shape_ops.lax_pad
]  # (internal: no eager call)


def _variant(case: Any) -> tuple[np.dtype, ...]:
    """The case's dtype variant with the most float64 arguments (complex128: the tolerances
    stay tight)."""
    return max(
        (v for v in case.variants if any(d.kind == "f" for d in v)),
        key=lambda v: sum(d == np.float64 for d in v),
    )


@pytest.mark.parametrize("case", sliced(DRAWN, 4), ids=str)
@settings(max_examples=1)
@given(data=st.data())
def test_drawn_ops_on_complex_values(case: Any, data: st.DataObject) -> None:
    params, args = case.draw(data, _variant(case))
    check(
        case.name,
        lambda *xs: case.ours(*xs, **params),
        lambda *xs: case.ref(*xs, **params),
        args,
        eager=not case.name.startswith("methods"),
    )  # (on arrays: NumPy's methods)


def _fixed(table: str, case: Any) -> tuple[str, Callable, Callable, list]:
    """A case of a fixed-argument table as (name, ours, ref, args): arrays traced, the other
    arguments static."""
    if table == "jnp_extra":
        fn, args, ours_m, ref_m = case.fn, list(case.args), sg, jnp
    elif table == "nn":
        fn, args, ours_m, ref_m = case.fn, [case.x], sg.nn, jax.nn
    else:
        fn, args, ours_m, ref_m = case.fn, list(case.args()), sg, lax
    arrays = [i for i, a in enumerate(args) if isinstance(a, np.ndarray)]

    def bind(m: Any) -> Callable[..., Any]:
        def call(*xs: Any) -> Any:
            full = list(args)
            for i, x in zip(arrays, xs):
                full[i] = x
            return fn(m, *full)

        return call

    return case.name, bind(ours_m), bind(ref_m), [args[i] for i in arrays]


FIXED = [
    _fixed(t, c)
    for t, cases in (
        ("jnp_extra", test_jnp_extra.CASES),
        ("nn", test_nn_functions.CASES + test_nn_functions.ELEMENTWISE),
        ("conv", test_conv.CASES),
    )
    for c in cases
]
FIXED = [f for f in FIXED if any(a.dtype.kind == "f" for a in f[3])]


@pytest.mark.parametrize(
    "name,ours,ref,args", sliced(FIXED, 4, unpack=True), ids=[f[0] for f in FIXED]
)
def test_fixed_ops_on_complex_values(name: str, ours: Callable, ref: Callable, args: list) -> None:
    check(name, ours, ref, args)


@pytest.mark.parametrize(
    "dtype", ["float16", "bfloat16", "float32", "float64", "complex64", "int32", "bool"]
)
def test_python_complex_numbers_are_weakly_typed(dtype: str) -> None:
    """x OP 1.5j and 1.5j OP x take the complex type of x's precision (float32 -> complex64
    under x64 too), as jax.numpy's weak types do."""
    x = np.ones(3, jnp.dtype(dtype))
    for op in ("+", "-", "*", "/"):
        for fn in (
            lambda v: test_ops.BINARY_OPERATORS[op](v, 1.5j),
            lambda v: test_ops.BINARY_OPERATORS[op](1.5j, v),
        ):
            want = jax.eval_shape(fn, jax.ShapeDtypeStruct(x.shape, x.dtype)).dtype
            assert sg.jit(fn).trace(x)[2][0].dtype == want, (dtype, op)


PARTS = ["real", "imag", "conj", "conjugate", "angle", "isreal", "iscomplex", "abs"]


def test_the_parts_of_complex_values() -> None:
    """The issue's ops on complex64 and complex128 (real returned the input, imag zeros,
    conj the input, angle other values, isreal/iscomplex the inverse), eagerly and under
    sg.jit; their gradients through a real function, against jax.grad; iscomplexobj of a
    traced value."""
    for dt in (np.complex64, np.complex128):
        z = np.array([1 + 2j, -3 - 4j, 0.5j, -2.0, 0j], dt)
        for name in PARTS:
            want = getattr(jnp, name)(z)
            _assert_same(getattr(sg, name)(z), want, f"{name} eager")
            _assert_same(sg.jit(getattr(sg, name))(z), want, f"{name} sg.jit")
    assert sg.jit(lambda v: sg.full((), sg.iscomplexobj(v)))(z)
    x, y = np.array([0.3, -1.2, 2.0]), np.array([0.5, 0.7, -1.5])

    def loss(m: Any) -> Callable[..., Any]:
        def f(x: Any, y: Any) -> Any:
            z = x + y * 1j
            return m.sum(m.real(z * z) * 2.0 + m.imag(z) * m.real(z) + m.angle(z * x)) + m.sum(
                m.imag(m.conj(z) * (1 + 2j)) + m.abs(m.conjugate(z * z))
            )

        return f

    ours = sg.grad(loss(sg), (0, 1))(x, y)
    theirs = jax.grad(loss(jnp), (0, 1))(x, y)
    for g, w in zip(ours, theirs):
        np.testing.assert_allclose(g, w, rtol=1e-12)
