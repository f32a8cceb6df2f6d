"""Retrospective multi-agent SPARTA (sparta-ma) on SmartBot in a tiny game.

The reference is plain Python over hand tuples: each seat's range is the list of its hand histories the
common knowledge allows (hints and the copies no one has seen, checked on the real states; a played card kept
where it was; every draw branched), a blueprint move filters the partner's hands by SmartBot's move with the
hand shown, one hand at a time, and a searched move waits in a queue until the partner's hands at that move
number at most the max range; then the search is replayed for each of those hands by a single-game Searcher
whose hands are drawn from a list (the searcher's range then, sorted, weighed by the ways to draw each hand
beside the one seen). It shares with the implementation only the Searcher itself, the hashed uniforms and the
rule that a search may not make its mover read its partner's cards unless the blueprint does.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
from collections import Counter

import pytest
import torch
from test_smartbot_search import hand_positions, swap_hand

from lbs.acting import env_moves, greedy, seat_q
from lbs.belief import constraints
from lbs.bots import SmartBot
from lbs.hanabi import GameConfig, engine
from lbs.hanabi.config import DISCARD, PLAY
from lbs.hanabi.rng import uniform
from lbs.models.qnet import select_rows
from lbs.search import joint_range, play
from lbs.search.agent import Searcher
from lbs.search.config import FieldError, Mode, SearchConfig, matters
from lbs.search.joint_range import JointSearch, play_batch, reading_moves
from lbs.search.samplers import SampledHands
from lbs.search.setup import SearchSetup

pytestmark = pytest.mark.usefixtures("one_thread")

GAME = GameConfig(players=2, colors=2, ranks=3, hand_size=2)


def config(mr: int, **kw) -> SearchConfig:
    return SearchConfig(rollouts=10 * GAME.num_moves, min_rollouts=10, max_rows=4096, max_range_joint=mr,
                        **kw)


def test_the_mode_and_its_setting() -> None:
    mode = Mode.parse("sparta-ma")
    assert mode.joint and mode.searches and mode.depth is None and not Mode.parse("sparta").joint
    assert matters("max_range_joint", mode) and not matters("max_range_joint", Mode.parse("sparta"))
    with pytest.raises(FieldError, match="max_range_joint=-1"):
        SearchConfig(max_range_joint=-1)
    three = GameConfig(players=3, colors=2, ranks=3, hand_size=2)
    with pytest.raises(ValueError, match="built for 2 players"):
        SearchSetup.of(three, SmartBot(three), mode, dataclasses.replace(config(4), rollouts=1000))


def test_max_range_zero_is_single_agent_sparta_move_for_move(monkeypatch) -> None:
    """Also with one game's draws weighed at a time (the pairs cap is a memory cap only)."""
    monkeypatch.setattr(joint_range, "PAIRS", 1)
    net = SmartBot(GAME)
    with torch.no_grad():
        with SearchSetup.of(GAME, net, "sparta", config(0)) as setup:
            single = play.play_games(setup, 8, seed=5, batch_games=8)
        with SearchSetup.of(GAME, net, "sparta-ma", config(0)) as setup:
            joint = play.play_games(setup, 8, seed=5, batch_games=8)
    assert sum(r.deviated for r in single) > 0
    for a, b in zip(single, joint, strict=True):
        assert a.record.moves == b.record.moves
        assert a.decisions == [{k: v for k, v in d.items() if k != "seat"} for d in b.decisions]
        assert all(d["seat"] == 0 and "range_hands" not in d for d in b.decisions)
        assert a.rollouts == b.rollouts


# ---- the plain reference ---------------------------------------------------------------------------------
def ways(hand: tuple, left: list[int]) -> int:
    """Ways to draw `hand` (slot order, -1 empty) from `left` copies per card id."""
    out, used = 1, Counter()
    for c in hand:
        if c >= 0:
            out *= max(left[c] - used[c], 0)
            used[c] += 1
    return out


def public_left(state, g: int) -> list[int]:
    """Copies of each card id no one has seen in game g (every copy minus discards and fireworks)."""
    tb = engine.tables(GAME, torch.device("cpu"))
    out = []
    for c in range(GAME.card_types):
        colour, rank = int(tb.card_color[c]), int(tb.card_rank[c])
        played = int(state.fireworks[g, colour]) > rank
        out.append(int(tb.card_counts[c]) - int(state.discards[g, c]) - int(played))
    return out


