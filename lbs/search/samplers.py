"""Hand samplers: where the searcher's candidate hands come from.

A sampler follows the real games (reset, then update after every move) and, at the searcher's turn,
draws k hands per game. It may use only what the searcher observes: its own canonical observation
(the learned belief) or the public state and other hands (the exact range). `TrueHand` is the
exception on purpose: a test double that returns the real hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from ..belief import constraints
from ..belief.sampling import valid_hands
from ..blueprint import CardKnowledge
from ..hanabi.config import GameConfig
from ..hanabi.encode import encode
from ..hanabi.state import HanabiState
from ..infer import BELIEF, InferenceServer, ServerConfig


def serve(net, belief=None, device: torch.device | str = "cpu", coalesce: bool = False) -> InferenceServer:
    """The one server search calls: the blueprint as QNET and, for LBS, the belief as BELIEF.
    coalesce: run the worker that merges concurrent callers (search's `groups`); off, calls run inline."""
    server = InferenceServer(net, device=device, cfg=ServerConfig(coalesce=coalesce))
    if belief is not None:
        server.register(BELIEF, belief)
    return server


@dataclass
class SampledHands:
    """k candidate hands per game; rows that are not valid must not be rolled out."""

    hands: torch.Tensor  # [G, k, H] card ids, -1 in empty slots
    valid: torch.Tensor  # [G, k] bool


def first_accepted(ok: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(index [G, k] of the first k accepted draws of each game in draw order, clamped into range; found
    [G, k]: whether that many were accepted) from ok [G, m] (samplers that draw m >= k and reject some)."""
    m = ok.shape[1]
    first = torch.where(ok, torch.arange(m, device=ok.device), m).sort(1).values[:, :k]
    return first.clamp(max=m - 1), first < m


class HandSampler(Protocol):
    """What the search needs from a source of candidate hands (G games in lockstep)."""

    def reset(self, state: HanabiState) -> None:
        """Start following G new games (their first state)."""

    def update(self, before: HanabiState, move: torch.Tensor, after: HanabiState) -> None:
        """After one real move in every game (move [G]; finished games are ignored)."""

    def sample(self, k: int, keys: torch.Tensor, games: torch.Tensor) -> SampledHands:
        """k hands for each of the games [G'] (indices into the G followed games), drawn with hashed
        counters keyed by keys [G'] (the same keys give the same hands on any device)."""


class LearnedBelief:
    """Samples from the learned belief. Its encoder state is advanced on every turn of the real game
    (one encoder step per move, nothing re-reads the history); samples pass the exact validity filter
    built from the searcher's own observation, so the filter never sees the true hand.

    With `knowledge` (a rule bot's public card knowledge, SmartBot's: SearchConfig.knowledge), the sampler
    also follows the searcher's seat's copy of it, read from the same observations, and draws every slot
    within the identities that knowledge allows and the unseen copies left (where it allows none the hints
    allow, the hints alone): SmartBot's conventions, which the belief learns only in part, hold in every
    sample.
    """

    def __init__(self, game: GameConfig, server: InferenceServer, seat: int,
                 knowledge: CardKnowledge | None = None):
        self.game, self.server, self.seat, self.knowledge = game, server, seat, knowledge
        self.context: torch.Tensor | None = None  # [G, E] after the latest observation
        self.obs: torch.Tensor | None = None  # [G, D] the searcher's latest observation
        self.known: tuple | None = None  # the knowledge's state for the searcher's seat

    def _observe(self, state: HanabiState) -> None:
        seat = torch.full((state.batch_size, 1), self.seat, device=state.device)
        self.obs = encode(self.game, state, observers=seat)[:, 0]  # [G, D]
        context, self.hid = self.server.belief().encode(self.obs[:, None], self.hid)
        self.context = context[:, 0]
        if self.knowledge is not None:
            self.known = self.knowledge.observe(self.obs, self.known)

    def reset(self, state: HanabiState) -> None:
        self.hid = self.server.belief().initial_state(state.batch_size)
        if self.knowledge is not None:
            self.known = self.knowledge.initial_state(state.batch_size, state.device, seat=self.seat)
        self._observe(state)

    def update(self, before: HanabiState, move: torch.Tensor, after: HanabiState) -> None:
        self._observe(after)

    def sample(self, k: int, keys: torch.Tensor, games: torch.Tensor) -> SampledHands:
        obs, context = self.obs.index_select(0, games), self.context.index_select(0, games)
        cons = constraints.from_obs(self.game, obs)
        belief, allowed = self.server.belief(), None
        if self.knowledge is None:
            hands = belief.sample(context, keys, cons.hand_len, k=k)
        else:
            hints = constraints.plausible_cards(self.game, cons.color_plausible, cons.rank_plausible)
            allowed = hints & self.knowledge.own_cards(self.known).index_select(0, games)  # [G', H, T]
            allowed = torch.where(allowed.any(-1, keepdim=True), allowed, hints)
            hands = belief.sample(context, keys, cons.hand_len, k=k, allowed=allowed, unseen=cons.unseen)
        # a draw whose earlier slots used the copies a later slot needed left the knowledge there: rejected
        valid = valid_hands(self.game, hands, cons.unseen, cons.color_plausible, cons.rank_plausible,
                            cons.hand_len, allowed)
        return SampledHands(hands, valid)


class TrueHand:
    """Test double: every sample is the searcher's real hand (it peeks by design)."""

    def __init__(self, game: GameConfig, seat: int):
        self.game, self.seat = game, seat
        self.state: HanabiState | None = None

    def reset(self, state: HanabiState) -> None:
        self.state = state

    def update(self, before: HanabiState, move: torch.Tensor, after: HanabiState) -> None:
        self.state = after

    def sample(self, k: int, keys: torch.Tensor, games: torch.Tensor) -> SampledHands:
        hand = self.state.hands[:, self.seat].index_select(0, games)  # [G', H]
        hands = hand[:, None, :].expand(-1, k, -1).clone()
        return SampledHands(hands, torch.ones(hands.shape[:2], dtype=torch.bool, device=hands.device))


class NoValidHand:
    """Test double: a sampler whose every sample is rejected (the search must play the blueprint)."""

    def __init__(self, game: GameConfig):
        self.game = game

    def reset(self, state: HanabiState) -> None:
        self.device = state.device

    def update(self, before: HanabiState, move: torch.Tensor, after: HanabiState) -> None:
        pass

    def sample(self, k: int, keys: torch.Tensor, games: torch.Tensor) -> SampledHands:
        g = games.shape[0]
        hands = torch.full((g, k, self.game.hand_size), -1, dtype=torch.long, device=self.device)
        return SampledHands(hands, torch.zeros(g, k, dtype=torch.bool, device=self.device))
