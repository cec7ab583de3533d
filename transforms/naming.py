"""IR names → valid, unique, readable Python identifiers (the one place names are made safe).

Layer L4 (transforms): see docs/design.md.
"""

from __future__ import annotations

import builtins
import functools
import keyword
import re

_NOT_IDENT = re.compile(r"[^0-9A-Za-z_]")
_TAG = re.compile(r"@([A-Z]+)")
#: Names an identifier must not take (it gets a trailing `_`): keywords, builtins, the
#: emitted module's globals and block-function parameters.
RESERVED = (
    frozenset(keyword.kwlist)
    | frozenset(dir(builtins))
    | {"jnp", "lax", "jax", "np", "_consts", "partial", "carry", "operands", "captured"}
)


def _lower_tag(m: re.Match) -> str:
    return "_" + m.group(1).lower()


@functools.lru_cache(maxsize=1024)
def _tags(suffix: str) -> str:
    """`@GRAD@RENAME@1` → `_grad_r1` (memoized: gradient names share a few suffixes)."""
    return _TAG.sub(_lower_tag, suffix.replace("@RENAME@", "_r"))


def identifier(name: str, taken: set[str]) -> str:
    """A fresh identifier for the IR name `name`, recorded in `taken`.

    x@GRAD@RENAME@1 becomes x_grad_r1; other characters that are not valid in an identifier
    become `_`. The substitutions run only where they change something (most names are
    already identifiers).
    """
    if (
        name.isidentifier()
        and name not in taken
        and name[0] != "_" != name[-1]
        and name not in RESERVED
        and name.isascii()
    ):
        taken.add(name)  # the common case: already a fresh, clean identifier
        return name
    at = name.find("@")
    if at >= 0:
        name = name[:at] + _tags(name[at:])
    if not (name.isascii() and name.isidentifier()):
        name = _NOT_IDENT.sub("_", name)
    s = name.strip("_") or "v"
    if s[0].isdigit():
        s = "v" + s
    if s in RESERVED:
        s += "_"
    out, k = s, 1
    while out in taken:
        out = f"{s}_{k}"
        k += 1
    taken.add(out)
    return out
