"""Search: batched rollouts equal single games, the leaf is the VDN value, pruning and the delta rule equal a
plain reference, decisions never depend on the searcher's true hand beyond what it observed, and a
sampler with no valid hand leaves the blueprint's play unchanged."""

from __future__ import annotations

import math
from functools import partial
from pathlib import Path

import pytest
import torch
from conftest import DEVICES

from lbs.acting import env_moves, greedy, legal_with_noop, observe, play
from lbs.belief import constraints
from lbs.belief.sampling import valid_hands
from lbs.bots import SmartBot
from lbs.graphs import Graphs
from lbs.hanabi import GameConfig, encode, engine, public_features
from lbs.models import BeliefConfig, BeliefModel, NetConfig, make_qnet
from lbs.search.agent import Searcher
from lbs.search.config import Mode, Sampler, SearchConfig
from lbs.search.exact_range import ExactRange
from lbs.search.play import play_games
from lbs.search.pruning import MoveStats, choose, prune, prune_bounds
from lbs.search.report import summarize_run
from lbs.search.rollouts import rollout_returns
from lbs.search.samplers import LearnedBelief, NoValidHand, TrueHand, serve
from lbs.search.setup import SearchSetup, build_search
from lbs.seeding import Stream, game_seeds

GAME = GameConfig(players=2, colors=2, ranks=3, hand_size=3)
GAME3 = GameConfig(players=3, colors=2, ranks=3, hand_size=2)
pytestmark = pytest.mark.usefixtures("one_thread")


def blueprint(game: GameConfig, seed: int = 0):
    torch.manual_seed(seed)
    return make_qnet(game, NetConfig(hidden=16, lstm_layers=1, mlp_layers=1)).eval()


def belief(game: GameConfig, seed: int = 0, reads=None) -> BeliefModel:
    """reads: a blueprint network whose scores the encoder reads (BeliefConfig.blueprint_features)."""
    torch.manual_seed(seed)
    cfg = BeliefConfig(hidden=16, mlp_layers=1, lstm_layers=1, card_embed=4,
                       blueprint_features=reads is not None)
    return BeliefModel(game, cfg, reads).eval()


def roots(game: GameConfig, net, games: int, steps: int, seed: int = 0):
    """Blueprint games after `steps` moves: (state, every seat's state after reading its observation)."""
    state = engine.reset(game, game_seeds(Stream.EVAL, seed, games))
    with torch.no_grad():
        state, hid = play(game, state, net.step, net.initial_state(games * game.players), steps)
        obs, legal = observe(game, state)
        priv = obs.reshape(games * game.players, -1).float()
        _, hid = net.step(priv, public_features(game, priv), legal.reshape(games * game.players, -1), hid)
    return state, hid


# ---- rollouts and leaves -----------------------------------------------------------------------------
def rollout_start(net, games: int, steps: int, seed: int):
    """Roots of GAME after `steps` blueprint moves, a random legal first move per root and the horizon
    that finishes every rollout: (state, hid, first, horizon)."""
    state, hid = roots(GAME, net, games, steps)
    noise = torch.rand(games, GAME.num_moves, generator=torch.Generator().manual_seed(seed))
    first = torch.where(engine.legal_moves(GAME, state), noise, -1).argmax(1)
    return state, hid, first, int(engine.moves_left_bound(GAME, state).max()) - 1


@pytest.mark.parametrize("game", [GAME, GAME3], ids=["p2", "p3"])
@pytest.mark.parametrize("depth", [0, 2, None])
def test_a_batch_of_rollouts_equals_the_rollouts_one_at_a_time(game, depth):
    net = blueprint(game)
    state, hid = roots(game, net, 6, 3)
    legal = engine.legal_moves(game, state)
    first = torch.where(
        legal, torch.rand(legal.shape, generator=torch.Generator().manual_seed(1)), -1
    ).argmax(1)
    with torch.no_grad():
        batch = rollout_returns(game, state, hid, first, net.step, depth, game.max_steps)
        for i in range(6):
            rows = torch.arange(i * game.players, (i + 1) * game.players)
            one = rollout_returns(
                game,
                state.index(torch.tensor([i])),
                tuple(x[:, rows] for x in hid),
                first[i : i + 1],
                net.step,
                depth,
                game.max_steps,
            )
            assert torch.allclose(one, batch[i : i + 1], atol=1e-5), (i, one, batch[i])


