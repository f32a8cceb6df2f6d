"""Search on SmartBot: its exact range against a brute force through the ordinary game code, and SPARTA
with it (the same decisions as LBS-inf on the range, none depending on the searcher's true cards).

The brute force knows nothing of the range: late in a game (few undealt cards) it lists every deck the
searcher cannot tell from the real one (the hidden cards, its own hand and the undealt ones, arranged
over their positions in every distinct way), replays the real moves on each with SmartBot in every seat
through acting's step (test_exact_range.DeckReference) and keeps the decks under which the searcher sees
what it saw and SmartBot makes every partner move; each deck is equally likely, so a hand's posterior is
its share of the kept decks.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
import torch
from conftest import DEVICES
from test_exact_range import DeckReference, assert_same, counting_posterior, game_of, play_games, range_dict

from lbs.acting import play, seat_q
from lbs.bots import SmartBot
from lbs.graphs import Graphs
from lbs.hanabi import GameConfig, engine
from lbs.hanabi.config import DISCARD, PLAY
from lbs.infer import InferenceServer, QNetHandle
from lbs.models import BeliefConfig, BeliefModel, NetConfig, make_qnet
from lbs.search import play as searched
from lbs.search import step_filter
from lbs.search.config import FieldError, Mode, SearchConfig
from lbs.search.exact_range import ExactRange
from lbs.search.rollouts import rollout_returns
from lbs.search.setup import SearchSetup, check_blueprint

pytestmark = pytest.mark.usefixtures("one_thread")

SMALL = {
    "p2_c3_r3_h3": GameConfig(players=2, colors=3, ranks=3, hand_size=3),
    "p3_c3_r3_h2": GameConfig(players=3, colors=3, ranks=3, hand_size=2),
}
HIDDEN = 5
"""The brute force starts once the searcher's hand and the undealt cards are at most this many."""


def served(net, device: str = "cpu") -> QNetHandle:
    return InferenceServer(net, device).qnet()


def hand_positions(game: GameConfig, states: list, moves: torch.Tensor, g: int, seat: int,
                   t: int) -> list[int]:
    """Deck positions of the cards the searcher holds before move t of game g, from the states before each
    move and the moves [G, T] (deal: H per player in seat order; a played or discarded card leaves its
    slot, later ones shift left, a drawn card goes last)."""
    h = game.hand_size
    hands = [[p * h + s for s in range(h)] for p in range(game.players)]
    info = engine.tables(game, torch.device("cpu")).move_info
    for k in range(t):
        st = game_of(states[k], g)
        kind, slot = (int(x) for x in info[int(moves[g, k])][:2])
        if kind in (PLAY, DISCARD):
            del hands[int(st.cur_player[0])][slot]
            if int(states[k + 1].deck_pos[g]) > int(st.deck_pos[0]):
                hands[int(st.cur_player[0])].append(int(st.deck_pos[0]))
    return hands[seat]


def history(turns) -> tuple[list, torch.Tensor]:
    """(states before each move and the last one after, moves [G, T]) of recorded turns."""
    return [tu.state for tu in turns] + [turns[-1].next_state], torch.stack([tu.move for tu in turns], 1)


def hidden_decks(game: GameConfig, deck: torch.Tensor, positions: list[int]) -> torch.Tensor:
    """[D, N] every distinct arrangement of the cards at `positions` of deck [N] over those positions."""
    cards = [int(deck[i]) for i in positions]
    out = []
    for order in sorted(set(itertools.permutations(cards))):
        d = deck.clone()
        d[positions] = torch.tensor(order)
        out.append(d)
    return torch.stack(out)


def late_start(game: GameConfig, turns, g: int, seat: int) -> int | None:
    """The first move at which the searcher's hand plus the undealt cards are at most HIDDEN."""
    for t, turn in enumerate(turns):
        st = game_of(turn.state, g)
        if bool(st.done[0]):
            return None
        held = int((st.hands[0, seat] >= 0).sum())
        if held + game.num_cards - int(st.deck_pos[0]) <= HIDDEN:
            return t
    return None


def count_reads(monkeypatch) -> list[int]:
    """Counts the games in which a partner's state read the searcher's cards (the finesse read)."""
    hits = [0]
    advance = step_filter.StepPolicy.advance

    def counted(self, state, hid):
        new, reads = advance(self, state, hid)
        hits[0] += int(reads.sum())
        return new, reads

    monkeypatch.setattr(step_filter.StepPolicy, "advance", counted)
    return hits


