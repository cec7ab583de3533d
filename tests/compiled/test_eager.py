"""Eager calls: every op called on concrete values outside a trace computes with JAX and
returns a jax.Array equal to jax.numpy's result (the forward table of test_ops, run eagerly)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import srcgrad as sg
from test_ops import CASES, Case, assert_same, examples


#: Cases that use Python syntax (x[i], x + y, x.T) rather than an sg function: on NumPy
#: arrays that syntax is NumPy's own. Internal functions (no sg name) run inside traces only.
SYNTAX = ("getitem", "operator", "attributes", "methods", "pad lax config")


@pytest.mark.parametrize("case", [c for c in CASES if not c.name.startswith(SYNTAX)], ids=str)
@examples(40, least=1)
@given(data=st.data())
def test_op_runs_eagerly(case: Case, data: st.DataObject) -> None:
    """op(*numpy arrays) outside any trace equals the jax.numpy equivalent."""
    for dts in case.variants[:1]:
        params, args = case.draw(data, dts)
        ours = case.ours(*args, **params)
        theirs = case.ref(*[jax.device_put(a) for a in args], **params)
        assert isinstance(ours, jax.Array), type(ours)
        assert_same(ours, theirs, f"eager {case.name} {params}")


@pytest.mark.parametrize(
    "value", [1.5, 2, True, np.float32(0.5), np.arange(3), jnp.ones((2, 2))], ids=repr
)
def test_python_numpy_and_jax_inputs(value: object) -> None:
    for ours, ref in [(sg.sin, jnp.sin), (sg.abs, jnp.abs), (sg.square, jnp.square)]:
        assert_same(ours(value), ref(value), f"{ref.__name__}({value!r})")
    assert_same(sg.add(value, 2.5), jnp.add(value, 2.5), "add")
    assert_same(sg.multiply(3, value), jnp.multiply(3, value), "multiply")


def test_keyword_and_static_arguments() -> None:
    x = np.arange(6.0).reshape(2, 3)
    assert_same(sg.sum(x, axis=1, keepdims=True), jnp.sum(x, axis=1, keepdims=True), "sum")
    assert_same(sg.reshape(x, (3, 2)), jnp.reshape(x, (3, 2)), "reshape")
    assert_same(sg.concatenate([x, x], axis=0), jnp.concatenate([x, x], axis=0), "concatenate")
    assert_same(sg.zeros((2,)), jnp.zeros((2,)), "zeros")
    assert_same(sg.arange(4), jnp.arange(4), "arange")


def test_inside_jax_jit_and_jax_grad() -> None:
    """On JAX tracers the op's lowered code joins the caller's computation."""
    x = np.linspace(-1.0, 1.0, 5)

    def f(v: jax.Array) -> jax.Array:
        return sg.sum(sg.tanh(v) * sg.exp(v))

    def ref(v: jax.Array) -> jax.Array:
        return jnp.sum(jnp.tanh(v) * jnp.exp(v))

    assert_same(jax.jit(f)(x), jax.jit(ref)(x), "jit")
    assert_same(jax.grad(f)(x), jax.grad(ref)(x), "grad")
    assert_same(
        jax.vmap(sg.softmax)(x.reshape(5, 1)), jax.vmap(jax.nn.softmax)(x.reshape(5, 1)), "vmap"
    )


def test_a_one_op_program_serves_inside_and_outside_jax_jit() -> None:
    """A one-op program is compiled with XLA options (QUICK_OPTIONS in
    transforms/compile_options.py), which JAX refuses inside a trace: called first inside
    jax.jit, then outside, and the reverse, it computes jax.numpy's results both ways."""
    for shape in [(3, 7, 2), (2, 7, 3)]:  # shapes no other test uses: fresh programs
        x = np.linspace(-2.0, 2.0, int(np.prod(shape))).reshape(shape)
        calls = [jax.jit(lambda v: sg.expm1(v) * 2.0), lambda v: sg.expm1(v) * 2.0]
        if shape[0] == 2:
            calls.reverse()
        for call in calls:
            assert_same(call(x), jnp.expm1(x) * 2.0, f"expm1 {shape}")


