"""A tour of srcgrad: trace a program, read its IR and emitted source, and differentiate
an MLP loss and a data-dependent while loop (which jax.grad cannot do in reverse mode).

    python examples/demo.py
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import srcgrad as sg


def banner(title: str) -> None:
    print(f"\n{'=' * 78}\n{title}\n{'=' * 78}")


def compare(name: str, ours: Any, theirs: Any) -> None:
    """Print srcgrad's and the reference gradient side by side."""
    pairs = zip(jax.tree_util.tree_leaves_with_path(ours), jax.tree_util.tree_leaves(theirs))
    for (path, a), b in pairs:
        a, b = np.asarray(a), np.asarray(b)
        label = name + jax.tree_util.keystr(path)
        print(
            f"{label:<18} srcgrad {np.array2string(a.ravel()[:4], precision=5):<48} "
            f"reference {np.array2string(b.ravel()[:4], precision=5)}"
        )
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- 1. a small program


def layer(x: Any, w: Any) -> Any:
    return sg.sum(sg.tanh(x @ w))


# ---------------------------------------------------------------- 2. an MLP loss


def mlp_loss(params: dict, x: Any, y: Any) -> Any:
    h = sg.tanh(x @ params["w1"] + params["b1"])
    out = h @ params["w2"] + params["b2"]
    return sg.mean((out - y) ** 2)


def mlp_loss_jax(params: dict, x: Any, y: Any) -> Any:
    h = jnp.tanh(x @ params["w1"] + params["b1"])
    return jnp.mean((h @ params["w2"] + params["b2"] - y) ** 2)


# ---------------------------------------------------------------- 3. Newton's method


def newton_sqrt(a: Any) -> Any:
    """sqrt(a) by Newton iteration; how many steps it takes depends on the value of `a`."""

    def not_converged(x: Any) -> Any:
        return sg.abs(x * x - a) > 1e-6 * a

    def step(x: Any) -> Any:
        return 0.5 * (x + a / x)

    return sg.while_loop(not_converged, step, a)


def newton_sqrt_jax(a: Any) -> Any:
    return jax.lax.while_loop(
        lambda x: jnp.abs(x * x - a) > 1e-6 * a, lambda x: 0.5 * (x + a / x), a
    )


def main() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    w = rng.standard_normal((3, 2)).astype(np.float32)

    banner("1. The traced IR of layer(x, w) = sum(tanh(x @ w))")
    print(sg.trace(layer, x, w))

    banner("2. The Python source srcgrad emits for it (compiled with jax.jit)")
    print(sg.source(layer, x, w))

    banner("3. The gradient of an MLP loss, as source")
    params = {
        "w1": rng.standard_normal((3, 8)).astype(np.float32),
        "b1": np.zeros(8, np.float32),
        "w2": rng.standard_normal((8, 1)).astype(np.float32),
        "b2": np.zeros(1, np.float32),
    }
    y = rng.standard_normal((4, 1)).astype(np.float32)
    print(sg.source(sg.grad(mlp_loss), params, x, y))
    print("gradient values, srcgrad next to jax.grad:")
    compare("params", sg.grad(mlp_loss)(params, x, y), jax.grad(mlp_loss_jax)(params, x, y))

    banner("4. The gradient of a while loop with a data-dependent trip count")
    a = np.float32(2.0)
    print(sg.source(sg.grad(newton_sqrt), a))
    print("d sqrt(a) / da at a = 2, 9, 100: srcgrad next to the exact 1 / (2 sqrt(a)):")
    for value in (2.0, 9.0, 100.0):
        a = np.float32(value)
        compare(f"a={value:g}", sg.grad(newton_sqrt)(a), 0.5 / np.sqrt(a))
    try:
        jax.grad(newton_sqrt_jax)(np.float32(2.0))
    except ValueError as e:
        print(f"\njax.grad of the same lax.while_loop fails: {str(e).splitlines()[0]}")

    banner("5. Eager mode: the same source, run op by op (step through it with pdb)")
    eager = sg.grad(newton_sqrt, jit=False)
    print(
        f"sg.grad(newton_sqrt, jit=False)(9.0) = {float(eager(np.float32(9.0))):.6f} "
        f"(compilations so far: {eager.compilations})"
    )


if __name__ == "__main__":
    main()
