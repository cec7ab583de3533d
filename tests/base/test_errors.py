"""Bad programs raise a srcgrad exception naming the op, the shapes/dtypes and the user's line.

Every offending call sits on the line after a `def` (or on a `lambda`'s own line), so the
expected line number comes from the function's code object, and the test asserts that
`test_errors.py:<line>` appears in the message.
"""

from __future__ import annotations

import os
from typing import Any, Callable

import numpy as np
import pytest

import srcgrad as sg

A23 = np.ones((2, 3))
A24 = np.ones((2, 4))
S = np.float64(1.5)
HERE = os.path.basename(__file__)


def _line_of(fn: Callable[..., Any]) -> int:
    """The line of the offending call: a lambda's own line, else the line after `def`."""
    first = fn.__code__.co_firstlineno
    return first if fn.__name__ == "<lambda>" else first + 1


def _expect(
    exc: type[sg.SrcgradError], run: Callable[[], Any], line: int, op: str | None, *fragments: str
) -> sg.SrcgradError:
    with pytest.raises(exc) as info:
        run()
    err, msg = info.value, str(info.value)
    assert isinstance(err, sg.SrcgradError)
    if op is not None:
        assert err.op == op and msg.startswith(f"{op}: "), msg
    assert f"{HERE}:{line})" in msg, msg
    assert err.loc is not None and err.loc.lineno == line and err.loc.filename == __file__
    for frag in fragments:
        assert frag in msg, (frag, msg)
    return err


# ---------------------------------------------------------------- shapes of ordinary ops


def _add_operator(x: Any, y: Any) -> Any:
    return sg.tanh(x) + y


def _add_function(x: Any, y: Any) -> Any:
    return sg.add(x, y)


def _matmul(x: Any, y: Any) -> Any:
    return x @ y


@pytest.mark.parametrize(
    "fn,op", [(_add_operator, "add"), (_add_function, "add"), (_matmul, "matmul")]
)
def test_binary_shape_mismatch(fn: Callable[..., Any], op: str) -> None:
    err = _expect(
        sg.ShapeError,
        lambda: sg.trace(fn, A23, A24),
        _line_of(fn),
        op,
        "f64[2,3]",
        "f64[2,4]",
        "(2, 3)",
        "(2, 4)",
    )
    assert "inputs:" in str(err)


def test_shape_error_in_compiled_call_points_at_user_line() -> None:
    _expect(
        sg.ShapeError,
        lambda: sg.jit(_add_function)(A23, A24),
        _line_of(_add_function),
        "add",
        "f64[2,3]",
        "f64[2,4]",
    )
    _expect(
        sg.ShapeError,
        lambda: sg.grad(lambda x, y: sg.sum(_matmul(x, y)))(A23, A24),
        _line_of(_matmul),
        "matmul",
        "f64[2,3]",
        "f64[2,4]",
    )


def _sum_axis(x: Any) -> Any:
    return sg.sum(x, axis=2)


def _mean_axis(x: Any) -> Any:
    return sg.mean(x, axis=-3)


def _softmax_axis(x: Any) -> Any:
    return sg.softmax(x, axis=5)


def _method_axis(x: Any) -> Any:
    return x.max(axis=(0, 4))


@pytest.mark.parametrize(
    "fn,op,axis",
    [
        (_sum_axis, "sum", "axis 2"),
        (_mean_axis, "mean", "axis -3"),
        (_softmax_axis, "softmax", "axis 5"),
        (_method_axis, "max", "axis 4"),
    ],
)
def test_bad_axis(fn: Callable[..., Any], op: str, axis: str) -> None:
    _expect(
        sg.ShapeError,
        lambda: sg.trace(fn, A23),
        _line_of(fn),
        op,
        axis,
        "out of bounds",
        "rank 2",
        "f64[2,3]",
    )


def _reshape(x: Any) -> Any:
    return sg.reshape(x, (4, 2))


def _reshape_method(x: Any) -> Any:
    return x.reshape(5, -1)


@pytest.mark.parametrize("fn,target", [(_reshape, "(4, 2)"), (_reshape_method, "(5, -1)")])
def test_reshape_to_incompatible_size(fn: Callable[..., Any], target: str) -> None:
    _expect(sg.ShapeError, lambda: sg.trace(fn, A23), _line_of(fn), "reshape", "f64[2,3]", target)


def _index_row(x: Any) -> Any:
    return x[5]


def _index_col(x: Any) -> Any:
    return x[0, -4]


def _index_too_many(x: Any) -> Any:
    return x[0, 1, 2]


@pytest.mark.parametrize(
    "fn,what",
    [
        (_index_row, "index 5 is out of bounds for axis 0 of size 2"),
        (_index_col, "index -4 is out of bounds for axis 1 of size 3"),
        (_index_too_many, "too many indices (3)"),
    ],
)
def test_indexing_out_of_bounds(fn: Callable[..., Any], what: str) -> None:
    _expect(sg.ShapeError, lambda: sg.trace(fn, A23), _line_of(fn), "getitem", what, "f64[2,3]")


# ---------------------------------------------------------------- control flow


def _cond_structures(x: Any) -> Any:
    return sg.cond(sg.sum(x) > 0.0, lambda v: (v, v), lambda v: v, x)


