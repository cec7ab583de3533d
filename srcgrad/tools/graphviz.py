"""Pictures of programs: Graphviz DOT text (`sg.to_dot`) and rendered files (`sg.render`).

Each block is one cluster (`cluster_b<idx>`); a grad block (one that differentiates
another) is labelled and coloured as such, and in a block that holds both forward and grad
ops (the global block after `append_backward`, a tape after `create_graph`) the two are
drawn as the "forward" and "backward" sub-clusters, as the DyNet-on-Fluid design draws its
forward and backward tapes. An op is a node with an HTML-like table label listing its inputs
and outputs (name and type), one port per row; an edge runs from the output port that makes a value
to each input port that reads
it; inputs and block parameters are boxes, with a dashed edge from an input `x` to the op
that makes `x@GRAD`.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

import html
import os
import shutil
import subprocess

from ..base.errors import SrcgradError, user_location
from ..base.traceback_filter import api_boundary
from ..ir.program import Block, Op, Program, Variable

_FORMATS = ("svg", "png", "pdf")
_FORWARD, _GRAD, _BLOCK = "#e8e8e8", "#fde2c8", "#f6f6f6"


def _esc(text: str) -> str:
    """`text` safe inside a quoted DOT string."""
    out = []
    for ch in str(text):
        if ch in '\\{}|<>"':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        else:
            out.append(ch)
    return "".join(out)


class _Ids:
    def __init__(self) -> None:
        self.ids: dict[object, str] = {}

    def get(self, obj: object, prefix: str) -> str:
        got = self.ids.get(obj)
        if got is None:
            got = self.ids[obj] = f"{prefix}{len(self.ids)}"
        return got


def _html(text: str) -> str:
    """`text` safe inside an HTML-like label."""
    return html.escape(str(text), quote=True)


def _op_label(op: Op) -> str:
    """An HTML-like table: the op type, then one row per input (port iK) and per output (oK).

    HTML-like labels rather than records: dot loses flat edges between record nodes with
    ports ("lost opN opM edge"), which loops and branches of grad programs produce."""
    rows = [f'<TR><TD BGCOLOR="#dddddd"><B>{_html(op.type)}</B></TD></TR>']
    for kind, vals in (("i", op.inputs), ("o", op.outputs)):
        for k, v in enumerate(vals):
            arrow = "&#8594; " if kind == "o" else ""
            rows.append(
                f'<TR><TD PORT="{kind}{k}" ALIGN="LEFT">{arrow}{_html(v.name)}: '
                f"{_html(v.type_str())}</TD></TR>"
            )
    return (
        '<<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="3" '
        'BGCOLOR="white">' + "".join(rows) + "</TABLE>>"
    )


def _is_grad(op: Op) -> bool:
    """A grad op: made while differentiating an op, or writing a gradient (the seeds)."""
    return op.origin is not None or any("@GRAD" in v.name for v in op.outputs)


def _block_title(block: Block) -> str:
    if block.forward_block_idx >= 0:
        return f"grad block {block.idx} (differentiates block {block.forward_block_idx})"
    if block.idx == 0:
        return "block 0 (global)"
    owner = f", body of {block.owner.type}" if block.owner is not None else ""
    return f"block {block.idx} (in block {block.parent_idx}{owner})"


def to_dot(program: Program, name: str = "program") -> str:
    """Graphviz DOT text of `program` (see the module doc for what is drawn)."""
    if not isinstance(program, Program):
        raise SrcgradError(
            f"sg.to_dot takes an sg.Program, got a {type(program).__name__}", loc=user_location()
        )
    ids = _Ids()
    made: dict[Variable, str] = {}  # value -> "opN:oK", the port of the op that makes it
    for block in program.blocks:
        for op in block.ops:
            for k, v in enumerate(op.outputs):
                made[v] = f"{ids.get(op, 'op')}:o{k}"
    lines = [
        f'digraph "{_esc(name)}" {{',
        "  compound=true;",
        "  rankdir=TB;",
        '  node [fontname="Helvetica", fontsize=10];',
        '  edge [fontname="Helvetica", fontsize=9];',
    ]
    edges: list[str] = []
    for block in program.blocks:
        grad_block = block.forward_block_idx >= 0
        lines.append(f"  subgraph cluster_b{block.idx} {{")
        lines.append(
            f'    label="{_esc(_block_title(block))}"; style=filled; '
            f'fillcolor="{_GRAD if grad_block else _BLOCK}";'
        )
        for v in _values_in(block, made):
            label = f"{_esc(v.name)}\\n{_esc(v.type_str())}"
            lines.append(f'    {ids.get(v, "v")} [shape=box, label="{label}"];')
        bwd = [op for op in block.ops if _is_grad(op)]
        fwd = [op for op in block.ops if not _is_grad(op)]
        if fwd and bwd and not grad_block:
            groups = [("forward", fwd, _FORWARD), ("backward", bwd, _GRAD)]
        else:
            groups = [("", block.ops, _GRAD if grad_block else _FORWARD)]
        for title, ops, color in groups:
            pad = "    "
            if title:
                lines.append(f"    subgraph cluster_b{block.idx}_{title} {{")
                lines.append(f'      label="{title}"; style=filled; fillcolor="{color}";')
                pad = "      "
            for op in ops:
                lines.append(f"{pad}{ids.get(op, 'op')} [shape=plain, label={_op_label(op)}];")
            if title:
                lines.append("    }")
        lines.append("  }")
        for op in block.ops:
            oid = ids.get(op, "op")
            for k, v in enumerate(op.inputs):
                edges.append(f"  {made.get(v) or ids.get(v, 'v')} -> {oid}:i{k};")
            for sub in op.sub_blocks():
                if sub.ops:
                    edges.append(
                        f"  {oid} -> {ids.get(sub.ops[0], 'op')} [lhead=cluster_b{sub.idx}, "
                        f'style=dotted, label="{_esc(op.type)} body"];'
                    )
    by_name = {v.name: v for v in list(made) + [o for o in ids.ids if isinstance(o, Variable)]}
    for gname, g in by_name.items():
        v = by_name.get(gname[:-5]) if gname.endswith("@GRAD") else None
        if v is not None and g in made and v not in made:  # an input and its gradient
            edges.append(
                f'  {ids.get(v, "v")} -> {made[g]} [style=dashed, label="grad", constraint=false];'
            )
    lines += edges
    lines.append("}")
    return "\n".join(lines) + "\n"


def _values_in(block: Block, made: dict[Variable, str]) -> list[Variable]:
    """The values of `block` that no op makes (inputs, block parameters, captures), in order
    of first appearance: drawn as boxes; every other value is an op's output port."""
    seen: dict[Variable, None] = {}
    if block.idx == 0:
        seen.update(dict.fromkeys(block.program.inputs))
    seen.update(dict.fromkeys(block.params))
    for op in block.ops:
        for v in op.inputs:
            if v.block is block and v not in made:
                seen.setdefault(v, None)
    return list(seen)


