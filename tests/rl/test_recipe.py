"""The blueprint recipe: imitation of a rule bot on its fresh games (DAgger, losing plays weighed), the
network's own action values by TD (returns cut where the behaviour explored, the anchor's moves held), R2D2
improvement, all phases of one trainer; and the value check that says whether Q prices every legal move."""

import json
import subprocess
import sys
from dataclasses import replace
from functools import partial
from pathlib import Path

import pytest
import torch

from lbs import ckpt
from lbs.acting import greedy
from lbs.bots import SmartBot
from lbs.hanabi import GameConfig, engine, public_features
from lbs.hanabi.config import DISCARD, PLAY, REVEAL_COLOR, REVEAL_RANK
from lbs.hanabi.rng import hash_keys
from lbs.models import NetConfig, load_blueprint, make_qnet
from lbs.models.qnet import AUX_EMPTY, AUX_PLAYABLE
from lbs.rl.actors import ActorConfig, run_round
from lbs.rl.config import Phase
from lbs.rl.demos import MOVE_KINDS, agreement, agreement_by_kind, record_demos
from lbs.rl.imitation import bombing_plays, imitation_loss
from lbs.rl.r2d2 import large_margin_loss, n_step_targets, players_as_rows
from lbs.rl.trainer import PRESETS, Trainer
from lbs.rl.values import _deck_floor, reshuffled, value_check
from lbs.seeding import Stream, game_seeds

ROOT = Path(__file__).resolve().parents[2]
GAME = GameConfig(players=2, colors=2, ranks=3, hand_size=3)


def one_step(q, action, legal=None):
    """A [1, 1, 1, A] batch of one seat at one valid step."""
    q = torch.tensor(q, dtype=torch.float32).view(1, 1, 1, -1)
    legal = torch.ones_like(q, dtype=torch.bool) if legal is None else torch.tensor(legal).view(1, 1, 1, -1)
    return q, torch.tensor([[[action]]]), legal, torch.ones(1, 1, dtype=torch.bool)


def test_margin_loss_is_zero_only_when_the_held_move_leads_by_the_margin():
    assert large_margin_loss(*one_step([3.0, 1.0, 2.0], 0), margin=0.8) == pytest.approx(0.0)
    # the best other move (2.5) + margin 0.8 beats Q(a_E) = 3 by 0.3
    assert large_margin_loss(*one_step([3.0, 1.0, 2.5], 0), margin=0.8) == pytest.approx(0.3)
    assert large_margin_loss(*one_step([1.0, 4.0, 2.0], 0), margin=0.8) == pytest.approx(3.8)
    masked = one_step([1.0, 9.0, 0.0], 0, [True, False, True])  # illegal moves never count
    assert large_margin_loss(*masked, margin=0.8) == pytest.approx(0.0)


def test_margin_loss_counts_valid_steps_only():
    q = torch.tensor([1.0, 4.0]).expand(2, 3, 1, 2).clone()  # every step: a_E = 0 loses by 3 + margin 1
    action = torch.zeros(2, 3, 1, dtype=torch.long)
    legal = torch.ones(2, 3, 1, 2, dtype=torch.bool)
    mask = torch.tensor([[True, True, False], [True, True, True]])
    assert large_margin_loss(q, action, legal, mask, 1.0) == pytest.approx(10.0)  # (2 + 3) x 4 / 2
    q.requires_grad_(True)
    large_margin_loss(q, action, legal, mask, 1.0).backward()
    assert (q.grad[:, :2, 0, 0] < 0).all() and (q.grad[:, :2, 0, 1] > 0).all() and (q.grad[0, 2] == 0).all()


