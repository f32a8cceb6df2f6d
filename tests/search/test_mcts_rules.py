"""The tree's move restrictions (Goodman 2019, section V): on hand-built positions the rule-restricted set is
exactly Table II's moves and the convention removes exactly its false hints; redraws under the convention
keep a marked card playable; searches with the switches on make legal moves only. With both switches off
the search is the per-game reference's (tests/search/test_mcts.py), so today's moves are unchanged."""

from __future__ import annotations

import pytest
import torch

from lbs.belief.constraints import plausible_cards
from lbs.hanabi import GameConfig, engine
from lbs.hanabi.config import REVEAL_COLOR, REVEAL_RANK
from lbs.hanabi.rng import uniform
from lbs.hanabi.state import HanabiState
from lbs.search import mcts
from lbs.search.mcts import MctsConfig
from lbs.search.mcts_rules import convention_marks, false_hints, playable_cards, table_ii_moves, tree_moves
from lbs.seeding import Stream, game_seeds

GAME = GameConfig(players=3, bomb_zero=False)  # hand size 5, colours R Y G W B, ranks 1-5
R = GAME.ranks
pytestmark = pytest.mark.usefixtures("one_thread")


def card(colour: str, rank: int) -> int:
    """Card id of a colour letter and a rank 1-5."""
    return "RYGWB".index(colour) * R + rank - 1


def position(hands: list[list[int]], fireworks: list[int], hints: int = 3, known: dict | None = None,
             deck_left: int | None = None) -> HanabiState:
    """One game, player 0 to move. known: {(player, slot): (colours, ranks)} narrows that card's knowledge
    (colour letters, ranks 1-5); deck_left: cards left in the deck."""
    s = engine.reset(GAME, game_seeds(Stream.EVAL, 0, 1))
    cp, rp = torch.ones_like(s.color_plausible), torch.ones_like(s.rank_plausible)
    for (p, slot), (colours, ranks) in (known or {}).items():
        cp[0, p, slot] = torch.tensor([c in colours for c in "RYGWB"])
        rp[0, p, slot] = torch.tensor([r + 1 in ranks for r in range(R)])
    pos = s.deck_pos if deck_left is None else torch.tensor([GAME.num_cards - deck_left])
    return s.replace(hands=torch.tensor([hands]), fireworks=torch.tensor([fireworks]),
                     info_tokens=torch.tensor([hints]), cur_player=torch.tensor([0]), color_plausible=cp,
                     rank_plausible=rp, deck_pos=pos)


def names(mask: torch.Tensor) -> set[str]:
    return {GAME.move_name(int(m)) for m in mask[0].nonzero().squeeze(1)}


ALL = "RYGWB"
# red at 1: playable R2 Y1 G1 W1 B1; useless R1
MINE = [card("R", 3), card("R", 4), card("Y", 3), card("B", 2), card("G", 2)]
SEAT1 = [card("W", 4), card("R", 1), card("G", 3), card("Y", 4), card("R", 1)]
SEAT2 = [card("Y", 1), card("B", 4), card("G", 1), card("G", 4), card("W", 4)]
HALVES = {(1, 0): (ALL, (4,)),  # W4: rank known (neither playable nor useless)
          (1, 4): (ALL, (1,)),  # R1: rank known (useless)
          (2, 2): (ALL, (1,))}  # G1: rank known (playable)


def test_table_ii_gives_exactly_one_move_per_rule_that_fires():
    s = position([MINE, SEAT1, SEAT2], [1, 0, 0, 0, 0], known=HALVES)
    assert names(table_ii_moves(GAME, s, convention=False)) == {
        "(Reveal player +2 rank 4)",  # 1. most new information: seat 2's three unknown 4s
        "(Reveal player +2 rank 1)",  # 2. the first playable card (Y1), its rank
        "(Reveal player +1 rank 1)",  # 3. the first useless card (R1 in slot 1), its rank
        "(Reveal player +2 color G)",  # 4. the first playable card with one half known (G1), the other
        "(Reveal player +1 color R)",  # 5. the same for a useless card (R1 in slot 4)
        "(Reveal player +1 color W)",  # 6. the same for a card neither playable nor useless (W4)
        "(Discard 4)",  # 9. the likeliest useless card (all equal: the newest)
    }  # 7. and 8.: no card of the mover's is 40% playable
    assert names(tree_moves(GAME, s, rule_moves=True, convention=False)) == names(
        table_ii_moves(GAME, s, convention=False))
    # no hint token: only the discard; full tokens: no discard
    assert names(table_ii_moves(GAME, position([MINE, SEAT1, SEAT2], [1, 0, 0, 0, 0], hints=0,
                                               known=HALVES), False)) == {"(Discard 4)"}
    assert "(Discard 4)" not in names(table_ii_moves(GAME, position([MINE, SEAT1, SEAT2], [1, 0, 0, 0, 0],
                                                                    hints=8, known=HALVES), False))


