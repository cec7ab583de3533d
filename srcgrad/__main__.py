"""`python -m srcgrad`: the versions in use, then a short tour (the examples/ folder is not
in the wheel; this is).

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

import platform
import sys

import jax
import jax.numpy as jnp
import jaxlib
import numpy as np

import srcgrad as sg


def versions() -> str:
    """srcgrad's, Python's, JAX's, jaxlib's and NumPy's versions, and JAX's devices."""
    devices = ", ".join(sorted({f"{d.platform} ({d.device_kind})" for d in jax.devices()}))
    return (
        f"srcgrad {sg.__version__}, Python {platform.python_version()}, jax {jax.__version__}, "
        f"jaxlib {jaxlib.__version__}, numpy {np.__version__}; devices: {devices}"
    )


def newton_sqrt(a: jax.Array) -> jax.Array:
    """sqrt(a) by Newton's method: a loop whose trip count depends on the value of `a`."""
    return sg.while_loop(lambda x: sg.abs(x * x - a) > 1e-6 * a, lambda x: 0.5 * (x + a / x), a)


def loss(w: jax.Array, x: jax.Array) -> jax.Array:
    return sg.mean(sg.tanh(x @ w) ** 2)


def tour() -> None:
    """Trace, differentiate and print a small function; a gradient through a data-dependent
    loop (jax.grad refuses reverse mode there); one imperative training step."""
    w = np.full((3, 2), 0.1, np.float32)
    x = np.ones((4, 3), np.float32)
    print("\nloss(w, x) = mean(tanh(x @ w) ** 2); its IR, sg.trace_program(loss, w, x):\n")
    print(sg.trace_program(loss, w, x))
    print("\nits gradient, as the Python source srcgrad emits, sg.source(sg.grad(loss), w, x):\n")
    print(sg.source(sg.grad(loss), w, x))
    ours = sg.grad(loss)(w, x)
    want = jax.grad(lambda w, x: jnp.mean(jnp.tanh(x @ w) ** 2))(w, x)
    print(f"sg.grad(loss)(w, x)[0] = {np.asarray(ours)[0]}, jax.grad's: {np.asarray(want)[0]}")
    a = np.float32(9.0)
    print(
        f"\nd sqrt(a) / da at a = 9 through Newton's while loop: "
        f"{float(sg.grad(newton_sqrt)(a)):.8f} (1 / 6 = {1 / 6:.8f})"
    )
    layer = sg.nn.Linear(3, 2, act="tanh", seed=0)
    opt = sg.optim.SGD(layer.parameters(), lr=0.5)
    losses = []
    for _ in range(3):
        with sg.autograd.record():
            step_loss = sg.mean((layer(x) - 0.5) ** 2)
        opt.zero_grad()
        step_loss.backward()
        opt.step()
        losses.append(step_loss.item())
    print(
        "\nimperative (record / backward / SGD), three steps of a Linear layer: losses "
        + ", ".join(f"{v:.4f}" for v in losses)
    )
    print("\nMore: README.md and docs/ of the repository; the examples/ folder there.")


def main() -> int:
    print(versions())
    tour()
    return 0


if __name__ == "__main__":
    sys.exit(main())