def play_deviating(game: GameConfig, net: SmartBot, n: int, seed: int, seat: int, eps: float) -> list:
    """n games of SmartBot in every seat but `seat`, which makes a uniformly random legal move instead of
    SmartBot's on a share eps of its turns (as a searcher does when it deviates), every turn recorded."""
    turns: list = []
    gen = torch.Generator().manual_seed(seed)

    def q_fn(priv, publ, legal, hid):
        q, hid = net.step(priv, publ, legal, hid)
        rows = torch.arange(q.shape[0])
        off = (rows % game.players == seat) & (torch.rand(q.shape[0], generator=gen) < eps)
        return torch.where(off[:, None], torch.rand(q.shape, generator=gen), q), hid

    with torch.no_grad():
        state = engine.reset(game, torch.arange(n) + 1000 * seed)
        play(game, state, q_fn, net.initial_state(n * game.players), game.max_steps, hook=turns.append)
    return turns


@pytest.mark.parametrize("eps", [0.0, 0.35], ids=["blueprint", "deviating"])
@pytest.mark.parametrize("name", sorted(SMALL))
def test_range_equals_brute_force_late_in_many_games(name: str, eps: float, monkeypatch) -> None:
    """Also when the searcher leaves the blueprint (eps: the share of its moves that are random): the
    partners then read moves their conventions did not expect, and the range must follow them."""
    game = SMALL[name]
    net = SmartBot(game)
    n = 16
    reads = count_reads(monkeypatch)
    compared = filtered = 0
    for seat in range(game.players):
        turns = play_deviating(game, net, n, 11, seat, eps)
        rng = ExactRange(game, served(net), seat, checked=True)  # checked: the true hand stays in it
        rng.reset(turns[0].state)
        refs: dict[int, tuple[int, DeckReference]] = {}
        states, moves = history(turns)
        for g in range(n):
            t0 = late_start(game, turns, g, seat)
            if t0 is not None:
                pos = hand_positions(game, states, moves, g, seat, t0)
                pos += list(range(int(states[t0].deck_pos[g]), game.num_cards))  # and the undealt cards
                decks = hidden_decks(game, turns[0].state.deck[g], pos)
                refs[g] = (t0, DeckReference(game, net, seat, game_of(turns[0].state, g), decks))
        for t, turn in enumerate(turns):
            rng.update(turn.state, turn.move, turn.next_state)
            for g, (t0, ref) in refs.items():
                if bool(turn.state.done[g]):
                    continue
                after = game_of(turn.next_state, g)
                ref.step(game_of(turn.state, g), int(turn.move[g]), after)
                if t + 1 >= t0:  # from here on the decks are every arrangement the searcher allows
                    want = ref.posterior()
                    assert_same(range_dict(rng, g), want, f"{name} seat {seat} game {g} after move {t}")
                    compared += 1
                    filtered += len(want) < len(counting_posterior(game, after, seat))
    assert compared > 100 and filtered > 0, (compared, filtered)
    assert reads[0] > 0, "no partner read the searcher's cards: the finesse read was never checked"


@pytest.mark.parametrize("device", DEVICES)
def test_true_hand_stays_in_the_range_over_whole_games(device: str, monkeypatch) -> None:
    """Every move of many games from the deal, every seat (checked raises if the true hand leaves, or if
    hands left in the range give a partner different states at a finesse read)."""
    game = GameConfig(players=3, colors=3, ranks=3, hand_size=3)
    net = SmartBot(game, device)
    turns = play_games(game, net, 48, seed=2, device=device)
    reads = count_reads(monkeypatch)
    for seat in range(game.players):
        rng = ExactRange(game, served(net, device), seat, checked=True)
        rng.reset(turns[0].state)
        for turn in turns:
            rng.update(turn.state, turn.move, turn.next_state)
    assert reads[0] > 0


