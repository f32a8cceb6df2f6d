"""Engine properties over every registered config (OpenSpiel games_sim style), plus determinism,
resets, checked-mode errors and the search-support functions against plain per-game references."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from conftest import CONFIGS

from lbs.hanabi import (
    REVEAL_COLOR,
    BatchedHanabi,
    GameConfig,
    HanabiState,
    IllegalMoveError,
    hand_fits,
    initial_state,
    legal_moves,
    random_moves,
    remaining_counts,
    reset,
    set_hand,
    shuffled_decks,
    step,
    unseen_counts,
)
from lbs.hanabi.engine import check_decks, moves_left_bound, tables

PARAMS = {"argvalues": list(CONFIGS.values()), "ids": list(CONFIGS.keys())}


def some(*names: str) -> dict:
    """parametrize kwargs for a subset of CONFIGS."""
    return {"argvalues": [CONFIGS[n] for n in names], "ids": list(names)}


def card_census(cfg: GameConfig, st: HanabiState) -> torch.Tensor:
    """[B, T] copies of each card id across undealt deck, hands, discards and fireworks."""
    t = cfg.card_types
    j = torch.arange(cfg.num_cards)
    undealt = torch.where(j >= st.deck_pos[:, None], st.deck.long(), -1)
    where = torch.cat([undealt, st.hands.long().flatten(1)], dim=1)
    counts = torch.zeros(st.batch_size, t, dtype=torch.long).scatter_add_(
        1, where.clamp(min=0), (where >= 0).long()
    )
    played = (torch.arange(cfg.ranks) < st.fireworks.long()[:, :, None]).flatten(1).long()  # [B, C*R]
    return counts + st.discards.long() + played


def playout(cfg: GameConfig, seeds: torch.Tensor, policy=random_moves):
    """Random lockstep games to the end: (states, moves, rewards, dones) per step."""
    st = reset(cfg, seeds)
    states, moves, rewards, dones = [st], [], [], []
    while not bool(st.done.all()):
        m = policy(cfg, st, seeds)
        st, r, d = step(cfg, st, m)
        states.append(st)
        moves.append(m)
        rewards.append(r)
        dones.append(d)
        assert len(moves) <= cfg.max_steps + 1, "games did not end"
    return states, moves, rewards, dones


# ---- random playouts -------------------------------------------------------------------------------
@pytest.mark.parametrize("cfg", **PARAMS)
def test_random_playouts_keep_invariants(cfg):
    seeds = torch.arange(48) + 11
    states, moves, rewards, dones = playout(cfg, seeds)
    all_cards = torch.tensor(cfg.card_counts).expand(len(seeds), -1)
    total = torch.zeros(len(seeds))
    prev = states[0]
    assert torch.equal(card_census(cfg, prev), all_cards)
    for st, m, r, d in zip(states[1:], moves, rewards, dones, strict=True):
        legal = legal_moves(cfg, prev)
        assert torch.equal(legal.any(1), ~prev.done), "a live game must have a legal move"
        assert bool(legal.gather(1, m[:, None]).squeeze(1)[~prev.done].all())
        # finished games are frozen
        assert bool((r[prev.done] == 0).all())
        assert prev.index(prev.done.nonzero().flatten()).equal(st.index(prev.done.nonzero().flatten()))
        assert torch.equal(d, st.done) and bool((st.done | ~prev.done).all())
        assert torch.equal(card_census(cfg, st), all_cards)
        assert bool(((st.score >= 0) & (st.score <= cfg.max_score)).all())
        assert bool(((st.info_tokens >= 0) & (st.info_tokens <= cfg.max_info_tokens)).all())
        assert bool(((st.life_tokens >= 0) & (st.life_tokens <= cfg.max_life_tokens)).all())
        assert bool(((st.hands >= 0).sum(2) <= cfg.hand_size).all())
        total += r
        prev = st
    assert torch.equal(total, prev.score.float())
    assert bool((prev.num_steps <= cfg.max_steps).all())
    assert bool(prev.done.all()) and not bool(legal_moves(cfg, prev).any())
    # every game ends by bombing out, a perfect score, or the final round after the deck ran out
    ended = (prev.life_tokens == 0) | (prev.fireworks.sum(1) == cfg.max_score) | (prev.turns_left <= 0)
    assert bool(ended.all())


@pytest.mark.parametrize("cfg", **PARAMS)
def test_state_batch_operations(cfg):
    states, *_ = playout(cfg, torch.arange(6))
    st = states[len(states) // 2]
    twin = st.clone()
    assert twin.equal(st)
    twin.hands[0, 0, 0] = -2
    assert not twin.equal(st), "clone must not share storage"
    idx = torch.tensor([3, 0, 3])
    picked = st.index(idx)
    assert picked.batch_size == 3 and picked.index(torch.tensor([1])).equal(st.index(torch.tensor([0])))
    assert picked.index(torch.tensor([0])).equal(picked.index(torch.tensor([2])))
    rep = st.replicate(4)
    assert rep.batch_size == 4 * st.batch_size
    assert rep.equal(st.index(torch.arange(st.batch_size).repeat_interleave(4)))
    other = states[0]
    mask = torch.tensor([True, False, True, False, False, True])
    mixed = st.where(mask, other)
    for g in range(st.batch_size):
        src = st if mask[g] else other
        assert mixed.index(torch.tensor([g])).equal(src.index(torch.tensor([g])))
    both = HanabiState.cat([st, other])
    assert both.index(torch.arange(6)).equal(st) and both.index(torch.arange(6, 12)).equal(other)


# ---- determinism ---------------------------------------------------------------------------------
@pytest.mark.parametrize("cfg", **some("p2", "p4", "p2_c1_r3"))
def test_batch_size_independence(cfg):
    seeds = torch.arange(64) * 7 + 5
    big, *_ = playout(cfg, seeds)
    for g in (0, 17, 63):
        small, *_ = playout(cfg, seeds[g : g + 1])
        for t, s in enumerate(small):
            assert s.equal(big[t].index(torch.tensor([g]))), (g, t)
        # after the small game ends the big batch may run on; game g must stay frozen
        assert big[-1].index(torch.tensor([g])).equal(small[-1])


def test_same_seed_same_games_different_seeds_differ():
    cfg = CONFIGS["p2"]
    seeds = torch.arange(32)
    a, ma, *_ = playout(cfg, seeds)
    b, mb, *_ = playout(cfg, seeds.clone())
    assert len(a) == len(b) and all(x.equal(y) for x, y in zip(a, b, strict=True))
    assert all(torch.equal(x, y) for x, y in zip(ma, mb, strict=True))
    c, *_ = playout(cfg, seeds + 1000)
    assert not torch.equal(a[0].deck, c[0].deck)
    # every game in a batch gets its own deck, and episodes give fresh decks for the same seed
    decks = shuffled_decks(cfg, seeds, torch.zeros_like(seeds))
    assert len({tuple(d.tolist()) for d in decks}) == len(seeds)
    assert not bool((decks == shuffled_decks(cfg, seeds, torch.ones_like(seeds))).all(1).any())
    check_decks(cfg, decks)


@pytest.mark.parametrize("cfg", **PARAMS)
def test_reset_from_explicit_decks(cfg):
    n, p, h = cfg.num_cards, cfg.players, cfg.hand_size
    sorted_deck = torch.tensor([c for c, k in enumerate(cfg.card_counts) for _ in range(k)])
    decks = torch.stack([sorted_deck, sorted_deck.flip(0)])
    st = initial_state(cfg, decks)
    assert torch.equal(st.hands.long(), decks[:, : p * h].reshape(2, p, h))
    assert torch.equal(st.deck_pos.long(), torch.full((2,), p * h))
    assert torch.equal(remaining_counts(cfg, st).sum(1), torch.full((2,), n - p * h))
    assert bool((st.cur_player == 0).all()) and not bool(st.done.any())
    assert bool((st.info_tokens == cfg.max_info_tokens).all())
    assert bool((st.life_tokens == cfg.max_life_tokens).all())
    env = BatchedHanabi(cfg, 2, seed=1)
    assert env.reset(decks).equal(st)
    bad = decks.clone()
    bad[0, 0] = bad[0, -1]  # one card twice, another missing
    with pytest.raises(ValueError, match="not permutations"):
        env.reset(bad)
    with pytest.raises(ValueError, match=rf"\[B, {n}\]"):
        env.reset(decks[:, :-1])


@pytest.mark.parametrize("cfg", **some("p2_c1_r3", "p3"))
def test_auto_reset_starts_fresh_games(cfg):
    b = 16
    env = BatchedHanabi(cfg, b, seed=4)
    seeds = env.seeds
    first = env.state.clone()
    assert env.state.equal(reset(cfg, seeds, torch.zeros_like(seeds)))
    finished = torch.zeros(b, dtype=torch.bool)
    for _ in range(cfg.max_steps * 3):
        before = env.state.clone()
        res = env.step(random_moves(cfg, env.state, seeds))
        if bool(res.done.any()):
            g = res.done.nonzero().flatten()
            fresh = reset(cfg, seeds, env.episodes)
            assert env.state.index(g).equal(fresh.index(g))
            assert bool((env.state.num_steps[g] == 0).all())
            assert bool((res.length[g] == before.num_steps[g] + 1).all())
            assert bool((res.score[g] >= 0).all())
        finished |= res.done
        assert not bool(env.state.done.any())
    assert bool(finished.all())
    assert bool((env.episodes >= 1).all())
    # a finished game's next deck is the seeded one for the new episode, not the first one again
    assert not bool((env.state.deck == first.deck).all(1).any())


# ---- checked mode ----------------------------------------------------------------------------------
def _fixed_deck_state(cfg: GameConfig) -> HanabiState:
    """Two games dealt from a sorted deck: player 1 then holds no card of the last colour."""
    sorted_deck = torch.tensor([c for c, k in enumerate(cfg.card_counts) for _ in range(k)])
    return initial_state(cfg, torch.stack([sorted_deck, sorted_deck]))


def test_checked_mode_names_game_and_move():
    cfg = CONFIGS["p2"]
    st = _fixed_deck_state(cfg)
    h, c = cfg.hand_size, cfg.colors
    hint_last_colour = 2 * h + c - 1  # player +1, last colour: player 1 holds only low colours
    assert cfg.move_name(hint_last_colour) == "(Reveal player +1 color B)"
    ok = torch.tensor([h, h])  # play slot 0 in both games
    step(cfg, st, ok, checked=True)
    cases = [
        (st, torch.tensor([h, 0]), r"game 1: move 0 \(Discard 0\)"),  # discard at max tokens
        (st, torch.tensor([hint_last_colour, h]), r"game 0: move \d+ \(Reveal player \+1 color B\)"),
        (st.replace(info_tokens=torch.tensor([cfg.max_info_tokens, 0])), torch.tensor([h, 2 * h]),
         r"game 1: move 10 \(Reveal player \+1 color R\)"),  # hint with no token
        (st, torch.tensor([cfg.num_moves, h]), rf"game 0: move {cfg.num_moves} <invalid"),
        (st, torch.tensor([h, -1]), r"game 1: move -1 <invalid"),
    ]
    short = st.clone()
    short.hands[1, 0, h - 1] = -1  # player 0 of game 1 holds one card less
    cases.append((short, torch.tensor([h, 2 * h - 1]), r"game 1: move 9 \(Play 4\)"))
    for state, moves, message in cases:
        with pytest.raises(IllegalMoveError, match=message):
            step(cfg, state, moves, checked=True)
    # an illegal move in a finished game is ignored
    over = st.replace(done=torch.tensor([False, True]))
    step(cfg, over, torch.tensor([h, 0]), checked=True)
    env = BatchedHanabi(cfg, 2, checked=True)
    with pytest.raises(IllegalMoveError, match="game 0"):
        env.step(torch.tensor([0, h]))


# ---- search support against plain per-game references ---------------------------------------------
def _ref_unseen(cfg: GameConfig, st: HanabiState, g: int, player: int) -> Counter:
    deck = st.deck[g].tolist()[int(st.deck_pos[g]) :]
    own = [x for x in st.hands[g, player].tolist() if x >= 0]
    return Counter(deck) + Counter(own)


@pytest.mark.parametrize("cfg", **some("p2", "p3", "p2_c1_r3"))
def test_hand_fits_and_unseen_counts_match_reference(cfg):
    states, *_ = playout(cfg, torch.arange(10) + 3)
    gen = torch.Generator().manual_seed(0)
    for st in states[:: max(1, len(states) // 6)]:
        b = st.batch_size
        player = torch.randint(0, cfg.players, (b,), generator=gen)
        unseen = unseen_counts(cfg, st, player)
        own = st.hands.gather(1, player[:, None, None].expand(-1, 1, cfg.hand_size)).squeeze(1)
        # candidates: the true hand, a shuffled unseen sample, and random card ids (often impossible)
        rand = torch.randint(0, cfg.card_types, own.shape, generator=gen)
        for cand in (own, rand, own.flip(1)):
            cand = torch.where(own >= 0, cand, -1)
            fits = hand_fits(cfg, st, player, cand)
            for g in range(b):
                ref = _ref_unseen(cfg, st, g, int(player[g]))
                assert unseen[g].tolist() == [ref[x] for x in range(cfg.card_types)]
                need = Counter(x for x in cand[g].tolist() if x >= 0)
                assert bool(fits[g]) == all(need[x] <= ref[x] for x in need), (g, cand[g])
        assert bool(hand_fits(cfg, st, player, own).all())


@pytest.mark.parametrize("cfg", **some("p2", "p3", "p2_c2"))
def test_set_hand_keeps_deck_consistent(cfg):
    states, *_ = playout(cfg, torch.arange(12) + 40)
    all_cards = torch.tensor(cfg.card_counts).expand(12, -1)
    for st in states[: len(states) // 2 : 5]:
        live = ~st.done
        player = st.cur_player.long()
        own = st.hands.gather(1, player[:, None, None].expand(-1, 1, cfg.hand_size)).squeeze(1)
        # a new hand from the cards the player cannot see: the lowest card ids among undealt + own
        j = torch.arange(cfg.num_cards)
        unseen = torch.cat([torch.where(j >= st.deck_pos[:, None], st.deck, -1), own], dim=1)
        lowest = torch.where(unseen >= 0, unseen, cfg.card_types).sort(dim=1).values[:, : cfg.hand_size]
        cards = torch.where(own >= 0, lowest, -1)
        assert bool(hand_fits(cfg, st, player, cards)[live].all())
        seeds = torch.arange(12) + 99
        new = set_hand(cfg, st, player, cards, seeds)
        assert torch.equal(new.hands[torch.arange(12), player], cards)
        others = torch.arange(cfg.players)[None, :] != player[:, None]
        assert torch.equal(new.hands[others], st.hands[others])
        dealt = j[None, :] < st.deck_pos[:, None]
        assert bool((new.deck[dealt] == -1).all())  # no trace of the true deal order
        assert torch.equal(card_census(cfg, new), all_cards)
        assert torch.equal(unseen_counts(cfg, new, player), unseen_counts(cfg, st, player))
        for g in range(12):
            want = _ref_unseen(cfg, st, g, int(player[g])) - Counter(x for x in cards[g].tolist() if x >= 0)
            got = Counter(x for x in new.deck[g].tolist()[int(st.deck_pos[g]) :])
            assert got == want, g
        again = set_hand(cfg, st, player, cards, seeds)
        assert again.equal(new), "the reshuffle is a function of the seed"
        # ... and of what the player sees: another undealt order, or another hand of theirs, gives the same
        for other in (set_hand(cfg, st, player, own, seeds + 5), set_hand(cfg, st, player, cards, seeds + 7)):
            assert set_hand(cfg, other, player, cards, seeds).equal(new)
        other_seed = set_hand(cfg, st, player, cards, seeds + 1)
        left = (cfg.num_cards - st.deck_pos) >= 4
        if bool(left.any()):
            assert not torch.equal(other_seed.deck[left], new.deck[left])
        # the new state plays on legally
        moved, _, _ = step(cfg, new, random_moves(cfg, new, seeds), checked=True)
        assert torch.equal(card_census(cfg, moved), all_cards)


# ---- scoring rules ---------------------------------------------------------------------------------
def _play_heavy(cfg: GameConfig, st: HanabiState, seeds: torch.Tensor) -> torch.Tensor:
    """Play slot 0 half the time (to bomb out fast), otherwise a random legal move."""
    coin = random_moves(cfg, st, seeds + 7) % 2 == 0
    return torch.where(coin, cfg.hand_size, random_moves(cfg, st, seeds))


@pytest.mark.parametrize("bomb_zero", [True, False])
def test_bombing_out_score(bomb_zero):
    cfg = GameConfig(players=2, bomb_zero=bomb_zero)
    states, _, rewards, _ = playout(cfg, torch.arange(64), policy=_play_heavy)
    final = states[-1]
    bombed = final.life_tokens == 0
    fw = final.fireworks.sum(1)
    assert bool((bombed & (fw > 0)).any()), "the test needs a game that bombed with cards played"
    total = torch.stack(rewards).sum(0)
    assert torch.equal(total, final.score.float())
    if bomb_zero:
        assert bool((final.score[bombed] == 0).all())
    else:
        assert torch.equal(final.score, fw)
    assert torch.equal(final.score[~bombed], fw[~bombed])


# ---- how long a game can still last ------------------------------------------------------------------
def _hint_hog(cfg: GameConfig, st: HanabiState, seeds: torch.Tensor) -> torch.Tensor:
    """The longest game: hint whenever a token is left, otherwise discard slot 0 (never play)."""
    hints = legal_moves(cfg, st) & (tables(cfg, st.device).move_type >= REVEAL_COLOR)
    return torch.where(hints.any(1), hints.long().argmax(1), 0)  # move 0: discard slot 0


@pytest.mark.parametrize("cfg", **PARAMS)
@pytest.mark.parametrize("policy", [random_moves, _play_heavy, _hint_hog], ids=["random", "play", "hint"])
def test_moves_left_bound_holds_at_every_step(cfg, policy):
    states, _, _, _ = playout(cfg, torch.arange(32), policy=policy)
    length = states[-1].num_steps
    assert int(length.max()) < cfg.max_steps
    for st in states:
        bound = moves_left_bound(cfg, st)
        assert bool((length - st.num_steps <= bound).all())
        assert bool((bound[st.done] == 0).all())
    if policy is _hint_hog:  # the bound is reached: it cannot be tightened from these counts
        assert torch.equal(length, moves_left_bound(cfg, states[0]))
