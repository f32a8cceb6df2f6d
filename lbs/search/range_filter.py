"""SPARTA's counterfactual filter: would the partner's blueprint have made the move it made if the
searcher held this candidate hand?

A partner's canonical observation under a candidate differs from the true one only in the searcher's
block of the partner's `hands.cards` section (relative position (searcher - partner) mod P, minus one),
and its legal moves only in the hints to the searcher (legal iff some candidate card matches). So one
shared view per game serves every candidate: the observation with that block zeroed, the public LSTM
output (public features only) and the legal moves without those hints. The private network's first
layer is linear in the observation, so a candidate's pre-activation is the shared term plus one weight
column per (slot, card): one embedding-bag sum per candidate instead of re-encoding it. A network that
reads the card-count facts (NetConfig.counting) sees them too: the facts of the searcher's cards as the
mover sees them are one more term per (game, slot, card), and the mover's own slots' chances under the
copies it cannot see are ratios whose numerator and denominator each lose one term per candidate card,
summed the same way, then divided. A network that reads the hint facts (NetConfig.hint_facts) sees what
each hint to the searcher would show: the searcher's slots' hint knowledge is shared, so per candidate
only the touched slots and the cards' facts are read, and the hint facts enter through their columns.
A network that reads the discard facts (NetConfig.discard_facts) sees the facts of the searcher's card in
its next-discard slot; that slot is public, so the facts are one more term per (game, slot, card).
Every section is read by name from the network's input layout (QNet.input_layout); a network whose input
holds a family of facts this filter does not know (READS) runs its whole private pass per candidate instead.

Exact ties are broken to the lowest id (acting.greedy), but the search, the inference server and this
filter batch the same network differently, so float rounding may reorder near-equal Q-values: a
candidate is kept when the move's Q is within Q_TOL (relative) of the best legal Q. That keeps a
superset of the exact greedy filter, differing only at near-ties, and never drops the true hand.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.nn import functional as F

from ..acting import legal_with_noop
from ..hanabi.config import GameConfig
from ..hanabi.encode import encode, public_features
from ..hanabi.engine import tables
from ..hanabi.state import HanabiState
from ..infer import QNetHandle
from ..models import card_facts
from ..models.qnet import QNet

Q_TOL = 1e-4
"""Relative slack (times 1 + |best Q|) within which the observed move counts as the greedy one."""


@dataclass
class PartnerView:
    """What every candidate of one game shares at a partner's move; shapes [G, ...], one row per game."""

    obs: torch.Tensor  # [G, D] the mover's observation, the searcher's block zeroed
    block: torch.Tensor  # [G] long: index of the searcher's block inside the mover's hands.cards
    publ_out: torch.Tensor  # [G, F] the mover's public output (F = hidden, or 1 for doubles)
    legal: torch.Tensor  # [G, A] bool: the mover's legal actions, hints to the searcher cleared
    hint_ids: torch.Tensor  # [G, C+R] long: colour then rank hint actions aimed at the searcher
    can_hint: torch.Tensor  # [G] bool: an info token is left
    move: torch.Tensor  # [G] long: the move the partner made
    table: torch.Tensor | None = None  # fast path: [G*H*T + G + 1, hidden] slot terms, shared term, zero row
    own: OwnFacts | None = None  # fast path of a counting network: the mover's own-slot facts
    hints: HintTerms | None = None  # fast path of a network reading hint facts: hints to the searcher


@dataclass
class OwnFacts:
    """A counting network's mover's own slots under a candidate hand c: the chance of fact f in slot s is
    (num[s, f] - sum_j terms[c_j, s, f]) / (den[s] - sum_j terms[c_j, s, F]) (card_facts' V0 expectation,
    the candidate's cards taken from the copies the mover cannot see); it enters the first layer through
    `weight`. Rows hold H x (F + 1) numbers: per slot the F numerators, then the denominator."""

    base: torch.Tensor  # [G, H*(F+1)] with the searcher's block empty
    terms: torch.Tensor  # [G*T + 1, H*(F+1)] what card c of game g takes away (row g*T + c); last: empty slot
    weight: torch.Tensor  # [hidden, H*F] the first layer's columns of the own-slot facts


