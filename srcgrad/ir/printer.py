"""Deterministic text form of a Program (the main debugging surface).

Layer L1 (the IR): see docs/design.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .program import Block, Op, Program, Variable


def _attr(value: Any, dtype: Any = None) -> str:
    if isinstance(value, float) and isinstance(dtype, np.dtype) and dtype.kind == "f":
        return str(dtype.type(value))  # shortest form in its dtype: 1e-06, not 9.99999997e-07
    if isinstance(value, Block):
        return f"block {value.idx}"
    if isinstance(value, np.dtype):
        return value.name
    if (
        isinstance(value, np.ndarray)
        or hasattr(value, "__jax_array__")
        or (
            hasattr(value, "shape")
            and hasattr(value, "dtype")
            and not isinstance(value, (int, float))
        )
    ):
        return f"array<{np.dtype(value.dtype).name}{list(value.shape)}>"
    return repr(value)


def format_op(op: Op) -> str:
    outs = ", ".join(f"{v.name}: {v.type_str()}" for v in op.outputs)
    ins = ", ".join(v.name for v in op.inputs)
    attrs = ", ".join(
        f"{k}={_attr(v, op.attrs.get('dtype') if k == 'value' else None)}"
        for k, v in sorted(op.attrs.items())
        if not isinstance(v, Block)
    )
    blocks = ", ".join(f"{k}=block {v.idx}" for k, v in op.attrs.items() if isinstance(v, Block))
    extra = "; ".join(p for p in (attrs, blocks) if p)
    loc = f"  # {op.loc.safe()}" if op.loc is not None else ""
    lhs = f"{outs} = " if op.outputs else ""  # an effect (debug_print) has no results
    return f"{lhs}{op.type}({ins}){' {' + extra + '}' if extra else ''}{loc}"


def _params(vs: list[Variable]) -> str:
    return ", ".join(f"{v.name}: {v.type_str()}" for v in vs)


def _format_block(block: Block, indent: int, lines: list[str]) -> None:
    pad = "  " * indent
    head = f"{pad}block {block.idx} (parent {block.parent_idx}"
    if block.forward_block_idx >= 0:
        head += f", grad of block {block.forward_block_idx}"
    head += ")"
    if block.params:
        head += f" ({_params(block.params)})"
    lines.append(head + " {")
    if block.idx == 0 and block.program.inputs:
        ins = ", ".join(f"{v.name}: {v.type_str()} {v.kind}" for v in block.program.inputs)
        lines.append(f"{pad}  inputs: {ins}")
    if block.idx == 0 and block.program.captures:
        lines.append(f"{pad}  captured: {_params(block.program.captures)}")
    for op in block.ops:
        lines.append(f"{pad}  {format_op(op)}")
        for sub in op.sub_blocks():
            _format_block(sub, indent + 2, lines)
    if block.results:
        lines.append(f"{pad}  return {', '.join(v.name for v in block.results)}")
    lines.append(pad + "}")


def format_program(program: Program) -> str:
    lines: list[str] = []
    _format_block(program.global_block(), 0, lines)
    return "\n".join(lines)