def test_table_ii_plays_at_70_percent_and_at_40_percent_late_in_the_deck():
    hands = [MINE, SEAT1, SEAT2]
    one = {(0, 1): (ALL, (1,))}  # every unseen 1 is playable (no R1 is left): play at 1.0
    assert "(Play 1)" in names(table_ii_moves(GAME, position(hands, [1, 0, 0, 0, 0], known=one), False))
    # a 1 or a 2: 10 playable 1s and 2 playable 2s (R2) of 20 unseen: 0.6
    low = {(0, 1): (ALL, (1, 2))}
    assert "(Play 1)" not in names(table_ii_moves(GAME, position(hands, [1, 0, 0, 0, 0], known=low), False))
    late = position(hands, [1, 0, 0, 0, 0], known=low, deck_left=5)
    assert "(Play 1)" in names(table_ii_moves(GAME, late, False))
    assert "(Play 1)" not in names(table_ii_moves(GAME, position(hands, [1, 0, 0, 0, 0], known=low,
                                                                  deck_left=6), False))


def test_the_convention_removes_exactly_the_hints_it_makes_false():
    seat1 = [card("W", 4), card("B", 3), card("G", 3), card("Y", 1), card("R", 5)]
    s = position([MINE, seat1, SEAT2], [0, 0, 0, 0, 0])
    # one card touched and not playable, while a 1 of that colour is left for the receiver
    assert names(false_hints(GAME, s)) == {"(Reveal player +1 color W)", "(Reveal player +1 color B)",
                                           "(Reveal player +1 color G)", "(Reveal player +1 color R)"}
    # not false: Y1 is playable; rank 3 touches two cards; no colour needs a 4 or a 5, so the receiver knows
    # the card is not playable; hints to seat 2 never carry the convention
    legal = names(tree_moves(GAME, s, rule_moves=False, convention=True))
    assert {"(Reveal player +1 color Y)", "(Reveal player +1 rank 3)", "(Reveal player +1 rank 4)",
            "(Reveal player +1 rank 5)", "(Reveal player +2 color W)"} <= legal
    # with white at 3 a lone 4 may be the W4 the board needs: a rank-4 hint on the W4 is true, on a B4 false
    w3 = position([MINE, seat1, SEAT2], [0, 0, 0, 3, 0])
    assert "(Reveal player +1 rank 4)" not in names(false_hints(GAME, w3))
    b4 = position([MINE, [card("B", 4), *seat1[1:]], SEAT2], [0, 0, 0, 3, 0])
    assert "(Reveal player +1 rank 4)" in names(false_hints(GAME, b4))
    # the receiver knows its W4 is no 1 (a negative hint): a white hint cannot say it is playable
    told = position([MINE, seat1, SEAT2], [0, 0, 0, 0, 0], known={(1, 0): (ALL, (2, 3, 4, 5))})
    assert "(Reveal player +1 color W)" not in names(false_hints(GAME, told))
    # every white 1 in sight of the receiver: no white card of its can be playable
    mine = [card("W", 1), card("W", 1), card("Y", 3), card("B", 2), card("G", 2)]
    seen = position([mine, seat1, [card("W", 1), *SEAT2[1:]]], [0, 0, 0, 0, 0])
    assert "(Reveal player +1 color W)" not in names(false_hints(GAME, seen))


def _hinted(game: GameConfig, games: int, seed: int) -> HanabiState:
    """Games where the last move was a convention-true hint touching one card of the player now to move."""
    state = engine.reset(game, game_seeds(Stream.EVAL, seed, games))
    for t in range(6):
        state, _, _ = engine.step(game, state, mcts.random_legal(engine.legal_moves(game, state),
                                                                 uniform(torch.arange(games), seed, t)))
    info = engine.tables(game, state.device).move_info  # [M, 5]
    to_next = ((info[:, 0] == REVEAL_COLOR) | (info[:, 0] == REVEAL_RANK)) & (info[:, 2] == 1)  # [M]
    ok = tree_moves(game, state, rule_moves=False, convention=True) & to_next
    # a hint touching one card: step each candidate and keep those with one revealed slot
    best = torch.full((games,), -1)
    for m in ok.any(0).nonzero().squeeze(1).tolist():
        after, _, _ = engine.step(game, state, torch.full((games,), m))
        single = ok[:, m] & (after.last_reveal.sum(1) == 1) & (best < 0)
        best = torch.where(single, m, best)
    keep = (best >= 0) & ~state.done
    state = state.index(keep.nonzero().squeeze(1))
    state, _, _ = engine.step(game, state, best[keep])
    return state


