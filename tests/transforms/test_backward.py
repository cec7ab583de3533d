"""Structure of the transformed IR: fan-in, pruning, zero fill, parameter lists, head gradients."""

from __future__ import annotations

import gc
import inspect
import os
import re
from typing import Any, Callable, Iterator

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import srcgrad as sg
from srcgrad.ir.program import Block, Op, Program, Variable
from srcgrad.testing import check_grads

RNG = np.random.default_rng(0)


def _ops(block: Block) -> Iterator[Op]:
    """Every op of `block` and of the blocks nested in it."""
    for op in block.ops:
        yield op
        for sub in op.sub_blocks():
            yield from _ops(sub)


def all_ops(prog: Program) -> list[Op]:
    return list(_ops(prog.global_block()))


def grad_ops(prog: Program) -> list[Op]:
    """The ops emitted while differentiating a forward op (their `origin`)."""
    return [op for op in all_ops(prog) if op.origin is not None]


def names(prog: Program) -> set[str]:
    return {v.name for op in all_ops(prog) for v in op.outputs}


def arr(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape)


# ---------------------------------------------------------------- fan-in


def test_three_readers_get_three_renamed_writes_and_one_sum() -> None:
    """x is read by sin, cos and exp: three x@GRAD@RENAME@n writes, one `sum` makes x@GRAD."""
    prog = sg.Program()
    with sg.program_guard(prog):
        x = sg.parameter("x", (3,), "float64")
        loss = sg.sum(sg.sin(x) * sg.cos(x) + sg.exp(x))
        [(p, g)] = sg.append_backward(loss)
    prog.verify()
    assert p is x and g.name == "x@GRAD" and g.shape == x.shape
    renamed = sorted(n for n in names(prog) if n.startswith("x@GRAD@RENAME@"))
    assert renamed == ["x@GRAD@RENAME@0", "x@GRAD@RENAME@1", "x@GRAD@RENAME@2"]
    sums = [op for op in all_ops(prog) if op.type == "sum"]
    assert len(sums) == 1
    assert len(sums[0].outputs) == 1 and sums[0].outputs[0] is g
    assert sorted(v.name for v in sums[0].inputs) == renamed
    assert not any("@RENAME@" in n for n in names(prog) if not n.startswith("x@"))

    xv = arr(3)
    [got] = sg.compile(prog, feed=["x"], fetch=[g])(xv)
    want = jax.grad(lambda x: jnp.sum(jnp.sin(x) * jnp.cos(x) + jnp.exp(x)))(xv)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_value_read_twice_by_one_op_is_summed() -> None:
    """x * x: the multiply's grad maker writes two partials of x."""
    prog = sg.trace(sg.grad(lambda x: sg.sum(x * x)), arr(4))
    prog.verify()
    sums = [op for op in all_ops(prog) if op.type == "sum"]
    assert len(sums) == 1 and len(sums[0].inputs) == 2
    assert all("@RENAME@" in v.name for v in sums[0].inputs)
    xv = arr(4)
    np.testing.assert_allclose(sg.grad(lambda x: sg.sum(x * x))(xv), 2 * xv, rtol=1e-12)


# ---------------------------------------------------------------- no_grad_set


def _two_branches() -> tuple[
    Program, dict[str, Variable], list[tuple[Variable, Variable]], set[Op]
]:
    """loss = sum(tanh(x @ w1)) + sum(sin(x @ w2)), with the sin branch in no_grad_set."""
    prog = sg.Program()
    with sg.program_guard(prog):
        x = sg.parameter("x", (4, 3), "float64")
        w1 = sg.parameter("w1", (3, 2), "float64")
        w2 = sg.parameter("w2", (3, 2), "float64")
        a = sg.tanh(x @ w1)
        n_before = len(prog.global_block().ops)
        b = sg.sin(x @ w2)
        branch_b = set(prog.global_block().ops[n_before:])
        loss = sg.sum(a) + sg.sum(b)
        pairs = sg.append_backward(loss, no_grad_set=[b])
    return prog, {"x": x, "w1": w1, "w2": w2, "b": b}, pairs, branch_b