def test_returns_are_cut_where_the_behaviour_left_the_evaluated_policy():
    """n_step_targets(cut=...): the target of (s_t, a_t) sums rewards until the first later step whose move
    was not the policy's, and bootstraps there; without cuts it is the plain n-step target."""
    g = 0.5
    r = torch.tensor([[1.0, 2.0, 4.0, 8.0, 16.0]])
    boot = torch.tensor([[100.0, 200.0, 300.0, 400.0, 500.0]])
    mask = torch.ones(1, 5, dtype=torch.bool)
    plain = n_step_targets(r, mask, boot, g, 3)
    assert plain[0, 0] == pytest.approx(1 + g * 2 + g**2 * 4 + g**3 * 400)
    assert torch.equal(n_step_targets(r, mask, boot, g, 3, torch.zeros(1, 5, dtype=torch.bool)), plain)
    cut = torch.tensor([[False, False, True, False, False]])  # step 2 explored
    got = n_step_targets(r, mask, boot, g, 3, cut)
    assert got[0, 0] == pytest.approx(1 + g * 2 + g**2 * 300)  # stops before step 2, bootstraps there
    assert got[0, 1] == pytest.approx(2 + g * 300)
    assert got[0, 2] == pytest.approx(4 + g * 8 + g**2 * 16)  # its own exploration is the action valued
    assert got[0, 3] == pytest.approx(8 + g * 16)  # the episode ends: nothing to bootstrap
    short = torch.tensor([[True, True, True, False, False]])  # the episode ends after step 2
    assert n_step_targets(r, short, boot, g, 3, cut)[0, 1] == pytest.approx(2 + g * 300)


def test_demonstrations_are_the_rule_bots_games_in_the_replay_format():
    cfg = replace(PRESETS["tiny"], game=GAME, actor=ActorConfig(num_games=8, max_len=0))
    eps = record_demos(cfg, 8, torch.device("cpu"))
    again = record_demos(cfg, 8, torch.device("cpu"))
    assert all(torch.equal(eps[k], again[k]) for k in eps)  # fixed deals, greedy bot: rebuilt the same
    legal, action, mask = eps["legal"], eps["action"], eps["mask"]
    assert legal.gather(-1, action.unsqueeze(-1)).squeeze(-1)[mask].all()  # every recorded move was legal
    assert eps["reward"].sum(1).mean() > 0.5 * GAME.max_score  # SmartBot's games, not random ones


def test_dagger_games_are_the_networks_own_labelled_with_smartbots_moves():
    """record_demos(learner=net): the states are exactly the network's greedy games on the same deals, and
    each recorded action is what SmartBot, following that game, would have played there."""
    cfg = replace(PRESETS["tiny"], game=GAME, actor=ActorConfig(num_games=8, max_len=0))
    torch.manual_seed(0)
    net = make_qnet(GAME, NetConfig(hidden=16, lstm_layers=1, mlp_layers=1))
    eps = record_demos(cfg, 16, torch.device("cpu"), learner=net)
    seeds = game_seeds(Stream.DEMO, cfg.seed, 16)
    with torch.no_grad():
        own, _ = run_round(GAME, net.step, net.initial_state, seeds, 0, cfg.actor)
    for k in ("priv", "legal", "mask", "reward", "terminal", "own_hand"):
        assert torch.equal(eps[k], own[k]), k
    bot, mask = SmartBot(GAME), eps["mask"]
    hid = bot.initial_state(16 * GAME.players)
    for t in range(mask.shape[1]):
        priv, legal = eps["priv"][:, t].flatten(0, 1).float(), eps["legal"][:, t].flatten(0, 1)
        scores, hid = bot.step(priv, priv, legal, hid)
        said = greedy(scores, legal).view(16, GAME.players)
        assert torch.equal(said[mask[:, t]], eps["action"][:, t][mask[:, t]]), t
    assert ((eps["action"] != own["action"]) & mask[..., None]).any()  # the labels are not the moves made


def test_agreement_by_kind_counts_each_kind_of_the_demonstrators_moves():
    """Per kind of SmartBot's move, the network's same / other-kind answers, against a plain count over the
    recorded steps (3 players: hints to two partners); the matches add up to agreement's fraction."""
    game = GameConfig(players=3, colors=2, ranks=3, hand_size=3)
    cfg = replace(PRESETS["tiny"], game=game, actor=ActorConfig(num_games=8, max_len=0))
    torch.manual_seed(0)
    net = make_qnet(game, NetConfig(hidden=16, lstm_layers=1, mlp_layers=1))
    eps = record_demos(cfg, 8, torch.device("cpu"), learner=net)  # the network's own games: some agree
    public = partial(public_features, game)
    with torch.no_grad():
        got = agreement_by_kind(game, net, eps, public)
        b, t, p, _ = eps["legal"].shape
        priv = eps["priv"].float().transpose(1, 2).flatten(0, 1)  # seats as rows
        legal = eps["legal"].transpose(1, 2).flatten(0, 1)
        q = net(priv, public(priv), legal, net.initial_state(b * p))[0]
        mine = greedy(q, legal).view(b, p, t).transpose(1, 2)  # [B, T, P]
    kind = {DISCARD: 0, PLAY: 1, REVEAL_COLOR: 2, REVEAL_RANK: 3}
    want = [[0] * (len(MOVE_KINDS) + 1) for _ in MOVE_KINDS]
    for g, step, seat in ((g, s, k) for g, s in eps["mask"].nonzero().tolist() for k in range(p)):
        if not eps["legal"][g, step, seat, :-1].any():
            continue  # a waiting seat
        demo, net_move = int(eps["action"][g, step, seat]), int(mine[g, step, seat])
        row = want[kind[game.move_table[demo][0]]]
        row[0 if demo == net_move else 1 + kind[game.move_table[net_move][0]]] += 1
    assert got == dict(zip(MOVE_KINDS, want, strict=True))
    assert all(sum(row) > 0 for row in want) and sum(row[0] for row in want) > 0
    n = sum(map(sum, want))
    assert abs(sum(row[0] for row in want) / n - agreement(net, eps, public)) < 1e-6


