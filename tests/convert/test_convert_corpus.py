"""The conversion corpus (tests/support/convert_corpus*.py): each function differentiated by srcgrad
with no hand rewrite -- sg.grad (first and second order), sg.jvp and jax.jit(sg.grad(...)) --
against jax.grad / jax.jvp of its JAX twin run eagerly, and float64 finite differences; its
value also against the function itself run on NumPy values (Python's own result).

A representative slice runs by default; the whole corpus with
`python -m pytest -q -n 2 -m slow tests/convert/test_convert_corpus.py` (docs/testing.md)."""

from __future__ import annotations

import inspect
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import srcgrad as sg

from support import convert_corpus
from support import convert_corpus_items
from support import convert_corpus_loops
from support import convert_corpus_state

_IMPORT = "import srcgrad as sg  # the twin replaces this line: import jax.numpy as sg"
MODULES = (convert_corpus, convert_corpus_loops, convert_corpus_items, convert_corpus_state)


def _twins(module: Any) -> dict[str, Any]:
    """The corpus module's source run with `sg` bound to jax.numpy (TWIN = True)."""
    src = inspect.getsource(module)
    assert _IMPORT in src
    src = src.replace(_IMPORT, "import jax.numpy as sg").replace("TWIN = False", "TWIN = True")
    ns: dict[str, Any] = {"__name__": module.__name__ + "_twin"}
    exec(compile(src, module.__file__ + ":twin", "exec"), ns)
    return ns


CASES = {name: (case, _twins(m)) for m in MODULES for name, case in m.CASES.items()}
FAST = [
    "relu_square",
    "piecewise3",
    "cond_expression",
    "newton_cbrt",
    "bisection_sqrt",
    "sum_until_exceeds",
    "first_crossing",
    "traced_range_bound",
    "fill_buffer",
    "mask_assign",
    "append_then_stack",
    "deep_nesting",
    "dict_item_each_branch",
    "attribute_one_branch",
    "helper_writes_argument@2",
    "or_returns_an_operand",
    "closure_reads_loop_variable",
    "nonlocal_counter_in_branch",
    "attribute_in_traced_loop",
    "int_start_with_continue",
    "list_indexed_by_traced_counter",
    "del_in_branch",
]
SLOW = [n for n in CASES if n not in FAST]


def _twin(name: str) -> Callable[..., Any]:
    twins = CASES[name][1]
    name = name.split("@")[0]  # `f@2`: f at its second point
    return twins.get(name + "_jax") or twins[name]


def _split(args: tuple) -> tuple[list, tuple[int, ...]]:
    """The call arguments (Python ints as int32 arrays: traced loop bounds) and the positions
    of the static ones (strings)."""
    out, static = [], []
    for i, a in enumerate(args):
        if isinstance(a, str):
            static.append(i)
            out.append(a)
        elif isinstance(a, int) and i > 0:
            out.append(np.int32(a))
        else:
            out.append(np.asarray(a, np.float64) if i == 0 else a)
    return out, tuple(static)


def _close(a: Any, b: Any, what: str, rtol: float = 1e-6) -> None:
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=1e-9, err_msg=what)


#: Corpus functions that fill a buffer made by sg.zeros / sg.zeros_like of a NumPy value:
#: outside a trace that is a JAX array, which cannot be assigned into (no Python run).
JAX_BUFFERS = {
    "fill_buffer",
    "manual_cumsum",
    "assign_2d",
    "prefix_product",
    "stencil",
    "thomas_solve",
}


def check_case(name: str) -> None:
    fn, args, max_iters, second = CASES[name][0]
    twin = _twin(name)
    call, static = _split(args)
    x, rest = call[0], call[1:]
    jrest = [int(a) if isinstance(a, np.int32) else a for a in rest]
    v = np.random.default_rng(len(name)).standard_normal(np.shape(x))

    g = sg.grad(fn, static_argnums=static)(*call)
    jg = jax.grad(twin)(jnp.asarray(x), *jrest)
    _close(g, jg, f"{name}: sg.grad vs jax.grad")

    bounded = sg.convert(fn, max_iters=max_iters) if max_iters else fn
    jitted = jax.jit(sg.grad(bounded, static_argnums=static), static_argnums=static)
    _close(jitted(*call), jg, f"{name}: jax.jit(sg.grad) vs jax.grad")

    f_of_x = lambda x: fn(x, *rest)  # the closure is what a user writes
    out, tangent = sg.jvp(f_of_x, (x,), (v,))
    jout, jtangent = jax.jvp(lambda x: twin(x, *jrest), (jnp.asarray(x),), (jnp.asarray(v),))
    _close(out, jout, f"{name}: value")
    if name.split("@")[0] not in JAX_BUFFERS:  # the function itself on NumPy values
        _close(fn(x, *jrest), out, f"{name}: value vs the function run on NumPy values")
    _close(tangent, jtangent, f"{name}: sg.jvp vs jax.jvp")

    f_jit = sg.jit(f_of_x)
    eps = 1e-6
    fd = (float(f_jit(x + eps * v)) - float(f_jit(x - eps * v))) / (2 * eps)
    ad = float(np.vdot(np.asarray(g), v))
    assert abs(fd - ad) <= 1e-5 * max(1.0, abs(fd)), (
        f"{name}: finite differences {fd}, sg.grad {ad}"
    )

    if second:
        hv = sg.grad(lambda x: sg.sum(sg.grad(f_of_x)(x) * v))(x)
        jhv = jax.grad(lambda x: jnp.sum(jax.grad(lambda y: twin(y, *jrest))(x) * v))(
            jnp.asarray(x)
        )
        _close(hv, jhv, f"{name}: second order vs jax", rtol=1e-5)


def test_corpus_size() -> None:
    assert len(CASES) == sum(len(m.CASES) for m in MODULES) >= 80
    assert set(FAST) <= set(CASES)


@pytest.mark.parametrize("name", FAST)
def test_corpus(name: str) -> None:
    check_case(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW)
def test_corpus_full(name: str) -> None:
    check_case(name)


#: Corpus functions that fill a buffer made by sg.zeros / sg.ones / np.zeros: called outside
#: a trace (imperative mode is not converted) those are JAX or NumPy arrays, which cannot hold
#: a Tensor; with a Tensor buffer (`y = x * 1.0`) item assignment works imperatively.
EAGER_BUFFERS = {
    "fill_buffer",
    "assign_2d",
    "prefix_product",
    "stencil",
    "thomas_solve",
    "numpy_buffer",
}
IMPERATIVE_FAST = [
    "relu_square",
    "first_crossing",
    "mask_assign",
    "swap_items",
    "append_then_stack",
    "dict_item_each_branch",
    "closure_reads_loop_variable",
]


def check_imperative(name: str) -> None:
    """The corpus function run on a Tensor under record(): Python control flow on its
    concrete values, item assignment on Tensors, lists of Tensors."""
    (fn, args, _, _), _ = CASES[name]
    x = sg.tensor(np.asarray(args[0], np.float64))
    x.attach_grad()
    with sg.autograd.record():
        y = fn(x, *args[1:])
    sg.autograd.backward(y)
    jg = jax.grad(_twin(name))(jnp.asarray(args[0], np.float64), *args[1:])
    _close(np.asarray(x.grad), jg, f"{name}: imperative gradient vs jax.grad")


@pytest.mark.parametrize("name", IMPERATIVE_FAST)
def test_corpus_imperative(name: str) -> None:
    check_imperative(name)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", [n for n in CASES if n not in EAGER_BUFFERS and n not in IMPERATIVE_FAST]
)
def test_corpus_imperative_full(name: str) -> None:
    check_imperative(name)
