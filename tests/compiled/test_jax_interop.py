"""Documented semantics: Hessians by jax.jacfwd, shard_map, loops at a trip-count change.

docs/jax_interop.md and docs/control_flow.md state them; the tests hold the docs to them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import srcgrad as sg


def _f(x: Any) -> Any:
    return sg.sum(sg.tanh(x) ** 3) + sg.sum(x[:2] * x[1:])


def _f_jnp(x: Any) -> Any:
    return jnp.sum(jnp.tanh(x) ** 3) + jnp.sum(x[:2] * x[1:])


def test_hessian_by_jacfwd_of_sg_grad() -> None:
    x = np.array([0.3, -1.2, 0.8])
    hessian = jax.jacfwd(sg.grad(_f))(x)
    np.testing.assert_allclose(hessian, jax.hessian(_f_jnp)(x), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(hessian, hessian.T, rtol=1e-12, atol=1e-14)


def test_hessian_of_a_loop_by_jacfwd() -> None:
    def f(x: Any) -> Any:  # three tanh steps, a fixed trip count
        return sg.sum(sg.fori_loop(0, 3, lambda i, s: sg.tanh(s * x), x))

    def f_jnp(x: Any) -> Any:
        s = x
        for _ in range(3):
            s = jnp.tanh(s * x)
        return jnp.sum(s)

    x = np.array([0.5, -0.7])
    np.testing.assert_allclose(
        jax.jacfwd(sg.grad(f))(x), jax.hessian(f_jnp)(x), rtol=1e-10, atol=1e-12
    )

    def squaring(x: Any) -> Any:  # 3 iterations at this x: data-dependent, bounded
        return sg.sum(
            sg.while_loop(lambda s: sg.sum(s) < 10.0, lambda s: s * s + 0.5, x, max_iters=8)
        )

    def squaring_jnp(x: Any) -> Any:
        for _ in range(3):
            x = x * x + 0.5
        return jnp.sum(x)

    x = np.array([1.0, 1.2])
    np.testing.assert_allclose(
        jax.jacfwd(sg.grad(squaring))(x), jax.hessian(squaring_jnp)(x), rtol=1e-10, atol=1e-12
    )


_SHARD_MAP = """
import jax, jax.numpy as jnp, numpy as np
import srcgrad as sg
from jax.sharding import Mesh, PartitionSpec as P
jax.config.update("jax_enable_x64", True)
assert len(jax.devices()) == 4, jax.devices()
shard_map = getattr(jax, "shard_map", None)
if shard_map is None:
    from jax.experimental.shard_map import shard_map
mesh = Mesh(np.array(jax.devices()), ("batch",))

def loss(w, x):
    return sg.sum(sg.tanh(x @ w))

def loss_jnp(w, x):
    return jnp.sum(jnp.tanh(x @ w))

def per_shard(grad_fn):   # each shard's gradient, stacked
    fn = shard_map(lambda w, x: grad_fn(w, x)[None], mesh=mesh,
                   in_specs=(P(), P("batch")), out_specs=P("batch"))
    return np.asarray(jax.jit(fn)(w, x))

w = np.linspace(-1.0, 1.0, 6).reshape(3, 2)
x = np.linspace(-2.0, 2.0, 24).reshape(8, 3)
full = np.asarray(jax.grad(loss_jnp)(w, x))
ours, theirs = per_shard(sg.grad(loss)), per_shard(jax.grad(loss_jnp))
shards = [np.asarray(jax.grad(loss_jnp)(w, x[2 * i:2 * i + 2])) for i in range(4)]
# jax.grad sums the gradient of the replicated w over the shards: every shard holds `full`.
for t in theirs:
    np.testing.assert_allclose(t, full, rtol=1e-12, atol=1e-14)
# srcgrad returns each shard's own gradient; they sum to `full`.
for o, s in zip(ours, shards):
    np.testing.assert_allclose(o, s, rtol=1e-12, atol=1e-14)
assert not np.allclose(ours[0], full)
summed = shard_map(lambda w, x: jax.lax.psum(sg.grad(loss)(w, x), "batch"), mesh=mesh,
                   in_specs=(P(), P("batch")), out_specs=P())
np.testing.assert_allclose(jax.jit(summed)(w, x), full, rtol=1e-12, atol=1e-14)
print("OK")
"""


def test_shard_map_gives_the_per_shard_gradient() -> None:
    """Inside shard_map srcgrad's gradient is per shard; a psum gives jax.grad's."""
    env = {
        **os.environ,
        "XLA_FLAGS": "--xla_force_host_platform_device_count=4",
        "JAX_PLATFORMS": "cpu",
    }
    run = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_SHARD_MAP)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0 and run.stdout.strip().endswith("OK"), run.stderr[-3000:]


def test_fixed_point_loop_derivative_differs_from_straddling_differences() -> None:
    """docs/control_flow.md: the gradient holds the trip count fixed."""

    def halve(x: Any) -> Any:
        return sg.while_loop(lambda s: s > 1.0, lambda s: s / 2.0, x)

    h = sg.jit(halve)
    assert float(sg.grad(halve)(1.0)) == 1.0
    assert float(sg.grad(halve)(1.5)) == 0.5
    straddling = (float(h(1.0 + 1e-6)) - float(h(1.0 - 1e-6))) / 2e-6
    np.testing.assert_allclose(straddling, -249999.25, rtol=1e-6)
    one_sided = (float(h(1.0)) - float(h(1.0 - 1e-6))) / 1e-6
    np.testing.assert_allclose(one_sided, 1.0, rtol=1e-6)
