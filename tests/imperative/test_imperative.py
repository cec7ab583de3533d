"""Imperative mode: sg.Tensor, sg.autograd (record/backward/grad/tape), sg.nn.Linear,
sg.optim.SGD."""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import srcgrad as sg
from srcgrad.compiled import eager
from srcgrad.imperative import autograd
from srcgrad.base.errors import GradientError, SrcgradError

RNG = np.random.default_rng(0)


def _line() -> int:
    """The caller's line number."""
    return sys._getframe(1).f_lineno


def _assert_at(err: SrcgradError, line: int) -> None:
    assert err.loc is not None and err.loc.filename == __file__ and err.loc.lineno == line, err.loc


def _fd_check(f_np, args: list[np.ndarray], grads: list[np.ndarray], eps: float = 1e-6) -> None:
    """Central finite differences of the float64 function `f_np` along random directions
    agree with the directional derivative from `grads`."""
    for _ in range(3):
        vs = [RNG.standard_normal(a.shape) for a in args]
        plus = f_np(*[a + eps * v for a, v in zip(args, vs)])
        minus = f_np(*[a - eps * v for a, v in zip(args, vs)])
        fd = (plus - minus) / (2 * eps)
        an = sum(float(np.sum(g * v)) for g, v in zip(grads, vs))
        assert abs(fd - an) <= 1e-6 * max(1.0, abs(an)), (fd, an)


# ---------------------------------------------------------------- gradients


def _model(x, w, b, path: tuple | None = None):
    """Python `if` and `while` on values (on Tensors); given the `path` they took, the same
    function without them, for jax.grad to trace."""
    np_ = sg if isinstance(x, sg.Tensor) else jnp
    h = np_.tanh(x @ w + b)
    halve = float((h * h).sum()) > 1.0 if path is None else path[0]
    if halve:
        h = h * 0.5
    n = 0
    while (float((h * h).sum()) > 0.05 and n < 10) if path is None else n < path[1]:
        h = h * 0.8
        n += 1
    return (h**3).mean() + (w * w).sum(), (halve, n)


def test_gradients_equal_jax_grad_with_python_control_flow() -> None:
    xv, wv, bv = RNG.standard_normal((4, 3)), RNG.standard_normal((3, 5)), RNG.standard_normal(5)
    x, w, b = sg.tensor(xv), sg.tensor(wv), sg.tensor(bv)
    w.attach_grad()
    b.attach_grad()
    with sg.autograd.record():
        loss, path = _model(x, w, b)
    assert path[1] > 0  # the loop ran on values
    loss.backward()
    gw, gb = jax.grad(lambda *a: _model(*a, path=path)[0], argnums=(1, 2))(
        jnp.asarray(xv), jnp.asarray(wv), jnp.asarray(bv)
    )
    np.testing.assert_allclose(w.grad.numpy(), gw, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), gb, rtol=1e-10, atol=1e-12)
    assert x.grad is None  # not attached: no gradient


#: (name, f(np_, a, b)) for np_ = sg and jnp: ops with lists, keywords, broadcasting,
#: indexing, reductions over axes and composite ops, on Tensors a (3, 4) and b (4,).
CASES = [
    ("broadcast", lambda np_, a, b: np_.sum(a * b + b**2)),
    ("concatenate", lambda np_, a, b: np_.sum(np_.concatenate([a, a * 2.0], axis=0) ** 2)),
    ("stack_where", lambda np_, a, b: np_.sum(np_.where(a > 0, np_.stack([b, b, b]), a * a))),
    ("index", lambda np_, a, b: np_.sum(a[1:, ::2] * b[None, :2]) + a[0, 3]),
    ("reduce_axes", lambda np_, a, b: np_.sum(np_.max(a, axis=1) * np_.mean(a, axis=1))),
    ("softmax", lambda np_, a, b: np_.sum(np_.exp(a - np_.max(a, axis=-1, keepdims=True)) @ b)),
    ("reshape_T", lambda np_, a, b: np_.sum(np_.reshape(a, (2, 6)).T @ np_.ones((2, 2)))),
    ("sqrt_abs", lambda np_, a, b: np_.sum(np_.sqrt(a * a + 1.0) / (1.0 + np_.abs(b)))),
]