def test_no_grad_set_removes_the_grad_ops_of_its_branch() -> None:
    prog, v, pairs, branch_b = _two_branches()
    prog.verify()
    assert [p.name for p, _ in pairs] == ["x", "w1"]
    assert not any(op.origin in branch_b for op in grad_ops(prog))
    assert "w2@GRAD" not in names(prog) and "b@GRAD" not in names(prog)
    assert not any(op.type == "fill_zeros_like" for op in all_ops(prog))
    assert not any("@RENAME@" in n for n in names(prog))

    xv, w1v, w2v = arr(4, 3), arr(3, 2), arr(3, 2)
    got = sg.compile(prog, feed=["x", "w1", "w2"], fetch=[g for _, g in pairs])(xv, w1v, w2v)

    def twin(x: Any, w1: Any, w2: Any) -> Any:
        return jnp.sum(jnp.tanh(x @ w1)) + jnp.sum(jax.lax.stop_gradient(jnp.sin(x @ w2)))

    want = jax.grad(twin, argnums=(0, 1))(xv, w1v, w2v)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_no_grad_set_by_name_drops_only_that_parameter() -> None:
    prog = sg.Program()
    with sg.program_guard(prog):
        x = sg.parameter("x", (4, 3), "float64")
        w = sg.parameter("w", (3, 2), "float64")
        loss = sg.sum(sg.tanh(x @ w))
        pairs = sg.append_backward(loss, no_grad_set=["w"])
    prog.verify()
    assert [(p.name, g.name) for p, g in pairs] == [("x", "x@GRAD")]
    assert "w@GRAD" not in names(prog)
    matmul_grads = [op for op in grad_ops(prog) if op.origin.type == "matmul"]
    assert sum(op.type == "matmul" for op in matmul_grads) == 1


def _cond_two_outputs(prune: bool) -> tuple[Program, Variable, Variable, Op]:
    """a, b = cond(p, ...): loss reads a, and reads b only through a no-grad exp (or not at all)."""
    prog = sg.Program()
    with sg.program_guard(prog):
        x = sg.parameter("x", (3,), "float64")
        p = sg.data("p", (), "bool")
        a, b = sg.cond(p, lambda x: (sg.sin(x), sg.cos(x)), lambda x: (x * 2.0, x * 3.0), x)
        fwd_cond = prog.global_block().ops[-1]
        if prune:
            c = sg.exp(b)
            loss = sg.sum(a) + sg.sum(c)
            [(_, g)] = sg.append_backward(loss, no_grad_set=[c])
        else:
            [(_, g)] = sg.append_backward(sg.sum(a))
    return prog, b, g, fwd_cond


@pytest.mark.parametrize("prune", [True, False], ids=["no_grad_set", "unused_output"])
def test_fill_zeros_like_only_where_a_grad_op_reads_a_pruned_gradient(prune: bool) -> None:
    """The grad of a two-output `cond` reads both output gradients; b's was never made."""
    prog, b, g, fwd_cond = _cond_two_outputs(prune)
    prog.verify()
    fills = [op for op in all_ops(prog) if op.type == "fill_zeros_like"]
    assert len(fills) == 1 and len(fills[0].inputs) == 1 and fills[0].inputs[0] is b
    zero = fills[0].outputs[0]
    readers = [op for op in all_ops(prog) if any(v is zero for v in op.inputs)]
    assert len(readers) == 1 and readers[0].type == "cond" and readers[0].origin is fwd_cond
    run = sg.compile(prog, feed=["x", "p"], fetch=[g])
    xv = arr(3)

    def twin(x: Any, p: Any) -> Any:
        a, b = jax.lax.cond(p, lambda x: (jnp.sin(x), jnp.cos(x)), lambda x: (x * 2.0, x * 3.0), x)
        return jnp.sum(a) + (jnp.sum(jax.lax.stop_gradient(jnp.exp(b))) if prune else 0.0)

    for pv in (True, False):
        np.testing.assert_allclose(run(xv, pv)[0], jax.grad(twin)(xv, pv), rtol=1e-12)


def test_fill_zeros_like_for_an_unused_loop_carry() -> None:
    """A loop carries (a, b); the loss reads only b, but the loop's grad reads both gradients."""

    def f(x: Any) -> Any:
        a, b = sg.fori_loop(0, 3, lambda i, c: (sg.sin(c[0]) * c[1], c[1] * 1.5), (x, x * 2.0))
        return sg.sum(b)

    def twin(x: Any) -> Any:
        a, b = jax.lax.fori_loop(
            0, 3, lambda i, c: (jnp.sin(c[0]) * c[1], c[1] * 1.5), (x, x * 2.0)
        )
        return jnp.sum(b)

    xv = arr(2)
    prog = sg.trace(sg.grad(f), xv)
    prog.verify()
    loop = next(op for op in prog.global_block().ops if op.type == "while" and op.origin is None)
    fills = [op for op in all_ops(prog) if op.type == "fill_zeros_like"]
    unused = loop.outputs[1]  # outputs[0] is fori_loop's counter, then a and b
    assert len(fills) == 1 and fills[0].inputs[0] is unused
    np.testing.assert_allclose(sg.grad(f)(xv), jax.grad(twin)(xv), rtol=1e-12)


