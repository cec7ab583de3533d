"""Bad arguments are refused up front with a clear error naming the user's line.

max_iters, declared input shapes, fetch names, Python truth values of traced values, a
forgotten has_aux, values leaked from another trace, and complex inputs/outputs (srcgrad
differentiates real functions only; jax.grad needs holomorphic=True for them).
"""

from __future__ import annotations

import os
from typing import Any, Callable

import jax
import numpy as np
import pytest

import srcgrad as sg

HERE = os.path.basename(__file__)


def _raises(exc: type[Exception], run: Callable[[], Any], *fragments: str) -> str:
    """Run `run`, expect `exc` located at the line of `run` itself (a one-line lambda)."""
    with pytest.raises(exc) as info:
        run()
    msg = str(info.value)
    assert isinstance(info.value, sg.SrcgradError)
    assert f"{HERE}:{run.__code__.co_firstlineno})" in msg, msg
    for frag in fragments:
        assert frag in msg, (frag, msg)
    return msg


# ---------------------------------------------------------------- max_iters


def _while(max_iters: Any) -> Callable[[Any], Any]:
    return lambda x: sg.while_loop(lambda s: s < 3.0, lambda s: s + 1.0, x, max_iters=max_iters)


def _fori(max_iters: Any) -> Callable[[Any], Any]:
    return lambda x: sg.fori_loop(0, 5, lambda i, s: s * x, x, max_iters=max_iters)


@pytest.mark.parametrize("bad", [2.5, "3", True, np.float64(3.0)])
@pytest.mark.parametrize("loop,op", [(_while, "while"), (_fori, "fori_loop")])
def test_max_iters_must_be_an_int(loop: Callable, op: str, bad: Any) -> None:
    with pytest.raises(
        sg.SrcgradError, match="max_iters must be a non-negative Python or NumPy int"
    ) as e:
        sg.grad(loop(bad))(1.0)
    assert e.value.op == op and e.value.loc.filename == __file__


@pytest.mark.parametrize("loop,op", [(_while, "while"), (_fori, "fori_loop")])
def test_max_iters_must_not_be_negative(loop: Callable, op: str) -> None:
    with pytest.raises(sg.SrcgradError, match="max_iters must be >= 0, got -1") as e:
        sg.grad(loop(-1))(1.0)
    assert e.value.op == op


@pytest.mark.parametrize("good", [2, np.int32(2), np.int64(2)])
def test_max_iters_accepts_python_and_numpy_ints(good: Any) -> None:
    # 1 -> 2 -> 3 stops by itself; the fori loop is cut at 2 iterations: x**3, derivative 3x**2.
    assert float(sg.jit(_while(good))(1.0)) == 3.0
    np.testing.assert_allclose(sg.grad(_fori(good))(1.5), 3 * 1.5**2)


# ---------------------------------------------------------------- sg.data / sg.parameter shapes


@pytest.mark.parametrize("shape", [(None, 3), (-1, 3), (2.5,), (True, 2), None, "ab"])
@pytest.mark.parametrize("declare", [sg.data, sg.parameter])
def test_input_shape_must_be_static_non_negative_ints(declare: Callable, shape: Any) -> None:
    prog = sg.Program()
    with sg.program_guard(prog):
        run = lambda: declare("x", shape)
        _raises(sg.TraceError, run, "'x'", f"has shape {shape!r}", "non-negative int")
        assert prog.inputs == []  # nothing was declared: the name is still free
        assert declare("x", (2, 3)).shape == (2, 3)


def test_input_shape_accepts_numpy_ints_and_an_int() -> None:
    with sg.program_guard(sg.Program()):
        assert sg.data("a", (np.int64(4), 3)).shape == (4, 3)
        assert sg.parameter("b", 5).shape == (5,)


# ---------------------------------------------------------------- compile(fetch=names)


def test_compile_fetches_by_name_as_by_variable() -> None:
    prog = sg.Program()
    with sg.program_guard(prog):
        x = sg.data("x", (4, 3), "float64")
        w = sg.parameter("w", (3, 2), "float64")
        loss = sg.mean(sg.tanh(x @ w))
        ((_, w_grad),) = sg.append_backward(loss)
    xv, wv = np.linspace(-1, 1, 12).reshape(4, 3), np.full((3, 2), 0.3)
    by_var = sg.compile(prog, feed=[x, w], fetch=[loss, w_grad])(xv, wv)
    by_name = sg.compile(prog, feed=["x", "w"], fetch=[loss.name, "w@GRAD"])(xv, wv)
    mixed = sg.compile(prog, feed=["x", "w"], fetch=[loss, "w@GRAD", "x"])(xv, wv)
    want = jax.value_and_grad(lambda w: jax.numpy.mean(jax.numpy.tanh(xv @ w)))(wv)
    for got in (by_var, by_name, mixed[:2]):
        np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(mixed[2], xv)
    run = lambda: sg.compile(prog, feed=["x", "w"], fetch=["no_such_value"])
    _raises(sg.SrcgradError, run, "fetch 'no_such_value' is not a value")