def test_a_call_on_tracers_goes_to_the_plain_program_at_once(monkeypatch) -> None:
    """On a tracer's call the program JAX would refuse is not tried (each refusal is an
    exception at trace time); constants alone inside a trace are retried plainly."""
    from srcgrad.compiled import eager
    from srcgrad.transforms import compile_options

    retried = []
    in_trace = eager.OpProgram.in_trace
    monkeypatch.setattr(
        eager.OpProgram, "in_trace", lambda self, e, a: retried.append(1) or in_trace(self, e, a)
    )
    x = np.linspace(-1.0, 1.0, 12).reshape(4, 3)
    sg.sinh(x)  # run once outside: the program that JAX refuses inside a trace
    assert_same(jax.jit(lambda v: sg.sinh(v))(x), jnp.sinh(x), "on a tracer")
    assert not retried
    assert_same(jax.jit(lambda: sg.sinh(x))(), jnp.sinh(x), "constants alone")
    assert len(retried) == (1 if compile_options.quick_options() else 0)  # no options: no refusal


def test_an_xla_that_refuses_the_quick_options_compiles_without_them(monkeypatch) -> None:
    """Where XLA does not know an option (an older jaxlib) the program compiles with XLA's
    defaults, and so do the programs after it."""
    from srcgrad.transforms import compile_options

    monkeypatch.setattr(compile_options, "QUICK_OPTIONS", {"xla_cpu_no_such_option_here": True})
    monkeypatch.setattr(compile_options, "_QUICK_TAKEN", [True])
    x = np.linspace(-1.0, 1.0, 5 * 11 * 3).reshape(5, 11, 3)  # a fresh program
    assert_same(sg.log1p(x * x), jnp.log1p(x * x), "log1p")
    assert compile_options.quick_options() is None
    assert_same(sg.log1p(x.T), jnp.log1p(x.T), "log1p, after")


def test_a_quick_jit_serves_inside_jax_jit_and_where_xla_refuses_its_options(
    monkeypatch,
) -> None:
    """An optimizer's update (transforms/compile_options.py's QuickJit) computes the same outside a
    trace, inside a user's jax.jit, and where XLA refuses the options (then plainly)."""
    from srcgrad.transforms import compile_options

    x = np.linspace(-1.0, 1.0, 13)
    update = compile_options.QuickJit(lambda p, g: p - 0.5 * g * g)
    assert_same(update(x, x), x - 0.5 * x * x, "outside")
    assert_same(jax.jit(lambda v: update(v, v))(x), x - 0.5 * x * x, "inside jax.jit")
    monkeypatch.setattr(compile_options, "QUICK_OPTIONS", {"xla_cpu_no_such_option_here": True})
    monkeypatch.setattr(compile_options, "_QUICK_TAKEN", [True])
    refused = compile_options.QuickJit(lambda p, g: p - 0.25 * g)
    assert_same(refused(x, x), x - 0.25 * x, "refused")
    assert refused.quick is refused.plain and compile_options.quick_options() is None


def test_eager_errors_name_the_op_and_the_user_line() -> None:
    with pytest.raises(sg.ShapeError, match=r"add.*cannot be broadcast.*test_eager\.py"):
        sg.add(np.ones(2), np.ones(3))


def test_traced_calls_are_unchanged() -> None:
    """Inside a trace the op is recorded, not computed."""
    prog = sg.trace(lambda x: sg.sin(x), np.ones(3))
    assert [op.type for op in prog.global_block().ops] == ["sin"]


def test_a_python_number_in_either_operand_position() -> None:
    """The eager cache tells `op(1.0, a)` from `op(a, 1.0)` (same shapes, same number)."""
    a = jnp.array(0.5)
    assert float(sg.subtract(1.0, a)) == 0.5
    assert float(sg.subtract(a, 1.0)) == -0.5
    x = sg.tensor(np.float64(0.5))
    assert float(np.asarray(1 - x)) == 0.5 and float(np.asarray(x - 1)) == -0.5
