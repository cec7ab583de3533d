"""Every ```python snippet of README.md and docs/*.md runs as a reader runs it.

A page is read top to bottom: its snippets run in order in one fresh namespace, with nothing
put there beforehand (a page imports what it uses, as a reader pasting it into a new
interpreter must); a snippet may use the names of the snippets above it on the same page. A
snippet that cannot run here (it needs a package srcgrad does not depend on, or it shows
generated source) says so in an HTML comment on the line above its fence: `<!-- not run:
the reason -->`. A line `print(...)  # 0.1666` (a comment that starts with a value) states
what the print shows: the numbers of that value must be the ones printed. Every page runs
in the default run (about 12 s for all of them on one core): a page run only under
`-m slow` let a snippet without its import through.
"""

from __future__ import annotations

import builtins
import io
import linecache
import pathlib
import re
import shutil
import sys
from typing import Any

import pytest

import srcgrad as sg

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```python[^\n]*\n(.*?)^```", re.S | re.M)
NOT_RUN = re.compile(r"<!-- not run: (.+?) -->\n$")


def snippets(page: pathlib.Path) -> list[tuple[int, str, str | None]]:
    """(line, code, why it is not run or None) of each python snippet of `page`."""
    text = page.read_text()
    out = []
    for m in FENCE.finditer(text):
        before = text[: m.start()]
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


@pytest.mark.parametrize("page", [p for p in PAGES if snippets(p)], ids=lambda p: p.name)
def test_snippets_run(
    page: pathlib.Path, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # (snippets that save a file write it here)
    if shutil.which("dot") is None:  # Graphviz is not a dependency: the picture's .dot text
        monkeypatch.setattr(sg, "render", lambda program, path, **kw: sg.to_dot(program))
    printed: dict[tuple[str, int], str] = {}
    real_print = builtins.print

    def recording_print(*args: Any, **kwargs: Any) -> None:
        frame = sys._getframe(1)
        out = io.StringIO()
        real_print(*args, **{**kwargs, "file": out})
        printed[(frame.f_code.co_filename, frame.f_lineno)] = out.getvalue()

    monkeypatch.setattr(builtins, "print", recording_print)
    ns: dict = {"__name__": f"snippet_{page.stem}"}
    for line, code, why in snippets(page):
        if why is not None:
            continue
        name = f"<{page.name}:{line}>"
        # sg.convert reads a function's source, as it reads a file's
        linecache.cache[name] = (len(code), None, code.splitlines(True), name)
        try:
            exec(compile(code, name, "exec"), ns)
        except Exception as e:
            pytest.fail(f"{page.name}:{line}: {type(e).__name__}: {e}")
        finally:
            linecache.cache.pop(name, None)
        for i, text in enumerate(code.splitlines(), 1):
            stated = _stated_value(text)
            if stated is not None:
                got = printed.get((name, i))
                assert got is not None, f"{page.name}:{line + i}: this print did not run"
                assert _same_numbers(stated, got), (
                    f"{page.name}:{line + i}: the page says {stated!r}, the print shows {got!r}"
                )


#: `print(...)  # 0.1666 = 1/6`: the comment's value, up to " = ", " ~ ", ": " or ";".
_STATED = re.compile(r"^\s*print\(.*\)\s+#\s*(-?[\d(\[].*?)(?: = | ~ |: |;|$)")
_NUMBER = re.compile(r"-?\d+(?:\.\d*)?(?:e[-+]?\d+)?")


def _stated_value(line: str) -> str | None:
    m = _STATED.match(line)
    return m.group(1).strip() if m else None


def _same_numbers(stated: str, printed: str) -> bool:
    """The numbers of `stated` are the first numbers printed (dtype names aside), each to the
    digits stated."""
    want = _NUMBER.findall(stated)
    got = _NUMBER.findall(re.sub(r"dtype=\w+|float\d+|int\d+", "", printed))
    if not want or len(got) < len(want):
        return False
    for w, g in zip(want, got):
        decimals = len(w.split(".")[1]) if "." in w and "e" not in w else 0
        tol = 1e-6 * abs(float(w)) if "e" in w else 0.5 * 10.0**-decimals
        if abs(float(w) - float(g)) > tol * (1 + 1e-9):
            return False
    return True