# ---------------------------------------------------------------- error messages


def test_truth_value_of_a_traced_value_names_the_line() -> None:
    # converted by default (srcgrad.convert); no_convert keeps Python's truth test
    run = lambda: sg.grad(sg.no_convert(lambda x: x if x > 0 else -x))(1.0)
    _raises(sg.TraceError, run, "has no Python truth value", "sg.cond")
    assert sg.grad(lambda x: x if x > 0 else -x)(-1.0) == -1.0


def test_forgotten_has_aux_hints_at_it() -> None:
    def loss_aux(x: Any) -> Any:
        return sg.sum(x * x), x

    for transform in (sg.grad, sg.value_and_grad):
        run = lambda: transform(loss_aux)(np.ones(3))
        _raises(sg.GradientError, run, "returned a tuple of 2 values", "has_aux=True")
    g, aux = sg.grad(loss_aux, has_aux=True)(np.ones(3))
    np.testing.assert_allclose(g, 2 * np.ones(3))


def test_value_from_an_earlier_trace_says_it_belongs_to_another_trace() -> None:
    leaked = []

    def keep(x: Any) -> Any:
        leaked.append(x * 2.0)
        return sg.sum(x)

    sg.grad(keep)(np.ones(2))
    run = lambda: sg.grad(lambda x: sg.sum(x * leaked[0]))(np.ones(2))
    msg = _raises(sg.TraceError, run, "belongs to another trace", "pass it as an argument")
    assert "escaped" not in msg


def test_value_escaping_a_loop_body_still_says_so() -> None:
    inner = []

    def f(x: Any) -> Any:
        sg.fori_loop(0, 2, lambda i, s: inner.append(s * 2.0) or s, x)
        return inner[0] + x

    with pytest.raises(sg.TraceError, match="escaped through a Python variable"):
        sg.jit(f)(1.0)


# ---------------------------------------------------------------- complex inputs and outputs


def _sum_sq(z: Any, y: Any) -> Any:
    return sg.sum(z * z) + y


def test_complex_input_to_grad_names_the_parameter() -> None:
    z = np.array([1 + 2j, 3 - 1j])
    for transform in (sg.grad, sg.value_and_grad):
        run = lambda: transform(_sum_sq)(z, 1.0)
        _raises(sg.GradientError, run, "argument 0 ('z') is complex", "c128[2]")
    run = lambda: sg.grad(_sum_sq, argnums=(1, 0))(z, 1.0)
    _raises(sg.GradientError, run, "argument 0 ('z') is complex")
    # A complex argument that is not differentiated is fine.
    np.testing.assert_allclose(sg.grad(lambda y, z: y * 2.0)(3.0, z), 2.0)


def test_complex_input_to_vjp_raises_at_vjp_time() -> None:
    run = lambda: sg.vjp(_sum_sq, np.array([1j, 2.0]), 1.0)
    _raises(sg.GradientError, run, "vjp requires floating-point inputs", "argument 0 ('z')")


def test_complex_output_is_refused() -> None:
    run = lambda: sg.grad(lambda x: sg.sum(x) * 1j)(np.ones(2))
    _raises(sg.GradientError, run, "real floating-point output", "c128[]")
    run = lambda: sg.vjp(lambda x: x * 1j, np.ones(2))
    _raises(sg.GradientError, run, "output is complex")


def test_complex_inside_a_trace_is_refused_too() -> None:
    def outer(x: Any) -> Any:
        z = x * (1 + 1j)
        return sg.sum(sg.grad(lambda z: sg.sum(z * z).astype("float64"))(z))

    with pytest.raises(sg.GradientError, match="is complex"):
        sg.jit(outer)(np.ones(2))


# ---------------------------------------------------------------- target_gradients (docs/api.md)


def test_non_scalar_target_needs_a_head_gradient_and_ones_like_gives_fluids_seed() -> None:
    prog = sg.Program()
    with sg.program_guard(prog):
        x = sg.parameter("x", (2, 3), "float64")
        y = sg.tanh(x) * 2.0
        run = lambda: sg.gradients([y], [x])
        _raises(sg.GradientError, run, "is not a scalar", "target_gradients")
        [gx] = sg.gradients([y], [x], target_gradients=[sg.ones_like(y)])
    xv = np.linspace(-1.0, 1.0, 6).reshape(2, 3)
    (got,) = sg.compile(prog, feed=["x"], fetch=[gx])(xv)
    want = jax.grad(lambda x: jax.numpy.sum(jax.numpy.tanh(x) * 2.0))(xv)
    np.testing.assert_allclose(got, want, rtol=1e-12)