@pytest.mark.parametrize("name,f", CASES, ids=[c[0] for c in CASES])
def test_ops_on_tensors_match_jax_grad(name: str, f) -> None:
    av, bv = RNG.standard_normal((3, 4)), RNG.standard_normal(4)
    a, b = sg.tensor(av), sg.tensor(bv)
    a.attach_grad()
    b.attach_grad()
    with sg.autograd.record():
        out = f(sg, a, b)
    out.backward()
    ga, gb = jax.grad(lambda x, y: f(jnp, x, y), argnums=(0, 1))(jnp.asarray(av), jnp.asarray(bv))
    expected = float(f(jnp, jnp.asarray(av), jnp.asarray(bv)))
    np.testing.assert_allclose(out.item(), expected, rtol=1e-12)
    np.testing.assert_allclose(a.grad.numpy(), ga, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), gb, rtol=1e-10, atol=1e-12)


def test_gradients_match_finite_differences() -> None:
    xv, wv = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2))

    def f(x, w):
        return sg.sum(sg.log_softmax(sg.tanh(x @ w) * 2.0, axis=-1) * x[:, :2]) + sg.max(w)

    w = sg.tensor(wv)
    x = sg.tensor(xv)
    w.attach_grad()
    x.attach_grad()
    with sg.autograd.record():
        loss = f(x, w)
    loss.backward()
    with sg.autograd.pause():
        _fd_check(
            lambda a, b: f(sg.tensor(a), sg.tensor(b)).item(),
            [xv, wv],
            [x.grad.numpy(), w.grad.numpy()],
        )


def test_head_grad_for_a_non_scalar_head() -> None:
    xv, hv = RNG.standard_normal((2, 3)), RNG.standard_normal((2, 3))
    x = sg.tensor(xv)
    x.attach_grad()
    with sg.autograd.record():
        y = sg.sin(x) * x
    y.backward(head_grad=hv)
    _, vjp = jax.vjp(lambda a: jnp.sin(a) * a, jnp.asarray(xv))
    np.testing.assert_allclose(x.grad.numpy(), vjp(jnp.asarray(hv))[0], rtol=1e-12)


def test_several_heads_and_autograd_grad_returns_without_writing() -> None:
    xv = RNG.standard_normal(3)
    x = sg.tensor(xv)
    x.attach_grad()
    with sg.autograd.record():
        a = sg.sum(x**2)
        b = sg.exp(x)
    (gx,) = sg.autograd.grad([a, b], [x], head_grads=[None, np.ones(3)], retain_graph=True)
    np.testing.assert_allclose(gx.numpy(), 2 * xv + np.exp(xv), rtol=1e-12)
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros(3))  # grad() does not write .grad
    sg.autograd.backward([a, b], [2.0, np.full(3, 0.5)])
    np.testing.assert_allclose(x.grad.numpy(), 4 * xv + 0.5 * np.exp(xv), rtol=1e-12)


def test_grad_req_add_accumulates_and_null_takes_none() -> None:
    xv = RNG.standard_normal(4)
    x, z = sg.tensor(xv), sg.tensor(xv + 1.0)
    x.attach_grad("add")
    z.attach_grad("null")
    for _ in range(3):
        with sg.autograd.record():
            loss = sg.sum(sg.cos(x) * z)
        loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 * (-np.sin(xv) * (xv + 1.0)), rtol=1e-12)
    assert z.grad is None
    x.attach_grad("write")  # a fresh variable: its gradient starts again
    with sg.autograd.record():
        loss = sg.sum(sg.cos(x) * z)
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), -np.sin(xv) * (xv + 1.0), rtol=1e-12)


def test_retain_graph_twice_and_freed_without_it() -> None:
    xv = RNG.standard_normal(3)
    x = sg.tensor(xv)
    x.attach_grad("add")
    with sg.autograd.record():
        y = sg.sum(sg.tanh(x))
    y.backward(retain_graph=True)
    y.backward(retain_graph=True)
    np.testing.assert_allclose(x.grad.numpy(), 2 * (1 - np.tanh(xv) ** 2), rtol=1e-12)
    y.backward()  # frees the tape
    line = _line() + 2
    with pytest.raises(GradientError, match="not in a computational graph") as e:
        y.backward()
    assert "retain_graph=True" in str(e.value) and "sg.autograd.record()" in str(e.value)
    _assert_at(e.value, line)


