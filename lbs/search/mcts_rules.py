"""The tree's move restrictions from Goodman 2019, section V: the rule-restricted moves of Table II and the
'playable now' convention, as masks over the games' legal moves [G, M] (tensor work, no loop over games).

Table II (each rule gives at most one move; the tree may take only those moves), read for the player to move
from its canonical observation with the Van den Bergh policy's helpers (lbs.bots.vandenbergh), as the
competition framework's rule classes of those names do:

1. hint the most new information to any other player (the framework's TellMostInformation(new));
2. hint about a playable card: the first one, by seat from the mover then slot, its holder does not fully
   know: its rank if unknown, else its colour (TellAnyoneAboutUsefulCard);
3. hint about a card that can be discarded: the first useless card; its rank if unknown, else its colour,
   no move if its holder knows both (TellAnyoneAboutUselessCard);
4. hint the missing half about a playable card: the first one whose holder knows exactly one of its colour
   and rank (CompleteTellUsefulCard);
5. the same for the first useless card whose holder knows exactly one half;
6. the same for the first card neither playable nor useless whose holder knows exactly one half;
7. play the card likeliest playable if that chance is at least 0.7;
8. play it if the chance is at least 0.4 and at most 5 cards are left in the deck;
9. discard the card likeliest useless (when discarding is legal).
Where no rule gives a legal move the full legal set is kept (the paper's rules always give one in practice).

The convention: a hint to the next player that touches exactly one of its cards says that card is playable
now, unless the receiver can tell it is not (no playable card left among what its hints, the hint included,
allow for that slot and the copies it cannot see). So a hint touching one card of the next player that is
not playable, where the receiver could still think it playable, is false and is never given
(`false_hints`); the player just hinted treats the card as playable in its rule chances and in every
redraw of its hand (`convention_marks`, used by lbs.search.mcts.draw_hands). The mark lasts for the
receiver's next turn (the turn the hint is meant for); the paper does not say how long it holds.
"""

from __future__ import annotations

import torch

from ..bots.smartbot import color_hint, rank_hint
from ..bots.vandenbergh import most_information, newest_best, state_view, tell_first
from ..hanabi import engine
from ..hanabi.config import REVEAL_COLOR, REVEAL_RANK, GameConfig
from ..hanabi.state import HanabiState

PLAY_SURE, PLAY_LATE, LATE_DECK = 0.7, 0.4, 5
"""Table II rules 7 and 8: play at this chance; at the lower one when at most LATE_DECK cards are left"""


def convention_marks(game: GameConfig, state: HanabiState) -> torch.Tensor:
    """[G, H] bool: the slot of the player to move that the last move, a hint from the previous player
    touching exactly one of its cards, marked playable (all false elsewhere). Public: which slots a hint
    touched is seen by everyone."""
    info = engine.tables(game, state.device).move_info[state.last_move.clamp(min=0)]  # [G, 5]
    hint = (state.last_move >= 0) & ((info[:, 0] == REVEAL_COLOR) | (info[:, 0] == REVEAL_RANK))
    to_mover = (state.last_player + info[:, 2]) % game.players == state.cur_player
    single = state.last_reveal.sum(1) == 1
    return state.last_reveal & (hint & to_mover & single)[:, None]


def playable_cards(game: GameConfig, state: HanabiState) -> torch.Tensor:
    """[G, T] bool: the card ids playable on each game's fireworks."""
    tb = engine.tables(game, state.device)
    return tb.card_rank[None, :] == state.fireworks[:, tb.card_color]


def false_hints(game: GameConfig, state: HanabiState) -> torch.Tensor:
    """[G, M] bool: the hints to the next player that the convention makes false: they touch exactly one
    of its cards, that card is not playable, and the receiver, knowing what the hint tells it, could still
    think it playable (some playable card its slot allows has a copy it cannot see)."""
    g, tb, dev = game, engine.tables(game, state.device), state.device
    c, k = g.colors, g.ranks
    rows = torch.arange(state.batch_size, device=dev)
    recv = (state.cur_player + 1) % g.players
    hand = state.hands[rows, recv]  # [G, H]
    here, card = hand >= 0, hand.clamp(min=0)
    colour, rank = tb.card_color[card], tb.card_rank[card]  # [G, H]
    fw = state.fireworks  # [G, C]
    is_playable = here & (rank == fw.gather(1, colour))  # [G, H]
    unseen = engine.unseen_counts(g, state, recv).reshape(-1, c, k) > 0  # [G, C, K] copies it cannot see
    cp, rp = state.color_plausible[rows, recv], state.rank_plausible[rows, recv]  # [G, H, C], [G, H, K]
    next_rank = fw.clamp(max=k - 1)  # [G, C] the rank each colour needs (a complete colour needs none)
    open_colour = fw < k
    # a playable card left that the slot may be: colour c at rank fw[c], allowed by the slot and unseen
    left = open_colour & unseen.gather(2, next_rank[..., None]).squeeze(2)  # [G, C]
    may_c = rp.gather(2, next_rank[:, None, :].expand(-1, hand.shape[1], -1)) & left[:, None, :]  # [G, H, C]
    # colour hint c: the slot's colour becomes c; rank hint r: its rank becomes r (the other half as before)
    possible_colour = may_c  # [G, H, C] after a colour-c hint
    rank_ids = torch.arange(k, device=dev)
    needs_r = (next_rank[:, :, None] == rank_ids) & left[..., None]  # [G, C, K] colour c needs rank r now
    possible_rank = (cp[..., None] & needs_r[:, None]).any(2)  # [G, H, K] after a rank-r hint
    hit_c = here[..., None] & (colour[..., None] == torch.arange(c, device=dev))  # [G, H, C]
    hit_r = here[..., None] & (rank[..., None] == rank_ids)  # [G, H, K]

    def false(hit: torch.Tensor, possible: torch.Tensor) -> torch.Tensor:
        single = hit.sum(1) == 1  # [G, X]
        return single & (hit & ~is_playable[..., None] & possible).any(1)

    out = torch.zeros(state.batch_size, g.num_moves, dtype=torch.bool, device=dev)
    out[:, color_hint(g, 1, torch.arange(c, device=dev))] = false(hit_c, possible_colour)
    out[:, rank_hint(g, 1, rank_ids)] = false(hit_r, possible_rank)
    return out