def test_cond_branches_return_different_structures() -> None:
    _expect(
        sg.SrcgradError,
        lambda: sg.trace(_cond_structures, A23),
        _line_of(_cond_structures),
        "cond",
        "different structures",
        "(*, *)",
    )


def _cond_shapes(x: Any) -> Any:
    return sg.cond(sg.sum(x) > 0.0, lambda v: v, lambda v: v[0], x)


def _cond_dtypes(x: Any) -> Any:
    return sg.cond(sg.sum(x) > 0.0, lambda v: v, lambda v: v.astype("float32"), x)


@pytest.mark.parametrize("fn,false_type", [(_cond_shapes, "f64[3]"), (_cond_dtypes, "f32[2,3]")])
def test_cond_branches_return_different_shapes(fn: Callable[..., Any], false_type: str) -> None:
    _expect(
        sg.SrcgradError,
        lambda: sg.trace(fn, A23),
        _line_of(fn),
        "cond",
        "different shapes or dtypes",
        "true (f64[2,3])",
        f"false ({false_type})",
    )


def _loop_grows(x: Any) -> Any:
    return sg.while_loop(lambda v: sg.sum(v) < 100.0, lambda v: sg.concatenate([v, v]), x)


def _loop_casts(x: Any) -> Any:
    return sg.while_loop(lambda v: sg.sum(v) < 100.0, lambda v: (v * 2).astype("float32"), x)


def _fori_grows(x: Any) -> Any:
    return sg.fori_loop(0, 3, lambda i, v: sg.sum(v, axis=0), x)


@pytest.mark.parametrize(
    "fn,returned", [(_loop_grows, "f64[4,3]"), (_loop_casts, "f32[2,3]"), (_fori_grows, "f64[3]")]
)
def test_loop_body_changes_carried_shape(fn: Callable[..., Any], returned: str) -> None:
    _expect(
        sg.SrcgradError,
        lambda: sg.trace(fn, A23),
        _line_of(fn),
        "while",
        "changes the shape or dtype of its carried state",
        "f64[2,3]",
        returned,
    )


def _cond_vector_pred(x: Any) -> Any:
    return sg.cond(x > 0.0, lambda v: v, lambda v: -v, x)


def _cond_float_pred(x: Any) -> Any:
    return sg.cond(sg.sum(x), lambda v: v, lambda v: -v, x)


def _while_vector_pred(x: Any) -> Any:
    return sg.while_loop(lambda v: v < 10.0, lambda v: v + 1.0, x)


def _while_float_pred(x: Any) -> Any:
    return sg.while_loop(lambda v: sg.sum(v), lambda v: v + 1.0, x)


@pytest.mark.parametrize(
    "fn,op,got",
    [
        (_cond_vector_pred, "cond", "bool[2,3]"),
        (_cond_float_pred, "cond", "f64[]"),
        (_while_vector_pred, "while", "bool[2,3]"),
        (_while_float_pred, "while", "f64[]"),
    ],
)
def test_predicate_must_be_a_bool_scalar(fn: Callable[..., Any], op: str, got: str) -> None:
    _expect(sg.SrcgradError, lambda: sg.trace(fn, A23), _line_of(fn), op, "bool scalar", got)


def _bad_op_in_loop_body(x: Any) -> Any:
    def body(v: Any) -> Any:
        return v + sg.ones((4,))

    return sg.while_loop(lambda v: sg.sum(v) < 10.0, body, x)


def test_shape_error_inside_a_loop_body_points_at_the_body_line() -> None:
    line = _bad_op_in_loop_body.__code__.co_firstlineno + 2
    _expect(
        sg.ShapeError,
        lambda: sg.trace(_bad_op_in_loop_body, A23),
        line,
        "add",
        "f64[2,3]",
        "f64[4]",
    )


# ---------------------------------------------------------------- gradients


def _elementwise(x: Any) -> Any:
    return x * 2.0


def _scalar(x: Any) -> Any:
    return sg.sum(x * 2.0)


def test_grad_of_non_scalar_loss() -> None:
    run = lambda: sg.grad(_elementwise)(A23)
    _expect(sg.GradientError, run, _line_of(run), None, "grad needs a scalar output", "f64[2,3]")
    run = lambda: sg.value_and_grad(_elementwise)(A23)
    _expect(
        sg.GradientError,
        run,
        _line_of(run),
        None,
        "value_and_grad needs a scalar output",
        "f64[2,3]",
    )
    run = lambda: sg.trace(sg.grad(_elementwise), A23)
    _expect(sg.GradientError, run, _line_of(run), None, "grad needs a scalar output", "f64[2,3]")


def test_grad_with_respect_to_an_int_input() -> None:
    ints = np.arange(3)
    run = lambda: sg.grad(_scalar)(ints)
    _expect(
        sg.GradientError,
        run,
        _line_of(run),
        None,
        "grad requires floating-point inputs",
        "argument 0",
        "i64[3]",
    )
    run = lambda: sg.grad(lambda x, n: sg.sum(x) * n, (0, 1))(A23, np.int64(3))
    _expect(sg.GradientError, run, _line_of(run), None, "argument 1", "i64[]")


def test_errors_are_srcgrad_errors_not_jax_tracebacks() -> None:
    for exc in (sg.ShapeError, sg.GradientError, sg.TraceError, sg.VerifyError):
        assert issubclass(exc, sg.SrcgradError)
    with pytest.raises(sg.SrcgradError):
        sg.grad(_matmul)(A23, A24)