def test_redraws_under_the_convention_keep_the_marked_card_playable():
    game = GameConfig(players=4, bomb_zero=False)
    state = _hinted(game, 48, seed=2)
    marks = convention_marks(game, state)
    assert state.batch_size > 10 and marks.sum(1).eq(1).all()
    rows = torch.arange(state.batch_size)
    player = state.cur_player
    playable = playable_cards(game, state)  # [G, T]
    slot = marks.long().argmax(1)
    allowed = plausible_cards(game, state.color_plausible[rows, player, slot],
                              state.rank_plausible[rows, player, slot])  # [G, T] the marked slot's hints
    unseen = engine.unseen_counts(game, state, player) > 0
    said = (allowed & playable & unseen).any(1)  # the hint said "playable" (the receiver cannot rule it out)
    assert said.sum() > 10 and (~said).any()  # e.g. a 4 touched alone while no colour needs a 4
    for key in range(40):
        keys = torch.arange(state.batch_size) * 101 + key
        drawn = mcts.determinize(game, state, player, keys, 8, torch.ones_like(state.done), marked=marks)
        hand = drawn.hands[rows, player]
        on = playable[rows, hand[rows, slot]]
        assert on[said].all()
        assert engine.hand_fits(game, drawn, player, hand).all()
        plain = mcts.determinize(game, state, player, keys, 8, torch.ones_like(state.done))
        if key == 0:  # without the mark some redraws put an unplayable card there
            unplayable = said & ~playable[rows, plain.hands[rows, player][rows, slot]]
    assert unplayable.any()


@pytest.mark.parametrize("mode", ["mo-ismcts", "ris-mcts"])
def test_a_search_with_the_switches_on_makes_legal_moves_only(mode):
    game = GameConfig(players=4, bomb_zero=False)
    state = engine.reset(game, game_seeds(Stream.EVAL, 5, 6))
    for step in range(4):
        cfg = MctsConfig(mode=mode, iterations=12, candidates=8, rule_moves=True, convention=True)
        res = mcts.search(game, state, cfg, torch.arange(6) * 13 + step)
        allowed = tree_moves(game, state, rule_moves=True, convention=True)
        assert allowed.gather(1, res.move[:, None]).all()  # legal, true under the convention, a rule's move
        assert (res.visits > 0).le(allowed).all()  # the root tried nothing else
        state, _, _ = engine.step(game, state, res.move)


@pytest.mark.parametrize("mode", ["mo-ismcts", "ris-mcts"])
def test_with_the_switches_off_the_tree_takes_every_legal_move_as_before(mode, monkeypatch):
    game = GameConfig(players=4, bomb_zero=False)
    state = engine.reset(game, game_seeds(Stream.EVAL, 6, 5))
    cfg = MctsConfig(mode=mode, iterations=20, candidates=8)
    assert not cfg.rule_moves and not cfg.convention
    keys = torch.arange(5) * 17 + 1
    now = mcts.search(game, state, cfg, keys)
    monkeypatch.setattr(mcts, "tree_moves", lambda g, s, *switches: engine.legal_moves(g, s))
    before = mcts.search(game, state, cfg, keys)
    assert torch.equal(now.move, before.move) and torch.equal(now.visits, before.visits)
    assert torch.equal(now.value, before.value)


def test_the_single_card_hint_tells_the_next_player_a_playable_card_it_can_touch_alone():
    """single_hint (MctsConfig.single_card_hint): the next player's first playable card that one hint can
    touch alone, by its rank when no other card there shares it, else by its colour; nothing where every
    playable card shares both; only the next player (seat 1) is told."""
    def added(seat1: list[int]) -> set[str]:
        s = position([MINE, seat1, SEAT2], [1, 0, 0, 0, 0])
        return names(table_ii_moves(GAME, s, True, True)) - names(table_ii_moves(GAME, s, True))

    # the first playable card (Y1) shares its rank and colour; R2 is alone in rank: its rank (rule 2 would
    # tell the first playable card, Y1)
    assert added([card("Y", 1), card("Y", 1), card("R", 2), card("W", 4), card("W", 3)]) == {
        "(Reveal player +1 rank 2)"}
    # Y1 shares rank 1 with G1 (playable too) but is the only yellow: the first, Y1, by colour
    assert added([card("Y", 1), card("G", 1), card("G", 3), card("W", 4), card("W", 3)]) == {
        "(Reveal player +1 color Y)"}
    # every playable card of seat 1 (two W1s) shares its rank and its colour: no such hint
    seat1 = [card("W", 1), card("W", 1), card("G", 3), card("Y", 4), card("R", 4)]
    s = position([MINE, seat1, SEAT2], [1, 0, 0, 0, 0])
    assert names(table_ii_moves(GAME, s, True, True)) == names(table_ii_moves(GAME, s, True))
    with pytest.raises(ValueError, match="single_card_hint"):
        MctsConfig(rule_moves=True, single_card_hint=True)
