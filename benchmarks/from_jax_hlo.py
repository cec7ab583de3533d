"""The compiled programs of the library corpus (tests/from_jax/test_from_jax_libs.py): HLO
instruction
counts and `cost_analysis` of `jax.jit(sg.grad(sg.from_jax(f)))` against `jax.jit(jax.grad(f))`
(and of the forward alone with `--forward`), the deterministic measure where step timings on a
shared machine are too noisy to rank rows.

Counts are over the instructions of `jax.jit(...).lower(*args).compile().as_text()`; copies
and `conditional`s are also counted separately.

Run: `python -m benchmarks.from_jax_hlo [--only NAME] [--forward]`.
"""

from __future__ import annotations

import argparse
import re
from typing import Any, Callable

import jax

import srcgrad as sg
from benchmarks.from_jax_libs import corpus

_LINE = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+ = (.*)$", re.M)


def _opcode(rhs: str) -> str:
    """The opcode of an instruction's right-hand side `shape opcode(operands)...` (the shape
    may be a tuple, with spaces and nested parentheses)."""
    depth, i = 0, 0
    if rhs.startswith("("):
        for i, ch in enumerate(rhs):
            depth += {"(": 1, ")": -1}.get(ch, 0)
            if depth == 0:
                break
    return (
        rhs[i:].split(None, 1)[1].split("(", 1)[0]
        if rhs.startswith("(")
        else (rhs.split(None, 1)[1].split("(", 1)[0])
    )


def hlo_counts(fn: Callable[..., Any], args: tuple) -> dict[str, float]:
    """Instructions, copies, conditionals, flops and bytes accessed of `jax.jit(fn)`."""
    compiled = jax.jit(fn).lower(*args).compile()
    ops = [_opcode(m.group(1)) for m in _LINE.finditer(compiled.as_text())]
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    return {
        "instructions": len(ops),
        "copies": ops.count("copy"),
        "conditionals": ops.count("conditional"),
        "whiles": ops.count("while"),
        "flops": cost.get("flops", 0.0),
        "bytes": cost.get("bytes accessed", 0.0),
    }


def _row(name: str, which: str, c: dict[str, float]) -> str:
    return (
        f"| {name} | {which} | {c['instructions']} | {c['copies']} | {c['conditionals']} "
        f"| {c['whiles']} | {c['flops']:.0f} | {c['bytes']:.0f} |"
    )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default=None)
    p.add_argument("--forward", action="store_true", help="the forward function alone")
    a = p.parse_args(argv)
    jax.config.update("jax_enable_x64", True)
    print("| function | program | instructions | copies | conditionals | whiles | flops | bytes |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for case in corpus():
        if (a.only and a.only != case.name) or " " in case.name:
            continue
        fn, args = case.built()
        argnums = tuple(range(len(args)))
        if a.forward:
            ours, theirs = sg.from_jax(fn), fn
        else:
            ours = sg.grad(sg.from_jax(fn), argnums=argnums)
            theirs = jax.grad(fn, argnums=argnums)
        print(_row(case.name, "srcgrad", hlo_counts(ours, args)))
        print(_row(case.name, "jax", hlo_counts(theirs, args)), flush=True)


if __name__ == "__main__":
    main()
