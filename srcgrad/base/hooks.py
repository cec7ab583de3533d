"""The one way a lower layer reaches a higher one: a `Hook` it declares and the higher layer sets.

A module that needs something only a higher layer can provide (the IR needs the printer, the
dispatch needs the eager and tape interpreters, a `while` row needs its grad maker from
transforms/) declares a hook where it uses it:

    EAGER: Hook[Interpreter] = Hook("srcgrad.core.dispatch.EAGER", "the eager interpreter")
    ...
    EAGER.get()(fn, leaves, tree)

and srcgrad/wiring.py, which sits above every layer, sets each hook once when srcgrad is
imported (`EAGER.set(eager.run)`). A hook that holds a function can be called as that
function (`WHILE_GRAD(op, grads, need)`), so it can stand where the function would (in an
op's registry row). Reading a hook that was never set is an error naming the hook.

Layer L0 (base): see docs/design.md.
"""

from __future__ import annotations

from typing import Any, Callable, Generic, TypeVar

T = TypeVar("T")

#: The value of a hook nothing has set (tests set it back to this).
UNSET: Any = object()


class Hook(Generic[T]):
    """A slot for a value a higher layer provides; `set` once, then `get` (or call it)."""

    __slots__ = ("name", "doc", "value", "_on_set")

    def __init__(
        self, name: str, doc: str, default: T = UNSET, on_set: Callable[[T], None] | None = None
    ) -> None:
        self.name = name
        self.doc = doc
        #: The value (the fast path reads it directly); `UNSET` until set, unless defaulted.
        self.value: T = default
        self._on_set = on_set

    def set(self, value: T) -> T:
        """Provide the value (returns it, so `@HOOK.set` decorates a definition)."""
        self.value = value
        if self._on_set is not None:
            self._on_set(value)
        return value

    @property
    def is_set(self) -> bool:
        return self.value is not UNSET

    def get(self) -> T:
        """The value; an error naming the hook when nothing set it (srcgrad not imported)."""
        value = self.value
        if value is UNSET:
            raise RuntimeError(
                f"{self.name} ({self.doc}) is not set: import srcgrad, whose "
                "srcgrad/wiring.py sets it"
            )
        return value

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.get()(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<hook {self.name}: {self.doc}>"
