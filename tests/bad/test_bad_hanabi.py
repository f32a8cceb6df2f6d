"""BAD on Hanabi at tiny size: the partial policy, the public belief against a brute-force posterior, a short
run that learns, and a resume."""

from __future__ import annotations

import contextlib
import importlib.util
import io
from dataclasses import replace
from pathlib import Path

import torch

from lbs.bad.belief import PublicBelief, seats_after, view_keys
from lbs.bad.config import apply_preset
from lbs.bad.policy import BadNet, BadNetConfig, partial_policy, view_legal, view_onehot
from lbs.bad.selfplay import ZERO_NATS, belief_stats, partial_policy_chance, play_round
from lbs.bad.trainer import BadTrainer, evaluate, load_bad
from lbs.hanabi import GameConfig, engine
from lbs.hanabi.encode import encode, public_features
from lbs.hanabi.policies import random_policy
from lbs.hanabi.rng import uniform
from lbs.scoring import play_policy
from lbs.seeding import Stream, game_seeds

ROOT = Path(__file__).resolve().parents[2]


def _first_move(game: GameConfig, net: BadNet, belief: PublicBelief, seeds: torch.Tensor, beta: float = 1.0):
    """The mover's inputs and the move of the sampled partial policy at the deal (as selfplay plays it)."""
    state = engine.reset(game, seeds)
    belief.reset(state)
    actor, h = state.cur_player, game.hand_size
    obs = encode(game, state, observers=actor[:, None])[:, 0]
    public = net.public_part(public_features(game, obs), belief.features(actor))
    seen = state.hands.gather(1, seats_after(game, actor)[..., None].expand(-1, -1, h))
    legal = engine.legal_moves(game, state)
    xi = uniform(seeds, 0x5EED, 0, 0)
    move = partial_policy(net.logits(public, view_onehot(game, seen)), legal, xi, beta)
    return state, public, seen, legal, xi, move


def test_partial_policy_is_the_inverse_cdf_at_xi() -> None:
    torch.manual_seed(0)
    logits, legal = torch.randn(200, 7), torch.rand(200, 7) < 0.6
    legal[:, 3] = True
    xi = torch.rand(200, dtype=torch.float64)
    got = partial_policy(logits, legal, xi, beta=2.0)
    for i in range(200):  # a plain walk along the CDF
        p = (2.0 * logits[i].double()).masked_fill(~legal[i], float("-inf")).softmax(0)
        acc, want = 0.0, None
        for m in range(7):
            acc += float(p[m])
            if want is None and legal[i, m] and acc > float(xi[i]):
                want = m
        assert int(got[i]) == want
        assert legal[i, got[i]]


def test_partial_policy_applied_to_private_views_names_the_move_made() -> None:
    """The update's question, asked of the mover's real view, says yes; other views get the move the sampled
    policy names for them (the same map: same public part, same xi)."""
    torch.manual_seed(1)
    game = GameConfig(players=2, colors=2, ranks=3, hand_size=2)
    net = BadNet(game, BadNetConfig(hidden=16, layers=1))
    belief = PublicBelief(game, samples=64, iterations=5, mix=0.01, exact_limit=1)  # drawn views
    seeds = game_seeds(Stream.EVAL, 0, 32)
    state, public, seen, legal, xi, move = _first_move(game, net, belief, seeds)
    can_hint = state.info_tokens > 0
    assert torch.equal(view_legal(game, legal, can_hint, seen[:, None])[:, 0], legal)
    chance = partial_policy_chance(game, net, public, legal, can_hint, xi, 1.0, False, move)
    views, _ = belief.views(state.cur_player, view_keys(seeds, 0, 0))
    views = torch.cat([seen[:, None], views], 1)  # the real view first
    said = chance(views, torch.arange(32))
    assert bool((said[:, 0] == 1).all())
    for g in range(32):  # one game and one view at a time: the move the partial policy names there
        for s in range(1, 9):
            v = views[g, s][None]
            lg = view_legal(game, legal[g][None], can_hint[g][None], v[None])[0]
            named = partial_policy(net.logits(public[g][None], view_onehot(game, v)), lg, xi[g][None], 1.0)
            assert float(said[g, s]) == float(named[0] == move[g])


