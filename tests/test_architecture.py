"""The architecture of docs/design.md: folders are layers, every import goes downward, no two
modules import each other, and no module reads another module's underscore names.

Each module of srcgrad (and of transforms/, installed as srcgrad.transforms) is read as
source; every import counts, those inside functions and under TYPE_CHECKING included. A
module's layer is its folder's (`FOLDERS`; the front-end packages and the facades at the top
of srcgrad/ are L6): the map exists once, here and in the tree. A module may import its own
layer or lower ones, never a higher one; a lower layer that must reach a higher one declares
a `Hook` (srcgrad/base/hooks.py) that srcgrad/wiring.py sets.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"srcgrad": ROOT / "srcgrad", "srcgrad.transforms": ROOT / "transforms"}

#: The layer of each folder (docs/design.md, "Layers"); every other module is L6.
FOLDERS: dict[str, int] = {
    "srcgrad.base": 0,
    "srcgrad.ir": 1,
    "srcgrad.core": 2,
    "srcgrad.ops": 3,
    "srcgrad.transforms": 4,
    "srcgrad.compiled": 5,
}

#: Underscore names a module may read from another, and why (keep this short).
PRIVATE_READS: dict[tuple[str, str], str] = {}


def layer(module: str) -> int:
    for folder, n in FOLDERS.items():
        if module == folder or module.startswith(folder + "."):
            return n
    return 6


def modules() -> dict[str, Path]:
    found = {}
    for pkg, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            rel = path.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            found[".".join([pkg, *parts])] = path
    return found


MODULES = modules()
TREES = {m: ast.parse(p.read_text()) for m, p in MODULES.items()}


def _target(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if MODULES[module].name != "__init__.py":
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _owner(name: str) -> str | None:
    """The srcgrad module `name` (a module, or a name in one) belongs to."""
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name if name in MODULES else None


def imports(module: str, tree: ast.AST | None = None) -> set[str]:
    """The srcgrad modules `module` imports, anywhere in its source."""
    out = set()
    for node in ast.walk(TREES[module] if tree is None else tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _target(module, node)
            names = [
                f"{target}.{a.name}" if f"{target}.{a.name}" in MODULES else target
                for a in node.names
            ]
        else:
            continue
        for name in names:
            owner = _owner(name)
            if owner is not None and owner != module:
                out.add(owner)
    return out


def private_reads(module: str, tree: ast.AST | None = None) -> set[tuple[str, str]]:
    """(module, name) for each underscore name `module` takes from another srcgrad module:
    imported by name (`from .x import _y`) or read through a module (`x._y`)."""
    tree = TREES[module] if tree is None else tree
    out, aliases = set(), {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            target = _target(module, node)
            for a in node.names:
                full = f"{target}.{a.name}"
                if full in MODULES:
                    aliases[a.asname or a.name] = full
                elif target in MODULES and target != module and _private(a.name):
                    out.add((target, a.name))
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name in MODULES and a.asname:
                    aliases[a.asname] = a.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and _private(node.attr)
            and aliases[node.value.id] != module
        ):
            out.add((aliases[node.value.id], node.attr))
    return out


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


GRAPH = {m: imports(m) for m in MODULES}


def test_every_module_is_read() -> None:
    assert {
        "srcgrad.ir.program",
        "srcgrad.core.dispatch",
        "srcgrad.ops.elementwise",
        "srcgrad.transforms.backward",
        "srcgrad.api.functional",
    } <= MODULES.keys()
    assert GRAPH["srcgrad.ops.elementwise"], "imports were not found"


def test_every_folder_is_a_layer_or_a_front_end() -> None:
    """A new folder under srcgrad/ must be given a layer here (or be a front end, L6)."""
    front_ends = {
        "api",
        "imperative",
        "from_jax",
        "convert",
        "tools",
        "scipy",
        "autograd",
        "optim",
        "nn",
        "distributions",
        "sparse",
    }
    folders = {
        p.name for p in PACKAGES["srcgrad"].iterdir() if p.is_dir() and (p / "__init__.py").exists()
    }
    assert folders == {f.split(".")[1] for f in FOLDERS if f != "srcgrad.transforms"} | front_ends


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_go_downward(module: str) -> None:
    up = sorted(f"{d} (L{layer(d)})" for d in GRAPH[module] if layer(d) > layer(module))
    assert not up, f"{module} (L{layer(module)}) imports a higher layer: {up}"


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle() -> None:
    assert not cycles(GRAPH), f"modules import each other: {cycles(GRAPH)}"


def test_no_module_reads_another_modules_underscore_names() -> None:
    found = {(m, f"{t}.{n}") for m in MODULES for t, n in private_reads(m)}
    unlisted = sorted(found - PRIVATE_READS.keys())
    assert not unlisted, (
        "make these names public where they are shared, or list them in "
        f"PRIVATE_READS with the reason: {unlisted}"
    )
    stale = sorted(PRIVATE_READS.keys() - found)
    assert not stale, f"PRIVATE_READS lists reads that no longer happen: {stale}"


def test_the_checks_catch_an_upward_import_a_cycle_and_a_private_read() -> None:
    """The machinery on made-up code: a function-level import from the op layer into
    transforms/ resolves to a higher layer, two modules importing each other are a cycle, and
    both ways of reading an underscore name are found."""
    node = ast.parse("def f():\n    from ..transforms import passes").body[0].body[0]
    target = _target("srcgrad.ops.control", node)
    assert f"{target}.passes" in MODULES and layer(target) > layer("srcgrad.ops.control")
    graph = {m: set(ds) for m, ds in GRAPH.items()}
    graph["srcgrad.ir.program"].add("srcgrad.ops.elementwise")
    assert any("srcgrad.ir.program" in c and "srcgrad.ops.elementwise" in c for c in cycles(graph))
    code = ast.parse("from .shape import _rule\nfrom . import reduce\nreduce._helper(1)")
    assert private_reads("srcgrad.ops.elementwise", code) == {
        ("srcgrad.ops.shape", "_rule"),
        ("srcgrad.ops.reduce", "_helper"),
    }


@pytest.mark.parametrize("module", sorted(MODULES))
def test_the_module_docstring_names_its_layer(module: str) -> None:
    doc = ast.get_docstring(TREES[module]) or ""
    assert f"Layer L{layer(module)} (" in doc, (
        f"{module}'s docstring should say 'Layer L{layer(module)}'"
    )
