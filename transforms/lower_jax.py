"""Lowering: a Program becomes the source of one Python function over jax.numpy / lax.

Layer L4 (transforms): see docs/design.md.
"""

from __future__ import annotations

import builtins
import functools
import math
import operator
import re
import string
from typing import Any, Sequence

import jax.numpy as jnp
import numpy as np

from srcgrad.ir.program import Block, Op, Program, Variable
from srcgrad.core.registry import REGISTRY
from srcgrad.core.verify import check

from .loading import Canonical, Lowered, Source, load
from .naming import identifier
from srcgrad.ir.analysis import live_ops, loop_invariant_ops

_SAFE_STR = re.compile(r"^[A-Za-z0-9_,\->]*$")
#: Array constants of at most this many elements are written into the source; larger ones
#: are passed in the `_consts` side table.
INLINE_CONST_SIZE = 16
_PAD = "    "  # every emitted function is at top level: its body is indented once
#: Ops whose repeats are emitted again (not replaced by the first result): a barrier exists
#: to keep XLA from merging a recomputation with the value it recomputes. (Ops without
#: inputs, the constants and fills, are also emitted again: each keeps its own name.)
_NO_CSE = frozenset({"optimization_barrier"})
#: A global block of more live ops than SPLIT_OPS is emitted as a chain of functions of
#: about PART_OPS ops each (see `emit_program` and `part_bounds`).
SPLIT_OPS = 1000
PART_OPS = 256
#: How many ops' types a part's end must repeat from its start (see `part_bounds`).
PART_WINDOW = 16
#: A block of at least SHARE_OPS live ops also writes its parts in canonical form, so that
#: `load` compiles alike parts once. Below it, too few parts are alike to repay the time
#: that writing them twice takes (measured in docs/benchmarks.md, "Scale, third pass").
SHARE_OPS = 32768


def literal(value: Any, dtype: np.dtype | None = None) -> str:
    """Python source for an attribute value; refuses anything that is not plain data.

    A float that is a value of `dtype` is written in that dtype's shortest round-tripping
    form (1e-06, not 9.999999974752427e-07, for a float32).
    """
    if isinstance(value, float) and isinstance(dtype, np.dtype) and dtype.kind == "f":
        value = dtype.type(value)
    if value is None or isinstance(value, (bool, np.bool_)):
        return repr(bool(value)) if value is not None else "None"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        f = float(value)
        if not math.isfinite(f):
            return f"float('{f}')"
        return str(value) if isinstance(value, np.floating) else repr(f)
    if isinstance(value, (complex, np.complexfloating)):
        return f"complex({literal(value.real)}, {literal(value.imag)})"
    if isinstance(value, (tuple, list)):
        items = ", ".join(literal(v) for v in value)
        return f"({items},)" if len(value) == 1 else f"({items})"
    if isinstance(value, np.dtype):
        return _dtype_literal(value)
    if isinstance(value, str) and _SAFE_STR.match(value):
        return repr(value)
    raise TypeError(f"attribute value {value!r} cannot be written into source")


@functools.lru_cache(maxsize=None)
def _dtype_literal(dtype: np.dtype) -> str:
    """`jnp.float32` for float32 (memoized: building `dtype.name` takes microseconds)."""
    if not hasattr(jnp, dtype.name):
        raise TypeError(f"dtype {dtype.name} has no jax.numpy name")
    return f"jnp.{dtype.name}"


class _Names(dict):
    """Variable → its identifier, made (unique among `taken`) on first use. A value in
    `alias` (a copy, or a recomputation of an earlier value) takes the name of the value it
    stands for."""

    def __init__(self, taken: set[str]):
        super().__init__()
        self.taken = taken
        self.alias: dict[Variable, Variable] = {}

    def __missing__(self, v: Variable) -> str:
        same = self.alias.get(v)
        n = self[v] = self[same] if same is not None else identifier(v.name, self.taken)
        return n

    def same_as(self, v: Variable, earlier: Variable) -> None:
        """Emit no statement for `v`: it is `earlier` (or what `earlier` stands for)."""
        self.alias[v] = self.alias.get(earlier, earlier)