def test_public_belief_update_is_the_exact_posterior_with_one_card_per_hand() -> None:
    """One card per hand: after the first move the public belief over the partner's card (no self-consistency
    iterations, no mix-in) equals the posterior of a brute force over both hands, which weighs every pair
    by the deal's prior and keeps those under which the partial policy names the move and the move shows
    the same public outcome."""
    torch.manual_seed(2)
    game = GameConfig(players=2, colors=2, ranks=2, hand_size=1)
    t, n = game.card_types, 24
    net = BadNet(game, BadNetConfig(hidden=16, layers=1))
    belief = PublicBelief(game, samples=1, iterations=0, mix=0.0, exact_limit=t)  # enumerated
    seeds = game_seeds(Stream.EVAL, 0, n)
    state, public, seen, legal, xi, move = _first_move(game, net, belief, seeds, beta=0.5)
    chance = partial_policy_chance(game, net, public, legal, state.info_tokens > 0, xi, 0.5, False, move)
    after, _, _ = engine.step(game, state, move)
    belief.update(state, move, after, chance, view_keys(seeds, 0, 0))
    got = belief.marginals("v2")[:, 1, 0]  # [G, T] seat 1's card
    counts = torch.tensor(game.card_counts)
    seen_after = public_features(game, encode(game, after, observers=torch.zeros(n, 1, dtype=torch.long)))
    ruled_out = 0
    for g in range(n):
        post = torch.zeros(t, dtype=torch.float64)
        for c0 in range(t):
            for c1 in range(t):
                prior = counts[c0] * (counts[c1] - int(c0 == c1))
                if prior <= 0:
                    continue
                deck = state.deck[g].clone()  # the two hands swapped in; the deck's order is never seen
                deck[:2] = torch.tensor([c0, c1])
                s = engine.initial_state(game, deck[None])
                lg = engine.legal_moves(game, s)
                named = partial_policy(net.logits(public[g][None], view_onehot(game, torch.tensor([[[c1]]]))),
                                       lg, xi[g][None], 0.5)
                if int(named[0]) != int(move[g]):
                    continue
                s2, _, _ = engine.step(game, s, move[g][None])
                same = torch.equal(public_features(game, encode(game, s2, observers=torch.zeros(1, 1,
                                                                                        dtype=torch.long)))[0],
                                   seen_after[g])
                post[c1] += float(prior) * same
        torch.testing.assert_close(got[g], post / post.sum(), atol=1e-9, rtol=0)
        ruled_out += int(((post == 0) & (counts > 0)).any())
    assert ruled_out >= n // 4  # the moves said something: the test is not the prior against itself


def _tiny(tmp_path, **kw):
    cfg = replace(apply_preset("tiny"), out_dir=str(tmp_path / "run"), device="cpu", wandb_mode="disabled")
    return replace(cfg, **kw)


def test_a_tiny_run_learns_above_random_play(tmp_path) -> None:
    cfg = _tiny(tmp_path, total_updates=60, games_per_update=32, lr=1e-2, iterations=2, eval_every=60,
                eval_games=300)
    result = BadTrainer(cfg, progress=False).run()
    randomly = play_policy(cfg.game, random_policy, 300, 0)
    assert result is not None
    assert result.mean > randomly.mean + 0.5, (result, randomly)
    _, _, net = load_bad(tmp_path / "run" / "best.pt")
    assert isinstance(net, BadNet)
    # train/score.py scores it like a blueprint: greedy on the evaluation stream's deals, as evaluate does
    spec = importlib.util.spec_from_file_location("train_score", ROOT / "train" / "score.py")
    score = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(score)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        score.main([str(tmp_path / "run" / "best.pt"), "--games", "100", "--device", "cpu"])
    assert out.getvalue().strip() == str(evaluate(cfg, net, 100, 0, torch.device("cpu"), Stream.EVAL))