@api_boundary
def render(program: Program, path: str | os.PathLike, format: str | None = None) -> str:
    """Write a picture of `program` to `path` (SVG, PNG or PDF, from `format` or the file's
    suffix) with Graphviz's `dot` program; returns the path."""
    if not isinstance(program, Program):
        raise SrcgradError(
            f"sg.render draws a Program (sg.trace(f, *args)), got {type(program).__name__}",
            loc=user_location(),
        )
    path = os.fspath(path)
    fmt = (format or os.path.splitext(path)[1].lstrip(".") or "svg").lower()
    if fmt not in _FORMATS:
        raise SrcgradError(
            f"sg.render: format {fmt!r} is not one of {_FORMATS}", loc=user_location()
        )
    text = to_dot(program)
    dot = shutil.which("dot")
    if dot is None:
        raise SrcgradError(
            "sg.render needs Graphviz's `dot` program, which is not installed (not "
            "on PATH). Install Graphviz (Debian/Ubuntu: apt-get install graphviz; "
            "macOS: brew install graphviz; conda: conda install graphviz), or write "
            "sg.to_dot(program) to a .dot file and render it with "
            "`dot -Tsvg program.dot -o program.svg`",
            loc=user_location(),
        )
    done = subprocess.run(
        [dot, f"-T{fmt}", "-o", path], input=text.encode(), capture_output=True, check=False
    )
    if done.returncode != 0:
        raise SrcgradError(
            f"sg.render: dot failed ({done.returncode}): "
            f"{done.stderr.decode(errors='replace').strip()}",
            loc=user_location(),
        )
    return path


__all__ = ["to_dot", "render"]
