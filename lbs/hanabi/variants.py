"""The registry of named game variants every suite and fixture covers.

The full games for 2-5 players, then small variants that reach edge cases (the deck running out,
bombing out, token limits, odd hand sizes) in few steps. Golden fixtures and playthroughs exist for
every name (tests/hanabi/make_fixtures.py regenerates them; a test fails for a name without one).
Keep names stable: fixture files are named after them.
"""

from __future__ import annotations

from .config import GameConfig

VARIANTS: dict[str, GameConfig] = {
    "p2": GameConfig(players=2),
    "p3": GameConfig(players=3),
    "p4": GameConfig(players=4),
    "p5": GameConfig(players=5),
    "p2_c2": GameConfig(players=2, colors=2),
    "p2_c2_r3": GameConfig(players=2, colors=2, ranks=3),
    "p2_c1_r3": GameConfig(players=2, colors=1, ranks=3, hand_size=2),
    "p3_c1_h3": GameConfig(players=3, colors=1, hand_size=3),
    "p2_h6": GameConfig(players=2, hand_size=6),
    "p3_life1": GameConfig(players=3, max_life_tokens=1),
    "p2_info2": GameConfig(players=2, max_info_tokens=2),
    "p4_l1_i2": GameConfig(players=4, max_life_tokens=1, max_info_tokens=2),
    "p2_nobomb": GameConfig(players=2, bomb_zero=False),
}

FULL_GAMES: dict[str, GameConfig] = {k: VARIANTS[k] for k in ("p2", "p3", "p4", "p5")}
