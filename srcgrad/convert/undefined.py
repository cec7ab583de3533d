"""Values for names a converted statement leaves unbound: using one raises a clear error.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

from typing import Any, NoReturn

from ..base.errors import SrcgradError, user_location


class Undefined:
    """A name with no value here (`why` says why); any use raises a SrcgradError."""

    __slots__ = ("name", "why")

    def __init__(self, name: str, why: str | None = None):
        self.name = name
        self.why = why

    def fail(self, *args: Any, **kwargs: Any) -> NoReturn:
        why = self.why or "is used before it is assigned"
        raise SrcgradError(f"`{self.name}` {why}", loc=user_location())

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        self.fail()

    def __repr__(self) -> str:
        return f"<undefined {self.name}>"

    __hash__ = object.__hash__
    __array__ = __bool__ = __len__ = __iter__ = __getitem__ = __call__ = __float__ = __int__ = fail
    __index__ = __neg__ = __pos__ = __abs__ = __invert__ = fail
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = fail
    __pow__ = __rpow__ = __matmul__ = __rmatmul__ = __floordiv__ = __rfloordiv__ = fail
    __mod__ = __rmod__ = __lt__ = __le__ = __gt__ = __ge__ = __and__ = __or__ = __xor__ = fail


class _NoReturn(Undefined):
    """The value of a lowered `return` before one ran: the function returns None."""


UNDEF_RET = _NoReturn("the return value")


def undefined(v: Any) -> bool:
    return isinstance(v, Undefined)
