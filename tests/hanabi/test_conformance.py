"""Differential conformance: our batched engine against hanabi-learning-environment (HLE).

The same decks and moves run in HLE and in our engine; before every move and at the end, for every
observer, legal moves, the full canonical observation, tokens, fireworks, deck size, current player,
reward, score and termination must agree (lbs.hanabi.hle.differential). Scripted policies steer the
games into the rules' corners, and a test asserts those corners were reached. Also here: HLE state
conversion, rl_env agents, the scripted policies' behaviour, and batch-size / device independence.
"""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest
import torch

from lbs.hanabi import GameConfig, current_observer, encode, engine, legal_moves
from lbs.hanabi.interop import differential as differential_module
from lbs.hanabi.interop.record import GameRecord, records_from_batch, replay, replay_steps
from lbs.hanabi.interop.text import render
from lbs.hanabi.policies import (
    POLICIES,
    bomber,
    by_game,
    cheater,
    conformance_policy,
    discard_heavy,
    hint_heavy,
    mixture,
    random_obs,
    random_policy,
    safe_play,
    safe_play_obs,
)
from lbs.hanabi.rng import hash_keys
from lbs.hanabi.variants import VARIANTS

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def hle():
    pytest.importorskip(
        "hanabi_learning_environment.pyhanabi", reason="HLE not installed (see test_fixtures.py)"
    )
    from lbs.hanabi.interop import differential, hle, rl_env

    return SimpleNamespace(**{k: getattr(m, k) for m in (hle, rl_env, differential) for k in dir(m)
                              if not k.startswith("_")})


# name -> (config, games). Every named config plus tiny corners: 1-card hands, a 3-card deck.
DIFF_CASES: dict[str, tuple[GameConfig, int]] = {
    "p2": (VARIANTS["p2"], 320),
    "p3": (VARIANTS["p3"], 256),
    "p4": (VARIANTS["p4"], 256),
    "p5": (VARIANTS["p5"], 256),
    "p2_h6": (VARIANTS["p2_h6"], 192),
    "p4_l1_i2": (VARIANTS["p4_l1_i2"], 192),
    "p2_nobomb": (VARIANTS["p2_nobomb"], 192),
    "p2_c2_r3": (VARIANTS["p2_c2_r3"], 160),
    "p3_c1_h3": (VARIANTS["p3_c1_h3"], 160),
    "p3_c3_r4_h2_i1": (GameConfig(players=3, colors=3, ranks=4, hand_size=2, max_info_tokens=1), 128),
    "p5_c2_r2_h1": (GameConfig(players=5, colors=2, ranks=2, hand_size=1), 64),
    "p2_c1_r1_h1": (GameConfig(players=2, colors=1, ranks=1, hand_size=1), 64),
}
_REPORTS: dict = {}


def _report(hle, name: str, tmp_path=None):
    """The differential report for a case (computed once per session)."""
    if name not in _REPORTS:
        cfg, games = DIFF_CASES[name]
        seeds = 7919 * (list(DIFF_CASES).index(name) + 1) + torch.arange(games)
        report = hle.differential(cfg, conformance_policy(), seeds)
        if report.mismatches and tmp_path is not None:
            m = report.mismatches[0]
            path = m.record.save(tmp_path / f"mismatch_{name}_game{m.game}_step{m.step}.json")
            pytest.fail(f"{name}: {m}; the game is saved as a GameRecord in {path}")
        _REPORTS[name] = report
    return _REPORTS[name]


def test_missing_hle_is_a_clear_error(monkeypatch):
    from lbs.hanabi.interop import hle as module

    monkeypatch.setitem(sys.modules, "hanabi_learning_environment", None)
    with pytest.raises(ImportError) as err:
        module.import_pyhanabi()
    assert "pip install -e .[hle]" in str(err.value) and "CMAKE_POLICY_VERSION_MINIMUM=3.5" in str(err.value)


@pytest.mark.parametrize("name", list(DIFF_CASES))
def test_engine_equals_hle(hle, name, tmp_path):
    report = _report(hle, name, tmp_path)
    cfg, games = DIFF_CASES[name]
    assert not report.mismatches
    assert report.games == games and report.steps >= games
    assert 0 <= report.score_sum <= games * cfg.max_score


def test_edge_cases_reached(hle):
    total = None
    for name in DIFF_CASES:
        r = _report(hle, name)
        total = r if total is None else total.merge(r)
        cfg = DIFF_CASES[name][0]
        if (cfg.colors, cfg.ranks) == (5, 5):
            for edge in ("max_score", "bombed_out", "final_round", "zero_info", "discard_to_max_info"):
                assert r.edges[edge] > 0, f"{name}: no game reached {edge}"
    assert total.games >= 2000
    missing = [k for k, v in total.edges.items() if v == 0]
    assert not missing, f"edge cases never reached: {missing} ({total.edges})"


