"""What the lowering does for large programs and repeated work (issue 12): no copies, each
expression once, fast `lax` forms, long programs split into parts, compiled sources reused."""

from __future__ import annotations

import ast
import gc
import inspect
import re
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import srcgrad as sg
from srcgrad.transforms import loading, lower_jax

_SG = (sg.sin, sg.cos, sg.tanh)
_JNP = (jnp.sin, jnp.cos, jnp.tanh)


def _chain(ops, x, n):
    for i in range(n):
        x = ops[i % 3](x)
    return ops[0](x).sum() if ops is _JNP else sg.sum(x)


def _statements(source: str, fn: str) -> list[ast.stmt]:
    """The statements of the top-level function `fn` in `source`."""
    return next(
        d for d in ast.parse(source).body if isinstance(d, ast.FunctionDef) and d.name == fn
    ).body


def test_no_copies() -> None:
    """`sg.grad` copies its arguments and grad makers pass gradients on unchanged in the IR;
    the source has no `a = b` line for them."""

    def f(w, x):
        return sg.sum(sg.tanh(x @ w + 1.0))

    w, x = np.ones((3, 2), np.float32), np.ones((4, 3), np.float32)
    ir_copies = [op for op in sg.trace(sg.grad(f), w, x).global_block().ops if op.type == "assign"]
    assert ir_copies  # the IR has copies: the lowering is what drops them
    src = sg.source(sg.grad(f), w, x)
    assert not [ln for ln in src.splitlines() if re.fullmatch(r"\s*\w+ = \w+", ln)], src
    np.testing.assert_allclose(
        sg.grad(f)(w, x), jax.grad(lambda w, x: jnp.sum(jnp.tanh(x @ w + 1.0)))(w, x), rtol=1e-4
    )  # float32: a GPU rounds 1 - tanh^2 its own way


def test_each_expression_once() -> None:
    """A repeated expression over the same values (here the forward's sin(x), and the
    gradient's g * sin(x) of both factors) is emitted once."""

    def f(x):
        return sg.sum(sg.sin(x) * sg.sin(x))

    x = np.linspace(0.1, 1.0, 5).astype(np.float32)
    src = sg.source(sg.grad(f), x)
    assert src.count("lax.sin(x)") == 1, src
    assert src.count("lax.cos(x)") == 1, src
    np.testing.assert_allclose(
        sg.grad(f)(x), jax.grad(lambda x: jnp.sum(jnp.sin(x) ** 2))(x), rtol=1e-6
    )


def test_fast_forms_only_where_they_match_jnp() -> None:
    """float32 / float64 get the lax call; float16 keeps jax.numpy's (jnp.sum upcasts it)."""

    def f(x):
        return sg.sum(sg.tanh(x), axis=0)

    src32 = sg.source(f, np.ones((3, 2), np.float32))
    assert "lax.tanh(x)" in src32 and "lax.reduce_sum(" in src32, src32
    src16 = sg.source(f, np.ones((3, 2), np.float16))
    assert "jnp.tanh(x)" in src16 and "jnp.sum(" in src16, src16
    x = np.linspace(-1, 1, 6).reshape(3, 2).astype(np.float16)
    np.testing.assert_array_equal(
        np.asarray(sg.jit(f)(x)), np.asarray(jnp.sum(jnp.tanh(x), axis=0))
    )


def test_long_program_is_split_into_parts() -> None:
    """A global block of more than SPLIT_OPS live ops becomes functions of at most
    2 * PART_OPS ops; the gradient is the same."""
    n = 400
    x = np.linspace(0.1, 0.9, 4).astype(np.float32)
    g = sg.grad(lambda v: _chain(_SG, v, n))
    lowered = g.lower(x)[0]
    parts = re.findall(r"^def (\w+_part_\d+)\(", lowered.source, re.M)
    assert len(parts) >= 4, parts
    main = lowered.fn.__name__
    assert len(_statements(lowered.source, main)) == len(parts) + 1  # one call each + return
    for p in parts:
        assert len(_statements(lowered.source, p)) <= 2 * lower_jax.PART_OPS + 1
    want = jax.grad(lambda v: _chain(_JNP, v, n))(x)
    np.testing.assert_allclose(g(x), want, rtol=2e-5)
    np.testing.assert_allclose(lowered.eager_fn()(x)[0][0], want, rtol=2e-5)


