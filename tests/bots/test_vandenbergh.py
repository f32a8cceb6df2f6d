"""The Van den Bergh rule policy: on hand-built positions each rule fires as written, and whole games on the
full rules score in the range the RIS-MCTS paper reports for it."""

from __future__ import annotations

import pytest
import torch

from lbs.acting import StatePolicy, env_moves, greedy, play, seat_q
from lbs.bots import VanDenBergh
from lbs.bots.vandenbergh import state_view, view
from lbs.hanabi import GameConfig, engine
from lbs.hanabi.encode import current_observer, encode
from lbs.hanabi.state import HanabiState
from lbs.seeding import Stream, game_seeds

GAME = GameConfig(players=3, bomb_zero=False)  # hand size 5, colours R Y G W B, ranks 1-5
R = GAME.ranks
pytestmark = pytest.mark.usefixtures("one_thread")


def card(colour: int, rank: int) -> int:
    """Card id of a colour index and a rank 1-5."""
    return colour * R + rank - 1


FILLER = [card(3, 4), card(4, 4), card(3, 3), card(4, 3), card(2, 4)]
"""Cards no rule reads on an empty board (neither playable nor useless), unhinted."""


def position(hands: list[list[int]], fireworks: list[int] | None = None, hints: int = 8, lives: int = 3,
             mover: int = 0, known: dict | None = None, rank_told: tuple = (), colour_told: tuple = ()
             ) -> HanabiState:
    """One game in a hand-built position. known: {(player, slot): (colours, ranks)} narrows that card's
    HLE knowledge to those colour indices and ranks (1-5); rank_told / colour_told: (player, slot) pairs a
    positive hint of that kind touched."""
    s = engine.reset(GAME, game_seeds(Stream.EVAL, 0, 1))
    cp, rp = torch.ones_like(s.color_plausible), torch.ones_like(s.rank_plausible)
    for (p, slot), (colours, ranks) in (known or {}).items():
        cp[0, p, slot] = torch.tensor([c in colours for c in range(GAME.colors)])
        rp[0, p, slot] = torch.tensor([r + 1 in ranks for r in range(R)])
    ch, rh = torch.full_like(s.color_hinted, -1), torch.full_like(s.rank_hinted, -1)
    hand = torch.tensor([hands])
    for p, slot in rank_told:
        rh[0, p, slot] = hand[0, p, slot] % R
    for p, slot in colour_told:
        ch[0, p, slot] = hand[0, p, slot] // R
    return s.replace(hands=hand, fireworks=torch.tensor([fireworks or [0] * GAME.colors]),
                     info_tokens=torch.tensor([hints]), life_tokens=torch.tensor([lives]),
                     cur_player=torch.tensor([mover]), color_plausible=cp, rank_plausible=rp,
                     color_hinted=ch, rank_hinted=rh)


def move_of(state: HanabiState) -> str:
    bot = VanDenBergh(GAME)
    _, legal, q, _ = seat_q(GAME, state, bot.step, bot.initial_state(GAME.players))
    act = greedy(q, legal.reshape(GAME.players, -1)).reshape(1, GAME.players)
    return GAME.move_name(int(act[0, int(state.cur_player[0])]))


def test_rule_1_plays_the_likeliest_card_at_60_percent_with_lives_to_spare_else_only_a_certain_one():
    others = [FILLER, FILLER[::-1]]
    # slot 2 is a known 1; with red and yellow 1 played, 9 of the 13 unseen 1s are playable (0.69)
    odds = dict(hands=[FILLER, *others], fireworks=[1, 1, 0, 0, 0], known={(0, 2): (range(5), (1,))})
    assert move_of(position(**odds)) == "(Play 2)"
    assert move_of(position(**odds, lives=1)) != "(Play 2)"  # 0.69 is not certain
    # with green played too, 6 of 12 (0.5): below the threshold
    assert move_of(position(**{**odds, "fireworks": [1, 1, 1, 0, 0]})) != "(Play 2)"
    # certain: a known white 1 on an empty board is played with one life left, the oldest certain card first
    sure = {(0, 1): ((3,), (1,)), (0, 3): ((4,), (1,))}
    assert move_of(position(hands=[FILLER, *others], known=sure, lives=1)) == "(Play 1)"
    # ties at the top chance go to the newest card
    assert move_of(position(hands=[FILLER, *others], known=sure)) == "(Play 3)"