@pytest.mark.parametrize("blue", ["net", "smartbot"])
@pytest.mark.parametrize("depth", [None, 4])
def test_dropping_finished_rollouts_returns_what_the_fixed_loop_returns(blue, depth):
    """On the CPU finished games leave a rollout batch; the returns are bit for bit those of the fixed-length
    loop (Graphs runs that loop eagerly off CUDA), and the batch does shrink."""
    game = GameConfig(players=2, colors=2, ranks=3, hand_size=3) if blue == "net" else GameConfig(players=2)
    net = blueprint(game) if blue == "net" else SmartBot(game)
    state, hid = roots(game, net, 48, 4)
    noise = torch.rand(48, game.num_moves, generator=torch.Generator().manual_seed(2))
    first = torch.where(engine.legal_moves(game, state), noise, -1).argmax(1)
    horizon = int(engine.moves_left_bound(game, state).max()) - 1
    sizes: list[int] = []

    def q_fn(priv, publ, legal, h):
        sizes.append(priv.shape[0])
        return net.step(priv, publ, legal, h)

    with torch.no_grad():
        got = rollout_returns(game, state, hid, first, q_fn, depth, horizon)
        want = rollout_returns(game, state, hid, first, net.step, depth, horizon, Graphs(torch.device("cpu")))
    assert torch.equal(got, want)
    if depth is None:  # the batch shrinks as its games end
        assert min(sizes) < 48 * game.players
    else:  # every step played once across the drops, then the leaf
        assert len(sizes) == depth + 1


@pytest.mark.parametrize("depth", [None, 3])
def test_rollouts_played_by_a_policy_networks_moves_return_what_its_step_returns(depth):
    """A blueprint with a policy network beside Q (NetConfig.policy_net): rollouts played by its moves
    (Blueprint.moves, SearchSetup.playout), the leaf read by its step (value_fn), return exactly what rollouts
    played by its step return, on either loop; and a search set-up plays its rollouts by the moves."""
    torch.manual_seed(0)
    net = make_qnet(GAME, NetConfig(hidden=16, lstm_layers=1, mlp_layers=1, policy_net=True)).eval()
    state, hid, first, horizon = rollout_start(net, 32, 3, 4)
    with torch.no_grad():
        want = rollout_returns(GAME, state, hid, first, net.step, depth, horizon)
        moves = partial(net.moves, values=depth is not None)  # as SearchSetup.playout plays it
        got = rollout_returns(GAME, state, hid, first, moves, depth, horizon, value_fn=net.step)
        fixed = rollout_returns(GAME, state, hid, first, moves, depth, horizon, Graphs(torch.device("cpu")),
                                value_fn=net.step)
    assert torch.equal(got, want) and torch.equal(fixed, want)
    setup = SearchSetup.of(GAME, net, "lbs-inf" if depth is None else f"lbs-{depth}", belief=belief(GAME))
    try:
        playout = setup.playout
        assert playout.func == setup.blueprint.moves and playout.keywords == {"values": depth is not None}
        assert setup.q_fn == setup.blueprint.step
    finally:
        setup.close()


def test_keeping_a_lost_games_points_changes_only_the_lost_rollouts():
    """SearchConfig.keep_lost_points: a rollout ending in a lost game is worth its points minus one (the
    reference SPARTA's rule) instead of HLE's 0; every other rollout is worth the same, on either loop."""
    net = blueprint(GAME)
    state, hid, first, horizon = rollout_start(net, 64, 2, 3)
    with torch.no_grad():
        zero = rollout_returns(GAME, state, hid, first, net.step, None, horizon)
        kept = rollout_returns(GAME, state, hid, first, net.step, None, horizon, keep_lost_points=True)
        fixed = rollout_returns(GAME, state, hid, first, net.step, None, horizon, Graphs(torch.device("cpu")),
                                keep_lost_points=True)
        end, _ = play(GAME, engine.step(GAME, state, first)[0], net.step, hid, horizon)
    lost = end.life_tokens <= 0
    assert bool(lost.any()) and bool((~lost).any())
    assert torch.equal(zero[lost], -state.score[lost].float())  # HLE: a lost game is worth 0
    want = torch.where(lost, (end.fireworks.sum(1) - 1).clamp(min=0), end.score) - state.score
    assert torch.equal(kept, want.float()) and torch.equal(fixed, kept)


