"""The Python objects a converted branch or loop can change (AutoGraph's get_state /
set_state, for containers and objects): the lists, dicts, sets and user objects reachable
from the statement's variables are snapshotted before it is traced; each branch (each trace
of a loop body) starts from that snapshot, and what it changed -- an item, a key, an
attribute -- is joined by the `cond` (carried by the `while`) like a variable. A change of
structure that depends on a traced value (a list that grows, a key set in one branch only)
is refused with the variable's path and the line that made it.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

import dis
import functools
import sys
import threading
import types
from typing import Any, Callable, Iterator

import numpy as np

from ..base.errors import SourceLoc, SrcgradError
from ..ir.program import Variable
from .loader import is_user_file

#: The kinds of objects whose contents are state: how to read and write their contents.
LIST, DICT, SET, OBJ, ARRAY, GLOBALS, CELL = (
    "list",
    "dict",
    "set",
    "obj",
    "array",
    "globals",
    "cell",
)
#: Methods of lists, dicts and sets that change them (named in the errors, with their line).
MUTATORS = frozenset(
    {
        "append",
        "extend",
        "insert",
        "pop",
        "remove",
        "clear",
        "update",
        "setdefault",
        "popitem",
        "add",
        "discard",
        "sort",
        "reverse",
        "__setitem__",
        "__delitem__",
        "__iadd__",
    }
)
_SCALARS = (int, float, complex, bool, str, bytes, type(None), np.generic)
_GLOBAL_READS = frozenset({"LOAD_GLOBAL", "LOAD_NAME"})
_GLOBAL_STORES = frozenset({"STORE_GLOBAL", "DELETE_GLOBAL"})
_CELL_STORES = frozenset({"STORE_DEREF", "DELETE_DEREF"})


class GlobalNames:
    """The names of a module's namespace that user functions rebind (`global n` in them)."""

    def __init__(self, ns: dict[str, Any], module: str):
        self.ns, self.module = ns, module
        self.names: set[str] = set()


@functools.lru_cache(maxsize=None)
def _user_class(t: type) -> bool:
    """True for a class defined in user code (its instances' attributes are state): in a
    user's file, in `__main__`, or by `exec` (a module Python never imported)."""
    if t is types.SimpleNamespace:
        return True
    mod = sys.modules.get(t.__module__)
    if mod is None or t.__module__ == "__main__":
        return True
    f = getattr(mod, "__file__", None)
    return isinstance(f, str) and is_user_file(f)


def _kind(v: Any) -> str | None:
    if isinstance(v, list):
        return LIST
    if isinstance(v, dict):
        return DICT
    if isinstance(v, set):
        return SET
    if isinstance(v, np.ndarray):
        return ARRAY if v.flags.writeable and v.dtype != object else None
    if isinstance(v, (Variable, type, types.ModuleType, types.FunctionType, types.MethodType)):
        return None
    if (hasattr(v, "__dict__") or _slots(type(v))) and _user_class(type(v)):
        return OBJ
    return None


@functools.lru_cache(maxsize=None)
def _slots(t: type) -> tuple[str, ...]:
    """The attribute names a class keeps in `__slots__` (its own and its bases')."""
    names: list[str] = []
    for c in t.__mro__:
        declared = c.__dict__.get("__slots__", ())
        for n in (declared,) if isinstance(declared, str) else declared:
            if n not in ("__dict__", "__weakref__") and n not in names:
                names.append(n)
    return tuple(names)


_UNSET = object()


def _attributes(obj: Any) -> tuple[tuple[str, Any], ...]:
    """An object's attributes: its `__dict__` and its slots that are set."""
    slots = tuple((n, v) for n in _slots(type(obj)) if (v := getattr(obj, n, _UNSET)) is not _UNSET)
    d = getattr(obj, "__dict__", None)
    return (tuple(d.items()) if d is not None else ()) + slots


def _set_attributes(obj: Any, value: Any) -> None:
    slots = set(_slots(type(obj)))
    d = getattr(obj, "__dict__", None)
    if d is not None:
        d.clear()
        d.update((k, v) for k, v in value if k not in slots)
    kept = dict(value)
    for n in slots:
        if n in kept:
            object.__setattr__(obj, n, kept[n])
        elif hasattr(obj, n):
            object.__delattr__(obj, n)


def contents(obj: Any, kind: str) -> Any:
    """The contents of `obj` now, as a value that later changes do not alter."""
    if kind == LIST:
        return tuple(obj)
    if kind == DICT:
        return tuple(dict.items(obj))
    if kind == SET:
        return frozenset(obj)
    if kind == OBJ:
        return _attributes(obj)
    if kind == GLOBALS:
        return tuple((n, obj.ns[n]) for n in sorted(obj.names) if n in obj.ns)
    if kind == CELL:
        try:
            return (("value", obj.cell_contents),)
        except ValueError:  # an empty cell
            return ()
    return None  # ARRAY: frozen (read-only) while traced, never changed


