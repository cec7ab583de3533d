"""The compiled-program caches: one registry, one clear, one key policy.

Every cache of compiled code registers here (`register`), so `sg.clear_caches()` empties
them all and `cache_info()` shows their sizes: the per-function cache below (`CACHE`), the
eager calls' programs (srcgrad/compiled/eager.py), the imperative backwards
(srcgrad/imperative/backward_whole.py)
and the emitted sources (transforms/loading.py). Keys hold argument positions, shapes,
dtypes and each static value's type with its value (`static_key`: `True`, `1` and `1.0`
compile apart, as in jax.jit); Python numbers in operand positions are runtime inputs.

`sg.grad(f)` made afresh reuses what an earlier `sg.grad(f)` compiled, as `jax.jit` caches
on the function: the key is the function object (for a bound method, its function and its
instance), never its name or code alone, so two closures over different values do not share
an entry. An entry goes when its function is garbage collected. Each key has a lock, so
threads making the same first call compile once and wait for it.

Layer L0 (base): see docs/design.md.
"""

from __future__ import annotations

import collections
import dis
import functools
import itertools
import operator
import threading
import types
import weakref
from typing import Any, Callable, Protocol, TypeVar


class Slot:
    """One cache key's entry and the lock its builders hold."""

    __slots__ = ("lock", "entry")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.entry: Any = None


def _owners(fun: Callable[..., Any]) -> tuple[Any, ...] | None:
    """The objects whose identity names `fun`: itself, or a bound method's function and
    instance; None when one of them cannot be weakly referenced."""
    owners = (
        (fun.__func__, fun.__self__)
        if hasattr(fun, "__func__") and hasattr(fun, "__self__")
        else (fun,)
    )
    try:
        for o in owners:
            weakref.ref(o)
    except TypeError:
        return None
    return owners


class CompileCache:
    """Slots per (function identity, key); the functions are held weakly."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._by_fun: dict[tuple[int, ...], tuple[tuple[weakref.ref, ...], dict[Any, Slot]]] = {}

    def slot(self, fun: Callable[..., Any], key: Any) -> Slot | None:
        """The slot of `key` for `fun`; None for a function that cannot be held weakly."""
        owners = _owners(fun)
        if owners is None:
            return None
        ident = tuple(id(o) for o in owners)
        with self._lock:
            held = self._by_fun.get(ident)
            if held is None:
                refs = tuple(weakref.ref(o, lambda _, i=ident: self._drop(i)) for o in owners)
                held = self._by_fun[ident] = (refs, {})
            slots = held[1]
            slot = slots.get(key)
            if slot is None:
                slot = slots[key] = Slot()
            return slot

    def forget(self, fun: Callable[..., Any]) -> None:
        """Drop `fun`'s entries: its transformations trace it again when next called (a
        function marked `sg.no_convert` after a converted trace)."""
        owners = _owners(fun)
        if owners is None:
            return
        with self._lock:
            held = self._by_fun.pop(tuple(id(o) for o in owners), None)
        for slot in held[1].values() if held is not None else ():
            with slot.lock:
                slot.entry = None
        for callback in _ON_FORGET:
            callback(fun)

    def _drop(self, ident: tuple[int, ...]) -> None:
        with self._lock:
            self._by_fun.pop(ident, None)

    def clear(self) -> None:
        """Forget every entry (also in the slots that `Transformed` objects remember)."""
        with self._lock:
            # Copies: dropping an entry can free a function whose weakref callback (_drop,
            # under this reentrant lock) removes its row while we iterate.
            for _, slots in list(self._by_fun.values()):
                for slot in list(slots.values()):
                    with slot.lock:
                        slot.entry = None
            self._by_fun.clear()

    def __len__(self) -> int:
        with self._lock:
            return sum(len(s) for _, s in self._by_fun.values())


class Clearable(Protocol):
    def clear(self) -> None: ...
    def __len__(self) -> int: ...


class BoundedCache:
    """A map of compiled programs with a size bound (the earliest stored go first) and a
    lock; `get` (a plain dict read, on every eager call) and `put` are safe from several
    threads."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._data: collections.OrderedDict[Any, Any] = collections.OrderedDict()

    def get(self, key: Any) -> Any:
        return self._data.get(key)

    def put(self, key: Any, value: Any) -> Any:
        """Store `value` (or keep the one another thread stored first) and return it."""
        with self._lock:
            value = self._data.setdefault(key, value)
            while len(self._data) > self.limit:
                self._data.popitem(last=False)
            return value

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def values(self) -> list[Any]:
        with self._lock:
            return list(self._data.values())

    def __len__(self) -> int:
        return len(self._data)


CACHE = CompileCache()
_CACHES: dict[str, Clearable] = {}
#: What else holds compiled code outside the slots (a `Transformed`'s fast path), told
#: when a function's entries are forgotten (`fun`) or every cache is cleared (None).
_ON_FORGET: list[Callable[[Callable[..., Any] | None], None]] = []
C = TypeVar("C", bound=Clearable)