def fits_hints(state, g: int, seat: int, hand: tuple) -> bool:
    cons = constraints.from_state(GAME, state.index(torch.tensor([g])), seat)
    tb = engine.tables(GAME, torch.device("cpu"))
    for s, c in enumerate(hand):
        held = s < int(cons.hand_len[0])
        if held != (c >= 0):
            return False
        if c >= 0 and not (cons.color_plausible[0, s, int(tb.card_color[c])]
                           and cons.rank_plausible[0, s, int(tb.card_rank[c])]):
            return False
    return True


def holding(state, g: int, seat: int, hand: tuple):
    """Game g's state [1] with `seat` holding `hand`."""
    one = state.index(torch.tensor([g]))
    hands = one.hands.clone()
    hands[0, seat] = torch.tensor(hand)
    return one.replace(hands=hands)


def blueprint_move(q_fn, state, hid: tuple) -> tuple[int, tuple]:
    """(the mover's blueprint move in state [1], the seats' states after reading it)."""
    _, legal, q, after = seat_q(GAME, state, q_fn, hid)
    act = greedy(q, legal.reshape(GAME.players, -1)).reshape(1, GAME.players)
    return int(env_moves(GAME, state, act)[0]), after


class ListDraws:
    """A single game's hands drawn from a list by its weights, as ExactRange draws (hashed uniforms, the
    first hand whose cumulative weight exceeds the target)."""

    def __init__(self, hands: list[tuple], weights: list[int]):
        self.hands, self.cum = hands, list(itertools.accumulate(weights))

    def sample(self, k: int, keys: torch.Tensor, games: torch.Tensor) -> SampledHands:
        u = uniform(keys.long()[:, None], torch.arange(k)[None, :])[0].tolist()
        total = self.cum[-1] if self.cum else 0
        rows = [min(bisect.bisect_right(self.cum, int(x * total)), len(self.hands) - 1) for x in u]
        hands = torch.tensor([[list(self.hands[r]) for r in rows]])
        return SampledHands(hands, torch.full((1, k), total > 0))


def plain_search(setup, cfg: SearchConfig, seed: int, game_id: int, step: int, seat: int, root, hid: tuple,
                 belief: list[tuple], left: list[int], seen: tuple) -> int:
    """The search of `seat` at `step` had its partner held `seen`: one game, its hands from the list."""
    state = holding(root, 0, 1 - seat, seen)
    bp, after = blueprint_move(setup.q_fn, state, hid)
    beside = [left[c] - seen.count(c) for c in range(GAME.card_types)]
    sampler = ListDraws(belief, [ways(h, beside) for h in belief])
    searcher = Searcher(GAME, setup.q_fn, sampler, dataclasses.replace(cfg, seat=seat), None, seed)
    allowed = joint_range._allowed(reading_moves(GAME, setup.blueprint, state, after), torch.tensor([bp]))
    dec = searcher.decide(state, torch.tensor([0]), after, torch.tensor([bp]), step, torch.tensor([game_id]),
                          allowed=allowed)
    return int(dec.move[0])


