"""Test configuration: float64 for finite differences, hypothesis profiles, `slow` opt-in."""
from __future__ import annotations

import os

# The suite's time is mostly XLA compiling small programs; without LLVM's expensive passes
# a linalg + manipulation slice ran in 70 s instead of 94 (the optimization level, and so the
# float rounding of fused math, stays as users have it). Set before JAX starts its backend;
# a value from the environment wins.
os.environ.setdefault("XLA_FLAGS", "--xla_llvm_disable_expensive_passes=true")

import jax  # noqa: E402
import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

import srcgrad as sg  # noqa: E402

jax.config.update("jax_enable_x64", True)
# The suite verifies the IR after every transform unless asked not to (SRCGRAD_ENABLE_CHECKS=0).
os.environ.setdefault("SRCGRAD_ENABLE_CHECKS", "1")

settings.register_profile("default", max_examples=7, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("exhaustive", max_examples=300, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(autouse=True)
def _fresh_compile_cache() -> None:
    """Each test starts with an empty compile cache, so that its compilation counts are its own."""
    sg.clear_caches()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `slow` run only when asked for (`-m slow`)."""
    if "slow" in (config.getoption("markexpr") or ""):
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]
