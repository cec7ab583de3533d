"""The one registration idiom (srcgrad/base/hooks.py): a hook a lower layer declares and
srcgrad/wiring.py sets; reading one never set names it, and a set hook is called as its
function. After `import srcgrad` every hook of the layers below is set."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import srcgrad
from srcgrad.base.hooks import Hook


def test_a_hook_is_called_as_its_function_and_an_unset_one_names_itself() -> None:
    seen: list[int] = []
    hook: Hook = Hook("tests.HOOK", "a test's hook", on_set=lambda fn: seen.append(1))
    with pytest.raises(RuntimeError, match=r"tests\.HOOK \(a test's hook\) is not set"):
        hook(1)
    assert not hook.is_set
    hook.set(lambda x: x + 1)
    assert hook(1) == 2 and hook.is_set and seen == [1]


def test_wiring_sets_every_hook_srcgrad_declares() -> None:
    """Every module-level `NAME: Hook[...] = Hook(...)` under srcgrad/ is set (or has a
    default) once srcgrad is imported."""
    import importlib

    root = Path(srcgrad.__file__).parent
    declared = []
    for path in root.rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.value, ast.Call)
                and getattr(node.value.func, "id", None) == "Hook"
            ):
                rel = path.relative_to(root.parent).with_suffix("")
                module = ".".join(p for p in rel.parts if p != "__init__")
                declared.append((module, node.target.id))
    assert len(declared) >= 20, declared
    unset = [f"{m}.{n}" for m, n in declared if not getattr(importlib.import_module(m), n).is_set]
    assert not unset, f"hooks nothing sets: {unset}"
