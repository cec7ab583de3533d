"""The Fluid-style program API: Program, program_guard, data, parameter, append_backward,
compile."""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import srcgrad as sg
from srcgrad.core.registry import REGISTRY

RNG = np.random.default_rng(4)
HERE = os.path.basename(__file__)


def arr(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape)


def next_line() -> int:
    """The line number after the caller's line (where the statement under test sits)."""
    return sys._getframe(1).f_lineno + 1


def raises_at(exc: type[Exception], line: int, *fragments: str) -> Callable[[Exception], None]:
    """A check that an error names the user's file:line and says each of `fragments`."""

    def check(e: Exception) -> None:
        assert isinstance(e, exc), e
        assert f"{HERE}:{line}" in str(e), str(e)
        for frag in fragments:
            assert frag in str(e), str(e)

    return check


def build_regression() -> tuple[sg.Program, dict[str, Any]]:
    prog = sg.Program()
    with sg.program_guard(prog):
        x = sg.data("x", shape=(4, 3), dtype="float64")
        y = sg.data("y", shape=(4, 1), dtype="float64")
        w = sg.parameter("w", shape=(3, 1), dtype="float64")
        b = sg.parameter("b", shape=(1,), dtype="float64")
        loss = sg.mean(sg.square(sg.tanh(x @ w + b) - y))
    return prog, {"x": x, "y": y, "w": w, "b": b, "loss": loss}


def regression_twin(w: Any, b: Any, x: Any, y: Any) -> Any:
    return jnp.mean(jnp.square(jnp.tanh(x @ w + b) - y))


# ---------------------------------------------------------------- building and running


def test_data_and_parameter_declare_inputs() -> None:
    prog, v = build_regression()
    assert [(i.name, i.kind) for i in prog.inputs] == [
        ("x", "data"),
        ("y", "data"),
        ("w", "param"),
        ("b", "param"),
    ]
    assert v["x"].stop_gradient and v["y"].stop_gradient
    assert not v["w"].stop_gradient and not v["b"].stop_gradient
    assert v["x"].shape == (4, 3) and v["x"].dtype == np.float64
    assert v["loss"].shape == ()


def test_append_backward_and_compile_run_the_program() -> None:
    prog, v = build_regression()
    with sg.program_guard(prog):
        pairs = sg.append_backward(v["loss"])
    prog.verify()
    assert [(p.name, g.name) for p, g in pairs] == [("w", "w@GRAD"), ("b", "b@GRAD")]
    xv, yv, wv, bv = arr(4, 3), arr(4, 1), arr(3, 1), arr(1)
    fetch = [v["loss"]] + [g for _, g in pairs]
    want_loss = regression_twin(wv, bv, xv, yv)
    want = jax.grad(regression_twin, argnums=(0, 1))(wv, bv, xv, yv)
    for jit in (True, False):
        run = sg.compile(prog, feed=["x", "y", "w", "b"], fetch=fetch, jit=jit)
        loss, gw, gb = run(xv, yv, wv, bv)
        np.testing.assert_allclose(loss, want_loss, rtol=1e-12)
        np.testing.assert_allclose(gw, want[0], rtol=1e-12)
        np.testing.assert_allclose(gb, want[1], rtol=1e-12)
    reordered = sg.compile(prog, feed=[v["b"], "w", v["y"], "x"], fetch=fetch[1:])
    for a, b in zip(reordered(bv, wv, yv, xv), want):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    assert "def " in reordered.source and "# grad of tanh" in reordered.source


def test_gradients_in_a_program() -> None:
    prog, v = build_regression()
    with sg.program_guard(prog):
        gw, gb = sg.gradients(v["loss"], [v["w"], v["b"]])
    prog.verify()
    xv, yv, wv, bv = arr(4, 3), arr(4, 1), arr(3, 1), arr(1)
    got = sg.compile(prog, ["x", "y", "w", "b"], [gw, gb])(xv, yv, wv, bv)
    want = jax.grad(regression_twin, argnums=(0, 1))(wv, bv, xv, yv)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_program_guard_nests_and_restores() -> None:
    outer, inner = sg.Program(), sg.Program()
    with sg.program_guard(outer):
        a = sg.parameter("a", (2,), "float64")
        with sg.program_guard(inner):
            b = sg.parameter("b", (2,), "float64")
            sg.exp(b)
        c = sg.exp(a)
    assert a.block.program is outer and c.block.program is outer
    assert b.block.program is inner
    assert [op.type for op in outer.global_block().ops] == ["exp"]
    assert [op.type for op in inner.global_block().ops] == ["exp"]