def test_mismatches_name_step_game_observer_and_section(hle, monkeypatch):
    cfg = VARIANTS["p3"]
    real = hle.encode

    def corrupt(cfg_, state, *a, **kw):  # flip one life bit for game 1, observer 2, from step 4
        obs = real(cfg_, state, *a, **kw)
        k = cfg_.layout.slices["board.lives"].start
        hit = state.num_steps[1] >= 4
        obs[1, 2, k] = torch.where(hit, 1 - obs[1, 2, k], obs[1, 2, k])
        return obs

    monkeypatch.setattr(differential_module, "encode", corrupt)
    rep = hle.differential(cfg, cheater, torch.arange(4))
    (m,) = rep.mismatches
    assert (m.step, m.game, m.observer) == (4, 1, 2) and "board.lives" in m.what and "board.lives" in str(m)
    assert len(m.record.moves) == 4 and m.record.cfg == cfg
    monkeypatch.setattr(differential_module, "encode", real)

    real_step = engine.step

    def extra_token(cfg_, state, moves, checked=False):  # a rules bug: game 2 gains a hint token
        new, reward, done = real_step(cfg_, state, moves, checked)
        bump = (torch.arange(state.batch_size) == 2) & (new.num_steps == 3)
        return new.replace(info_tokens=new.info_tokens + bump.long()), reward, done

    monkeypatch.setattr(hle.engine, "step", extra_token)
    rep = hle.differential(cfg, hint_heavy, torch.arange(4))
    (m,) = rep.mismatches
    assert (m.step, m.game, m.what) == (3, 2, "info tokens")


def test_state_conversion_and_text_round_trip(hle):
    """from_hle equals our state after every move, to_hle rebuilds HLE's state from a record, our
    render equals HLE's own printout, and the fast legal mask equals HLE's legal_moves()."""
    for name in ("p2", "p5", "p2_c2_r3", "p3_c1_h3", "p4_l1_i2"):
        cfg = VARIANTS[name]
        g = hle.hle_game(cfg)
        seeds = torch.arange(6) + 5
        policy = conformance_policy()
        state = engine.reset(cfg, seeds)
        hs = [g.new_state(state.deck[i]) for i in range(6)]
        history, discards = [], [[] for _ in range(6)]
        while True:
            for i in range(6):
                assert hle.from_hle(cfg, hs[i]).equal(state.index(torch.tensor([i]))), (name, i)
                assert render(cfg, state, i, discards[i]) == str(hs[i])
                assert (g.legal_mask(hs[i]) == g.legal_mask_fast(hs[i])).all()
            if bool(state.done.all()):
                break
            mv = policy(cfg, state, seeds)
            new, _, _ = engine.step(cfg, state, mv)
            for i in torch.nonzero(~state.done).flatten().tolist():
                g.apply(hs[i], int(mv[i]))
                if int(new.last_card[i]) >= 0 and not bool(new.last_scored[i]):
                    discards[i].append(int(new.last_card[i]))
            history.append(torch.where(state.done, -1, mv))
            state = new
        records = records_from_batch(cfg, state.deck, torch.stack(history, 1), state.num_steps, state.score)
        for i in (0, 3):
            back = hle.to_hle(cfg, state, records[i].moves, row=i)  # checks from_hle(back) == state[i]
            assert str(back) == str(hs[i])
            st = replay_hle_checked(hle, records[i])
            assert hle.record_from_hle(cfg, st).moves == records[i].moves
        with pytest.raises(ValueError, match="does not reach"):
            hle.to_hle(cfg, state, records[1].moves[:-1], row=1)


def replay_hle_checked(hle, record: GameRecord):
    from lbs.hanabi.interop.hle import replay_hle

    st = replay_hle(record)
    cfg = record.cfg
    score = st.state.score()
    if cfg.bomb_zero or st.state.life_tokens() > 0:
        assert score == record.score
    return st