def write(obj: Any, kind: str, value: Any) -> None:
    """Set the contents of `obj` to `value` (as `contents` returns them), in place."""
    if kind == LIST:
        list.__setitem__(obj, slice(None), list(value))
    elif kind == DICT:
        dict.clear(obj)
        dict.update(obj, value)
    elif kind == SET:
        set.clear(obj)
        set.update(obj, value)
    elif kind == OBJ:
        _set_attributes(obj, value)
    elif kind == CELL:
        if value:
            obj.cell_contents = value[0][1]
        else:
            try:
                del obj.cell_contents
            except ValueError:
                pass
    elif kind == GLOBALS:
        new = dict(value)
        for n in obj.names:
            if n in new:
                obj.ns[n] = new[n]
            else:
                obj.ns.pop(n, None)


def same(a: Any, b: Any) -> bool:
    """True if `a` and `b` are one value for Python (the same object, or equal numbers,
    strings or None of one type)."""
    if a is b:
        return True
    if type(a) is not type(b) or not isinstance(a, _SCALARS):
        return False
    try:
        return bool(a == b)
    except Exception:
        return False


class Entry:
    """One object the statement can reach: its kind, a path that names it for the user
    (`x`, `self.items`, `d['k']`) and its contents before the statement."""

    __slots__ = ("obj", "kind", "path", "before")

    def __init__(self, obj: Any, kind: str, path: str):
        self.obj, self.kind, self.path = obj, kind, path
        self.before = contents(obj, kind)

    def item_path(self, key: Any) -> str:
        if self.kind == OBJ:
            return f"{self.path}.{key}"
        if self.kind in (GLOBALS, CELL):
            return self.path if self.kind == CELL else str(key)
        return f"{self.path}[{_short_repr(key)}]"


def _short_repr(key: Any) -> str:
    r = repr(key)
    return r if len(r) <= 30 else r[:27] + "..."


def _children(v: Any, kind: str | None) -> Iterator[tuple[str, Any]]:
    """(path suffix, value) of what `v` holds."""
    if kind == LIST or isinstance(v, tuple):
        return ((f"[{i}]", x) for i, x in enumerate(v))
    if kind == DICT:
        return ((f"[{_short_repr(k)}]", x) for k, x in dict.items(v))
    if kind == SET:
        return (("", x) for x in v)
    if kind == OBJ:
        return ((f".{k}", x) for k, x in _attributes(v))
    return iter(())


@functools.lru_cache(maxsize=4096)
def global_reads(code: types.CodeType, ops: frozenset[str] = _GLOBAL_READS) -> tuple[str, ...]:
    """The global names `code` and the functions nested in it read (or, with `ops`, store)."""
    names = {i.argval for i in dis.get_instructions(code) if i.opname in ops}
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names.update(global_reads(c, ops))
    return tuple(sorted(names))


def frame_roots(frame: types.FrameType) -> dict[str, Any]:
    """The variables a statement of `frame`'s code can reach: its locals (closure variables
    included) and the globals its code reads."""
    roots = dict(frame.f_locals)
    g = frame.f_globals
    for n in global_reads(frame.f_code):
        if n not in roots and n in g:
            roots[n] = g[n]
    return roots


