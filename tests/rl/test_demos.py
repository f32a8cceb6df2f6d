"""Learning from demonstrations: the large-margin loss, the demo / self-play batch mix, and a short run that
moves the policy towards SmartBot's moves."""

from dataclasses import replace
from functools import partial

import pytest
import torch
from conftest import DEVICES

from lbs.acting import greedy
from lbs.bots import SmartBot
from lbs.hanabi import GameConfig, public_features
from lbs.hanabi.config import DISCARD, PLAY, REVEAL_COLOR, REVEAL_RANK
from lbs.models import NetConfig, make_qnet
from lbs.models.qnet import AUX_EMPTY, AUX_PLAYABLE
from lbs.rl.actors import ActorConfig, run_round
from lbs.rl.config import TrainConfig
from lbs.rl.demos import (
    MOVE_KINDS,
    agreement,
    agreement_by_kind,
    demo_count,
    demo_sequences,
    mixed_sample,
    record_demos,
    update_mixed_priorities,
)
from lbs.rl.r2d2 import large_margin_loss
from lbs.rl.replay import PrioritizedReplay
from lbs.rl.trainer import PRESETS, Trainer
from lbs.seeding import Stream, game_seeds

GAME = GameConfig(players=2, colors=2, ranks=3, hand_size=3)


def one_step(q, action, legal=None):
    """A [1, 1, 1, A] batch of one seat at one valid step of a demonstration."""
    q = torch.tensor(q, dtype=torch.float32).view(1, 1, 1, -1)
    legal = torch.ones_like(q, dtype=torch.bool) if legal is None else torch.tensor(legal).view(1, 1, 1, -1)
    valid, demo = torch.ones(1, 1, dtype=torch.bool), torch.ones(1, dtype=torch.bool)
    return q, torch.tensor([[[action]]]), legal, valid, demo


def test_margin_loss_is_zero_only_when_the_demonstrators_move_leads_by_the_margin():
    assert large_margin_loss(*one_step([3.0, 1.0, 2.0], 0), margin=0.8) == pytest.approx(0.0)
    # the best other move (2.5) + margin 0.8 beats Q(a_E) = 3 by 0.3
    assert large_margin_loss(*one_step([3.0, 1.0, 2.5], 0), margin=0.8) == pytest.approx(0.3)
    # a demonstrator's move that is not best: the gap plus the margin
    assert large_margin_loss(*one_step([1.0, 4.0, 2.0], 0), margin=0.8) == pytest.approx(3.8)
    # illegal moves never count, however large their Q
    masked = one_step([1.0, 9.0, 0.0], 0, [True, False, True])
    assert large_margin_loss(*masked, margin=0.8) == pytest.approx(0.0)


def test_margin_loss_counts_demonstration_rows_and_valid_steps_only():
    q = torch.tensor([1.0, 4.0]).expand(2, 3, 1, 2).clone()  # every step: a_E = 0 loses by 3 + margin 1
    action = torch.zeros(2, 3, 1, dtype=torch.long)
    legal = torch.ones(2, 3, 1, 2, dtype=torch.bool)
    mask = torch.tensor([[True, True, False], [True, True, True]])
    demo = torch.tensor([True, False])
    # row 0: 2 valid steps x 4; row 1 is self-play; mean over the batch of 2
    assert large_margin_loss(q, action, legal, mask, demo, margin=1.0) == pytest.approx(4.0)
    # the gradient raises Q(a_E) and lowers the offending move
    q.requires_grad_(True)
    large_margin_loss(q, action, legal, mask, demo, margin=1.0).backward()
    assert (q.grad[0, :2, 0, 0] < 0).all() and (q.grad[0, :2, 0, 1] > 0).all() and (q.grad[1] == 0).all()


def sentinel_replay(capacity: int, marker: float, seed: int) -> PrioritizedReplay:
    """A replay whose episode i holds marker + i in its one field."""
    r = PrioritizedReplay(capacity, {"x": ((2,), torch.float32)}, seed=seed)
    r.add({"x": (marker + torch.arange(capacity, dtype=torch.float32))[:, None].expand(-1, 2).contiguous()},
          torch.ones(capacity))
    return r


