"""Loading emitted source: compiling it under a registered file name, and the contexts its
first trace runs in.

Large programs repeat themselves (a layer, a block, a step), and so do the functions they
are emitted as: parts that differ only in their values' names compile to the same bytecode.
`load` compiles one such part and gives each of the others a copy of its code with their
own names (`CODE_CACHE_SIZE`), which is what Python's `compile()` of their text would make.

Layer L4 (transforms): see docs/design.md.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import itertools
import linecache
import sys
import threading
import types
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

import jax
import jax.numpy as jnp
from jax import lax

from srcgrad.base.cache import register
from srcgrad.base.errors import SrcgradError, user_location

from .compile_options import quick_options, refused_options

_counter = itertools.count()
_counter_lock = threading.Lock()


@dataclass
class Canonical:
    """A function's text with every value renamed to a canonical name of the same length
    (so its layout, lines and columns, is the same), and each canonical name's real one."""

    text: str
    names: dict[str, str]


@dataclass
class Source:
    """Emitted source of one function (and the functions it calls), before it is compiled;
    `canonical` holds the canonical form of some top-level functions, by their index."""

    text: str
    name: str
    consts: list[Any]
    canonical: dict[int, Canonical] = field(default_factory=dict)
    #: Per fetch of the function: the index of the feed it returns as it is, or None.
    forwarded: tuple[int | None, ...] = ()


_FULL_TRACEBACKS = getattr(
    getattr(jax, "_src", None) and jax._src.config, "include_full_tracebacks_in_locations", None
)


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
    """`jax.lax` with `while_loop`, `cond` and `switch` run as Python `while` / `if` over
    concrete arrays, so that a breakpoint in an emitted loop body (or grad body, or branch) fires
    once per iteration with real values. Under a JAX trace they are lax's own."""

    def __getattr__(self, name: str) -> Any:
        return getattr(lax, name)

    @staticmethod
    def while_loop(
        cond_fun: Callable[[Any], Any], body_fun: Callable[[Any], Any], init: Any
    ) -> Any:
        carry = init
        while True:
            go = cond_fun(carry)
            if _traced((go, carry)):  # values of a JAX trace (captured or carried): lax's loop
                return lax.while_loop(cond_fun, body_fun, carry)
            if not bool(go):
                return carry
            carry = body_fun(carry)

    @staticmethod
    def cond(
        pred: Any, true_fun: Callable[[Any], Any], false_fun: Callable[[Any], Any], operands: Any
    ) -> Any:
        if _traced((pred, operands)):
            return lax.cond(pred, true_fun, false_fun, operands)
        return true_fun(operands) if bool(pred) else false_fun(operands)

    @staticmethod
    def switch(index: Any, branches: Sequence[Callable[[Any], Any]], operands: Any) -> Any:
        if _traced((index, operands)):
            return lax.switch(index, branches, operands)
        return branches[min(max(int(index), 0), len(branches) - 1)](operands)


