"""Every registry row is tested: a forward case (test_ops.CASES, test_manip.CASES and the
tables of the other op families, EXTRA_FORWARD) for each op, and a gradient case
(test_op_grads.CASES, test_manip.GRAD_CASES, EXTRA_GRADIENT) for each differentiable one,
named by the op's user function.
"""

from __future__ import annotations

import pytest

import srcgrad as sg
import test_manip
import test_op_grads
import test_ops
import test_conv
import test_jnp_extra
import test_nn_functions
import test_random
import test_special
from srcgrad.core.declare import EXPORTS
from srcgrad.core.registry import REGISTRY

#: Rows no user function reaches, and the tests that cover them.
INTERNAL = {
    "constant": "every test with a constant (lower_jax emits it; test_golden)",
    "assign": "the renamed gradients of test_backward and the goldens",
    "sum": "gradient fan-in (test_backward, the mlp golden)",
    "fill_zeros_like": "test_backward's pruned-gradient tests",
    "optimization_barrier": "sg.checkpoint's recomputation (test_checkpoint)",
    "lax_gather": "sg.from_jax of x[idx] and take_along_axis (test_from_jax)",
    "lax_scatter_add": "sg.from_jax of x.at[idx].add and gather's gradient (test_from_jax)",
    "lax_scatter": "sg.from_jax of x.at[idx].set (test_from_jax)",
    "lax_scatter_mul": "sg.from_jax of x.at[idx].multiply (test_from_jax_rows)",
    "lax_scatter_min": "sg.from_jax of x.at[idx].min, ties included (test_from_jax_rows)",
    "lax_scatter_max": "sg.from_jax of x.at[idx].max, ties included (test_from_jax_rows)",
    "lax_top_k": "sg.from_jax of lax.top_k (test_from_jax_rows)",
    "lax_nextafter": "sg.from_jax of jnp.nextafter (test_from_jax_rows)",
    "lax_bitcast": "sg.from_jax of jax.random's floats and total-order comparisons "
    "(test_from_jax_rows)",
    "lax_lu_pivots_to_permutation": "sg.from_jax of lu_solve (test_from_jax, test_from_jax_rows)",
    "prng_seed": "sg.from_jax of jax.random.key (test_from_jax_rows)",
    "prng_bits": "sg.from_jax of jax.random.bits (test_from_jax_rows)",
    "prng_split": "sg.from_jax of jax.random.split (test_from_jax_rows)",
    "prng_fold_in": "sg.from_jax of jax.random.fold_in (test_from_jax_rows)",
    "threefry2x32": "sg.from_jax of jax.extend.random.threefry_2x32 (test_from_jax_rows)",
    "pure_callback": "sg.from_jax of jax.pure_callback (test_from_jax_rows)",
    "index_update": "x.at[...].set/multiply/min/max (test_indexing_adv)",
    "igamma_grad_a": "gammainc's gradient in a (test_special)",
    "jax_op": "sg.jax_op and from_jax's fallback (test_jax_op, test_from_jax)",
    "jax_effect": "from_jax's io_callback and jax.debug.callback (test_from_jax: "
    "test_callbacks_with_effects_run_on_every_call_as_under_jax_jit)",
    "complex": "the gradient of sg.imag (test_complex)",
    "debug_print": "sg.debug.print (test_debug)",
    "debug_breakpoint": "sg.debug.breakpoint (test_debug)",
    "raise_if": "a converted raise / assert under a traced condition (test_convert_python)",
}
#: Control-flow rows: test_control_flow.py, test_checkpoint.py and the while/cond goldens;
#: the custom-rule rows: test_custom.py.
CONTROL = {"while", "cond", "checkpoint", "custom_vjp", "custom_jvp"}


def _names(cases: list) -> set[str]:
    return {c.name.split()[0] for c in cases}


ROWS = sorted(n for n in REGISTRY if n not in CONTROL)
#: The forward and gradient tables of op families tested in their own files.
_NN = test_nn_functions.ELEMENTWISE + test_nn_functions.CASES
EXTRA_FORWARD = test_random.CASES + test_conv.CASES + _NN + test_jnp_extra.CASES
EXTRA_GRADIENT = (
    test_random.GRAD_CASES + test_conv.CASES + _NN + [c for c in test_jnp_extra.CASES if c.diff]
)
FORWARD = test_ops.CASES + test_manip.CASES + test_special.CASES + EXTRA_FORWARD
GRADIENT = test_op_grads.CASES + test_manip.GRAD_CASES + test_special.GRAD_CASES + EXTRA_GRADIENT


@pytest.mark.parametrize("row", ROWS)
def test_row_has_a_forward_and_a_gradient_case(row: str) -> None:
    op = REGISTRY[row]
    if op.public is None:
        assert row in INTERNAL, f"internal op {row!r} needs a test (and an INTERNAL entry)"
        return
    assert op.public in _names(FORWARD), f"{row} (sg.{op.public}) has no forward case"
    if op.differentiable:
        assert op.public in _names(GRADIENT), (
            f"{row} (sg.{op.public}) is differentiable but has no gradient case"
        )


def test_internal_and_control_lists_are_current() -> None:
    for name in set(INTERNAL) | CONTROL:
        assert name in REGISTRY, f"{name!r} is no longer an op: drop it from this file"
    for name in INTERNAL:
        assert REGISTRY[name].public is None


def test_every_export_has_a_forward_case() -> None:
    missing = sorted(set(EXPORTS) - _names(FORWARD))
    assert not missing, f"exported without a forward case: {missing}"


def test_package_exports_only_the_api_and_declared_ops() -> None:
    assert len(sg.__all__) == len(set(sg.__all__))
    for name in sg.__all__:
        assert hasattr(sg, name), name
    for internal in (
        "unbroadcast",
        "add_n",
        "assign",
        "constant",
        "fill_zeros_like",
        "expand_reduced",
        "getitem",
    ):
        assert internal not in sg.__all__ and not hasattr(sg, internal), internal
    for name in EXPORTS:  # a namespaced function (linalg.solve) is reached through its namespace
        head, *rest = name.split(".")
        assert head in sg.__all__, name
        obj = getattr(sg, head)
        for part in rest:
            assert hasattr(obj, part), name
            obj = getattr(obj, part)