def test_create_graph_gives_second_derivatives() -> None:
    xv, wv = RNG.standard_normal(3), RNG.standard_normal((3, 3))

    def f(x, w):
        return (sg if isinstance(x, sg.Tensor) else jnp).tanh(x @ w).sum() * (x**2).sum()

    x, w = sg.tensor(xv), sg.tensor(wv)
    x.attach_grad()
    with sg.autograd.record():
        y = f(x, w)
        (gx,) = sg.autograd.grad(y, [x], create_graph=True)
        z = (gx * gx).sum()
    z.backward()
    jf = lambda a: jnp.sum(jax.grad(f)(a, jnp.asarray(wv)) ** 2)
    np.testing.assert_allclose(
        gx.numpy(), jax.grad(f)(jnp.asarray(xv), jnp.asarray(wv)), rtol=1e-10
    )
    np.testing.assert_allclose(x.grad.numpy(), jax.grad(jf)(jnp.asarray(xv)), rtol=1e-9)
    with sg.autograd.pause():
        _fd_check(lambda a: float(jf(jnp.asarray(a))), [xv], [x.grad.numpy()])


def test_create_graph_backward_writes_recorded_grads() -> None:
    xv = RNG.standard_normal(4)
    x = sg.tensor(xv)
    x.attach_grad()
    with sg.autograd.record():
        y = sg.sum(x**3)
    y.backward(create_graph=True)
    g = x.grad
    np.testing.assert_allclose(g.numpy(), 3 * xv**2, rtol=1e-12)
    with sg.autograd.record():
        s = sg.sum(g)  # continues on y's tape: the gradient's ops are on it
    s.backward()
    np.testing.assert_allclose(x.grad.numpy(), 6 * xv, rtol=1e-12)


# ---------------------------------------------------------------- tape and recording


def test_nothing_is_recorded_outside_record() -> None:
    x = sg.tensor(np.ones(3))
    x.attach_grad()
    y = sg.sum(x * 2.0)
    assert isinstance(y, sg.Tensor) and y.item() == 6.0
    line = _line() + 2
    with pytest.raises(GradientError, match="not in a computational graph") as e:
        y.backward()
    _assert_at(e.value, line)
    with sg.autograd.record():
        with sg.autograd.pause():
            z = sg.sum(x)
        assert sg.autograd.is_recording()
    assert not sg.autograd.is_recording()
    with pytest.raises(GradientError):
        z.backward()


def test_tape_is_a_printable_program_reset_per_record() -> None:
    x = sg.tensor(np.ones((2, 3)), name="x")
    x.attach_grad()
    with sg.autograd.record():
        y = sg.mean(sg.exp(x) @ np.ones((3, 4)))
    prog = sg.autograd.tape()
    assert isinstance(prog, sg.Program)
    text = str(prog)
    assert "exp" in text and "matmul" in text and "test_imperative.py" in text
    assert [v.kind for v in prog.inputs] == ["param", "data"]  # x, and the array it meets
    with sg.autograd.record():
        sg.sin(x)
    assert sg.autograd.tape() is not prog  # a fresh tape per outer record()
    assert [op.type for op in sg.autograd.tape().global_block().ops] == ["sin"]
    y.backward()  # the earlier tape is still there
    np.testing.assert_allclose(x.grad.numpy(), np.exp(np.ones((2, 3))) * 4 / 8, rtol=1e-12)


def test_tensors_from_an_earlier_recording_keep_their_history() -> None:
    x = sg.tensor(np.array([1.0, 2.0]))
    x.attach_grad()
    with sg.autograd.record():
        y = x * sg.exp(x)
    with sg.autograd.record():
        z = sg.sum(y * x)  # y's ops are copied onto this tape
    assert [op.type for op in sg.autograd.tape().global_block().ops] == [
        "exp",
        "multiply",
        "multiply",
        "reduce_sum",
    ]
    z.backward()
    xv = np.array([1.0, 2.0])
    np.testing.assert_allclose(x.grad.numpy(), (2 * xv + xv**2) * np.exp(xv), rtol=1e-12)
    y.backward(head_grad=np.ones(2))  # y's own tape is still there: then it is freed
    with sg.autograd.record():
        z = sg.sum(y * x)  # y's tape is freed: y is an input, fed its value
    z.backward()
    np.testing.assert_allclose(x.grad.numpy(), xv * np.exp(xv), rtol=1e-12)