def test_filter_chunks_are_a_memory_cap_only() -> None:
    """One candidate per step call gives the same range as the default chunks."""
    game = SMALL["p2_c3_r3_h3"]
    net = SmartBot(game)
    turns = play_games(game, net, 6, seed=4)
    out = []
    for max_bytes in (None, 1):
        rng = ExactRange(game, served(net), 1)
        rng.policy.max_bytes = max_bytes
        assert (rng.policy.chunk(torch.device("cpu")) == 1) == (max_bytes == 1)
        rng.reset(turns[0].state)
        for turn in turns[:12]:
            rng.update(turn.state, turn.move, turn.next_state)
        out.append(rng.probabilities())
    for a, b in zip(*out, strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_the_mover_view_keeps_what_the_whole_step_keeps(name: str) -> None:
    """The cheap filter (the mover's decision with each candidate's cards shown) keeps exactly the rows the
    whole step on every candidate's observations keeps, over whole games in every seat."""
    game = SMALL[name]
    net = SmartBot(game)
    turns = play_games(game, net, 24, seed=5)
    for seat in range(game.players):
        out = []
        for cheap in (True, False):
            rng = ExactRange(game, served(net), seat)
            assert rng.policy.cheap
            rng.policy.cheap = cheap
            rng.reset(turns[0].state)
            for turn in turns:
                rng.update(turn.state, turn.move, turn.next_state)
                out.append(rng.probabilities())
        half = len(out) // 2
        for a, b in zip(out[:half], out[half:], strict=True):
            for x, y in zip(a, b, strict=True):
                assert torch.equal(x, y)


@pytest.mark.parametrize("device", DEVICES)
def test_rollouts_play_smartbot_in_every_seat(device: str) -> None:
    """A rollout of the blueprint's own move from a real position, with the real deck and the real seats'
    states, plays out the real game: every seat is SmartBot through the same step, with the batch shrinking
    as games end (the CPU's eager loop) and through Graphs' fixed-length loop (captured on CUDA)."""
    game = SMALL["p2_c3_r3_h3"]
    net = SmartBot(game, device)
    n, p = 8, game.players
    state = engine.reset(game, torch.arange(n, device=device) + 40)
    hids = []

    def hook(turn):
        hids.append(turn)

    final, _ = play(game, state, net.step, net.initial_state(n * p), game.max_steps, hook=hook)
    t = 6
    root, move = hids[t].state, hids[t].move
    replay_hid = net.initial_state(n * p)  # the seats' states after reading the root's observation
    for k in range(t + 1):
        _, _, _, replay_hid = seat_q(game, hids[k].state, net.step, replay_hid)
    horizon = int(engine.moves_left_bound(game, root).max()) - 1
    want = (final.score - root.score).float()
    for graphs in (None, Graphs(torch.device(device))):
        got = rollout_returns(game, root, replay_hid, move, net.step, None, horizon, graphs)
        assert torch.equal(got, want)


def tiny_search(game: GameConfig) -> SearchConfig:
    return SearchConfig(rollouts=10 * game.num_moves, min_rollouts=10, max_rows=4096)


def test_sparta_and_lbs_inf_on_the_range_decide_the_same() -> None:
    game = SMALL["p2_c3_r3_h3"]
    net = SmartBot(game)
    cfg = tiny_search(game)
    with SearchSetup.of(game, net, "sparta", cfg) as sparta:
        a = searched.play_games(sparta, 4, seed=5, batch_games=4)
        rng = lambda: ExactRange(game, sparta.blueprint, cfg.seat)  # noqa: E731
        with SearchSetup.of(game, net, "lbs-inf", cfg, make_sampler=rng) as lbs:
            b = searched.play_games(lbs, 4, seed=5, batch_games=4)
    assert sum(r.searched for r in a) > 10 and sum(r.deviated for r in a) > 0
    for x, y in zip(a, b, strict=True):
        assert x.record.moves == y.record.moves and x.decisions == y.decisions


@pytest.mark.parametrize(("mode", "max_range", "blueprint"), [
    ("sparta", SearchConfig.max_range, "smartbot"), ("sparta", 1, "smartbot"),
    ("lbs-inf", SearchConfig.max_range, "smartbot"), ("lbs-inf", SearchConfig.max_range, "network")])
def test_no_peeking_with_another_hand_the_history_allows(mode: str, max_range: int, blueprint: str,
                                                         monkeypatch) -> None:
    """Swap the searcher's true hand, at one of its turns, for another hand of its range (so the history
    it saw is the same); replaying the game with search from the swapped deck makes every decision up to
    and including that turn the same (the range, the seats' states and the belief's sampler with its copy of
    SmartBot's card knowledge follow the history, not the cards). With max_range 1 every draw is a
    rejection draw through the pending filters. "network": a network blueprint (its belief names no
    conventions), so the sampler follows a SmartBot of its own beside the network (knowledge "smartbot")."""
    game = SMALL["p2_c3_r3_h3"]
    cfg = replace(tiny_search(game), max_range=max_range, knowledge="smartbot")
    n, seat = 4, cfg.seat
    torch.manual_seed(0)
    net = SmartBot(game) if blueprint == "smartbot" else make_qnet(game, NetConfig(hidden=16)).eval()
    model = BeliefModel(game, BeliefConfig(hidden=16, mlp_layers=1, lstm_layers=1, card_embed=4)).eval()
    with SearchSetup.of(game, net, mode, cfg, model) as setup:
        if mode != "sparta":
            want = net if blueprint == "smartbot" else setup.smartbot
            assert isinstance(want, SmartBot) and setup.sampler().knowledge is want
        first = searched.play_games(setup, n, seed=8, batch_games=n)
        decks = torch.tensor([r.record.deck for r in first])
        real = engine.initial_state(game, decks)
        # follow the recorded moves to a late turn of the searcher in every game, with a range
        rng = ExactRange(game, setup.blueprint, seat)
        rng.reset(real)
        states, moves = [real], torch.full((n, max(len(r.record.moves) for r in first)), -1)
        for g, r in enumerate(first):
            moves[g, : len(r.record.moves)] = torch.tensor(r.record.moves)
        swapped = decks.clone()
        turn = torch.full((n,), -1)
        for t in range(moves.shape[1]):
            st = states[-1]
            late = (st.cur_player == seat) & ~st.done & (st.deck_pos >= game.num_cards - 4) & (turn < 0)
            if bool(late.any()):
                hands, game_of_row, _ = rng.probabilities()
                for g in late.nonzero().flatten().tolist():
                    true = st.hands[g, seat]
                    others = [h for h, gg in zip(hands.tolist(), game_of_row.tolist(), strict=True)
                              if gg == g and h != true.tolist()]
                    if others:
                        turn[g] = t
                        pos = hand_positions(game, states, moves, g, seat, t)
                        swapped[g] = swap_hand(game, decks[g], pos, st, g, torch.tensor(others[0]))
            mv = moves[:, t].clamp(min=0)
            nxt = engine.step(game, st, mv)[0]
            rng.update(st, mv, nxt)
            states.append(nxt)
        assert int((turn >= 0).sum()) >= 2, "too few games with another hand in the range"
        assert not torch.equal(swapped, decks)
        monkeypatch.setattr(engine, "reset", lambda g_, seeds: engine.initial_state(g_, swapped))
        second = searched.play_games(setup, n, seed=8, batch_games=n)
    for g in range(n):
        if int(turn[g]) < 0:
            continue
        stop = int(turn[g])
        assert first[g].record.moves[: stop + 1] == second[g].record.moves[: stop + 1], f"game {g}"
        same = [d for d in first[g].decisions if d["step"] <= stop]
        assert same == [d for d in second[g].decisions if d["step"] <= stop], f"game {g}"
        assert second[g].record.deck != first[g].record.deck


def swap_hand(game: GameConfig, deck: torch.Tensor, positions: list[int], state, g: int,
              hand: torch.Tensor) -> torch.Tensor:
    """deck [N] with the searcher's held cards (at `positions`) replaced by `hand`, the undealt cards
    becoming what is left of the hidden multiset (in their old order where they are unchanged)."""
    out = deck.clone()
    undealt = list(range(int(state.deck_pos[g]), game.num_cards))
    pool = [int(deck[i]) for i in positions + undealt]
    for i, c in zip(positions, hand.tolist(), strict=False):
        out[i] = c
        pool.remove(c)
    for i in undealt:
        c = int(deck[i]) if int(deck[i]) in pool else pool[0]
        out[i] = c
        pool.remove(c)
    return out


@pytest.mark.parametrize("blueprint", ["smartbot", "network"])
@pytest.mark.parametrize("device", DEVICES)
def test_lbs_draws_within_smartbots_card_knowledge(device: str, blueprint: str) -> None:
    """With knowledge "smartbot", LBS's sampler follows the searcher's copy of SmartBot's
    knowledge and draws every held slot within it (the lockstep seat's own_cards, SmartBot playing the
    game): SmartBot's own as the blueprint, or a SmartBot's beside a network whose belief names no
    conventions (nothing in the belief decides it); with knowledge "none" the learned belief (here
    untrained) draws outside it, kept by the hints alone."""
    game = SMALL["p2_c3_r3_h3"]
    net = SmartBot(game, device)
    torch.manual_seed(0)
    model = BeliefModel(game, BeliefConfig(hidden=16, mlp_layers=1, lstm_layers=1, card_embed=4)).eval()
    searched = net
    if blueprint == "network":
        searched = make_qnet(game, NetConfig(hidden=16)).to(device).eval()
        assert model.conventions == ""
    n, k, seat = 16, 32, 1
    state = engine.reset(game, torch.arange(n, device=device))
    outside = {True: 0, False: 0}
    cfg = replace(tiny_search(game), seat=seat, knowledge="smartbot")
    with SearchSetup.of(game, searched, "lbs-inf", cfg, model, device) as setup, torch.no_grad():
        plain = setup.with_mode("lbs-inf", knowledge="none")
        samplers = {True: setup.sampler(), False: plain.sampler()}
        assert samplers[False].knowledge is None
        assert samplers[True].knowledge is (net if blueprint == "smartbot" else setup.smartbot)
        for s in samplers.values():
            s.reset(state)
        hid = net.initial_state(n * game.players)
        for t in range(game.max_steps):
            live = (~state.done).nonzero().flatten()
            keys = torch.arange(len(live), device=device) + 100 * t
            drawn = {knows: s.sample(k, keys, live) for knows, s in samplers.items()}
            before = state
            state, hid = play(game, state, net.step, hid, 1)
            own = net.own_cards(hid)[seat :: game.players].index_select(0, live)  # [G', H, T]
            for knows, d in drawn.items():
                held = d.valid[..., None] & (d.hands >= 0)
                inside = own[:, None].expand(-1, k, -1, -1).gather(3, d.hands.clamp(min=0)[..., None])
                inside = inside.squeeze(3)
                outside[knows] += int((held & ~inside).sum())
            for s in samplers.values():
                s.update(before, torch.zeros(n, dtype=torch.long, device=device), state)
            if bool(state.done.all()):
                break
    assert outside[True] == 0 and outside[False] > 0


def test_the_knowledge_is_a_setting_of_its_own() -> None:
    """SearchConfig.knowledge takes "smartbot" or "none", anything else refused naming the field and its
    values; "none" gives LBS's sampler no knowledge, and no SmartBot is loaded; "smartbot" beside a network
    on a game SmartBot cannot play is refused in one line that says to use --knowledge none (a mode that
    draws no hands from the belief does not need it)."""
    with pytest.raises(FieldError, match="SearchConfig.knowledge='bogus': must be one of smartbot, none") \
            as err:
        SearchConfig(knowledge="bogus")
    assert err.value.field == "knowledge"
    game = GameConfig(players=2, colors=3, ranks=3, hand_size=3, max_life_tokens=4)
    torch.manual_seed(0)
    net = make_qnet(game, NetConfig(hidden=16)).eval()
    model = BeliefModel(game, BeliefConfig(hidden=16, mlp_layers=1, lstm_layers=1, card_embed=4)).eval()
    cfg = replace(tiny_search(game), knowledge="smartbot")
    with pytest.raises(ValueError, match="max_life_tokens=4.*; use --knowledge none$") as err:
        SearchSetup.of(game, net, "lbs-inf", cfg, model)
    assert "\n" not in str(err.value)
    with SearchSetup.of(game, net, "lbs-inf", tiny_search(game), model) as setup:  # the default: none
        assert setup.sampler().knowledge is None and setup.smartbot is None
    with SearchSetup.of(game, net, "sparta", cfg) as setup:
        assert setup.knowledge is None and setup.smartbot is None


def test_lbs_k_is_refused_in_one_line() -> None:
    game = SMALL["p2_c3_r3_h3"]
    with pytest.raises(ValueError, match="no value") as err:
        check_blueprint(Mode.parse("lbs-16"), SmartBot(game))
    assert "\n" not in str(err.value)
    check_blueprint(Mode.parse("sparta"), SmartBot(game))  # the range needs only a public state