class Reference:
    """One game's multi-agent SPARTA, replayed on hand tuples (see the module doc)."""

    def __init__(self, setup, cfg: SearchConfig, seed: int, game_id: int, first):
        self.setup, self.cfg, self.seed, self.game_id = setup, cfg, seed, game_id
        left = public_left(first, 0)
        hands = [h for h in itertools.product(range(GAME.card_types), repeat=GAME.hand_size) if ways(h, left)]
        self.ranges = [[(h,) for h in hands if fits_hints(first, 0, s, h)] for s in range(GAME.players)]
        self.queue: list[dict] = []
        self.searched: list[int] = []
        self.replayed: dict[tuple[int, tuple], int] = {}  # (step, partner hand then) -> the search's move

    def now(self, seat: int) -> set[tuple]:
        return {hist[-1] for hist in self.ranges[seat]}

    def searches(self, mover: int) -> bool:
        return not self.queue or self.queue[0]["seat"] == mover

    def step(self, t: int, before, hid: tuple, move: int, after, hid_after: tuple) -> None:
        mover = int(before.cur_player[0])
        searched = self.searches(mover)
        partner = 1 - mover
        if searched:
            self.searched.append(t)
            belief = sorted(self.now(mover))
            self.queue.append({"step": t, "seat": mover, "move": move, "root": before, "hid": hid,
                               "belief": belief, "left": public_left(before, 0)})
            reads = reading_moves(GAME, self.setup.blueprint, before, hid_after)
            bp, _ = blueprint_move(self.setup.q_fn, before, hid)
            filter_now = bool(reads[0, move]) and move == bp and self.cfg.max_range_joint > 0
        if not searched or filter_now:  # the blueprint filter, hand by hand
            keep = {}
            for h in self.now(partner):
                keep[h] = blueprint_move(self.setup.q_fn, holding(before, 0, partner, h), hid)[0] == move
            self.ranges[partner] = [hist for hist in self.ranges[partner] if keep[hist[-1]]]
        # the mover's own card leaves its slot; a new one may be drawn
        kind, slot = (int(x) for x in engine.tables(GAME, torch.device("cpu")).move_info[move][:2])
        new = []
        for hist in self.ranges[mover]:
            h = hist[-1]
            if kind in (PLAY, DISCARD):
                if h[slot] != int(after.last_card[0]):
                    continue
                rest = h[:slot] + h[slot + 1:]
                if int(after.deck_pos[0]) > int(before.deck_pos[0]):
                    new += [hist + (rest + (c,),) for c in range(GAME.card_types)]
                else:
                    new.append(hist + (rest + (-1,),))
            else:
                new.append(hist + (h,))
        self.ranges[mover] = new
        self.ranges[partner] = [hist + (hist[-1],) for hist in self.ranges[partner]]
        left = public_left(after, 0)
        for s in range(GAME.players):
            self.ranges[s] = [hist for hist in self.ranges[s]
                              if ways(hist[-1], left) and fits_hints(after, 0, s, hist[-1])]
        self.resolve()

    def resolve(self) -> None:
        while self.queue and self.cfg.max_range_joint > 0:
            e = self.queue[0]
            partner = 1 - e["seat"]
            then = sorted({hist[e["step"]] for hist in self.ranges[partner]})
            if len(then) > self.cfg.max_range_joint:
                return
            moves = {}
            for h in then:
                moves[h] = plain_search(self.setup, self.cfg, self.seed, self.game_id, e["step"], e["seat"],
                                        e["root"], e["hid"], e["belief"], e["left"], h)
                self.replayed[(e["step"], h)] = moves[h]
            agree = [hist for hist in self.ranges[partner] if moves[hist[e["step"]]] == e["move"]]
            self.ranges[partner] = agree
            self.queue.pop(0)


def test_ranges_and_every_searched_move_equal_a_per_hand_reference(monkeypatch) -> None:
    """After every move of a few games both seats' ranges equal the reference's; every real search and every
    replayed one (each hand of each range-search) makes the reference's move; the schedule (which moves were
    searched) is the reference's; with max range 4 some range-searches wait for later moves."""
    net, n, seed, mr = SmartBot(GAME), 4, 3, 4
    cfg = config(mr)
    monkeypatch.setattr(joint_range, "PAIRS", 64)  # a range-search's hands drawn for in several parts
    seen_ranges: list[dict] = []
    follow = JointSearch.follow

    def recorded(self, t, before, move, after):
        follow(self, t, before, move, after)
        held: dict[tuple[int, int], set] = {(g, s): set() for g in range(n) for s in range(GAME.players)}
        for s in range(GAME.players):
            hands, game_of, _ = self.ranges[s].probabilities()
            for h, g in zip(hands.tolist(), game_of.tolist(), strict=True):
                held[(g, s)].add(tuple(h))
        seen_ranges.append(held)

    monkeypatch.setattr(JointSearch, "follow", recorded)
    with SearchSetup.of(GAME, net, "sparta-ma", cfg) as setup, torch.no_grad():
        out: list[JointSearch] = []
        results = play_batch(setup, torch.arange(n), seed, None, None, checked=True, out=out)
        joint = out[0]
        waited = [rp for rp in joint.replays if rp.at > rp.step]
        assert waited and len(joint.replays) > 10, (len(waited), len(joint.replays))
        hid = net.initial_state(n * GAME.players)
        state = engine.initial_state(GAME, torch.tensor([r.record.deck for r in results]))
        refs = [Reference(setup, cfg, seed, g, state.index(torch.tensor([g]))) for g in range(n)]
        states, hids = [state], [hid]
        compared = 0
        for t in range(len(seen_ranges)):
            mv = torch.tensor([r.record.moves[t] if t < len(r.record.moves) else 0 for r in results])
            _, _, _, after_hid = seat_q(GAME, states[-1], net.step, hids[-1])
            nxt = engine.step(GAME, states[-1], mv)[0]
            for g, ref in enumerate(refs):
                if t >= len(results[g].record.moves):
                    continue
                rows = torch.arange(GAME.players) + g * GAME.players
                ref.step(t, states[-1].index(torch.tensor([g])), select_rows(hids[-1], rows), int(mv[g]),
                         nxt.index(torch.tensor([g])), select_rows(after_hid, rows))
                for s in range(GAME.players):
                    assert seen_ranges[t][(g, s)] == ref.now(s), f"game {g} seat {s} after move {t}"
                    compared += 1
            states.append(nxt)
            hids.append(after_hid)
    for g, (r, ref) in enumerate(zip(results, refs, strict=True)):
        assert [d["step"] for d in r.decisions] == ref.searched, f"game {g}"
    for rp in joint.replays:
        for g, h, m in zip(rp.game.tolist(), rp.hands.tolist(), rp.moves.tolist(), strict=True):
            assert refs[g].replayed[(rp.step, tuple(h))] == m, f"game {g} step {rp.step} hand {h}"
    assert sum(len(ref.replayed) for ref in refs) == sum(len(rp.game) for rp in joint.replays)
    assert compared > 100