def _imitate(train, bomb_weight=0.0, passes=2):
    torch.manual_seed(0)
    net = make_qnet(GAME, NetConfig(hidden=32, lstm_layers=1, mlp_layers=1))
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    losses = []
    for i in torch.arange(512).split(16) * passes:
        loss = imitation_loss(net, {k: v[i] for k, v in train.items()}, GAME, bomb_weight)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return net, losses


@pytest.mark.usefixtures("one_thread")
def test_imitation_learns_the_demonstrators_moves_and_the_bomb_weight_avoids_losing_plays():
    """A few dozen cross-entropy updates raise the agreement with SmartBot on held-out games well above its
    start; with losing plays weighed, less probability lands on plays that would lose a life (held-out
    deals) at about the same agreement."""
    cfg = replace(PRESETS["tiny"], game=GAME, actor=ActorConfig(num_games=16, max_len=0))
    train = record_demos(cfg, 512, torch.device("cpu"))
    held = record_demos(cfg, 256, torch.device("cpu"), start=1 << 20)  # deals the training never saw
    public = partial(public_features, GAME)

    @torch.no_grad()
    def p_bomb(net):  # mean probability of a losing play where a seat moves
        priv, legal = players_as_rows(held["priv"].float()), players_as_rows(held["legal"])
        q = net(priv, public(priv), legal, net.initial_state(priv.shape[0]))[0].masked_fill(~legal, -1e9)
        bomb = players_as_rows(bombing_plays(GAME, held["priv"].float(), held["own_hand"]))
        moving = legal[..., : GAME.num_moves].any(-1) & players_as_rows(
            held["mask"][..., None].expand(-1, -1, GAME.players))
        return float((q.softmax(-1) * bomb).sum(-1)[moving].mean())

    torch.manual_seed(0)
    before = agreement(make_qnet(GAME, NetConfig(hidden=32, lstm_layers=1, mlp_layers=1)), held, public)
    plain, losses = _imitate(train)
    weighed, _ = _imitate(train, bomb_weight=2.0)
    assert agreement(plain, held, public) > before + 0.25
    assert sum(losses[-8:]) < 0.8 * sum(losses[:8]), losses
    assert p_bomb(weighed) < 0.6 * p_bomb(plain)
    assert agreement(weighed, held, public) > agreement(plain, held, public) - 0.05


def test_bombing_plays_are_the_plays_of_cards_that_are_not_playable():
    """The losing-play mask, read from the fireworks in the observation and the true own cards, marks exactly
    the held cards the engine's auxiliary targets call not playable."""
    cfg = replace(PRESETS["tiny"], game=GAME, actor=ActorConfig(num_games=16, max_len=0),
                  net=NetConfig(hidden=8, lstm_layers=1, mlp_layers=1, aux_head=True))
    eps = record_demos(cfg, 64, torch.device("cpu"))
    bomb = bombing_plays(GAME, eps["priv"].float(), eps["own_hand"])
    plays = slice(GAME.play_move(0), GAME.play_move(GAME.hand_size))
    aux = eps["aux_target"]
    assert torch.equal(bomb[..., plays], (aux != AUX_PLAYABLE) & (aux != AUX_EMPTY))
    assert not bomb[..., : plays.start].any() and not bomb[..., plays.stop:].any()
    assert bomb.any() and (aux == AUX_PLAYABLE).any()