def test_declaring_inputs_needs_a_program_and_unique_names() -> None:
    with pytest.raises(sg.TraceError, match="program_guard"):
        sg.parameter("w", (2,), "float64")
    with sg.program_guard(sg.Program()):
        sg.data("x", (2,), "float64")
        with pytest.raises(sg.TraceError, match="already has an input named 'x'"):
            sg.parameter("x", (2,), "float64")


# ---------------------------------------------------------------- errors


def test_non_scalar_loss_without_target_gradients_raises_at_the_user_line() -> None:
    prog = sg.Program()
    with sg.program_guard(prog):
        x = sg.parameter("x", (4, 3), "float64")
        y = sg.tanh(x)
        with pytest.raises(sg.GradientError) as info:
            line = next_line()
            sg.append_backward(y)
        raises_at(sg.GradientError, line, "scalar", "f64[4,3]")(info.value)
        with pytest.raises(sg.GradientError) as info:
            line = next_line()
            sg.gradients([y], [x])
        raises_at(sg.GradientError, line, "not a scalar", "target_gradients")(info.value)
        [gx] = sg.gradients([y], [x], target_gradients=[np.ones((4, 3))])
        assert gx.shape == (4, 3)


def test_target_gradients_must_match_the_targets() -> None:
    with sg.program_guard(sg.Program()):
        x = sg.parameter("x", (3,), "float64")
        y, z = sg.sin(x), sg.sum(x)
        with pytest.raises(sg.GradientError, match="2 target gradients for 1 targets"):
            sg.gradients([y], [x], target_gradients=[np.ones(3), np.ones(3)])
        with pytest.raises(sg.GradientError, match="1 target gradients for 2 targets"):
            sg.gradients([y, z], [x], target_gradients=[np.ones(3)])
        with pytest.raises(sg.GradientError, match=r"shape \(2,\), expected \(3,\)"):
            sg.gradients([y], [x], target_gradients=[np.ones(2)])


def test_values_not_in_the_program_are_not_in_a_computational_graph() -> None:
    other = sg.Program()
    with sg.program_guard(other):
        foreign = sg.parameter("foreign", (3,), "float64")
        foreign_loss = sg.sum(foreign)
    prog = sg.Program()
    with sg.program_guard(prog):
        x = sg.parameter("x", (3,), "float64")
        loss = sg.sum(sg.exp(x))
        for call in (
            lambda: sg.gradients([loss], [foreign]),
            lambda: sg.gradients([foreign_loss], [x]),
            lambda: sg.gradients([loss], [np.ones(3)]),
            lambda: sg.gradients([loss, foreign_loss], [x]),
            lambda: sg.append_backward(np.float64(1.0)),
        ):
            with pytest.raises(
                sg.GradientError, match="not in a computational graph|different programs"
            ):
                call()
    leaked = []
    sg.grad(lambda a: leaked.append(sg.sin(a)) or sg.sum(a))(np.ones(2))
    with pytest.raises(sg.GradientError) as info:  # a value of a finished trace
        line = next_line()
        sg.append_backward(leaked[0])
    raises_at(sg.GradientError, line, "not in a computational graph")(info.value)
    with pytest.raises(sg.GradientError, match="not in a computational graph"):
        sg.gradients(leaked, [x])


# ---------------------------------------------------------------- Fluid: the loss's program


def test_append_backward_after_the_guard_appends_to_the_loss_program() -> None:
    prog, v = build_regression()
    pairs = sg.append_backward(v["loss"])  # the guard has exited, as in Fluid scripts
    prog.verify()
    assert [(p.name, g.name) for p, g in pairs] == [("w", "w@GRAD"), ("b", "b@GRAD")]
    assert all(g.block is prog.global_block() for _, g in pairs)
    xv, yv, wv, bv = arr(4, 3), arr(4, 1), arr(3, 1), arr(1)
    got = sg.compile(prog, ["x", "y", "w", "b"], [g for _, g in pairs])(xv, yv, wv, bv)
    want = jax.grad(regression_twin, argnums=(0, 1))(wv, bv, xv, yv)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_gradients_outside_any_guard_and_inside_another_programs_guard() -> None:
    prog, v = build_regression()
    [gw] = sg.gradients(v["loss"], [v["w"]])
    other = sg.Program()
    with sg.program_guard(other):
        sg.parameter("z", (2,), "float64")
        [gb] = sg.gradients([v["loss"]], [v["b"]])
        pairs = sg.append_backward(v["loss"], parameter_list=["w"])
    assert not other.global_block().ops and [v.name for v in other.inputs] == ["z"]
    assert gw.block is gb.block is pairs[0][1].block is prog.global_block()
    prog.verify()
    xv, yv, wv, bv = arr(4, 3), arr(4, 1), arr(3, 1), arr(1)
    got = sg.compile(prog, ["x", "y", "w", "b"], [gw, gb, pairs[0][1]])(xv, yv, wv, bv)
    want = jax.grad(regression_twin, argnums=(0, 1))(wv, bv, xv, yv)
    for a, b in zip(got, [want[0], want[1], want[0]]):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_non_scalar_loss_after_the_guard_is_reported_as_such() -> None:
    prog = sg.Program()
    with sg.program_guard(prog):
        x = sg.parameter("x", (4, 3), "float64")
        y = sg.tanh(x)
    with pytest.raises(sg.GradientError) as info:
        line = next_line()
        sg.append_backward(y)
    raises_at(sg.GradientError, line, "must be a scalar", "f64[4,3]")(info.value)
    with pytest.raises(sg.GradientError) as info:
        line = next_line()
        sg.gradients(y, x)
    raises_at(sg.GradientError, line, "not a scalar", "target_gradients")(info.value)


