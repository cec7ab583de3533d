"""The operators converted code calls (as `ag__.<name>`): each dispatches at trace time --
on Python values it runs plain Python, on traced values it builds the srcgrad op.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

import sys

import builtins
import operator
import threading
from typing import Any, Callable, Sequence

import jax
import numpy as np

from ..core.builder import as_var
from ..base.errors import SrcgradError, user_location
from ..ir.program import Variable
from ..ops.elementwise import (
    add,
    equal,
    greater_equal,
    less,
    logical_and,
    logical_not,
    logical_or,
    multiply,
    where,
)
from ..imperative.tensor import Tensor
from . import objects
from .blocks import IFEXP, predicate, traced_if
from .loops import test_becomes_traced, traced_loop
from .raises import raising, stage
from .undefined import UNDEF_RET, Undefined, undefined
from .loader import RUNTIME, converted_call

__all__ = [
    "UNDEF_RET",
    "LoopInfo",
    "state",
    "ret",
    "checked",
    "and_",
    "or_",
    "not_",
    "if_exp",
    "if_stmt",
    "while_stmt",
    "for_stmt",
    "range_",
    "setitem",
    "setitem_op",
    "setitem_in_place",
    "getitem",
    "in_",
    "call",
    "assert_",
    "raising",
    "deleted",
    "options",
]


class _Options(threading.local):
    def __init__(self) -> None:
        self.max_iters: int | None = None


options = _Options()


class LoopInfo:
    """What the static analysis found about a loop: the names it assigns that it reads before
    assigning them (`live_in`), that are read outside it (`live_out`), and whether it mutates a
    Python container (then it stays a Python loop when its iterable is static)."""

    __slots__ = ("live_in", "live_out", "python_only")

    def __init__(self, live_in: tuple, live_out: tuple, python_only: bool):
        self.live_in, self.live_out, self.python_only = set(live_in), set(live_out), python_only


def state(
    local: dict[str, Any],
    names: Sequence[str],
    glob: dict[str, Any] | None = None,
    global_names: Sequence[str] = (),
) -> tuple:
    """The current values of `names` (Undefined for an unbound one); `global_names` (declared
    `global` in the function) are read from `glob`."""
    return tuple((glob if n in global_names else local).get(n, Undefined(n)) for n in names)


def deleted(name: str) -> Undefined:
    """The value of a name after `del name` in a converted branch or loop body."""
    return Undefined(name, "is used after `del` removed it")


def assert_(test: Any, message: Any) -> None:
    """`assert test, message()`: Python's on a Python value; on a traced one, an
    AssertionError staged where `test` is false."""
    if isinstance(test, Variable):
        loc = user_location()
        text = message()
        error = AssertionError(text) if text is not None else AssertionError()
        stage(logical_not(predicate(test, "assert", loc)), error, loc)
    elif not test:
        text = message()
        raise AssertionError(text) if text is not None else AssertionError()


def _objects() -> objects.Objects:
    """The objects the statement that called the caller (converted code) can reach."""
    return objects.Objects(objects.frame_roots(sys._getframe(2)))


def call(f: Any) -> Any:
    """The function converted code calls in place of `f`: `f` converted if it is user code;
    `range` that takes traced bounds; a list method that changes the list is noted (for the
    error that names its line) while a traced branch or loop body is traced."""
    if f is builtins.range:
        return _range
    if objects.in_body():
        objects.capture_call(f, user_location)
        objects.adopt_callee(f)
    return converted_call(f)


def _range(*args: Any) -> Any:
    return range_(builtins.range, *args)


def ret(value: Any, did_return: Any, falls_through: bool) -> Any:
    """The value of a function whose `return`s were lowered (None if none ran)."""
    if _traced(did_return) and falls_through:
        raise SrcgradError(
            "this function returns a value on some paths and None on others, "
            "and a traced condition chooses between them; return a value on "
            "every path",
            loc=user_location(),
        )
    return None if value is UNDEF_RET or did_return is False else value


def checked(value: Any) -> Any:
    """A returned value, refused (at the `return`) if part of it has no value."""
    for leaf in jax.tree_util.tree_leaves(value):
        if undefined(leaf) and leaf is not UNDEF_RET:
            leaf.fail()
    return value


def _traced(v: Any) -> bool:
    return isinstance(v, Variable)


def _pick(v: Variable, rest: Any, is_or: bool) -> Variable:
    """`v or rest` (`v and rest`) for a traced `v`: the operand Python returns, selected by
    `v`'s truth (`logical_or` / `logical_and` when both are bools)."""
    loc = user_location()
    op = "or" if is_or else "and"
    if v.dtype == np.dtype(bool) and isinstance(rest, bool):  # v or True is True, v or False is v
        return rest if rest is is_or else v
    truth = predicate(v, f"`{op}`", loc)
    r = as_var(rest, like=v)
    if v.dtype == r.dtype == np.dtype(bool) and r.shape == ():
        return logical_or(v, r) if is_or else logical_and(v, r)
    if r.shape != v.shape or (isinstance(rest, Variable) and r.dtype != v.dtype):
        raise SrcgradError(
            f"`a {op} b` on a traced `a`: Python returns one of the operands, a "
            f"{v.type_str()} or a {r.type_str()}, and a traced value chooses which; "
            "give them one shape and dtype (or use sg.where)",
            op=op,
            loc=loc,
        )
    return where(truth, v, r) if is_or else where(truth, r, v)