def test_the_evaluation_reports_the_score_with_lost_games_at_zero_beside_the_kept_points(tmp_path) -> None:
    """Trained as the paper trained (a game that loses every life keeps its points), the evaluation's zeroed
    mean is what the same policy scores on the same deals under HLE's rule; under that rule both are one."""
    assert apply_preset("paper").game.bomb_zero is False and apply_preset("small").game.bomb_zero is False
    cfg = _tiny(tmp_path)
    torch.manual_seed(0)
    net = BadNet(cfg.game, cfg.net).eval()
    keep = replace(cfg, game=replace(cfg.game, bomb_zero=False))
    kept = evaluate(keep, net, 300, 0, torch.device("cpu"))
    zero = evaluate(cfg, net, 300, 0, torch.device("cpu"))
    assert kept.bombed == zero.bombed > 0.1  # an untrained policy loses games: the two rules differ
    assert kept.zeroed == zero.zeroed == zero.mean < kept.mean


def test_resume_goes_on_from_the_checkpoint(tmp_path) -> None:
    cfg = _tiny(tmp_path, total_updates=2, games_per_update=8, eval_every=1, eval_games=20)
    first = BadTrainer(cfg, progress=False)
    first.run()
    latest = tmp_path / "run" / "latest.pt"
    again = BadTrainer(replace(cfg, total_updates=4), resume=latest, progress=False)
    for a, b in zip(first.net.state_dict().values(), again.net.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    assert again.record.updates == 2 and len(again.record.history) == 2
    again.run()
    assert again.record.updates == 4 and [r["updates"] for r in again.record.history] == [1, 2, 3, 4]
    assert BadTrainer(replace(cfg, total_updates=4), resume=latest, progress=False).run() is None  # done


def test_belief_stats_per_turn_are_entropies_and_true_card_cross_entropies(tmp_path) -> None:
    """belief_stats sums each belief's entropy and the true card's cross-entropy over the held slots (a
    true card at probability 0 counted apart, at ZERO_NATS, for V2, V1 and the likelihood); a round reports
    them per move, its held slots those of the games still on, and its mean entropies from the same sums."""
    game = GameConfig(players=2, colors=1, ranks=4, hand_size=2)
    state = engine.reset(game, torch.arange(3))
    belief = PublicBelief(game, samples=8, iterations=5, mix=0.0, exact_limit=16)
    belief.reset(state)
    hands, held = state.hands, state.hands >= 0
    s = belief_stats(belief, hands, held)
    for kind, cols in (("v0", [0, 2]), ("v2", [1, 3])):
        p = belief.marginals(kind)
        entropy = -(p * p.clamp(min=1e-300).log()).sum(-1)[held].sum()
        true = p.gather(-1, hands[..., None]).squeeze(-1)[held]
        assert torch.allclose(s[cols], torch.stack([entropy, -true.log().sum()])), kind
    assert s[4:7].tolist() == [0, 0, 0] and int(s[7]) == 12
    belief.loglike = belief.loglike.scatter(-1, hands[..., None], float("-inf"))  # every true card ruled out
    belief._cache.clear()
    s = belief_stats(belief, hands, held)
    assert s[4:7].tolist() == [12, 0, 12] and float(s[3]) == 12 * ZERO_NATS

    cfg = _tiny(tmp_path)
    torch.manual_seed(0)
    net = BadNet(cfg.game, cfg.net).eval()
    r = play_round(cfg.game, net, cfg, game_seeds(Stream.BAD_VAL, 0, 40), greedy=True, record=False)
    by_turn = r.belief_by_turn
    assert by_turn.shape == (int(r.length.max()), 8)
    assert int(by_turn[0, 7]) == 40 * cfg.game.players * cfg.game.hand_size  # every slot held at the deal
    assert (by_turn[1:, 7] <= by_turn[:-1, 7]).all()  # fewer held cards as games end
    assert abs(r.entropy_v2 - float(by_turn[:, 1].sum() / by_turn[:, 7].sum())) < 1e-9