class _Slots(dict):
    """A function's identifiers → their canonical names: the k-th one met is the k-th
    upper-case stem (A, ..., Z, AA, ...) padded with `_` to the identifier's length. No
    keyword, global or keyword argument is all upper case, and two functions that differ
    only in their identifiers get the same canonical text, unless a stem is longer than its
    identifier (see `ok`)."""

    def __missing__(self, name: str) -> str:
        k = len(self)
        canonical = self[name] = (_STEMS[k] if k < _N_STEMS else _stem(k)).ljust(len(name), "_")
        return canonical

    def ok(self) -> bool:
        """Whether every canonical name is as long as its identifier."""
        return all(map(operator.eq, map(len, self), map(len, self.values())))


def _stem(k: int) -> str:
    """The k-th stem of bijective base 26: A, ..., Z, AA, AB, ..."""
    stem = ""
    k += 1
    while k:
        k, r = divmod(k - 1, 26)
        stem = string.ascii_uppercase[r] + stem
    return stem


_N_STEMS = 26 + 26**2
_STEMS = [_stem(k) for k in range(_N_STEMS)]


class _Frame:
    """One emitted function: its lines, what it defines and reads, in order of emission, and
    its expressions (each computed once: a repeat reuses the first result). A part also
    keeps its canonical lines (`canon`: statements renamed by `slots`, comments as `#`), or
    None once a statement cannot be written so."""

    __slots__ = ("lines", "params", "items", "exprs", "canon", "slots")

    def __init__(
        self,
        params: Sequence[Variable] = (),
        exprs: dict[str, list[Variable]] | None = None,
        canonical: bool = False,
    ):
        self.lines: list[str] = []
        self.params = params
        self.items: list[Op | Variable] = []  # emitted ops, and values read by statements
        self.exprs: dict[str, list[Variable]] = {} if exprs is None else exprs
        self.canon: list[str] | None = [] if canonical else None
        self.slots = _Slots()

    def defined(self) -> list[Variable]:
        """The values the function's ops make, in order."""
        return [o for item in self.items if isinstance(item, Op) for o in item.outputs]

    def captures(self, alias: dict[Variable, Variable]) -> list[Variable]:
        """Values the function reads but does not define: passed in as `captured`."""
        defined = set(self.params)
        reads: dict[Variable, None] = {}
        for item in self.items:
            if isinstance(item, Variable):
                reads[alias.get(item, item)] = None
                continue
            defined.update(item.outputs)
            if REGISTRY[item.type].lower_stmt is None:  # a statement records its own reads
                reads.update(dict.fromkeys([alias.get(v, v) for v in item.inputs]))
        return [v for v in reads if v not in defined]


def _cheap(op: Op) -> bool:
    """An op worth computing once before a loop: its result is no larger than its largest
    input (the transposes and reshapes of captured weights that grad makers emit; XLA does
    not move such ops out of while loops on its own). Constants stay, for XLA to fold."""
    return bool(op.inputs and op.outputs) and (
        max(v.size for v in op.outputs) <= max(v.size for v in op.inputs)
    )


