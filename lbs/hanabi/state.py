"""HanabiState: B games as a bundle of batch-first tensors.

Every field has the batch as its first dimension, so cloning, gathering (one game into many
rollouts), merging with a mask and moving between devices are one generic operation each.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import torch


@dataclass
class HanabiState:
    """Shapes: B games, P players, H hand slots, C colours, R ranks, N cards, T = C*R card ids.

    Card ids are colour * R + rank, -1 for an empty slot. `last_*` describe the most recent move
    (HLE's last non-deal history item); last_player is -1 before the first move.
    """

    deck: torch.Tensor  # [B, N] card ids in deal order
    deck_pos: torch.Tensor  # [B] cards dealt so far
    hands: torch.Tensor  # [B, P, H] card ids, packed from slot 0, -1 empty
    color_plausible: torch.Tensor  # [B, P, H, C] bool (HLE card knowledge)
    rank_plausible: torch.Tensor  # [B, P, H, R] bool
    color_hinted: torch.Tensor  # [B, P, H] colour revealed by a positive hint, -1 none
    rank_hinted: torch.Tensor  # [B, P, H] rank revealed by a positive hint, -1 none
    fireworks: torch.Tensor  # [B, C] cards played per colour
    discards: torch.Tensor  # [B, T] discarded (or misplayed) copies per card id
    info_tokens: torch.Tensor  # [B]
    life_tokens: torch.Tensor  # [B]
    cur_player: torch.Tensor  # [B]
    turns_left: torch.Tensor  # [B] HLE's turns_to_play: counts down once the deck is empty
    score: torch.Tensor  # [B] HLE score (0 after bombing out unless bomb_zero is off)
    done: torch.Tensor  # [B] bool
    num_steps: torch.Tensor  # [B] moves made this game
    last_player: torch.Tensor  # [B] absolute player of the last move, -1 none
    last_move: torch.Tensor  # [B] its move id, -1 none
    last_card: torch.Tensor  # [B] card played/discarded by it, -1 otherwise
    last_reveal: torch.Tensor  # [B, H] bool: cards that matched its hint
    last_scored: torch.Tensor  # [B] bool: a successful play
    last_info_gain: torch.Tensor  # [B] bool: a completed firework gave back a hint token

    # ---- generic batch operations --------------------------------------------------------------
    def map(self, fn) -> HanabiState:
        return HanabiState(**{f.name: fn(getattr(self, f.name)) for f in fields(self)})

    @property
    def batch_size(self) -> int:
        return self.deck.shape[0]

    @property
    def device(self) -> torch.device:
        return self.deck.device

    def clone(self) -> HanabiState:
        return self.map(torch.clone)

    def to(self, device: torch.device | str) -> HanabiState:
        return self.map(lambda t: t.to(device))

    def index(self, idx: torch.Tensor) -> HanabiState:
        """Gather games: idx [K] of game indices (repeats allowed) -> K games."""
        return self.map(lambda t: t.index_select(0, idx))

    def replicate(self, n: int) -> HanabiState:
        """Each game repeated n times, consecutively: game b becomes rows b*n .. b*n+n-1."""
        return self.map(lambda t: t.repeat_interleave(n, dim=0))

    def where(self, mask: torch.Tensor, other: HanabiState) -> HanabiState:
        """Per game: self where mask [B] is true, else other."""

        def pick(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            m = mask.view(-1, *([1] * (a.dim() - 1)))
            return torch.where(m, a, b)

        return HanabiState(
            **{f.name: pick(getattr(self, f.name), getattr(other, f.name)) for f in fields(self)}
        )

    @staticmethod
    def cat(states: list[HanabiState]) -> HanabiState:
        return HanabiState(
            **{f.name: torch.cat([getattr(s, f.name) for s in states]) for f in fields(HanabiState)}
        )

    def replace(self, **changes) -> HanabiState:
        return replace(self, **changes)

    def equal(self, other: HanabiState) -> bool:
        return all(torch.equal(getattr(self, f.name), getattr(other, f.name)) for f in fields(self))