def test_depth_zero_is_the_move_reward_plus_the_vdn_sum_of_blueprint_q():
    net = blueprint(GAME)
    state, hid = roots(GAME, net, 8, 2)
    first = engine.legal_moves(GAME, state).float().argmax(1)
    with torch.no_grad():
        got = rollout_returns(GAME, state, hid, first, net.step, 0, GAME.max_steps)
        after, reward, _ = engine.step(GAME, state, first)
        # the VDN sum by hand: each seat's own observation, its legal actions (the no-op when waiting)
        want = reward.clone()
        legal = legal_with_noop(GAME, after)
        for g in range(8):
            if after.done[g]:
                continue
            for s in range(GAME.players):
                row = g * GAME.players + s
                obs = observe(GAME, after.index(torch.tensor([g])))[0][0, s].float()[None]
                q, _ = net.step(
                    obs,
                    public_features(GAME, obs),
                    legal[g, s][None],
                    tuple(x[:, row : row + 1] for x in hid),
                )
                want[g] += q[0][legal[g, s]].max()
    assert torch.allclose(got, want, atol=1e-5)


def test_play_to_the_end_with_the_true_hand_is_the_real_blueprint_game():
    """Once the deck is empty a reshuffle changes nothing, so LBS-inf's rollout of the blueprint move with
    the true hand, over the searcher's horizon, must return exactly what the real blueprint game scores."""
    game = GameConfig(players=2, colors=1, ranks=3, hand_size=2)
    net = blueprint(game, 3)
    g = 32
    state = engine.reset(game, game_seeds(Stream.EVAL, 0, g))
    hid = net.initial_state(g * game.players)
    with torch.no_grad():
        final, _ = play(game, state, net.step, hid, game.max_steps)
        checked = 0
        for _ in range(game.max_steps):
            obs, legal = observe(game, state)
            priv = obs.reshape(g * game.players, -1).float()
            q, hid_next = net.step(
                priv, public_features(game, priv), legal.reshape(g * game.players, -1), hid
            )
            move = env_moves(game, state, greedy(q, legal.reshape(g * game.players, -1)).reshape(g, -1))
            live = ~state.done & (state.deck_pos >= game.num_cards)
            if live.any():
                idx = live.nonzero().squeeze(1)
                rows = (idx[:, None] * game.players + torch.arange(game.players)).reshape(-1)
                root = state.index(idx)
                true = engine.set_hand(
                    game,
                    root,
                    root.cur_player,
                    root.hands.gather(
                        1, root.cur_player[:, None, None].expand(-1, 1, game.hand_size)
                    ).squeeze(1),
                    idx,
                )
                horizon = int(engine.moves_left_bound(game, root).max()) - 1  # what the searcher plays
                got = rollout_returns(
                    game, true, tuple(x[:, rows] for x in hid_next), move[idx], net.step, None, horizon
                )
                assert torch.equal(got, (final.score[idx] - root.score).float())
                checked += len(idx)
            state, _, _ = engine.step(game, state, move)
            hid = hid_next
    assert checked > 20


# ---- pruning and the delta rule -----------------------------------------------------------------------
def _reference(
    values: list[list[list[float]]],
    live: list[bool],
    legal: list[bool],
    bp: int,
    min_rollouts: int,
    z: float,
    delta: float,
):
    """Plain per-game version: values[m] = returns of move m."""
    mean = [sum(v) / len(v) if v else 0.0 for v in values]

    def sem(v):
        if len(v) < 2:
            return math.inf
        mu = sum(v) / len(v)
        return math.sqrt(sum((x - mu) ** 2 for x in v) / (len(v) - 1) / len(v))

    cands = [m for m in range(len(values)) if live[m] and values[m]]
    best = max(mean[m] for m in cands) if cands else -math.inf
    new_live = [
        live[m] and not (len(values[m]) >= min_rollouts and mean[m] < best - z * sem(values[m]))
        for m in range(len(values))
    ]
    cands = [m for m in range(len(values)) if new_live[m] and values[m]]
    top = max(mean[m] for m in cands) if cands else -math.inf
    pick = min(m for m in cands if mean[m] == top) if cands else 0
    deviate = bool(values[bp]) and pick != bp and top - mean[bp] > delta
    return new_live, (pick if deviate else bp), deviate


