"""Golden tests of the printer and the emitter: the debugging surface must not drift.

Each golden file under tests/golden/ holds the exact text srcgrad prints for one program of
tests/support/golden_programs.py. After an intended change, regenerate and review the diff:

    SRCGRAD_UPDATE_GOLDEN=1 python -m pytest tests/ir/test_golden.py
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import srcgrad as sg
from support.golden_programs import PROGRAMS, render

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "golden"
UPDATE = os.environ.get("SRCGRAD_UPDATE_GOLDEN") == "1"
KINDS = ("ir", "source", "grad_ir", "grad_source")
CASES = [(name, kind) for name in PROGRAMS for kind in KINDS]


@pytest.mark.parametrize("name,kind", CASES, ids=[f"{n}-{k}" for n, k in CASES])
def test_golden(name: str, kind: str) -> None:
    text = render(name, kind)
    path = GOLDEN_DIR / f"{name}.{kind}.txt"
    if UPDATE:
        GOLDEN_DIR.mkdir(exist_ok=True)
        path.write_text(text if text.endswith("\n") else text + "\n")
    assert path.exists(), f"missing golden {path}; run with SRCGRAD_UPDATE_GOLDEN=1"
    assert text.rstrip("\n") == path.read_text().rstrip("\n")


@pytest.mark.parametrize("name,kind", CASES, ids=[f"{n}-{k}" for n, k in CASES])
def test_printing_is_deterministic(name: str, kind: str) -> None:
    assert render(name, kind) == render(name, kind)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_golden_programs_verify_and_run(name: str) -> None:
    """The golden programs are valid IR, and their gradients match jax.grad's."""
    import jax

    fun, make_args, argnums = PROGRAMS[name]
    args = make_args()
    sg.trace(fun, *args).verify()
    sg.trace(sg.grad(fun, argnums), *args).verify()
    ours = sg.grad(fun, argnums)(*args)
    if name == "while":
        np.testing.assert_allclose(ours, 0.5 / np.sqrt(args[0]), rtol=1e-10)
        return
    theirs = jax.grad(_JAX_TWINS[name], argnums)(*args)
    for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


def _mlp_jax(params: dict, x: np.ndarray, y: np.ndarray) -> object:
    import jax.numpy as jnp

    h = jnp.tanh(x @ params["w1"] + params["b1"])
    return jnp.mean((h @ params["w2"] + params["b2"] - y) ** 2)


def _nested_cond_jax(x: np.ndarray, y: np.ndarray) -> object:
    import jax.numpy as jnp
    from jax import lax

    def outer_true(x: object, y: object) -> object:
        return lax.cond(y > 0.0, lambda v: jnp.sin(v) * y, lambda v: v * v, x)

    return jnp.sum(lax.cond(jnp.sum(x) > 0.0, outer_true, lambda x, y: jnp.exp(x) - y, x, y))


_JAX_TWINS = {"mlp": _mlp_jax, "nested_cond": _nested_cond_jax}