@dataclass
class HintTerms:
    """A hint-facts network's mover's hints to the searcher: the searcher's slots' hint knowledge (shared by
    every candidate; card_facts.HintKnowledge with the other players' axis taken at the searcher) and the
    first layer's columns of the hint facts, per other player's block."""

    status: torch.Tensor  # [G, T, F] the cards' facts as the mover sees them
    knowledge: card_facts.HintKnowledge  # yes, no [G, H, 1]; yes_hit, no_hit [G, H, N]
    weight: torch.Tensor  # [(P-1) * N * HINT_FACTS, hidden]


READS = frozenset({"obs", "counts", "hints", "discards"})
"""The groups of a network's input (QNet.input_layout) whose per-candidate terms the fast path adds; a network
with any other family of facts is filtered through its whole private pass (q_from_public), exactly."""


class CandidatePolicy:
    """The partner blueprint's greedy move under candidate hands of the searcher, batched over games."""

    def __init__(self, game: GameConfig, net: QNetHandle, seat: int):
        self.game, self.net, self.seat = game, net, seat
        with net.borrowed() as module:
            groups = {name.split(".")[0] for name, _ in module.input_layout.sections} \
                if isinstance(module, QNet) else {"?"}
        self.fast = groups <= READS
        """whether the per-(slot, card) first-layer sum applies (it reads the served network's layers)"""
        self.counting, self.hints, self.discards = ("counts" in groups, "hints" in groups,
                                                    "discards" in groups)
        """which families of facts the network's input holds (see the module doc)"""

    def follow(self, before: HanabiState, hid: tuple, move: torch.Tensor,
               filtering: bool) -> tuple[PartnerView | None, tuple]:
        """(the mover's shared view of `before` (None unless filtering: a partner moved in some game), every
        seat's public state after reading `before`), the searcher's cards hidden (`blind`), from hid."""
        g, p = before.batch_size, self.game.players
        blinded = blind(before, self.seat)
        obs = encode(self.game, blinded)  # [G, P, D] float
        publ_out, hid = self.net.public_out(public_features(self.game, obs).reshape(g * p, -1), hid)
        if not filtering:
            return None, hid
        pick = torch.arange(g, device=before.device) * p + before.cur_player
        legal = legal_with_noop(self.game, blinded).reshape(g * p, -1).index_select(0, pick)
        view = self.view(obs.reshape(g * p, -1).index_select(0, pick),
                         publ_out.reshape(g * p, -1).index_select(0, pick), legal, before.cur_player,
                         before.info_tokens, move)
        return view, hid

    def view(self, obs: torch.Tensor, publ_out: torch.Tensor, legal: torch.Tensor, mover: torch.Tensor,
             info_tokens: torch.Tensor, move: torch.Tensor) -> PartnerView:
        """Shared view from the mover's observation obs [G, D] (any values in the searcher's block),
        public output [G, F], legal actions [G, A] (any values for the hints to the searcher)."""
        g, p, h, t = self.game, self.game.players, self.game.hand_size, self.game.card_types
        dev = obs.device
        rel = (self.seat - mover) % p  # [G] the searcher's offset from the mover (0: it is the searcher)
        block = (rel - 1).clamp(min=0)
        cards = g.layout.slices["hands.cards"]
        pos = torch.arange(g.obs_dim, device=dev)
        start = cards.start + block * h * t  # [G]
        in_block = (pos >= start[:, None]) & (pos < (start + h * t)[:, None])
        shared = obs.float().masked_fill(in_block, 0.0)
        off = rel.clamp(min=1)[:, None]  # [G, 1] the searcher's offset from the mover, as a hint target
        colour = g.color_hint_move(off, torch.arange(g.colors, device=dev))
        rank = g.rank_hint_move(off, torch.arange(g.ranks, device=dev))
        hint_ids = torch.cat([colour, rank], 1)  # [G, C+R]
        legal = legal.scatter(1, hint_ids, False)
        view = PartnerView(shared, block, publ_out, legal, hint_ids, info_tokens > 0, move.long())
        if self.fast:
            with self.net.borrowed() as net:
                view.table = self._table(view, net)
        return view

    def _table(self, view: PartnerView, net: QNet) -> torch.Tensor:
        """Rows g*H*T + s*T + c: the first layer's weight column for card c in the searcher's slot s of
        game g's block; then one shared pre-activation per game; then a zero row (empty slots). For a
        counting network the slot rows add the card's facts as the mover sees them, and view.own is set."""
        g, lin, at = self.game, net.private_input_layer(), net.input_layout.slices
        h, t, dtype = g.hand_size, g.card_types, lin.weight.dtype
        cols = lin.weight[:, at["obs.hands.cards"]].t().reshape(g.players - 1, h, t, -1)  # [P-1, H, T, k]
        slots = cols.index_select(0, view.block)  # [G, H, T, hidden]
        x = net.private_input(view.obs.to(dtype))  # [G, private_in]: the block's cards and their facts zero
        if self.counting:
            f, own = card_facts.FACTS, at["counts.own"]
            status, unseen, know, _ = card_facts.own_view(g, view.obs)  # [G, T, F], [G, T], [G, H, T]
            # the facts of the cards the mover sees, block by block: the searcher's slots' [G, H, F, hidden]
            w_seen = lin.weight[:, at["counts.seen"]].t().reshape(g.players - 1, h, f, -1)
            w_seen = w_seen.index_select(0, view.block)
            slots = slots + torch.einsum("gtf,ghfk->ghtk", status.to(dtype), w_seen)  # the cards' facts
            w = know * unseen[:, None, :]  # the mover's V0 weights with the block empty
            base = torch.cat([w @ status, w.sum(-1, keepdim=True)], -1)  # [G, H, F+1]
            terms = torch.cat([know[..., None] * status[:, None], know[..., None]], -1)  # [G, H, T, F+1]
            terms = terms.transpose(1, 2).reshape(-1, h * (f + 1))  # [G*T, H*(F+1)]
            view.own = OwnFacts(base.flatten(1), torch.cat([terms, terms.new_zeros(1, terms.shape[1])]),
                                lin.weight[:, own])
            x[:, own] = 0  # added per candidate (_own_term)
        rows = torch.arange(len(view.block), device=view.block.device)
        bd = card_facts.board(g, card_facts.public_of(g, view.obs)) if self.hints or self.discards else None
        if self.discards:
            w = lin.weight[:, at["discards.seen"]].t().reshape(g.players - 1, card_facts.FACTS, -1)
            w = w.index_select(0, view.block)
            chop = card_facts.next_discards(g, bd)[rows, view.block + 1]  # [G, H] the searcher's, public
            # the facts of the card in the searcher's next-discard slot; the shared term has zeros there
            slots = slots + chop[..., None, None].to(dtype) * (bd.status.to(dtype) @ w)[:, None]
        if self.hints:
            kn = card_facts.hint_knowledge(g, view.obs, bd)
            searcher = card_facts.HintKnowledge(*(k[rows, view.block] for k in kn))  # [G, H, ...]
            view.hints = HintTerms(bd.status, searcher, lin.weight[:, at["hints"]].t())
            x[:, at["hints"]].unflatten(1, (g.players - 1, -1))[rows, view.block] = 0  # added per candidate
        shared = F.linear(x, lin.weight, lin.bias)  # [G, hidden]
        slots = slots.reshape(-1, slots.shape[-1])  # [G*H*T, hidden]
        return torch.cat([slots, shared, shared.new_zeros(1, shared.shape[1])])

    def q(self, view: PartnerView, hands: torch.Tensor,
          game: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(Q [n, A], legal [n, A]) of the mover of game[i] if the searcher held hands[i] ([n, H] long).
        On the fast path the Q is the advantage alone (with a dueling head the same argmax and gaps)."""
        g, h, t = self.game, self.game.hand_size, self.game.card_types
        tb = tables(g, hands.device)
        held = hands >= 0
        bits = tb.card_features.index_select(0, hands[:, 0] + 1)
        for s in range(1, h):  # colours and ranks present in the hand, slot by slot
            bits = bits | tb.card_features.index_select(0, hands[:, s] + 1)
        legal = view.legal.index_select(0, game)
        hints = bits & view.can_hint.index_select(0, game)[:, None]
        legal = legal.scatter(1, view.hint_ids.index_select(0, game), hints)
        publ = view.publ_out.index_select(0, game)
        slot = torch.arange(h, device=hands.device)
        if view.table is not None:
            n_games = view.obs.shape[0]
            idx = (game[:, None] * h + slot) * t + hands.clamp(min=0)
            zero = view.table.shape[0] - 1  # empty slots add the zero row
            idx = torch.cat([torch.where(held, idx, zero), (n_games * h * t + game)[:, None]], 1)
            x = F.embedding_bag(idx, view.table, mode="sum")  # [n, hidden] first-layer pre-activation
            if view.own is not None:
                x = x + self._own_term(view.own, hands, game, held)
            if view.hints is not None:
                x = x + self._hint_term(view.hints, view.block, hands, game)
            with self.net.borrowed() as net:
                return net.advantages_from_input_layer(x, publ), legal
        cards = g.layout.slices["hands.cards"]
        pos = cards.start + (view.block.index_select(0, game)[:, None] * h + slot) * t + hands.clamp(min=0)
        obs = view.obs.index_select(0, game).scatter_add(1, pos, held.to(view.obs.dtype))
        return self.net.q_from_public(obs, publ, legal), legal

    def _own_term(self, own: OwnFacts, hands: torch.Tensor, game: torch.Tensor,
                  held: torch.Tensor) -> torch.Tensor:
        """[n, hidden]: the first-layer term of the mover's own-slot facts under each candidate hand."""
        h, t, f = self.game.hand_size, self.game.card_types, card_facts.FACTS
        idx = torch.where(held, game[:, None] * t + hands.clamp(min=0), own.terms.shape[0] - 1)
        left = own.base.index_select(0, game) - F.embedding_bag(idx, own.terms, mode="sum")
        left = left.view(-1, h, f + 1)
        facts = left[..., :f] / left[..., f:].clamp(min=1e-9)  # [n, H, F]
        return facts.flatten(1).to(own.weight.dtype) @ own.weight.t()

    def _hint_term(self, hints: HintTerms, block: torch.Tensor, hands: torch.Tensor,
                   game: torch.Tensor) -> torch.Tensor:
        """[n, hidden]: the first-layer term of the mover's hint facts for hints to the searcher under each
        candidate hand (which slots each hint touches, the cards' facts, the shared slot knowledge)."""
        g, card = self.game, hands.clamp(min=0)
        touched = tables(g, hands.device).card_features[hands + 1].float()  # [n, H, N]: empty slots none
        status = hints.status[game[:, None], card]  # [n, H, F], read at touched slots only
        at = card_facts.HintKnowledge(*(k.index_select(0, game) for k in hints.knowledge))
        facts = card_facts.hint_facts_of(g, at, touched, status).flatten(1)  # [n, N * HINT_FACTS]
        full = facts.new_zeros(len(game), g.players - 1, facts.shape[1])
        full[torch.arange(len(game), device=game.device), block.index_select(0, game)] = facts
        return full.flatten(1).to(hints.weight.dtype) @ hints.weight

    def made_move(self, view: PartnerView, hands: torch.Tensor, game: torch.Tensor) -> torch.Tensor:
        """[n] bool: the mover's move is legal and (within Q_TOL) greedy under each candidate hand."""
        q, legal = self.q(view, hands, game)
        return move_is_greedy(q, legal, view.move.index_select(0, game))


def blind(state: HanabiState, seat: int) -> HanabiState:
    """The state with `seat`'s held cards replaced by card 0: what partners' views of the searcher share
    (which slots are held is public; the card identities are what the candidates supply)."""
    mine = (torch.arange(state.hands.shape[1], device=state.device) == seat)[None, :, None]
    return state.replace(hands=torch.where(mine & (state.hands >= 0), 0, state.hands))


def move_is_greedy(q: torch.Tensor, legal: torch.Tensor, move: torch.Tensor) -> torch.Tensor:
    """[n] bool: move [n] is legal and its Q is within Q_TOL * (1 + |best|) of the best legal Q."""
    masked = q.float().masked_fill(~legal, float("-inf"))
    best = masked.max(1).values
    mine = masked.gather(1, move[:, None]).squeeze(1)
    return legal.gather(1, move[:, None]).squeeze(1) & (mine >= best - Q_TOL * (1 + best.abs()))
