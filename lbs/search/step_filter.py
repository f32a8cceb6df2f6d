"""SPARTA's counterfactual filter through the blueprint's own step, for any blueprint with a public state.

A blueprint without the networks' split (public output, then private layers: range_filter's paths), such
as SmartBot, is asked the question directly: for each candidate hand of the searcher, the real state
before the partner's move gets the candidate in the searcher's seat, the real encoder (acting.seat_q)
builds every seat's observation of it (the partner sees the searcher's hand), and the blueprint's step
runs on them with the seats' shared state; the candidate stays if the partner's move is the one it made.
Candidates run in chunks of whole games' rows (the step decides per lockstep group of P rows) sized by a
memory cap; no loop over candidates, no host sync inside a chunk, the same code on CPU and CUDA.

The shared state is each seat's blueprint state, advanced by the range on every real move. With a public
state (Capabilities.public_state) it is built from public events, with one exception this module knows of:
SmartBot's discard-finesse read, where a seat that sees a known playable card discarded marks the partner
holding that card as their newest card, so its state reads the partners' cards (the searcher's among them).
The blueprint declares it (Capabilities.reads_hands; its `reads_hands` says where); the range then advances
the shared state on a hand from the filtered range (every hand left in it makes the same read: the
discarding partner's own rule, itself filtered, fixed whether the searcher's newest card is the one
discarded).

A blueprint whose decision reads the seen cards only after its state update (SmartBot:
Capabilities.seat_view, its `seat_view` and `moves_seeing`) gets the cheap path: the mover's view is built
once per game from the shared state the range advanced, and each candidate costs only the decision with its
cards shown, no observation encoded and no state update per candidate. Every hand left in the range gives
the mover that shared state (the paragraph above), so both paths keep the same rows;
tests/search/test_smartbot_search.py checks it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..acting import seat_q
from ..hanabi.config import GameConfig
from ..hanabi.encode import encode
from ..hanabi.state import HanabiState
from ..infer import QNetHandle
from ..models.qnet import select_rows, state_batch_dim
from .range_filter import move_is_greedy

CPU_BYTES, GPU_BYTES = 64 << 20, 2 << 30
"""Default memory cap of one chunk of candidates (their observations, legal masks and the step's work),
per device: on a CPU larger chunks gain nothing (8,192 candidates filter 1.08x faster than 2,048)."""
BYTES_PER_FEATURE = 24
"""Bytes per observation feature per row held at once: the encoder's bool buffer, the uint8 and float
observations and the step's work (a generous estimate, so a chunk stays under its cap)."""


def take(tree: tuple, rows: torch.Tensor) -> tuple:
    """The same (nested) named tensors at rows (batch first)."""
    return type(tree)(*(take(x, rows) if isinstance(x, tuple) else x.index_select(0, rows) for x in tree))


def where_rows(rows: torch.Tensor, new: tuple, old: tuple) -> tuple:
    """The recurrent state `new` on rows [R] bool, `old` elsewhere (any state type, by its batch_dim)."""
    d = state_batch_dim(new)

    def pick(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        shape = [1] * a.dim()
        shape[d] = -1
        return torch.where(rows.view(shape), a, b)

    return type(new)(*(pick(a, b) for a, b in zip(new, old, strict=True)))


@dataclass
class StepView:
    """One partner move in G games, as every candidate shares it."""

    state: HanabiState  # [G] the real state before the move, the searcher's cards hidden
    hid: tuple  # the seats' shared state before reading it, rows g * P + p
    mover: torch.Tensor  # [G] long
    move: torch.Tensor  # [G] long: the move the partner made
    seat: tuple | None = None  # [G] the mover's seat_view (the cheap path), else None


class StepPolicy:
    """The partner's move under candidate hands of the searcher through the blueprint's step."""

    def __init__(self, game: GameConfig, net: QNetHandle, seat: int, max_bytes: int | None = None):
        self.game, self.net, self.seat, self.max_bytes = game, net, seat, max_bytes
        caps = net.capabilities
        self.reads = caps.reads_hands
        """whether the blueprint's state update may read the searcher's cards (see the module doc)"""
        self.cheap = caps.seat_view
        """whether candidates take the cheap path (the mover's view shared, see the module doc)"""

    def chunk(self, device: torch.device) -> int:
        """Candidates per step call (each is P rows of the step) under the memory cap."""
        cap = self.max_bytes or (CPU_BYTES if device.type == "cpu" else GPU_BYTES)
        return max(1, cap // (self.game.players * self.game.obs_dim * BYTES_PER_FEATURE))

    def view(self, state: HanabiState, hid: tuple, new: tuple, mover: torch.Tensor, move: torch.Tensor
             ) -> StepView:
        """The partner move `move` [G] of `mover` [G] in `state` [G], the seats' shared state `hid` before
        reading it and `new` after (ExactRange._advance's)."""
        seat = None
        if self.cheap:
            p = self.game.players
            obs = encode(self.game, state, observers=mover[:, None])[:, 0].float()
            rows = torch.arange(state.batch_size, device=mover.device) * p + mover
            with self.net.borrowed() as module:
                seat = module.seat_view(obs, select_rows(new, rows))
        return StepView(state, hid, mover, move.long(), seat)

    def with_hand(self, state: HanabiState, hands: torch.Tensor, rows: torch.Tensor | None = None
                  ) -> HanabiState:
        """state [n] with the searcher holding hands [n, H] (-1 empty), on `rows` [n] bool (default all)."""
        mine = (torch.arange(self.game.players, device=hands.device) == self.seat)[None, :, None]
        if rows is not None:
            mine = mine & rows[:, None, None]
        return state.replace(hands=torch.where(mine, hands[:, None, :].to(state.hands.dtype), state.hands))

    def candidate_states(self, state: HanabiState, hands: torch.Tensor, game: torch.Tensor) -> HanabiState:
        """States [n]: game[i]'s state (state [G]) with the searcher holding hands[i] ([n, H], -1 empty)."""
        return self.with_hand(state.index(game), hands)

    def made_move(self, view: StepView, hands: torch.Tensor, game: torch.Tensor) -> torch.Tensor:
        """[n] bool: under hands [n, H] (long) the mover of game[i] makes its move (legal, greedy)."""
        chunk = self.chunk(hands.device)
        out = [self._made_move(view, hands[i: i + chunk], game[i: i + chunk])
               for i in range(0, hands.shape[0], chunk)]  # chunks: a memory cap, not a per-row loop
        return torch.cat(out) if out else torch.zeros(0, dtype=torch.bool, device=hands.device)

    def _made_move(self, view: StepView, hands: torch.Tensor, game: torch.Tensor) -> torch.Tensor:
        g, p, n = self.game, self.game.players, hands.shape[0]
        if view.seat is not None:  # the cheap path: the mover's decision with the candidate's cards shown
            partner = (self.seat - view.mover.index_select(0, game)) % p
            with self.net.borrowed() as module:
                moves = module.moves_seeing(take(view.seat, game), partner, hands)
            return moves == view.move.index_select(0, game)
        st = self.candidate_states(view.state, hands, game)
        rows = (game[:, None] * p + torch.arange(p, device=game.device)).reshape(-1)  # [n * P]
        _, legal, q, _ = seat_q(g, st, self.net.step, select_rows(view.hid, rows))
        pick = torch.arange(n, device=game.device) * p + view.mover.index_select(0, game)
        return move_is_greedy(q.index_select(0, pick), legal.reshape(n * p, -1).index_select(0, pick),
                              view.move.index_select(0, game))

    def advance(self, state: HanabiState, hid: tuple) -> tuple[tuple, torch.Tensor]:
        """Every seat's state after reading `state` [G] (rows g * P + p), and [G] bool: games where some
        seat other than the searcher read the searcher's cards doing so (its hand in `state` then
        matters: see the module doc)."""
        g, p = self.game, self.game.players
        obs, _, _, new = seat_q(g, state, self.net.step, hid)
        reads = torch.zeros(state.batch_size, dtype=torch.bool, device=state.device)
        if self.reads:
            with self.net.borrowed() as module:
                rows = module.reads_hands(obs.reshape(state.batch_size * p, -1).float(), hid)
            rows = rows.reshape(-1, p) & (torch.arange(p, device=state.device) != self.seat)
            reads = rows.any(1) & (state.last_player != self.seat)
        return new, reads