def test_rule_2_discards_a_certainly_useless_card_as_the_framework_tests_it():
    others = [FILLER, FILLER[::-1]]
    # a known 1 with every firework at 1 or more: rank at most the lowest firework
    base = dict(hands=[FILLER, *others], fireworks=[1, 1, 1, 1, 2], hints=5, known={(0, 0): (range(5), (1,))})
    assert move_of(position(**base)) == "(Discard 0)"
    assert move_of(position(**{**base, "hints": 8})) != "(Discard 0)"  # no discard at full tokens
    # a known red 2 with red at 2 is useless (the firework has reached its rank); a known red 3 is not
    fw = [2, 0, 0, 0, 0]
    assert move_of(position(hands=[FILLER, *others], fireworks=fw, hints=5,
                            known={(0, 4): ((0,), (2,))})) == "(Discard 4)"
    assert "Discard 4" not in move_of(position(hands=[FILLER, *others], fireworks=fw, hints=5,
                                               known={(0, 4): ((0,), (3,))}))
    # a known red 3 with both red 2s discarded (red at 1) can never be played
    dead = position(hands=[FILLER, *others], fireworks=[1, 0, 0, 0, 0], hints=5, known={(0, 1): ((0,), (3,))})
    dead = dead.replace(discards=dead.discards.index_fill(1, torch.tensor([card(0, 2)]), 2))
    assert move_of(dead) == "(Discard 1)"


def test_rule_3_tells_the_first_playable_card_its_rank_then_its_colour_unless_known():
    playable = [FILLER[0], FILLER[1], FILLER[2], card(1, 1), FILLER[4]]  # yellow 1 in slot 3
    hands = [FILLER, FILLER[::-1], playable]  # offset 1 has none, offset 2 has it
    assert move_of(position(hands=hands, hints=3)) == "(Reveal player +2 rank 1)"
    rank_1 = {(2, 3): (range(5), (1,))}  # a rank is known when one is left possible
    assert move_of(position(hands=hands, hints=3, known=rank_1)) == "(Reveal player +2 color Y)"
    fully = position(hands=hands, hints=3, known={(2, 3): ((1,), (1,))})
    assert "player +2" not in move_of(fully) or "rank 1" not in move_of(fully)  # a fully told card is skipped
    assert "Reveal" not in move_of(position(hands=hands, hints=0))


def test_no_rule_hints_a_useless_card_and_rule_4_counts_only_new_information():
    fw = [2, 2, 2, 2, 2]  # 3s are playable: nobody holds one below
    plain = [card(3, 4), card(4, 4), card(2, 4), card(1, 5), card(0, 4)]
    junk = [card(3, 4), card(0, 1), card(2, 4), card(1, 5), card(0, 4)]  # red 1 in slot 1: useless
    hands = [plain, junk, plain[::-1]]
    # the framework's paper agent has no useless-card hint: the hint telling most cards (rank 4: four cards
    # of seat 2) is given, not seat 1's rank 1
    assert move_of(position(hands=hands, fireworks=fw, hints=3)) == "(Reveal player +2 rank 4)"
    # seat 2 knows the ranks of its four 4s already: its rank 4 tells nothing new, so seat 1's (three) does
    fours = [(2, 0), (2, 2), (2, 3), (2, 4)]
    told = position(hands=hands, fireworks=fw, hints=3, rank_told=fours,
                    known={slot: (range(5), (4,)) for slot in fours})
    assert move_of(told) == "(Reveal player +1 rank 4)"


