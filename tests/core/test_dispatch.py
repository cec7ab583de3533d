"""One dispatch: traced, eager and imperative calls of every op agree.

Every op of the forward table (test_ops.CASES) runs three ways on one drawn sample --
compiled under `sg.jit`, eagerly on arrays, and on Tensors under `sg.autograd.record()` --
and must give the same values; every op of the gradient table (test_op_grads.CASES) must
also give the same gradients under `sg.grad` and from `backward()`. Binary elementwise ops
run with a Python number on either side, where the eager programs were once keyed without
the number's position (`3.0 - x` returned `x - 3.0`).
"""

from __future__ import annotations

import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import srcgrad as sg
from support.util import sliced
from test_op_grads import CASES as GRAD_CASES
from test_op_grads import GradCase, cast, cotangent
from test_ops import CASES, Case, key

ONE = settings(max_examples=1, derandomize=True)


def _tensors(args: list[np.ndarray], attach: bool) -> list[Any]:
    """Float arrays as Tensors (attached when asked), other arguments as they are."""
    out = []
    for a in args:
        if a.dtype.kind == "f":
            t = sg.tensor(a)
            if attach:
                t.attach_grad()
            out.append(t)
        else:
            out.append(a)
    return out


def _same(a: Any, b: Any, what: str) -> None:
    a, b = np.asarray(a), np.asarray(b)
    assert (a.dtype, a.shape) == (b.dtype, b.shape), what
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, err_msg=what)


_JITTED: dict[tuple, sg.Transformed] = {}


#: Internal ops (no sg.<name> user function) are reached only from traced code.
USER_CASES = [c for c in CASES if "(the internal" not in c.name]


@pytest.mark.parametrize("case", sliced(USER_CASES, 4), ids=str)
@ONE
@given(data=st.data())
def test_values_agree_three_ways(case: Case, data: st.DataObject) -> None:
    """sg.jit(op), op on arrays and op on Tensors under record() give the same values."""
    params, args = case.draw(data, case.variants[-1])
    k = key(case, params)
    if k not in _JITTED:
        _JITTED[k] = sg.jit(lambda *xs: case.ours(*xs, **params))
    traced = _JITTED[k](*args)
    eager = case.ours(*args, **params)
    with sg.autograd.record():
        recorded = case.ours(*_tensors(args, attach=False), **params)
    for name, got in (("eager", eager), ("imperative", recorded)):
        for t, g in zip(jax.tree_util.tree_leaves(traced), jax.tree_util.tree_leaves(got)):
            _same(g.numpy() if isinstance(g, sg.Tensor) else g, t, f"{case.name} {params}: {name}")


@pytest.mark.parametrize(
    "case", sliced([c for c in GRAD_CASES if "(the internal" not in c.name], 3), ids=str
)
@ONE
@given(data=st.data())
def test_gradients_agree_traced_and_imperative(case: GradCase, data: st.DataObject) -> None:
    """sg.grad of sum(op(*args) * ct) equals the gradients backward() writes."""
    params, drawn = case.draw(data, case.draw_dts)
    args = cast(drawn, case.variants[-1])
    argnums = tuple(i + 1 for i, a in enumerate(args) if a.dtype.kind == "f")
    out = jax.eval_shape(lambda *xs: case.ref(*xs, **params), *args)
    ct = cotangent(out.shape, out.dtype)
    traced = sg.grad(lambda c, *xs: sg.sum(case.ours(*xs, **params) * c), argnums)(ct, *args)
    tensors = _tensors(args, attach=True)
    with sg.autograd.record():
        loss = sg.sum(case.ours(*tensors, **params) * ct)
    loss.backward()
    got = [t.grad.numpy() for t in tensors if isinstance(t, sg.Tensor)]
    assert len(got) == len(traced)
    for i, (g, t) in enumerate(zip(got, traced)):
        _same(g, t, f"{case.name} {params}: d/d float arg {i}")


BINARY = [
    "add",
    "subtract",
    "multiply",
    "divide",
    "power",
    "maximum",
    "minimum",
    "remainder",
    "floor_divide",
    "arctan2",
    "hypot",
    "less",
    "greater_equal",
    "equal",
]
SCALARS = [3.0, -2.5, 2, 0.5]


