"""IR names → valid, unique, readable Python identifiers (the one place names are made safe)."""
from __future__ import annotations

import builtins
import keyword
import re

_NOT_IDENT = re.compile(r"[^0-9A-Za-z_]")
_TAG = re.compile(r"@([A-Z]+)")
RESERVED = frozenset(dir(builtins)) | {"jnp", "lax", "jax", "np", "_consts", "carry", "operands"}


def identifier(name: str, taken: set[str]) -> str:
    """A fresh identifier for the IR name `name`, recorded in `taken`."""
    s = _TAG.sub(lambda m: "_" + m.group(1).lower(), name.replace("@RENAME@", "_r"))
    s = _NOT_IDENT.sub("_", s).strip("_") or "v"
    if s[0].isdigit():
        s = "v" + s
    if keyword.iskeyword(s) or s in RESERVED:
        s += "_"
    out, k = s, 1
    while out in taken:
        out = f"{s}_{k}"
        k += 1
    taken.add(out)
    return out
