"""The Van den Bergh rule policy, batched: the seats of B games decide at once.

Van den Bergh et al. (2016, "Aspects of the cooperative card game Hanabi") searched combinations of simple
rules for 3 players; Goodman's RIS-MCTS paper uses their best set, as the CIG Hanabi competition framework
re-implements it, as a baseline (17.20 with 4 players) and as a simulation policy. The rules, in order, the
first that applies giving the move (read from that framework's rule classes, written anew for tensors):

1. With more than one life: play the card most likely playable if that chance is at least 0.6 (ties: the
   newest such card). With one life: play the oldest card that is certainly playable.
2. Discard the card most likely useless if it is certainly useless (ties: the newest).
3. With a hint token: for the other players in seat order from the mover, and their cards oldest first, the
   first card that is playable now and not fully known: hint its rank if its holder does not know it, else
   its colour.
4. With a hint token: the hint that tells the most cards something new (a rank hint counts the cards whose
   rank their holder does not know, a colour hint likewise; players by absolute seat, ranks then colours,
   the first on ties).
5. Discard the card most likely useless (ties: the newest).

This is the framework's "vdb-paper" agent (hint rule NEXT_USEFUL_THEN_MOST_CARDS, discard rule
MOST_CERTAIN_IS_USELESS): it has no rule for hinting useless cards.

"Chance" is per card: the share of the copies the mover cannot see that its hints on that slot allow (HLE's
card knowledge, positive and negative hints) and that have the property. "Useless" is the framework's
test: its colour's firework is complete or has reached the card's rank, or the rank is at most the lowest
firework, or every copy of a lower rank of its colour still missing from the firework is discarded. A
colour or rank is "known" when the holder's hints leave one possible (the framework's NegativeHand).
Everything is read from the canonical observation, so the policy keeps no memory; its state is a
placeholder with one row per seat.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from ..blueprint import Capabilities, RuleBot
from ..hanabi import engine
from ..hanabi.config import GameConfig
from ..hanabi.encode import knowledge_features
from ..hanabi.engine import tables
from ..hanabi.state import HanabiState
from .smartbot import color_hint, decode, rank_hint, read_state

PLAY_CHANCE = 0.6
"""rule 1: the least chance of being playable at which a card is played (with more than one life)"""


class VanDenBerghState(NamedTuple):
    """No memory: one placeholder per row, so the lockstep loops can select and stack rows as for any bot."""

    rows: torch.Tensor  # [R] zeros
    batch_dim = 0  # rows first (a class constant, not a field)


class VanDenBergh(RuleBot):
    """A blueprint with the networks' interface, `initial_state(rows)` and `step(priv, publ, legal, state) ->
    (scores, state)`, row n * P + p being seat p of game n. Scores are 1 on the move and 0 elsewhere: they
    mark the move and are no value."""

    name = "vandenbergh"
    capabilities = Capabilities(public_state=True, acts_on_state=True)
    """no value, no memory (so its state is trivially public); `act` reads the mover's view off the state"""

    def __init__(self, game: GameConfig, device: torch.device | str = "cpu"):
        if game.card_types > 31:
            raise ValueError(f"the Van den Bergh policy reads observations through SmartBot's decoder, for "
                             f"at most 31 card identities; this game has {game.card_types}")
        super().__init__(game, device)

    def initial_state(self, rows: int, device: torch.device | str | None = None) -> VanDenBerghState:
        dev = torch.device(device) if device is not None else self.device
        return VanDenBerghState(torch.zeros(rows, dtype=torch.long, device=dev))

    def step(self, priv: torch.Tensor, publ: torch.Tensor, legal: torch.Tensor,
             state: VanDenBerghState) -> tuple[torch.Tensor, VanDenBerghState]:
        """The seat to move in each game chooses; scores [R, A]: 1 on the move (seats not to move: on the
        no-op, their only legal action)."""
        del publ  # the canonical observation holds everything the rules read
        g = self.game
        n = priv.shape[0] // g.players
        moving = legal[:, : g.num_moves].any(1).reshape(n, g.players)
        rows = torch.arange(n, device=priv.device) * g.players + moving.long().argmax(1)
        move = decide(g, view(g, priv.index_select(0, rows)), legal.index_select(0, rows)[:, : g.num_moves],
                      moving.long().argmax(1))
        scores = torch.zeros(legal.shape, dtype=torch.float32, device=legal.device)
        scores[:, g.num_moves] = 1.0
        scores[rows] = torch.nn.functional.one_hot(move, legal.shape[1]).float()
        return scores, state

    def act(self, state: HanabiState, hid: VanDenBerghState) -> tuple[torch.Tensor, VanDenBerghState]:
        """step's moves read off the engine state of N games (state_view: the seat to move's view, with no
        observation encoded; step is handed every seat's): the move [N], 0 in finished games; the state
        unchanged (there is no memory). lbs.acting.StatePolicy."""
        g = self.game
        move = decide(g, state_view(g, state), engine.legal_moves(g, state), state.cur_player)
        return torch.where(state.done, 0, move), hid


class RuleView(NamedTuple):
    """What the rules read of the player to move (n rows), shared by this policy and the tree search's
    rule-restricted moves (lbs.search.mcts_rules)."""

    p_play: torch.Tensor  # [n, H] float64 chance each own card is playable (-1: no card / no candidate)
    p_useless: torch.Tensor  # [n, H] float64 chance each own card is useless
    card: torch.Tensor  # [n, P-1, H] the other players' card ids (offsets 1.. from the mover; 0 if empty)
    here: torch.Tensor  # [n, P-1, H] bool: that slot holds a card
    playable: torch.Tensor  # [n, P-1, H] bool: that card is playable now
    useless: torch.Tensor  # [n, P-1, H] bool: that card is useless (the framework's test)
    rank_known: torch.Tensor  # [n, P-1, H] bool: its holder knows its rank
    colour_known: torch.Tensor  # [n, P-1, H] bool: its holder knows its colour
    hints: torch.Tensor  # [n] hint tokens
    lives: torch.Tensor  # [n] lives
    deck: torch.Tensor  # [n] cards left in the deck


def view(game: GameConfig, obs: torch.Tensor, marked: torch.Tensor | None = None,
         left_out: torch.Tensor | None = None) -> RuleView:
    """What the rules read, from canonical observations obs [n, D] of the players to move. marked [n, H]
    (the 'playable now' convention): own slots a single-card hint marked; their chance of being playable
    is 1 unless no playable card is left for them, as the player itself works it out. left_out [n, T]:
    copies to leave out of those the mover's slots may be (None: none; the paper's MO-ISMCTS code leaves
    out the mover's own cards of the world searched, as if the mover could see them)."""
    g, n = game, obs.shape[0]
    know = obs[:, g.layout.slices["knowledge"]].reshape(n, g.players, g.hand_size, -1).bool()
    return _view(g, decode(g, obs), know, marked, left_out)


def state_view(game: GameConfig, state: HanabiState, marked: torch.Tensor | None = None,
               left_out: torch.Tensor | None = None) -> RuleView:
    """view of each game's player to move, read off the engine state with no observation encoded: the
    decoded sections by read_state and the knowledge section by knowledge_features, turned to the mover
    first, as its observation holds them (equal to view(encode(...)): a test checks every field)."""
    g, n, p, h = game, state.batch_size, game.players, game.hand_size
    at = (state.cur_player[:, None] + torch.arange(p, device=state.device)) % p  # [n, P] observer first
    know = knowledge_features(g, state).reshape(n, p, h, -1)
    know = know.gather(1, at[:, :, None, None].expand(n, p, h, know.shape[-1]))
    return _view(g, read_state(g, state, state.cur_player), know, marked, left_out)


def _view(game: GameConfig, ob, know: torch.Tensor, marked: torch.Tensor | None,
          left_out: torch.Tensor | None) -> RuleView:
    """view from the decoded sections ob (smartbot's decode or read_state, one row per mover) and the
    knowledge bits know [n, P, H, T + C + R] (observer first)."""
    g, tb = game, tables(game, know.device)
    p, h, c, k, t = g.players, g.hand_size, g.colors, g.ranks, g.card_types
    n = know.shape[0]
    plaus = know[..., :t].reshape(n, p, h, c, k)
    # the framework's "known" colour / rank: one left possible (positive and negative hints)
    colour_known, rank_known = plaus.any(-1).sum(-1) == 1, plaus.any(-2).sum(-1) == 1  # [n, P, H]
    allowed = know[:, 0, :, :t]  # [n, H, T] the mover's own slots, by its hints
    own_here = ob.present[:, 0]  # [n, H]
    visible = torch.nn.functional.one_hot(ob.hands[:, 1:].clamp(min=0), t) * ob.present[:, 1:, :, None]
    unseen = tb.card_counts[None, :] - ob.seen - visible.sum((1, 2))  # [n, T] copies the mover cannot see
    if left_out is not None:
        unseen = unseen - left_out
    rank_of, colour_of = tb.card_rank, tb.card_color  # [T]
    fw = ob.fireworks.gather(1, colour_of[None, :].expand(n, t))  # [n, T] the card's colour's firework
    playable = rank_of[None, :] == fw  # [n, T]
    lowest = ob.fireworks.min(1).values[:, None]
    # a rank above its firework with every copy discarded caps the colour below it (seen = discards there)
    gone = (ob.seen == tb.card_counts[None, :]) & (rank_of[None, :] >= fw)  # [n, T]
    cap = torch.where(gone, rank_of[None, :], k).reshape(n, c, k).min(-1).values  # [n, C]
    useless = ((fw >= rank_of[None, :] + 1) | (rank_of[None, :] + 1 <= lowest)
               | (rank_of[None, :] > cap.gather(1, colour_of[None, :].expand(n, t))))  # [n, T]

    w = allowed.long() * unseen[:, None, :].clamp(min=0)  # [n, H, T] copies each slot may be
    if marked is not None:
        sure = w * playable[:, None].long()
        w = torch.where((marked & (sure.sum(-1) > 0))[..., None], sure, w)
    total = w.sum(-1)
    known = own_here & (total > 0)
    p_play = torch.where(known, (w * playable[:, None]).sum(-1).double() / total.clamp(min=1), -1.0)
    p_useless = torch.where(known, (w * useless[:, None]).sum(-1).double() / total.clamp(min=1), -1.0)
    card = ob.hands[:, 1:].clamp(min=0)  # [n, P-1, H] offsets 1.. from the mover
    here = ob.present[:, 1:]
    return RuleView(
        p_play=p_play, p_useless=p_useless, card=card, here=here,
        playable=here & playable.gather(1, card.reshape(n, -1)).reshape(card.shape),
        useless=here & useless.gather(1, card.reshape(n, -1)).reshape(card.shape),
        rank_known=rank_known[:, 1:], colour_known=colour_known[:, 1:],
        hints=ob.hints, lives=ob.lives, deck=ob.deck)


def decide(game: GameConfig, v: RuleView, legal: torch.Tensor, mover: torch.Tensor) -> torch.Tensor:
    """[n] the rules' move for each row's player to move, from what it reads v (view or state_view), its
    legal moves [n, M] and its absolute seat mover [n] (rule 4 scans players by absolute seat; the view is
    relative to its observer). The first legal move if no rule applies (rule 4 or 5 always does in a real
    game)."""
    g, h = game, game.hand_size
    slots = torch.arange(h, device=legal.device)
    can_discard = v.hints < g.max_info_tokens
    # 1. play: the likeliest card at >= 0.6 with lives to spare, else the oldest certain one
    best_play = newest_best(v.p_play)
    chance = v.p_play.gather(1, best_play[:, None]).squeeze(1)
    oldest_sure = torch.where(v.p_play == 1.0, slots, h).min(1).values
    r1_spare = (v.lives > 1) & (chance >= PLAY_CHANCE)
    r1_last = (v.lives <= 1) & (oldest_sure < h)
    r1_slot = torch.where(v.lives > 1, best_play, oldest_sure.clamp(max=h - 1))
    # 2. and 5. discard: the likeliest useless card (rule 2 only when certain)
    best_disc = newest_best(v.p_useless)
    useless_chance = v.p_useless.gather(1, best_disc[:, None]).squeeze(1)
    r2 = can_discard & (useless_chance >= 1.0)
    r5 = can_discard & (useless_chance >= 0.0)
    # 3. a playable card of another player, first by seat from the mover, by slot
    r3, m3 = tell_first(g, v, v.playable & ~(v.rank_known & v.colour_known))
    # 4. the hint telling the most cards something new
    r4, m4 = most_information(g, v, mover)
    move = legal.long().argmax(1)
    for fires, m in ((r5, best_disc), (r4, m4), (r3, m3), (r2, best_disc),
                     (r1_last, h + r1_slot), (r1_spare, h + r1_slot)):  # the first rule that fires wins
        move = torch.where(fires, m, move)
    return move


def tell_first(game: GameConfig, v: RuleView, cand: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(fires [n], move [n]) for the first candidate card cand [n, P-1, H] (by seat from the mover, then
    slot): its rank unless its holder knows it, else its colour; it fires with a hint token and a candidate
    whose holder lacks one of the two (the framework returns no move for a fully known first card)."""
    n, dev = cand.shape[0], cand.device
    flat = cand.reshape(n, -1)
    first = torch.where(flat, torch.arange(flat.shape[1], device=dev), flat.shape[1]).min(1).values
    at = first.clamp(max=flat.shape[1] - 1)
    rank_known = v.rank_known.reshape(n, -1).gather(1, at[:, None]).squeeze(1)
    colour_known = v.colour_known.reshape(n, -1).gather(1, at[:, None]).squeeze(1)
    fires = (first < flat.shape[1]) & (v.hints > 0) & ~(rank_known & colour_known)
    cid = v.card.reshape(n, -1).gather(1, at[:, None]).squeeze(1)
    off = at // game.hand_size + 1
    tb = tables(game, dev)
    move = torch.where(~rank_known, rank_hint(game, off, tb.card_rank[cid]),
                       color_hint(game, off, tb.card_color[cid]))
    return fires, move


def most_information(game: GameConfig, v: RuleView, mover: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(fires [n], move [n]): the hint touching the most cards whose holder does not yet know that colour /
    rank (the framework's TellMostInformation(new information)): players by absolute seat, ranks 1.. then
    colours, the first on ties."""
    g, tb = game, tables(game, v.card.device)
    p, c, k = g.players, g.colors, g.ranks
    n, dev = v.card.shape[0], v.card.device
    new_rank, new_colour = v.here & ~v.rank_known, v.here & ~v.colour_known
    one_hot = torch.nn.functional.one_hot
    rank_hit = (one_hot(tb.card_rank[v.card], k) * new_rank[..., None]).sum(2)  # [n, P-1, K]
    colour_hit = (one_hot(tb.card_color[v.card], c) * new_colour[..., None]).sum(2)  # [n, P-1, C]
    hits = torch.cat([rank_hit, colour_hit], 2)  # [n, P-1, K + C]
    seat = (mover[:, None] + torch.arange(1, p, device=dev)[None, :]) % p  # [n, P-1] absolute seats
    order = seat[..., None] * (k + c) + torch.arange(k + c, device=dev)  # [n, P-1, K + C] the scan's order
    top = hits.amax((1, 2), keepdim=True)
    key = torch.where(hits == top, order, p * (k + c)).reshape(n, -1)
    at = key.argmin(1)
    off, j = at // (k + c) + 1, at % (k + c)
    move = torch.where(j < k, rank_hint(g, off, j), color_hint(g, off, (j - k).clamp(min=0)))
    return (v.hints > 0) & (top.reshape(n) > 0), move


def newest_best(x: torch.Tensor) -> torch.Tensor:
    """[n] the last slot among the maxima of x [n, H] (the framework's `>=` scan keeps the last)."""
    return (x.shape[1] - 1) - x.flip(1).argmax(1)