def test_mixed_batch_takes_the_ratio_from_each_replay_and_updates_each_ones_priorities():
    play, demos = sentinel_replay(8, 0.0, seed=1), sentinel_replay(4, 100.0, seed=2)
    batch, idx, w, is_demo = mixed_sample(play, demos, 10, 3)
    assert batch["x"].shape == (10, 2) and w.shape == idx.shape == is_demo.shape == (10,)
    assert is_demo.tolist() == [False] * 7 + [True] * 3  # demonstrations last
    assert (batch["x"][:7, 0] < 100).all() and (batch["x"][7:, 0] >= 100).all()
    assert torch.equal(batch["x"][:, 0] % 100, idx.float())  # each row is its replay's slot idx
    update_mixed_priorities(play, demos, idx, torch.full((10,), 7.0), 3)
    touched_play = play.sampler.tree.get(idx[:7])
    touched_demo = demos.sampler.tree.get(idx[7:])
    assert torch.allclose(touched_play, torch.tensor(7.0, dtype=torch.float64) ** play.sampler.alpha)
    assert torch.allclose(touched_demo, torch.tensor(7.0, dtype=torch.float64) ** demos.sampler.alpha)
    untouched = torch.tensor(sorted(set(range(4)) - set(idx[7:].tolist())), dtype=torch.long)
    assert (demos.sampler.tree.get(untouched) == 1.0).all()
    # no demonstrations asked for: the self-play replay's own draw, unchanged
    plain = sentinel_replay(8, 0.0, seed=1)
    b2, i2, w2, d2 = mixed_sample(plain, None, 10, 0)
    b3, i3, w3 = sentinel_replay(8, 0.0, seed=1).sample(10)
    assert torch.equal(i2, i3) and torch.equal(b2["x"], b3["x"]) and torch.equal(w2, w3) and not d2.any()


def test_demo_schedule_warm_start_then_ratio():
    cfg = TrainConfig(batch_size=32, demo_games=16, demo_ratio=0.25, warm_start_updates=3)
    assert [demo_count(cfg, u) for u in range(5)] == [32, 32, 32, 8, 8]
    assert demo_sequences(cfg, 5) == sum(demo_count(cfg, u) for u in range(5))
    assert demo_count(TrainConfig(), 0) == 0
    with pytest.raises(ValueError, match="demo_games"):
        TrainConfig(demo_ratio=0.5)
    with pytest.raises(ValueError, match="demo_ratio"):
        TrainConfig(demo_games=4, demo_ratio=1.5)


def test_demonstrations_are_smartbots_games_in_the_replay_format():
    cfg = replace(PRESETS["tiny"], game=GAME, actor=ActorConfig(num_games=8, max_len=0))
    eps = record_demos(cfg, 8, torch.device("cpu"))
    again = record_demos(cfg, 8, torch.device("cpu"))
    assert all(torch.equal(eps[k], again[k]) for k in eps)  # fixed deals, greedy bot: rebuilt the same
    legal, action, mask = eps["legal"], eps["action"], eps["mask"]
    taken = legal.gather(-1, action.unsqueeze(-1)).squeeze(-1)
    assert taken[mask].all()  # every recorded move was legal
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
    differs = (eps["action"] != own["action"]) & mask[..., None]
    assert differs.any()  # the labels are not the moves made


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


@pytest.mark.usefixtures("one_thread")
def test_a_short_demonstration_run_moves_the_policy_towards_smartbot(tmp_path):
    """Same updates, same seed: greedy agreement with SmartBot's moves on held-out SmartBot games ends
    higher with the demonstration replay than without it."""
    base = replace(
        PRESETS["tiny"], game=GAME, net=NetConfig(hidden=32, lstm_layers=1, mlp_layers=1),
        actor=ActorConfig(num_games=16, max_len=0), batch_size=16, replay_capacity=256, min_replay=32,
        total_updates=60, eval_every=10**6, eval_games=16, wandb_mode="disabled",
    )
    held = record_demos(base, 256, torch.device("cpu"), start=1 << 20)  # deals no demonstration uses
    scores = {}
    for name, kw in [("plain", {}), ("demo", {"demo_games": 128, "demo_ratio": 0.5})]:
        trainer = Trainer(replace(base, out_dir=str(tmp_path / name), **kw), progress=False)
        before = agreement(trainer.learner.module, held, trainer.learner.public)
        trainer.run()
        scores[name] = (before, agreement(trainer.learner.module, held, trainer.learner.public))
    assert scores["demo"][0] == scores["plain"][0]  # the same initial network
    assert scores["demo"][1] > scores["plain"][1] + 0.05, scores
    assert scores["demo"][1] > scores["demo"][0] + 0.1, scores