def test_pruning_and_delta_rule_equal_a_plain_reference():
    gen = torch.Generator().manual_seed(0)
    g, m = 40, 7
    stats = MoveStats.zeros(g, m, "cpu")
    values = [[[] for _ in range(m)] for _ in range(g)]
    legal = torch.rand(g, m, generator=gen) < 0.8
    legal[:, 2] = True
    live = legal & (torch.rand(g, m, generator=gen) < 0.9)
    for _ in range(600):
        gi, mi = int(torch.randint(g, (1,), generator=gen)), int(torch.randint(m, (1,), generator=gen))
        if not live[gi, mi]:
            continue
        v = float(torch.randn(1, generator=gen) * 2 + mi * 0.3 + gi % 3)
        stats.add(torch.tensor([gi]), torch.tensor([mi]), torch.tensor([v]))
        values[gi][mi].append(v)
    bp = torch.full((g,), 2)
    new_live = prune(stats, live, 5, 2.0)
    move, dev = choose(stats, new_live, bp, 0.05)
    for i in range(g):
        want_live, want_move, want_dev = _reference(
            values[i], live[i].tolist(), legal[i].tolist(), 2, 5, 2.0, 0.05
        )
        assert new_live[i].tolist() == want_live, i
        assert (int(move[i]), bool(dev[i])) == (want_move, want_dev), i


def test_bound_pruning_equals_the_reference_sparta_rule():
    """prune_bounds is SearchBot's UCB pruning, per game: a move with min_rollouts returns is dropped once
    mean + z s.e. < the best mean - z s.e. over such live moves, the blueprint's mean counting delta higher;
    with delta 0 it keeps every move prune keeps (it counts both moves' errors)."""
    gen = torch.Generator().manual_seed(1)
    g, m, bp_move, n_min, z, delta = 60, 6, 1, 5, 2.0, 0.3
    stats = MoveStats.zeros(g, m, "cpu")
    values = [[[] for _ in range(m)] for _ in range(g)]
    live = torch.rand(g, m, generator=gen) < 0.9
    live[:, bp_move] = True
    for gi in range(g):
        for mi in range(m):
            if live[gi, mi]:
                n = int(torch.randint(1, 40, (1,), generator=gen))
                v = (torch.randn(n, generator=gen) * 1.5 + mi * 0.25 * (gi % 4)).tolist()
                stats.add(torch.full((n,), gi), torch.full((n,), mi), torch.tensor(v))
                values[gi][mi] = v
    bp = torch.full((g,), bp_move)
    got = prune_bounds(stats, live, n_min, z, bp, delta)
    dropped = 0
    for gi in range(g):
        def bounds(mi, gi=gi):
            v = values[gi][mi]
            mu = sum(v) / len(v)
            se = math.sqrt(sum((x - mu) ** 2 for x in v) / (len(v) - 1) / len(v)) if len(v) > 1 else math.inf
            mu += delta if mi == bp_move else 0.0
            return mu - z * se, mu + z * se
        ready = [mi for mi in range(m) if live[gi, mi] and len(values[gi][mi]) >= n_min]
        best = max((bounds(mi)[0] for mi in ready), default=-math.inf)
        want = [bool(live[gi, mi]) and not (mi in ready and bounds(mi)[1] < best) for mi in range(m)]
        assert got[gi].tolist() == want, gi
        dropped += sum(bool(live[gi, mi]) and not w for mi, w in enumerate(want))
    assert dropped > 0
    # with delta 0 it is the stricter rule: it keeps every move prune keeps
    assert not (prune(stats, live, n_min, z) & ~prune_bounds(stats, live, n_min, z, bp, 0.0)).any()


def test_the_reference_budget_gives_each_move_its_share_and_no_more():
    """reference_budget: no move gets more than rollouts // legal moves rollouts (a pruned move's share is
    not passed on) and every legal move gets its first round; the shared budget spends more rollouts per
    searched move on the same deals. The belief alone (knowledge "none"): SmartBot's knowledge, followed
    beside this random network, leaves some decisions no valid hand (a fallback, whose moves get no
    rollouts)."""
    net, model = blueprint(GAME), belief(GAME)
    spent = {}
    for ref in (False, True):
        cfg = SearchConfig(rollouts=200, min_rollouts=10, seat=0, reference_budget=ref, knowledge="none")
        with SearchSetup.of(GAME, net, "lbs-2", cfg, model) as setup, torch.no_grad():
            res = play_games(setup, games=8, seed=2)
        decisions = [d for r in res for d in r.decisions]
        assert decisions and all(r.record.moves for r in res)
        for d in decisions:
            counts = [c["rollouts"] for c in d["candidates"].values()]
            assert min(counts) >= 10 and sum(counts) <= 200
            if ref:
                assert max(counts) <= 200 // len(counts), counts
        spent[ref] = sum(r.rollouts for r in res) / len(decisions)
    assert spent[True] < spent[False], spent