def recipe(tmp_path, name="run", phases=None, **kw):
    """The small recipe, shortened: enough to see each phase do its job in a test's time."""
    phases = phases or (
        Phase("imitate", updates=96, dagger=0.5, chunk=64),
        Phase("values", updates=120, lr=1e-3, eps_base=0.3, n_step=40, fit_games=256, anchor_weight=5.0,
              anchor_margin=0.2),
        Phase("improve", updates=24, lr=3e-4, anchor_weight=5.0, anchor_margin=0.2),
    )
    return replace(PRESETS["recipe-small"], phases=phases, eval_every=48, eval_games=100, value_games=60,
                   min_replay=64, out_dir=str(tmp_path / name), wandb_mode="disabled", **kw)


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """One short run of the small recipe, shared by the tests that read what it made."""
    tmp = tmp_path_factory.mktemp("recipe")
    torch.set_num_threads(1)
    trainer = Trainer(recipe(tmp), progress=False)
    trainer.run(command="test")
    return trainer


def test_the_values_phase_prices_every_legal_move_and_keeps_the_moves(small_run):
    """After imitation Q is logits; after the values phase the VDN sum of Q follows the return of every
    legal move (the value check's correlation on other moves rises well above the logits', its RMS error
    falls) while the greedy moves stay the anchor's."""
    phase_ends = {h["phase"]: h["value_check"] for h in small_run.record.history if "value_check" in h}
    before, after = phase_ends[0], phase_ends[1]
    assert after["corr_other"] > before["corr_other"] + 0.3, (before, after)
    assert after["rms_other"] < 0.9 * before["rms_other"], (before, after)
    assert after["corr_own"] > before["corr_own"] + 0.2, (before, after)
    assert after["rms_own"] < before["rms_own"], (before, after)
    assert after["moves_kept"] > 0.9, after


def test_best_pt_is_a_network_with_values(small_run):
    """In a recipe with TD phases best.pt is never an imitation-phase network: it is the values phase's end
    or a better improve-phase evaluation; the shipped-file record says which phase it came from."""
    best = ckpt.load(Path(small_run.cfg.out_dir) / "best.pt", "blueprint")
    assert best["counters"]["updates"] >= 96 + 120
    assert "anchor" in best and best["config"]["phases"][0]["kind"] == "imitate"
    kept = [h for h in small_run.record.history if h["updates"] >= 96 + 120]
    assert best["best"] == pytest.approx(max(h["mean"] for h in kept))


@pytest.mark.usefixtures("one_thread")
def test_a_stopped_recipe_resumes_exactly_and_takes_a_retuned_later_phase(tmp_path):
    """Stopped at total_updates inside the imitation phase and resumed, the run's weights equal an unbroken
    run's; a resume may change the phases still to come (--preset's), never one begun."""
    phases = (Phase("imitate", updates=8, dagger=0.5, chunk=64), Phase("imitate", updates=4, chunk=64))
    whole = Trainer(recipe(tmp_path, "whole", phases), progress=False)
    whole.run()
    part = Trainer(recipe(tmp_path, "part", phases, total_updates=4), progress=False)
    part.run()
    latest = Path(part.cfg.out_dir) / "latest.pt"
    retuned = (phases[0], Phase("imitate", updates=4, chunk=64, bomb_weight=1.0))
    more = Trainer(recipe(tmp_path, "part", retuned), resume=latest, progress=False)
    assert more.record.demo_games == 128
    with pytest.raises(ckpt.CheckpointError, match="a phase begun cannot change"):
        changed = (Phase("imitate", updates=8, chunk=64), *phases[1:])
        Trainer(recipe(tmp_path, "part", changed), resume=latest, progress=False)
    rest = Trainer(recipe(tmp_path, "part", phases), resume=latest, progress=False)
    rest.run()
    for k, v in whole.learner.module.state_dict().items():
        assert torch.equal(v, rest.learner.module.state_dict()[k]), k


