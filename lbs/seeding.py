"""Named random streams: every seeded draw in lbs starts from a key that says whose it is.

Games are dealt from hashed (game seed, episode) pairs (lbs.hanabi.engine.reset) and every other draw
(exploration, reshuffles of the undealt cards, belief samples) hashes a game seed too. A game seed packs
(stream, run seed, index) into disjoint bit fields of one int64, so two consumers with different
streams can never draw from the same key, whatever run seeds they are given: the packing is injective
and the stream field differs. Search's common random numbers are then just "the same key".
"""

from __future__ import annotations

from enum import IntEnum

import torch

STREAM_BITS, SEED_BITS, INDEX_BITS = 7, 24, 32
MAX_SEED = (1 << SEED_BITS) - 1
MAX_INDEX = (1 << INDEX_BITS) - 1


class Stream(IntEnum):
    """Who draws. EVAL is 0, so run seed 0's scoring games are seeds 0, 1, 2, ... (stable cards)."""

    EVAL = 0
    """scoring games: lbs.scoring.evaluate, the held-out belief evaluation, search runs"""
    BLUEPRINT_TRAIN = 1
    """blueprint self-play rounds (episode = round)"""
    BLUEPRINT_VAL = 2
    """the blueprint trainer's periodic greedy evaluation (chooses best.pt)"""
    BELIEF_TRAIN = 3
    """the belief data producer's blueprint games (episode = round)"""
    BELIEF_VAL = 4
    """the belief trainer's periodic validation (chooses best.pt)"""
    ENV = 5
    """BatchedHanabi's default per-game seeds"""
    RESHUFFLE = 6
    """engine.set_hand: reshuffling the undealt cards around a sampled hand"""
    SEARCH = 7
    """search: belief samples and rollout decks of one decision"""
    DEMO = 8
    """the demonstrator's games a blueprint run learns from (lbs.rl.demos)"""
    BAD_TRAIN = 9
    """BAD's self-play games (lbs.bad: game index = games played so far)"""
    BAD_VAL = 10
    """BAD's periodic greedy evaluation (chooses best.pt)"""


def pack(stream: Stream, seed: int, index: torch.Tensor | int) -> torch.Tensor:
    """One int64 key per index: stream | run seed | index in disjoint bit fields."""
    if not 0 <= int(seed) <= MAX_SEED:
        raise ValueError(f"seed must be in 0..{MAX_SEED}, got {seed}")
    index = torch.as_tensor(index, dtype=torch.long)
    return (int(Stream(stream)) << (SEED_BITS + INDEX_BITS)) | (int(seed) << INDEX_BITS) | (index & MAX_INDEX)


def game_seeds(stream: Stream, seed: int, n: int, start: int = 0,
               device: torch.device | str = "cpu") -> torch.Tensor:
    """Seeds [n] of games start .. start+n-1 of a run's stream (engine.reset hashes them with an episode)."""
    if start < 0 or start + n - 1 > MAX_INDEX:
        raise ValueError(f"game indices {start}..{start + n - 1} outside 0..{MAX_INDEX}")
    return pack(stream, seed, torch.arange(start, start + n, device=device))


def rank_seed(seed: int, rank: int) -> int:
    """The run seed as process `rank` of a data-parallel run uses it for draws that are not game keys
    (replay sampling): the seed itself on rank 0, so a one-device run keeps its draws, and for rank r > 0
    seed + r * 2**SEED_BITS, which no (seed, rank) pair shares with another. Game keys get distinct
    indices per rank instead (lbs.rl.selfplay: rank r plays games r*N .. r*N + N-1 of its stream)."""
    if not 0 <= int(seed) <= MAX_SEED or rank < 0:
        raise ValueError(f"seed must be in 0..{MAX_SEED} and rank >= 0, got {seed} and {rank}")
    return int(seed) + (int(rank) << SEED_BITS)


def stream_of(keys: torch.Tensor) -> torch.Tensor:
    """The stream field of packed keys (tests use it to prove streams never mix)."""
    return keys >> (SEED_BITS + INDEX_BITS)


def explore_keys(game_seed: torch.Tensor, seat: torch.Tensor, episode: torch.Tensor | int,
                 step: torch.Tensor | int) -> tuple[torch.Tensor, ...]:
    """Hash keys of one exploration draw per (game, seat, episode, step): broadcastable int64 tensors."""
    dev = game_seed.device
    return (game_seed, seat, torch.as_tensor(episode, device=dev).expand_as(game_seed),
            torch.as_tensor(step, device=dev).expand_as(game_seed))
