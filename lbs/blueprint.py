"""The blueprint contract: what every blueprint is (`Blueprint`: initial_state and step) and what it offers
search beyond that (`Capabilities`), declared once on its type.

A blueprint is a network (lbs.models.qnet, the test doubles) or a rule bot (lbs.bots.smartbot): whatever its
kind, `step(priv, publ, legal, state) -> (scores, state)` and its greedy move is its move. Search reads the
declaration, never probes for attributes; `check` holds each declared capability to its methods once, at
set-up (lbs.search.setup.check_blueprint).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol, runtime_checkable

import torch
from torch import nn

if TYPE_CHECKING:
    from .hanabi.config import GameConfig
    from .hanabi.state import HanabiState


@dataclass(frozen=True)
class Capabilities:
    """What a blueprint offers search beyond initial_state and step (each False unless declared)."""

    value: bool = False
    """its scores are action values (Q), which LBS-K bootstraps a rollout's leaf with; a rule bot's scores
    only mark its move"""
    public_state: bool = False
    """its recurrent state reads public features only (or it has none), so one state serves every candidate
    hand of the searcher: search needs it"""
    public_split: bool = False
    """the networks' split (`PublicSplit`): the public output once per game, then Q from private features per
    candidate hand (SPARTA's filter, lbs.search.range_filter); without it the filter runs the whole step per
    candidate (lbs.search.step_filter)"""
    card_knowledge: bool = False
    """its state is public card knowledge of each seat's own cards (`CardKnowledge`, a rule bot's), which LBS
    can draw its hands within (lbs.search.samplers.LearnedBelief)"""
    reads_hands: bool = False
    """its state update may read partners' cards (`ReadsHands` says where), so SPARTA's range advances that
    state on a hand it holds (lbs.search.step_filter)"""
    seat_view: bool = False
    """it decides from a per-seat view whose seen cards can be swapped (`SeatViews`), so SPARTA's filter
    decides per candidate without encoding it (lbs.search.step_filter's cheap path)"""
    acts_on_state: bool = False
    """it acts from the engine state itself (`ActsOnState`), making the moves its step makes on every seat's
    observation and reading no more than they show: a playout that keeps no observation (a rollout, a
    scored game) skips encoding them (lbs.acting.StatePolicy)"""


class Blueprint(nn.Module):
    """Base of every blueprint type: the networks' step interface and the type's Capabilities."""

    capabilities: ClassVar[Capabilities] = Capabilities()

    @property
    def has_value(self) -> bool:
        """capabilities.value, by the name scripts outside search read."""
        return self.capabilities.value

    @property
    def hidden_is_public(self) -> bool:
        """capabilities.public_state, by the name scripts outside search read."""
        return self.capabilities.public_state

    @property
    def mover(self) -> Blueprint:
        """The module whose greedy moves are this blueprint's (itself; a policy network beside Q: the policy
        alone), for what plays moves and reads no value (acting, scoring, the belief's games)."""
        return self

    def initial_state(self, rows: int, device: torch.device | str | None = None) -> tuple:
        """The state of `rows` rows before any observation (row n * P + p: seat p of game n)."""
        raise NotImplementedError

    def step(self, priv: torch.Tensor, publ: torch.Tensor, legal: torch.Tensor,
             state: tuple) -> tuple[torch.Tensor, tuple]:
        """One step of every row: (scores [R, A], whose greedy legal action is the move; the next state)."""
        raise NotImplementedError

    def moves(self, priv: torch.Tensor, publ: torch.Tensor, legal: torch.Tensor, state: tuple,
              values: bool = True) -> tuple[torch.Tensor, tuple]:
        """A step whose scores are read for their greedy move alone (rollouts): the same move and the same
        next state as `step`, with less work where the blueprint can (a policy network beside Q). values
        False: no value is read after these moves (a rollout to the end), so the part of the state only a
        value reads may be left behind."""
        return self.step(priv, publ, legal, state)


class RuleBot(Blueprint):
    """A blueprint with no weights (a rule bot): its game, and its device held as an empty buffer so that
    .to(device) moves it as it moves a network."""

    def __init__(self, game: GameConfig, device: torch.device | str = "cpu"):
        super().__init__()
        self.game = game
        self.register_buffer("_device", torch.zeros(0), persistent=False)
        self.to(device)

    @property
    def device(self) -> torch.device:
        return self._device.device


@runtime_checkable
class PublicSplit(Protocol):
    """Capabilities.public_split: the public stream, then Q from private features against its output."""

    def public_out(self, publ: torch.Tensor, hid: tuple) -> tuple[torch.Tensor, tuple]: ...

    def q_from_public(self, priv: torch.Tensor, publ_out: torch.Tensor, legal: torch.Tensor
                      ) -> torch.Tensor: ...


@runtime_checkable
class CardKnowledge(Protocol):
    """Capabilities.card_knowledge: which identities each of a seat's own cards may be, by the hints, the
    counts and the conventions its partners play by, followed from that seat's observations."""

    def initial_state(self, rows: int, device: torch.device | str | None = None, seat: int | None = None
                      ) -> tuple: ...

    def observe(self, priv: torch.Tensor, state: tuple) -> tuple: ...

    def own_cards(self, state: tuple) -> torch.Tensor: ...


@runtime_checkable
class ReadsHands(Protocol):
    """Capabilities.reads_hands: reads_hands(obs [R, D] float, state) -> [R] bool, the rows whose state update
    on obs reads cards of partners other than the last mover."""

    def reads_hands(self, priv: torch.Tensor, state: tuple) -> torch.Tensor: ...


@runtime_checkable
class SeatViews(Protocol):
    """Capabilities.seat_view: the mover's view after its state update, and its move with one partner's cards
    replaced by candidate hands."""

    def seat_view(self, priv: torch.Tensor, state: tuple) -> tuple: ...

    def moves_seeing(self, view: tuple, partner: torch.Tensor, hands: torch.Tensor) -> torch.Tensor: ...


@runtime_checkable
class ActsOnState(Protocol):
    """Capabilities.acts_on_state: act(state, hid) -> (the move [N] of each game's seat to move, 0 in finished
    games; every seat's next state), the engine state of N games read as the N * P observations would be."""

    def act(self, state: HanabiState, hid: tuple) -> tuple[torch.Tensor, tuple]: ...


METHODS: dict[str, type] = {"public_split": PublicSplit, "card_knowledge": CardKnowledge,
                            "reads_hands": ReadsHands, "seat_view": SeatViews, "acts_on_state": ActsOnState}
"""The methods each capability brings (the others are properties of the step itself)."""


def check(net: nn.Module) -> Capabilities:
    """net's declared capabilities. ValueError (one line) for a module that is no Blueprint; TypeError (a bug
    in its type) for a capability declared without its methods."""
    if not isinstance(net, Blueprint):
        raise ValueError(f"{type(net).__name__} is no blueprint: it declares no capabilities "
                         "(lbs.blueprint.Blueprint)")
    caps = net.capabilities
    on = dataclasses.asdict(caps)
    for name, methods in METHODS.items():
        if on[name] and not isinstance(net, methods):
            raise TypeError(f"{type(net).__name__} declares {name} without the methods of {methods.__name__}")
    return caps