def and_(*thunks: Callable[[], Any]) -> Any:
    """`a and b and ...`: Python's on Python values; once an operand is traced, the operand
    Python returns, selected (the rest are evaluated: a traced value cannot short-circuit)."""
    v = thunks[0]()
    if len(thunks) == 1:
        return v
    if _traced(v):
        return _pick(v, and_(*thunks[1:]), False)
    return and_(*thunks[1:]) if v else v


def or_(*thunks: Callable[[], Any]) -> Any:
    """`a or b or ...`, as `and_`."""
    v = thunks[0]()
    if len(thunks) == 1:
        return v
    if _traced(v):
        return _pick(v, or_(*thunks[1:]), True)
    return v if v else or_(*thunks[1:])


def not_(v: Any) -> Any:
    return logical_not(predicate(v, "`not`", user_location())) if _traced(v) else not v


def if_exp(test: Any, body: Callable[[], Any], orelse: Callable[[], Any]) -> Any:
    """`body() if test else orelse()`; on a traced `test`, a `cond` op."""
    if not _traced(test):
        return body() if test else orelse()
    return traced_if(
        test,
        lambda _: (body(),),
        lambda _: (orelse(),),
        (Undefined(IFEXP),),
        (IFEXP,),
        user_location(),
        _objects(),
    )[0]


def if_stmt(
    test: Any,
    true_fn: Callable[..., tuple],
    false_fn: Callable[..., tuple],
    values: tuple,
    names: Sequence[str],
    guard: bool = False,
) -> tuple:
    """An `if` statement: the branch functions take and return the names it assigns
    (`guard`: the `if not flag:` that a lowered break, continue or return put around the
    statements after it)."""
    if not _traced(test):
        return true_fn(*values) if test else false_fn(*values)
    return traced_if(test, true_fn, false_fn, values, names, user_location(), _objects(), guard)


def _carried(values: tuple, names: Sequence[str], info: LoopInfo) -> tuple[list[int], list[int]]:
    """The positions a traced loop carries (defined and live), and those it must give a value
    first (assigned in the loop and read after it, but unbound before it)."""
    carried, pending = [], []
    for i, (v, n) in enumerate(zip(values, names)):
        live = n in info.live_in or n in info.live_out
        if not live:
            continue
        if not undefined(v):
            carried.append(i)
        elif n in info.live_in and n not in info.live_out:
            raise SrcgradError(
                f"`{n}` is read in this loop on a traced value before it is "
                "assigned: assign it before the loop",
                op="loop",
                loc=user_location(),
            )
        else:
            pending.append(i)
    return carried, pending


#: The user lines (SourceLoc) of loops made by conversion, for the error that asks for a bound.
CONVERTED_LOOPS: set = set()


def loop_hint(loc: Any) -> str:
    """The advice for an unbounded loop at `loc` that needs a bound: for a converted loop, how
    to bound it ("" for any other loop)."""
    if loc in CONVERTED_LOOPS:
        return (
            "; it is a converted Python loop: bound it with sg.convert(fn, max_iters=N) "
            "(also a decorator)"
        )
    return ""