@pytest.mark.parametrize("seat", [0, 1])
def test_no_peeking_for_either_seat(seat: int, monkeypatch) -> None:
    """Swap a searcher's hand, at one of its late searched turns, for another hand its range allows (the same
    history seen): replaying the game gives the same moves up to and including that turn, and the same
    decisions of that seat (its searches and the range-searches of them that ran by then)."""
    net, n = SmartBot(GAME), 8
    cfg = config(80)
    beliefs: dict[int, object] = {}
    override = JointSearch.override

    def kept(self, t, state, hid, blueprint):
        moves = override(self, t, state, hid, blueprint)
        if bool(self.searched.any()):
            beliefs[t] = self.belief
        return moves

    monkeypatch.setattr(JointSearch, "override", kept)
    with SearchSetup.of(GAME, net, "sparta-ma", cfg) as setup, torch.no_grad():
        first = play.play_games(setup, n, seed=8, batch_games=n)
        decks = torch.tensor([r.record.deck for r in first])
        state = engine.initial_state(GAME, decks)
        states, moves = [state], torch.full((n, max(len(r.record.moves) for r in first)), 0)
        for g, r in enumerate(first):
            moves[g, : len(r.record.moves)] = torch.tensor(r.record.moves)
        for t in range(moves.shape[1]):
            states.append(engine.step(GAME, states[-1], moves[:, t])[0])
        swapped, turn = decks.clone(), torch.full((n,), -1)
        for t in sorted(beliefs, reverse=True):  # the latest searched turn of `seat` with another hand
            st, snap = states[t], beliefs[t]
            if t % 2 != seat:
                continue
            for g in range(n):
                if turn[g] >= 0 or bool(st.done[g]) or t >= len(first[g].record.moves):
                    continue
                if not any(d["step"] == t for d in first[g].decisions):
                    continue
                left = snap.unseen[g] - engine.card_histogram(st.hands[g, 1 - seat][None], GAME.card_types)[0]
                true = st.hands[g, seat].tolist()
                others = [h.tolist() for h, gg in zip(snap.hands, snap.game_of, strict=True)
                          if int(gg) == g and h.tolist() != true and ways(tuple(h.tolist()), left.tolist())]
                if others:
                    turn[g] = t
                    pos = hand_positions(GAME, states, moves, g, seat, t)
                    swapped[g] = swap_hand(GAME, decks[g], pos, st, g, torch.tensor(others[0]))
        assert int((turn >= 0).sum()) >= 3, "too few games with another hand in the range"
        monkeypatch.setattr(engine, "reset", lambda g_, seeds: engine.initial_state(g_, swapped))
        second = play.play_games(setup, n, seed=8, batch_games=n)
    for g in range(n):
        stop = int(turn[g])
        if stop < 0:
            continue
        assert second[g].record.deck != first[g].record.deck
        assert first[g].record.moves[: stop + 1] == second[g].record.moves[: stop + 1], f"game {g}"
        assert until(first[g].decisions, stop, seat) == until(second[g].decisions, stop, seat), f"game {g}"