def test_gradient_of_inputs_that_take_no_gradient() -> None:
    """sg.data (stop_gradient) gives None, as does no_grad_set; an int input raises."""
    prog = sg.Program()
    with sg.program_guard(prog):
        x = sg.data("x", (4, 3), "float64")
        n = sg.data("n", (3,), "int32")
        w = sg.parameter("w", (3, 2), "float64")
        loss = sg.sum(sg.tanh(x @ w) * sg.sum(n.astype("float64")))
        gx, gw = sg.gradients(loss, [x, w])
        assert gx is None and gw is not None
        assert sg.gradients(loss, [w], no_grad_set=[w]) == [None]
        pairs = sg.append_backward(loss, parameter_list=["x", "w"])
        assert [p.name for p, _ in pairs] == ["w"]
        with pytest.raises(sg.GradientError) as info:
            line = next_line()
            sg.gradients(loss, [n])
        raises_at(sg.GradientError, line, "n: i32[3]", "floating-point")(info.value)
        with pytest.raises(sg.GradientError, match="'nope' is not an input"):
            sg.append_backward(loss, parameter_list=["nope"])
    prog.verify()


def test_op_without_grad_maker_on_the_path_raises_naming_the_op(monkeypatch: Any) -> None:
    """Every op of the set that outputs floats has a grad maker; remove sin's to see the error."""
    monkeypatch.setitem(REGISTRY, "sin", dataclasses.replace(REGISTRY["sin"], grad=None))
    with sg.program_guard(sg.Program()):
        x = sg.parameter("x", (3,), "float64")
        line = next_line()
        loss = sg.sum(sg.sin(x)) + sg.sum(sg.exp(x))
        with pytest.raises(sg.GradientError) as info:
            sg.append_backward(loss)
        raises_at(sg.GradientError, line, "sin", "has no gradient", "f64[3]")(info.value)
        assert info.value.op == "sin"
    with sg.program_guard(sg.Program()):
        x = sg.parameter("x", (3,), "float64")
        loss = sg.sum(sg.stop_gradient(sg.sin(x))) + sg.sum(sg.exp(x))
        [(_, g)] = sg.append_backward(loss)
        assert g.shape == (3,)


def test_op_without_grad_maker_off_the_path_is_fine() -> None:
    """Comparisons have no grad maker; they feed a `where` but lie on no differentiated path."""
    prog = sg.Program()
    with sg.program_guard(prog):
        x = sg.parameter("x", (5,), "float64")
        loss = sg.sum(sg.where(x > 0.0, x * x, -x))
        [(_, g)] = sg.append_backward(loss)
    prog.verify()
    xv = arr(5)
    np.testing.assert_allclose(sg.compile(prog, ["x"], [g])(xv)[0], np.where(xv > 0, 2 * xv, -1.0))


def test_compile_errors_name_the_feed() -> None:
    prog, v = build_regression()
    with sg.program_guard(prog):
        pairs = sg.append_backward(v["loss"])
    fetch = [v["loss"]] + [g for _, g in pairs]
    with pytest.raises(sg.SrcgradError, match="'z' is not an input"):
        sg.compile(prog, feed=["z"], fetch=fetch)
    with pytest.raises(sg.SrcgradError, match=r"need the inputs \['x', 'y'\]"):
        sg.compile(prog, feed=["w", "b"], fetch=fetch)
    with pytest.raises(sg.SrcgradError, match="fetch None"):
        sg.compile(prog, feed=["x", "y", "w", "b"], fetch=[None])
    run = sg.compile(prog, feed=["x", "y", "w", "b"], fetch=fetch)
    with pytest.raises(sg.SrcgradError, match=r"feed w is declared f64\[3,1\]"):
        run(arr(4, 3), arr(4, 1), arr(3, 2), arr(1))
    with pytest.raises(sg.SrcgradError, match="got 3 arrays"):
        run(arr(4, 3), arr(4, 1), arr(3, 1))
