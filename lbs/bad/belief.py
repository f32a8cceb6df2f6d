"""BAD's public belief over every seat's hand (Foerster et al. 2019, sections 3.4-3.5 and 4.4).

One factorised distribution per (seat, slot) over the card identities, [G, P, H, T], from what every player
sees: the public counts C(c) (copies not discarded or on the fireworks: in some hand or in the deck), the
hint masks of every slot, and the likelihood L of every move so far under the partial policy that made it.
After seat a moves, the slots a saw (every other seat's hand: a's private view) are weighed by BAD's eq. 8:
private views are drawn from the current belief, the partial policy is evaluated on each, and L(i, c) is
multiplied by the share of the views holding c in slot i under which it names the move made. Where the
views are few (T^K of them for the K slots a sees, at most `exact_limit`), all are enumerated and weighed by
their factorised probability: the expectation is then exact. The maths (counts, eqs. 12-14, the V1 mix-in,
draws, the ratio, the slot shift after a play) is lbs.belief.factorised, shared with search's sampler.

Everything read from the state is public: counts, hints, hand sizes. The public belief never reads a card.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..belief import factorised
from ..belief.constraints import plausible_cards
from ..hanabi.config import DISCARD, PLAY, GameConfig
from ..hanabi.engine import card_histogram, tables
from ..hanabi.rng import hash_keys
from ..hanabi.state import HanabiState

Chance = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""chance(views [G, S, P-1, H], games [G]) -> [G, S]: whether (or how likely) the partial policy names the
move made on each drawn private view of the acting seat."""


def public_counts(game: GameConfig, state: HanabiState) -> torch.Tensor:
    """[G, T] copies of each card id in some hand or the deck: every copy minus discards and fireworks."""
    tb = tables(game, state.device)
    played = torch.arange(game.ranks, device=state.device)[None, None, :] < state.fireworks[:, :, None]
    return tb.card_counts[None, :] - state.discards - played.reshape(state.batch_size, -1).long()


def seats_after(game: GameConfig, seat: torch.Tensor) -> torch.Tensor:
    """[G, P-1] the seats seat+1, ..., seat+P-1 (the hands `seat` sees, in the observation's order)."""
    offs = torch.arange(1, game.players, device=seat.device)
    return (seat[:, None] + offs) % game.players


class PublicBelief:
    """BAD's public belief in G games, updated after each move by Bayes on the partial policy (module doc)."""

    def __init__(self, game: GameConfig, samples: int, iterations: int, mix: float, exact_limit: int):
        self.game, self.samples, self.iterations, self.mix = game, samples, iterations, mix
        self.exact_limit = exact_limit

    def reset(self, state: HanabiState) -> None:
        g, p, h, t = state.batch_size, self.game.players, self.game.hand_size, self.game.card_types
        self.loglike = torch.zeros(g, p, h, t, dtype=torch.float64, device=state.device)
        """[G, P, H, T] log L(i, c) of every seat's slots"""
        self.observe(state)

    def observe(self, state: HanabiState) -> None:
        """The public counts and hint masks of `state` (after a move, or at the deal)."""
        self.counts = public_counts(self.game, state)
        held = state.hands >= 0  # hand sizes are public
        hints = plausible_cards(self.game, state.color_plausible, state.rank_plausible)
        self.allowed = hints & held[..., None]
        self._cache: dict[str, torch.Tensor] = {}

    def marginals(self, kind: str = "v2") -> torch.Tensor:
        """[G, P, H, T] float64: 'v0' grounded, 'v1' self-consistent over every slot with the counts, 'v2'
        Bayesian (eq. 14) with BAD's V1 mix-in."""
        if kind not in self._cache:
            g, p, h, t = self.loglike.shape
            out = factorised.marginals(kind, self.counts, self.allowed.view(g, p * h, t),
                                       self.loglike.view(g, p * h, t), self.iterations, self.mix,
                                       mix_with="v1")
            self._cache[kind] = out.view(g, p, h, t)
        return self._cache[kind]

    def features(self, observer: torch.Tensor) -> torch.Tensor:
        """[G, P*H*T] float32: the V2 belief of every seat's slots, the observer's own first (its input)."""
        p = self.game.players
        order = (observer[:, None] + torch.arange(p, device=observer.device)) % p
        b = self.marginals("v2")
        return b.gather(1, order[:, :, None, None].expand(-1, -1, *b.shape[2:])).flatten(1).float()

    def views(self, actor: torch.Tensor, keys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The actor's private views drawn from the belief: (views [G, S, P-1, H] long, -1 in empty slots;
        weight [G, S] float64, 0 for a view that uses more copies than the counts allow). Enumerated, with
        their probability as weight, when there are at most `exact_limit`; else `samples` draws keyed by
        keys [G] (a valid draw weighs 1)."""
        g, p, h, t = self.loglike.shape
        seen = seats_after(self.game, actor)  # [G, P-1]
        p_seen = self.marginals("v2").gather(1, seen[:, :, None, None].expand(-1, -1, h, t)).flatten(1, 2)
        held = self.allowed.gather(1, seen[:, :, None, None].expand(-1, -1, h, t)).any(-1).flatten(1)
        k = (p - 1) * h
        if t ** k <= self.exact_limit:
            hands, weight = factorised.enumerate_hands(p_seen, held)
        else:
            hands = factorised.draw(p_seen, held, self.samples, keys)
            weight = torch.ones(hands.shape[:2], dtype=torch.float64, device=hands.device)
        fits = (card_histogram(hands, t) <= self.counts[:, None, :]).all(-1)
        return hands.view(g, -1, p - 1, h), weight * fits

    @torch.no_grad()
    def update(self, before: HanabiState, move: torch.Tensor, after: HanabiState, chance: Chance,
               keys: torch.Tensor) -> None:
        """After one move in every game (games already over are left as they are): weigh the slots the mover
        saw by eq. 8 under `chance`, shift the mover's slots after a play or discard, read the new counts."""
        g, p, h, t = self.loglike.shape
        actor, active = before.cur_player, ~before.done
        views, weight = self.views(actor, keys)
        like = chance(views, torch.arange(g, device=move.device))
        ratio = factorised.likelihood_ratio(views.flatten(2), weight, like, t).view(g, p - 1, h, t)
        seen = seats_after(self.game, actor)[:, :, None, None].expand(-1, -1, h, t)
        ratio = torch.where(active[:, None, None, None], ratio, 1.0)
        loglike = self.loglike.scatter_add(1, seen, ratio.log())
        kind, slot = tables(self.game, move.device).move_info[move.clamp(min=0)].unbind(1)[:2]
        gone = active & ((kind == PLAY) | (kind == DISCARD))
        mover = (torch.arange(p, device=move.device) == actor[:, None]) & gone[:, None]  # [G, P]
        shifted = factorised.drop_slot(loglike.view(g * p, h, t), mover.flatten(), slot.repeat_interleave(p))
        self.loglike = shifted.view(g, p, h, t)
        self.observe(after)


def view_keys(seeds: torch.Tensor, episode: int, step: int) -> torch.Tensor:
    """[G] keys of the belief's draws at one step of one round (hashed: any device, the same draws)."""
    return hash_keys(seeds.long(), 0xBAD0, episode, step)