def register(name: str, cache: C) -> C:
    """Add a cache of compiled code to the registry (cleared by `sg.clear_caches()`)."""
    if name in _CACHES:
        raise ValueError(f"a cache named {name!r} is registered twice")
    _CACHES[name] = cache
    return cache


register("functions", CACHE)


def on_forget(callback: Callable[[Callable[..., Any] | None], None]) -> None:
    """Call `callback(fun)` when `fun`'s entries are forgotten and `callback(None)` when
    every cache is cleared: for what keeps compiled code outside the registered caches."""
    _ON_FORGET.append(callback)


def clear_cache() -> None:
    """Forget every compiled program (later calls trace and compile again), also in the
    `sg.grad(f)` objects made before."""
    for cache in _CACHES.values():
        cache.clear()
    for callback in _ON_FORGET:
        callback(None)


def cache_info() -> dict[str, int]:
    """How many entries each registered cache holds, by name."""
    return {name: len(cache) for name, cache in _CACHES.items()}


def static_key(value: Any) -> Any:
    """A static value as a key part: its type with its value (tuples and lists element by
    element), so values that compare equal across types (`True`, `1`, `1.0`) differ; an
    unhashable value by its repr."""
    t = type(value)
    if t is tuple or t is list:
        return (t, tuple(static_key(v) for v in value))
    if t is float or t is complex:
        return (t, repr(value))  # tells 0.0 from -0.0, and nan is equal to itself
    try:
        hash(value)
    except TypeError:
        return (t, repr(value))
    return (t, value)


_UNBOUND = object()


#: The instructions that read a global name (attribute names, also in `co_names`, are not).
_GLOBAL_READS = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "LOAD_FROM_DICT_OR_GLOBALS"})


@functools.lru_cache(maxsize=4096)
def _names(code: types.CodeType) -> tuple[str, ...]:
    """The global names `code` and the functions nested in it read."""
    names = {i.argval for i in dis.get_instructions(code) if i.opname in _GLOBAL_READS}
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names.update(_names(c))
    return tuple(sorted(names))


def binding_reader(fun: Callable[..., Any]) -> Callable[[], tuple[Any, ...]] | None:
    """A function that returns `bindings(fun)`, made once and called on every call of a
    transformed `fun`; None when `fun` is no Python function (a callable object: nothing of
    its own to read)."""
    f = getattr(fun, "__func__", fun)
    if not isinstance(getattr(f, "__code__", None), types.CodeType):
        return None
    cells = f.__closure__ or ()  # fixed for the function's life (its code may change)
    get, unbound = f.__globals__.get, itertools.repeat(_UNBOUND)
    seen: list[Any] = [None, ()]  # the code object last read, and the global names it reads

    def read() -> tuple[Any, ...]:
        code = f.__code__
        if code is not seen[0]:
            seen[0], seen[1] = code, _names(code)
        out = [code, f.__defaults__, f.__kwdefaults__, *map(get, seen[1], unbound)]
        for cell in cells:
            try:
                out.append(cell.cell_contents)
            except ValueError:  # a cell not yet assigned
                out.append(_UNBOUND)
        return tuple(out)

    return read


def bindings(fun: Callable[..., Any]) -> tuple[Any, ...]:
    """What a program traced from `fun` depends on besides its arguments: `fun`'s code object
    and default values, and what its code reads by name (its globals' and closure cells'
    current values).

    An entry compiled when these were other objects is stale (the code was replaced, as
    IPython's autoreload does when a source is edited, or a global or closed-over variable
    was rebound to another array or number since): it is traced again. Values read
    elsewhere (in a helper `fun` calls, or as an attribute) are not looked at.
    """
    read = binding_reader(fun)
    return read() if read is not None else ()


def bindings_check(fun: Callable[..., Any], now: tuple[Any, ...]) -> Callable[[], bool]:
    """A function that tells whether `bindings(fun)` is still `now` (taken from `fun`), for
    the fast path of every call: the code object and defaults are compared first, then each
    global and cell, without building a tuple (a function that reads none checks three
    attributes)."""
    if not now:  # not a Python function: nothing to watch
        return _always
    f = getattr(fun, "__func__", fun)
    code, defaults, kwdefaults = now[:3]
    names, cells = _names(code), f.__closure__ or ()
    values = now[3 : 3 + len(names)]
    contents = now[3 + len(names) :]
    get = f.__globals__.get
    if not names and not cells:
        return lambda: (
            f.__code__ is code and f.__defaults__ is defaults and f.__kwdefaults__ is kwdefaults
        )

    def check() -> bool:
        if (
            f.__code__ is not code
            or f.__defaults__ is not defaults
            or (f.__kwdefaults__ is not kwdefaults)
        ):
            return False
        for name, value in zip(names, values):
            if get(name, _UNBOUND) is not value:
                return False
        for cell, value in zip(cells, contents):
            try:
                if cell.cell_contents is not value:
                    return False
            except ValueError:  # a cell not yet assigned
                if value is not _UNBOUND:
                    return False
        return True

    return check


def _always() -> bool:
    return True


def same_bindings(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return len(a) == len(b) and all(map(operator.is_, a, b))
