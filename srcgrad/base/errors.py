"""Exceptions and user source locations.

Layer L0 (base): see docs/design.md.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
from dataclasses import dataclass

from .hooks import Hook

#: srcgrad's package folder (this file is in its base/ folder).
_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# contextlib's frames wrap srcgrad functions (a context manager used as a decorator): not user code
_PKG_DIRS: tuple[str, ...] = (_HERE + os.sep, contextlib.__file__)
_SAFE = re.compile(r"[^A-Za-z0-9_.\-/\\ ]")
_NOT_IDENT = re.compile(r"[^A-Za-z0-9_]")


def internal_dirs() -> tuple[str, ...]:
    """The folders (and files) whose frames are srcgrad's own, not the user's."""
    return _PKG_DIRS


def register_internal_dir(path: str) -> None:
    """Treat frames from files under `path` as srcgrad internals (not user code)."""
    global _PKG_DIRS
    path = os.path.abspath(path) + os.sep
    if path not in _PKG_DIRS:
        _PKG_DIRS = _PKG_DIRS + (path,)
        _internal.clear()
        _skipped.clear()


#: srcgrad's file that is user code: `python -m srcgrad`'s tour (its lines are the ones shown).
_TOUR = os.path.join(_HERE, "__main__.py")


def is_internal(filename: str) -> bool:
    """True for srcgrad's own files and the code it generates (memoized per file name)."""
    internal = _internal.get(filename)
    if internal is None:
        internal = _internal[filename] = (
            filename.startswith(_PKG_DIRS) and filename != _TOUR or filename.startswith("<srcgrad")
        )
    return internal


_internal: dict[str, bool] = {}


@dataclass(frozen=True)
class SourceLoc:
    """A file:line in user code, and the function it is in."""

    filename: str
    lineno: int
    function: str = ""

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno}"

    def safe(self) -> str:
        """The location with the file's base name scrubbed to safe characters (for emitted
        comments)."""
        return _safe(self.filename, self.lineno)

    def safe_where(self) -> str:
        """`layer (model.py:12)`: the function, reduced to identifier characters, and `safe()`
        (for emitted comments: a layer called from two places reads differently)."""
        return _safe_where(self.function, self.filename, self.lineno)


@functools.lru_cache(maxsize=4096)
def _safe(filename: str, lineno: int) -> str:
    """SourceLoc.safe, memoized: every grad section's comment names its forward op's line."""
    return f"{_SAFE.sub('?', os.path.basename(filename))}:{int(lineno)}"


@functools.lru_cache(maxsize=4096)
def _safe_where(function: str, filename: str, lineno: int) -> str:
    name = _NOT_IDENT.sub("", function)[:60]
    return f"{name} ({_safe(filename, lineno)})" if name else _safe(filename, lineno)


@functools.lru_cache(maxsize=4096)
def _source_loc(filename: str, lineno: int, function: str) -> SourceLoc:
    """One shared SourceLoc per user line (ops made on one line compare by identity)."""
    return SourceLoc(filename, lineno, function)


def _jax_dirs() -> tuple[str, ...]:
    import jax
    import jaxlib

    return tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep for m in (jax, jaxlib))


_JAX_DIRS = _jax_dirs()


def user_location() -> SourceLoc | None:
    """The innermost stack frame outside srcgrad's own files and JAX's (a srcgrad function
    that JAX calls, as `jax.vmap` or the fast path of a compiled call do, reports the line
    that called JAX)."""
    frame = sys._getframe(1)
    skip = _skipped
    while frame is not None:
        code = frame.f_code
        fname = code.co_filename
        skipped = skip.get(fname)
        if skipped is None:
            skipped = skip[fname] = is_internal(fname) or fname.startswith(_JAX_DIRS)
        if not skipped:
            return _source_loc(fname, frame.f_lineno, code.co_name)
        frame = frame.f_back
    return None


#: Per file name: whether `user_location` passes over its frames (srcgrad's or JAX's).
_skipped: dict[str, bool] = {}


def located(kind: type[Exception], message: str) -> Exception:
    """An exception of a builtin `kind` (TypeError, ValueError: what JAX raises there) whose
    message ends with the user's file:line, as srcgrad's own errors do."""
    loc = user_location()
    return kind(message + (f" (at {loc})" if loc is not None else ""))


class SrcgradError(Exception):
    """An error in a user's program, reported with the op and the user's file:line."""

    def __init__(self, message: str, op: str | None = None, loc: SourceLoc | None = None):
        self.op = op
        self.loc = loc
        self.detail = message
        prefix = f"{op}: " if op and not message.startswith(f"{op}: ") else ""
        where = f" (at {loc})" if loc else ""
        super().__init__(f"{prefix}{message}{where}")


#: The traced value types, whose arguments `_call_site` lists (the IR's Variable: errors sit
#: below the IR).
TRACED_TYPES: Hook[tuple[type, ...]] = Hook(
    "srcgrad.base.errors.TRACED_TYPES",
    "the traced value types (srcgrad.ir.program.Variable)",
    default=(),
)


def _call_site() -> tuple[str | None, list, SourceLoc | None]:
    """The public srcgrad function the user called, its traced arguments and the user's line."""
    frame, entry = sys._getframe(2), None
    while frame is not None:
        if not is_internal(frame.f_code.co_filename):
            break
        if not frame.f_code.co_name.startswith(("_", "<")):
            entry = frame
        frame = frame.f_back
    loc = (
        SourceLoc(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)
        if frame is not None
        else None
    )
    if entry is None:
        return None, [], loc
    code = entry.f_code
    names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    args = [entry.f_locals.get(n) for n in names]
    traced = TRACED_TYPES.value
    return code.co_name, [v for v in args if isinstance(v, traced)], loc


class ShapeError(SrcgradError):
    """Shapes or dtypes of an op's inputs do not fit its rule.

    Raised without a location (by a check that runs before the op is recorded), it names the
    srcgrad function the user called, that call's traced arguments and the user's line.
    """

    def __init__(self, message: str, op: str | None = None, loc: SourceLoc | None = None):
        if loc is not None:
            super().__init__(message, op, loc)
            return
        entry, args, loc = _call_site()
        shown = message
        if any(v.type_str() not in message for v in args):
            shown += "; inputs: " + ", ".join(f"{v.name}: {v.type_str()}" for v in args)
        super().__init__(shown, op or entry, loc)
        self.detail = message


class GradientError(SrcgradError):
    """A gradient was asked for that cannot be computed."""


class TraceError(SrcgradError):
    """A traced value was used in a way the tracer cannot record."""


class ConcreteValueError(TraceError, TypeError):
    """A traced value's Python value was asked for (float(x), int(x), x.item()): it exists only
    when the compiled function runs. A TypeError too, as Python's own, so that code that
    probes with `except TypeError` keeps working (JAX's ConcretizationTypeError is one)."""
