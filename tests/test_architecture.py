"""The layers of docs/design.md: every import goes downward, and no modules import each other.

Each module of srcgrad (and of transforms/, installed as srcgrad.transforms) is read as
source; every import counts, those inside functions and under TYPE_CHECKING included. A
module may import its own layer or lower ones, never a higher one, and the imports must form
no cycle. A lower layer that must reach a higher one does so through a registration (the
eager and tape interpreters register with srcgrad.dispatch; the printer and the verifier
with srcgrad.ir).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"srcgrad": ROOT / "srcgrad", "srcgrad.transforms": ROOT / "transforms"}

#: Layer of each module (docs/design.md, "Layers"); packages by prefix, the rest are L6.
LAYERS: dict[int, tuple[str, ...]] = {
    0: ("srcgrad.errors", "srcgrad.dtypes", "srcgrad.config", "srcgrad.cache",
        "srcgrad.traceback_filter", "srcgrad.hooks"),
    1: ("srcgrad.ir", "srcgrad.printer", "srcgrad.analysis"),
    2: ("srcgrad.registry", "srcgrad.builder", "srcgrad.dispatch", "srcgrad.verify"),
    3: ("srcgrad.ops", "srcgrad.linalg", "srcgrad.habits"),
    4: ("srcgrad.transforms",),
    5: ("srcgrad.eager",),
}


def layer(module: str) -> int:
    for n, names in LAYERS.items():
        if any(module == m or module.startswith(m + ".") for m in names):
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


def _target(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if MODULES[module].name != "__init__.py":
        base = base[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(module: str) -> set[str]:
    """The srcgrad modules `module` imports, anywhere in its source."""
    out = set()
    for node in ast.walk(ast.parse(MODULES[module].read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _target(module, node)
            names = [f"{target}.{a.name}" if f"{target}.{a.name}" in MODULES else target
                     for a in node.names]
        else:
            continue
        for name in names:
            while name not in MODULES and "." in name:
                name = name.rsplit(".", 1)[0]
            if name in MODULES and name != module:
                out.add(name)
    return out


GRAPH = {m: imports(m) for m in MODULES}


def test_every_module_is_read() -> None:
    assert {"srcgrad.ir", "srcgrad.dispatch", "srcgrad.ops.elementwise",
            "srcgrad.transforms.backward", "srcgrad.api"} <= MODULES.keys()
    assert GRAPH["srcgrad.ops.elementwise"], "imports were not found"


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


def test_the_checks_catch_an_upward_import_and_a_cycle() -> None:
    """The machinery on made-up imports: a function-level import from the op layer into
    transforms/ resolves to a higher layer, and two modules importing each other are a cycle."""
    node = ast.parse("def f():\n    from ..transforms import passes").body[0].body[0]
    target = _target("srcgrad.ops.control", node)
    assert f"{target}.passes" in MODULES and layer(target) > layer("srcgrad.ops.control")
    graph = {m: set(ds) for m, ds in GRAPH.items()}
    graph["srcgrad.ir"].add("srcgrad.ops.elementwise")
    assert any("srcgrad.ir" in c and "srcgrad.ops.elementwise" in c for c in cycles(graph))


@pytest.mark.parametrize("module", sorted(MODULES))
def test_the_module_docstring_names_its_layer(module: str) -> None:
    doc = ast.get_docstring(ast.parse(MODULES[module].read_text())) or ""
    assert f"Layer L{layer(module)} (" in doc, f"{module}'s docstring should say 'Layer L{layer(module)}'"