def test_no_fill_when_every_pruned_gradient_is_unread() -> None:
    """Single-output ops on the path always have their output gradient: no zero fill at all."""

    def f(x: Any, w: Any) -> Any:
        h = sg.tanh(x @ w)
        return sg.sum(h * sg.stop_gradient(h)) + sg.mean(sg.relu(h))

    prog = sg.trace(sg.grad(f, argnums=(0, 1)), arr(4, 3), arr(3, 2))
    prog.verify()
    assert not any(op.type == "fill_zeros_like" for op in all_ops(prog))


# ---------------------------------------------------------------- op path


def test_loss_of_small_subnet_does_not_differentiate_a_big_one() -> None:
    prog = sg.Program()
    with sg.program_guard(prog):
        x = sg.parameter("x", (4, 3), "float64")
        w_small = sg.parameter("w_small", (3, 2), "float64")
        w_big = sg.parameter("w_big", (3, 3), "float64")
        start = len(prog.global_block().ops)
        h = x
        for _ in range(20):
            h = sg.tanh(h @ w_big) + h
        big_out = sg.sum(h)
        big_ops = set(prog.global_block().ops[start:])
        loss = sg.mean(sg.sigmoid(x @ w_small))
        pairs = sg.append_backward(loss)
    prog.verify()
    assert [p.name for p, _ in pairs] == ["x", "w_small"]
    origins = {op.origin for op in grad_ops(prog)}
    assert origins and not origins & big_ops
    assert not any(n.startswith("w_big@") for n in names(prog))
    assert big_out.name + "@GRAD" not in names(prog)


# ---------------------------------------------------------------- stop_gradient


def test_stop_gradient_op_blocks_the_gradient() -> None:
    def f(x: Any) -> Any:
        return sg.sum(x * sg.stop_gradient(sg.sin(x)) ** 2)

    def twin(x: Any) -> Any:
        return jnp.sum(x * jax.lax.stop_gradient(jnp.sin(x)) ** 2)

    xv = arr(5)
    prog = sg.trace(sg.grad(f), xv)
    prog.verify()
    assert not any(op.origin.type in ("stop_gradient", "sin") for op in grad_ops(prog))
    np.testing.assert_allclose(sg.grad(f)(xv), jax.grad(twin)(xv), rtol=1e-12)


def test_stop_gradient_attribute_blocks_the_gradient() -> None:
    prog = sg.Program()
    with sg.program_guard(prog):
        x = sg.parameter("x", (3,), "float64")
        h = sg.exp(x)
        h.stop_gradient = True
        loss = sg.sum(h * x)
        [(_, g)] = sg.append_backward(loss)
    prog.verify()
    assert not any(op.origin.type == "exp" for op in grad_ops(prog))
    xv = arr(3)
    np.testing.assert_allclose(sg.compile(prog, ["x"], [g])(xv)[0], np.exp(xv), rtol=1e-12)


# ---------------------------------------------------------------- parameter lists


def _mlp_program() -> tuple[Program, Variable]:
    prog = sg.Program()
    with sg.program_guard(prog):
        x = sg.data("x", (4, 3), "float64")
        w = sg.parameter("w", (3, 2), "float64")
        b = sg.parameter("b", (2,), "float64")
        v = sg.parameter("v", (2,), "float64")
        loss = sg.mean(sg.tanh(x @ w + b) * v)
    return prog, loss


@pytest.mark.parametrize("as_names", [True, False], ids=["names", "variables"])
def test_append_backward_parameter_list(as_names: bool) -> None:
    prog, loss = _mlp_program()
    by_name = {v.name: v for v in prog.inputs}
    with sg.program_guard(prog):
        plist = ["v", "w"] if as_names else [by_name["v"], by_name["w"]]
        pairs = sg.append_backward(loss, parameter_list=plist)
    prog.verify()
    assert [p.name for p, _ in pairs] == ["v", "w"]
    assert all(p is by_name[p.name] and g.name == f"{p.name}@GRAD" for p, g in pairs)
    assert all(g.shape == p.shape and g.dtype == p.dtype for p, g in pairs)
    assert "b@GRAD" not in names(prog)