class Objects:
    """The objects reachable from `roots` (a name -> value map), with their contents now
    (made when a statement on a traced value starts: outside every other one, the journal of
    list methods starts again). `adopt` adds the objects a function called while a branch
    is traced can reach through its own globals and closure, before it runs."""

    def __init__(self, roots: dict[str, Any]):
        if not journal.depth:
            journal.calls.clear()
        self.entries: list[Entry] = []
        self.arrays: list[tuple[np.ndarray, str]] = []
        self._seen: set[int] = set()
        self._globals: dict[int, Entry] = {}
        self.adopt({n: v for n, v in roots.items() if not n.startswith("ag__")})

    def adopt(self, roots: dict[str, Any]) -> list[np.ndarray]:
        """Note the objects reachable from `roots` that are not noted yet (their contents
        now are their contents before the statement); returns the new NumPy arrays."""
        arrays = []
        todo: list[tuple[str, Any]] = list(roots.items())
        while todo:
            path, v = todo.pop(0)
            if isinstance(v, _SCALARS) or id(v) in self._seen:
                continue
            self._seen.add(id(v))
            kind = _kind(v)
            if kind == ARRAY:
                self.arrays.append((v, path))
                arrays.append(v)
            elif kind is not None:
                self.entries.append(Entry(v, kind, path))
            if kind is not None or isinstance(v, tuple):
                todo.extend((path + suffix, x) for suffix, x in _children(v, kind))
        return arrays

    def adopt_globals(self, ns: dict[str, Any], module: str, names: tuple[str, ...]) -> None:
        """Note the global `names` of namespace `ns` that a called function rebinds."""
        e = self._globals.get(id(ns))
        if e is None:
            e = self._globals[id(ns)] = Entry(
                GlobalNames(ns, module), GLOBALS, f"{module}'s globals"
            )
            self.entries.append(e)
        new = set(names) - e.obj.names
        if new:
            e.obj.names |= new
            e.before = tuple(sorted(dict(e.before, **{n: ns[n] for n in new if n in ns}).items()))

    def adopt_cell(self, cell: types.CellType, path: str) -> None:
        """Note a closure cell that a called function rebinds (`nonlocal n` in it)."""
        if id(cell) not in self._seen:
            self._seen.add(id(cell))
            self.entries.append(Entry(cell, CELL, path))

    def now(self) -> list[Any]:
        return [contents(e.obj, e.kind) for e in self.entries]

    def restore(self) -> None:
        for e in self.entries:
            write(e.obj, e.kind, e.before)

    def after(self, contents_: list[Any], i: int) -> Any:
        """Entry `i`'s contents in `contents_` (a `now()` taken before it was adopted: its
        contents before, which nothing changed until then)."""
        return contents_[i] if i < len(contents_) else self.entries[i].before

    def changed(self, after: list[Any]) -> list[int]:
        """The entries whose contents `after` differs from before."""
        return [i for i, (e, a) in enumerate(zip(self.entries, after)) if not _same_contents(e, a)]


def _same_contents(e: Entry, after: Any) -> bool:
    if e.kind == SET:
        return after == e.before
    return len(after) == len(e.before) and all(
        same(a, b) if e.kind == LIST else (ka == kb and same(a, b))
        for a, b in zip(after, e.before)
        for (ka, a), (kb, b) in ([(a, b)] if e.kind != LIST else [((0, a), (0, b))])
    )


def items(e: Entry, value: Any) -> list[tuple[Any, Any]]:
    """(key, item) pairs of contents `value` of `e` (list positions, dict keys, attributes)."""
    if e.kind == LIST:
        return list(enumerate(value))
    return list(value)


def rebuild(e: Entry, pairs: list[tuple[Any, Any]]) -> Any:
    """Contents of `e` from (key, item) pairs."""
    return tuple(v for _, v in pairs) if e.kind == LIST else tuple(pairs)


class _Journal(threading.local):
    def __init__(self) -> None:
        self.depth = 0
        self.calls: list[tuple[int, str, SourceLoc | None]] = []
        self.active: list[Objects] = []  # of the branches and loop bodies being traced
        self.frozen: list[np.ndarray] = []  # NumPy arrays made read-only meanwhile


journal = _Journal()


def made_by(obj: Any) -> str:
    """`path.method at file:line` of the calls that changed `obj`, for an error."""
    found = [f"{m} at {loc}" for i, m, loc in journal.calls if i == id(obj) and loc is not None]
    return ", ".join(dict.fromkeys(found))


class traced_body:
    """Context of tracing one branch or loop body: the reachable NumPy arrays are read-only
    (an in-place change of one is refused, see `frozen_array`), converted item assignment
    on a NumPy array is functional (`in_body`), and the objects return to their contents
    before the statement afterwards."""

    def __init__(self, objects: Objects):
        self.objects = objects

    def __enter__(self) -> "traced_body":
        journal.depth += 1
        journal.active.append(self.objects)
        _freeze(a for a, _ in self.objects.arrays)
        return self

    def __exit__(self, *exc: Any) -> None:
        journal.depth -= 1
        journal.active.pop()
        if not journal.depth:
            for a in journal.frozen:
                a.flags.writeable = True
            journal.frozen.clear()


def _freeze(arrays: Iterator[np.ndarray] | list[np.ndarray]) -> None:
    for a in arrays:
        if a.flags.writeable:
            try:
                a.flags.writeable = False
            except ValueError:
                continue
            journal.frozen.append(a)