class Emitter:
    """Writes one module: the program's function, one line per op, then one top-level
    function per sub-block (so nesting depth is not bounded by Python's indentation limit).

    A block function receives the outer values it reads as a `captured` tuple bound with
    `partial`; names are unique across the module, so a value keeps its name everywhere.
    """

    def __init__(self) -> None:
        self.frame = _Frame()
        self.lines = self.frame.lines
        self.taken: set[str] = set()
        self.names = _Names(self.taken)
        self.consts: list[Any] = []
        self.functions: list[list[str]] = []
        self._origin: tuple[Op, str] | None = None
        self._loc: Any = None
        self._recorded: dict[Block, set[Op]] = {}

    def name(self, v: Variable) -> str:
        self.frame.items.append(v)
        return self.names[v]

    def tuple(self, vs: Sequence[Variable]) -> str:
        self.frame.items.extend(vs)
        items = ", ".join([self.names[v] for v in vs])
        return f"({items},)" if len(vs) == 1 else f"({items})"

    def line(self, text: str) -> None:
        self.lines.append(_PAD + text)

    def comment(self, text: str) -> None:
        """`# text` (in a canonical form, `#`)."""
        self.lines.append(f"{_PAD}# {text}")
        if self.frame.canon is not None:
            self.frame.canon.append(f"{_PAD}#")

    def assign(self, outs: Sequence[Variable], expr: str, unpack: bool = False) -> None:
        """`out = expr`, or `a, b = expr` when `unpack` (expr yields a tuple)."""
        if len(outs) == 1:
            lhs = self.names[outs[0]] + ("," if unpack else "")
        else:
            lhs = ", ".join([self.names[v] for v in outs])
        self.line(f"{lhs} = {expr}")

    def unpack(self, vs: Sequence[Variable], source: str) -> None:
        """`a, b = source` (`a, = source` for one value)."""
        self.line(f"{', '.join(self.names[v] for v in vs)}{',' if len(vs) == 1 else ''} = {source}")

    def block_function(self, block: Block, kind: str) -> str:
        """Emit the top-level `def kind_N(carry[, captured]): ...` (`operands` for a branch) of
        a sub-block; return the expression that passes it to lax: its name, or a `partial`
        binding the outer values it reads."""
        fname = identifier(f"{kind}_{block.idx}", self.taken)
        arg = "operands" if kind in ("true", "false", "branch") else "carry"
        ops: Sequence[Op] = block.ops
        if kind == "body":
            ops = live_ops(ops, block.results)
            hoisted = loop_invariant_ops(ops, block.params, _cheap)
            moved = set(hoisted)
            ops = [op for op in ops if op not in moved]
            self.emit_ops(hoisted, [v for op in hoisted for v in op.outputs])
        slot = len(self.functions)
        self.functions.append([])
        outer, saved = self.frame, (self._origin, self._loc)
        self.frame = _Frame(block.params)
        self.lines, self._origin, self._loc = self.frame.lines, None, None
        if block.params:
            self.unpack(block.params, arg)
        self.emit_ops(ops, block.results)
        results = block.results
        ret = self.name(results[0]) if kind == "cond" else self.tuple(results)
        self.line(f"return {ret}")
        captured = self.frame.captures(self.names.alias)
        body = self.frame.lines
        self.frame, self.lines = outer, outer.lines
        self._origin, self._loc = saved
        if not captured:
            self.functions[slot] = [f"def {fname}({arg}):"] + body
            return fname
        n = 1 if block.params else 0  # after the line that unpacks the parameters
        self.functions[slot] = (
            [f"def {fname}({arg}, captured):"]
            + body[:n]
            + [
                f"{_PAD}{', '.join(self.names[v] for v in captured)}"
                f"{',' if len(captured) == 1 else ''} = captured"
            ]
            + body[n:]
        )
        return f"partial({fname}, captured={self.tuple(captured)})"

    def emit_ops(self, ops: Sequence[Op], needed: Sequence[Variable]) -> None:
        self.emit_live(live_ops(ops, needed))

    def emit_live(self, live: Sequence[Op]) -> None:
        """One line per op of `live`, except that a copy (`assign`) and an expression over
        values that the function has already computed emit nothing: their values take the
        earlier names. In a part, each statement is also written in canonical form."""
        names, lines, frame = self.names, self.lines, self.frame
        items, exprs, canon, slots = frame.items, frame.exprs, frame.canon, frame.slots
        pad = _PAD
        for op in live:
            if op.type == "assign":
                names.same_as(op.outputs[0], op.inputs[0])
                continue
            row = REGISTRY[op.type]
            if row.lower_stmt is not None:
                canon = frame.canon = None  # (its lines name values and functions freely)
                self._comment(op)
                items.append(op)
                row.lower_stmt(self, op)
                continue
            if op.type == "constant":
                expr = self._constant(op)
            else:
                args = [names[v] for v in op.inputs]
                lower = row.lower
                fast = row.fast
                if fast is not None and fast[1](op):
                    lower = fast[0]
                attrs = _attr_literals(op.attrs) if op.attrs else {}
                expr = lower(args, attrs) if callable(lower) else lower.format(*args, **attrs)
            earlier = exprs.get(expr)
            if earlier is not None:
                for out, e in zip(op.outputs, earlier):
                    names.same_as(out, e)
                continue
            if op.inputs and op.type not in _NO_CSE:
                exprs[expr] = op.outputs
            self._comment(op)
            items.append(op)
            if len(op.outputs) == 1:
                out = names[op.outputs[0]]
                lines.append(f"{pad}{out} = {expr}")
            else:
                outs = [names[v] for v in op.outputs]
                lines.append(f"{pad}{', '.join(outs)} = {expr}")
            if canon is not None:  # the same statement over canonical names
                if op.type != "constant":  # (a constant's text names no value)
                    args = [slots.get(a) or slots[a] for a in args]
                    expr = lower(args, attrs) if callable(lower) else lower.format(*args, **attrs)
                if len(op.outputs) == 1:
                    c = slots.get(out) or slots[out]
                else:
                    c = ", ".join([slots[o] for o in outs])
                canon.append(f"{pad}{c} = {expr}")

    def emit_parts(
        self, live: Sequence[Op], needed: Sequence[Variable], base: str
    ) -> list[builtins.tuple[list[str], Canonical | None]]:
        """Emit `live` as functions (`part_bounds`), and into the current function one
        call of each: `a, b = base_part_k(x, y)`. Returns the functions' lines, each with its
        canonical form (None if it has none, or `live` is shorter than SHARE_OPS)."""
        main, alias = self.frame, self.names.alias
        exprs = main.exprs  # the parts run in one scope: a repeat in a later part is reused
        frames = []
        bounds = part_bounds([op.type for op in live])
        share = len(live) >= SHARE_OPS
        for start, end in zip(bounds, bounds[1:]):
            self.frame = _Frame(exprs=exprs, canonical=share)
            self.lines, self._origin, self._loc = self.frame.lines, None, None
            self.emit_live(live[start:end])
            if any(not ln.lstrip().startswith("#") for ln in self.frame.lines):
                # (a run of copies and repeats emits no statement, so no function)
                frames.append(self.frame)
        self.frame, self.lines = main, main.lines
        self._origin = self._loc = None
        read_later = {alias.get(v, v) for v in needed}
        ins: list[list[Variable]] = []
        outs: list[list[Variable]] = []
        for frame in reversed(frames):
            outs.append([v for v in frame.defined() if v in read_later])
            ins.append(frame.captures(alias))
            read_later.update(ins[-1])
        functions: list[tuple[list[str], Canonical | None]] = []
        for frame, args, results in zip(frames, reversed(ins), reversed(outs)):
            fname = identifier(f"{base}_part_{len(functions)}", self.taken)
            arg_names = [self.names[v] for v in args]
            result_names = [self.names[v] for v in results]
            comma = "," if len(results) == 1 else ""
            functions.append(
                (
                    _part(fname, arg_names, frame.lines, result_names),
                    _canonical_part(frame, fname, arg_names, result_names),
                )
            )
            self.frame.items.extend(args)
            self.lines += _wrapped(
                f"{_PAD}(", result_names, f"{comma}) = ", tail=f"{fname}(", more=arg_names, end=")"
            )
        return functions

    def _comment(self, op: Op) -> None:
        fwd = op.origin
        if fwd is not None:
            what = "recorded for the grad of" if self._records(op) else "grad of"
            if self._origin is None or self._origin[0] is not fwd or self._origin[1] != what:
                where = f" in {fwd.loc.safe_where()}" if fwd.loc else ""
                out = f" -> {self.names[fwd.outputs[0]]}" if len(fwd.outputs) == 1 else ""
                self.comment(f"{what} {fwd.type}{out}{where}")
                self._origin, self._loc = (fwd, what), None
            return
        self._origin = None
        loc = op.loc
        if loc is not self._loc and loc is not None and loc != self._loc:
            self.comment(f"in {loc.safe_where()}")
            self._loc = loc

    def _records(self, op: Op) -> bool:
        """True for an op its grad maker put on the forward side (residual records, counters)."""
        fwd = op.origin
        if op.block is fwd.block:
            recorded = self._recorded.get(op.block)
            if recorded is None:  # one scan per block, not one per op
                recorded = self._recorded[op.block] = _recorded_ops(op.block)
            return op in recorded
        return any(sub.is_ancestor_of(op.block) for sub in fwd.sub_blocks())

    def _constant(self, op: Op) -> str:
        value, dt = op.attrs["value"], op.attrs["dtype"]
        if op.attrs["shape"] == () and isinstance(value, (bool, int, float, complex)):
            return f"jnp.array({literal(value, dt)}, {literal(dt)})"
        if np.size(value) == 0:  # nested lists cannot write the shape of an empty array
            return f"jnp.zeros({literal(tuple(op.attrs['shape']))}, {literal(dt)})"
        if np.size(value) <= INLINE_CONST_SIZE:
            return f"jnp.asarray({_array_literal(np.asarray(value).astype(dt), dt)}, {literal(dt)})"
        # A NumPy array: made while a jax.jit traces srcgrad's pipeline (the fast path), a
        # jnp array would be that trace's tracer, kept in a program that outlives it.
        self.consts.append(np.asarray(value).astype(dt, copy=False))
        return f"_consts[{len(self.consts) - 1}]"


