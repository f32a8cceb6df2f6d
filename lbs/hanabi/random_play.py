"""An actor's per-move work with uniformly random legal moves, as one function: what the engine benchmark
times and what torch.compile must turn into one graph (tests/hanabi/test_compile.py)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .config import GameConfig
from .encode import encode
from .engine import legal_moves, random_moves, reset, step
from .env import BatchedHanabi
from .state import HanabiState


def core_step(
    cfg: GameConfig, state: HanabiState, seeds: torch.Tensor, episodes: torch.Tensor, dtype: torch.dtype
):
    """Mask, every player's observation, a random legal move and the step (finished games idle)."""
    legal = legal_moves(cfg, state)  # [B, M]
    obs = encode(cfg, state, dtype=dtype)  # [B, P, D]
    moves = random_moves(cfg, state, seeds, legal)
    state, reward, done = step(cfg, state, moves)
    return state, episodes, obs, legal, reward, done


def actor_step(
    cfg: GameConfig, env: BatchedHanabi, seeds: torch.Tensor, episodes: torch.Tensor, dtype: torch.dtype
):
    """core_step's work through BatchedHanabi itself, whose auto-reset restarts finished games."""
    legal = env.legal_moves()
    obs = env.observe(dtype=dtype)
    out = env.step(random_moves(cfg, env.state, env.seeds, legal))
    return env, env.episodes, obs, legal, out.reward, out.done


def start(cfg: GameConfig, fn: Callable, seeds: torch.Tensor) -> BatchedHanabi | HanabiState:
    """What fn steps: a BatchedHanabi for the actor work, a bare HanabiState otherwise."""
    if fn is actor_step or getattr(fn, "_torchdynamo_orig_callable", None) is actor_step:
        return BatchedHanabi(cfg, seeds.shape[0], seeds=seeds, device=seeds.device)
    return reset(cfg, seeds, torch.zeros_like(seeds))