def until(decisions: list[dict], stop: int, seat: int) -> list[dict]:
    """`seat`'s decisions up to move `stop` as known before that move's outcome (a range-search that ran after
    it is left out: a played card shows the swapped hand; the partner's decisions see it all along)."""
    later = ("range_hands", "range_rollouts", "replayed_at")
    return [{k: v for k, v in d.items() if d.get("replayed_at", -1) < stop or k not in later}
            for d in decisions if d["step"] <= stop and d["seat"] == seat]


def test_draws_above_max_range_follow_the_exact_weights() -> None:
    """Above max_range the searcher's hands are drawn by the public weights and kept with probability (ways
    beside the seen hand) / (public ways) and where the pending filters pass: their frequencies match the
    exact weights beside the seen hand (the range with every filter run), seat by seat, move by move."""
    from lbs.acting import play

    net, n, k = SmartBot(GAME), 6, 4000
    turns: list = []
    with torch.no_grad():
        state = engine.reset(GAME, torch.arange(n) + 70)
        play(GAME, state, net.step, net.initial_state(n * GAME.players), 6, hook=turns.append)
        with SearchSetup.of(GAME, net, "sparta-ma", config(4)) as setup:
            compared = 0
            for seat in range(GAME.players):
                lazy = joint_range.PublicRange(GAME, setup.blueprint, seat, max_range=1)
                exact = joint_range.PublicRange(GAME, setup.blueprint, seat)
                for r in (lazy, exact):
                    r.reset(turns[0].state)
                for tu in turns:
                    for r in (lazy, exact):
                        r.update(tu.state, tu.move, tu.next_state)
                    snap = joint_range.Snapshot.of(lazy)
                    assert bool(snap.large().all())
                    seen = tu.next_state.hands[:, 1 - seat]
                    draws = joint_range.JointSampler(snap, torch.arange(n), seen).sample(
                        k, torch.arange(n) + 1000 * compared, torch.arange(n))
                    hands, game_of, _ = exact.probabilities()
                    for g in range(n):
                        if bool(tu.next_state.done[g]):
                            continue
                        left = (exact.unseen[g] - engine.card_histogram(seen[g][None], GAME.card_types)[0])
                        want = {tuple(h): ways(tuple(h), left.tolist()) for h, gg in
                                zip(hands.tolist(), game_of.tolist(), strict=True) if gg == g}
                        total = sum(want.values())
                        drawn = zip(draws.hands[g].tolist(), draws.valid[g].tolist(), strict=True)
                        got = Counter(tuple(h) for h, v in drawn if v)
                        m = sum(got.values())
                        assert m > k // 8 and set(got) <= {h for h, w in want.items() if w}
                        for h, w in want.items():  # every hand's share within 4 standard errors
                            p = w / total
                            assert abs(got[h] / m - p) <= 4 * (p * (1 - p) / m) ** 0.5 + 1 / m, (seat, g, h)
                        compared += 1
    assert compared > 30


def test_search_run_plays_sparta_ma_and_records_its_cost(tmp_path) -> None:
    """search/run.py --mode sparta-ma on the shipped 2-colour network blueprint: the share of moves searched
    and the rollouts per game (replays included) are printed and recorded."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "ma.json"
    r = subprocess.run([sys.executable, str(root / "search" / "run.py"), "--mode", "sparta-ma", "--blueprint",
                        str(root / "checkpoints" / "blueprint_2c.pt"), "--games", "1", "--rollouts", "200",
                        "--min-rollouts", "10", "--max-range-joint", "20", "--no-blueprint-baseline",
                        "--out", str(out), "--no-progress"], capture_output=True, text=True, cwd=tmp_path,
                       env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "% of moves searched" in r.stdout
    blob = json.loads(out.read_text())
    joint, (game,) = blob["summary"]["joint"], blob["games"]
    assert 50 <= joint["searched_pct"] <= 100 and joint["range_hands_per_game"] > 0
    assert joint["rollouts_per_game"] == game["rollouts"] > joint["range_rollouts_per_game"] > 0
    assert any("range_hands" in d and d["replayed_at"] >= d["step"] for d in game["decisions"])
