"""Batched Hanabi that matches hanabi-learning-environment exactly."""

from .config import COLOR_CHARS, DISCARD, PLAY, REVEAL_COLOR, REVEAL_RANK, GameConfig, Layout
from .encode import all_observers, current_observer, encode, knowledge_features, own_hands, public_features
from .engine import (
    IllegalMoveError,
    hand_fits,
    initial_state,
    legal_moves,
    random_moves,
    remaining_counts,
    reset,
    set_hand,
    shuffled_decks,
    step,
    unseen_counts,
)
from .env import BatchedHanabi, StepResult
from .state import HanabiState

__all__ = [
    "COLOR_CHARS",
    "DISCARD",
    "PLAY",
    "REVEAL_COLOR",
    "REVEAL_RANK",
    "GameConfig",
    "Layout",
    "all_observers",
    "current_observer",
    "encode",
    "knowledge_features",
    "own_hands",
    "public_features",
    "IllegalMoveError",
    "hand_fits",
    "initial_state",
    "legal_moves",
    "random_moves",
    "remaining_counts",
    "reset",
    "set_hand",
    "shuffled_decks",
    "step",
    "unseen_counts",
    "BatchedHanabi",
    "StepResult",
    "HanabiState",
]
