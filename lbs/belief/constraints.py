"""What a player knows about their own hand: the facts every hand a sampler proposes must respect.

One function per source: `from_state` (a game state and a player, seeing only what that player sees)
and `from_obs` (the player's own canonical observation, which is all a searcher holds).

Shapes: Q queries (games), H hand slots, C colours, R ranks, T = C*R card ids.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..hanabi.config import GameConfig
from ..hanabi.encode import own_hand_facts
from ..hanabi.engine import tables, unseen_counts
from ..hanabi.state import HanabiState


@dataclass
class HandConstraints:
    """What a player knows publicly about their own hand: the facts a sampled hand must respect."""

    unseen: torch.Tensor  # [Q, T] copies the player cannot see (undealt + own hand)
    color_plausible: torch.Tensor  # [Q, H, C] bool, HLE card knowledge
    rank_plausible: torch.Tensor  # [Q, H, R] bool
    hand_len: torch.Tensor  # [Q] cards held (packed from slot 0)


def _players(state: HanabiState, player: torch.Tensor | int) -> torch.Tensor:
    if isinstance(player, int):
        return torch.full((state.batch_size,), player, dtype=torch.long, device=state.device)
    if player.shape != (state.batch_size,):
        raise ValueError(f"player must be an int or [B={state.batch_size}], got {tuple(player.shape)}")
    return player.long()


def _own(x: torch.Tensor, player: torch.Tensor) -> torch.Tensor:
    """x [B, P, H, ...] -> [B, H, ...] for each game's player."""
    idx = player.view(-1, 1, *([1] * (x.dim() - 2))).expand(-1, 1, *x.shape[2:])
    return x.gather(1, idx).squeeze(1)


def from_state(game: GameConfig, state: HanabiState, player: torch.Tensor | int) -> HandConstraints:
    """The constraints on `player`'s [B] (or int) own hand in each game, from their point of view."""
    player = _players(state, player)
    return HandConstraints(
        unseen=unseen_counts(game, state, player),
        color_plausible=_own(state.color_plausible, player),
        rank_plausible=_own(state.rank_plausible, player),
        hand_len=(_own(state.hands, player) >= 0).sum(1),
    )


def from_obs(game: GameConfig, obs: torch.Tensor) -> HandConstraints:
    """The same facts read from a player's own canonical observation [Q, D] (equal to from_state for
    that player); the hand length is the number of slots with any plausible card."""
    if obs.dim() != 2 or obs.shape[1] != game.obs_dim:
        raise ValueError(f"obs must be [Q, obs_dim={game.obs_dim}], got {tuple(obs.shape)}")
    unseen, plaus = own_hand_facts(game, obs)
    plaus = plaus.reshape(*plaus.shape[:-1], game.colors, game.ranks)
    return HandConstraints(
        unseen=unseen,
        color_plausible=plaus.any(-1),
        rank_plausible=plaus.any(-2),
        hand_len=plaus.flatten(-2).any(-1).sum(-1),
    )


def plausible_cards(
    game: GameConfig, color_plausible: torch.Tensor, rank_plausible: torch.Tensor
) -> torch.Tensor:
    """[..., H, C] x [..., H, R] -> [..., H, T] bool: card ids the hints allow in each slot."""
    tb = tables(game, color_plausible.device)
    return color_plausible[..., tb.card_color] & rank_plausible[..., tb.card_rank]