def test_short_program_is_one_function() -> None:
    src = sg.source(sg.grad(lambda v: _chain(_SG, v, 20)), np.ones(4, np.float32))
    assert "_part_" not in src


def test_same_source_is_compiled_once() -> None:
    """A fresh function whose program emits the same source reuses the compiled code and its
    jax.jit wrapper; sg.clear_caches() forgets it."""
    x = np.ones(3, np.float32)

    def lowered(scale: float) -> loading.Lowered:
        """The gradient of a new function object, lowered (the seed's comment names this
        line, so every call emits the same source for the same scale)."""
        return sg.grad(lambda v: sg.sum(sg.exp(v) * scale)).lower(x)[0]

    a, b = lowered(3.0), lowered(3.0)
    assert a is b and a.jitted() is b.jitted()
    np.testing.assert_allclose(a.jitted()(x)[0][0], 3.0 * np.exp(x), rtol=1e-6)
    assert lowered(4.0) is not a
    sg.clear_caches()
    c = lowered(3.0)
    assert c is not a and c.source == a.source


def test_no_empty_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run of PART_OPS ops that emit no statement (here the copies `sg.grad` makes of
    its arguments) makes no function: every part computes something."""
    monkeypatch.setattr(lower_jax, "SPLIT_OPS", 20)
    monkeypatch.setattr(lower_jax, "PART_OPS", 8)
    ws = [np.full((2,), 0.5 + 0.01 * i, np.float32) for i in range(20)]

    def f(ws, x):
        for w in ws:
            x = sg.tanh(x * w)
        return sg.sum(x)

    def f_jax(ws, x):
        for w in ws:
            x = jnp.tanh(x * w)
        return jnp.sum(x)

    x = np.linspace(0.1, 0.9, 2).astype(np.float32)
    lowered = sg.grad(f).lower(ws, x)[0]
    parts = re.findall(r"^def (\w+_part_\d+)\(", lowered.source, re.M)
    assert len(parts) >= 4, parts
    for p in parts:
        assert not isinstance(_statements(lowered.source, p)[0], ast.Return), lowered.source
    for a, b in zip(sg.grad(f)(ws, x), jax.grad(f_jax)(ws, x)):
        np.testing.assert_allclose(a, b, rtol=1e-5)


def test_collection_paused_nests_and_restores() -> None:
    """The collector is off inside (nested too) and as it was after, errors included; a
    first gradient leaves it as it found it."""
    was = gc.isenabled()
    try:
        for start in (True, False):
            (gc.enable if start else gc.disable)()
            with loading.collection_paused():
                assert not gc.isenabled()
                with loading.collection_paused():
                    assert not gc.isenabled()
                assert not gc.isenabled()
            assert gc.isenabled() is start
            with pytest.raises(ValueError):
                with loading.collection_paused():
                    raise ValueError
            assert gc.isenabled() is start
            sg.grad(lambda v: sg.sum(sg.sin(v) * start))(np.ones(3, np.float32))
            assert gc.isenabled() is start
    finally:
        (gc.enable if was else gc.disable)()


def test_functions_compiled_apart_keep_their_lines() -> None:
    """Each emitted function is compiled on its own; its code still names its own lines of
    the registered source (what tracebacks, inspect and JAX's op locations read)."""
    x = np.linspace(0.1, 0.9, 4).astype(np.float32)
    lowered = sg.grad(lambda v: _chain(_SG, v, 400)).lower(x)[0]
    lines = lowered.source.splitlines()
    namespace = lowered.fn.__globals__
    names = re.findall(r"^def (\w+)\(", lowered.source, re.M)
    assert len(names) >= 5 and len(lowered.code) == len(names)
    for name in names:
        code = namespace[name].__code__
        assert lines[code.co_firstlineno - 1].startswith(f"def {name}("), name
        body = _statements(lowered.source, name)
        want = {ln for stmt in body for ln in range(stmt.lineno, stmt.end_lineno + 1)}
        got = {ln for _, _, ln in code.co_lines() if ln is not None} - {code.co_firstlineno}
        assert got and got <= want, name
        assert inspect.getsource(namespace[name]).startswith(f"def {name}(")


def _code_fields(code: types.CodeType) -> dict[str, object]:
    """What compile() decides about a function: bytecode, names, constants, lines, columns."""
    fields = {k: getattr(code, k) for k in dir(code) if k.startswith("co_") and k != "co_lnotab"}
    for method in ("co_lines", "co_positions"):
        if method in fields:
            fields[method] = list(fields[method]())
    return fields


@pytest.mark.parametrize("program", ["chain", "layers"])
def test_parts_alike_share_compiled_code(monkeypatch: pytest.MonkeyPatch, program: str) -> None:
    """Parts that differ only in their values' names are compiled once (`part_bounds` cuts a
    repeated structure at the same place in each repeat); every other copy of the code
    is exactly what compile() makes of that part's own text, at its own lines."""
    monkeypatch.setattr(lower_jax, "SPLIT_OPS", 100)
    monkeypatch.setattr(lower_jax, "PART_OPS", 40)
    monkeypatch.setattr(lower_jax, "SHARE_OPS", 1000)
    sg.clear_caches()
    compiled = []
    real_compile = compile
    monkeypatch.setattr(
        loading, "compile", lambda *a: compiled.append(a[0]) or real_compile(*a), raising=False
    )
    x = np.linspace(0.1, 0.9, 4).astype(np.float32)
    ws = [np.full((4,), 0.5 + 0.01 * i, np.float32) for i in range(150)]

    def layers(ws, x):
        for w in ws:
            x = x + sg.tanh(x * w) * 0.1
        return sg.sum(x)

    def layers_jax(ws, x):
        for w in ws:
            x = x + jnp.tanh(x * w) * 0.1
        return jnp.sum(x)

    if program == "chain":
        g, args = sg.grad(lambda v: _chain(_SG, v, 400)), (x,)
        want = jax.grad(lambda v: _chain(_JNP, v, 400))(x)
    else:
        g, args, want = sg.grad(layers), (ws, x), jax.grad(layers_jax)(ws, x)
    lowered = g.lower(*args)[0]
    names = re.findall(r"^def (\w+)\(", lowered.source, re.M)
    parts = [n for n in names if "_part_" in n]
    assert len(parts) >= 10 and len(compiled) <= len(names) // 2, (len(parts), len(compiled))
    lines = lowered.source.splitlines(True)
    defs = {d.name: d for d in ast.parse(lowered.source).body if isinstance(d, ast.FunctionDef)}
    for name, code in zip(names, lowered.code):
        node = defs[name]
        padded = "".join(["\n"] * (node.lineno - 1) + lines[node.lineno - 1 : node.end_lineno])
        want_code = next(
            c
            for c in real_compile(padded, lowered.filename, "exec").co_consts
            if isinstance(c, types.CodeType)
        )
        assert _code_fields(code) == _code_fields(want_code), name
    got = lowered.eager_fn()(*jax.tree_util.tree_leaves(args))[0]  # (no XLA compile)
    for a, b in zip(got, jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-7)


def test_canonical_names_keep_each_length() -> None:
    """A canonical name is as long as the name it stands for; a name shorter than its stem
    means the function has no canonical form."""
    slots = lower_jax._Slots()
    assert [slots[n] for n in ("tanh_12", "x", "tanh_12")] == ["A______", "B", "A______"]
    assert slots.ok()
    for k in range(23):
        slots[f"v{k}"]
    assert slots.ok() and slots["y"] == "Z"
    assert slots["z"] == "AA" and not slots.ok()
    assert lower_jax._stem(26) == "AA" and lower_jax._stem(701) == "ZZ"
