"""Lowering: a Program becomes the source of one Python function over jax.numpy / lax."""
from __future__ import annotations

import contextlib
import functools
import gc
import itertools
import linecache
import math
import re
import threading
import types
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from srcgrad.cache import CLEAR_HOOKS
from srcgrad.ir import Block, Op, Program, Variable
from srcgrad.registry import REGISTRY
from srcgrad.verify import check

from .naming import identifier
from .passes import live_ops, loop_invariant

_SAFE_STR = re.compile(r"^[A-Za-z0-9_,\->]*$")
_counter = itertools.count()
_counter_lock = threading.Lock()
#: Array constants of at most this many elements are written into the source; larger ones
#: are passed in the `_consts` side table.
INLINE_CONST_SIZE = 16
_PAD = "    "  # every emitted function is at top level: its body is indented once
#: Ops whose repeats are emitted again (not replaced by the first result): a barrier exists
#: to keep XLA from merging a recomputation with the value it recomputes. (Ops without
#: inputs, the constants and fills, are also emitted again: each keeps its own name.)
_NO_CSE = frozenset({"optimization_barrier"})
_F32_F64 = frozenset({np.dtype("float32"), np.dtype("float64")})


def _f32_f64(op: Op) -> bool:
    return all(v.dtype in _F32_F64 for v in op.inputs)


def _sum_fast(op: Op) -> bool:
    return not op.attrs["keepdims"] and _f32_f64(op)


#: Fast forms: op type -> (template, when). Where srcgrad's known shapes and dtypes make
#: jax.numpy's argument checks and promotion redundant, the `lax` call it would make, which
#: JAX traces in about half the time to the same jaxpr. Only for float32 / float64 inputs
#: where jax.numpy might compute otherwise (jnp.sum upcasts float16, for one).
FAST_FORMS: dict[str, tuple[str, Callable[[Op], bool]]] = {
    **{name: (f"lax.{name}({{0}})", _f32_f64)
       for name in ("sin", "cos", "tan", "tanh", "exp", "log", "log1p", "expm1", "sqrt", "abs")},
    "reshape": ("lax.reshape({0}, {shape})", bool),
    "transpose": ("lax.transpose({0}, {axes})", bool),
    "fill_constant": ("lax.full({shape}, {value}, {dtype})", bool),
}
if hasattr(lax, "reduce_sum"):  # not public in jax 0.4.30, the floor
    FAST_FORMS["reduce_sum"] = ("lax.reduce_sum({0}, {axes})", _sum_fast)
#: A global block of more live ops than SPLIT_OPS is emitted as a chain of functions of
#: PART_OPS ops each (see `emit_program`).
SPLIT_OPS = 1000
PART_OPS = 256


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


_FULL_TRACEBACKS = getattr(getattr(jax, "_src", None) and jax._src.config,
                          "include_full_tracebacks_in_locations", None)


def short_locations() -> Any:
    """A context in which JAX gives each op of a compiled program the source location of its
    line in the emitted function only, not the whole Python stack that traced it.

    The emitted line is the location that helps (HLO metadata and profiles name it); the
    stack above it is the same for every op and costs XLA's compiler about a fifth of its
    time on a program of thousands of ops, each with a distinct line. (A no-op on a JAX
    release without the option.)
    """
    return _FULL_TRACEBACKS(False) if _FULL_TRACEBACKS is not None else contextlib.nullcontext()


_NOTHING = contextlib.nullcontext()


