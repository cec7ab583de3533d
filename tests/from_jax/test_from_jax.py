"""sg.from_jax: JAX functions (jax.nn, optax, jnp models, lax control flow) translated
through their jaxprs.

Each corpus case is an ordinary JAX function. Its translation must give f's own values (run
on arrays, eagerly through sg.from_jax), and `sg.grad(sg.from_jax(f))` must equal `jax.grad(f)`
where JAX can differentiate f and float64 finite differences everywhere (check_grads); the
loop cases are checked to second order. Loops JAX refuses to reverse (a while loop, a
fori_loop with traced bounds) are checked against finite differences only.
"""

from __future__ import annotations

import inspect
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax import lax
from jax.experimental import io_callback

import srcgrad as sg
from srcgrad.base.errors import SrcgradError
from srcgrad.from_jax.translate import RULES
from srcgrad.testing import check_grads

from support.util import sliced

RNG = np.random.default_rng(14)


def arr(*shape: int, scale: float = 1.0, shift: float = 0.0) -> np.ndarray:
    return RNG.standard_normal(shape) * scale + shift


def away(*shape: int, gap: float = 0.1) -> np.ndarray:
    """Normal values at least `gap` from zero (kinks of relu, abs, ... sit at zero)."""
    a = arr(*shape)
    return np.where(np.abs(a) < gap, np.copysign(gap, a) + a, a)


# ---------------------------------------------------------------- the corpus


@dataclass
class Case:
    """A JAX function and its arguments; `argnums` are differentiated (others passed as is)."""

    name: str
    fn: Callable[..., Any]
    args: tuple
    argnums: tuple[int, ...] | None = None
    jax_can: bool = True  # False: JAX refuses reverse mode (dynamic loops), FD only
    order: int = 1
    tol: dict = field(default_factory=dict)

    def __str__(self) -> str:
        return self.name