@pytest.mark.parametrize("name", BINARY)
def test_python_scalar_on_either_side(name: str) -> None:
    """op(x, c) and op(c, x) eagerly, imperatively and traced, for changing c, against
    jax.numpy; gradients of the float results against jax.grad."""
    op, ref = getattr(sg, name), getattr(jnp, name)
    x = np.array([0.75, 1.5, 2.25], np.float32)
    for c in SCALARS:
        for args, xpos in (((x, c), 0), ((c, x), 1)):
            want = ref(*args)
            _same(op(*args), want, f"eager sg.{name}{args}")
            traced = sg.jit(lambda v, c=c, xpos=xpos: op(*((v, c) if xpos == 0 else (c, v))))(x)
            _same(traced, want, f"traced sg.{name} of c={c} at {1 - xpos}")
            t = sg.tensor(x)
            t.attach_grad()
            with sg.autograd.record():
                y = op(*((t, c) if xpos == 0 else (c, t)))
            _same(y.numpy(), want, f"imperative sg.{name} of c={c} at {1 - xpos}")
            if want.dtype.kind == "f":
                with sg.autograd.record():
                    loss = sg.sum(op(*((t, c) if xpos == 0 else (c, t))))
                loss.backward()
                g = jax.grad(lambda v: jnp.sum(ref(*((v, c) if xpos == 0 else (c, v)))))(x)
                np.testing.assert_allclose(
                    t.grad.numpy(), g, rtol=1e-6, err_msg=f"d sg.{name} c={c} at {1 - xpos}"
                )


# ---------------------------------------------------------------- the defects one dispatch fixed


def test_scalar_position_is_part_of_the_eager_key() -> None:
    """`3.0 - x` after `x - 3.0` (and `/`) computes its own program, eagerly and recorded."""
    x = jnp.array([1.0, 2.0], jnp.float32)
    np.testing.assert_array_equal(sg.subtract(x, 3.0), [-2.0, -1.0])
    np.testing.assert_array_equal(sg.subtract(3.0, x), [2.0, 1.0])
    np.testing.assert_allclose(sg.divide(x, 4.0), [0.25, 0.5])
    np.testing.assert_allclose(sg.divide(4.0, x), [4.0, 2.0])
    b = sg.tensor(np.array([1.0, 2.0], np.float32))
    b.attach_grad()
    with sg.autograd.record():
        d1 = b - 3.0
        d2 = 3.0 - b
        loss = sg.sum(d2 * d2)
    np.testing.assert_array_equal(d1.numpy(), [-2.0, -1.0])
    np.testing.assert_array_equal(d2.numpy(), [2.0, 1.0])
    loss.backward()
    np.testing.assert_allclose(b.grad.numpy(), [-4.0, -2.0])


def test_a_branch_on_an_eager_value_takes_the_right_side() -> None:
    """A user's `b - a * b` then an `if` on it: the scalar side must not be swapped."""

    def f(a: Any, b: Any) -> Any:
        d = b - a * b
        return "pos" if float(d) > 0 else "neg"

    assert f(np.float32(0.5), 3.0) == "pos"
    assert f(0.5, np.float32(3.0)) == "pos"
    assert f(2.0, np.float32(3.0)) == "neg"


def test_constructors_under_record_return_tensors_and_at_keeps_the_gradient() -> None:
    t = sg.tensor(np.float32(3.0))
    t.attach_grad()
    with sg.autograd.record():
        h = sg.zeros((3,))
        assert isinstance(h, sg.Tensor)
        assert isinstance(sg.ones((2,)), sg.Tensor) and isinstance(sg.array([1.0, 2.0]), sg.Tensor)
        h = h.at[0].set(t)
        h = h.at[1].add(t * 2.0)
        loss = sg.sum(h * h)
    assert isinstance(h, sg.Tensor)
    loss.backward()
    np.testing.assert_allclose(t.grad.numpy(), 2 * 3.0 + 2 * 6.0 * 2.0)
    assert isinstance(sg.zeros((3,)), jax.Array)  # outside record() constructors stay arrays