class _CollectorPause:
    """A context in which Python's cyclic garbage collector does not run; nested and across
    threads, the first one in turns it off and the last one out turns it back on (if it was
    on before).

    Tracing, emitting and compiling a program, and JAX's trace and lowering of it, make
    millions of objects that live until the end and form no garbage cycles; each full
    collection walks all of them, so on programs of thousands of ops the collector took
    about half of srcgrad's transform. Cyclic garbage the paused work makes is collected
    once the collector runs again.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._was_on = False

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        with self._lock:
            if self._depth == 0:
                self._was_on = gc.isenabled()
                gc.disable()
            self._depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0 and self._was_on:
                    gc.enable()


collection_paused = _CollectorPause()


def _traced(tree: Any) -> bool:
    return any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(tree))


class EagerLax:
    """`jax.lax` with `while_loop` and `cond` run as Python `while` / `if` over concrete
    arrays, so that a breakpoint in an emitted loop body (or grad body, or branch) fires
    once per iteration with real values. Under a JAX trace they are lax's own."""

    def __getattr__(self, name: str) -> Any:
        return getattr(lax, name)

    @staticmethod
    def while_loop(cond_fun: Callable[[Any], Any], body_fun: Callable[[Any], Any], init: Any) -> Any:
        carry = init
        while True:
            go = cond_fun(carry)
            if _traced((go, carry)):  # values of a JAX trace (captured or carried): lax's loop
                return lax.while_loop(cond_fun, body_fun, carry)
            if not bool(go):
                return carry
            carry = body_fun(carry)

    @staticmethod
    def cond(pred: Any, true_fun: Callable[[Any], Any], false_fun: Callable[[Any], Any],
             operands: Any) -> Any:
        if _traced((pred, operands)):
            return lax.cond(pred, true_fun, false_fun, operands)
        return true_fun(operands) if bool(pred) else false_fun(operands)


@dataclass
class Lowered:
    """Emitted source and the Python function compiled from it."""

    source: str
    fn: Callable[..., Any]
    filename: str
    code: tuple[types.CodeType, ...] = ()
    namespace: dict[str, Any] = field(default_factory=dict)
    _jitted: Any = field(default=None, repr=False)

    def jitted(self) -> Callable[..., Any]:
        """`jax.jit(fn)`, made once (every caller shares its traces and compilations), called
        under `short_locations`; its first call (JAX's trace, lowering and compile) also
        under `collection_paused`."""
        if self._jitted is None:
            jitted = jax.jit(self.fn)
            first = [True]

            @functools.wraps(self.fn)
            def call(*args: Any) -> Any:
                with short_locations(), (collection_paused() if first[0] else _NOTHING):
                    first[0] = False
                    return jitted(*args)
            call.jitted = jitted  # type: ignore[attr-defined]
            self._jitted = call
        return self._jitted

    def eager_fn(self) -> Callable[..., Any]:
        """The same source run eagerly: loops and branches as Python `while` / `if` over
        concrete arrays (EagerLax), for stepping through them in a debugger."""
        namespace = dict(self.namespace, lax=EagerLax())
        for code in self.code:
            exec(code, namespace)
        return namespace[self.fn.__name__]


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


