"""sg.from_jax on functions from real libraries: jax.nn, jax.scipy (special, stats, linalg),
optax losses, equinox and flax models, diffrax solves with their adjoints, optimistix root
finding and least squares, lineax solves, numpyro log densities. Each gradient is checked
against jax.grad (the library's own rule where it has one: custom rules run as sg.jax_op) and,
on a sample, against float64 finite differences and at second order.

The default run takes a representative slice (each library once, against jax.grad; finite
differences on one); `-m slow` runs the rest: flax, diffrax, optimistix, finite differences and
second order on the others.
The libraries are the project's `libs` extra (pyproject.toml); a missing one is a failure of
the environment, so the tests import them without skipping.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import srcgrad as sg
from srcgrad.testing import check_grads


def arr(*shape: int, seed: int = 0, lo: float = -1.0, hi: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(lo, hi, shape)


@dataclass(frozen=True)
class Lib:
    """A library function of array pytrees returning a scalar; `order` 2 checks second
    order too; `fd` compares with float64 finite differences."""

    name: str
    fn: Callable[..., Any]  # or, with `made`, a function making (fn, args)
    args: tuple = ()
    order: int = 1
    fd: bool = False
    slow: bool = False
    rtol: float = 1e-9
    made: bool = False

    def built(self) -> tuple[Callable[..., Any], tuple]:
        return self.fn() if self.made else (self.fn, self.args)

    def __str__(self) -> str:
        return self.name


# ---------------------------------------------------------------- the functions


def _mlp_nn(w: jax.Array, x: jax.Array) -> jax.Array:
    h = jax.nn.gelu(x @ w) + jax.nn.silu(x @ w) * jax.nn.softplus(x @ w)
    logp = jax.nn.log_softmax(h, axis=-1)
    return -jnp.sum(logp * jax.nn.one_hot(jnp.array([0, 2, 1, 1]), 3)) + jnp.sum(
        jax.nn.celu(h)
        + jax.nn.elu(h)
        + jax.nn.selu(h)
        + jax.nn.relu6(h * 3)
        + jax.nn.hard_tanh(h * 2)
        + jax.nn.sigmoid(h)
        + jax.nn.logsumexp(h, axis=0)
    )


def _stats(mu: jax.Array, x: jax.Array) -> jax.Array:
    st = jax.scipy.stats
    return jnp.sum(
        st.norm.logcdf(x * 8.0 - mu)
        + st.norm.logpdf(x, mu, 2.0)
        + st.gamma.logpdf(x + 2.0, jnp.exp(mu))
        + st.beta.logpdf(0.5 + 0.4 * x, 2.0, 3.0)
        + st.t.logpdf(x, 3.0 + jnp.exp(mu))
        + st.poisson.logpmf(3, jnp.exp(mu))
        + st.norm.logsf(x * 6.0 + mu)
        + st.logistic.logpdf(x)
    )


def _special(a: jax.Array, x: jax.Array) -> jax.Array:
    sp = jax.scipy.special
    return jnp.sum(
        sp.gammaln(a)
        + sp.digamma(a)
        + sp.gammainc(a, x)
        + sp.betaln(a, x)
        + sp.xlogy(a, x)
        + sp.xlog1py(a, x)
        + sp.entr(x)
        + sp.logit(x / 4.0)
        + sp.log_ndtr(-10.0 * x)
        + sp.ndtri(x / 4.0)
        + sp.i0e(a)
        + sp.i1e(x)
        + sp.erfinv(x / 4.0)
        + sp.expit(a)
        + sp.logsumexp(a * x)
    )


def _linalg(a: jax.Array, b: jax.Array) -> jax.Array:
    la = jax.scipy.linalg
    spd = a @ a.T + 3.0 * jnp.eye(3)
    return (
        jnp.sum(la.cho_solve(la.cho_factor(spd), b))
        + jnp.sum(la.lu_solve(la.lu_factor(spd), b))
        + jnp.sum(la.solve_triangular(jnp.tril(spd), b, lower=True))
        + jnp.sum(la.solve(spd, b, assume_a="pos"))
        + la.det(spd)
    )


def _expm(a: jax.Array) -> jax.Array:
    return jnp.sum(jax.scipy.linalg.expm(a * 0.3) ** 2)


def _optax(logits: jax.Array, x: jax.Array) -> jax.Array:
    labels = jax.nn.softmax(jnp.arange(12.0).reshape(4, 3) / 5.0)
    return (
        jnp.sum(optax.softmax_cross_entropy(logits, labels))
        + jnp.sum(optax.softmax_cross_entropy_with_integer_labels(logits, jnp.array([0, 2, 1, 0])))
        + jnp.sum(optax.huber_loss(logits, x))
        + jnp.sum(optax.l2_loss(logits, x))
        + jnp.sum(optax.sigmoid_binary_cross_entropy(logits, jax.nn.sigmoid(x)))
        + jnp.sum(optax.log_cosh(logits, x))
        + jnp.sum(optax.sigmoid_focal_loss(logits, jax.nn.sigmoid(x)))
        + jnp.sum(optax.cosine_distance(logits, x))
        + jnp.sum(optax.kl_divergence(jax.nn.log_softmax(logits), jax.nn.softmax(x)))
    )


_EQX_MLP = eqx.nn.MLP(3, 2, 8, 2, activation=jax.nn.softplus, key=jax.random.key(0))
_EQX_PARAMS, _EQX_STATIC = eqx.partition(_EQX_MLP, eqx.is_array)


def _eqx_mlp(params: Any, x: jax.Array) -> jax.Array:
    model = eqx.combine(params, _EQX_STATIC)
    return jnp.sum(jax.vmap(model)(x) ** 2)


def _np_params(tree: Any) -> Any:
    return jax.tree_util.tree_map(lambda v: np.asarray(v, np.float64), tree)


def _flax_linen() -> tuple[Callable[..., Any], tuple]:
    import flax.linen as nn

    class Net(nn.Module):
        @nn.compact
        def __call__(self, x: jax.Array) -> jax.Array:
            x = nn.LayerNorm()(nn.gelu(nn.Dense(8)(x)))
            return nn.Dense(2)(x)

    net = Net()
    params = net.init(jax.random.key(1), jnp.ones((4, 3)))
    return (lambda p, x: jnp.sum(net.apply(p, x) ** 2)), (_np_params(params), arr(4, 3))


def _flax_nnx() -> tuple[Callable[..., Any], tuple]:
    from flax import nnx

    model = nnx.Sequential(
        nnx.Linear(3, 8, rngs=nnx.Rngs(0)), nnx.relu, nnx.Linear(8, 2, rngs=nnx.Rngs(1))
    )
    graphdef, state = nnx.split(model)
    leaves, tree = jax.tree_util.tree_flatten(state)

    def f(ws: list, x: jax.Array) -> jax.Array:
        m = nnx.merge(graphdef, jax.tree_util.tree_unflatten(tree, ws))
        return jnp.sum(jnp.tanh(m(x)) ** 2)

    return f, ([np.asarray(v, np.float64) for v in leaves], arr(4, 3))


def _diffrax(adjoint: str) -> Callable[..., Any]:
    import diffrax

    def f(y0: jax.Array, k: jax.Array) -> jax.Array:
        term = diffrax.ODETerm(lambda t, y, a: -a * y + jnp.sin(t) * jnp.stack([y[1], -y[0]]))
        adj = {
            "recursive": diffrax.RecursiveCheckpointAdjoint(),
            "backsolve": diffrax.BacksolveAdjoint(),
            "direct": diffrax.DirectAdjoint(),
        }[adjoint]
        sol = diffrax.diffeqsolve(
            term,
            diffrax.Tsit5(),
            0.0,
            1.0,
            0.05,
            y0,
            args=k,
            stepsize_controller=diffrax.PIDController(rtol=1e-8, atol=1e-8),
            adjoint=adj,
            max_steps=256,
        )
        return jnp.sum(sol.ys[-1] ** 2)

    return f


def _optimistix_root(a: jax.Array, b: jax.Array) -> jax.Array:
    import optimistix as optx

    sol = optx.root_find(
        lambda y, args: jnp.tanh(y) + args[0] * y - args[1],
        optx.Newton(rtol=1e-10, atol=1e-10),
        jnp.zeros(3),
        args=(a, b),
    )
    return jnp.sum(sol.value**2)


def _optimistix_lsq(a: jax.Array, b: jax.Array) -> jax.Array:
    import optimistix as optx

    sol = optx.least_squares(
        lambda y, args: jnp.exp(args[0] * y) - args[1],
        optx.LevenbergMarquardt(rtol=1e-10, atol=1e-10),
        jnp.zeros(3),
        args=(a, b),
        max_steps=200,
    )
    return jnp.sum(sol.value**2)


def _lineax(a: jax.Array, b: jax.Array) -> jax.Array:
    import lineax as lx

    op = lx.MatrixLinearOperator(a @ a.T + 3.0 * jnp.eye(3))
    return jnp.sum(lx.linear_solve(op, b, solver=lx.LU()).value ** 2)


def _numpyro(mu: jax.Array, x: jax.Array) -> jax.Array:
    import numpyro.distributions as dist

    s = jnp.exp(mu)
    return jnp.sum(
        dist.Normal(mu, s).log_prob(x)
        + dist.Gamma(s, 2.0).log_prob(x + 2.0)
        + dist.Beta(s, 2.0).log_prob(0.5 + 0.4 * x)
        + dist.StudentT(3.0, mu, s).log_prob(x)
        + dist.Poisson(s).log_prob(jnp.array([0, 3, 1]))
        + dist.LogNormal(mu, 1.0).log_prob(x + 2.0)
        + dist.HalfNormal(s).log_prob(jnp.abs(x))
        + dist.Laplace(mu, s).log_prob(x)
    )


def _numpyro_mvn(loc: jax.Array, l: jax.Array) -> jax.Array:
    import numpyro.distributions as dist

    scale = jnp.tril(l) + 2.0 * jnp.eye(3)
    d = dist.MultivariateNormal(loc, scale_tril=scale)
    return jnp.sum(d.log_prob(jnp.ones((2, 3)))) + jnp.sum(
        dist.Dirichlet(jnp.exp(loc)).log_prob(jnp.array([0.2, 0.3, 0.5]))
    )


LIBS: list[Lib] = [
    Lib("jax.nn", _mlp_nn, (arr(3, 3), arr(4, 3))),
    Lib("jax.scipy.stats", _stats, (arr(3, seed=1, hi=0.5), arr(3, seed=2)), slow=True),
    # first order: JAX's gammainc has no second derivative in `a` (igamma_grad_a), nor srcgrad's
    Lib(
        "jax.scipy.special",
        _special,
        (arr(3, lo=0.5, hi=3.0), arr(3, seed=1, lo=0.2, hi=2.0)),
        slow=True,
    ),
    Lib("jax.scipy.linalg", _linalg, (arr(3, 3), arr(3, 2)), slow=True),
    Lib("optax.losses", _optax, (arr(4, 3), arr(4, 3, seed=1)), slow=True),
    Lib("equinox.MLP", _eqx_mlp, (_np_params(_EQX_PARAMS), arr(4, 3))),
    Lib("numpyro.log_prob", _numpyro, (arr(3, hi=0.5), arr(3, seed=1))),
    Lib("lineax.LU", _lineax, (arr(3, 3), arr(3)), fd=True),
    Lib("numpyro.mvn_dirichlet", _numpyro_mvn, (arr(3), arr(3, 3)), slow=True),
    Lib("jax.nn second order", _mlp_nn, (arr(3, 3), arr(4, 3)), order=2, slow=True),
    Lib(
        "equinox.MLP second order",
        _eqx_mlp,
        (_np_params(_EQX_PARAMS), arr(4, 3)),
        order=2,
        slow=True,
    ),
    Lib(
        "jax.scipy.special fd",
        _special,
        (arr(3, lo=0.5, hi=3.0), arr(3, seed=1, lo=0.2, hi=2.0)),
        fd=True,
        slow=True,
    ),
    Lib("jax.scipy.stats fd", _stats, (arr(3, seed=1, hi=0.5), arr(3, seed=2)), fd=True, slow=True),
    Lib("jax.scipy.linalg.expm", _expm, (arr(3, 3),), fd=True, slow=True),
    Lib("jax.scipy.linalg fd", _linalg, (arr(3, 3), arr(3, 2)), fd=True, slow=True),
    Lib("optax.losses fd", _optax, (arr(4, 3), arr(4, 3, seed=1)), fd=True, slow=True),
    Lib("numpyro.log_prob fd", _numpyro, (arr(3, hi=0.5), arr(3, seed=1)), fd=True, slow=True),
    Lib("flax.linen", _flax_linen, made=True, slow=True),
    Lib("flax.nnx", _flax_nnx, made=True, slow=True),
    Lib(
        "diffrax.recursive_checkpoint",
        _diffrax("recursive"),
        (np.array([1.0, 0.5]), np.array(0.7)),
        slow=True,
        rtol=1e-7,
    ),
    Lib(
        "diffrax.backsolve",
        _diffrax("backsolve"),
        (np.array([1.0, 0.5]), np.array(0.7)),
        slow=True,
        rtol=1e-5,
    ),
    Lib(
        "diffrax.direct",
        _diffrax("direct"),
        (np.array([1.0, 0.5]), np.array(0.7)),
        slow=True,
        rtol=1e-7,
    ),
    Lib(
        "optimistix.root_find",
        _optimistix_root,
        (arr(3, lo=1.0, hi=2.0), arr(3)),
        slow=True,
        fd=True,
    ),
    Lib(
        "optimistix.least_squares",
        _optimistix_lsq,
        (arr(3, lo=0.5, hi=1.0), arr(3, lo=1.5, hi=2.0)),
        slow=True,
        rtol=1e-6,
    ),
]


def _params(cases: list[Lib]) -> list[Any]:
    return [pytest.param(c, id=c.name, marks=[pytest.mark.slow] if c.slow else []) for c in cases]


def _close(got: Any, want: Any, rtol: float) -> None:
    jax.tree_util.tree_map(
        lambda g, w: np.testing.assert_allclose(
            np.asarray(g), np.asarray(w), rtol=rtol, atol=1e-10
        ),
        got,
        want,
    )


@pytest.mark.parametrize("case", _params(LIBS))
def test_library_gradient_equals_jax(case: Lib) -> None:
    fn, args = case.built()
    argnums = tuple(range(len(args)))
    ours = sg.from_jax(fn)
    np.testing.assert_allclose(ours(*args), fn(*args), rtol=1e-10)
    _close(sg.grad(ours, argnums=argnums)(*args), jax.grad(fn, argnums=argnums)(*args), case.rtol)
    if case.fd or case.order == 2:
        flat, tree = jax.tree_util.tree_flatten(args)

        def on_leaves(f: Callable[..., Any]) -> Callable[..., Any]:
            return lambda *leaves: f(*jax.tree_util.tree_unflatten(tree, list(leaves)))

        check_grads(
            on_leaves(ours),
            tuple(flat),
            order=case.order,
            jax_fun=on_leaves(fn) if case.order == 2 else None,
            directions=1,
        )


def test_a_library_custom_rule_is_one_jax_op() -> None:
    """optimistix/lineax implicit differentiation and equinox's checkpointed loops are custom
    rules: each runs as a jax_op (the library's adjoint), not as its primal body."""
    prog = sg.trace(sg.grad(sg.from_jax(_lineax)), arr(3, 3), arr(3))
    assert any(op.type == "jax_op" for op in prog.global_block().ops)