@pytest.mark.usefixtures("one_thread")
def test_supervised_imitation_learns_smartbots_moves():
    """experiments/imitation.py's loss: a few dozen cross-entropy updates on SmartBot's games raise the
    network's agreement with SmartBot on held-out games well above its start (and its loss falls)."""
    from experiments.imitation import imitation_loss
    from lbs.models import make_qnet

    torch.manual_seed(0)
    cfg = replace(PRESETS["tiny"], game=GAME, actor=ActorConfig(num_games=16, max_len=0))
    net = make_qnet(GAME, NetConfig(hidden=32, lstm_layers=1, mlp_layers=1))
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    train = record_demos(cfg, 512, torch.device("cpu"))
    held = record_demos(cfg, 256, torch.device("cpu"), start=1 << 20)  # deals the training never saw
    public = partial(public_features, GAME)
    before = agreement(net, held, public)
    losses = []
    for i in torch.arange(512).split(16) * 2:  # two passes over the games, 16 a batch
        loss = imitation_loss(net, {k: v[i] for k, v in train.items()}, GAME)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    after = agreement(net, held, public)
    assert after > before + 0.25, (before, after)
    assert sum(losses[-8:]) < 0.8 * sum(losses[:8]), losses


def test_bombing_plays_are_the_plays_of_cards_that_are_not_playable():
    """experiments/imitation.py's losing-play mask, read from the fireworks in the observation and the true
    own cards, marks exactly the held cards the engine's auxiliary targets call not playable."""
    from experiments.imitation import bombing_plays

    cfg = replace(PRESETS["tiny"], game=GAME, actor=ActorConfig(num_games=16, max_len=0),
                  net=NetConfig(hidden=8, lstm_layers=1, mlp_layers=1, aux_head=True))
    eps = record_demos(cfg, 64, torch.device("cpu"))
    bomb = bombing_plays(GAME, eps["priv"].float(), eps["own_hand"])
    plays = slice(GAME.play_move(0), GAME.play_move(GAME.hand_size))
    aux = eps["aux_target"]
    assert torch.equal(bomb[..., plays], (aux != AUX_PLAYABLE) & (aux != AUX_EMPTY))
    assert not bomb[..., : plays.start].any() and not bomb[..., plays.stop:].any()
    assert bomb.any() and (aux == AUX_PLAYABLE).any()


@pytest.mark.usefixtures("one_thread")
def test_bomb_weight_makes_losing_plays_less_likely_than_plain_imitation():
    """--bomb-weight: the same updates on SmartBot's games, with -log P(no losing play) beside the
    cross-entropy, leave less probability on the plays that would lose a life (held-out deals) than
    cross-entropy alone, and copy SmartBot about as well."""
    from experiments.imitation import bombing_plays, imitation_loss
    from lbs.rl.r2d2 import players_as_rows

    cfg = replace(PRESETS["tiny"], game=GAME, actor=ActorConfig(num_games=16, max_len=0))
    train = record_demos(cfg, 512, torch.device("cpu"))
    held = record_demos(cfg, 256, torch.device("cpu"), start=1 << 20)
    public = partial(public_features, GAME)

    @torch.no_grad()
    def p_bomb(net):  # mean probability of a losing play where a seat moves
        priv, legal = players_as_rows(held["priv"].float()), players_as_rows(held["legal"])
        q = net(priv, public(priv), legal, net.initial_state(priv.shape[0]))[0].masked_fill(~legal, -1e9)
        bomb = players_as_rows(bombing_plays(GAME, held["priv"].float(), held["own_hand"]))
        p = (q.softmax(-1) * bomb).sum(-1)
        moving = legal[..., : GAME.num_moves].any(-1) & players_as_rows(
            held["mask"][..., None].expand(-1, -1, GAME.players))
        return float(p[moving].mean())

    nets = {}
    for w in (0.0, 2.0):
        torch.manual_seed(0)
        net = make_qnet(GAME, NetConfig(hidden=32, lstm_layers=1, mlp_layers=1))
        opt = torch.optim.Adam(net.parameters(), lr=3e-3)
        for i in torch.arange(512).split(16) * 2:
            loss = imitation_loss(net, {k: v[i] for k, v in train.items()}, GAME, bomb_weight=w)
            opt.zero_grad()
            loss.backward()
            opt.step()
        nets[w] = net
    bombs = {w: p_bomb(net) for w, net in nets.items()}
    assert bombs[2.0] < 0.6 * bombs[0.0], bombs
    assert agreement(nets[2.0], held, public) > agreement(nets[0.0], held, public) - 0.05


