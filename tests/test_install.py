"""`pip install .` ships `transforms/` as `srcgrad.transforms`, and no top-level `transforms`.

The package is built from a copy of the repository and installed, without network, into a
fresh virtual environment that sees the running environment's packages (jax, pip and the
build backend: the `test` extra brings setuptools and wheel).
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
_IGNORE = shutil.ignore_patterns(
    ".git", "__pycache__", "*.egg-info", "build", "dist", ".venv*", ".pytest_cache", ".hypothesis"
)

_PURELIB = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
_PROBE = """
import importlib.util, json, sysconfig
import numpy as np
import srcgrad, srcgrad.transforms
import srcgrad as sg
spec = importlib.util.find_spec("transforms")
print(json.dumps({
    "site": sysconfig.get_paths()["purelib"],
    "srcgrad": srcgrad.__file__,
    "transforms": srcgrad.transforms.__file__,
    "top_level_transforms": spec.origin if spec is not None else None,
    "grad": sg.grad(lambda x: sg.sum(x * x))(np.arange(3.0)).tolist(),
}))
"""


def _venv(path: Path) -> Path:
    """A fresh venv whose interpreter sees this environment's packages; returns its python."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(path)],
        check=True,
    )
    python = path / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    if sys.prefix != sys.base_prefix:  # running in a venv: --system-site-packages skips it
        purelib = subprocess.run(
            [str(python), "-c", _PURELIB], check=True, capture_output=True, text=True
        ).stdout.strip()
        Path(purelib, "_parent_env.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return python


def test_pip_install_puts_transforms_inside_srcgrad(tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(REPO, src, ignore=_IGNORE)
    python = _venv(tmp_path / "venv")
    install = subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--ignore-installed",
            "--disable-pip-version-check",
            "-q",
            ".",
        ],
        cwd=src,
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    probe = subprocess.run(
        [str(python), "-c", _PROBE],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ""},
    )
    assert probe.returncode == 0, probe.stdout + probe.stderr
    found = json.loads(probe.stdout.strip().splitlines()[-1])
    site_dir = Path(found["site"]).resolve()
    assert site_dir.is_relative_to(tmp_path.resolve() / "venv")
    assert Path(found["srcgrad"]).resolve().is_relative_to(site_dir)
    assert Path(found["transforms"]).resolve() == site_dir / "srcgrad/transforms/__init__.py"
    assert not (site_dir / "transforms").exists() and not (site_dir / "transforms.py").exists()
    top = found["top_level_transforms"]
    assert top is None or not Path(top).resolve().is_relative_to(site_dir), top
    record = next(site_dir.glob("srcgrad-*.dist-info")) / "RECORD"
    files = {line.split(",")[0] for line in record.read_text().splitlines()}
    shipped = {f.split("/")[0] for f in files}
    assert {p for p in shipped if not p.startswith("srcgrad")} == set(), shipped
    packages = {
        f"srcgrad/{p.parent.name}/__init__.py" for p in (REPO / "srcgrad").glob("*/__init__.py")
    }
    assert packages <= files, f"subpackages left out of the wheel: {sorted(packages - files)}"
    assert found["grad"] == [0.0, 2.0, 4.0]
    _check_metadata(record.parent, files)
    tour = subprocess.run(
        [str(python), "-m", "srcgrad"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ""},
    )
    assert tour.returncode == 0, tour.stdout + tour.stderr
    assert tour.stdout.startswith("srcgrad 0.1.0, Python ") and "jax " in tour.stdout
    assert "0.16666666" in tour.stdout  # the tour's gradient through Newton's loop


def _check_metadata(dist_info: Path, files: set[str]) -> None:
    """The wheel ships the license text and `py.typed`, and says what PyPI shows."""
    assert "srcgrad/py.typed" in files
    license_file = dist_info / "licenses" / "LICENSE"
    assert license_file.exists() and "Apache License" in license_file.read_text()
    meta = (dist_info / "METADATA").read_text()
    head = meta.split("\n\n", 1)[0].splitlines()
    assert "License-Expression: Apache-2.0" in head, head
    assert "Classifier: Typing :: Typed" in head and "Requires-Python: >=3.10" in head
    assert "Description-Content-Type: text/markdown" in head
    assert "pip install srcgrad" in meta  # the long description starts with PyPI's install