def _loop(
    test: Callable[..., Any],
    body: Callable[..., tuple],
    values: tuple,
    names: Sequence[str],
    info: LoopInfo,
    max_iters: int | None,
    counter: bool,
    objs: objects.Objects,
) -> tuple:
    loc = user_location()
    CONVERTED_LOOPS.add(loc)
    carried, pending = _carried(values, names, info)
    return traced_loop(test, body, values, names, carried, pending, loc, max_iters, counter, objs)


def while_stmt(
    test: Callable[..., Any],
    body: Callable[..., tuple],
    values: tuple,
    names: Sequence[str],
    info: LoopInfo,
) -> tuple:
    """A `while` loop: Python iterations while its test is a Python value; from the first
    traced test on, one `while` op over the rest (from the start when the test turns traced
    after the first iteration, as `err = 1.0; while err > tol:`)."""
    first = not info.python_only and any(_traced(l) for l in jax.tree_util.tree_leaves(values))
    while True:
        t = test(*values)
        if _traced(t) or (t and first and test_becomes_traced(test, body, values, _objects())):
            m = options.max_iters
            return _loop(test, body, values, names, info, m, m is not None, _objects())
        if not t:
            return values
        first = False
        values = body(*values)


class TracedRange:
    """`range(lo, hi, step)` run as a traced loop: a bound is traced, or (`length`) the rest of
    a Python range whose loop became data-dependent (the step is a Python int)."""

    def __init__(self, lo: Any, hi: Any, step: Any, length: int | None = None):
        if not isinstance(step, (int, np.integer)) or step == 0:
            raise SrcgradError(
                f"range() over traced bounds needs a nonzero Python int step, got {step!r}",
                op="for",
                loc=user_location(),
            )
        self.lo, self.hi, self.step, self.length = lo, hi, int(step), length

    def _only_for(self, *args: Any) -> Any:
        raise SrcgradError(
            "a range() with a traced bound can only be looped over by a `for` "
            "statement: its length is known only when the program runs",
            op="range",
            loc=user_location(),
        )

    __iter__ = __len__ = __getitem__ = __contains__ = __reversed__ = _only_for


def range_(range_fn: Callable[..., Any], *args: Any) -> Any:
    """`range(*args)`; a TracedRange when a bound is traced."""
    if range_fn is not builtins.range or not any(_traced(a) for a in args):
        return range_fn(*args)
    lo, hi, step = (0, args[0], 1) if len(args) == 1 else (tuple(args) + (1,))[:3]
    return TracedRange(lo, hi, step)


def for_stmt(
    iterable: Any,
    extra: Callable[..., Any] | None,
    body: Callable[..., tuple],
    values: tuple,
    names: Sequence[str],
    info: LoopInfo,
) -> tuple:
    """A `for` loop: a Python loop over a Python iterable; one `while` op over a traced
    range or the leading axis of a traced array. `extra` is the test a `break` or `return`
    adds."""
    if isinstance(iterable, TracedRange):
        return _for_traced(iterable, None, extra, body, values, names, info, _objects())
    if _traced(iterable) and not info.python_only:
        if iterable.ndim == 0:
            raise SrcgradError(
                f"cannot iterate over a 0-d traced value ({iterable.type_str()})",
                op="for",
                loc=user_location(),
            )
        return _for_traced(None, iterable, extra, body, values, names, info, _objects())
    first = (
        extra is not None
        and isinstance(iterable, range)
        and not info.python_only
        and any(_traced(l) for l in jax.tree_util.tree_leaves(values))
    )
    for k, it in enumerate(iterable):
        ok = extra(*values) if extra is not None else True
        if (
            first
            and ok is True
            and test_becomes_traced(extra, lambda *s, it=it: body(it, *s), values, _objects())
        ):
            ok = as_var(True)  # a break that depends on the data: the whole range is one loop
        first = False
        if _traced(ok) and isinstance(iterable, range):
            rest = iterable[k:]  # a break on a traced value: the rest is one traced loop
            return _for_traced(
                TracedRange(rest.start, rest.stop, rest.step, len(rest)),
                None,
                extra,
                body,
                values,
                names,
                info,
                _objects(),
            )
        if _traced(ok):
            values = traced_if(
                ok,
                lambda *s, it=it: body(it, *s),
                lambda *s: s,
                values,
                names,
                user_location(),
                _objects(),
            )
        elif not ok:
            break
        else:
            values = body(it, *values)
    return values