def _transformer_block(x: jax.Array, p: dict) -> jax.Array:
    """Pre-norm causal self-attention and a GELU MLP, in jax.numpy."""

    def norm(h: jax.Array, g: jax.Array) -> jax.Array:
        mu = h.mean(-1, keepdims=True)
        return g * (h - mu) / jnp.sqrt(h.var(-1, keepdims=True) + 1e-5)

    t, d = x.shape
    heads = 2
    h = norm(x, p["g1"])
    q, k, v = (jnp.einsum("td,de->te", h, p[n]).reshape(t, heads, d // heads) for n in "qkv")
    s = jnp.einsum("thc,shc->hts", q, k) / np.sqrt(d // heads)
    s = jnp.where(jnp.tril(jnp.ones((t, t), bool)), s, -1e9)
    a = jnp.einsum("hts,shc->thc", jax.nn.softmax(s, axis=-1), v).reshape(t, d)
    x = x + a @ p["o"]
    return x + jax.nn.gelu(norm(x, p["g2"]) @ p["w1"]) @ p["w2"]


def _cnn(x: jax.Array, w1: jax.Array, w2: jax.Array, dense: jax.Array) -> jax.Array:
    dn = ("NHWC", "HWIO", "NHWC")
    h = jax.nn.relu(lax.conv_general_dilated(x, w1, (1, 1), "SAME", dimension_numbers=dn))
    h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    h = jnp.tanh(
        lax.conv_general_dilated(
            h, w2, (2, 2), ((1, 1), (0, 1)), rhs_dilation=(1, 1), dimension_numbers=dn
        )
    )
    h = lax.reduce_window(h, 0.0, lax.add, (1, 2, 2, 1), (1, 1, 1, 1), "SAME") / 4.0
    return jax.nn.log_softmax(h.reshape(h.shape[0], -1) @ dense)


def _rnn(h0: jax.Array, xs: jax.Array, w: jax.Array, u: jax.Array) -> jax.Array:
    def step(h: jax.Array, x: jax.Array) -> tuple:
        h = jnp.tanh(h @ w + x @ u)
        return h, jnp.sum(h**2)

    h, ys = lax.scan(step, h0, xs)
    return jnp.sum(h) + jnp.sum(ys)


def _newton_cbrt(t: jax.Array) -> jax.Array:
    """Newton's method for y**3 = t, to a tolerance (a data-dependent trip count)."""

    def body(c: tuple) -> tuple:
        y, _ = c
        y_new = y - (y**3 - t) / (3 * y**2)
        return y_new, jnp.max(jnp.abs(y_new - y))

    return lax.while_loop(lambda c: c[1] > 1e-12, body, (jnp.ones_like(t), jnp.inf))[0]


def _fixed_point(w: jax.Array, b: jax.Array) -> jax.Array:
    """z = tanh(W z + b), iterated to convergence (W is a contraction)."""

    def body(c: tuple) -> tuple:
        z, _, n = c
        z_new = jnp.tanh(w @ z + b)
        return z_new, jnp.linalg.norm(z_new - z), n + 1

    z, _, _ = lax.while_loop(
        lambda c: (c[1] > 1e-10) & (c[2] < 500),
        body,
        (jnp.zeros_like(b), jnp.asarray(1.0, b.dtype), 0),
    )
    return z


def _adaptive_ode(k: jax.Array, y0: jax.Array) -> jax.Array:
    """dy/dt = -k y + sin(y), Heun steps with an embedded-error step-size controller, to T=1."""

    def f(y: jax.Array) -> jax.Array:
        return -k * y + jnp.sin(y)

    def body(c: tuple) -> tuple:
        t, y, h = c
        h = jnp.minimum(h, 1.0 - t)
        k1 = f(y)
        k2 = f(y + h * k1)
        y_new = y + h / 2 * (k1 + k2)
        err = jnp.max(jnp.abs(h / 2 * (k2 - k1))) + 1e-12
        h_next = h * jnp.clip(0.9 * jnp.sqrt(1e-5 / err), 0.3, 2.0)
        return t + h, y_new, h_next

    return lax.while_loop(
        lambda c: c[0] < 1.0 - 1e-9,
        body,
        (jnp.asarray(0.0, y0.dtype), y0, jnp.asarray(0.05, y0.dtype)),
    )[1]


def _fori_static(x: jax.Array, w: jax.Array) -> jax.Array:
    return lax.fori_loop(0, 4, lambda i, h: jnp.sin(h @ w) + i * 0.1, x)


def _fori_dynamic(x: jax.Array, w: jax.Array, n: jax.Array) -> jax.Array:
    return lax.fori_loop(0, n, lambda i, h: jnp.sin(h @ w) * (1.0 + 0.1 * i), x)


def _cond(x: jax.Array, y: jax.Array) -> jax.Array:
    return lax.cond(jnp.sum(x) > 0, lambda a, b: jnp.sin(a) * b, lambda a, b: a * jnp.exp(b), x, y)


def _switch(x: jax.Array, i: jax.Array) -> jax.Array:
    return lax.switch(i, [jnp.sin, lambda v: v**3, lambda v: jnp.tanh(v) * 2.0], x)


def _while_in_scan(xs: jax.Array, c: jax.Array) -> jax.Array:
    """A dynamic while loop nested in a scan: halve each entry until it is below c."""

    def step(acc: jax.Array, x: jax.Array) -> tuple:
        v = lax.while_loop(lambda v: jnp.abs(v) > c, lambda v: v * 0.5 + 0.01 * c, x)
        return acc + v**2, v

    acc, vs = lax.scan(step, jnp.zeros((), xs.dtype), xs)
    return acc + jnp.sum(vs)


def _dynamic_slices(x: jax.Array, u: jax.Array) -> jax.Array:
    def body(i: int, a: jax.Array) -> jax.Array:
        row = lax.dynamic_slice(a, (i, 0), (1, a.shape[1]))
        return lax.dynamic_update_slice(a, jnp.tanh(row + u), (i + 1, 0))

    return lax.fori_loop(0, x.shape[0] - 1, body, x)


@jax.custom_vjp
def _clip_grad_sin(x: jax.Array) -> jax.Array:
    return jnp.sin(x)


_clip_grad_sin.defvjp(lambda x: (jnp.sin(x), x), lambda x, g: (g * jnp.cos(x),))


@jax.custom_jvp
def _softabs(x: jax.Array) -> jax.Array:
    return jnp.sqrt(x * x + 1.0)


_softabs.defjvps(lambda g, ans, x: g * x / ans)


def _diag_solve(d: jax.Array, b: jax.Array) -> jax.Array:
    return lax.custom_linear_solve(lambda v: d * v, b, solve=lambda mv, r: r / d, symmetric=True)


LABELS = np.array([2, 0, 1])
IDX = np.array([[0, 3], [3, 1]])

CORPUS: list[Case] = [
    # jax.nn activations
    Case("relu", lambda x: jax.nn.relu(x), (away(3, 4),)),
    Case("relu6", lambda x: jax.nn.relu6(x * 4), (away(3, 4),)),
    Case("sigmoid", jax.nn.sigmoid, (arr(5),)),
    Case("softplus", jax.nn.softplus, (arr(5),)),
    Case("silu", jax.nn.silu, (arr(5),)),
    Case("gelu_tanh", lambda x: jax.nn.gelu(x, approximate=True), (arr(5),)),
    Case("gelu_erf", lambda x: jax.nn.gelu(x, approximate=False), (arr(5),)),
    Case(
        "elu_selu_celu", lambda x: jax.nn.elu(x) + jax.nn.selu(x) + jax.nn.celu(x, 0.5), (away(6),)
    ),
    Case(
        "leaky_relu_hard_tanh", lambda x: jax.nn.leaky_relu(x) + jax.nn.hard_tanh(2 * x), (away(6),)
    ),
    Case("log_sigmoid_mish", lambda x: jax.nn.log_sigmoid(x) * jax.nn.mish(x), (arr(6),)),
    Case(
        "softmax_log_softmax",
        lambda x: jax.nn.softmax(x) * jax.nn.log_softmax(x, axis=0),
        (arr(3, 4),),
    ),
    Case("glu_squareplus", lambda x: jax.nn.glu(x) + jax.nn.squareplus(x[:, :2]), (arr(2, 4),)),
    Case("logsumexp", lambda x: jax.scipy.special.logsumexp(x, axis=1), (arr(3, 4),)),
    Case("standardize", lambda x: jax.nn.standardize(x, axis=-1), (arr(3, 4),)),
    # losses (optax, and jnp)
    Case(
        "optax_l2_huber",
        lambda p, t: jnp.sum(optax.l2_loss(p, t) + optax.huber_loss(p, t, delta=0.5)),
        (arr(6), arr(6)),
    ),
    Case(
        "optax_softmax_xent",
        lambda z, y: optax.softmax_cross_entropy(z, y).mean(),
        (arr(3, 4), jax.nn.softmax(arr(3, 4))),
    ),
    Case(
        "optax_integer_labels",
        lambda z: optax.softmax_cross_entropy_with_integer_labels(z, LABELS).mean(),
        (arr(3, 4),),
    ),
    Case(
        "optax_sigmoid_bce",
        lambda z, y: optax.sigmoid_binary_cross_entropy(z, y).sum(),
        (arr(5), np.array([0.0, 1.0, 1.0, 0.0, 0.3])),
    ),
    Case(
        "optax_cosine_log_cosh",
        lambda a, b: optax.cosine_similarity(a, b).sum() + optax.log_cosh(a, b).sum(),
        (arr(2, 4), arr(2, 4)),
    ),
    Case(
        "optax_hinge_kl",
        lambda s, q: (
            optax.hinge_loss(s, np.array([1.0, -1.0, 1.0])).sum()
            + optax.kl_divergence(jax.nn.log_softmax(q), jax.nn.softmax(s)).sum()
        ),
        (away(3), arr(3)),
    ),
    Case(
        "mse_one_hot",
        lambda z: jnp.mean((jax.nn.softmax(z) - jax.nn.one_hot(LABELS, 4)) ** 2),
        (arr(3, 4),),
    ),
    # models written in jax.numpy
    Case(
        "mlp",
        lambda x, w1, w2: jnp.tanh(jnp.tanh(x @ w1) @ w2).sum(),
        (arr(4, 3), arr(3, 5), arr(5, 2)),
    ),
    Case(
        "transformer_block",
        _transformer_block,
        (
            arr(4, 4),
            {
                "g1": arr(4, shift=1.0),
                "g2": arr(4, shift=1.0),
                "q": arr(4, 4),
                "k": arr(4, 4),
                "v": arr(4, 4),
                "o": arr(4, 4),
                "w1": arr(4, 8),
                "w2": arr(8, 4),
            },
        ),
        tol={"rtol": 1e-7},
    ),
    Case("cnn_conv_pool", _cnn, (arr(2, 6, 6, 2), arr(3, 3, 2, 3), arr(2, 2, 3, 2), arr(8, 3))),
    Case(
        "conv_transpose_nchw",
        lambda x, w: lax.conv_transpose(
            x, w, (2, 2), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW")
        ).sum(axis=(2, 3)),
        (arr(1, 2, 3, 3), arr(3, 2, 2, 2)),
    ),
    Case("rnn_scan", _rnn, (arr(3), arr(5, 2), arr(3, 3, scale=0.5), arr(2, 3)), order=2),
    # indexing, scatter, shapes
    Case(
        "gather_rows_cols",
        lambda x: x[IDX].sum(0) * x[:, np.array([2, 0])].sum(),
        (arr(4, 3),),
        order=2,
    ),
    Case(
        "take_along_axis",
        lambda x: jnp.take_along_axis(x, np.array([[1, 0], [3, 3], [0, 2]]), axis=1),
        (arr(3, 4),),
    ),
    Case(
        "scatter_add_dup",
        lambda x, u: jnp.asarray(x).at[np.array([0, 2, 0])].add(u * x[1]),
        (arr(3, 2), arr(3, 2)),
        order=2,
    ),
    Case(
        "scatter_set",
        lambda x, u: jnp.sin(jnp.asarray(x).at[np.array([2, 0])].set(u**2)),
        (arr(4, 2), arr(2, 2)),
        order=2,
    ),
    # Which of two colliding writes a GPU keeps is unspecified, so jax.grad's program and
    # srcgrad's may keep different ones there: against jax.grad on CPU only.
    Case(
        "scatter_set_duplicates",
        lambda x, u: jnp.asarray(x).at[np.array([1, 1, 3])].set(u) * x,
        (arr(4, 2), arr(3, 2)),
        jax_can=jax.default_backend() == "cpu",
    ),
    Case(
        "max_pool_same_strided",
        lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME"),
        (arr(1, 5, 5, 2),),
    ),
    Case(
        "pad_concat_split_rev",
        lambda x: jnp.concatenate(
            jnp.split(jnp.pad(x, ((1, 0), (1, 1)), constant_values=0.5), 2, axis=1)[::-1], axis=0
        )[::-1],
        (arr(3, 4),),
    ),
    Case(
        "lax_pad_negative_interior",
        lambda x: lax.pad(x, -1.0, ((-1, 2, 1), (0, -1, 0))),
        (arr(3, 3),),
    ),
    Case(
        "broadcast_transpose_reshape",
        lambda x, y: (x[:, None, :] * y[None]).transpose(2, 0, 1).reshape(3, -1),
        (arr(2, 3), arr(4, 3)),
    ),
    Case(
        "reductions",
        lambda x: jnp.prod(x, 0) + jnp.max(x, 1).sum() + jnp.min(x) + x[jnp.argmax(x[:, 0])].sum(),
        (arr(3, 3),),
    ),
    Case(
        "where_clip_clamp",
        lambda x: jnp.where(x > 0, x**2, jnp.clip(x, -0.5, 0.5)) + lax.clamp(-1.0, x * 3, 1.0),
        (away(8),),
    ),
    Case(
        "pow_atan2_erf_rem",
        lambda x, y: (
            jnp.power(jnp.abs(x) + 1, y)
            + jnp.arctan2(x, y)
            + jax.scipy.special.erf(x)
            + jnp.remainder(x * 5, 1.3)
            + lax.rem(x * 5, 1.3)
        ),
        (away(5), arr(5)),
    ),
    Case(
        "iota_cumulative_mask",
        lambda x: jnp.sum(x * jnp.arange(x.shape[0])[:, None] * (jnp.arange(4) < 2)),
        (arr(3, 4),),
    ),
    Case(
        "einsum_batched",
        lambda a, b: jnp.einsum("bij,bjk->bik", a, b) ** 2,
        (arr(2, 3, 4), arr(2, 4, 2)),
    ),
    Case(
        "integer_division",
        lambda x: (
            x * ((jnp.arange(-4, 4) // 3) + (jnp.arange(-4, 4) % 3) + lax.div(jnp.arange(-4, 4), 3))
        ),
        (arr(8),),
    ),
    Case(
        "linalg_det_3x3_norm",
        lambda a: jnp.linalg.det(a) * jnp.linalg.norm(a, axis=0),
        (arr(3, 3),),
    ),
    Case(
        "sort_argsort_cumulative",
        lambda x: (
            jnp.sum(jnp.sort(x, axis=1) * jnp.arange(4.0))
            + jnp.sum(jnp.take_along_axis(x, jnp.argsort(-x, axis=0), axis=0)[0] ** 2)
            + jnp.sum(jnp.sort(x, axis=None, descending=True)[:3])
            + jnp.sum(jnp.cumsum(x, axis=1) ** 2)
            + jnp.sum(jnp.cumprod(x[::-1], axis=0))
            + jnp.sum(lax.cummax(x, 1) * lax.cummin(x, 0, reverse=True))
        ),
        (arr(3, 4),),
        order=2,
    ),
    Case(
        "linalg_solve_inv_det_slogdet",
        lambda a, b: (
            jnp.sum(jnp.linalg.solve(a + 4 * jnp.eye(4), b))
            + jnp.sum(jnp.linalg.inv(a + 4 * jnp.eye(4)) ** 2)
            + jnp.linalg.det(a + 4 * jnp.eye(4))
            + jnp.linalg.slogdet(a + 4 * jnp.eye(4))[1]
        ),
        (arr(4, 4), arr(4)),
        order=2,
    ),
    Case(
        "linalg_cholesky_triangular",
        lambda a, b: (
            jnp.sum(
                jax.scipy.linalg.cho_solve((jnp.linalg.cholesky(a @ a.T + 4 * jnp.eye(3)), True), b)
            )
            + jnp.sum(
                jax.scipy.linalg.solve_triangular(
                    jnp.tril(a) + 4 * jnp.eye(3), b, lower=True, trans=1
                )
            )
        ),
        (arr(3, 3), arr(3)),
        order=2,
    ),
    Case(
        "linalg_eigh_svd_qr",
        lambda a: (
            jnp.sum(jnp.linalg.eigvalsh(a + a.T) ** 2)
            + jnp.sum(jnp.linalg.svd(a, compute_uv=False))
            + jnp.sum(jnp.abs(jnp.diag(jnp.linalg.qr(a)[1])))
            + jnp.sum(jnp.linalg.eigh(a + a.T)[1] ** 4)
        ),
        (arr(3, 3),),
    ),
    Case(
        "jax_grad_translated",
        lambda x, w: jax.grad(lambda v: jnp.sum(jax.nn.sigmoid(x @ v) ** 2))(w),
        (arr(3, 2), arr(2, 4)),
    ),
    # calls and custom rules
    Case(
        "checkpoint_jit",
        lambda x: jax.checkpoint(lambda v: jnp.sin(jnp.exp(v)))(jax.jit(jnp.tanh)(x)),
        (arr(4),),
        order=2,
    ),
    Case("custom_vjp_primal", lambda x: _clip_grad_sin(x) * x, (arr(4),)),
    Case("custom_jvp_primal", lambda x: _softabs(x) ** 2, (arr(4),)),
    Case("custom_linear_solve", _diag_solve, (arr(4, shift=3.0), arr(4))),
    # control flow
    Case("cond", _cond, (arr(4), arr(4)), order=2),
    Case("switch", _switch, (arr(4), np.int32(1)), argnums=(0,), order=2),
    Case("switch_clamped_index", _switch, (arr(4), np.int32(7)), argnums=(0,)),
    Case("fori_static", _fori_static, (arr(3), arr(3, 3, scale=0.5)), order=2),
    Case("dynamic_slice_update", _dynamic_slices, (arr(4, 3), arr(3)), order=2),
    Case(
        "fori_dynamic",
        _fori_dynamic,
        (arr(3), arr(3, 3, scale=0.5), np.int32(5)),
        argnums=(0, 1),
        jax_can=False,
        order=2,
    ),
    Case("while_newton", _newton_cbrt, (np.array([2.0, 3.0, 0.5]),), jax_can=False, order=2),
    Case("while_fixed_point", _fixed_point, (arr(4, 4, scale=0.2), arr(4)), jax_can=False, order=2),
    Case(
        "while_adaptive_ode",
        _adaptive_ode,
        (np.array(0.7), np.array([1.0, -0.5])),
        jax_can=False,
        order=2,
    ),
    Case(
        "while_in_scan",
        _while_in_scan,
        (np.array([3.0, -5.0, 0.2]), np.array(0.4)),
        jax_can=False,
        order=2,
    ),
]


def _bind(case: Case, fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` as a function of the case's differentiated arguments (the others fixed)."""
    nums = _nums(case)

    def call(*diff: Any) -> Any:
        full = list(case.args)
        for i, d in zip(nums, diff):
            full[i] = d
        return fn(*full)

    return call


def _nums(case: Case) -> tuple[int, ...]:
    return case.argnums if case.argnums is not None else tuple(range(len(case.args)))


def _mask(case: Case) -> tuple[Callable[..., Any], Callable[..., Any], tuple]:
    """f and its translation as functions of the differentiated arguments only."""
    return (
        _bind(case, case.fn),
        _bind(case, sg.from_jax(case.fn)),
        tuple(case.args[i] for i in _nums(case)),
    )


def test_the_corpus_is_large_enough() -> None:
    assert len(CORPUS) >= 40
    assert len({c.name for c in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize("case", sliced(CORPUS, 2), ids=str)
def test_forward_equals_the_jax_function(case: Case) -> None:
    got = sg.from_jax(case.fn)(*case.args)
    want = case.fn(*case.args)
    jax.tree_util.tree_map(
        lambda a, b: np.testing.assert_allclose(
            np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-12
        ),
        got,
        want,
    )


@pytest.mark.parametrize("case", sliced(CORPUS, 2), ids=str)
def test_gradient(case: Case) -> None:
    f, ours, args = _mask(case)
    check_grads(ours, args, order=case.order, jax_fun=f if case.jax_can else None, **case.tol)


def test_jax_refuses_the_dynamic_loops() -> None:
    """The FD-only cases are the ones jax.grad cannot do (else compare with it instead); jit
    keeps integer arguments (fori_loop bounds) traced, as sg.from_jax sees them."""
    for case in CORPUS:
        if not case.jax_can:
            f, args = _bind(case, jax.jit(case.fn)), _mask(case)[2]
            with pytest.raises(ValueError, match="Reverse-mode differentiation does not work"):
                jax.grad(lambda *a: jnp.sum(f(*a)))(*args)


# ---------------------------------------------------------------- the API contract


def test_the_issue_example() -> None:
    theta = np.array([2.0, 9.0, 0.3])
    g = sg.grad(lambda t: sg.sum(sg.from_jax(_newton_cbrt)(t)))(theta)
    np.testing.assert_allclose(g, theta ** (-2 / 3) / 3, rtol=1e-10)


def test_max_iters_inside_jax_jit() -> None:
    theta = np.array([2.0, 9.0, 0.3])
    bounded = jax.jit(sg.grad(lambda t: sg.sum(sg.from_jax(_newton_cbrt, max_iters=60)(t))))
    np.testing.assert_allclose(bounded(theta), theta ** (-2 / 3) / 3, rtol=1e-10)
    unbounded = jax.jit(sg.grad(lambda t: sg.sum(sg.from_jax(_newton_cbrt)(t))))
    with pytest.raises(SrcgradError, match="max_iters"):
        unbounded(theta)


def test_max_iters_bounds_the_loop() -> None:
    """As sg.while_loop(max_iters=N): the loop stops after N iterations."""
    count = lambda x: lax.while_loop(
        lambda c: c[1] < 100, lambda c: (c[0] * 1.1, c[1] + 1), (x, 0)
    )[0]
    np.testing.assert_allclose(sg.from_jax(count, max_iters=3)(np.ones(2)), np.full(2, 1.1**3))
    with pytest.raises(SrcgradError, match="max_iters"):
        sg.from_jax(count, max_iters=-1)


def test_pytrees_in_and_out() -> None:
    def f(params: dict, xs: tuple) -> dict:
        return {"y": jnp.tanh(xs[0] @ params["w"]) + params["b"], "n": xs[1] * 2}

    params = {"w": arr(3, 2), "b": arr(2)}
    xs = (arr(4, 3), arr(1))
    out = sg.from_jax(f)(params, xs)
    assert set(out) == {"y", "n"}
    np.testing.assert_allclose(out["y"], f(params, xs)["y"], rtol=1e-12)
    g = sg.grad(lambda p: sg.sum(sg.from_jax(f)(p, xs)["y"]))(params)
    want = jax.grad(lambda p: jnp.sum(f(p, xs)["y"]))(params)
    for k in params:
        np.testing.assert_allclose(g[k], want[k], rtol=1e-10)


def test_closed_over_arrays_are_captured() -> None:
    w = arr(3, 3)

    def f(x: jax.Array) -> jax.Array:
        return jnp.sin(x @ w).sum()

    prog = sg.trace(sg.grad(sg.from_jax(f)), arr(3))
    assert any(v.kind == "capture" and v.shape == (3, 3) for v in prog.captures)
    np.testing.assert_allclose(sg.grad(sg.from_jax(f))(np.ones(3)), jax.grad(f)(np.ones(3)))


def test_dead_scan_carries_are_not_translated() -> None:
    """A scan carry no output reads (diffrax's bounded loops have some) is pruned before
    translation: the program neither carries nor differentiates it."""

    def f(x: jax.Array) -> jax.Array:
        def step(c: tuple, _: Any) -> tuple:
            y, dead = c
            return (jnp.tanh(y) * 1.1, dead + jnp.sin(y)), None

        return jnp.sum(lax.scan(step, (x, x), None, length=4)[0][0])

    x = arr(3)
    assert "sin" not in sg.source(sg.grad(sg.from_jax(f)), x)
    check_grads(sg.from_jax(f), (x,), jax_fun=f)


def test_inside_a_srcgrad_function_with_other_ops() -> None:
    def loss(x: Any) -> Any:
        h = sg.tanh(x) * 2.0
        return sg.sum(sg.from_jax(jax.nn.softplus)(h) ** 2)

    x = arr(5)
    twin = lambda x: jnp.sum(jax.nn.softplus(jnp.tanh(x) * 2.0) ** 2)
    np.testing.assert_allclose(sg.grad(loss)(x), jax.grad(twin)(x), rtol=1e-10)


def test_translated_ops_carry_the_callers_line() -> None:
    def f(x: jax.Array) -> jax.Array:
        return jnp.sum(jnp.sin(x) ** 2)

    prog = sg.trace(lambda x: sg.from_jax(f)(x), arr(3))
    line = inspect.currentframe().f_lineno - 1
    ops = prog.global_block().ops
    assert ops and all(
        op.loc is not None
        and op.loc.lineno == line
        and op.loc.filename.endswith("test_from_jax.py")
        for op in ops
    )
    src = sg.source(lambda x: sg.from_jax(f)(x), arr(3))
    assert f"test_from_jax.py:{inspect.currentframe().f_lineno - 1}" in src


def test_a_primitive_jax_cannot_differentiate_names_it_and_the_line() -> None:
    """JAX has no derivative of nextafter: the gradient is a GradientError naming it, at the
    user's line."""
    f = lambda x: lax.nextafter(x, x + 1.0)
    x = arr(3)
    np.testing.assert_array_equal(sg.from_jax(f)(x), f(x))
    with pytest.raises(sg.GradientError) as err:
        sg.grad(lambda x: sg.sum(sg.from_jax(f)(x)))(x)
    msg = str(err.value)
    assert "nextafter" in msg and "JAX cannot differentiate" in msg
    assert re.search(r"test_from_jax\.py:\d+", msg)


def test_in_the_program_api_and_under_jax_jit() -> None:
    f = lambda x: jnp.tanh(x) * 2.0
    prog = sg.Program()
    with sg.program_guard(prog):
        x = sg.parameter("x", (3,), "float64")
        loss = sg.sum(sg.from_jax(f)(x))
        ((_, gx),) = sg.append_backward(loss)
    run = sg.compile(prog, feed=["x"], fetch=[loss, gx])
    v = arr(3)
    value, g = run(v)
    np.testing.assert_allclose(value, np.sum(f(v)), rtol=1e-12)
    np.testing.assert_allclose(g, 2.0 / np.cosh(v) ** 2, rtol=1e-12)
    np.testing.assert_allclose(jax.jit(sg.from_jax(f))(v), f(v), rtol=1e-12)


def test_debug_prints_are_dropped() -> None:
    def f(x: jax.Array) -> jax.Array:
        jax.debug.print("x = {}", x)
        return jnp.sin(x)

    np.testing.assert_allclose(
        sg.grad(lambda x: sg.sum(sg.from_jax(f)(x)))(np.ones(2)), np.cos(np.ones(2))
    )


def test_bitwise_ops_on_integers() -> None:
    i = np.arange(6, dtype=np.int32)
    np.testing.assert_array_equal(sg.from_jax(lambda i: (i & 3) | (i >> 1))(i), (i & 3) | (i >> 1))


def test_custom_jvp_of_jax_functions_keeps_their_kink_gradients() -> None:
    """relu, relu6 and logaddexp (softplus) use JAX's rules: at 0 jax.grad gives 0, 0, 1/2."""
    x = np.array([0.0, 0.0, 6.0, -1.0])
    for fn in (jax.nn.relu, jax.nn.relu6, jax.nn.softplus):
        g = sg.grad(lambda v: sg.sum(sg.from_jax(fn)(v)))(x)
        np.testing.assert_allclose(g, jax.grad(lambda v: jnp.sum(fn(v)))(x), err_msg=fn.__name__)


def test_gradient_programs_of_the_loop_cases_verify() -> None:
    for case in CORPUS:
        if case.order == 2:
            _, ours, args = _mask(case)
            sg.verify(sg.trace(sg.grad(lambda *a: sg.sum(ours(*a))), *args))


def test_a_switch_is_one_cond_op_with_a_branch_per_case() -> None:
    """lax.switch's n branches become one `cond` op of n branch blocks (emitted as
    lax.switch), and its gradient one more, not n - 1 nested two-way conds each."""
    loss = sg.from_jax(lambda x, i: jnp.sum(_switch(x, i)))
    prog = sg.trace(sg.grad(loss), arr(4), np.int32(1))
    prog.verify()
    conds = [op for op in prog.global_block().ops if op.type == "cond"]
    assert [len(op.sub_blocks()) for op in conds] == [3, 3]


def test_an_integer_clamp_is_min_of_max() -> None:
    """lax.clamp of integers (lax.switch's index) needs none of the float clamp's derivative
    selects: two ops, with lax's values below, inside and above the bounds."""
    f = sg.from_jax(lambda i: lax.clamp(np.int32(0), i, np.int32(4)))
    for i, want in ((-3, 0), (2, 2), (9, 4)):
        assert int(f(np.int32(i))) == want
    prog = sg.trace(f, np.int32(2))
    assert [op.type for op in prog.global_block().ops if op.inputs] == ["maximum", "minimum"]


def test_the_docs_list_every_primitive() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "jax_frontend.md").read_text()
    table = doc[doc.index("## Primitives") : doc.index("## Limits")]
    missing = [name for name in RULES if f"`{name}`" not in table]
    assert not missing, f"docs/jax_frontend.md does not list {missing}"


def test_benchmark_agrees_with_its_peers() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from benchmarks import from_jax as bench
    from benchmarks.harness import Settings, run_workload

    rows = run_workload(
        bench.build(quick=True),
        Settings(reps=1, first_reps=1, sample_s=0.0, figures=("agreement",)),
    )
    assert rows and all(r.met for r in rows), rows


def test_checkpoints_keep_the_gradient() -> None:
    w, b = arr(4, 4, scale=0.2), arr(4)
    loss = lambda *a: jnp.sum(_fixed_point(*a) ** 2)
    plain = sg.grad(sg.from_jax(loss), argnums=(0, 1))(w, b)
    snap = sg.from_jax(loss, max_iters=200, checkpoints=4)
    for got in (
        sg.grad(sg.from_jax(loss, checkpoints=3), argnums=(0, 1))(w, b),
        jax.jit(sg.grad(snap, argnums=(0, 1)))(w, b),
    ):
        for g, want in zip(got, plain):
            np.testing.assert_allclose(g, want, rtol=1e-10, atol=1e-12)
    check_grads(snap, (w, b))
    with pytest.raises(SrcgradError, match="checkpoints"):
        sg.from_jax(loss, checkpoints=0)


# ---------------------------------------------------------------- rows, fallback, custom rules


@jax.custom_vjp
def _clipped(x: jax.Array) -> jax.Array:
    return 3.0 * x


_clipped.defvjp(lambda x: (3.0 * x, None), lambda _, g: (jnp.clip(g, -1.0, 1.0),))


def test_custom_rules_are_honoured_and_can_be_turned_off() -> None:
    """A custom_vjp whose rule is not the derivative: jax.grad's answer by default, the primal
    body's derivative with custom_rules=False."""
    f = lambda x: jnp.sum(_clipped(x) * 2.0)
    x = arr(4)
    np.testing.assert_allclose(sg.grad(sg.from_jax(f))(x), jax.grad(f)(x))
    np.testing.assert_allclose(sg.grad(sg.from_jax(f, custom_rules=False))(x), np.full(4, 6.0))
    prog = sg.trace(sg.grad(sg.from_jax(f)), x)
    assert any(op.type == "jax_op" for op in prog.global_block().ops)


def test_a_rebound_global_is_read_again() -> None:
    """The issue's example: a global array rebound after the first call."""
    global _SCALE
    f = lambda x: jnp.sum(_SCALE * x)
    direct, wrapped = sg.grad(sg.from_jax(f)), sg.grad(lambda x: sg.from_jax(f)(x))
    x = np.ones(3)
    _SCALE = jnp.ones(3)
    np.testing.assert_allclose(direct(x), np.ones(3))
    np.testing.assert_allclose(wrapped(x), np.ones(3))
    _SCALE = 5.0 * jnp.ones(3)
    for g in (direct, wrapped, sg.grad(sg.from_jax(f))):
        np.testing.assert_allclose(g(x), np.full(3, 5.0))


_SCALE = jnp.ones(3)


def test_norm_logcdf_in_the_lower_tail() -> None:
    """erfc is computed directly: jax.scipy.stats.norm.logcdf and a probit likelihood have
    finite gradients equal to jax.grad's far in the tail (1 - erf gave -inf / NaN)."""
    x = np.array([-26.0, -10.0, -1.0, 0.0, 6.0])  # erfc(40) underflows float64, in JAX too
    for f in (
        lambda v: jnp.sum(jax.scipy.stats.norm.logcdf(v * 1.5)),
        lambda v: jnp.sum(jnp.log(jax.scipy.special.erfc(-v))),
        lambda v: jnp.sum(jax.scipy.special.log_ndtr(v * 1.5)),
    ):
        got = sg.grad(sg.from_jax(f))(x)
        assert np.all(np.isfinite(got))
        np.testing.assert_allclose(got, jax.grad(f)(x), rtol=1e-10)


def test_special_function_primitives_have_rows() -> None:
    """lgamma, digamma, igamma, erf_inv, bessel_i0e/i1e, erfc, polygamma: srcgrad ops (no
    jax_op), gradients equal to jax.grad's, second order too."""
    sps = jax.scipy.special

    def f(a: jax.Array, x: jax.Array) -> jax.Array:
        return jnp.sum(
            sps.gammaln(a)
            + sps.digamma(a) * sps.gammainc(a, x)
            + sps.gammaincc(a, x)
            + sps.erfinv(x / 4.0)
            + sps.i0e(x)
            + sps.i1e(a)
            + sps.erfc(x)
            + sps.polygamma(1, a)
        )

    a, x = np.array([0.7, 2.0, 3.5]), np.array([0.4, 1.5, 3.0])
    prog = sg.trace(sg.grad(sg.from_jax(f), argnums=(0, 1)), a, x)
    types = {op.type for op in prog.global_block().ops}
    assert "jax_op" not in types and {"gammaln", "digamma", "erfinv", "i0e", "erfc"} <= types
    check_grads(sg.from_jax(lambda x: f(a, x)), (x,), order=2, jax_fun=lambda x: f(a, x))
    got = sg.grad(sg.from_jax(f), argnums=(0, 1))(a, x)
    for g, w in zip(got, jax.grad(f, argnums=(0, 1))(a, x)):
        np.testing.assert_allclose(g, w, rtol=1e-10)


def test_stack_tile_unstack_rows() -> None:
    f = lambda x: (
        jnp.sum(jnp.stack([x, 2 * x], 1) ** 2)
        + jnp.sum(jnp.tile(x, (2, 1)) ** 3)
        + sum(jnp.sum(r * i) for i, r in enumerate(jnp.unstack(x)))
    )
    x = arr(3, 2)
    prog = sg.trace(sg.from_jax(f), x)
    assert "jax_op" not in {op.type for op in prog.global_block().ops}
    check_grads(sg.from_jax(f), (x,), order=2, jax_fun=f)


@pytest.mark.parametrize(
    "name,fn",
    [
        ("top_k", lambda x: jnp.sum(lax.top_k(x, 2)[0] ** 2)),
        (
            "scatter_mul_max_min",
            lambda x: jnp.sum(
                jnp.asarray(x).at[1].multiply(x[0]).at[2].max(x[0] * 0.5).at[0].min(x[2]) ** 2
            ),
        ),
        (
            "interp_searchsorted",
            lambda x: jnp.sum(jnp.interp(x, jnp.arange(4.0), jnp.arange(4.0) ** 2)),
        ),
        (
            "lu_solve",
            lambda x: jnp.sum(
                jax.scipy.linalg.lu_solve(
                    jax.scipy.linalg.lu_factor(jnp.diag(x) + 4.0 * jnp.eye(3)), x
                )
            ),
        ),
        ("expm", lambda x: jnp.sum(jax.scipy.linalg.expm(jnp.outer(x, x) * 0.1))),
        ("random_normal", lambda x: jnp.sum(jax.random.normal(jax.random.key(3), x.shape) * x**2)),
        # complex intermediates stay in JAX (srcgrad's rows are for real values)
        (
            "fft",
            lambda x: (
                jnp.sum(jnp.abs(jnp.fft.rfft(x**2)) ** 2)
                + jnp.sum(jnp.real(jnp.fft.ifft(jnp.fft.fft(x) * 1j)))
            ),
        ),
        (
            "grouped_conv",
            lambda x: jnp.sum(
                lax.conv_general_dilated(
                    jnp.reshape(x, (1, 3, 1)) * jnp.ones((1, 3, 4)),
                    jnp.ones((3, 1, 2)),
                    (1,),
                    "SAME",
                    feature_group_count=3,
                )
                ** 2
            ),
        ),
    ],
)
def test_primitives_without_rows_fall_back_to_jax_ops(name: str, fn: Callable[..., Any]) -> None:
    x = np.array([0.3, 1.7, 2.2])
    np.testing.assert_allclose(sg.from_jax(fn)(x), fn(x), rtol=1e-12)
    np.testing.assert_allclose(sg.grad(sg.from_jax(fn))(x), jax.grad(fn)(x), rtol=1e-10, atol=1e-12)


def test_typed_keys_as_arguments() -> None:
    key = jax.random.key(7)
    f = lambda k, x: jnp.sum(jax.random.uniform(jax.random.split(k)[1], x.shape) * x**2)
    x = arr(3)
    np.testing.assert_allclose(sg.from_jax(f)(key, x), f(key, x), rtol=1e-12)
    np.testing.assert_allclose(
        sg.grad(lambda v: sg.from_jax(f)(key, v))(x), jax.grad(f, argnums=1)(key, x), rtol=1e-12
    )


def test_pure_callback_runs_forward_and_refuses_gradients() -> None:
    f = lambda x: jax.pure_callback(lambda v: np.sin(v), jax.ShapeDtypeStruct(x.shape, x.dtype), x)
    x = arr(3)
    np.testing.assert_allclose(sg.from_jax(f)(x), np.sin(x))
    with pytest.raises(sg.GradientError, match="pure_callback"):
        sg.grad(lambda v: sg.sum(sg.from_jax(f)(v)))(x)


def test_callbacks_with_effects_run_on_every_call_as_under_jax_jit() -> None:
    """An io_callback (ordered or not) and jax.debug.callback whose results are unused run on
    every call, in the gradient's forward too; a pure_callback whose result is unused does
    not run, as under jax.jit (JAX removes it)."""
    seen: list[tuple[str, float]] = []

    def log(tag: str, result: Any = None) -> Callable[[Any], Any]:
        def cb(v: Any) -> Any:
            seen.append((tag, float(v)))
            return result

        return cb

    def f(x: jax.Array) -> jax.Array:
        io_callback(log("io", np.zeros(())), jax.ShapeDtypeStruct((), jnp.float64), x)
        io_callback(log("ordered"), None, x * 2.0, ordered=True)
        jax.debug.callback(log("debug"), x)
        jax.debug.print("{} {s}", x, s="static")  # a static argument: JAX's own print
        jax.pure_callback(log("pure", np.zeros(())), jax.ShapeDtypeStruct((), jnp.float64), x)
        return jnp.sin(x)

    for run in (jax.jit(f), sg.from_jax(f)):
        seen.clear()
        run(1.0)
        run(1.5)
        assert sorted(seen) == [
            ("debug", 1.0),
            ("debug", 1.5),
            ("io", 1.0),
            ("io", 1.5),
            ("ordered", 2.0),
            ("ordered", 3.0),
        ]
    seen.clear()
    np.testing.assert_allclose(sg.grad(sg.from_jax(f))(0.5), np.cos(0.5), rtol=1e-12)
    assert sorted(seen) == [("debug", 0.5), ("io", 0.5), ("ordered", 1.0)]
    with pytest.raises(sg.GradientError, match="IO callbacks do not support JVP"):
        sg.grad(
            sg.from_jax(
                lambda x: io_callback(lambda v: v, jax.ShapeDtypeStruct((), jnp.float64), x) * x
            )
        )(0.5)


def test_a_while_loop_stays_srcgrads_own() -> None:
    """Not under a custom rule, lax.while_loop becomes sg.while_loop (JAX cannot reverse it)."""
    prog = sg.trace(sg.grad(lambda t: sg.sum(sg.from_jax(_newton_cbrt)(t))), np.array([2.0]))
    types = {op.type for op in prog.global_block().ops}
    assert "while" in types and "jax_op" not in types
