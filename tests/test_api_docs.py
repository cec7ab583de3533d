"""docs/api.md's op table lists every exported op, and its "differentiable" column is true.

Regenerate the name and differentiable columns with SRCGRAD_UPDATE_DOCS=1 (the notes column
is kept, a new op gets "as jax.numpy"); then review the diff.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import test_manip
import test_op_grads
import test_special
from test_op_coverage import EXTRA_GRADIENT
from srcgrad.core.declare import EXPORTS
from srcgrad.core.registry import REGISTRY, ZERO

DOC = Path(__file__).resolve().parent.parent / "docs" / "api.md"
BEGIN, END = "<!-- op table: tests/test_api_docs.py -->", "<!-- end of op table -->"
HEADER = "| op | NumPy / jax.numpy compatibility | differentiable |\n| --- | --- | --- |\n"
CONTROL = ("while_loop", "fori_loop", "cond", "switch")
#: Ops whose own row is constant but which also emit differentiable ops.
THROUGH_OTHER_OPS = {
    "full": "a traced fill_value is broadcast (broadcast_to)",
    "random.permutation": "an array is shuffled by take (a gather)",
    "random.uniform": "minval and maxval scale and shift the sample",
}
ROW = re.compile(r"^\| `([\w.]+)` \| (.*) \| ([^|]*) \|$")  # `linalg.solve`: sg.linalg.solve


def differentiable(name: str) -> str:
    """`yes`, `zero gradient` (piecewise constant, or a constant) or `no` (an error on the
    differentiated path), from the op's registry rows; composite functions are `yes` where
    the gradient table tests them."""
    if name in CONTROL or name in THROUGH_OTHER_OPS:
        return "yes"
    rows = [r for r in REGISTRY.values() if r.public == name]
    if any(r.differentiable for r in rows):
        return "yes"
    if rows:
        return "zero gradient" if all(r.grad is ZERO for r in rows) else "no"
    tested = {
        c.name.split()[0]
        for c in test_op_grads.CASES
        + test_manip.GRAD_CASES
        + test_special.GRAD_CASES
        + EXTRA_GRADIENT
    }
    return "yes" if name in tested else "zero gradient"


def _table() -> tuple[str, str, str]:
    text = DOC.read_text()
    head, rest = text.split(BEGIN + "\n", 1)
    table, tail = rest.split(END, 1)
    return head, table, tail


def _rows(table: str) -> dict[str, tuple[str, str]]:
    rows = {}
    for line in table.splitlines()[2:]:
        m = ROW.match(line)
        assert m, f"docs/api.md op table: bad row {line!r}"
        rows[m.group(1)] = (m.group(2), m.group(3))
    return rows


def test_op_table_lists_every_op_and_is_true() -> None:
    head, table, tail = _table()
    rows = _rows(table)
    names = sorted(set(EXPORTS) | set(CONTROL))
    if os.environ.get("SRCGRAD_UPDATE_DOCS"):
        body = "".join(
            f"| `{n}` | {rows.get(n, ('as jax.numpy', ''))[0]} | {differentiable(n)} |\n"
            for n in names
        )
        DOC.write_text(head + BEGIN + "\n" + HEADER + body + END + tail)
        rows = _rows(HEADER + body)
    assert table.startswith(HEADER) or os.environ.get("SRCGRAD_UPDATE_DOCS")
    assert sorted(rows) == names, (
        f"missing: {sorted(set(names) - set(rows))}, extra: {sorted(set(rows) - set(names))}"
    )
    wrong = {n: d for n, (_, d) in rows.items() if d != differentiable(n)}
    assert not wrong, f"differentiable column wrong for {wrong}"


def test_readme_op_count_is_true() -> None:
    readme = (DOC.parent.parent / "README.md").read_text()
    m = re.search(r"(\d+) ops", readme)
    assert m and int(m.group(1)) == len(set(EXPORTS) | set(CONTROL)), m and m.group(0)
