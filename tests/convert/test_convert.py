"""Python control-flow conversion (srcgrad/convert): when it happens, its options, its
errors, item assignment and lists. The numpy-style corpus is
tests/convert/test_convert_corpus.py."""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import srcgrad as sg
from srcgrad.base import conversion
from srcgrad.base.hooks import UNSET
from srcgrad.convert import loader


def _line(fn, text: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, l in enumerate(lines) if text in l)


def plain(x, flag=True):
    y = sg.cond(x > 0, lambda v: v * 2, lambda v: -v, x)
    if flag:  # a Python value: stays Python
        y = y + 1
    for i in range(3):
        y = y * x + i
    return sg.sum(y)


def _ir() -> str:
    return str(sg.trace(sg.grad(plain), 1.5))


def test_code_that_traces_today_is_not_converted(monkeypatch: pytest.MonkeyPatch) -> None:
    before = _ir()
    assert plain not in loader._functions
    monkeypatch.setattr(conversion.CONVERT, "value", UNSET)
    assert _ir() == before


def branchy(x):
    if x > 0:
        return x * x
    return -x


def test_conversion_is_cached_per_function() -> None:
    assert sg.grad(branchy)(3.0) == 6.0
    first = loader._functions[branchy]
    assert sg.grad(branchy)(-3.0) == -1.0 and sg.jvp(branchy, (2.0,), (1.0,))[1] == 4.0
    assert loader._functions[branchy] is first


def test_no_convert_keeps_the_error() -> None:
    @sg.no_convert
    def f(x):
        if x > 0:
            return x
        return -x

    with pytest.raises(sg.TraceError, match="no Python truth value"):
        sg.grad(f)(1.0)


def test_no_convert_and_clear_caches_reach_an_existing_grad() -> None:
    """`sg.grad(f)` made and called before (fast path and cached slots both warm) traces
    again after `sg.clear_caches()`, and unconverted after `sg.no_convert(f)`."""
    traces = []

    def f(x):
        traces.append(1)
        if x > 0:
            return x * x
        return -x

    g = sg.grad(f)
    assert g(np.float32(2.0)) == g(np.float32(2.0)) == 4.0
    seen = len(traces)
    sg.clear_caches()
    assert g(np.float32(2.0)) == 4.0 and len(traces) > seen
    sg.no_convert(f)
    with pytest.raises(sg.TraceError, match="no Python truth value"):
        g(np.float32(2.0))


def newton(a):
    x = a
    while abs(x * x - a) > 1e-12:
        x = x - (x * x - a) / (2 * x)
    return x


def test_unbounded_loop_under_jit_names_its_line() -> None:
    with pytest.raises(sg.SrcgradError) as e:
        jax.jit(sg.grad(newton))(4.0)
    assert f"test_convert.py:{_line(newton, 'while')}" in str(e.value)
    assert "converted Python loop" in str(e.value) and "max_iters" in str(e.value)
    np.testing.assert_allclose(jax.jit(sg.grad(sg.convert(newton, max_iters=40)))(4.0), 0.25)


def test_convert_max_iters_bounds_the_loop() -> None:
    @sg.convert(max_iters=2)
    def halve(x):
        while x > 1:
            x = x / 2
        return x

    assert float(sg.jit(halve)(40.0)) == 10.0  # stopped after 2 iterations
    assert halve(40.0) == 0.625  # called on a Python value it runs as written


def test_convert_under_program_guard() -> None:
    @sg.convert
    def clipped(x):
        if x > 2:
            x = 2 + 0.1 * x
        return x * x

    prog = sg.Program()
    with sg.program_guard(prog):
        a = sg.parameter("a", (), "float64")
        y = clipped(a)
        ((_, ga),) = sg.append_backward(y)
    run = sg.compile(prog, feed=["a"], fetch=[y, ga])
    val, g = run(np.float64(3.0))
    np.testing.assert_allclose([val, g], [2.3**2, 2 * 2.3 * 0.1])