@pytest.mark.parametrize("form", ["itself", "tuple", "branch"])
def test_a_head_that_is_an_attached_input_has_gradient_one(form: str) -> None:
    a = sg.tensor(np.array([1.0, 2.0], np.float32))
    a.attach_grad()
    with sg.autograd.record():
        if form == "itself":
            y = a
        elif form == "tuple":
            y = (2 * a, a)[1]
        else:
            y = a if float(sg.sum(a)) > 0 else 2 * a
    y.backward(np.ones(2, np.float32))
    np.testing.assert_array_equal(a.grad.numpy(), [1.0, 1.0])
    s = sg.tensor(np.float32(2.0))
    s.attach_grad()
    with sg.autograd.record():
        z = s
    z.backward()
    assert float(s.grad.numpy()) == 1.0


def test_tensor_and_traced_values_share_one_method_table() -> None:
    """Every operator and method traced values have, Tensors have, and the same function."""
    from srcgrad.ops import methods

    for name, attr in methods.table().items():
        assert getattr(sg.Tensor, name) is getattr(sg.Variable, name), name
    x = sg.tensor(np.array([3.0, 1.0, 2.0], np.float32))
    np.testing.assert_array_equal((~(x > 1.5)).numpy(), [False, True, False])
    np.testing.assert_array_equal(x.sort().numpy(), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(x.cumsum().numpy(), [3.0, 4.0, 6.0])
    np.testing.assert_array_equal((x * 1.4).round().numpy(), [4.0, 1.0, 3.0])
    np.testing.assert_array_equal(x.at[1].set(5.0).numpy(), [3.0, 5.0, 2.0])
    np.testing.assert_array_equal(x.at[0].get().numpy(), 3.0)


def test_one_cache_registry_cleared_by_clear_caches() -> None:
    sg.subtract(jnp.ones(2), 1.0)
    assert sg.cache_info()["eager"] > 0
    sg.clear_caches()
    assert all(n == 0 for n in sg.cache_info().values()), sg.cache_info()


def test_a_changing_python_number_compiles_nothing_new() -> None:
    """Python numbers in operand positions are runtime inputs: an eager call and a recorded
    training step with a learning-rate schedule compile once."""
    from srcgrad.compiled import eager

    x = jnp.ones(3, jnp.float32)
    sg.multiply(x, 0.5)
    before = len(eager.PROGRAMS)
    for i in range(20):
        np.testing.assert_allclose(sg.multiply(x, 0.1 * i), 0.1 * i * np.ones(3), rtol=1e-6)
    assert len(eager.PROGRAMS) == before
    w = sg.tensor(np.ones(3, np.float32))
    w.attach_grad()
    compiles = None
    for i in range(20):
        lr = 1.0 / (i + 1)
        with sg.autograd.record():
            loss = sg.sum(w * w) * lr
        loss.backward()
        np.testing.assert_allclose(w.grad.numpy(), 2 * lr * np.ones(3), rtol=1e-6)
        if i == 1:
            compiles = (sg.autograd.compile_count(), len(eager.PROGRAMS))
    assert (sg.autograd.compile_count(), len(eager.PROGRAMS)) == compiles


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads the RSS from /proc")
def test_memory_stays_flat_over_a_learning_rate_schedule() -> None:
    """1,500 recorded steps with a new Python learning rate each keep memory within 50 MB
    (each new value used to compile and keep a new backward: 3.4 GB)."""
    w = sg.tensor(np.ones((8, 8), np.float32))
    w.attach_grad()
    x = jnp.ones((4, 8), jnp.float32)

    def step(lr: float) -> None:
        with sg.autograd.record():
            loss = sg.mean(sg.tanh(x @ w)) * lr
        loss.backward()
        w.assign(w.numpy() - lr * w.grad.numpy())

    for i in range(100):
        step(1e-3 / (1 + i))
    start = _rss_mb()
    for i in range(100, 1600):
        step(1e-3 / (1 + i))
    assert _rss_mb() - start < 50


def test_a_closed_over_jax_tracer_is_lifted_as_an_input() -> None:
    """The standard JAX idiom: an sg.grad inside jax.jit closing over a traced batch."""
    w = np.full((3, 2), 0.1, np.float32)
    x = np.arange(12, dtype=np.float32).reshape(4, 3) / 10

    def loss(w: Any, x: Any) -> Any:
        return sg.mean(sg.tanh(x @ w) ** 2)

    got = jax.jit(lambda w, x: sg.grad(lambda w: loss(w, x))(w))(w, x)
    want = jax.grad(lambda w: jnp.mean(jnp.tanh(x @ w) ** 2))(w)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    vg = jax.jit(lambda w, x: sg.value_and_grad(lambda w: loss(w, x))(w))(w, 2 * x)
    np.testing.assert_allclose(
        vg[1], jax.grad(lambda w: jnp.mean(jnp.tanh(2 * x @ w) ** 2))(w), rtol=1e-6
    )


@pytest.mark.parametrize("transform", ["jit", "grad", "vmap"])
def test_a_python_number_first_met_inside_a_jax_transform_is_kept_concrete(
    transform: str,
) -> None:
    """A Python number an sg op meets first inside the user's jax.jit (or grad, vmap) is put
    on the device outside the trace: the number is kept for later calls, and a tracer kept
    there made the next eager call with that number fail (UnexpectedTracerError)."""
    c = 2.71875 + {"jit": 0.0, "grad": 1.0, "vmap": 2.0}[transform]
    x = jnp.arange(3.0, dtype=jnp.float32)
    if transform == "jit":
        np.testing.assert_allclose(jax.jit(lambda x: sg.multiply(x, c))(x), x * c)
    elif transform == "grad":
        np.testing.assert_allclose(jax.grad(lambda x: sg.sum(sg.multiply(x, c)))(x), [c] * 3)
    else:
        np.testing.assert_allclose(jax.vmap(lambda x: sg.multiply(x, c))(x), x * c)
    np.testing.assert_allclose(sg.multiply(x, c), x * c)
    t = sg.tensor(x, requires_grad=True)
    with sg.autograd.record():
        loss = sg.sum(t * c)
    loss.backward()
    np.testing.assert_allclose(t.grad.numpy(), [c] * 3)


def test_static_arguments_are_keyed_by_type_and_value() -> None:
    def f(x: Any, flag: Any) -> Any:
        return x * (2.0 if isinstance(flag, bool) else 3.0 if isinstance(flag, int) else 4.0)

    j = sg.jit(f, static_argnums=1)
    x = np.float32(1.0)
    assert [float(j(x, v)) for v in (True, 1, 1.0)] == [2.0, 3.0, 4.0]


# ---------------------------------------------------------------- the fast path of compiled calls

SCALE = 2.0
TABLE = np.array([1.0, 2.0, 3.0])


def _scaled(x: Any) -> Any:
    return sg.sum(x * x) * SCALE


def _reads_table(x: Any) -> Any:
    return sg.sum(x * TABLE)


def test_fast_path_sees_a_rebound_global_and_a_mutated_array(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Repeated calls go through JAX's dispatch, yet a global rebound since is read again,
    and a captured NumPy array mutated in place is fed its new values."""
    g = sg.grad(_scaled)
    x = np.array([1.0, -2.0])
    for _ in range(3):
        np.testing.assert_allclose(g(x), 4.0 * x)
    assert g._fast not in (None, False)
    monkeypatch.setitem(globals(), "SCALE", 3.0)
    np.testing.assert_allclose(g(x), 6.0 * x)
    h = sg.grad(_reads_table)
    np.testing.assert_allclose(h(np.ones(3)), TABLE)
    TABLE[0] = 10.0
    try:
        np.testing.assert_allclose(h(np.ones(3)), [10.0, 2.0, 3.0])
        assert h._fast is False  # captured arrays take the full path
    finally:
        TABLE[0] = 1.0


def test_fast_path_errors_name_the_users_line() -> None:
    def f(x: Any) -> Any:
        return sg.sum(x.reshape(4, 2))

    with pytest.raises(
        sg.ShapeError, match=r"cannot reshape .*\(at .*test_dispatch.py:\d+\)$"
    ) as info:
        sg.grad(f)(np.ones(3))
    assert not any("JAX has removed" in n for n in getattr(info.value, "__notes__", []))