def test_tensor_api() -> None:
    t = sg.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert t.shape == (2, 2) and t.dtype == np.float64 and t.ndim == 2
    np.testing.assert_array_equal(t.numpy(), [[1, 2], [3, 4]])
    np.testing.assert_array_equal((1.0 - t).numpy(), [[0, -1], [-2, -3]])
    np.testing.assert_array_equal((t @ t).numpy(), [[7, 10], [15, 22]])
    np.testing.assert_array_equal(t[1].numpy(), [3, 4])
    np.testing.assert_array_equal(t.T.numpy(), [[1, 3], [2, 4]])
    np.testing.assert_array_equal((np.ones(2) + t).numpy(), [[2, 3], [4, 5]])
    np.testing.assert_array_equal(np.asarray(t), [[1, 2], [3, 4]])
    np.testing.assert_array_equal(jax.jit(lambda a: a * 2)(t).numpy(), [[2, 4], [6, 8]])
    assert sg.tensor(np.arange(3)).dtype.kind == "i"
    with pytest.raises(SrcgradError, match="floating-point"):
        sg.tensor(np.arange(3)).attach_grad()
    with pytest.raises(SrcgradError, match="grad_req"):
        t.attach_grad("sometimes")


# ---------------------------------------------------------------- layers, optimizers, caching


def _data(n: int = 32) -> tuple[sg.Tensor, sg.Tensor]:
    xv = RNG.standard_normal((n, 3))
    return sg.tensor(xv), sg.tensor(np.sin(xv) @ RNG.standard_normal((3, 3)))


def test_dynet_style_loop_reduces_the_loss_and_compiles_once() -> None:
    x, target = _data()
    l1, l2 = sg.nn.Linear(3, 16, act="relu", seed=1), sg.nn.Linear(16, 3, seed=2)
    sgd = sg.optim.SGD(0.1)
    losses, cached = [], []
    before = sg.autograd.compile_count()
    for _ in range(50):
        with sg.autograd.record():  # the tape is reset every iteration
            loss = sg.mean((l2(l1(x)) - target) ** 2)
        losses.append(loss.item())
        loss.backward()
        sgd(l1.params())
        sgd(l2.params())
        cached.append(len(eager.PROGRAMS))
    assert sg.autograd.compile_count() - before == 1
    assert len(set(cached)) == 1  # the forward ops' eager programs are reused as well
    assert losses[-1] < 0.5 * losses[0]
    assert all(b < a for a, b in zip(losses[:10], losses[1:11]))


def test_compiled_backward_is_keyed_on_structure_not_values() -> None:
    w = sg.tensor(RNG.standard_normal((3, 2)))
    w.attach_grad()
    before = sg.autograd.compile_count()
    for scale in (1.0, 2.0, 3.0):
        xv = RNG.standard_normal((4, 3)) * scale
        with sg.autograd.record():
            loss = sg.sum(sg.tanh(sg.tensor(xv) @ w))
        loss.backward()
        g = jax.grad(lambda a: jnp.sum(jnp.tanh(jnp.asarray(xv) @ a)))(jnp.asarray(w.numpy()))
        np.testing.assert_allclose(w.grad.numpy(), g, rtol=1e-12)
    assert sg.autograd.compile_count() - before == 1
    with sg.autograd.record():  # another batch size is another structure
        loss = sg.sum(sg.tanh(sg.tensor(RNG.standard_normal((5, 3))) @ w))
    loss.backward()
    with sg.autograd.record():  # another constant is another structure
        loss = sg.sum(sg.tanh(sg.tensor(RNG.standard_normal((5, 3))) @ w) * 3.0)
    loss.backward()
    assert sg.autograd.compile_count() - before == 3


