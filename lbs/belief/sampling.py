"""Sampling own hands from a learned belief with exact, batched validity checks, and the count-based
baseline belief.

A learned belief can propose hands that contradict public facts: a card the hints rule out, or more
copies of a card than the player cannot see. Search must only roll out hands that could be real, so
samples are filtered exactly (LBS paper: reject, and fall back to the blueprint when too few remain).

Shapes: Q queries (games), K candidates, H hand slots, C colours, R ranks, T = C*R card ids.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..hanabi.config import GameConfig
from ..hanabi.engine import card_histogram
from ..hanabi.state import HanabiState
from ..models.belief import BeliefModel, MaskFn
from .constraints import HandConstraints, from_state, plausible_cards


def _check(game: GameConfig, q: int, unseen, color_plausible, rank_plausible, hand_len) -> None:
    h, t = game.hand_size, game.card_types
    want = {
        "unseen_counts": (unseen, (q, t)),
        "color_plausible": (color_plausible, (q, h, game.colors)),
        "rank_plausible": (rank_plausible, (q, h, game.ranks)),
        "hand_len": (hand_len, (q,)),
    }
    for name, (x, shape) in want.items():
        if tuple(x.shape) != shape:
            raise ValueError(f"{name} must have shape {list(shape)}, got {list(x.shape)}")


def valid_hands(
    game: GameConfig,
    candidates: torch.Tensor,
    unseen_counts: torch.Tensor,
    color_plausible: torch.Tensor,
    rank_plausible: torch.Tensor,
    hand_len: torch.Tensor,
    allowed: torch.Tensor | None = None,
) -> torch.Tensor:
    """[Q, K] bool: candidate hands [Q, K, H] that could be the player's.

    Valid iff slots < hand_len hold card ids the hints allow (or, given, the narrower allowed [Q, H, T]),
    later slots are -1, and no card is used more often than the copies the player cannot see.
    """
    if candidates.dim() != 3 or candidates.shape[2] != game.hand_size:
        raise ValueError(f"candidates must be [Q, K, H={game.hand_size}], got {list(candidates.shape)}")
    q, k, h = candidates.shape
    _check(game, q, unseen_counts, color_plausible, rank_plausible, hand_len)
    t = game.card_types
    cards = candidates.long()
    held = torch.arange(h, device=cards.device)[None, :] < hand_len[:, None]  # [Q, H]
    real = (cards >= 0) & (cards < t)
    idx = cards.clamp(0, t - 1)
    if allowed is None:
        allowed = plausible_cards(game, color_plausible, rank_plausible)  # [Q, H, T]
    fits = allowed[:, None].expand(q, k, h, t).gather(3, idx[..., None]).squeeze(3)  # [Q, K, H]
    slot_ok = torch.where(held[:, None], real & fits, cards == -1)
    used = card_histogram(torch.where(real & held[:, None], idx, -1), t)  # [Q, K, T]
    return slot_ok.all(2) & (used <= unseen_counts[:, None, :]).all(2)


def allowed_cards_fn(
    game: GameConfig, cons: HandConstraints, hints: bool = True, counts: bool = True
) -> MaskFn:
    """A BeliefModel.sample mask that forbids, slot by slot, cards the hints rule out (hints) and
    cards whose unseen copies the earlier slots already used up (counts)."""
    plaus = plausible_cards(game, cons.color_plausible, cons.rank_plausible) if hints else None  # [Q, H, T]
    return slot_mask(game, plaus, cons.unseen if counts else None)


def slot_mask(game: GameConfig, allowed: torch.Tensor | None, unseen: torch.Tensor | None) -> MaskFn:
    """A BeliefModel.sample mask: slot s may hold the card ids allowed [Q, H, T] gives it (None: any) of
    which the earlier slots have not used up the unseen [Q, T] copies (None: no count)."""
    t = game.card_types

    def mask(slot: int, hands: torch.Tensor) -> torch.Tensor:
        q, k, _ = hands.shape
        out = torch.ones(q, k, t, dtype=torch.bool, device=hands.device)
        if allowed is not None:
            out = out & allowed[:, None, slot, :]
        if unseen is not None:
            out = out & (card_histogram(hands, t) < unseen[:, None, :])
        return out

    return mask


@dataclass
class BeliefSamples:
    """K sampled hands per query with their validity; nothing here syncs with the host."""

    hands: torch.Tensor  # [Q, K, H] in sampling order
    valid: torch.Tensor  # [Q, K] bool
    num_valid: torch.Tensor  # [Q]
    enough: torch.Tensor  # [Q] bool: num_valid >= min_valid (else: play the blueprint move)

    @property
    def acceptance(self) -> torch.Tensor:
        """[Q] fraction of samples that passed the filter."""
        return self.num_valid.float() / self.valid.shape[1]

    def valid_first(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(hands, valid) reordered so each query's valid hands come first, in sampling order."""
        order = (~self.valid).to(torch.uint8).argsort(dim=1, stable=True)
        hands = self.hands.gather(1, order[..., None].expand_as(self.hands))
        return hands, self.valid.gather(1, order)


def sample_valid(
    model: BeliefModel,
    context: torch.Tensor,
    k: int,
    rng: torch.Tensor | torch.Generator,
    cons: HandConstraints,
    min_valid: int = 1,
    guided: bool = False,
) -> BeliefSamples:
    """Draw k hands per query from the belief and keep track of which are possible.

    guided=True masks hint-inconsistent and exhausted cards during sampling (fewer rejections, but a
    different proposal than the plain learned belief); the exact filter is applied either way.
    """
    game = model.game
    if min_valid < 0:
        raise ValueError(f"min_valid must be >= 0, got {min_valid}")
    if context.dim() != 2 or context.shape[0] != cons.hand_len.shape[0]:
        raise ValueError(
            f"context [Q, E] and the constraints must have the same number of queries, got context "
            f"{list(context.shape)} and hand_len {list(cons.hand_len.shape)}"
        )
    _check(game, context.shape[0], cons.unseen, cons.color_plausible, cons.rank_plausible, cons.hand_len)
    mask = allowed_cards_fn(game, cons) if guided else None
    hands = model.sample(context, k, rng, cons.hand_len, mask_fn=mask)
    valid = valid_hands(game, hands, cons.unseen, cons.color_plausible, cons.rank_plausible, cons.hand_len)
    num = valid.sum(1)
    return BeliefSamples(hands=hands, valid=valid, num_valid=num, enough=num >= min_valid)


def grounded_belief(
    game: GameConfig, state: HanabiState, player: torch.Tensor | int, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """Per-slot card distribution [B, H, T] from public facts alone (the LBS paper's eq. 7 baseline):
    copies the player cannot see x hint plausibility, normalised per slot; zero rows for empty slots.

    Slots are treated independently (it ignores that two slots compete for the same copies).
    """
    cons = from_state(game, state, player)
    plaus = plausible_cards(game, cons.color_plausible, cons.rank_plausible)  # [B, H, T]
    held = torch.arange(game.hand_size, device=state.device)[None, :] < cons.hand_len[:, None]
    w = plaus.to(dtype) * cons.unseen[:, None, :].clamp(min=0).to(dtype) * held[..., None].to(dtype)
    total = w.sum(-1, keepdim=True)
    return w / torch.where(total > 0, total, torch.ones_like(total))