def test_append_backward_defaults_to_every_parameter() -> None:
    prog, loss = _mlp_program()
    with sg.program_guard(prog):
        pairs = sg.append_backward(loss)
    prog.verify()
    assert [(p.name, g.name) for p, g in pairs] == [
        ("w", "w@GRAD"),
        ("b", "b@GRAD"),
        ("v", "v@GRAD"),
    ]
    assert "x@GRAD" not in names(prog)
    xv, wv, bv, vv = arr(4, 3), arr(3, 2), arr(2), arr(2)
    got = sg.compile(prog, ["x", "w", "b", "v"], [g for _, g in pairs])(xv, wv, bv, vv)
    want = jax.grad(lambda w, b, v: jnp.mean(jnp.tanh(xv @ w + b) * v), argnums=(0, 1, 2))(
        wv, bv, vv
    )
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12)


# ---------------------------------------------------------------- gradients()


def test_gradients_of_several_targets_with_head_gradients_match_vjp() -> None:
    """y2 reads y1, so y1's gradient is its head gradient plus what flows back from y2."""
    prog = sg.Program()
    with sg.program_guard(prog):
        x = sg.parameter("x", (4, 3), "float64")
        w = sg.parameter("w", (3, 2), "float64")
        gy1 = sg.data("gy1", (4, 2), "float64")
        y1 = sg.tanh(x @ w)
        y2 = sg.sum(sg.sin(y1) * x[:, :2])
        gx, gw = sg.gradients([y1, y2], [x, w], target_gradients=[gy1, 0.5])
    prog.verify()
    assert (gx.name, gw.name) == ("x@GRAD", "w@GRAD")
    xv, wv, g1 = arr(4, 3), arr(3, 2), arr(4, 2)
    got = sg.compile(prog, ["x", "w", "gy1"], [y1, y2, gx, gw])(xv, wv, g1)

    def twin(x: Any, w: Any) -> Any:
        y1 = jnp.tanh(x @ w)
        return y1, jnp.sum(jnp.sin(y1) * x[:, :2])

    outs, pullback = jax.vjp(twin, xv, wv)
    want = pullback((g1, jnp.asarray(0.5)))
    for a, b in zip(got, list(outs) + list(want)):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_gradients_returns_none_for_an_input_the_targets_ignore() -> None:
    prog = sg.Program()
    with sg.program_guard(prog):
        x = sg.parameter("x", (3,), "float64")
        u = sg.parameter("u", (2,), "float64")
        y = sg.sum(sg.exp(x))
        gx, gu = sg.gradients(y, [x, u])
        [gu_only] = sg.gradients(y, u)
    prog.verify()
    assert gx is not None and gx.shape == (3,)
    assert gu is None and gu_only is None


# ---------------------------------------------------------------- broadcasting

BROADCAST = [
    ((4, 3), (3,)),
    ((4, 1), (1, 3)),
    ((), (4, 3)),
    ((1, 1, 3), (2, 4, 3)),
    ((2, 1, 3), (4, 1)),
    ((1,), (2, 3)),
]


@pytest.mark.parametrize("sa,sb", BROADCAST)
def test_broadcasting_is_undone(sa: tuple, sb: tuple) -> None:
    def f(a: Any, b: Any) -> Any:
        return sg.sum(sg.sin(a * b + a - b) * sg.where(a > 0, a, b))

    def twin(a: Any, b: Any) -> Any:
        return jnp.sum(jnp.sin(a * b + a - b) * jnp.where(a > 0, a, b))

    av, bv = arr(*sa), arr(*sb)
    prog = sg.trace(sg.grad(f, argnums=(0, 1)), av, bv)
    prog.verify()
    ga, gb = sg.grad(f, argnums=(0, 1))(av, bv)
    assert ga.shape == sa and gb.shape == sb
    ja, jb = jax.grad(twin, argnums=(0, 1))(av, bv)
    np.testing.assert_allclose(ga, ja, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gb, jb, rtol=1e-10, atol=1e-12)


def test_grad_variables_have_the_shapes_of_their_values() -> None:
    """Every x@GRAD in the IR has x's shape and dtype (batched matmul and bias broadcast)."""

    def f(a: Any, w: Any, b: Any) -> Any:
        return sg.sum(sg.tanh(a @ w + b))

    prog = sg.trace(sg.grad(f, argnums=(0, 1, 2)), arr(2, 4, 3), arr(3, 5), arr(5))
    prog.verify()
    by_name = {v.name: v for op in all_ops(prog) for v in op.outputs}
    grads = {n: v for n, v in by_name.items() if n.endswith("@GRAD")}
    assert len(grads) >= 5
    for n, g in grads.items():
        fwd = by_name[n[: -len("@GRAD")]]
        assert (g.shape, g.dtype) == (fwd.shape, fwd.dtype), n