@pytest.mark.parametrize("players", [2, 3])
def test_rl_env_agents_play_full_games(hle, players):
    """Our observation policies play HLE's own rl_env; the games replay in our engine to the same
    score, and every decision equals the policy applied to our engine's observation."""
    cfg = GameConfig(players=players)
    env = hle.make_rl_env(cfg, seed=11)
    for game, policy in enumerate([safe_play_obs, safe_play_obs, random_obs]):
        agents = [hle.RlEnvAgent(cfg, policy, seed=100 * game + p) for p in range(players)]
        record = hle.play_rl_env(cfg, env, agents)
        assert record.score is not None and env.state.is_terminal()
        final = replay([record])
        assert int(final.score[0]) == record.score and bool(final.done[0])
        for t, state, mv in replay_steps([record]):
            if t == len(record.moves):
                break
            obs = encode(cfg, state, current_observer(state))[:, 0]
            seeds = hash_keys(torch.tensor([100 * game + t % players]), t // players)
            assert int(policy(cfg, obs, legal_moves(cfg, state), seeds)[0]) == int(mv[0]), (game, t)
    env.reset()
    obs = env._make_observation_all_players()["player_observations"]
    agent = hle.RlEnvAgent(cfg, safe_play_obs)
    assert agent.act(obs[1]) is None and agent.act(obs[0]) in obs[0]["legal_moves"]
    with pytest.raises(ValueError, match="illegal"):
        hle.RlEnvAgent(cfg, lambda c, o, legal, s: (~legal).long().argmax(1)).act(obs[0])


def test_new_state_rejects_impossible_decks(hle):
    cfg = VARIANTS["p2"]
    with pytest.raises(ValueError, match="not permutations"):
        hle.hle_game(cfg).new_state([0] * cfg.num_cards)


# ---- policies (engine only) -------------------------------------------------------------------------
def play(cfg: GameConfig, policy, seeds: torch.Tensor, device="cpu"):
    """Whole games; returns (final state, moves [B, T] with -1 after the end, min info tokens [B])."""
    seeds = seeds.to(device)
    state = engine.reset(cfg, seeds)
    moves, min_info = [], state.info_tokens.clone()
    while not bool(state.done.all()):
        mv = policy(cfg, state, seeds)
        moves.append(torch.where(state.done, -1, mv))
        state, _, _ = engine.step(cfg, state, mv, checked=True)
        min_info = torch.minimum(min_info, torch.where(state.done, min_info, state.info_tokens))
    return state, torch.stack(moves, 1), min_info


def test_scripted_policies_behave_as_described():
    cfg = GameConfig(players=2)
    seeds = torch.arange(96)
    st, _, _ = play(cfg, cheater, seeds)
    assert st.score.float().mean() >= 23 and (st.score == cfg.max_score).float().mean() >= 0.5
    st, moves, _ = play(cfg, bomber, seeds)
    assert (st.life_tokens == 0).all() and (st.score == 0).all()
    assert all(cfg.move_table[m][0] == 1 for m in moves[moves >= 0].tolist())
    st, _, min_info = play(cfg, hint_heavy, seeds)
    assert (min_info == 0).all()
    st, _, min_info = play(cfg, discard_heavy, seeds)
    assert (min_info >= cfg.max_info_tokens - 1).all()
    st, _, _ = play(cfg, safe_play, seeds)
    assert (st.life_tokens == cfg.max_life_tokens).all(), "safe_play never plays an unproven card"
    assert st.score.float().mean() >= 14
    st, _, _ = play(cfg, random_policy, seeds)
    assert st.score.float().mean() < 3


def test_mixtures_pick_by_weight_and_by_game():
    cfg = GameConfig(players=3)
    state = engine.reset(cfg, torch.arange(400))
    seeds = torch.arange(400)
    a, b = cheater(cfg, state, seeds), discard_heavy(cfg, state, seeds)
    mixed = mixture([cheater, discard_heavy], [0.25, 0.75])(cfg, state, seeds)
    differ = a != b
    from_b = (mixed == b) & differ
    assert ((mixed == a) | (mixed == b)).all()
    assert 0.6 < from_b.sum() / differ.sum() < 0.9
    styled = by_game([cheater, discard_heavy])(cfg, state, seeds)
    assert torch.equal(styled, torch.where(seeds % 2 == 0, a, b))
    with pytest.raises(ValueError, match="non-negative"):
        mixture([cheater, bomber], [1.0])
    assert set(POLICIES) >= {"random", "cheater", "bomber", "hint_heavy", "discard_heavy", "safe_play"}


def test_results_do_not_depend_on_batch_size():
    cfg = GameConfig(players=3)
    seeds = torch.arange(40) + 123
    policy = conformance_policy()
    full, moves, _ = play(cfg, policy, seeds)
    start = 0
    for size in (1, 5, 17, 17):
        part, pm, _ = play(cfg, policy, seeds[start : start + size])
        idx = torch.arange(start, start + size)
        assert part.equal(full.index(idx))
        t = pm.shape[1]
        assert torch.equal(pm, moves[idx, :t]) and (moves[idx, t:] == -1).all()
        start += size


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_equals_cpu():
    for cfg in (GameConfig(players=2), GameConfig(players=5), VARIANTS["p2_c2_r3"]):
        seeds = torch.arange(64) + 9
        cpu, cpu_moves, _ = play(cfg, conformance_policy(), seeds)
        gpu, gpu_moves, _ = play(cfg, conformance_policy(), seeds, device="cuda")
        assert gpu.to("cpu").equal(cpu) and torch.equal(gpu_moves.cpu(), cpu_moves)
        assert torch.equal(encode(cfg, gpu).cpu(), encode(cfg, cpu))