def one_branch(x):
    if x > 0:
        y = x * 2
    return y


def test_variable_set_in_one_branch_is_an_error_at_its_use() -> None:
    with pytest.raises(sg.SrcgradError, match=r"`y` is assigned in only one branch") as e:
        sg.grad(one_branch)(1.0)
    assert f"test_convert.py:{_line(one_branch, 'return y')}" in str(e.value)
    assert f"test_convert.py:{_line(one_branch, 'if x > 0')}" in str(e.value)


def grows(x):
    while sg.sum(x) < 10:
        x = sg.concatenate([x, x])
    return sg.sum(x)


def test_loop_carried_shape_change_is_an_error() -> None:
    with pytest.raises(
        sg.SrcgradError,
        match=r"carries `x` as f64\[2\] but one iteration makes "
        r"it f64\[4\]",
    ) as e:
        sg.grad(grows)(np.ones(2))
    assert f"test_convert.py:{_line(grows, 'while')}" in str(e.value)


def test_source_not_available() -> None:
    ns = {"sg": sg}
    exec("def rep(x):\n    if x > 0:\n        return x\n    return -x\n", ns)
    with pytest.raises(sg.SrcgradError, match="source of rep .* is not available"):
        sg.grad(ns["rep"])(1.0)
    with pytest.raises(sg.SrcgradError, match="cannot convert rep: its source is not available"):
        sg.grad(sg.convert(ns["rep"]))(1.0)


def some_paths(x):
    if x > 0:
        return x


def test_return_on_some_paths_only() -> None:
    with pytest.raises(sg.SrcgradError, match="returns a value on some paths and None"):
        sg.grad(some_paths)(1.0)


def test_source_shows_the_users_lines() -> None:
    src = sg.source(sg.grad(newton), 2.0)
    assert f"# in newton (test_convert.py:{_line(newton, 'while')})" in src
    assert f"# in newton (test_convert.py:{_line(newton, 'x = x -')})" in src
    assert "lax.while_loop" in src
    text = sg.convert.source(newton)
    assert "ag__.while_stmt(" in text and "def newton(a):" in text


def deep(x, n):
    s = 0.0
    for i in range(3):
        if x > i:
            j = 0
            while j < n:
                if s > 2 and not x > 5:
                    break
                s = s + x * (j + 1) if j % 2 == 0 else s - 0.1 * x
                j += 1
        else:
            continue
    return s


def deep_jax(x, n):
    s = 0.0
    for i in range(3):
        if x > i:
            j = 0
            while j < n:
                if s > 2 and not x > 5:
                    break
                s = s + x * (j + 1) if j % 2 == 0 else s - 0.1 * x
                j += 1
        else:
            continue
    return s


@pytest.mark.parametrize("x", [0.5, 1.7, 2.6])
def test_nesting_with_traced_bounds(x: float) -> None:
    g = sg.grad(deep)(x, np.int32(4))
    np.testing.assert_allclose(g, jax.grad(deep_jax)(x, 4), rtol=1e-10)


def test_item_assignment_gradients_to_both() -> None:
    def f(x, v):
        y = x * 1.0
        y[1] = v * v
        y[2:] += v
        return sg.sum(y * y)

    def f_jax(x, v):
        y = (x * 1.0).at[1].set(v * v)
        y = y.at[2:].add(v)
        return jnp.sum(y * y)

    x, v = np.array([1.0, 2.0, 3.0, 4.0]), 0.7
    gx, gv = sg.grad(f, argnums=(0, 1))(x, v)
    jx, jv = jax.grad(f_jax, argnums=(0, 1))(x, v)
    np.testing.assert_allclose(gx, jx)
    np.testing.assert_allclose(gv, jv)