# ---------------------------------------------------------------- emitted source


def _line_of(fn: Callable[..., Any], text: str) -> int:
    """The file line of the first source line of `fn` that contains `text`."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, s in enumerate(lines) if text in s)


def _annotated(x: Any, w: Any) -> Any:
    h = x @ w
    a = sg.tanh(h)
    return sg.sum(sg.exp(a) * a)


def test_source_names_the_forward_op_and_user_line_of_each_grad_section() -> None:
    xv, wv = arr(4, 3), arr(3, 2)
    src = sg.source(sg.grad(_annotated, argnums=(0, 1)), xv, wv)
    base = re.escape(os.path.basename(__file__))
    found = set(re.findall(rf"# grad of (\w+) -> \w+ in _annotated \({base}:(\d+)\)", src))
    want = {
        ("matmul", _line_of(_annotated, "x @ w")),
        ("tanh", _line_of(_annotated, "sg.tanh")),
        ("exp", _line_of(_annotated, "return")),
        ("multiply", _line_of(_annotated, "return")),
        ("reduce_sum", _line_of(_annotated, "return")),
    }
    assert {(t, int(n)) for t, n in found} == want
    assert src.count("# grad of ") == len(want)


def _layer(h: Any, w: Any) -> Any:
    return sg.tanh(h @ w)


def _two_layers(x: Any, w: Any) -> Any:
    return sg.sum(_layer(_layer(x, w), w) * 2.0)


def test_comments_name_the_users_function() -> None:
    """Grad sections and location comments say which function the op was made in; the
    name is a user string, so only identifier characters of it reach the source."""
    xv, wv = arr(3, 3), arr(3, 3)
    src = sg.source(sg.grad(_two_layers, argnums=(0, 1)), xv, wv)
    base = re.escape(os.path.basename(__file__))
    tanh_line = _line_of(_layer, "sg.tanh")
    assert len(re.findall(rf"# grad of tanh -> \w+ in _layer \({base}:{tanh_line}\)", src)) == 2
    assert re.search(rf"# grad of multiply -> \w+ in _two_layers \({base}:\d+\)", src)
    assert re.search(
        rf"^    # in _layer \({base}:{tanh_line}\)$", sg.source(_two_layers, xv, wv), flags=re.M
    )

    def evil(x: Any) -> Any:
        return sg.sum(sg.sin(x))

    evil.__code__ = evil.__code__.replace(co_name="ev il\n#)'\"; import os\u00e9")
    src = sg.source(sg.grad(evil), xv)
    assert "# grad of sin -> sin_0 in evilimportos (" in src
    compile(src, "<evil>", "exec")


# ---------------------------------------------------------------- economy


def _tanh_chain(x: Any) -> Any:
    for _ in range(5):
        x = sg.tanh(x)
    return sg.sum(x)


def test_grad_sections_share_scalar_constants() -> None:
    """The `1.0` of five tanh gradients is one constant op of the backward block; a loop's
    grad block gets its own (ops there may be moved before the outer ones)."""
    prog = sg.trace(sg.grad(_tanh_chain), np.ones(3))
    prog.verify()
    ones = [op for op in grad_ops(prog) if op.type == "constant" and op.attrs["value"] == 1.0]
    assert len(ones) == 1

    def looped(x: Any) -> Any:
        y = sg.fori_loop(0, 3, lambda i, v: sg.tanh(v) * 0.5, sg.tanh(x))
        return sg.sum(sg.tanh(y))

    prog = sg.trace(sg.grad(looped), np.ones(3))
    prog.verify()
    blocks = {
        op.block.idx
        for op in grad_ops(prog)
        if op.type == "constant" and op.attrs["value"] == 1.0 and op.attrs["dtype"] == np.float64
    }
    assert len(blocks) == 2
    check_grads(
        looped,
        (arr(3),),
        jax_fun=lambda x: jnp.sum(
            jnp.tanh(jax.lax.fori_loop(0, 3, lambda i, v: jnp.tanh(v) * 0.5, jnp.tanh(x)))
        ),
    )


def test_lowering_leaves_no_cyclic_garbage() -> None:
    """`Transformed.lower` disposes of the program it traced: reference counting frees its
    ops and variables, so the cyclic collector has nothing of it to walk."""
    gc.collect()
    gc.disable()
    try:
        sg.grad(_tanh_chain).lower(np.ones(3))
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        left = [o for o in gc.garbage if isinstance(o, (Op, Variable, Block, Program))]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert not left