def _for_traced(
    rng: TracedRange | None,
    xs: Variable | None,
    extra: Callable[..., Any] | None,
    body: Callable[..., tuple],
    values: tuple,
    names: Sequence[str],
    info: LoopInfo,
    objs: objects.Objects,
) -> tuple:
    """The traced `for`: a `while` op carrying an int32 step count `k` from 0."""
    if rng is not None:
        zero = isinstance(rng.lo, (int, np.integer)) and rng.lo == 0
        hi = as_var(rng.hi)
        lo = rng.lo if _traced(rng.lo) else as_var(rng.lo, like=hi)
        if (
            lo.dtype.kind not in "iu"
            or lo.shape != ()
            or hi.dtype.kind not in "iu"
            or hi.shape != ()
        ):
            raise SrcgradError(
                f"range() bounds must be integer scalars, got {lo.type_str()} and {hi.type_str()}",
                op="for",
                loc=user_location(),
            )
        step = rng.step

        def item(k: Variable) -> Variable:
            i = k if step == 1 else multiply(k, step)
            return i if zero else add(lo, i)

        def in_range(k: Variable) -> Variable:
            i = item(k)
            return less(i, hi) if step > 0 else less(hi, i)

        if rng.length is not None:
            bound, counter = rng.length, False
        else:
            bound, counter = options.max_iters, options.max_iters is not None
    else:
        n = xs.shape[0]

        def item(k: Variable) -> Variable:
            return xs[k]

        def in_range(k: Variable) -> Variable:
            return less(k, n)

        bound, counter = n, False

    def test(k: Any, *s: Any) -> Any:
        ok = in_range(k)
        return ok if extra is None else and_(lambda: ok, lambda: extra(*s))

    def step_body(k: Any, *s: Any) -> tuple:
        return (add(k, 1),) + tuple(body(item(k), *s))

    k0 = as_var(np.int32(0))
    full_info = LoopInfo(tuple(info.live_in | {"_sg_k"}), tuple(info.live_out), False)
    out = _loop(
        test,
        step_body,
        (k0,) + tuple(values),
        ("_sg_k",) + tuple(names),
        full_info,
        bound,
        counter,
        objs,
    )
    return out[1:]


def setitem(x: Any, index: Any, value: Any) -> Any:
    """`x[index] = value`, as the converted code rebinds it: `x = setitem(x, index, value)`.

    A traced `x` (or a traced value stored into an array) gives the functional update
    `x.at[index].set(value)` (a boolean mask: `where`); Python containers, NumPy arrays of
    concrete values and Tensors are updated in place."""
    if isinstance(x, list) and _has_traced(index):
        return _list_setitem(x, index, value)
    if _traced(x) or (
        isinstance(x, (np.ndarray, np.generic, jax.Array, float, int))
        and (_traced(value) or _has_traced(index) or objects.in_body())
    ):
        v = as_var(x)
        mask = _mask(index, v)
        if mask is not None:
            from ..ops.shape import broadcast_to

            m = as_var(mask)
            if m.shape != v.shape:
                m = broadcast_to(m.reshape(m.shape + (1,) * (v.ndim - m.ndim)), v.shape)
            return where(m, as_var(value, like=v), v)
        return v.at[index].set(value)
    x[index] = value
    return x


def _list_index(seq: Any, index: Any, what: str) -> Variable:
    """A traced int index into the Python list or tuple `seq`, its range checked when the
    program runs (an IndexError, as Python's)."""
    loc = user_location()
    i = as_var(index)
    if i.shape != () or i.dtype.kind not in "iu":
        raise SrcgradError(
            f"a Python {type(seq).__name__} can only be indexed by a traced int "
            f"scalar, got {i.type_str()}",
            op=what,
            loc=loc,
        )
    n = len(seq)
    stage(
        logical_or(less(i, -n), greater_equal(i, n)),
        IndexError(f"{type(seq).__name__} index out of range"),
        loc,
    )
    return where(less(i, 0), add(i, n), i)