def part_bounds(types: list[str]) -> list[int]:
    """Where the parts of a block of ops of these types begin (and, last, where the block
    ends): each part holds PART_OPS to 2 * PART_OPS ops, and ends where the next
    PART_WINDOW types repeat its first ones, if they do.

    A program built from a repeated layer or step is cut at the same place in every repeat
    (wherever it starts), so its parts are the same but for their names, and `load`
    compiles one of them for all.
    """
    bounds, n, w = [0], len(types), PART_WINDOW
    while n - bounds[-1] > 2 * PART_OPS:
        start = bounds[-1]
        head = types[start : start + w]
        end = next(
            (
                i
                for i in range(start + PART_OPS, start + 2 * PART_OPS)
                if types[i] == head[0] and types[i : i + w] == head
            ),
            start + PART_OPS,
        )
        bounds.append(end)
    return bounds + [n]


def _part(fname: str, params: list[str], body: list[str], results: list[str]) -> list[str]:
    """`def fname(params):` body `return (results)`, long lists wrapped."""
    comma = "," if len(results) == 1 else ""
    return (
        _wrapped(f"def {fname}(", params, "):")
        + body
        + _wrapped(f"{_PAD}return (", results, f"{comma})")
    )


def _canonical_part(
    frame: _Frame, fname: str, params: list[str], results: list[str]
) -> Canonical | None:
    """The canonical form of a part (`_part` of its frame), or None if it has none."""
    slots = frame.slots
    if frame.canon is None:
        return None
    lines = _part(
        slots[fname], [slots[p] for p in params], frame.canon, [slots[r] for r in results]
    )
    if not slots.ok():
        return None
    return Canonical("\n".join(lines) + "\n", {c: r for r, c in slots.items()})


