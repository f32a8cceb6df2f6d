"""The Van den Bergh rule policy, batched: the seats of B games decide at once.

Van den Bergh et al. (2016, "Aspects of the cooperative card game Hanabi") searched combinations of simple
rules for 3 players; Goodman's RIS-MCTS paper uses their best set, as the CIG Hanabi competition framework
re-implements it, as a baseline (17.20 with 4 players) and as a simulation policy. The rules, in order, the
first that applies giving the move (read from that framework's rule classes, written anew for tensors):

1. With more than one life: play the card most likely playable if that chance is at least 0.6 (ties: the
   newest such card). With one life: play the oldest card that is certainly playable.
2. Discard the card most likely useless if it is certainly useless (ties: the newest).
3. With a hint token: for the other players in seat order from the mover, and their cards oldest first, the
   first card that is playable now and not fully hinted: hint its rank if no rank hint touched it, else its
   colour.
4. With a hint token: the same scan for the first card that is useless: its rank if no rank hint touched
   it, else its colour.
5. With a hint token: the hint that touches the most cards (players by absolute seat, ranks then colours,
   the first on ties).
6. Discard the card most likely useless (ties: the newest).

"Chance" is per card: the share of the copies the mover cannot see that its hints on that slot allow (HLE's
card knowledge, positive and negative hints) and that have the property. "Useless" is the framework's
test: its colour's firework is complete, or already past the card's rank, or the rank is at most the lowest
firework. "Hinted" means touched by a positive hint of that kind. Everything is read from the canonical
observation, so the policy keeps no memory; its state is a placeholder with one row per seat.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from ..blueprint import Capabilities, RuleBot
from ..hanabi.config import GameConfig
from ..hanabi.engine import tables
from .smartbot import color_hint, decode, rank_hint

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
    capabilities = Capabilities(public_state=True)
    """no value, no memory (so its state is trivially public)"""

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
        move = decide(g, priv.index_select(0, rows), legal.index_select(0, rows)[:, : g.num_moves],
                      moving.long().argmax(1))
        scores = torch.zeros(legal.shape, dtype=torch.float32, device=legal.device)
        scores[:, g.num_moves] = 1.0
        scores[rows] = torch.nn.functional.one_hot(move, legal.shape[1]).float()
        return scores, state


def decide(game: GameConfig, obs: torch.Tensor, legal: torch.Tensor, mover: torch.Tensor) -> torch.Tensor:
    """[n] the rules' move for each row's player to move, from its canonical observation obs [n, D], its
    legal moves [n, M] and its absolute seat mover [n] (rule 5 scans players by absolute seat; the
    observation is relative to its observer). The first legal move if no rule applies (rule 5 or 6 always
    does in a real game)."""
    g, tb = game, tables(game, obs.device)
    p, h, c, k, t = g.players, g.hand_size, g.colors, g.ranks, g.card_types
    n, dev = obs.shape[0], obs.device
    ob = decode(g, obs)
    know = obs[:, g.layout.slices["knowledge"]].reshape(n, p, h, t + c + k).bool()  # observer first
    allowed = know[:, 0, :, :t]  # [n, H, T] the mover's own slots, by its hints
    colour_hinted, rank_hinted = know[..., t:t + c].any(-1), know[..., t + c:].any(-1)  # [n, P, H]
    own_here = ob.present[:, 0]  # [n, H]
    visible = torch.nn.functional.one_hot(ob.hands[:, 1:].clamp(min=0), t) * ob.present[:, 1:, :, None]
    unseen = tb.card_counts[None, :] - ob.seen - visible.sum((1, 2))  # [n, T] copies the mover cannot see
    rank_of, colour_of = tb.card_rank, tb.card_color  # [T]
    fw = ob.fireworks.gather(1, colour_of[None, :].expand(n, t))  # [n, T] the card's colour's firework
    playable = rank_of[None, :] == fw  # [n, T]
    lowest = ob.fireworks.min(1).values[:, None]
    useless = (fw == k) | (fw > rank_of[None, :] + 1) | (rank_of[None, :] + 1 <= lowest)  # [n, T]

    w = allowed.long() * unseen[:, None, :].clamp(min=0)  # [n, H, T] copies each slot may be
    total = w.sum(-1)
    known = own_here & (total > 0)
    p_play = torch.where(known, (w * playable[:, None]).sum(-1).double() / total.clamp(min=1), -1.0)
    p_useless = torch.where(known, (w * useless[:, None]).sum(-1).double() / total.clamp(min=1), -1.0)
    slots = torch.arange(h, device=dev)
    lives, hints = ob.lives, ob.hints
    can_discard = hints < g.max_info_tokens

    # 1. play: the likeliest card at >= 0.6 with lives to spare, else the oldest certain one
    best_play = _newest_best(p_play)
    chance = p_play.gather(1, best_play[:, None]).squeeze(1)
    sure = p_play == 1.0
    oldest_sure = torch.where(sure, slots, h).min(1).values
    r1_spare = (lives > 1) & (chance >= PLAY_CHANCE)
    r1_last = (lives <= 1) & (oldest_sure < h)
    r1_slot = torch.where(lives > 1, best_play, oldest_sure.clamp(max=h - 1))
    # 2. and 6. discard: the likeliest useless card (rule 2 only when certain)
    best_disc = _newest_best(p_useless)
    useless_chance = p_useless.gather(1, best_disc[:, None]).squeeze(1)
    r2 = can_discard & (useless_chance >= 1.0)
    r6 = can_discard & (useless_chance >= 0.0)
    # 3. and 4. a playable, then a useless, card of another player: first by seat from the mover, by slot
    others = ob.hands[:, 1:]  # [n, P-1, H] offsets 1.. from the mover
    here = ob.present[:, 1:]
    card = others.clamp(min=0)
    is_playable = here & playable.gather(1, card.reshape(n, -1)).reshape(card.shape)
    is_useless = here & useless.gather(1, card.reshape(n, -1)).reshape(card.shape)
    rank_known, colour_known = rank_hinted[:, 1:], colour_hinted[:, 1:]
    offsets = torch.arange(1, p, device=dev)[:, None].expand(p - 1, h)  # [P-1, H]

    def tell(cand: torch.Tensor, need_new: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """(fires [n], move [n]) for the first candidate card: its rank unless a rank hint touched it, else
        its colour (need_new: skip cards with both hinted)."""
        if need_new:
            cand = cand & ~(rank_known & colour_known)
        flat = cand.reshape(n, -1)
        first = torch.where(flat, torch.arange(flat.shape[1], device=dev), flat.shape[1]).min(1).values
        fires = (first < flat.shape[1]) & (hints > 0)
        at = first.clamp(max=flat.shape[1] - 1)
        cid = card.reshape(n, -1).gather(1, at[:, None]).squeeze(1)
        off = offsets.reshape(-1)[at]
        by_rank = ~rank_known.reshape(n, -1).gather(1, at[:, None]).squeeze(1)
        move = torch.where(by_rank, rank_hint(g, off, rank_of[cid]), color_hint(g, off, colour_of[cid]))
        return fires, move

    r3, m3 = tell(is_playable, True)
    r4, m4 = tell(is_useless, False)
    # 5. the hint touching the most cards: players by absolute seat, ranks before colours, the first on ties
    rank_hit = (torch.nn.functional.one_hot(rank_of[card], k) * here[..., None]).sum(2)  # [n, P-1, K]
    colour_hit = (torch.nn.functional.one_hot(colour_of[card], c) * here[..., None]).sum(2)  # [n, P-1, C]
    hits = torch.cat([rank_hit, colour_hit], 2)  # [n, P-1, K + C]
    seat = (mover[:, None] + torch.arange(1, p, device=dev)[None, :]) % p  # [n, P-1] absolute seats
    order = seat[..., None] * (k + c) + torch.arange(k + c, device=dev)  # [n, P-1, K + C] the scan's order
    top = hits.amax((1, 2), keepdim=True)
    key = torch.where(hits == top, order, p * (k + c)).reshape(n, -1)
    at = key.argmin(1)
    off, j = at // (k + c) + 1, at % (k + c)
    m5 = torch.where(j < k, rank_hint(g, off, j), color_hint(g, off, (j - k).clamp(min=0)))
    r5 = (hints > 0) & (top.reshape(n) > 0)

    fallback = legal.long().argmax(1)
    move = fallback
    for fires, m in ((r6, best_disc), (r5, m5), (r4, m4), (r3, m3), (r2, best_disc),
                     (r1_last, h + r1_slot), (r1_spare, h + r1_slot)):  # the first rule that fires wins
        move = torch.where(fires, m, move)
    return move


def _newest_best(x: torch.Tensor) -> torch.Tensor:
    """[n] the last slot among the maxima of x [n, H] (the framework's `>=` scan keeps the last)."""
    return (x.shape[1] - 1) - x.flip(1).argmax(1)
