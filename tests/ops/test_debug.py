"""sg.debug.print / sg.debug.breakpoint: printing inside traced code at run time.

The print is an effectful op: dead code elimination keeps it (it has no outputs), loop-
invariant hoisting leaves it in its loop, CSE does not merge two alike prints, and neither
the gradient nor forward mode repeats it. The format string never enters generated source.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import srcgrad as sg


def _printed(capfd: pytest.CaptureFixture, fn: Any, *args: Any) -> tuple[Any, list[str]]:
    capfd.readouterr()
    out = fn(*args)
    jax.block_until_ready(out)
    jax.effects_barrier()
    return out, capfd.readouterr().out.splitlines()


def test_print_under_jit_positional_and_keyword(capfd: pytest.CaptureFixture) -> None:
    def f(x: Any) -> Any:
        sg.debug.print("x={x} first={}", x[0], x=x)
        return x * 2.0

    out, lines = _printed(capfd, sg.jit(f), np.array([1.5, 2.0]))
    assert lines == ["x=[1.5 2. ] first=1.5"]
    np.testing.assert_array_equal(out, [3.0, 4.0])


def _loop_loss(m: Any, x: Any) -> Any:
    def body(i: Any, c: Any) -> Any:
        if m is sg:
            sg.debug.print("i={} x={}", i, x)  # loop-invariant x: stays in the loop
        return c * m.sin(c)

    fori = sg.fori_loop if m is sg else jax.lax.fori_loop
    return m.sum(fori(0, 3, body, x))


def test_print_in_a_loop_under_grad_prints_each_iteration_once(
    capfd: pytest.CaptureFixture,
) -> None:
    x = np.array([0.3, 0.7])
    g, lines = _printed(capfd, sg.grad(lambda v: _loop_loss(sg, v)), x)
    assert sorted(lines) == [f"i={i} x=[0.3 0.7]" for i in range(3)]
    np.testing.assert_allclose(g, jax.grad(lambda v: _loop_loss(jnp, v))(x), rtol=1e-12)


def test_print_in_a_while_loop_with_a_data_dependent_trip_count(
    capfd: pytest.CaptureFixture,
) -> None:
    def f(x: Any) -> Any:
        def body(c: Any) -> Any:
            sg.debug.print("c={}", c)
            return c * 2.0

        return sg.while_loop(lambda c: c < 5.0, body, x) * x

    g, lines = _printed(capfd, sg.grad(f), np.array(1.5))
    assert sorted(lines) == ["c=1.5", "c=3.0"]
    assert float(g) == pytest.approx(2 * 1.5 * 4.0)


def test_print_in_a_branch_prints_only_the_taken_side(capfd: pytest.CaptureFixture) -> None:
    def f(x: Any) -> Any:
        def yes(v: Any) -> Any:
            sg.debug.print("yes {}", v)
            return v * v

        def no(v: Any) -> Any:
            sg.debug.print("no {}", v)
            return -v

        return sg.cond(x > 0, yes, no, x)

    _, lines = _printed(capfd, sg.jit(f), np.array(2.0))
    assert lines == ["yes 2.0"]
    g, lines = _printed(capfd, sg.grad(f), np.array(-3.0))
    assert lines == ["no -3.0"] and float(g) == -1.0


def test_alike_and_unused_prints_all_run(capfd: pytest.CaptureFixture) -> None:
    """No CSE of two alike prints; a print of a value nothing else reads is not dead code."""

    def f(x: Any) -> Any:
        unused = sg.exp(x)
        sg.debug.print("v {}", unused)
        sg.debug.print("v {}", unused)
        return x + 1.0

    _, lines = _printed(capfd, sg.jit(f), np.array(0.0))
    assert lines == ["v 1.0", "v 1.0"]
    src = sg.source(sg.jit(f), np.array(0.0))
    assert src.count("jax.debug.print(") == 2


def test_forward_mode_does_not_repeat_the_print(capfd: pytest.CaptureFixture) -> None:
    x = np.array([0.3, 0.7])
    (out, tangent), lines = _printed(
        capfd, lambda: sg.jvp(lambda v: _loop_loss(sg, v), (x,), (np.ones(2),))
    )
    assert sorted(lines) == [f"i={i} x=[0.3 0.7]" for i in range(3)]
    want = jax.jvp(lambda v: _loop_loss(jnp, v), (x,), (np.ones(2),))
    np.testing.assert_allclose([out, tangent], want, rtol=1e-12)


def test_the_format_string_never_enters_the_source(capfd: pytest.CaptureFixture) -> None:
    fmt = "{}\")\nimport os; os.system('echo pwned')  # '''"

    def f(x: Any) -> Any:
        sg.debug.print(fmt, x)
        return x

    src = sg.source(sg.jit(f), np.array(1.0))
    assert "os.system" not in src and "_consts[" in src
    _, lines = _printed(capfd, sg.jit(f), np.array(1.0))
    assert "\n".join(lines) == fmt.format(1.0)


def test_bad_keyword_names_are_refused() -> None:
    with pytest.raises(sg.TraceError, match="keyword"):
        sg.jit(lambda x: sg.debug.print("{}", **{"a b": x}) or x)(np.array(1.0))


def test_a_format_string_that_does_not_fit_is_refused_at_the_users_line() -> None:
    """A name or position the format string has no value for, or a spec the arrays refuse:
    a TraceError naming the format string at trace time (a KeyError from the compiled call
    before), and the same for an eager print."""
    x = np.ones(2)
    cases = [
        (lambda v: sg.debug.print("value {y}", x=v), "KeyError: 'y'"),
        (lambda v: sg.debug.print("{} {}", v), "IndexError"),
        (lambda v: sg.debug.print("{:.2f}", v), "TypeError"),
    ]
    for call, why in cases:
        for run in (sg.jit(lambda v: call(v) or v), call):
            with pytest.raises(
                sg.TraceError,
                match=r"the format string .* does not fit its "
                rf"arguments .*{why}.*\(at .*test_debug.py:\d+\)",
            ):
                run(x)


def test_eager_print_on_arrays_and_tensors(capfd: pytest.CaptureFixture) -> None:
    _, lines = _printed(
        capfd, lambda: sg.debug.print("a={a} t={}", sg.tensor(np.array([1.0])), a=np.arange(2))
    )
    assert lines == ["a=[0 1] t=[1.]"]


def test_breakpoint_is_lowered_under_grad() -> None:
    """Only lowered (not run: it would wait for a debugger)."""

    def f(x: Any) -> Any:
        y = sg.sin(x)
        sg.debug.breakpoint()
        return sg.sum(y)

    src = sg.source(sg.grad(f), np.ones(2))
    assert src.count("jax.debug.breakpoint()") == 1


def test_from_jax_keeps_jax_debug_print(capfd: pytest.CaptureFixture) -> None:
    def f(x: Any) -> Any:
        jax.debug.print("jax says {x} {}", x[0], x=x)
        return jnp.sum(jnp.sin(x))

    x = np.array([0.5, 1.0])
    g, lines = _printed(capfd, sg.grad(sg.from_jax(f)), x)
    assert lines == ["jax says [0.5 1. ] 0.5"]
    np.testing.assert_allclose(g, np.cos(x), rtol=1e-12)


def test_the_ir_prints_the_effect_without_results() -> None:
    text = str(sg.trace(lambda x: (sg.debug.print("v {}", x), x * 2.0)[1], np.ones(2)))
    assert "\n  debug_print(x) {fmt='v {}', names=()}" in text
