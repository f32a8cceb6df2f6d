"""Shared fixtures; CONFIGS is lbs.hanabi.variants.VARIANTS (the one registry of game variants)."""

from __future__ import annotations

import pytest
import torch

from lbs.hanabi.variants import FULL_GAMES, VARIANTS  # noqa: F401  (suites import FULL_GAMES from here)

CONFIGS = VARIANTS  # every suite that loops over game rules uses the package's one registry


def pytest_configure(config) -> None:
    """In CI the HLE conformance tests must run, never skip: fail early if HLE did not install."""
    import importlib.util
    import os

    if os.environ.get("CI") and importlib.util.find_spec("hanabi_learning_environment") is None:
        raise RuntimeError("CI: hanabi-learning-environment is missing, so conformance tests would skip")


@pytest.fixture(scope="module")
def one_thread():
    """Small ops on a shared 2-core machine: one torch thread is several times faster."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
