"""Every ```python snippet of README.md and docs/*.md runs.

A page is read top to bottom: its snippets run in order in one namespace that starts with
`import jax, jax.numpy as jnp, numpy as np, srcgrad as sg` (the README's first lines); a
snippet may use the names of the snippets above it on the same page. A snippet that cannot run
here (it needs a package srcgrad does not depend on, or it shows generated source) says so
in an HTML comment on the line above its fence: `<!-- not run: the reason -->`. Every
snippet compiles in the default run; README.md's run there too, every other page's under
`-m slow` (api.md's and imperative.md's take about ten seconds each).
"""
from __future__ import annotations

import contextlib
import io
import linecache
import pathlib
import re
import shutil

import pytest

import srcgrad as sg

from support.util import sliced

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```python[^\n]*\n(.*?)^```", re.S | re.M)
NOT_RUN = re.compile(r"<!-- not run: (.+?) -->\n$")


def snippets(page: pathlib.Path) -> list[tuple[int, str, str | None]]:
    """(line, code, why it is not run or None) of each python snippet of `page`."""
    text = page.read_text()
    out = []
    for m in FENCE.finditer(text):
        before = text[:m.start()]
        why = NOT_RUN.search(before[-300:])
        out.append((before.count("\n") + 1, m.group(1), why.group(1) if why else None))
    return out


def test_every_fence_is_closed() -> None:
    """An unclosed fence swallows the text after it (and hides snippets from this test)."""
    for page in PAGES:
        fences = [ln for ln in page.read_text().splitlines() if ln.startswith("```")]
        assert len(fences) % 2 == 0, f"{page.name}: an unclosed ``` fence"


def test_every_snippet_compiles() -> None:
    for page in PAGES:
        for line, code, _ in snippets(page):
            compile(code, f"{page.name}:{line}", "exec")


@pytest.mark.parametrize("page", sliced([p for p in PAGES if snippets(p)], 99,
                                        name=lambda p: p.name), ids=lambda p: p.name)
def test_snippets_run(page: pathlib.Path, tmp_path: pathlib.Path,
                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # (snippets that save a file write it here)
    if shutil.which("dot") is None:  # Graphviz is not a dependency: the picture's .dot text
        monkeypatch.setattr(sg, "render", lambda program, path, **kw: sg.to_dot(program))
    ns: dict = {"__name__": f"snippet_{page.stem}"}
    exec("import jax, jax.numpy as jnp, numpy as np, srcgrad as sg", ns)
    for line, code, why in snippets(page):
        if why is not None:
            continue
        name = f"<{page.name}:{line}>"
        # sg.convert reads a function's source, as it reads a file's
        linecache.cache[name] = (len(code), None, code.splitlines(True), name)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(code, name, "exec"), ns)
        except Exception as e:
            pytest.fail(f"{page.name}:{line}: {type(e).__name__}: {e}")
        finally:
            linecache.cache.pop(name, None)
