"""Errors a user can act on: tracebacks without srcgrad's frames (with a switch), every error
at the user's file:line, JAX's control flow and Python conversions of traced values pointing
to what to write instead."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import traceback
from typing import Any, Callable

import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import srcgrad as sg

HERE = os.path.basename(__file__)
SRCGRAD_DIR = os.path.dirname(os.path.abspath(sg.__file__)) + os.sep
X = np.linspace(0.5, 1.5, 3)


#: srcgrad frames a filtered traceback keeps: none, or on Python 3.10 the entry point's own
#: (its bare `raise` restores the caught chain, whose first entry is that frame).
ALLOWED_FRAMES = 0 if sys.version_info >= (3, 11) else 1


def _frames(e: BaseException) -> list[str]:
    return [f.filename for f in traceback.extract_tb(e.__traceback__)]


def _line(fn: Callable[..., Any], offset: int = 0) -> str:
    return f"{HERE}:{inspect.getsourcelines(fn)[1] + offset}"


def _bad_matmul(x: Any) -> Any:
    return sg.sum(x @ np.ones((4, 2)))


def _divides_by_zero(x: Any) -> Any:
    return sg.sum(x) / 0


RAISERS = [
    pytest.param(lambda: sg.grad(_bad_matmul)(X), sg.ShapeError, id="traced"),
    pytest.param(lambda: sg.add(np.ones(2), np.ones(3)), sg.ShapeError, id="eager"),
    pytest.param(lambda: sg.jvp(_bad_matmul, (X,), (X,)), sg.ShapeError, id="jvp"),
    pytest.param(lambda: sg.source(sg.grad(_bad_matmul), X), sg.ShapeError, id="source"),
    pytest.param(lambda: sg.grad(lambda x: 1 / 0)(X), ZeroDivisionError, id="user-error"),
]


@pytest.mark.parametrize("call, exc", RAISERS)
def test_tracebacks_leave_out_srcgrad_frames(call: Callable[[], Any], exc: type) -> None:
    with pytest.raises(exc) as info:
        call()
    frames = _frames(info.value)
    ours = [f for f in frames if f.startswith(SRCGRAD_DIR)]
    assert len(ours) <= ALLOWED_FRAMES, frames
    users = [f for f in frames if not f.startswith(SRCGRAD_DIR)]
    assert users and users[-1].endswith(HERE)  # the user's line raised it, or called srcgrad


def test_traceback_filtering_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sg.config, "traceback_filtering", False)
    with pytest.raises(sg.ShapeError) as info:
        sg.grad(_bad_matmul)(X)
    frames = _frames(info.value)
    assert any(f.startswith(SRCGRAD_DIR) for f in frames)
    assert any(f.endswith(HERE) for f in frames)
    with pytest.raises(ValueError, match="True or False"):
        sg.config.traceback_filtering = "off"


def test_traceback_filtering_environment_variable() -> None:
    code = "import srcgrad as sg; print(sg.config.traceback_filtering)"
    env = dict(os.environ, SRCGRAD_TRACEBACK_FILTERING="off")
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=os.path.dirname(SRCGRAD_DIR.rstrip(os.sep)),
    )
    assert out.stdout.strip() == "False"


def test_from_jax_unsupported_primitive_names_the_users_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A primitive without a row runs as a jax op (fft does); one that JAX cannot run on its
    own is an error naming the user's JAX line -- for fft, inside jnp.fft.fft's jitted
    function, the line that called it -- and the line that called sg.from_jax."""
    fj = sys.modules["srcgrad.from_jax.translate"]

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("cannot bind it alone")

    monkeypatch.setattr(fj, "call_flat", refuse)
    f = lambda x: jnp.fft.fft(x).real.sum()
    with pytest.raises(
        sg.SrcgradError,
        match=r"'\w+' could not run as a jax_op .*\(made at "
        rf".*{_line(f)}:\d+ \(.*<lambda>\)\).*\(at .*{HERE}:\d+\)$",
    ):
        sg.from_jax(f)(X)


def test_an_error_names_its_op_once() -> None:
    with pytest.raises(sg.ShapeError) as info:
        sg.jit(lambda x: sg.tensordot(x, x, axes=(1, 2, 3)))(X)
    assert str(info.value).startswith("tensordot: axes must be an int or a pair")


LAX_CONTROL = [
    (lambda x: lax.while_loop(lambda c: c < 3.0, lambda c: c + 1.0, x), "while_loop"),
    (lambda x: lax.cond(x > 0, lambda y: y, lambda y: -y, x), "cond"),
    (lambda x: lax.scan(lambda c, _: (c, c), x, None, length=3)[0], "scan"),
    (lambda x: lax.fori_loop(0, 3, lambda i, c: c + 1.0, x), "fori_loop"),
]


@pytest.mark.parametrize("fn, name", LAX_CONTROL, ids=[n for _, n in LAX_CONTROL])
def test_lax_control_flow_points_to_srcgrads(fn: Callable[..., Any], name: str) -> None:
    with pytest.raises(sg.TraceError) as info:
        sg.grad(fn)(np.float64(1.0))
    msg = str(info.value)
    assert f"was passed to lax.{name}" in msg and f"use sg.{name} " in msg, msg
    assert "sg.from_jax" in msg and "has no" not in msg and _line(fn) in msg, msg


CONVERSIONS = [
    (lambda x: float(x), "float()"),
    (lambda x: int(x), "int()"),
    (lambda x: x.item(), "x.item()"),
    (lambda x: len(x), "len()"),
]


@pytest.mark.parametrize("fn, what", CONVERSIONS, ids=[w for _, w in CONVERSIONS])
def test_python_conversions_of_traced_values_say_what_to_do(
    fn: Callable[..., Any], what: str
) -> None:
    with pytest.raises(sg.TraceError) as info:
        sg.grad(lambda x: fn(x) * x)(np.float64(1.0))
    msg = str(info.value)
    assert isinstance(info.value, TypeError)  # as Python's, for code that probes with it
    assert msg.startswith(f"{what} of the ") and "x_0: f64[]" in msg, msg
    assert ("x.shape" if what == "len()" else "sg.where") in msg
    assert msg.endswith(f"(at {os.path.abspath(__file__)}:{inspect.getsourcelines(fn)[1]})"), msg