# ---- the searcher -------------------------------------------------------------------------------------
CFG = SearchConfig(rollouts=150, min_rollouts=10, seat=0)


@pytest.mark.parametrize("device", DEVICES)
def test_the_same_seeds_give_the_same_decisions_at_any_batch_size_or_first_game(device):
    net, model = blueprint(GAME), belief(GAME)
    setup = SearchSetup.of(GAME, net, "lbs-2", CFG, model, device)
    runs = []
    with torch.no_grad():
        for batch in (2, 5):
            res = play_games(setup, games=6, seed=1, batch_games=batch)
            runs.append([(r.record.moves, [(d["move"], d["candidates"]) for d in r.decisions]) for r in res])
        # and a run of the later deals alone (table1 --first-game) plays them as the whole run did
        tail = play_games(setup, games=4, seed=1, batch_games=3, first=2)
    assert runs[0] == runs[1]
    assert [(r.record.moves, [(d["move"], d["candidates"]) for d in r.decisions]) for r in tail] \
        == runs[0][2:]
    assert sum(len(d) for _, d in runs[0]) > 0
    if device == "cuda":  # and the same decisions as on the CPU
        cpu = SearchSetup.of(GAME, net, "lbs-2", CFG, model)
        res = play_games(cpu, games=6, seed=1, batch_games=5)
        assert [r.record.moves for r in res] == [m for m, _ in runs[0]]


@pytest.mark.parametrize("depth", [None, 40], ids=["inf", "beyond-the-end"])
def test_ending_rollouts_at_the_bound_changes_no_decision(depth, monkeypatch):
    """Rollouts stop after engine.moves_left_bound instead of the longest game: every rollout has ended by
    then, so every candidate's mean, count and choice equal those of rollouts that idle to max_steps."""
    net, model = blueprint(GAME), belief(GAME)
    cfg = SearchConfig(rollouts=150, min_rollouts=10, seat=1)
    setup = SearchSetup.of(GAME, net, "lbs-inf" if depth is None else f"lbs-{depth}", cfg, model)

    def run():
        with torch.no_grad():
            res = play_games(setup, games=6, seed=3)
        return [(r.record.moves, r.decisions) for r in res]

    bounded = run()
    monkeypatch.setattr(engine, "moves_left_bound", lambda game, st: game.max_steps - st.num_steps + 1)
    assert run() == bounded
    assert sum(len(d) for _, d in bounded) > 0


def test_the_searcher_reads_the_belief_as_it_was_trained_and_scored():
    """LearnedBelief's context at every turn equals the belief's encoding of the seat's whole observation
    stream up to that turn, which is what training and evaluation read (one encoder step per move)."""
    net, model = blueprint(GAME), belief(GAME)
    server = serve(net, model)
    g, seat = 8, 1
    state = engine.reset(GAME, game_seeds(Stream.EVAL, 4, g))
    sampler = LearnedBelief(GAME, server, seat)
    obs, contexts = [], []
    with torch.no_grad():
        sampler.reset(state)

        def follow(turn):
            obs.append(turn.obs[:, seat].float())
            contexts.append(sampler.context)
            sampler.update(turn.state, turn.move, turn.next_state)

        play(GAME, state, net.step, net.initial_state(g * GAME.players), GAME.max_steps, hook=follow)
        whole, _ = model.encode(torch.stack(obs, 1))
    assert torch.allclose(torch.stack(contexts, 1), whole, atol=1e-5)


def test_a_sampler_with_no_valid_hand_plays_exactly_the_blueprint():
    net = blueprint(GAME)
    with torch.no_grad():
        bp = play_games(SearchSetup.of(GAME, net, "blueprint", CFG), games=10, seed=2)
        res = play_games(SearchSetup.of(GAME, net, "lbs-2", CFG, make_sampler=lambda: NoValidHand(GAME)),
                         games=10, seed=2)
    assert [r.record.moves for r in res] == [r.record.moves for r in bp]
    assert all(r.searched > 0 and r.fallbacks == r.searched and r.deviated == 0 for r in res)