def test_rule_4_tells_the_hint_touching_most_cards_by_absolute_seat_ranks_first():
    fw = [2, 2, 2, 2, 2]
    three_blue = [card(4, 4), card(4, 5), card(3, 4), card(4, 4), card(1, 5)]  # blue x3, rank 4 x3
    three_fives = [card(0, 5), card(2, 5), card(3, 5), card(0, 4), card(1, 4)]  # rank 5 x3, rank 4 x2
    # the mover is seat 1: seat 2 (offset 1) is scanned after seat 0 (offset 2); both best hints touch 3
    s = position(hands=[three_blue, FILLER, three_fives], fireworks=fw, hints=3, mover=1)
    assert move_of(s) == "(Reveal player +2 rank 4)"  # seat 0 first, and its rank 4 before its colour blue


def test_rule_5_discards_the_likeliest_useless_card_newest_on_ties():
    s = position(hands=[FILLER, FILLER, FILLER[::-1]], hints=0)
    assert move_of(s) == "(Discard 4)"
    half = position(hands=[FILLER, FILLER, FILLER[::-1]], fireworks=[3, 3, 3, 3, 3], hints=0,
                    known={(0, 1): (range(5), (4, 5))})  # slot 1 can be no 1-3 (every other slot might be)
    assert move_of(half) == "(Discard 4)"


@pytest.mark.parametrize("players, low, high", [(2, 12.3, 15.3), (3, 16.5, 19.0), (4, 16.0, 18.5)])
def test_self_play_scores_as_the_paper_reports(players, low, high):
    """The paper's Table III (the competition framework's implementation, points kept on the last life):
    13.8 with 2 players, 17.7 with 3, 17.2 with 4; 64 deals, each bound about 4 standard errors wide."""
    game = GameConfig(players=players, bomb_zero=False)
    bot = VanDenBergh(game)
    state = engine.reset(game, game_seeds(Stream.EVAL, 3, 64))
    final, _ = play(game, state, bot.step, bot.initial_state(64 * players), game.max_steps)
    assert final.done.all()
    assert low < float(final.fireworks.sum(1).double().mean()) < high


@pytest.mark.parametrize("players", [2, 4, 5])
def test_reading_the_state_makes_the_moves_of_every_seats_step(players):
    """act (the mover's view read off the state) makes step's move (every seat's encoded view) in every
    position of 32 self-play games, finished games included, and self-play through either plays the same
    games."""
    game = GameConfig(players=players, bomb_zero=False)
    bot = VanDenBergh(game)
    state = engine.reset(game, game_seeds(Stream.EVAL, 5, 32))
    hid = bot.initial_state(32 * players)
    while not bool(state.done.all()):
        _, legal, q, _ = seat_q(game, state, bot.step, hid)
        by_step = env_moves(game, state, greedy(q, legal.reshape(q.shape[0], -1)).reshape(32, players))
        by_state, same = bot.act(state, hid)
        assert torch.equal(by_state, by_step) and same is hid
        state, _, _ = engine.step(game, state, by_step)
    fresh = engine.reset(game, game_seeds(Stream.EVAL, 5, 32))
    final, _ = play(game, fresh, StatePolicy(bot.act), hid, game.max_steps)
    assert final.equal(state)


@pytest.mark.parametrize("players", [2, 3, 4, 5])
def test_the_state_view_is_the_view_of_the_movers_encoded_observation(players):
    """state_view (read_state and the knowledge bits, no observation encoded) equals view of the mover's
    canonical observation in every field, at every position of 16 self-play games, with convention marks
    and left-out copies too."""
    game = GameConfig(players=players, bomb_zero=False)
    bot = VanDenBergh(game)
    state = engine.reset(game, game_seeds(Stream.EVAL, 9, 16))
    gen = torch.Generator().manual_seed(players)
    while not bool(state.done.all()):
        obs = encode(game, state, current_observer(state))[:, 0]
        marked = torch.rand(16, game.hand_size, generator=gen) < 0.3
        left_out = torch.randint(0, 2, (16, game.card_types), generator=gen)
        for kw in ({}, {"marked": marked, "left_out": left_out}):
            a, b = view(game, obs, **kw), state_view(game, state, **kw)
            for name, x, y in zip(a._fields, a, b, strict=True):
                assert torch.equal(x, y), name
        state, _, _ = engine.step(game, state, bot.act(state, bot.initial_state(16 * players))[0])