def _wrapped(
    head: str,
    names: Sequence[str],
    close: str,
    tail: str = "",
    more: Sequence[str] = (),
    end: str = "",
    width: int = 96,
) -> list[str]:
    """`head` + names joined by ", " + `close` (+ `tail` + `more` + `end`), broken into lines
    of about `width` characters, continuation lines aligned after `head`."""
    lines: list[str] = []
    line, indent = head, " " * len(head)
    for group, last in ((names, close + tail), (more, end)):
        for i, n in enumerate(group):
            item = n + (", " if i < len(group) - 1 else "")
            if len(line) + len(item) > width and line.strip() not in ("", head.strip()):
                lines.append(line.rstrip())
                line = indent
            line += item
        line += last
    return lines + [line]


def _array_literal(arr: np.ndarray, dtype: np.dtype) -> str:
    """`[[1.0, 2.0], [3.0, 4.0]]`: a small array as nested lists of literals in its dtype."""
    if arr.ndim == 0:
        return literal(arr.item(), dtype)
    return "[" + ", ".join(_array_literal(a, dtype) for a in arr) + "]"


def _recorded_ops(block: Block) -> set[Op]:
    """The grad ops of `block` that come before the forward op (of `block`) they differentiate."""
    seen: set[Op] = set()
    recorded = set()
    for op in block.ops:
        if op.origin is not None and op.origin.block is block and op.origin not in seen:
            recorded.add(op)
        seen.add(op)
    return recorded