class _Frame:
    """One emitted function: its lines, what it defines and reads, in order of emission, and
    its expressions (each computed once: a repeat reuses the first result)."""

    __slots__ = ("lines", "params", "items", "exprs")

    def __init__(self, params: Sequence[Variable] = (), exprs: dict[str, list[Variable]] | None = None):
        self.lines: list[str] = []
        self.params = params
        self.items: list[Op | Variable] = []  # emitted ops, and values read by statements
        self.exprs: dict[str, list[Variable]] = {} if exprs is None else exprs

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
        arg = "operands" if kind in ("true", "false") else "carry"
        ops: Sequence[Op] = block.ops
        if kind == "body":
            hoisted, ops = loop_invariant(live_ops(ops, block.results), block)
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
        self.functions[slot] = ([f"def {fname}({arg}, captured):"] + body[:n]
                                + [f"{_PAD}{', '.join(self.names[v] for v in captured)}"
                                   f"{',' if len(captured) == 1 else ''} = captured"] + body[n:])
        return f"partial({fname}, captured={self.tuple(captured)})"

    def emit_ops(self, ops: Sequence[Op], needed: Sequence[Variable]) -> None:
        self.emit_live(live_ops(ops, needed))

    def emit_live(self, live: Sequence[Op]) -> None:
        """One line per op of `live`, except that a copy (`assign`) and an expression over
        values that the function has already computed emit nothing: their values take the
        earlier names."""
        names, lines, items, exprs = self.names, self.lines, self.frame.items, self.frame.exprs
        pad = _PAD
        for op in live:
            if op.type == "assign":
                names.same_as(op.outputs[0], op.inputs[0])
                continue
            row = REGISTRY[op.type]
            if row.lower_stmt is not None:
                self._comment(op)
                items.append(op)
                row.lower_stmt(self, op)
                continue
            if op.type == "constant":
                expr = self._constant(op)
            else:
                args = [names[v] for v in op.inputs]
                lower = row.lower
                fast = FAST_FORMS.get(op.type)
                if fast is not None and fast[1](op):
                    lower = fast[0]
                if op.attrs:
                    attrs = _attr_literals(op.attrs)
                    expr = lower(args, attrs) if callable(lower) else lower.format(*args, **attrs)
                else:
                    expr = lower(args, {}) if callable(lower) else lower.format(*args)
            earlier = exprs.get(expr)
            if earlier is not None:
                for out, e in zip(op.outputs, earlier):
                    names.same_as(out, e)
                continue
            if op.inputs and op.type not in _NO_CSE:
                exprs[expr] = op.outputs
            self._comment(op)
            items.append(op)
            if len(op.outputs) == 1:  # self.assign, inlined: this is once per op
                lines.append(f"{pad}{names[op.outputs[0]]} = {expr}")
            else:
                self.assign(op.outputs, expr)

    def emit_parts(self, live: Sequence[Op], needed: Sequence[Variable], base: str) -> list[list[str]]:
        """Emit `live` as functions of at most PART_OPS ops, and into the current function one
        call of each: `a, b = base_part_k(x, y)`. Returns the functions' lines."""
        main, alias = self.frame, self.names.alias
        exprs = main.exprs  # the parts run in one scope: a repeat in a later part is reused
        frames = []
        for k in range(0, len(live), PART_OPS):
            self.frame = _Frame(exprs=exprs)
            self.lines, self._origin, self._loc = self.frame.lines, None, None
            self.emit_live(live[k:k + PART_OPS])
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
        functions = []
        for frame, args, results in zip(frames, reversed(ins), reversed(outs)):
            fname = identifier(f"{base}_part_{len(functions)}", self.taken)
            arg_names = [self.names[v] for v in args]
            result_names = [self.names[v] for v in results]
            comma = "," if len(results) == 1 else ""
            functions.append(_wrapped(f"def {fname}(", arg_names, "):") + frame.lines
                             + _wrapped(f"{_PAD}return (", result_names, f"{comma})"))
            self.frame.items.extend(args)
            self.lines += _wrapped(f"{_PAD}(", result_names, f"{comma}) = ", tail=f"{fname}(",
                                   more=arg_names, end=")")
        return functions

    def _comment(self, op: Op) -> None:
        fwd = op.origin
        if fwd is not None:
            what = "recorded for the grad of" if self._records(op) else "grad of"
            if self._origin is None or self._origin[0] is not fwd or self._origin[1] != what:
                where = f" in {fwd.loc.safe_where()}" if fwd.loc else ""
                out = f" -> {self.names[fwd.outputs[0]]}" if len(fwd.outputs) == 1 else ""
                self.line(f"# {what} {fwd.type}{out}{where}")
                self._origin, self._loc = (fwd, what), None
            return
        self._origin = None
        loc = op.loc
        if loc is not self._loc and loc is not None and loc != self._loc:
            self.line(f"# in {loc.safe_where()}")
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
        self.consts.append(jnp.asarray(value))
        return f"_consts[{len(self.consts) - 1}]"


def _wrapped(head: str, names: Sequence[str], close: str, tail: str = "", more: Sequence[str] = (),
             end: str = "", width: int = 96) -> list[str]:
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


@dataclass
class Source:
    """Emitted source of one function, before it is compiled."""

    text: str
    name: str
    consts: list[Any]