@dataclass
class Lowered:
    """Emitted source and the Python function compiled from it."""

    source: str
    fn: Callable[..., Any]
    filename: str
    code: tuple[types.CodeType, ...] = ()  # each top-level function's code, in source order
    namespace: dict[str, Any] = field(default_factory=dict)
    _jitted: dict[bool, Any] = field(default_factory=dict, repr=False)
    nesting: int = 0  # how deep the program's blocks nest (JAX traces one call per level)
    nest_loc: Any = None  # the user's line of the outermost loop or branch of the deepest
    #: Per fetch: the index of the feed it returns as it is, or None (`Source.forwarded`).
    forwarded: tuple[int | None, ...] = ()

    def jitted(self, quick: bool = False) -> Callable[..., Any]:
        """`jax.jit(fn)`, made once (every caller shares its traces and compilations): the
        one jit wrapper of srcgrad's compiled code. Its first call (JAX's trace, lowering and
        compile) runs under `short_locations` and `collection_paused`; later calls go
        straight to JAX's dispatch (neither context is part of JAX's cache key). `quick`:
        compiled with `quick_options()`; JAX refuses such a wrapper inside a trace
        (`nested_options`), where the plain one serves."""
        options = quick_options() if quick else None
        hit = self._jitted.get(options is not None)
        if hit is None:
            jitted = [jax.jit(self.fn, compiler_options=options) if options else jax.jit(self.fn)]
            first = [True]

            levels = self.nesting if self.nesting > SHALLOW_NESTING else 0

            def compiled(run: Callable[[Any], Any]) -> Any:
                """`run(jitted)`, once more with XLA's defaults if XLA does not know one of
                the options (an older jaxlib)."""
                try:
                    return run(jitted[0])
                except Exception as e:
                    if not options or not refused_options(e):
                        raise
                    jitted[0] = call.jitted = jax.jit(self.fn)  # type: ignore[attr-defined]
                    return run(jitted[0])

            @functools.wraps(self.fn)
            def call(*args: Any) -> Any:
                if not first[0]:
                    return jitted[0](*args)
                if levels > MAX_COMPILED_NESTING and not jax.config.jax_disable_jit:  # type: ignore[attr-defined]
                    raise self._too_deep()
                with (
                    short_locations(),
                    collection_paused(),
                    recursion_room(levels) if levels else _NOTHING,
                ):
                    out = compiled(lambda fn: fn(*args))
                first[0] = False
                return out

            def ahead(*avals: Any) -> bool:
                """Compile for arguments of these shapes and dtypes now, without running (a
                pool thread may call it: XLA's compile releases the GIL); False if the
                program nests too deep for that (it compiles at its first call)."""
                if levels:
                    return False
                with short_locations(), collection_paused():
                    compiled(lambda fn: fn.lower(*avals).compile())
                return True

            call.jitted = jitted[0]  # type: ignore[attr-defined]
            call.ahead = ahead  # type: ignore[attr-defined]
            hit = self._jitted[options is not None] = call
        return hit

    def inline(self, *args: Any) -> Any:
        """`fn` called inside a JAX trace (its ops join the caller's jaxpr), with the nesting
        checks of a compiled call (see `jitted`)."""
        levels = self.nesting if self.nesting > SHALLOW_NESTING else 0
        if not levels:
            return self.fn(*args)
        if levels > MAX_COMPILED_NESTING and not jax.config.jax_disable_jit:  # type: ignore[attr-defined]
            raise self._too_deep()
        with recursion_room(levels):
            return self.fn(*args)

    def _too_deep(self) -> SrcgradError:
        return SrcgradError(
            f"loops and branches nest {self.nesting} deep, past the {MAX_COMPILED_NESTING} "
            f"levels srcgrad compiles (XLA's compile time grows steeply with the depth and "
            f"deeper programs can crash it); the nesting starts at {self.nest_loc}. Flatten "
            "it (sg.where for branches, one loop over several steps), or run it without "
            "compiling under `with jax.disable_jit():`",
            loc=user_location(),
        )

    def eager_fn(self) -> Callable[..., Any]:
        """The same source run eagerly: loops and branches as Python `while` / `if` over
        concrete arrays (EagerLax), for stepping through them in a debugger."""
        namespace = dict(self.namespace, lax=EagerLax())
        _define(self.code, namespace)
        return namespace[self.fn.__name__]


#: The deepest nesting of loops and branches srcgrad hands to jax.jit: the gradient of 100
#: nested conds compiles in about a minute, XLA's time grows steeply beyond, and about 300
#: levels crash it. Deeper programs run under `jax.disable_jit()` (the emitted source, eagerly).
MAX_COMPILED_NESTING = 100
#: Up to this nesting depth JAX's trace of the emitted code fits Python's default recursion
#: limit; a deeper program is called with `recursion_room`.
SHALLOW_NESTING = 20
#: Python frames JAX's trace spends per nesting level (lax.cond/while_loop and the emitted
#: function), with a margin: about 7 are measured.
FRAMES_PER_LEVEL = 25


@contextlib.contextmanager
def recursion_room(levels: int) -> Iterator[None]:
    """Python's recursion limit raised, for the `with` body, by what JAX's trace of a program
    nested `levels` deep needs on top of the current stack (srcgrad refuses programs nested
    deeper than ir.MAX_NESTING, so this stays far from the C stack's size). The limit is
    restored after, unless someone else changed it meanwhile."""
    depth, frame = 0, sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    old = sys.getrecursionlimit()
    need = depth + levels * FRAMES_PER_LEVEL + 200
    if need <= old:
        yield
        return
    sys.setrecursionlimit(need)
    try:
        yield
    finally:
        if sys.getrecursionlimit() == need:
            sys.setrecursionlimit(old)


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
    names: dict[str, Any] = {
        "jnp": jnp,
        "lax": lax,
        "jax": jax,
        "partial": functools.partial,
        "_consts": src.consts,
    }
    code = _compile_functions(src, filename)
    namespace = dict(names)
    _define(code, namespace)
    lowered = Lowered(src.text, namespace[src.name], filename, code, names, forwarded=src.forwarded)
    if not src.consts:
        with _loaded_lock:
            _loaded[src.text] = lowered
            while len(_loaded) > SOURCE_CACHE_SIZE:
                _, old = _loaded.popitem(last=False)
                linecache.cache.pop(old.filename, None)
    return lowered