@pytest.mark.usefixtures("one_thread")
def test_imitation_with_td_also_learns_the_value_of_the_start():
    """experiments/imitation.py --td-weight: the same updates on SmartBot's games, with a small weight of TD
    loss beside the cross-entropy, make the VDN sum of Q at a game's first step predict SmartBot's score on
    held-out deals far better than cross-entropy alone (whose Q are logits), and copy SmartBot's moves about
    as well (a weight of 1 halves the agreement here: the TD loss then drowns the policy's gradient)."""
    import copy

    from experiments.imitation import imitation_loss
    from lbs.models import make_qnet
    from lbs.rl.r2d2 import players_as_rows

    cfg = replace(PRESETS["tiny"], game=GAME, actor=ActorConfig(num_games=16, max_len=0))
    train = record_demos(cfg, 512, torch.device("cpu"))
    held = record_demos(cfg, 256, torch.device("cpu"), start=1 << 20)
    public = partial(public_features, GAME)

    @torch.no_grad()
    def start_error(net):  # mean |VDN sum of greedy Q at step 0 - the game's score|
        priv, legal = players_as_rows(held["priv"][:, :1].float()), players_as_rows(held["legal"][:, :1])
        q = net(priv, public(priv), legal, net.initial_state(priv.shape[0]))[0]
        v = q.masked_fill(~legal, -1e9).max(-1).values.view(-1, GAME.players)
        return float((v.sum(-1) - held["reward"].sum(1)).abs().mean())

    nets = {}
    for td in (0.0, 0.03):
        torch.manual_seed(0)
        net = make_qnet(GAME, NetConfig(hidden=32, lstm_layers=1, mlp_layers=1))
        target = copy.deepcopy(net).requires_grad_(False)
        opt = torch.optim.Adam(net.parameters(), lr=3e-3)
        for k, i in enumerate(torch.arange(512).split(16) * 3):
            loss = imitation_loss(net, {k: v[i] for k, v in train.items()}, GAME, target, td, 0.999, 3)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if k % 16 == 15:
                target.load_state_dict(net.state_dict())
        nets[td] = net
    score = float(held["reward"].sum(1).mean())
    errors = {td: start_error(net) for td, net in nets.items()}
    assert errors[0.03] < 0.5 * errors[0.0] and errors[0.03] < 0.3 * score, (errors, score)
    assert agreement(nets[0.03], held, public) > max(0.35, agreement(nets[0.0], held, public) - 0.05)


@pytest.mark.usefixtures("one_thread")
def test_fitting_values_keeps_the_moves_and_makes_q_predict_the_points_to_come(tmp_path):
    """experiments/fit_values.py: only the value stream and the advantages' scale move, so every greedy move
    stays; the VDN sum of greedy Q then predicts the points still to come far better than before (on deals it
    never fitted on)."""
    from experiments.fit_values import fit, moves_changed
    from experiments.leaf_values import leaf_values, returns_to_go
    from lbs import ckpt
    from lbs.configs import to_dict

    torch.manual_seed(0)
    cfg = TrainConfig(game=GAME, net=NetConfig(hidden=16, lstm_layers=1, mlp_layers=1))
    net = make_qnet(GAME, cfg.net)
    with torch.no_grad():
        net.head.value.bias.fill_(-30.0)  # values far off and advantages spread wide, as a classifier's are
        net.head.adv.weight.mul_(20.0)
    before = tmp_path / "before.pt"
    ckpt.save(before, "blueprint", {"config": to_dict(cfg), "game": GAME.to_dict(),
                                    "model": net.state_dict()})
    payload, rounds = fit(str(before), minutes=0.05, games=32, seed=0)
    after = tmp_path / "after.pt"
    ckpt.save(after, "blueprint", payload)
    changed_moves, made = moves_changed(str(before), payload, 64)
    assert changed_moves == 0 and made > 64

    def error(path) -> float:
        r = leaf_values(str(path), 64, 0, torch.device("cpu"))
        return float((r["value"] - returns_to_go(r["reward"], 1.0))[r["mask"]].pow(2).mean())

    assert len(rounds) > 3 and error(after) < 0.1 * error(before)
    weights = ckpt.load(after, "blueprint")["model"]
    changed = [k for k in weights if not torch.equal(weights[k], net.state_dict()[k])]
    assert changed and all(k.startswith(("head.value", "head.adv")) for k in changed)
    ratio = weights["head.adv.weight"] / net.state_dict()["head.adv.weight"]  # one positive scale
    assert torch.allclose(ratio, ratio.flatten()[0].expand_as(ratio)) and 0 < float(ratio.flatten()[0]) < 1