def test_linear_layer() -> None:
    layer = sg.nn.Linear(4, 2, act="tanh", seed=0)
    w, b = layer.params()
    assert w.shape == (2, 4) and b.shape == (2,) and w.grad_req == b.grad_req == "write"
    xv = RNG.standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_allclose(
        layer(sg.tensor(xv)).numpy(), np.tanh(xv @ w.numpy().T + b.numpy()), rtol=1e-6
    )
    assert sg.nn.relu is sg.relu
    with pytest.raises(SrcgradError, match="unknown activation"):
        sg.nn.Linear(2, 2, act="swishy")


def test_linear_layer_is_one_eager_call_and_takes_any_activation() -> None:
    xv = RNG.standard_normal((5, 3))
    l1, l2 = sg.nn.Linear(3, 4, act="tanh", seed=1), sg.nn.Linear(4, 2, act=None, seed=2)
    l3 = sg.nn.Linear(2, 2, act=lambda t: t * 0.5 if float(sg.sum(t)) > 0 else t * 2.0, seed=3)
    for layer in (l1, l2, l3):
        for p in layer.params():
            p.assign(p.astype(np.float64))
    x = sg.tensor(xv)
    with sg.autograd.record():
        h = l2(l1(x))
        loss = sg.sum(l3(h) ** 2)
    tape = loss._tape
    recorded = {op.type: op for op in tape.program.global_block().ops[:4]}
    assert list(recorded) == ["transpose", "matmul", "add", "tanh"]  # x @ w.T + b
    assert tape.num_by_var(recorded["matmul"].outputs[0]) is None  # inside l1's one call
    assert tape.num_by_var(recorded["tanh"].outputs[0]) is not None  # its result, recorded
    loss.backward()
    pre = h.numpy() @ l3.weight.numpy().T + l3.bias.numpy()  # what l3's activation looked at
    factor = 0.5 if pre.sum() > 0 else 2.0

    def f(ps: list) -> jax.Array:
        (w1, b1), (w2, b2), (w3, b3) = ps
        out = (jnp.tanh(jnp.asarray(xv) @ w1.T + b1) @ w2.T + b2) @ w3.T + b3
        return jnp.sum((out * factor) ** 2)

    params = [[jnp.asarray(p.numpy()) for p in layer.params()] for layer in (l1, l2, l3)]
    want = jax.grad(f)(params)
    for layer, ws in zip((l1, l2, l3), want):
        for p, w in zip(layer.params(), ws):
            np.testing.assert_allclose(p.grad.numpy(), w, rtol=1e-12)


def test_optax_works_on_tensor_grads() -> None:
    x, target = _data()
    layer = sg.nn.Linear(3, 3, seed=3)
    opt = optax.adam(0.05)
    params = layer.params()
    state = opt.init(params)  # a Tensor is a pytree of its array
    first = None
    for _ in range(20):
        with sg.autograd.record():
            loss = sg.mean((layer(x) - target) ** 2)
        loss.backward()
        first = first if first is not None else loss.item()
        updates, state = opt.update([p.grad for p in params], state, params)
        for p, new in zip(params, optax.apply_updates(params, updates)):
            p.assign(new)
    assert all(p.grad_req == "write" for p in params)
    assert loss.item() < 0.7 * first