def single_card_hint(game: GameConfig, v) -> tuple[torch.Tensor, torch.Tensor]:
    """(fires [n], move [n]): the rule the paper's code puts first under the convention (not in Table II):
    the next player's first playable card (by slot) that a hint can touch alone: its rank if no other card
    of that hand shares it, else its colour if none shares that."""
    tb, h = engine.tables(game, v.card.device), game.hand_size
    card, here = v.card[:, 0], v.here[:, 0]  # [n, H] the next player's hand
    rank, colour = tb.card_rank[card], tb.card_color[card]
    alone_r = ((rank[:, :, None] == rank[:, None, :]) & here[:, None, :]).sum(-1) == 1  # [n, H]
    alone_c = ((colour[:, :, None] == colour[:, None, :]) & here[:, None, :]).sum(-1) == 1
    ok = v.playable[:, 0] & (alone_r | alone_c)
    first = torch.where(ok, torch.arange(h, device=ok.device), h).min(1).values
    at = first.clamp(max=h - 1)[:, None]
    by_rank = alone_r.gather(1, at).squeeze(1)
    move = torch.where(by_rank, rank_hint(game, 1, rank.gather(1, at).squeeze(1)),
                       color_hint(game, 1, colour.gather(1, at).squeeze(1)))
    return (first < h) & (v.hints > 0), move


def table_ii_moves(game: GameConfig, state: HanabiState, convention: bool,
                   single_hint: bool = False) -> torch.Tensor:
    """[G, M] bool: the moves Table II's rules give the player to move (see the module docstring), from its
    canonical observation; under the convention its marked card counts as playable. single_hint: also
    `single_card_hint`'s move (the paper's code's rule under the convention)."""
    g, h, dev = game, game.hand_size, state.device
    v = state_view(g, state, convention_marks(g, state) if convention else None)
    fired: list[tuple[torch.Tensor, torch.Tensor]] = [single_card_hint(g, v)] if single_hint else []
    known = v.rank_known ^ v.colour_known  # exactly one half known
    fired.append(most_information(g, v, state.cur_player))
    fired.append(tell_first(g, v, v.playable & ~(v.rank_known & v.colour_known)))
    fired.append(tell_first(g, v, v.useless))
    fired.append(tell_first(g, v, v.playable & known))
    fired.append(tell_first(g, v, v.useless & known))
    fired.append(tell_first(g, v, v.here & ~v.playable & ~v.useless & known))
    best = newest_best(v.p_play)
    chance = v.p_play.gather(1, best[:, None]).squeeze(1)
    fired.append((chance >= PLAY_SURE, h + best))
    fired.append(((chance >= PLAY_LATE) & (v.deck <= LATE_DECK), h + best))
    disc = newest_best(v.p_useless)
    can_discard = v.hints < g.max_info_tokens
    fired.append((can_discard & (v.p_useless.gather(1, disc[:, None]).squeeze(1) >= 0), disc))
    out = torch.zeros(state.batch_size, g.num_moves, dtype=torch.bool, device=dev)
    for fires, move in fired:
        out |= torch.nn.functional.one_hot(move, g.num_moves).bool() & fires[:, None]
    return out


def tree_moves(game: GameConfig, state: HanabiState, rule_moves: bool, convention: bool,
               single_hint: bool = False) -> torch.Tensor:
    """[G, M] bool: the moves the tree may take in each game: the legal moves, less the convention's false
    hints, narrowed to Table II's moves (and `single_card_hint`'s with single_hint) where those leave any."""
    legal = engine.legal_moves(game, state)
    if convention:
        legal = legal & ~false_hints(game, state)
    if rule_moves:
        ruled = legal & table_ii_moves(game, state, convention, single_hint)
        legal = torch.where(ruled.any(1, keepdim=True), ruled, legal)
    return legal
