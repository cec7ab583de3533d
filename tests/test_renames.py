"""Renamed modules keep their old import paths for a while: importing one warns
(DeprecationWarning) and gives the same objects (CHANGELOG.md lists the renames)."""
from __future__ import annotations

import importlib
import sys

import pytest

RENAMED = [("srcgrad.transformations", "srcgrad.derivatives", "jvp"),
           ("srcgrad.ops.linalg", "srcgrad.ops.contraction", "matmul")]


@pytest.mark.parametrize("old,new,name", RENAMED)
def test_the_old_path_warns_and_gives_the_same_objects(old: str, new: str, name: str) -> None:
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=new.replace(".", r"\.")):
        module = importlib.import_module(old)
    assert getattr(module, name) is getattr(importlib.import_module(new), name)


def test_importing_srcgrad_warns_about_nothing() -> None:
    import subprocess
    code = ("import warnings\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n"
            "    import srcgrad\n"
            "print([str(x.message) for x in w if 'is renamed' in str(x.message)])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "[]", (out.stdout, out.stderr)