def test_enable_checks_verifies_the_tape(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SRCGRAD_ENABLE_CHECKS", "1")
    x = sg.tensor(RNG.standard_normal(3))
    x.attach_grad()
    with sg.autograd.record():
        y = sg.sum(sg.where(x > 0, x * x, -x))
        (g,) = sg.autograd.grad(y, [x], create_graph=True)
        z = sg.sum(g * x)
    z.backward()
    xv = x.numpy()
    np.testing.assert_allclose(x.grad.numpy(), np.where(xv > 0, 4 * xv, -1.0), rtol=1e-12)


# ---------------------------------------------------------------- errors


def test_error_non_scalar_head_without_head_grad() -> None:
    x = sg.tensor(np.ones((2, 3)))
    x.attach_grad()
    with sg.autograd.record():
        y = x * 2.0
    line = _line() + 2
    with pytest.raises(GradientError, match=r"not a scalar .*pass head_grad") as e:
        y.backward()
    _assert_at(e.value, line)


def test_error_head_grad_of_the_wrong_shape() -> None:
    x = sg.tensor(np.ones((2, 3)))
    x.attach_grad()
    with sg.autograd.record():
        y = x * 2.0
    line = _line() + 2
    with pytest.raises(GradientError, match=r"head gradient has shape \(3, 2\).*\(2, 3\)") as e:
        y.backward(head_grad=np.ones((3, 2)))
    _assert_at(e.value, line)


def test_error_gradient_with_respect_to_a_tensor_without_attach_grad() -> None:
    x, c = sg.tensor(np.ones(3)), sg.tensor(np.ones(3))
    x.attach_grad()
    with sg.autograd.record():
        y = sg.sum(x * c)
    line = _line() + 2
    with pytest.raises(GradientError, match="2-th variable because it does not require") as e:
        sg.autograd.grad(y, [x, c])
    _assert_at(e.value, line)


def test_error_no_input_requires_gradient() -> None:
    c = sg.tensor(np.ones(3))
    with sg.autograd.record():
        y = sg.sum(c * c)
    line = _line() + 2
    with pytest.raises(GradientError, match="no inputs .* require gradients") as e:
        y.backward()
    _assert_at(e.value, line)


def test_error_heads_from_two_recordings() -> None:
    x = sg.tensor(np.ones(3))
    x.attach_grad()
    with sg.autograd.record():
        a = sg.sum(x)
    with sg.autograd.record():
        b = sg.sum(x * x)
    line = _line() + 2
    with pytest.raises(GradientError, match="another record\\(\\) scope") as e:
        sg.autograd.backward([a, b])
    _assert_at(e.value, line)


def test_error_tape_needs_a_recording() -> None:
    autograd._state.tape = None
    with pytest.raises(SrcgradError, match="nothing was recorded"):
        sg.autograd.tape()


def test_a_tensor_closed_over_by_a_traced_function_is_fed_its_current_value() -> None:
    w = sg.tensor(np.ones(3))
    g = sg.grad(lambda x: sg.sum(sg.sin(x) * w))
    x = np.linspace(0.0, 1.0, 3)
    np.testing.assert_allclose(g(x), np.cos(x), rtol=1e-12)
    w.assign(np.full(3, 2.0))  # updated in place: the compiled gradient reads it again
    np.testing.assert_allclose(g(x), 2 * np.cos(x), rtol=1e-12)
    assert g.compilations == 1


def test_transforms_take_tensors_and_are_not_recorded() -> None:
    t = sg.tensor(np.array([0.1, 0.2]))
    t.attach_grad()
    with sg.autograd.record():
        g = sg.grad(lambda x: sg.sum(sg.sin(x)))(t)  # traced on a Variable, returns an array
        j = jax.jit(lambda a: a * 2.0)(t)  # a Tensor of a JAX tracer inside: not recorded
        y = sg.sum(t * t)
    np.testing.assert_allclose(np.asarray(g), np.cos([0.1, 0.2]), rtol=1e-12)
    np.testing.assert_allclose(j.numpy(), [0.2, 0.4])
    assert [op.type for op in sg.autograd.tape().global_block().ops] == ["multiply", "reduce_sum"]
    y.backward()
    np.testing.assert_allclose(t.grad.numpy(), [0.2, 0.4])


def test_benchmark_runs_at_a_tiny_size() -> None:
    """benchmarks/imperative.py end to end at a tiny size (no timing is asserted)."""
    import math
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from benchmarks import imperative
    from benchmarks.harness import Settings

    rows = imperative.run_size(
        "tiny", [4, 4, 2], 2, Settings(reps=1, first_reps=1, sample_s=0.0), 3
    )
    by_figure = {(r.figure, r.peer_name): r for r in rows}
    assert by_figure[("backward compiles, 3 steps", "jax.jit")].srcgrad == 1
    assert by_figure[("compiles in steps 2-3 (jax.jit: 0)", "jax.jit")].srcgrad == 0
    assert by_figure[("max abs. grad difference", "jax")].srcgrad < 1e-6
    assert all(math.isfinite(r.srcgrad) for r in rows)
    assert {("train step", "jax eager"), ("backward", "jax.jit vjp")} <= set(by_figure)
