"""Test configuration: float64 for finite differences, hypothesis profiles, `slow` opt-in."""

from __future__ import annotations

import gc
import importlib.util
import os
import shutil
import sys
import tempfile
from pathlib import Path

# tests/ mirrors srcgrad's packages, one folder each; the shared helpers and corpora are the
# package tests/support (this folder is on sys.path: `from support.util import sliced`), and
# the op tables of tests/ops/ (test_ops.CASES, test_op_grads.CASES, ...) are read by tests of
# other folders, so that folder is on sys.path too.
sys.path.insert(0, str(Path(__file__).resolve().parent / "ops"))

# The suite's time is mostly XLA compiling small programs. Without LLVM's expensive passes
# a linalg + manipulation slice ran in 70 s instead of 94; with XLA's backend at
# optimization level 0 as well, a linalg + op-grads + ops slice ran in 91 s instead of 114.
# Both change how LLVM compiles each kernel, not the programs srcgrad emits and JAX lowers
# (which is what the suite checks); elementwise math can round differently in the last bits
# than at the default level users run, and the suite's tolerances are far wider. Level 0
# was measured on the CPU only, so where a PJRT plugin (a GPU's or a TPU's) is installed
# the suite compiles at the default level. Set before JAX starts its backend; a value from
# the environment wins (benchmarks run at the default).
_LEVEL_0 = "" if importlib.util.find_spec("jax_plugins") else " --xla_backend_optimization_level=0"
os.environ.setdefault("XLA_FLAGS", "--xla_llvm_disable_expensive_passes=true" + _LEVEL_0)
# Each test empties srcgrad's caches, so programs that several tests build (the one-op
# programs of eager calls, the same check on another op) are traced and lowered again; a
# persistent XLA cache, new for this run and shared by the xdist workers (they inherit the
# variable), serves their compiled code (an op-grads + linalg slice: 137 s without, 117 s
# with). A directory from the environment wins and is kept. Long fuzz runs
# (SRCGRAD_FUZZ_EXAMPLES) compile only new programs, so they go without (writing each
# program to disk would only cost them time).
_XLA_CACHE = None
if "JAX_COMPILATION_CACHE_DIR" not in os.environ and not os.environ.get("SRCGRAD_FUZZ_EXAMPLES"):
    _XLA_CACHE = os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="srcgrad-xla-")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")

import jax  # noqa: E402
import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

import srcgrad as sg  # noqa: E402

jax.config.update("jax_enable_x64", True)
# Imperative mode compiles by a cost rule measured with the clock (srcgrad/imperative/
# cost_rule.py); the suite's tests of what shares a compiled backward run under the fixed
# rule instead (a structure compiled whole on its second sighting), so they never depend on
# timing. tests/imperative/test_cost_rule.py tests the cost rule itself, with a clock of
# its own.
sg.config.tape_compile_after = 2
# The suite verifies the IR after every transform unless asked not to (SRCGRAD_ENABLE_CHECKS=0).
os.environ.setdefault("SRCGRAD_ENABLE_CHECKS", "1")

settings.register_profile(
    "default", max_examples=7, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "exhaustive", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(autouse=True)
def _fresh_compile_cache() -> None:
    """Each test starts with an empty compile cache, so that its compilation counts are its own."""
    sg.clear_caches()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Free this process's compiled programs and cycles before it reports that it finished.

    An xdist worker reports `workerfinished` after the sessionfinish hooks; the controller
    then ends it and waits 10 s, and execnet in the worker, still busy 5 s later, sends
    itself SIGINT. After a whole suite the worker's remaining teardown (pytest's final
    `gc.collect()` in unconfigure, over every program, tape and cache the run left) took that
    long, so the KeyboardInterrupt landed in a weakref callback that the collection ran and
    a clean pass ended with a PytestUnraisableExceptionWarning on stderr. Done here, the same
    work runs while the controller waits for the report, with no timeout.
    """
    sg.clear_caches()
    jax.clear_caches()
    gc.collect()


def pytest_unconfigure(config: pytest.Config) -> None:
    """The process that made this run's XLA cache removes it."""
    if _XLA_CACHE is not None:
        shutil.rmtree(_XLA_CACHE, ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `slow` run only when asked for (`-m slow`)."""
    if "slow" in (config.getoption("markexpr") or ""):
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]