def test_tensor_item_assignment_records() -> None:
    w = sg.tensor(np.array([1.0, 2.0, 3.0]))
    w.attach_grad()
    with sg.autograd.record():
        y = w * 2
        y[1] = w[0] * w[2]
        y[0] += 5 * w[1]
        loss = sg.sum(y * y)
    sg.autograd.backward(loss)

    def f(w):
        y = (w * 2).at[1].set(w[0] * w[2])
        return jnp.sum(y.at[0].add(5 * w[1]) ** 2)

    np.testing.assert_allclose(np.asarray(w.grad), jax.grad(f)(jnp.array([1.0, 2.0, 3.0])))
    with sg.autograd.record(), pytest.raises(sg.SrcgradError, match="attach_grad"):
        w[0] = 1.0
    t = sg.tensor(np.zeros(3))
    t[1:] = 4.0
    np.testing.assert_array_equal(np.asarray(t), [0.0, 4.0, 4.0])


def test_lists_as_arrays() -> None:
    def f(a):
        return sg.sum([1.0, a * a, 2.0]) + sg.dot([a, 1.0], [2.0, a])

    def f_jax(a):
        return jnp.sum(jnp.stack([1.0, a * a, 2.0])) + jnp.dot(
            jnp.stack([a, 1.0]), jnp.stack([2.0, a])
        )

    np.testing.assert_allclose(sg.grad(f)(1.5), jax.grad(f_jax)(1.5))
    assert float(sg.sum([1.0, 2.0, 3.5])) == 6.5  # eager
    a = sg.tensor(np.float64(1.5))
    a.attach_grad()
    with sg.autograd.record():
        loss = sg.sum([1.0, a * a, 2.0])
    sg.autograd.backward(loss)
    np.testing.assert_allclose(np.asarray(a.grad), 3.0)
    with pytest.raises(sg.TraceError, match="cannot use a str as an array"):
        sg.jit(lambda x: sg.sum([x, "a"]))(1.0)
    with pytest.raises(sg.TraceError, match=r"cannot use this list as an array: \['a', 'b'\]"):
        sg.jit(lambda x: sg.sum(["a", "b"]) + x)(1.0)


def test_and_or_not_on_traced() -> None:
    def f(x):
        ok = (x > 0 and x < 2) or not x > -1
        return sg.where(ok, x * x, -x)

    for x in (1.0, 3.0, -2.0):
        want = x * x if ((0 < x < 2) or not x > -1) else -x
        assert float(sg.jit(f)(x)) == want


def test_methods_and_helpers_are_converted_not_libraries() -> None:
    assert not loader.is_user_code(inspect.getsource.__code__)  # the standard library
    assert not loader.is_user_code(pytest.raises.__code__)  # an installed package
    assert not loader.is_user_code(sg.grad.__code__)
    assert loader.is_user_code(branchy.__code__)


def signed_cubes(x):
    s = 0.0
    for v in x:
        if v > 0:
            s = s + v**3
        else:
            s = s - v
    return s


def test_every_transformation_converts() -> None:
    x = np.array([0.5, -1.0, 2.0])
    want = jax.grad(signed_cubes)(jnp.asarray(x))
    value, g = sg.value_and_grad(signed_cubes)(x)
    np.testing.assert_allclose([value], [signed_cubes(x)])
    np.testing.assert_allclose(g, want)
    np.testing.assert_allclose(sg.vjp(signed_cubes, x)[1](1.0)[0], want)
    np.testing.assert_allclose(
        sg.hessian(signed_cubes)(x), jax.hessian(signed_cubes)(jnp.asarray(x))
    )
    batch = np.stack([x, -x])
    np.testing.assert_allclose(
        jax.vmap(sg.grad(signed_cubes))(batch),  # jax.vmap(jax.grad) fails
        [jax.grad(signed_cubes)(jnp.asarray(row)) for row in batch],
    )
    bounded = sg.convert(newton, max_iters=40)
    np.testing.assert_allclose(jax.vmap(sg.grad(bounded))(np.array([4.0, 9.0])), [0.25, 1 / 6])