def emit_program(program: Program, feeds: Sequence[Variable], fetches: Sequence[Variable],
                 checks: Sequence[Variable] = (), name: str = "srcgrad_fn") -> Source:
    """Emit `def name(*feeds): ... return (fetches), (checks)`.

    A global block of more than SPLIT_OPS live ops becomes a chain of functions
    `name_part_k` of PART_OPS ops each, which `name` calls in order: each takes the earlier
    values it reads and returns the values read after it. JAX traces the same program; what
    it saves is in lowering, where JAX finds each traced op's source line with a scan of its
    function's line table, so one function of N lines costs O(N^2) to lower.
    """
    em = Emitter()
    fname = identifier(name, em.taken)
    params = ", ".join(em.name(v) for v in feeds)
    body_start = len(em.lines)
    wanted = list(fetches) + list(checks)
    live = live_ops(program.global_block().ops, wanted)
    parts: list[list[str]] = []
    if len(live) > SPLIT_OPS:
        parts = em.emit_parts(live, wanted, fname)
    else:
        em.emit_live(live)
    em.line(f"return {em.tuple(fetches)}, {em.tuple(checks)}")
    body = em.lines[body_start:]
    functions = [[f"def {fname}({params}):"] + body] + parts + em.functions
    return Source("\n\n".join("\n".join(p) for p in functions) + "\n", fname, em.consts)


#: How many compiled sources `load` keeps (see there).
SOURCE_CACHE_SIZE = 32
_loaded: OrderedDict[str, Lowered] = OrderedDict()
_loaded_lock = threading.Lock()


def load(src: Source) -> Lowered:
    """Compile emitted source under a registered file name (for tracebacks, inspect, pdb).

    A source that `load` compiled recently (and that reads no `_consts`: its text is then
    the whole program) gives the same Lowered again, whose function and `jitted()` wrapper
    JAX has already traced and compiled: a fresh function whose program emits the same
    source (a new closure of the same code, a function made again) costs no Python
    `compile()` and no XLA compilation. `sg.clear_caches()` forgets them.
    """
    if not src.consts:
        with _loaded_lock:
            hit = _loaded.get(src.text)
            if hit is not None:
                _loaded.move_to_end(src.text)
                return hit
    with _counter_lock:
        n = next(_counter)
    filename = f"<srcgrad:{src.name}:{n}>"
    linecache.cache[filename] = (len(src.text), None, src.text.splitlines(True), filename)
    names: dict[str, Any] = {"jnp": jnp, "lax": lax, "jax": jax, "partial": functools.partial,
                             "_consts": src.consts}
    code = _compile_functions(src.text, filename)
    namespace = dict(names)
    for c in code:
        exec(c, namespace)
    lowered = Lowered(src.text, namespace[src.name], filename, code, names)
    if not src.consts:
        with _loaded_lock:
            _loaded[src.text] = lowered
            while len(_loaded) > SOURCE_CACHE_SIZE:
                _, old = _loaded.popitem(last=False)
                linecache.cache.pop(old.filename, None)
    return lowered


def _compile_functions(text: str, filename: str) -> tuple[types.CodeType, ...]:
    """Python's `compile()` of each top-level function of emitted source on its own, its
    lines moved to where the function stands in `text` (tracebacks, JAX's source lines).

    One compile of a program of thousands of lines costs about 1.5x the compiles of its
    functions one by one (the whole syntax tree at once, against one function's at a time).
    """
    codes = []
    start = line = 0
    while start < len(text):
        end = text.find("\n\ndef ", start)
        end = len(text) if end < 0 else end + 2
        chunk = text[start:end]
        code = compile(chunk, filename, "exec")
        codes.append(_moved(code, line) if line else code)
        line += chunk.count("\n")
        start = end
    return tuple(codes)


def _moved(code: types.CodeType, lines: int) -> types.CodeType:
    """`code` (and the code objects in it) `lines` lines further down its file."""
    consts = tuple(_moved(c, lines) if isinstance(c, types.CodeType) else c
                   for c in code.co_consts)
    return code.replace(co_firstlineno=code.co_firstlineno + lines, co_consts=consts)


def clear_source_cache() -> None:
    """Forget the sources `load` keeps."""
    with _loaded_lock:
        for old in _loaded.values():
            linecache.cache.pop(old.filename, None)
        _loaded.clear()


CLEAR_HOOKS.append(clear_source_cache)


def lower_program(program: Program, feeds: Sequence[Variable], fetches: Sequence[Variable],
                  checks: Sequence[Variable] = (), name: str = "srcgrad_fn") -> Lowered:
    """Verify (with SRCGRAD_ENABLE_CHECKS=1), `emit_program`, then `load`."""
    check(program, "the transforms, before lowering")
    return load(emit_program(program, feeds, fetches, checks, name))
