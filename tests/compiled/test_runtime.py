"""The runtime around a compiled gradient: captured arrays as inputs, the compile cache keyed
on the function, static_argnums, the loop-records limit, and sg.jit / sg.grad agreeing."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import srcgrad as sg
from srcgrad.base.cache import CACHE
from srcgrad.testing import check_grads


# ---------------------------------------------------------------- captured arrays


def test_mutating_a_captured_numpy_array_is_seen_without_recompiling() -> None:
    w = np.array([1.0, 2.0, -0.5])

    def loss(x: Any) -> Any:
        return sg.sum(sg.tanh(x * w) ** 2)

    def twin(x: Any) -> Any:
        return jnp.sum(jnp.tanh(x * w) ** 2)

    g, x = sg.grad(loss), np.array([0.3, -0.2, 0.7])
    np.testing.assert_allclose(g(x), jax.grad(twin)(x), rtol=1e-12)
    w[:] = [-3.0, 0.25, 4.0]
    np.testing.assert_allclose(g(x), jax.grad(twin)(x), rtol=1e-12)
    np.testing.assert_allclose(sg.grad(loss)(x), jax.grad(twin)(x), rtol=1e-12)
    assert g.compilations == 1


SCALE = np.array([1.0, 2.0])


def scaled(x: Any) -> Any:
    return sg.sum(sg.sin(x) * SCALE)


def test_rebinding_a_global_the_function_reads_is_seen() -> None:
    global SCALE
    x, old = np.array([0.3, 0.5]), SCALE
    try:
        np.testing.assert_allclose(sg.grad(scaled)(x), np.cos(x) * [1.0, 2.0], rtol=1e-12)
        SCALE = np.array([-4.0, 0.5])
        np.testing.assert_allclose(sg.grad(scaled)(x), np.cos(x) * [-4.0, 0.5], rtol=1e-12)
    finally:
        SCALE = old


def test_a_global_read_in_a_nested_function_is_watched_too() -> None:
    global SCALE
    x, old = np.array([0.3, 0.5]), SCALE

    def f(x: Any) -> Any:
        inner = lambda y: sg.sin(y) * SCALE  # SCALE is read by the lambda's code
        return sg.sum(inner(x))

    g = sg.grad(f)
    try:
        np.testing.assert_allclose(g(x), np.cos(x) * [1.0, 2.0], rtol=1e-12)
        SCALE = np.array([-4.0, 0.5])
        np.testing.assert_allclose(g(x), np.cos(x) * [-4.0, 0.5], rtol=1e-12)
    finally:
        SCALE = old


def test_rebinding_a_closed_over_variable_is_seen() -> None:
    lr = 0.5

    def f(x: Any) -> Any:
        return sg.sum(x * x) * lr

    g, x = sg.grad(f), np.array([1.0, -2.0])
    np.testing.assert_allclose(g(x), x, rtol=1e-12)
    lr = 2.0
    np.testing.assert_allclose(g(x), 4 * x, rtol=1e-12)
    np.testing.assert_allclose(g(x), 4 * x, rtol=1e-12)
    assert g.compilations == 2


def _cube(x: Any) -> Any:
    return x * x * x


def _converted_cube(x: Any) -> Any:
    if x > 0:  # a traced `if`: the function is converted (srcgrad.convert)
        return x * x * x
    return x


def test_a_replaced_code_object_or_default_is_seen_by_every_transformation() -> None:
    """`f.__code__ = g.__code__` (what IPython's autoreload does when a source is edited) and
    new default values make every program traced from `f` stale: in a transformed function
    made before (its fast path too) and in a fresh one."""
    transforms = {
        "grad": lambda f: sg.grad(f),
        "jit": lambda f: sg.jit(f),
        "value_and_grad": lambda f: lambda x: sg.value_and_grad(f)(x)[1],
        "vjp": lambda f: lambda x: sg.vjp(f, x)[1](1.0)[0],
        "jvp": lambda f: lambda x: sg.jvp(f, (x,), (1.0,))[1],
        "hessian": lambda f: sg.hessian(f),
        "from_jax": lambda f: sg.grad(sg.from_jax(f)),
    }
    x = 1.5
    for name, transform in transforms.items():
        # (from_jax traces with JAX, which converts no Python control flow)
        for cube in (_cube,) if name == "from_jax" else (_cube, _converted_cube):

            def f(x: Any) -> Any:
                return x * x

            old = transform(f)
            before = old(x), old(x)  # the second call takes the fast path
            f.__code__ = cube.__code__
            want = {"jit": x**3, "hessian": 6 * x}.get(name, 3 * x * x)
            for got in (old(x), transform(f)(x), old(x)):
                np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=name)
            assert before[0] != want

    def scaled(x: Any, k: float = 2.0) -> Any:
        return x * k

    g = sg.grad(scaled)
    assert g(x) == 2.0
    scaled.__defaults__ = (5.0,)
    assert g(x) == sg.grad(scaled)(x) == 5.0


def test_captured_arrays_are_inputs_of_the_source_not_constants() -> None:
    big = np.linspace(0.0, 1.0, 1000)

    def f(x: Any) -> Any:
        return sg.sum(x * big)

    src = sg.source(sg.grad(f), np.ones(1000))
    assert "_consts" not in src
    assert src.splitlines()[0] == "def f_grad(x, captured_0):"
    assert "captured: captured_0: f64[1000]" in str(sg.trace(sg.grad(f), np.ones(1000)))


def test_a_captured_array_read_in_a_loop_body_and_under_jax_jit() -> None:
    w = np.array([0.5, -1.5])

    def f(x: Any) -> Any:
        return sg.sum(sg.fori_loop(0, 3, lambda i, v: sg.sin(v * w), x))

    def twin(x: Any) -> Any:
        return jnp.sum(jax.lax.fori_loop(0, 3, lambda i, v: jnp.sin(v * w), x))

    g, jg, x = sg.grad(f), jax.jit(sg.grad(f)), np.array([0.4, 0.9])
    for new in ([0.5, -1.5], [2.0, 0.1]):
        w[:] = new
        np.testing.assert_allclose(g(x), jax.grad(twin)(x), rtol=1e-12)
        np.testing.assert_allclose(sg.jit(f)(x), twin(x), rtol=1e-12)
    np.testing.assert_allclose(jg(x), jax.grad(twin)(x), rtol=1e-12)  # traced now: w = [2, .1]


def test_captured_jax_array_and_float64_array_under_float32_inputs() -> None:
    wj, w64 = jnp.arange(3.0), np.array([1.5, 2.5, 3.5])

    def f(x: Any) -> Any:
        return sg.sum(x * wj * w64)

    check_grads(f, [np.array([0.1, 0.2, 0.3])])


def _chol_loss(A: Any) -> Any:
    return jnp.sum(jnp.linalg.cholesky(A @ A.T + jnp.eye(12)) ** 2)


def _made_while_traced(A: Any) -> Any:
    w = jnp.asarray(np.linspace(0.5, 2.0, 12))  # JAX makes it while srcgrad traces
    return sg.sum(sg.fori_loop(0, 2, lambda i, v: sg.sin(v * w), A))


@pytest.mark.parametrize("order", ["jit_first", "eager_first"])
def test_a_value_made_under_jax_jit_never_outlives_that_trace(order: str) -> None:
    """One gradient used inside jax.jit and eagerly, in both orders, twice each: the large
    constants of a program lowered while jax.jit traces (the fast path's pipeline, or an
    outer jax.jit) are NumPy arrays, not that trace's tracers; an array JAX made while srcgrad
    traced under jax.jit is captured for that trace only."""
    A = np.eye(12) + 0.1
    want = {
        "from_jax": jax.grad(_chol_loss)(A),
        "made": jax.grad(
            lambda a: jnp.sum(
                jnp.sin(jnp.sin(a * np.linspace(0.5, 2.0, 12)) * np.linspace(0.5, 2.0, 12))
            )
        )(A[0]),
    }
    grads = {
        "from_jax": (sg.grad(sg.from_jax(_chol_loss)), A),
        "plain": (sg.grad(lambda a: sg.sum(sg.linalg.cholesky(a @ a.T + sg.eye(12)) ** 2)), A),
        "made": (sg.grad(_made_while_traced), A[0]),
        "made, jit=False": (sg.grad(_made_while_traced, jit=False), A[0]),
    }
    for name, (g, x) in grads.items():
        for _ in range(2):
            calls = (jax.jit(g), g) if order == "jit_first" else (g, jax.jit(g))
            for call in calls:
                np.testing.assert_allclose(
                    call(x),
                    want[name.split(",")[0].replace("plain", "from_jax")],
                    rtol=1e-10,
                    err_msg=name,
                )


def test_small_constants_are_written_into_the_source() -> None:
    class Small:
        def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
            return np.array([1.5, -2.0, 0.25], dtype)

    def f(x: Any) -> Any:
        return sg.sum(x * Small())

    x = np.ones(3)
    src = sg.source(sg.jit(f), x)
    assert "jnp.asarray([1.5, -2.0, 0.25], jnp.float64)" in src
    assert "_consts" not in src
    np.testing.assert_allclose(sg.jit(f)(x), -0.25)


def test_an_empty_constant_keeps_its_shape() -> None:
    """An empty `constant` op (the masks and tables internal ops build) is written as zeros
    of its shape: a nested-list literal would lose the trailing axes."""
    from srcgrad.ops.contraction import const_array

    def f(x: Any) -> Any:
        empty = const_array(np.zeros((2, 0, 3)), x.dtype)
        return sg.sum(sg.concatenate([x, empty], axis=1) ** 2)

    x = np.linspace(0.0, 1.0, 12).reshape(2, 2, 3)
    assert "jnp.zeros((2, 0, 3), jnp.float64)" in sg.source(sg.grad(f), x)
    np.testing.assert_allclose(sg.grad(f)(x), 2 * x)


# ---------------------------------------------------------------- the compile cache


def test_a_fresh_grad_of_the_same_function_reuses_the_compiled_program() -> None:
    def f(x: Any) -> Any:
        return sg.sum(sg.sin(x) ** 2)

    x = np.array([0.1, 0.2])
    first = sg.grad(f)
    first(x)
    assert first.compilations == 1
    for _ in range(3):
        again = sg.grad(f)
        np.testing.assert_allclose(again(x), np.sin(2 * x), rtol=1e-12)
        assert again.compilations == 0
    other = sg.grad(f, has_aux=False, argnums=(0,))  # another transformation: its own program
    other(x)
    assert other.compilations == 1
    assert sg.value_and_grad(f)(x)[0] == pytest.approx(np.sum(np.sin(x) ** 2))


def test_a_fresh_grad_compiles_nothing(caplog: pytest.LogCaptureFixture) -> None:
    """A fresh `sg.grad(f)` of a function called before reuses JAX's compiled executable
    (JAX logs no compilation); a new input shape compiles once."""

    def f(x: Any) -> Any:
        return sg.sum(sg.sin(x) ** 2)

    x = np.array([0.1, 0.2])
    sg.grad(f)(x)
    with jax.log_compiles(True), caplog.at_level("WARNING"):
        for _ in range(3):
            np.testing.assert_allclose(sg.grad(f)(x), np.sin(2 * x), rtol=1e-12)
        assert not [r for r in caplog.records if "Compiling" in r.getMessage()]
        np.testing.assert_allclose(sg.grad(f)(np.ones(3)), np.sin(2.0) * np.ones(3), rtol=1e-12)
        assert len([r for r in caplog.records if "Compiling" in r.getMessage()]) == 1


def test_the_cache_does_not_share_between_closures_of_one_code_object() -> None:
    def make(scale: float) -> Any:
        return lambda x: sg.sum(x * x) * scale

    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(sg.grad(make(1.0))(x), 2 * x)
    np.testing.assert_allclose(sg.grad(make(3.0))(x), 6 * x)


def test_the_cache_lets_its_functions_go() -> None:
    import gc
    import weakref

    def f(x: Any) -> Any:
        return sg.sum(x)

    sg.grad(f)(np.ones(2))
    ref = weakref.ref(f)
    del f
    gc.collect()
    assert ref() is None
    assert len(CACHE) == 0


def test_check_grads_compiles_each_transformation_once(monkeypatch: pytest.MonkeyPatch) -> None:
    builds: list[str] = []
    build = sg.Transformed._build

    def counting(self: sg.Transformed, *args: Any) -> Any:
        builds.append(self._name)
        return build(self, *args)

    monkeypatch.setattr(sg.Transformed, "_build", counting)

    def f(x: Any) -> Any:
        return sg.sum(sg.tanh(x) * x)

    check_grads(f, [np.array([0.3, -0.1])], directions=3)
    assert sorted(builds) == ["grad", "jit", "jit"]  # f; f scalarized; its gradient, once


# ---------------------------------------------------------------- static_argnums


def test_static_argnums_pass_python_values() -> None:
    def f(x: Any, mode: str, k: int) -> Any:
        y = sg.sin(x) if mode == "sin" else sg.cos(x)
        return sg.sum(y**k)

    x = np.array([0.3, 0.8])
    g = sg.grad(f, static_argnums=(1, 2))
    np.testing.assert_allclose(
        g(x, "sin", 2), jax.grad(lambda v: jnp.sum(jnp.sin(v) ** 2))(x), rtol=1e-12
    )
    np.testing.assert_allclose(
        g(x, "cos", 3), jax.grad(lambda v: jnp.sum(jnp.cos(v) ** 3))(x), rtol=1e-12
    )
    g(x, "sin", 2)
    assert g.compilations == 2
    value, dx = sg.value_and_grad(f, static_argnums=1)(x, "cos", 1.0)
    np.testing.assert_allclose(value, np.sum(np.cos(x)), rtol=1e-12)
    np.testing.assert_allclose(sg.jit(f, static_argnums=(1, 2))(x, "sin", 1), np.sum(np.sin(x)))
    np.testing.assert_allclose(sg.jit(f, static_argnums=(-2, -1))(x, "sin", 1), np.sum(np.sin(x)))


def test_static_argnums_errors() -> None:
    def f(x: Any, opts: Any) -> Any:
        return sg.sum(x)

    with pytest.raises(sg.SrcgradError, match="static argument 1 must be hashable.*list"):
        sg.grad(f, static_argnums=1)(np.ones(2), [1, 2])
    with pytest.raises(sg.SrcgradError, match="both differentiated .* and static"):
        sg.grad(f, argnums=(0, 1), static_argnums=1)
    with pytest.raises(sg.SrcgradError, match="static_argnums 3 but only 2 arguments"):
        sg.jit(f, static_argnums=3)(np.ones(2), "a")


# ---------------------------------------------------------------- loops that do not stop


def forever(x: Any) -> Any:
    return sg.while_loop(lambda c: c[1] > -1.0, lambda c: (sg.sin(c[0]), c[1] + 1.0), (x, 0.0))[0]


FOREVER_LINE = forever.__code__.co_firstlineno + 1


@pytest.fixture
def small_limit() -> Any:
    old = sg.config.max_loop_records
    sg.config.max_loop_records = 1000
    yield
    sg.config.max_loop_records = old


def test_a_loop_that_never_stops_raises_instead_of_hanging(small_limit: None) -> None:
    with pytest.raises(sg.SrcgradError) as err:
        sg.grad(forever)(0.3)
    msg = str(err.value)
    assert f"test_runtime.py:{FOREVER_LINE}" in msg
    assert "reached 1001 iterations" in msg and "max_loop_records = 1000" in msg
    assert "max_iters=None" in msg


def test_the_limit_allows_a_loop_of_exactly_that_many_iterations(small_limit: None) -> None:
    def f(x: Any, n: Any) -> Any:
        return sg.while_loop(
            lambda c: c[1] < n, lambda c: (sg.sin(c[0]) * 0.5 + x, c[1] + 1.0), (x, 0.0)
        )[0]

    def twin(x: Any, n: int) -> Any:
        return jax.lax.fori_loop(0, n, lambda i, s: jnp.sin(s) * 0.5 + x, x)

    np.testing.assert_allclose(sg.grad(f)(0.3, 1000.0), jax.grad(twin)(0.3, 1000), rtol=1e-10)
    with pytest.raises(sg.SrcgradError, match="reached 1001 iterations"):
        sg.grad(f)(0.3, 5000.0)


def test_config_validates_the_limit() -> None:
    for bad in (0, -1, 2.5, True, 2**40):
        with pytest.raises(ValueError, match="max_loop_records"):
            sg.config.max_loop_records = bad


def test_a_stable_trip_count_recompiles_at_most_once() -> None:
    def f(x: Any, n: Any) -> Any:
        return sg.while_loop(
            lambda c: c[1] < n, lambda c: (sg.sin(c[0]) + x, c[1] + 1.0), (x, 0.0)
        )[0]

    g = sg.grad(f)
    for _ in range(4):
        g(0.1, 300.0)
    assert g.compilations == 2  # capacity 64, then 512 (300 rounded up to a power of two)
    g(0.1, 500.0)
    assert g.compilations == 2


# ---------------------------------------------------------------- sg.jit agrees with sg.grad


def _inner(y: Any, n: Any) -> Any:
    return sg.while_loop(lambda c: c[1] < n, lambda c: (sg.sin(c[0]), c[1] + 1.0), (y, 0.0))[0]


def _outer(x: Any, n: Any) -> Any:
    step = lambda i, v: v - 0.1 * sg.grad(lambda y: sg.sum(_inner(y, n)))(v)
    return sg.sum(sg.fori_loop(0, 2, step, x))


def _outer_twin(x: Any, n: int) -> Any:
    inner = lambda y: jnp.sum(jax.lax.fori_loop(0, n, lambda i, c: jnp.sin(c), y))
    return jnp.sum(jax.lax.fori_loop(0, 2, lambda i, v: v - 0.1 * jax.grad(inner)(v), x))


@pytest.mark.parametrize("n", [3, 100])
def test_jit_accepts_a_gradient_inside_a_loop_body_as_grad_does(n: int) -> None:
    x = np.array([0.5, 0.2])
    np.testing.assert_allclose(sg.jit(_outer)(x, float(n)), _outer_twin(x, n), rtol=1e-12)
    np.testing.assert_allclose(
        sg.grad(_outer)(x, float(n)), jax.grad(_outer_twin)(x, n), rtol=1e-10
    )
    sg.trace(sg.jit(_outer), x, float(n)).verify()


def test_jit_accepts_a_gradient_inside_a_branch() -> None:
    def f(x: Any, n: Any) -> Any:
        g = lambda v: sg.grad(lambda y: sg.sum(_inner(y, n)))(v)
        return sg.sum(sg.cond(sg.sum(x) > 0, g, lambda v: v * 2.0, x))

    x = np.array([0.5, 0.2])
    want = jax.grad(lambda y: jnp.sum(jax.lax.fori_loop(0, 70, lambda i, c: jnp.sin(c), y)))(x)
    np.testing.assert_allclose(sg.jit(f)(x, 70.0), jnp.sum(want), rtol=1e-12)
    np.testing.assert_allclose(sg.jit(f)(-x, 70.0), -1.4, rtol=1e-12)


def test_vjp_with_an_integer_primal_names_the_parameter() -> None:
    def scale(x: Any, count: Any) -> Any:
        return x * count

    with pytest.raises(sg.GradientError, match="primal 'count' is int"):
        sg.vjp(scale, np.ones(2), np.int32(3))