def test_a_policy_network_keeps_every_move_while_the_values_phase_trains_q(tmp_path):
    """With NetConfig.policy_net imitation trains the policy network, and the values phase (stopped halfway
    and resumed) trains the Q network alone: the policy ends as the anchor's, bit for bit, so every greedy
    move is kept (moves_kept 1, not the margin's ~0.9), while Q comes to follow the returns."""
    phases = (Phase("imitate", updates=96, dagger=0.5, chunk=64),
              Phase("values", updates=120, lr=1e-3, eps_base=0.3, n_step=40, fit_games=256))
    cfg = recipe(tmp_path, "held", phases, net=replace(PRESETS["recipe-small"].net, policy_net=True))
    Trainer(replace(cfg, total_updates=96 + 60), progress=False).run()
    trainer = Trainer(cfg, resume=Path(cfg.out_dir) / "latest.pt", progress=False)
    trainer.run()
    net, anchor = trainer.learner.module.state_dict(), trainer.learner.anchor.state_dict()
    for k, v in net.items():
        assert torch.equal(v, anchor[k]) == k.startswith("policy."), k
    checks = [h["value_check"] for h in trainer.record.history if "value_check" in h]
    before, after = checks
    assert after["moves_kept"] == 1.0, after
    assert after["corr_other"] > before["corr_other"] + 0.05, checks
    assert after["rms_other"] < before["rms_other"], checks


def test_the_actors_of_a_policy_network_play_its_policy_alone_and_make_its_moves(tmp_path):
    """A values phase's actors and the evaluation serve a HeldQNet's policy network (its Q is never read
    there): what they serve is the policy's weights, and an exploring round through it records the moves the
    whole network's step records on the same deals."""
    phases = (Phase("values", updates=8, eps_base=0.3, n_step=40),)
    cfg = recipe(tmp_path, "actors", phases, net=replace(PRESETS["recipe-small"].net, policy_net=True))
    trainer = Trainer(cfg, progress=False)
    net = trainer.learner.module
    with torch.no_grad():  # the two networks differ, so serving the wrong one shows
        for p in net.q.parameters():
            p.add_(torch.randn_like(p))
    trainer.selfplay.sync(net)
    served = trainer.selfplay.server.state_dict()
    assert served.keys() == net.policy.state_dict().keys()
    assert all(torch.equal(v, net.policy.state_dict()[k]) for k, v in served.items())
    evaluated = trainer.selfplay.serve_learner(net)
    assert evaluated.initial_state(3)[0].shape[0] == net.policy.layers
    n = cfg.actor.num_games  # round 0's deals and exploration rates, as SelfPlay.play_round draws them
    seeds = game_seeds(Stream.BLUEPRINT_TRAIN, cfg.seed, n)
    eps = trainer.selfplay.eps_ladder[hash_keys(seeds, torch.zeros_like(seeds)) % n].float()
    whole, _ = run_round(cfg.game, net.step, net.initial_state, seeds, 0, cfg.actor, eps=eps)
    ours, _ = trainer.selfplay.play_round(0)
    assert torch.equal(ours["action"], whole["action"]) and ours["mask"].sum() > n
    trainer.selfplay.close()


def test_the_value_check_compares_q_with_the_return_of_each_legal_move():
    """On a network whose Q is 0 everywhere, the value check's RMS error is exactly the RMS of the returns
    (own move: the greedy games' points to come from the branching state; other moves: their branches'), its
    counts are the legal moves of one state per deal, and the anchor's moves are its own."""
    torch.manual_seed(0)
    net = make_qnet(GAME, NetConfig(hidden=16, lstm_layers=1, mlp_layers=1, dueling=True))
    with torch.no_grad():
        for p in net.head.parameters():
            p.zero_()
    got = value_check(GAME, net, games=40, seed=3, anchor=net)
    assert got["n_own"] == 40 and got["n_other"] > 40
    same = value_check(GAME, net, games=40, seed=3, along=net)  # its own games, replayed: the same states
    assert same == pytest.approx({k: v for k, v in got.items() if k != "moves_kept"}, nan_ok=True)
    assert got["moves_kept"] == 1.0
    assert got["bias_own"] == pytest.approx(-got["mean_return"])
    assert got["rms_own"] >= abs(got["bias_own"]) and got["corr_own"] != got["corr_own"]  # nan: Q is constant
    # paired with the own move: Q's differences are 0, so the error is the returns' differences alone, which
    # (own move's return a, other's b) are bounded by both RMS errors: |b - a| <= |b| + |a|
    assert 0 < got["rms_adv"] <= got["rms_other"] + got["rms_own"] * (got["n_own"] ** 0.5)
    assert got["corr_adv"] != got["corr_adv"] and 0 <= got["sign_adv"] <= 1
    # the leaf value (reward, then Q at the next state) is 0 plus the reward here: its error is the rest
    assert 0 < got["rms_leaf_other"] <= got["rms_other"] and 0 <= got["sign_leaf_adv"] <= 1