def _swapped(game: GameConfig, state, seat: int, gen: torch.Generator):
    """The same games with the searcher holding another hand consistent with everything it observed."""
    cons = constraints.from_state(game, state, seat)
    rows = []
    for g in range(state.batch_size):
        for _ in range(2000):
            n = int(cons.hand_len[g])
            cand = torch.full((1, 1, game.hand_size), -1)
            cand[0, 0, :n] = torch.randint(game.card_types, (n,), generator=gen)
            ok = valid_hands(
                game,
                cand,
                cons.unseen[g : g + 1],
                cons.color_plausible[g : g + 1],
                cons.rank_plausible[g : g + 1],
                cons.hand_len[g : g + 1],
            )
            if ok.all() and not torch.equal(cand[0, 0], state.hands[g, seat]):
                rows.append(cand[0, 0])
                break
        else:
            rows.append(state.hands[g, seat])
    other = engine.set_hand(
        game,
        state,
        torch.full((state.batch_size,), seat),
        torch.stack(rows),
        torch.arange(state.batch_size) + 99,
    )
    return other


@pytest.mark.parametrize("features", [False, True], ids=["belief", "blueprint_features"])
@pytest.mark.parametrize("depth", [1, None])
def test_no_peeking_decisions_ignore_the_true_hand(depth, features):
    """Same history, same seeds, the searcher's true hand swapped for another hand consistent with all it
    observed: every decision is unchanged, also with a belief that reads the blueprint's scores. The
    TrueHand sampler (which peeks) fails the same check."""
    game = GAME
    net = blueprint(game)
    model = belief(game, reads=net if features else None)
    server = serve(net, model)
    cfg = SearchConfig(rollouts=150, min_rollouts=10, seat=0)
    swaps = 0
    peeked = False
    with torch.no_grad():
        for steps in (0, 2, 4):
            state, hid = roots(game, net, 12, steps, seed=5)
            turn = (state.cur_player == 0) & ~state.done
            games = turn.nonzero().squeeze(1)
            other = _swapped(game, state, 0, torch.Generator().manual_seed(steps))
            swaps += int((other.hands[:, 0] != state.hands[:, 0]).any(1)[games].sum())
            seat = torch.zeros(12, 1, dtype=torch.long)
            assert torch.equal(encode(game, state, seat), encode(game, other, seat))  # it observes the same
            bp = engine.legal_moves(game, state).float().argmax(1)
            ids = torch.arange(12)

            def decide(st, sampler, games=games, hid=hid, bp=bp, steps=steps, ids=ids):
                sampler.reset(st)
                searcher = Searcher(game, server.qnet().step, sampler, cfg, depth, seed=3)
                return searcher.decide(st, games, hid, bp, steps, ids)

            a, b = (decide(st, LearnedBelief(game, server, 0)) for st in (state, other))
            assert torch.equal(a.move, b.move) and torch.equal(a.count, b.count)
            assert torch.allclose(a.mean, b.mean)
            a, b = (decide(st, TrueHand(game, 0)) for st in (state, other))
            peeked |= not torch.allclose(a.mean, b.mean)
    assert swaps > 10 and peeked


def test_modes_parse_and_bad_modes_are_one_clear_error():
    def parsed(name):
        m = Mode.parse(name)
        return m.sampler, m.depth

    assert parsed("lbs-16") == (Sampler.BELIEF, 16) and parsed("lbs-inf") == (Sampler.BELIEF, None)
    assert parsed("blueprint") == (Sampler.NONE, None) and parsed("sparta") == (Sampler.RANGE, None)
    assert str(Mode.parse("lbs-16")) == "lbs-16" and not Mode.parse("blueprint").searches
    for bad, msg in (("lbs-0", "at least one"), ("lbs-x", "unknown mode"), ("mcts", "unknown mode")):
        with pytest.raises(ValueError, match=msg):
            Mode.parse(bad)
    with pytest.raises(ValueError, match="too small"):
        SearchConfig(rollouts=100, min_rollouts=100).check(GAME)
    with pytest.raises(ValueError, match="seat"):
        SearchConfig(seat=2, rollouts=10_000).check(GAME)