def _attr_literals(attrs: dict[str, Any]) -> dict[str, str]:
    """An op's attrs as Python literals (`value` in the op's `dtype`)."""
    return {k: literal(v, attrs.get("dtype") if k == "value" else None) for k, v in attrs.items()}


def emit_program(
    program: Program,
    feeds: Sequence[Variable],
    fetches: Sequence[Variable],
    checks: Sequence[Variable] = (),
    name: str = "srcgrad_fn",
    ops: Sequence[Op] | None = None,
) -> Source:
    """Emit `def name(*feeds): ... return (fetches), (checks)` from the global block's ops
    (or from `ops`, a part of them whose other inputs are among `feeds`).

    A global block of more than SPLIT_OPS live ops becomes a chain of functions
    `name_part_k` (cut by `part_bounds`), which `name` calls in order: each takes the earlier
    values it reads and returns the values read after it. JAX traces the same program; what
    it saves is in lowering, where JAX finds each traced op's source line with a scan of its
    function's line table, so one function of N lines costs O(N^2) to lower.
    """
    em = Emitter()
    fname = identifier(name, em.taken)
    param_names = [em.name(v) for v in feeds]
    params = ", ".join(param_names)
    body_start = len(em.lines)
    wanted = list(fetches) + list(checks)
    live = live_ops(program.global_block().ops if ops is None else ops, wanted)
    parts: list[tuple[list[str], Canonical | None]] = []
    if len(live) > SPLIT_OPS:
        parts = em.emit_parts(live, wanted, fname)
    else:
        em.emit_live(live)
    em.line(f"return {em.tuple(fetches)}, {em.tuple(checks)}")
    body = em.lines[body_start:]
    functions = [[f"def {fname}({params}):"] + body] + [p for p, _ in parts] + em.functions
    canonical = {1 + k: c for k, (_, c) in enumerate(parts) if c is not None}
    by_name = {n: i for i, n in enumerate(param_names)}
    forwarded = tuple(by_name.get(em.names[v]) for v in fetches)
    text = "\n\n".join("\n".join(p) for p in functions) + "\n"
    return Source(text, fname, em.consts, canonical, forwarded)


def lower_program(
    program: Program,
    feeds: Sequence[Variable],
    fetches: Sequence[Variable],
    checks: Sequence[Variable] = (),
    name: str = "srcgrad_fn",
    ops: Sequence[Op] | None = None,
) -> Lowered:
    """The one entry point from a Program to code: verify (with SRCGRAD_ENABLE_CHECKS=1),
    `emit_program`, then `load`; `Lowered.jitted()` is the one jit wrapper."""
    check(program, "the transforms, before lowering")
    lowered = load(emit_program(program, feeds, fetches, checks, name, ops))
    deepest = max(program.blocks, key=lambda b: b.depth)
    lowered.nesting, lowered.nest_loc = deepest.depth, deepest.nest_loc
    return lowered
