"""BatchedHanabi: B games in lockstep with per-game seeds and automatic reset.

A thin stateful wrapper over the pure functions in engine.py for actors and evaluation; search
works on HanabiState directly.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..seeding import Stream, game_seeds
from . import engine
from .config import GameConfig
from .encode import encode
from .state import HanabiState


@dataclass
class StepResult:
    reward: torch.Tensor  # [B] score change of this move
    done: torch.Tensor  # [B] the game ended with this move (it has been reset if auto_reset)
    score: torch.Tensor  # [B] score of the game this move was made in (final score where done)
    length: torch.Tensor  # [B] moves made in that game so far


class BatchedHanabi:
    """B games on one device. Game b's e-th episode deals from hash(seeds[b], e)."""

    def __init__(
        self,
        cfg: GameConfig,
        batch_size: int,
        seed: int = 0,
        device: torch.device | str = "cpu",
        auto_reset: bool = True,
        checked: bool = False,
        seeds: torch.Tensor | None = None,
    ):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.cfg, self.device = cfg, torch.device(device)
        self.auto_reset, self.checked = auto_reset, checked
        if seeds is None:
            seeds = game_seeds(Stream.ENV, seed, batch_size)
        if seeds.shape != (batch_size,):
            raise ValueError(f"seeds must have shape [{batch_size}], got {tuple(seeds.shape)}")
        self.seeds = seeds.long().to(self.device)
        self.episodes = torch.zeros_like(self.seeds)
        self.state = engine.reset(cfg, self.seeds, self.episodes)
        self._refresh_next()

    def _refresh_next(self) -> None:
        """Deal every game's next episode ahead of time. A game lasts at least cfg.min_steps moves, so
        refreshing that often means no game can finish twice on one precomputed deal."""
        self._next = engine.reset(self.cfg, self.seeds, self.episodes + 1)
        self._next_age = 0

    @property
    def batch_size(self) -> int:
        return self.seeds.shape[0]

    def reset(self, decks: torch.Tensor | None = None) -> HanabiState:
        """Start every game again: from explicit deck orders [B, N], or the next seeded decks."""
        if decks is not None:
            engine.check_decks(self.cfg, decks)
            self.state = engine.initial_state(self.cfg, decks.to(self.device))
        else:
            self.episodes = self.episodes + 1
            self.state = engine.reset(self.cfg, self.seeds, self.episodes)
        self._refresh_next()
        return self.state

    def legal_moves(self) -> torch.Tensor:
        return engine.legal_moves(self.cfg, self.state)

    def observe(self, **kw) -> torch.Tensor:
        """Canonical observations [B, P, D] for every player (see encode.encode)."""
        return encode(self.cfg, self.state, **kw)

    def step(self, moves: torch.Tensor) -> StepResult:
        new, reward, done = engine.step(self.cfg, self.state, moves, checked=self.checked)
        result = StepResult(reward=reward, done=done, score=new.score, length=new.num_steps)
        if self.auto_reset:
            if self._next_age >= self.cfg.min_steps:
                self._refresh_next()
            self.episodes = self.episodes + done.long()
            new = self._next.where(done, new)
            self._next_age += 1
        self.state = new
        return result
