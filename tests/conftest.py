"""Shared test registry: every suite that loops over game rules uses CONFIGS."""

from __future__ import annotations

import pytest
import torch

from lbs.hanabi import GameConfig

# name -> GameConfig. The full games for 2-5 players, then small variants that reach edge cases
# (deck running out, bombing out, token limits) in few steps. Keep names stable: other suites import it.
CONFIGS: dict[str, GameConfig] = {
    "p2": GameConfig(players=2),
    "p3": GameConfig(players=3),
    "p4": GameConfig(players=4),
    "p5": GameConfig(players=5),
    "p2_c2": GameConfig(players=2, colors=2),
    "p2_c1_r3": GameConfig(players=2, colors=1, ranks=3, hand_size=2),
    "p2_h6": GameConfig(players=2, hand_size=6),
    "p3_life1": GameConfig(players=3, max_life_tokens=1),
    "p2_info2": GameConfig(players=2, max_info_tokens=2),
    "p2_nobomb": GameConfig(players=2, bomb_zero=False),
}

FULL_GAMES: dict[str, GameConfig] = {k: CONFIGS[k] for k in ("p2", "p3", "p4", "p5")}


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
