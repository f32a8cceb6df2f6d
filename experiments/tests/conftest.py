"""The tests of the experiments package's scripts (tests/ tests the package and its entry points, and never
imports experiments)."""

from __future__ import annotations

import os

import pytest
import torch

from lbs.bots.smartbot import EAGER_VARIABLE

os.environ[EAGER_VARIABLE] = "1"  # as in tests/: SmartBot's step runs eagerly, subprocesses included


@pytest.fixture(scope="module")
def one_thread():
    """Small ops on a shared 2-core machine: one torch thread is several times faster."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