def test_sparta_is_lbs_inf_with_the_exact_range():
    """The same search with a different sampler: 'sparta' and 'lbs-inf' share the rollouts, pruning and
    delta rule, so with the exact range as sampler they make the same decisions from the same samples;
    with the true-belief range they beat a random blueprint."""
    game = GameConfig(players=2, colors=1, ranks=3, hand_size=2)
    net = blueprint(game, 1)
    sparta_mode, lbs_inf_mode = Mode.parse("sparta"), Mode.parse("lbs-inf")
    assert sparta_mode.sampler is Sampler.RANGE and sparta_mode.depth is None and lbs_inf_mode.depth is None
    cfg = SearchConfig(rollouts=120, min_rollouts=10)
    with torch.no_grad():
        sparta = play_games(SearchSetup.of(game, net, sparta_mode, cfg), games=24, seed=4)
        exact = SearchSetup.of(game, net, lbs_inf_mode, cfg,
                                   make_sampler=lambda: ExactRange(game, exact.blueprint, 0))
        lbs_inf = play_games(exact, games=24, seed=4)
        base = play_games(exact.blueprint_only(), games=24, seed=4)
    assert [r.decisions for r in sparta] == [r.decisions for r in lbs_inf]
    assert sum(r.deviated for r in sparta) > 0 and sum(r.fallbacks for r in sparta) == 0
    gain = sum(r.record.score for r in sparta) - sum(r.record.score for r in base)
    assert gain > 0, gain


def test_search_helps_on_the_shipped_two_colour_pair():
    """LBS with the CPU-trained 2-colour blueprint and belief (checkpoints/*_2c.pt) beats the blueprint by
    more than 3 standard errors of the paired difference on the same deals, drawing from the belief alone
    as its recorded tables did (knowledge "none": this blueprint never learnt SmartBot's conventions, and
    drawn within SmartBot's knowledge some of its moves find no valid hand)."""
    root = Path(__file__).resolve().parents[2] / "checkpoints"
    cfg = SearchConfig(rollouts=400, min_rollouts=20, knowledge="none")
    with build_search("lbs-8", root / "blueprint_2c.pt", root / "belief_2c.pt", cfg=cfg) as setup, \
            torch.no_grad():
        res = play_games(setup, games=64, seed=0)
        base = play_games(setup.blueprint_only(), games=64, seed=0)
    s = summarize_run("lbs-8", res, base, 1.0, setup.game.max_score)
    assert s.paired_diff > 3 * s.paired_sem, s.lines()
    assert s.fallback_pct == 0 and 0 < s.deviation_pct < 100


def test_every_search_set_up_refuses_a_blueprint_with_a_private_state():
    """A private-LSTM blueprint's partner state would carry the searcher's true cards into every rollout:
    the one set-up every entry point uses refuses it in one line (the blueprint alone still plays)."""
    torch.manual_seed(0)
    net = make_qnet(GAME, NetConfig(kind="lstm", hidden=16, lstm_layers=1, mlp_layers=1)).eval()
    for mode in ("lbs-1", "lbs-inf", "sparta"):
        with pytest.raises(ValueError, match="recurrent state sees public features only") as e:
            SearchSetup.of(GAME, net, mode, CFG, belief(GAME))
        assert "\n" not in str(e.value)
    with SearchSetup.of(GAME, net, "blueprint", CFG) as setup, torch.no_grad():
        assert len(play_games(setup, games=2)) == 2


def test_lbs_without_a_belief_is_refused_by_the_set_up_and_by_with_mode():
    """Every entry point's check: LBS with no belief served is one line, whether the set-up is made for it
    or reached from another mode's set-up (a table's rows)."""
    net = blueprint(GAME)
    with pytest.raises(ValueError, match="LBS needs a belief") as e:
        SearchSetup.of(GAME, net, "lbs-inf", CFG)
    assert "\n" not in str(e.value)
    with SearchSetup.of(GAME, net, "blueprint", CFG) as setup:
        assert setup.with_mode("sparta").mode.sampler is Sampler.RANGE  # needs none
        with pytest.raises(ValueError, match="LBS needs a belief"):
            setup.with_mode("lbs-2")
    with SearchSetup.of(GAME, net, "blueprint", CFG, belief(GAME)) as setup:
        assert setup.with_mode("lbs-2").mode.sampler is Sampler.BELIEF