def test_the_value_checks_floor_replays_each_branch_on_other_orders_of_the_undrawn_cards():
    """reshuffled keeps each deck's drawn cards in place and its first order whole, and shuffles the rest
    into decks of the same cards; the floor (the return's spread over those orders) leaves every other column
    as it was, is 0 where every card was drawn and above 0 where cards are still to come."""
    decks = engine.reset(GAME, game_seeds(Stream.BLUEPRINT_VAL, 0, 6)).deck
    drawn = torch.tensor([0, 6, 6, 9, 11, GAME.num_cards])
    orders = reshuffled(decks, drawn, 5, torch.Generator().manual_seed(0)).reshape(6, 5, -1)
    engine.check_decks(GAME, orders.flatten(0, 1))
    assert torch.equal(orders[:, 0], decks)
    for n, d in enumerate(drawn.tolist()):
        assert (orders[n, :, :d] == decks[n, :d]).all()
    assert not (orders[1:4, :, 6:] == decks[1:4, None, 6:]).all()  # the undrawn cards do move
    torch.manual_seed(0)
    net = make_qnet(GAME, NetConfig(hidden=16, lstm_layers=1, mlp_layers=1, dueling=True))
    plain = value_check(GAME, net, games=30, seed=3)
    got = value_check(GAME, net, games=30, seed=3, reshuffles=6)
    assert {k: got[k] for k in plain} == pytest.approx(plain, nan_ok=True)
    assert got["floor_own"] > 0 and got["floor_other"] > 0 and got["floor_adv"] > 0
    legal = torch.ones(2, GAME.num_moves, dtype=torch.bool)
    own = torch.zeros_like(legal)
    own[:, 0] = True
    full = torch.full((2,), GAME.num_cards)
    none = _deck_floor(GAME, net, decks[:2], torch.zeros(2, dtype=torch.long), full, None, own, legal, 1.0, 4,
                       torch.Generator().manual_seed(1))
    assert none == {"floor_own": 0.0, "floor_other": 0.0, "floor_adv": 0.0}
    with pytest.raises(ValueError, match="reshuffles=1"):  # one order has no spread: refused, not ignored
        value_check(GAME, net, games=2, reshuffles=1)


def test_bad_recipes_are_refused_in_one_line_before_any_folder(tmp_path):
    """Non-finite rates and weights, phases of length 0, a demonstrator that is no rule bot, a values phase
    without its anchor: one line naming the field, a non-zero exit, nothing written."""
    script = ROOT / "train" / "blueprint.py"
    bad = {
        '[{"kind": "imitate", "updates": 10, "lr": NaN}]': "lr",
        '[{"kind": "imitate", "updates": 0}]': "updates",
        '[{"kind": "imitate", "updates": 10, "demonstrator": "nobot"}]': "demonstrator",
        '[{"kind": "values", "updates": 10}]': "anchor_weight",
        '[{"kind": "imitate", "updates": 10, "bomb_weight": Infinity}]': "bomb_weight",
        '[{"kind": "learn", "updates": 10}]': "kind",
        '{"kind": "imitate"}': "JSON list",
    }
    for i, (phases, field) in enumerate(bad.items()):
        out = tmp_path / f"run{i}"
        res = subprocess.run([sys.executable, str(script), "--preset", "recipe-small", "--phases", phases,
                              "--out_dir", str(out)], capture_output=True, text=True,
                             env={"WANDB_MODE": "disabled", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
        assert res.returncode != 0, phases
        assert field in res.stderr and "Traceback" not in res.stderr, res.stderr
        assert not out.exists(), phases
    json.loads('[{"kind": "imitate", "updates": 10}]')  # (the good spelling parses)
    out = tmp_path / "held"  # an improve phase would move a policy network by nothing it trains
    res = subprocess.run([sys.executable, str(script), "--preset", "recipe-small", "--net.policy_net",
                          "true", "--out_dir", str(out)], capture_output=True, text=True,
                         env={"WANDB_MODE": "disabled", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert res.returncode != 0 and "policy_net" in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert not out.exists()


def test_the_phases_round_trip_through_a_checkpoint(small_run):
    game, net = load_blueprint(Path(small_run.cfg.out_dir) / "latest.pt")
    assert game == GAME and not net.training
    blob = ckpt.load(Path(small_run.cfg.out_dir) / "latest.pt", "blueprint")
    assert [p["kind"] for p in blob["config"]["phases"]] == ["imitate", "values", "improve"]
    assert blob["starts"][0]["command"] == "test" and blob["counters"]["demo_games"] > 0