def test_a_deviating_value_fit_makes_one_other_legal_move_per_game_and_fits_only_what_follows_it():
    """fit_values --deviate: in about the asked share of games one move, at the drawn step, is another legal
    move than the seat's; the steps up to it (whose returns include the random move) are left out of the fit,
    and games that never deviated keep every step."""
    from experiments.fit_values import one_deviation
    from lbs.hanabi import engine

    game, n = GameConfig(), 200
    override, after = one_deviation(game, n, 0.5, torch.Generator().manual_seed(0))
    state = engine.reset(game, game_seeds(Stream.BLUEPRINT_TRAIN, 0, n))
    changed = torch.zeros(n, game.max_steps, dtype=torch.bool)
    h = game.hand_size
    prefer = torch.ones(game.num_moves)  # a stand-in policy that lasts: discard, else hint, else play
    prefer[:h], prefer[2 * h:] = 3.0, 2.0
    for t in range(game.max_steps):
        legal = engine.legal_moves(game, state)
        move = torch.where(state.done, 0, (legal * prefer).argmax(1))
        made = override(t, state, None, move)
        changed[:, t] = made != move
        assert bool(legal.gather(1, made[:, None])[~state.done].all())
        state, _, _ = engine.step(game, state, made)
    deviated = changed.any(1)
    assert bool((changed.sum(1) <= 1).all()) and 0.4 * n < int(deviated.sum()) < 0.6 * n
    keep = after(game.max_steps)
    step = changed.int().argmax(1)
    t = torch.arange(game.max_steps)[None]
    assert torch.equal(keep[deviated], (t > step[:, None])[deviated])
    assert bool(keep[~deviated].all())


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("device", DEVICES)
def test_imitation_saves_a_loadable_blueprint_and_resumes_its_curve(tmp_path, device, monkeypatch):
    """experiments/imitation.py --save writes a blueprint every entry point loads, carrying the curve and
    counters; --resume continues them (the curve keeps its rows, the counters and both clocks go on from
    the file's), with the learning knobs named again changed and said so in the record."""
    from argparse import Namespace

    from experiments.imitation import run
    from lbs import ckpt
    from lbs.models import load_blueprint

    path = tmp_path / "imit.pt"
    args = Namespace(minutes=0.002, eval_every=0.001, preset="demo", hidden=16, lr=1e-3, batch_size=4,
                     chunk=4, held_out=4, score_games=2, players=2, seed=0, td_weight=0.03, dagger=0.0,
                     bomb_weight=0.0, counting=False, hint_facts=False, discard_facts=False, save=str(path),
                     device=device)
    first, stopped = run(args)
    assert not stopped and len(first) >= 2 and first[-1]["updates"] > 0
    game, net = load_blueprint(path)
    assert game.players == 2 and net.lstm.hidden_size == 16
    assert set(ckpt.load(path, "blueprint")["target"]) == set(net.state_dict())  # the TD target goes on too
    def rows(points):  # the first row's loss is nan (no update yet), which equals nothing
        return [{k: v for k, v in p.items() if k != "loss"} for p in points]

    blob = ckpt.load(path, "blueprint")
    assert rows(blob["points"]) == rows(first) and blob["progress"]["updates"] == first[-1]["updates"]
    more, _ = run(args, blob)
    assert rows(more[: len(first)]) == rows(first) and len(more) > len(first)
    assert more[-1]["updates"] > first[-1]["updates"] and more[-1]["games"] > first[-1]["games"]
    assert rows(ckpt.load(path, "blueprint")["points"]) == rows(more)
    from experiments.compare_curves import curve  # the saved curve draws beside blueprint runs'

    drawn, about = curve(ckpt.load(path, "blueprint"))
    assert [h["updates"] for h in drawn] == [p["updates"] for p in more]
    assert [h["cpu_seconds"] for h in drawn] == pytest.approx([60 * p["cpu_min"] for p in more])
    wall = [h["wall_seconds"] for h in drawn]
    assert wall == pytest.approx([60 * p["wall_min"] for p in more]) and wall == sorted(wall) and wall[-1] > 0
    assert [h["mean"] for h in drawn] == [p["score"] for p in more] and "imitation" in about
    import sys

    from experiments import imitation

    monkeypatch.setattr(sys, "argv", [
        "imitation.py", "--resume", str(path), "--save", str(path), "--minutes", "0.002",
        "--eval-every", "0.001", "--lr=5e-4", "--bomb", "0.5", "--hidden", "32", "--device", device,
        "--out", str(tmp_path / "o")])
    monkeypatch.setattr(imitation.signal, "signal", lambda *a: None)  # keep the test process's handlers
    imitation.main()  # --lr and --bomb-weight given again (in any form) replace the file's; --hidden cannot
    blob = ckpt.load(path, "blueprint")
    assert blob["settings"]["lr"] == 5e-4 and blob["settings"]["bomb_weight"] == 0.5
    assert blob["settings"]["hidden"] == 16 and blob["optimizer"]["param_groups"][0]["lr"] == 5e-4
    assert len(blob["points"]) > len(more)
    (written,) = (tmp_path / "o").glob("*.md")
    assert "with lr 0.0005 (was 0.001), bomb-weight 0.5 (was 0.0)" in written.read_text()