def test_the_shipped_belief_goes_with_the_shipped_blueprints_only(tmp_path):
    from lbs.models.io import shipped_belief

    root = Path(__file__).resolve().parents[2] / "checkpoints"
    assert shipped_belief(root / "blueprint_2p.pt", root) == str(root / "belief_2p.pt")
    assert shipped_belief(root / "blueprint_2c.pt", root) == str(root / "belief_2c.pt")
    assert shipped_belief("smartbot", root) == str(root / "belief_smartbot_2p.pt")
    assert shipped_belief("smartbot", tmp_path, 3) is None  # a rule bot's belief is per player count
    (tmp_path / "belief_smartbot_3p.pt").write_bytes(b"")
    assert shipped_belief("smartbot", tmp_path, 3) == str(tmp_path / "belief_smartbot_3p.pt")
    assert shipped_belief("smartbot", tmp_path) is None
    copy = tmp_path / "blueprint_2p.pt"  # the same name elsewhere is another blueprint
    copy.write_bytes((root / "blueprint_2p.pt").read_bytes())
    assert shipped_belief(copy, root) is None
    assert shipped_belief(root / "belief_2p.pt", root) is None


def test_progress_is_reported_after_every_move_and_counts_the_searched_moves():
    net, model = blueprint(GAME), belief(GAME)
    seen = []
    with SearchSetup.of(GAME, net, "lbs-2", CFG, model) as setup, torch.no_grad():
        res = play_games(setup, games=5, seed=1, batch_games=2, progress=seen.append)
    searched = sum(r.searched for r in res)
    assert seen[-1].games == 5 and seen[-1].searched == searched and seen[-1].searched_left == 0
    assert seen[-1].moves == sum(len(r.record.moves) for r in res)
    assert len(seen) > 3 * len(res)  # inside games, not once per game
    # the bound on what is left never lets the bar's total fall below what is done
    assert all(a.searched + a.searched_left >= searched for a in seen)
    assert [p.searched for p in seen] == sorted(p.searched for p in seen)


# ---- the blueprint contract ---------------------------------------------------------------------------
def test_every_blueprint_type_declares_what_it_offers_and_set_up_checks_it():
    """Each blueprint type declares its capabilities once (lbs.blueprint); set-up reads the declaration and
    refuses a module that makes none in one line, and a declared capability without its methods is a bug."""
    from torch import nn

    from lbs import blueprint as bp
    from lbs.models import FixedQNet

    want = {"publ_lstm": bp.Capabilities(value=True, public_state=True, public_split=True),
            "ff": bp.Capabilities(value=True, public_state=True, public_split=True),
            "lstm": bp.Capabilities(value=True)}
    for kind, caps in want.items():
        assert bp.check(make_qnet(GAME, NetConfig(kind=kind, hidden=8, lstm_layers=1, mlp_layers=1))) == caps
    assert bp.check(FixedQNet(GAME)) == want["publ_lstm"]
    assert bp.check(SmartBot(GAME)) == bp.Capabilities(public_state=True, card_knowledge=True,
                                                       reads_hands=True, seat_view=True, acts_on_state=True)

    class Plain(nn.Module):
        def initial_state(self, rows, device=None):
            return ()

        def step(self, priv, publ, legal, state):
            return legal.float(), state

    with pytest.raises(ValueError, match="Plain is no blueprint: it declares no capabilities"):
        SearchSetup.of(GAME, Plain(), "sparta", SearchConfig(rollouts=150, min_rollouts=10))

    class Boasts(bp.Blueprint):
        capabilities = bp.Capabilities(public_state=True, public_split=True)

    with pytest.raises(TypeError, match="declares public_split without the methods of PublicSplit"):
        bp.check(Boasts())


def test_the_paired_difference_says_plainly_whether_it_is_more_than_noise():
    from lbs.search.report import verdict

    assert verdict(-0.5, 0.5, 2) == ("within noise (|difference| < 2 s.e.): about 9 deals would tell a "
                                     "difference this size from none")
    assert verdict(1.0, 0.25, 40) == "4.0 standard errors above the blueprint"
    assert verdict(-1.0, 0.4, 40) == "2.5 standard errors below the blueprint"
    assert verdict(0.0, 0.3, 10) == "within noise (no mean difference)"
    assert verdict(2.0, 0.0, 1) == "one deal, no error estimate: not a result"