def adopt_callee(f: Any) -> None:
    """Before a user function `f` runs in a traced branch or loop body, note the objects it
    reaches through the globals it reads and its closure (a helper that changes a global
    dict the branch never names), in every statement being traced."""
    fn = getattr(f, "__func__", f)
    code = getattr(fn, "__code__", None)
    if (
        not isinstance(code, types.CodeType)
        or not journal.active
        or not is_user_file(code.co_filename)
    ):
        return
    g = fn.__globals__
    roots = {n: g[n] for n in global_reads(code) if n in g}
    for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
        try:
            roots[name] = cell.cell_contents
        except ValueError:  # an empty cell
            continue
    stores = global_reads(code, _GLOBAL_STORES)
    rebound = set(global_reads(code, _CELL_STORES)) & set(code.co_freevars)
    cells = [(n, c) for n, c in zip(code.co_freevars, fn.__closure__ or ()) if n in rebound]
    for objs in journal.active:
        _freeze(objs.adopt(roots))
        if stores:
            objs.adopt_globals(g, g.get("__name__", "module"), stores)
        for n, c in cells:
            objs.adopt_cell(c, f"{fn.__qualname__.split('.<locals>')[0]}'s `{n}`")


def in_body() -> bool:
    """True while a branch or loop body on a traced value is traced."""
    return journal.depth > 0


def frozen_array(
    e: BaseException, objects: Objects, what: str, loc: SourceLoc | None
) -> SrcgradError | None:
    """The error for a NumPy array changed in place while a traced branch or loop body was
    traced (NumPy raised `e`, since the array was read-only then); None for another error."""
    if not (isinstance(e, ValueError) and "read-only" in str(e)) or not objects.arrays:
        return None
    paths = [f"`{p}`" for _, p in objects.arrays]
    names = ", ".join(paths[:3]) + (f" or one of {len(paths) - 3} more" if len(paths) > 3 else "")
    return SrcgradError(
        f"a NumPy array ({names}) is changed in place inside this {what} on a "
        "traced value; its new values would be traced values, which a NumPy "
        "array cannot hold: make it a traced array first (y = sg.asarray(y)) "
        "or assign its items (y[i] = v, which rebinds y)",
        op=what,
        loc=loc,
    )


def structure_error(
    e: Entry, before: Any, after: Any, what: str, loc: SourceLoc | None, other: Any = None
) -> SrcgradError:
    """The error for `e` changing its structure (length, keys, set members) in a `what` on a
    traced value: `after` vs `before` (in a loop), or the two branches' `after` and `other`."""
    calls = made_by(e.obj)
    by = f" ({calls})" if calls else ""
    if e.kind == LIST:
        if other is not None:
            change = (
                f"has {_items(len(after))} after the true branch and {_items(len(other))} "
                f"after the false branch{by}"
            )
        else:
            n0, n1 = len(before), len(after)
            change = (
                f"{'grows' if n1 > n0 else 'shrinks'} in one iteration{by} ({_items(n0)} "
                f"before it, {n1} after)"
            )
        advice = (
            "a list whose length depends on a traced value cannot be traced: preallocate "
            "an array (buf = sg.zeros(n)) and assign its items (buf[i] = v), or use sg.where"
        )
    elif e.kind == SET:
        change = f"gains or loses members{by}"
        advice = "a set whose members depend on a traced value cannot be traced"
    else:
        ka = [k for k, _ in after]
        kb = [k for k, _ in (before if other is None else other)]
        diff = [k for k in ka if k not in kb] + [k for k in kb if k not in ka]
        names = ", ".join(f"`{e.item_path(k)}`" for k in diff) or f"the order of `{e.path}`'s keys"
        side = "by one branch only" if other is not None else "by one iteration"
        change = f"has {names} set or deleted {side}{by}"
        what_kind = {OBJ: "attribute", GLOBALS: "global"}.get(e.kind, "key")
        advice = (
            f"set the {what_kind} before the {what}, to a value of the type the {what} gives it"
        )
    cond = "whose condition is a traced value" if what == "if" else "which runs on a traced value"
    stmt = "`if`" if what == "if" else what
    return SrcgradError(f"`{e.path}` {change} in this {stmt}, {cond}; {advice}", op=what, loc=loc)


def _items(n: int) -> str:
    return f"{n} item" if n == 1 else f"{n} items"


def capture_call(f: Callable[..., Any], loc_fn: Callable[[], SourceLoc | None]) -> None:
    """Note a call of `f` made while a traced branch or loop body is traced, if `f` is a
    method of a list, dict or set that changes it (for the error that names its line)."""
    owner = getattr(f, "__self__", None)
    if (
        journal.depth
        and isinstance(owner, (list, dict, set))
        and getattr(f, "__name__", "") in MUTATORS
    ):
        journal.calls.append((id(owner), f"{type(owner).__name__}.{f.__name__}", loc_fn()))
