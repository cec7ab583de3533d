"""Exceptions under a traced condition: a `raise` (or a failed `assert`) that a traced value
decides is staged -- the compiled program raises it when it runs and the condition holds
(a `raise_if` op) -- instead of being raised, or caught by the user's own `try`, while the
branch that contains it is traced.

Each branch or loop body on a traced value is traced in a `frame`; a staged exception is a
`Pending` flag in the innermost frame of the block being built. A `cond` returns its
branches' flags, a `while` carries them (and stops once one is set, as the `raise` would
stop it); outside every frame the flag becomes a `raise_if` op.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator

from ..core.builder import active_program, as_var
from ..base.errors import SourceLoc, SrcgradError, TraceError, user_location
from ..ir.program import Block
from ..ops.debug import emit_raise_if
from .loader import is_user_file
from .objects import in_body

#: The attribute that marks an exception a converted `raise` made while a traced branch or
#: loop body was traced (its value: the user's line).
MARK = "__sg_staged_at__"


class Pending:
    """A staged exception: raised at run time when `flag` (a bool, traced or not) is true."""

    __slots__ = ("flag", "error", "loc")

    def __init__(self, flag: Any, error: BaseException, loc: SourceLoc | None):
        self.flag, self.error, self.loc = flag, error, loc


class Staged(Exception):
    """What a branch raises after staging the exceptions of both branches of an `if` in it:
    the rest of the branch never runs."""

    def __init__(self) -> None:
        super().__init__("both branches of an `if` on a traced value raise")
        setattr(self, MARK, None)


class Frame:
    """The staged exceptions of one branch or loop body (block `block`) being traced."""

    def __init__(self, block: Block):
        self.block = block
        self.pending: list[Pending] = []


class _Frames(threading.local):
    def __init__(self) -> None:
        self.stack: list[Frame] = []


_frames = _Frames()


@contextlib.contextmanager
def frame(block: Block) -> Iterator[Frame]:
    """Trace a branch or loop body (its block `block`) collecting its staged exceptions."""
    f = Frame(block)
    _frames.stack.append(f)
    try:
        yield f
    finally:
        _frames.stack.pop()


def in_frame() -> bool:
    """True while a branch or loop body whose block is being built is traced."""
    stack = _frames.stack
    return bool(stack) and stack[-1].block is active_program("raise").current_block()


def stage(flag: Any, error: BaseException, loc: SourceLoc | None) -> None:
    """Raise `error` when the program runs where `flag` holds: pending in the frame of the
    block being built, or a `raise_if` op where no frame of this block is open."""
    if flag is False:
        return
    prog = active_program("raise")
    stack = _frames.stack
    if stack and stack[-1].block is prog.current_block():
        stack[-1].pending.append(Pending(flag, error, loc))
    else:
        emit_raise_if(as_var(flag), error, loc)


def raising(error: Any) -> Any:
    """`raise error` in converted code: while a traced branch or loop body is traced, the
    exception is marked as the user's own (staged, not reported as a tracing failure)."""
    if in_body():
        e = error() if isinstance(error, type) and issubclass(error, BaseException) else error
        if isinstance(e, BaseException):
            try:
                setattr(e, MARK, user_location())
            except AttributeError:  # an exception type with __slots__: raised as it is
                return e
            return e
    return error


def staged(e: BaseException) -> bool:
    """True if `e` was raised by a converted `raise` in a traced branch or loop body."""
    return isinstance(e, Staged) or getattr(e, MARK, None) is not None


def failed_branch(e: BaseException, side: str, what: str, loc: SourceLoc | None) -> BaseException:
    """What to raise for the exception `e` that tracing one branch of an `if` (one loop body)
    raised: srcgrad's own errors as they are, recursion as a clear error, a user's `raise` not
    at all (the caller stages it), anything else as an error saying that the branch could not
    be traced (so that no `except` of the user's changes the other branch's result)."""
    if isinstance(e, (SrcgradError, TraceError)):
        return e
    stmt = "`if`" if what == "if" else what
    if isinstance(e, RecursionError):
        fn = _recursing(e)
        who = f"`{fn}` calls itself" if fn else "it recurses"
        return SrcgradError(
            f"the {side} of this {stmt} on a traced value recurses without end "
            f"when traced ({who} under a traced condition, whose depth is not "
            "known when the program is traced): write the recursion as a loop "
            f"(while ...) ({e})",
            op=what,
            loc=loc,
        )
    where = getattr(e, MARK, None) or _origin(e)
    at = f" at {where}" if where else ""
    return SrcgradError(
        f"the {side} of this {stmt} on a traced value raised {type(e).__name__}"
        f"({e}){at} while srcgrad traced it; every branch of an `if` on a "
        "traced value is traced, also the one a run does not take",
        op=what,
        loc=loc,
    )


def _recursing(e: BaseException) -> str | None:
    """The user function that appears most often in `e`'s traceback."""
    counts: dict[str, int] = {}
    tb = e.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if is_user_file(code.co_filename):
            counts[code.co_name] = counts.get(code.co_name, 0) + 1
        tb = tb.tb_next
    return max(counts, key=counts.__getitem__) if counts else None


def _origin(e: BaseException) -> SourceLoc | None:
    """The user's line in `e`'s traceback nearest to where it was raised."""
    tb, found = e.__traceback__, None
    while tb is not None:
        code = tb.tb_frame.f_code
        if is_user_file(code.co_filename):
            found = SourceLoc(code.co_filename, tb.tb_lineno, code.co_name)
        tb = tb.tb_next
    return found