def _define(code: tuple[types.CodeType, ...], namespace: dict[str, Any]) -> None:
    """Make each function of `code` in `namespace` (what running its `def` does)."""
    for c in code:
        namespace[c.co_name] = types.FunctionType(c, namespace)


def _compile_functions(src: Source, filename: str) -> tuple[types.CodeType, ...]:
    """The code of each top-level function of emitted source, at its lines of `filename`.

    Each is compiled on its own (one compile of a program of thousands of lines costs about
    1.5x the compiles of its functions one by one), or, if it has a canonical form, copied
    from the code of that form (`_renamed`).
    """
    codes = []
    text = src.text
    start = line = 0
    while start < len(text):
        end = text.find("\n\ndef ", start)
        end = len(text) if end < 0 else end + 2
        chunk = text[start:end]
        canonical = src.canonical.get(len(codes))
        code = None if canonical is None else _renamed(canonical, filename, line)
        if code is None:
            code = _moved(_function_code(compile(chunk, filename, "exec")), line)
        codes.append(code)
        line += chunk.count("\n")
        start = end
    return tuple(codes)


def _function_code(module: types.CodeType) -> types.CodeType:
    """The code of the one function that `module` (`def f(...): ...`) defines."""
    (code,) = [c for c in module.co_consts if isinstance(c, types.CodeType)]
    return code


def _moved(code: types.CodeType, lines: int) -> types.CodeType:
    """`code` (and the code objects in it) `lines` lines further down its file."""
    if not lines:
        return code
    consts = tuple(_moved(c, lines) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_firstlineno=code.co_firstlineno + lines, co_consts=consts)


_QUALNAME = hasattr(types.CodeType, "co_qualname")  # Python 3.11 on
#: How many canonical functions' code `load` keeps (see `_renamed`).
CODE_CACHE_SIZE = 4096
_codes: OrderedDict[str, types.CodeType] = OrderedDict()
_codes_lock = threading.Lock()


def _renamed(canonical: Canonical, filename: str, line: int) -> types.CodeType | None:
    """The code `compile()` makes of the function whose canonical form is `canonical`, at
    `line` lines into `filename`: the canonical form's code (compiled once, then kept), with
    its values', the function's and the file's names replaced. None if it makes nested code
    (whose names would need replacing too): then the real text is compiled.

    The canonical text has the layout of the real one (each name is as long as its real
    name), so the line and column table is the same too.
    """
    with _codes_lock:
        code = _codes.get(canonical.text)
        if code is not None:
            _codes.move_to_end(canonical.text)
    if code is None:
        code = _function_code(compile(canonical.text, "<srcgrad:canonical>", "exec"))
        with _codes_lock:
            _codes[canonical.text] = code
            while len(_codes) > CODE_CACHE_SIZE:
                _codes.popitem(last=False)
    if (
        code.co_cellvars
        or code.co_freevars
        or any(isinstance(c, types.CodeType) for c in code.co_consts)
    ):
        return None
    real = canonical.names
    name = real[code.co_name]
    return code.replace(
        co_varnames=tuple([real[v] for v in code.co_varnames]),
        co_name=name,
        co_filename=filename,
        co_firstlineno=code.co_firstlineno + line,
        **({"co_qualname": name} if _QUALNAME else {}),
    )


def clear_source_cache() -> None:
    """Forget the sources and canonical code `load` keeps."""
    with _loaded_lock:
        for old in _loaded.values():
            linecache.cache.pop(old.filename, None)
        _loaded.clear()
    with _codes_lock:
        _codes.clear()


class _Sources:
    """The sources and canonical code `load` keeps, as one entry of the cache registry."""

    def clear(self) -> None:
        clear_source_cache()

    def __len__(self) -> int:
        return len(_loaded) + len(_codes)


register("sources", _Sources())