def _list_setitem(x: list, index: Any, value: Any) -> list:
    """`x[i] = value` on a Python list with a traced `i`: every item becomes a select between
    its value and `value` (the list keeps its length, and its identity)."""
    i = _list_index(x, index, "setitem")
    for j, old in enumerate(x):
        o = as_var(old)
        v = as_var(value, like=o)
        if v.shape != o.shape:
            raise SrcgradError(
                f"x[i] = v on a Python list with a traced index i: item {j} is "
                f"{o.type_str()} and v is {v.type_str()}; every item must have "
                "v's shape (the index is known only when the program runs)",
                op="setitem",
                loc=user_location(),
            )
        list.__setitem__(x, j, where(equal(i, j), v, o))
    return x


def getitem(x: Any, index: Any) -> Any:
    """`x[index]` in converted code: a Python list or tuple indexed by a traced int is a
    stack of its items indexed (a NumPy array: a traced constant indexed)."""
    if _has_traced(index) and not _traced(x):
        if isinstance(x, (list, tuple)):
            i = _list_index(x, index, "getitem")
            from ..ops.shape import stack

            return stack(list(x))[i]
        if isinstance(x, (np.ndarray, np.generic, jax.Array)):
            return as_var(x)[index]
        if isinstance(x, dict):
            raise SrcgradError(
                "a dict cannot be indexed by a traced value: its keys are "
                "looked up by Python, when the program is traced",
                op="getitem",
                loc=user_location(),
            )
    return x[index]


def in_(item: Any, container: Any) -> Any:
    """`item in container`: Python's; on a traced array, `any(container == item)`; a traced
    `item` in a Python container compares it with each element."""
    if _traced(container):
        from ..ops.logic import any as any_

        return any_(equal(container, item))
    if _traced(item) and isinstance(container, (list, tuple, set, frozenset, dict)):
        found: Any = False
        for e in container:
            if e is item:
                return True
            if not isinstance(e, (Variable, int, float, np.ndarray, np.generic, jax.Array)):
                continue  # (a string or an object never equals a traced number)
            hit = predicate(equal(item, e), "in", user_location())
            found = hit if found is False else logical_or(found, hit)
        return found
    return item in container


def setitem_in_place(name: str, x: Any, new: Any) -> None:
    """`name[...] = v` where `name` is a variable this function cannot rebind (an enclosing
    function's, or a global it does not declare): `new` (what `setitem` made) must be `x`
    itself, updated in place."""
    if new is not x:
        raise SrcgradError(
            f"`{name}[...] = ...` updates a traced array, which makes a new array, "
            f"but `{name}` is a variable of an enclosing function (or a global) "
            "that this function cannot rebind: declare it `nonlocal` (`global`) "
            "or return the new array",
            op="setitem",
            loc=user_location(),
        )


def _has_traced(index: Any) -> bool:
    return any(_traced(l) for l in jax.tree_util.tree_leaves(index))


def _mask(index: Any, x: Variable) -> Any:
    """`index` if it is a boolean mask over the leading axes of `x`, else None."""
    dt = getattr(index, "dtype", None)
    if dt is None and isinstance(index, list) and index and all(isinstance(b, bool) for b in index):
        return np.asarray(index)
    ndim = index.ndim if isinstance(index, Variable) else np.ndim(index)
    if dt is not None and np.dtype(dt) == np.dtype(bool) and 0 < ndim <= x.ndim:
        return index
    return None


_BINOPS = {
    n: getattr(operator, n)
    for n in (
        "add",
        "sub",
        "mul",
        "truediv",
        "pow",
        "floordiv",
        "mod",
        "matmul",
        "and_",
        "or_",
        "xor",
        "lshift",
        "rshift",
    )
}


def setitem_op(x: Any, index: Any, value: Any, op: str) -> Any:
    """`x[index] op= value`: `x[index] = x[index] op value` (as NumPy: a repeated index
    updates once)."""
    if isinstance(x, list) and _has_traced(index):
        return _list_setitem(x, index, _BINOPS[op](getitem(x, index), value))
    if isinstance(x, (list, dict, Tensor)) or not (
        _traced(x)
        or _traced(value)
        or _has_traced(index)
        or (objects.in_body() and isinstance(x, np.ndarray))
    ):
        x[index] = _BINOPS[op](x[index], value)
        return x
    mask = _mask(index, as_var(x))
    if mask is not None:
        v = as_var(x)
        return setitem(v, mask, _BINOPS[op](v, value))
    return setitem(x, index, _BINOPS[op](x[index], value))


RUNTIME.module = sys.modules[__name__]
