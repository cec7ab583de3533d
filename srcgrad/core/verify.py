"""The verifier: structural and type invariants of a Program, separate from construction.

Layer L2 (core): see docs/design.md.
"""

from __future__ import annotations

import os

import numpy as np

from ..ir.analysis import branch_blocks
from ..base.dtypes import short
from ..base.errors import ShapeError, SrcgradError
from ..ir.program import Block, Op, Program, Variable
from .registry import REGISTRY


class VerifyError(SrcgradError):
    """A program breaks an IR invariant."""


def _fail(msg: str, op: Op | None = None) -> VerifyError:
    return VerifyError(msg, op=op.type if op else None, loc=op.loc if op else None)


def checks_enabled() -> bool:
    """True when `SRCGRAD_ENABLE_CHECKS` is set (and not `0`), like `jax_enable_checks`."""
    return os.environ.get("SRCGRAD_ENABLE_CHECKS", "0") not in ("", "0")


def check(program: Program, after: str) -> None:
    """Verify `program` if checks are enabled; the error says which stage broke it."""
    if not checks_enabled():
        return
    try:
        verify(program)
    except VerifyError as e:
        raise VerifyError(f"after {after}: {e.detail}", op=e.op, loc=e.loc) from None


def verify(program: Program) -> None:
    """Check: defined before use, defined once, types match each op's rule, block links."""
    defined: set[Variable] = set()
    scope: set[Variable] = set()
    for v in program.inputs + program.captures:
        if v.block is not program.global_block():
            raise _fail(f"input {v.name} does not belong to the global block")
        defined.add(v)
        scope.add(v)
    _verify_block(program.global_block(), scope, defined)


def _define(
    v: Variable, block: Block, defined: set[Variable], scope: set[Variable], op: Op | None
) -> None:
    if v in defined:
        raise _fail(f"{v.name} is defined twice", op)
    if v.block is not block:
        raise _fail(f"{v.name} is defined in block {block.idx} but claims block {v.block.idx}", op)
    defined.add(v)
    scope.add(v)


def _verify_block(block: Block, outer: set[Variable], defined: set[Variable]) -> None:
    scope = set(outer)
    for p in block.params:
        _define(p, block, defined, scope, None)
    for op in block.ops:
        if op.block is not block:
            raise _fail(f"op is listed in block {block.idx} but claims block {op.block.idx}", op)
        if op.type not in REGISTRY:
            raise _fail(f"unknown op type {op.type!r}", op)
        for v in op.inputs:
            if v not in scope:
                where = (
                    f"outside its block (it is defined in block {v.block.idx})"
                    if v in defined
                    else "before it is defined"
                )
                raise _fail(f"{v.name} is used {where}", op)
        _check_control(op)
        for sub in op.sub_blocks():
            if sub.parent_idx != block.idx:
                raise _fail(
                    f"block {sub.idx} hangs off an op in block {block.idx} but its "
                    f"parent is block {sub.parent_idx}",
                    op,
                )
            if sub.program is not block.program or block.program.blocks[sub.idx] is not sub:
                raise _fail(f"block {sub.idx} is not a block of this program", op)
            _verify_block(sub, scope, defined)
        _check_types(op)
        for v in op.outputs:
            _define(v, block, defined, scope, op)
    for v in block.results:
        if v not in scope:
            raise VerifyError(f"block {block.idx} returns {v.name}, which is not defined in it")


def _check_types(op: Op) -> None:
    try:
        want = REGISTRY[op.type].infer(op.inputs, op.attrs)
    except ShapeError as e:
        raise _fail(f"inputs do not fit the op's rule: {e.detail}", op) from None
    for v in op.outputs:
        if type(v.shape) is not tuple or not isinstance(v.dtype, np.dtype):
            raise _fail(
                f"{v.name} has shape {v.shape!r} and dtype {v.dtype!r}; a shape is a "
                "tuple and a dtype a NumPy dtype",
                op,
            )
    got = [(v.shape, v.dtype) for v in op.outputs]
    if [(s, d) for s, d in want] != got:
        rule = ", ".join(f"{short(d)}[{','.join(map(str, s))}]" for s, d in want)
        raise _fail(f"outputs {_types(op.outputs)} do not match the op's rule ({rule})", op)


def _sig(vs: list[Variable]) -> list[tuple]:
    return [(v.shape, v.dtype) for v in vs]


def _types(vs: list[Variable]) -> str:
    return "(" + ", ".join(v.type_str() for v in vs) + ")"


def _check_control(op: Op) -> None:
    if op.type == "while":
        cond, body = op.attrs["cond"], op.attrs["body"]
        n = len(body.params)
        init = op.inputs[:n]
        if not _sig(init) == _sig(cond.params) == _sig(body.params) == _sig(body.results):
            raise _fail(
                f"the loop's carried types differ: init {_types(init)}, cond block "
                f"{cond.idx} takes {_types(cond.params)}, body block {body.idx} takes "
                f"{_types(body.params)} and returns {_types(body.results)}",
                op,
            )
        if (
            len(cond.results) != 1
            or cond.results[0].shape != ()
            or cond.results[0].dtype.kind != "b"
        ):
            raise _fail("the loop condition block must return one bool scalar", op)
    elif op.type == "cond":
        n = op.attrs["n_operands"]
        index = op.inputs[0]
        kinds = "b" if "true" in op.attrs else "iu"
        if index.shape != () or index.dtype.kind not in kinds:
            raise _fail(
                f"the {'predicate' if kinds == 'b' else 'index'} must be a "
                f"{'bool' if kinds == 'b' else 'integer'} scalar, got {index.type_str()}",
                op,
            )
        blocks = branch_blocks(op)
        for blk in blocks:
            if _sig(blk.params) != _sig(op.inputs[1 : 1 + n]):
                raise _fail(f"branch block {blk.idx} takes other types than the operands", op)
        t = blocks[0]
        for f in blocks[1:]:
            if _sig(t.results) != _sig(f.results):
                raise _fail(
                    f"the branches return different types: block {t.idx} returns "
                    f"{_types(t.results)}, block {f.idx} returns {_types(f.results)}",
                    op,
                )