@pytest.mark.usefixtures("one_thread")
def test_a_shipped_imitation_network_says_how_it_was_trained(tmp_path, monkeypatch):
    """imitation --save, then fit_values, then ship_blueprint: the shipped file carries the imitation run's
    record under "trained" (with what the value fit did), its card says both, and it is no run to resume."""
    import sys
    from argparse import Namespace

    from experiments import imitation, ship_blueprint
    from experiments.fit_values import fit
    from lbs import ckpt
    from lbs.models import load_blueprint

    path = tmp_path / "imit.pt"
    args = Namespace(minutes=0.002, eval_every=0.001, preset="demo", hidden=16, lr=1e-3, batch_size=4,
                     chunk=4, held_out=4, score_games=2, players=2, seed=0, td_weight=0.0, dagger=0.5,
                     bomb_weight=2.0, counting=True, hint_facts=True, discard_facts=True, save=str(path),
                     device="cpu")
    points, _ = imitation.run(args)
    payload, _ = fit(str(path), minutes=0.01, games=8, seed=0)
    payload["fitted_values"]["moves_changed"] = [0, 123]
    ckpt.save(tmp_path / "values.pt", "blueprint", payload)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "checkpoints").mkdir()
    monkeypatch.setattr(sys, "argv", ["ship_blueprint.py", "values.pt", "--name", "bp", "--games", "8"])
    ship_blueprint.main()
    blob = ckpt.load(tmp_path / "checkpoints" / "bp.pt", "blueprint")
    assert blob["trained"]["progress"]["updates"] == points[-1]["updates"] > 0
    assert blob["trained"]["settings"]["bomb_weight"] == 2.0
    assert blob["fitted_values"]["moves_changed"] == [0, 123]
    assert not {"optimizer", "progress", "points"} & set(blob)
    card = (tmp_path / "checkpoints" / "bp.md").read_text()
    assert f"imitation of SmartBot (experiments/imitation.py), {points[-1]['updates']:,} updates of 4" in card
    assert "DAgger 0.5, losing plays weighed 2.0" in card and "0 of 123 greedy choices changed" in card
    assert "counting=True, hint_facts=True, discard_facts=True" in card  # the card names the facts read
    cfg = load_blueprint(tmp_path / "checkpoints" / "bp.pt")[1].cfg
    assert cfg.counting and cfg.hint_facts and cfg.discard_facts
    monkeypatch.setattr(sys, "argv", ["imitation.py", "--resume", "checkpoints/bp.pt", "--save", "x.pt"])
    with pytest.raises(SystemExit, match="not one saved by imitation --save"):
        imitation.main()
