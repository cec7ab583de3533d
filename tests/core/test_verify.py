"""The verifier rejects hand-broken programs with a message that names the problem.

Each test traces a valid program, breaks one invariant by mutating its ops or blocks, and
checks that both `prog.verify()` and `sg.verify(prog)` raise `sg.VerifyError`.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.ir.program import Block, Op, Program, Variable
from srcgrad.core.registry import REGISTRY


def _loop_then_branch(x: Any) -> Any:
    y = sg.tanh(x) * 2.0
    z = sg.while_loop(lambda v: sg.sum(v) > 1.0, lambda v: v * (0.5 + 0.0 * sg.sum(v)), y)
    return sg.cond(sg.sum(z) > 0.0, lambda v: v + 1.0, lambda v: v - sg.mean(v), z)


def _program() -> Program:
    prog = sg.trace(_loop_then_branch, np.ones(3))
    prog.verify()
    return prog


def _op(block: Block, type_: str) -> Op:
    return next(op for op in block.ops if op.type == type_)


def _var(block: Block, type_: str) -> Variable:
    return _op(block, type_).outputs[0]


def _rejects(prog: Program, *fragments: str) -> None:
    """Both verify entry points raise, and the message holds every fragment."""
    for check in (prog.verify, lambda: sg.verify(prog)):
        with pytest.raises(sg.VerifyError) as info:
            check()
        for frag in fragments:
            assert frag in str(info.value), (frag, str(info.value))


def test_valid_programs_pass() -> None:
    prog = _program()
    sg.verify(prog)
    grad_prog = sg.trace(sg.grad(lambda x: sg.sum(_loop_then_branch(x))), np.ones(3))
    grad_prog.verify()
    sg.verify(grad_prog)


def test_use_before_definition() -> None:
    prog = _program()
    ops = prog.global_block().ops
    assert [op.type for op in ops[:2]] == ["tanh", "constant"]
    tanh = ops.pop(0)
    mul = _op(prog.global_block(), "multiply")
    ops.insert(ops.index(mul) + 1, tanh)
    _rejects(prog, "multiply:", f"{tanh.outputs[0].name} is used before it is defined")


def test_defined_twice() -> None:
    prog = _program()
    block = prog.global_block()
    tanh = _op(block, "tanh")
    block.ops.insert(1, Op("tanh", list(tanh.inputs), list(tanh.outputs), {}, tanh.loc, block))
    _rejects(prog, "tanh:", f"{tanh.outputs[0].name} is defined twice")


def test_output_type_inconsistent_with_rule() -> None:
    prog = _program()
    tanh = _op(prog.global_block(), "tanh")
    tanh.outputs[0].shape = (7,)
    _rejects(prog, "tanh:", "outputs (f64[7]) do not match the op's rule (f64[3])")


def test_output_dtype_inconsistent_with_rule() -> None:
    prog = _program()
    tanh = _op(prog.global_block(), "tanh")
    tanh.outputs[0].dtype = np.dtype(np.float32)
    _rejects(prog, "tanh:", "outputs (f32[3]) do not match the op's rule (f64[3])")


def test_wrong_block_parent_link() -> None:
    prog = _program()
    loop = _op(prog.global_block(), "while")
    body, cond = loop.attrs["body"], loop.attrs["cond"]
    body.parent_idx = cond.idx
    _rejects(
        prog,
        "while:",
        f"block {body.idx} hangs off an op in block 0 but its parent is block {cond.idx}",
    )


def test_loop_body_result_differs_from_carried_type() -> None:
    prog = _program()
    loop = _op(prog.global_block(), "while")
    body = loop.attrs["body"]
    body.results = [_var(body, "reduce_sum")]
    _rejects(
        prog,
        "while:",
        "the loop's carried types differ",
        f"body block {body.idx} takes (f64[3]) and returns (f64[])",
    )


def test_loop_cond_takes_other_types() -> None:
    prog = _program()
    loop = _op(prog.global_block(), "while")
    cond = loop.attrs["cond"]
    cond.params[0].dtype = np.dtype(np.float32)
    # the cond block's own ops now disagree too; the loop's interface is checked first
    _rejects(prog, "while:", f"cond block {cond.idx} takes (f32[3])")


def test_cond_branches_return_different_types() -> None:
    prog = _program()
    branch = _op(prog.global_block(), "cond")
    true_b, false_b = branch.attrs["true"], branch.attrs["false"]
    false_b.results = [_var(false_b, "reduce_sum")]
    _rejects(
        prog, "cond:", f"block {true_b.idx} returns (f64[3]), block {false_b.idx} returns (f64[])"
    )


def test_variable_used_outside_its_block() -> None:
    prog = _program()
    block = prog.global_block()
    loop = _op(block, "while")
    inner = loop.attrs["body"].results[0]
    after = block.ops[block.ops.index(loop) + 1]
    assert after.type == "reduce_sum" and after.inputs[0].shape == inner.shape
    after.inputs = [inner]
    _rejects(
        prog,
        "reduce_sum:",
        f"{inner.name} is used outside its block (it is defined in block {loop.attrs['body'].idx})",
    )


def test_block_returns_undefined_value() -> None:
    prog = _program()
    branch = _op(prog.global_block(), "cond")
    true_b, false_b = branch.attrs["true"], branch.attrs["false"]
    true_b.results = [false_b.ops[-1].outputs[0]]
    _rejects(
        prog,
        f"block {true_b.idx} returns {false_b.ops[-1].outputs[0].name}, which is not defined in it",
    )


def test_op_listed_in_the_wrong_block() -> None:
    prog = _program()
    loop = _op(prog.global_block(), "while")
    body_op = loop.attrs["body"].ops[0]
    body_op.block = prog.global_block()
    _rejects(
        prog,
        f"{body_op.type}:",
        f"op is listed in block {loop.attrs['body'].idx} but claims block 0",
    )


def test_unknown_op_type() -> None:
    prog = _program()
    _op(prog.global_block(), "tanh").type = "no_such_op"
    _rejects(prog, "unknown op type 'no_such_op'")


def test_error_names_the_user_line() -> None:
    prog = _program()
    tanh = _op(prog.global_block(), "tanh")
    tanh.outputs[0].shape = (7,)
    with pytest.raises(sg.VerifyError, match=re.escape(f"(at {tanh.loc})")):
        prog.verify()
    assert tanh.loc.filename.endswith("test_verify.py")


def test_shape_that_is_not_a_tuple() -> None:
    prog = _program()
    _var(prog.global_block(), "tanh").shape = [3]
    _rejects(prog, "tanh_0", "a shape is a tuple")


# ---------------------------------------------------------------- SRCGRAD_ENABLE_CHECKS


def _duplicating_exp_grad(op: Op, g: list, need: list) -> list:
    """A buggy grad maker: right values, but it lists its last op twice (defined twice)."""
    out = sg.multiply(g[0], op.outputs[0])
    block = out.block
    block.ops.append(block.ops[-1])
    return [out]


def test_enable_checks_verifies_after_tracing_backward_and_lowering(monkeypatch: Any) -> None:
    f = lambda x: sg.sum(sg.exp(x) * 2.0)
    x = np.array([0.1, 0.2])
    buggy = dataclasses.replace(REGISTRY["exp"], grad=_duplicating_exp_grad)
    monkeypatch.setitem(REGISTRY, "exp", buggy)
    monkeypatch.delenv("SRCGRAD_ENABLE_CHECKS", raising=False)
    np.testing.assert_allclose(sg.grad(f)(x), 2.0 * np.exp(x))  # unchecked: the defect passes
    monkeypatch.setenv("SRCGRAD_ENABLE_CHECKS", "1")
    sg.clear_caches()  # the unchecked call's compiled program would be reused without tracing
    with pytest.raises(sg.VerifyError, match="after the backward pass: .* is defined twice"):
        sg.grad(f)(x)
    with pytest.raises(sg.VerifyError, match="after the backward pass"):
        sg.trace(sg.grad(f), x)
    prog = sg.Program()
    with sg.program_guard(prog):
        p = sg.parameter("p", (2,), "float64")
        loss = sg.sum(sg.exp(p))
    monkeypatch.setenv("SRCGRAD_ENABLE_CHECKS", "0")
    [gp] = sg.gradients(loss, [p])
    monkeypatch.setenv("SRCGRAD_ENABLE_CHECKS", "1")
    with pytest.raises(sg.VerifyError, match="after the transforms, before lowering"):
        sg.compile(prog, ["p"], [gp])


def test_enable_checks_passes_valid_programs(monkeypatch: Any) -> None:
    x = np.array([0.4, -0.3, 0.2])
    monkeypatch.delenv("SRCGRAD_ENABLE_CHECKS", raising=False)
    unchecked = sg.grad(lambda v: sg.sum(_loop_then_branch(v)))(x)
    monkeypatch.setenv("SRCGRAD_ENABLE_CHECKS", "1")
    checked = sg.grad(lambda v: sg.sum(_loop_then_branch(v) ** 2))(x)
    np.testing.assert_allclose(unchecked, sg.grad(lambda v: sg.sum(_loop_then_branch(v)))(x))
    assert checked.shape == (3,) and np.all(np.isfinite(checked))
