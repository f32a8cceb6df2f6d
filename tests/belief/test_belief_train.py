"""Belief training: observation-derived constraints equal the state's, streams line up with episodes,
the per-turn evaluation equals teacher forcing, training lowers the NLL, resume continues the same run,
wrong blueprints / games / files fail with a clear CheckpointError, and the CLI runs end to end."""

from __future__ import annotations

import importlib.util
import math
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from conftest import CONFIGS

from lbs import ckpt
from lbs.belief.config import BeliefTrainConfig
from lbs.belief.constraints import from_obs as constraints_from_obs
from lbs.belief.constraints import from_state as hand_constraints
from lbs.belief.constraints import plausible_cards
from lbs.belief.data import BeliefData, episodes_to_streams
from lbs.belief.evaluate import evaluate_belief
from lbs.belief.trainer import BeliefTrainer, acted_weighted_nll
from lbs.hanabi import GameConfig, engine
from lbs.hanabi.encode import encode, public_features
from lbs.models import BeliefConfig, BeliefModel, NetConfig, load_belief, load_blueprint
from lbs.rl.actors import ActorConfig, run_round
from lbs.rl.trainer import PRESETS, Trainer
from lbs.seeding import Stream, game_seeds

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[2]
MICRO = GameConfig(players=2, colors=1, ranks=3, hand_size=2)
ENV = {**os.environ, "WANDB_MODE": "disabled"}  # extend the caller's environment, never replace it


def make_blueprint(path: Path, game: GameConfig = MICRO, seed: int = 0, kind: str = NetConfig.kind) -> Path:
    """A random-weight blueprint checkpoint (plays deterministically, which is all the belief needs)."""
    net = NetConfig(kind=kind, hidden=16, lstm_layers=1, mlp_layers=1)
    cfg = replace(PRESETS["tiny"], game=game, net=net,
                  actor=ActorConfig(num_games=8, max_len=game.max_steps), seed=seed,
                  out_dir=str(path), wandb_mode="disabled")
    return Trainer(cfg, progress=False).save("bp.pt")


@pytest.fixture(scope="module")
def blueprint(tmp_path_factory) -> Path:
    return make_blueprint(tmp_path_factory.mktemp("bp"))


def micro_belief(out: Path, **kw) -> BeliefTrainConfig:
    base = BeliefTrainConfig(
        model=BeliefConfig(hidden=16, mlp_layers=1, lstm_layers=1, decoder_layers=1, card_embed=4),
        games_per_round=16, max_len=0, replay_capacity=256, min_replay=32, batch_size=16, lr=1e-2,
        total_steps=12, checkpoint_every=5, log_every=4, acceptance_streams=2, acceptance_k=4,
        eval_games=0, val_every=0, out_dir=str(out), wandb_mode="disabled",
    )
    return replace(base, **kw)


# ---- data --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["p2", "p3", "p4", "p2_c1_r3", "p2_h6"])
def test_constraints_from_obs_equal_the_states(name):
    game = CONFIGS[name]
    seeds = torch.arange(16)
    state = engine.reset(game, seeds)
    for _ in range(game.max_steps):
        obs = encode(game, state, dtype=torch.uint8)  # [B, P, D]
        for p in range(game.players):
            want = hand_constraints(game, state, p)
            got = constraints_from_obs(game, obs[:, p])
            assert torch.equal(got.unseen, want.unseen)
            assert torch.equal(got.hand_len, want.hand_len)
            held = torch.arange(game.hand_size) < want.hand_len[:, None]  # empty slots carry no knowledge
            pairs = ((got.color_plausible, want.color_plausible), (got.rank_plausible, want.rank_plausible))
            for g, w in pairs:
                assert torch.equal(g & held[..., None], w & held[..., None])
        state, _, _ = engine.step(game, state, engine.random_moves(game, state, seeds))
    assert bool(state.done.all())
    with pytest.raises(ValueError, match="obs must be"):
        constraints_from_obs(game, obs)


def test_streams_are_episode_player_rows_padded_with_empty_hands(blueprint):
    game, net = load_blueprint(blueprint)
    seeds = torch.arange(6)
    episodes, _ = run_round(game, net.step, net.initial_state, seeds, 0, ActorConfig(6, game.max_steps))
    streams = episodes_to_streams(game, episodes)
    p = game.players
    assert streams["priv"].shape == (6 * p, game.max_steps, game.private_dim)
    for n in range(6):
        for s in range(p):
            mask = episodes["mask"][n]
            assert torch.equal(streams["priv"][n * p + s], episodes["priv"][n, :, s])
            assert torch.equal(streams["hand"][n * p + s][mask], episodes["own_hand"][n, mask, s])
            assert bool((streams["hand"][n * p + s][~mask] == -1).all())
            assert bool((streams["hand"][n * p + s][mask] >= 0).any(-1).all())  # every live step holds cards
            # the slot the stream's player plays or discards there (moves 0..H-1 discard, H..2H-1 play)
            moves = episodes["action"][n, :, s]
            want = [int(m) % game.hand_size if live and int(m) < 2 * game.hand_size else -1
                    for m, live in zip(moves, mask, strict=True)]
            assert streams["acted"][n * p + s].tolist() == want
    assert bool((streams["acted"] >= 0).any())


def test_evaluation_equals_teacher_forcing_and_obs_grounded_belief(blueprint):
    """The turn-by-turn evaluation (state-based grounded belief, step-wise encoder) must equal the
    sequence likelihood on the same games' streams and the grounded belief rebuilt from observations."""
    game, net = load_blueprint(blueprint)
    torch.manual_seed(0)
    model = BeliefModel(game, BeliefConfig(hidden=16, mlp_layers=1, lstm_layers=2, card_embed=4)).eval()
    n, t = 12, game.max_steps
    ev = evaluate_belief(game, model, net.step, net.initial_state, games=n, seed=3, batch=5)
    seeds = game_seeds(Stream.EVAL, 3, n)  # evaluate_belief's deals: the evaluation stream of seed 3
    episodes, _ = run_round(game, net.step, net.initial_state, seeds, 0, ActorConfig(n, t))
    s = episodes_to_streams(game, episodes)
    with torch.no_grad():
        lp = model.log_prob(s["priv"].float(), s["hand"].long())
    held = s["hand"] >= 0  # [S, T, H]
    cards = held.sum((0, 2))
    assert ev.cards_by_turn == cards.tolist()
    assert ev.nll_learned == pytest.approx(float(lp.nll_per_card), rel=1e-5)
    learned = -lp.slot_log_prob.double().sum((0, 2))
    live = cards > 0
    by_turn = torch.tensor(ev.learned_by_turn, dtype=torch.float64)
    assert torch.allclose(by_turn[live], (learned / cards)[live], rtol=1e-5)
    cons = constraints_from_obs(game, s["priv"].reshape(-1, game.obs_dim))
    w = plausible_cards(game, cons.color_plausible, cons.rank_plausible).double() * cons.unseen[:, None, :]
    w = (w / w.sum(-1, keepdim=True).clamp(min=1e-12)).reshape(*held.shape, -1)
    g = w.gather(-1, s["hand"].long().clamp(min=0)[..., None]).squeeze(-1)
    grounded = -torch.where(held, g.clamp(min=1e-300).log(), 0.0).sum((0, 2))
    by_turn = torch.tensor(ev.grounded_by_turn, dtype=torch.float64)
    assert torch.allclose(by_turn[live], (grounded / cards)[live], rtol=1e-6)
    assert ev.nll_grounded == pytest.approx(float(grounded.sum() / cards.sum()), rel=1e-6)
    assert all(x != x for x, c in zip(ev.learned_by_turn, ev.cards_by_turn, strict=True) if c == 0)  # NaN


def test_producer_failure_surfaces_and_close_is_clean(blueprint, tmp_path):
    game, net = load_blueprint(blueprint)
    data = BeliefData(micro_belief(tmp_path), game, net, ActorConfig())

    def broken(r):
        raise ValueError("boom")

    data.play_round = broken
    data.start()
    with pytest.raises(RuntimeError, match="producer failed.*boom"):
        data.sample(4)
    data.close()
    assert data.server.closed


def test_config_errors():
    with pytest.raises(ValueError, match="min_replay=10 exceeds replay_capacity=5"):
        BeliefTrainConfig(replay_capacity=5, min_replay=10)
    with pytest.raises(ValueError, match="batch_size=0"):
        BeliefTrainConfig(batch_size=0)
    with pytest.raises(ValueError, match="wandb_mode"):
        BeliefTrainConfig(wandb_mode="cloud")
    with pytest.raises(ValueError, match="val_every=-1"):
        BeliefTrainConfig(val_every=-1)
    with pytest.raises(ValueError, match="val_games=0"):
        BeliefTrainConfig(val_games=0)
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="acted_weight"):
            BeliefTrainConfig(acted_weight=bad)


def test_acted_weight_weighs_the_played_or_discarded_card():
    lp = -torch.tensor([[[1.0, 2.0, 0.0], [3.0, 4.0, 5.0]]])  # [B=1, T=2, H=3] log p of each true card
    hands = torch.tensor([[[0, 1, -1], [2, 3, 4]]])  # the first step holds two cards
    acted = torch.tensor([[1, -1]])  # slot 1 is played at step 0; no card moves at step 1
    assert float(acted_weighted_nll(lp, hands, acted, 1.0)) == pytest.approx(15 / 5)
    assert float(acted_weighted_nll(lp, hands, acted, 3.0)) == pytest.approx((1 + 3 * 2 + 12) / 7)


# ---- training ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("count_prior", [False, True], ids=["plain", "count_prior"])
def test_training_lowers_the_held_out_nll(blueprint, tmp_path, count_prior):
    game, net = load_blueprint(blueprint)
    model_cfg = BeliefConfig(hidden=16, mlp_layers=1, lstm_layers=1, card_embed=4, count_prior=count_prior)
    cfg = micro_belief(tmp_path / "run", model=model_cfg, total_steps=150, checkpoint_every=1000,
                       log_every=50, eval_games=64)
    trainer = BeliefTrainer(cfg, blueprint, progress=False)
    model = trainer.module.model
    before = evaluate_belief(game, model, net.step, net.initial_state, games=64, seed=cfg.eval_seed)
    result = trainer.run()
    assert result.step == 150
    assert result.eval is not None and result.eval.games == 64
    if count_prior:  # counting slot by slot already beats the slot-independent grounded belief
        assert before.nll_learned < before.nll_grounded - 0.1, before
        # training must not undo the prior; the producer thread's timing changes the data a little from
        # run to run, so allow a small margin (seen: +0.0076 after 150 steps)
        assert result.eval.nll_learned < before.nll_learned + 0.02, (before, result.eval)
        assert result.eval.nll_learned < result.eval.nll_grounded - 0.1, result.eval
    else:  # the network has to learn card counting itself
        assert result.eval.nll_learned < before.nll_learned - 0.15, (before, result.eval)
        assert result.eval.nll_learned < result.eval.nll_grounded + 0.2, result.eval  # near the baseline
    assert result.eval.nll_grounded == pytest.approx(before.nll_grounded)  # same games, same baseline
    stats = trainer.data.stats()
    assert stats["replay/size"] >= cfg.min_replay and stats["replay/reuse"] > 0


def test_validation_keeps_the_best_model_across_resume(blueprint, tmp_path):
    cfg = micro_belief(tmp_path / "run", total_steps=12, val_every=4, val_games=8)
    scored: list[float] = []

    def spy(trainer: BeliefTrainer) -> None:
        score = trainer.validate
        trainer.validate = lambda model: scored.append((ev := score(model)).nll_learned) or ev

    first = BeliefTrainer(cfg, blueprint, progress=False)
    spy(first)
    result = first.run()
    assert len(scored) == 3  # steps 4, 8, 12
    best = min(scored)
    assert result.best == Path(cfg.out_dir) / "best.pt" and result.best_val_nll == best
    assert result.best_step == 4 * (scored.index(best) + 1)
    blob = ckpt.load(result.best, "belief")
    assert blob["global_step"] == result.best_step and blob["validation"]["best_nll"] == best
    _, model = load_belief(result.best, blueprint)  # best.pt holds the weights that were scored
    assert first.validate(model).nll_learned == pytest.approx(best, abs=1e-6)

    scored.clear()
    more = BeliefTrainer(replace(cfg, total_steps=20), blueprint, resume=Path(cfg.out_dir) / "latest.pt",
                         progress=False)
    spy(more)
    again = more.run()
    assert len(scored) == 2  # steps 16, 20: the best of the first part is remembered, not re-found
    assert again.best_val_nll == min(best, *scored)
    want_step = result.best_step if best <= min(scored) else 16 + 4 * scored.index(min(scored))
    assert again.best_step == want_step == ckpt.load(again.best, "belief")["global_step"]


def test_latest_checkpoint_knows_the_best_of_its_own_step(blueprint, tmp_path):
    """latest.pt written at a validation step records that step's result (else a resumed run could
    overwrite best.pt with a worse model)."""
    cfg = micro_belief(tmp_path / "run", total_steps=8, val_every=4, val_games=4, checkpoint_every=4)
    trainer = BeliefTrainer(cfg, blueprint, progress=False)
    score, fake = trainer.validate, iter([2.0, 1.0])  # the last validation is the best
    trainer.validate = lambda model: replace(score(model), nll_learned=next(fake))
    trainer.run()
    for name in ("latest.pt", "best.pt"):
        blob = ckpt.load(Path(cfg.out_dir) / name, "belief")
        assert blob["validation"] == {"best_nll": 1.0, "best_step": 8}, name


def test_resume_continues_steps_weights_and_optimizer(blueprint, tmp_path):
    cfg = micro_belief(tmp_path / "run")
    a = BeliefTrainer(cfg, blueprint, progress=False)
    assert a.run().step == 12
    latest = Path(cfg.out_dir) / "latest.pt"
    blob = ckpt.load(latest, "belief")
    assert blob["step"] == blob["global_step"] == 12 and blob["data"]["rounds"] >= 2
    assert blob["blueprint"]["sha256"] == ckpt.file_hash(blueprint)
    weights = {k: v.clone() for k, v in a.module.model.state_dict().items()}
    _, loaded = load_belief(latest, blueprint)
    assert all(torch.equal(weights[k], v) for k, v in loaded.state_dict().items())

    same = BeliefTrainer(cfg, blueprint, resume=latest, progress=False)  # nothing left to do: says so
    assert same.data.rounds == blob["data"]["rounds"]
    assert same.finished and same.run() is None

    more = BeliefTrainer(replace(cfg, total_steps=20, lr=0.0321), blueprint, resume=latest, progress=False)
    assert more.run().step == 20
    assert all(g["lr"] == 0.0321 for g in more.module.trainer.optimizers[0].param_groups)  # took effect
    blob2 = ckpt.load(latest, "belief")
    assert blob2["global_step"] == 20
    adam_steps = {float(s["step"]) for s in blob2["optimizer_states"][0]["state"].values()}
    assert adam_steps == {20.0}  # the optimizer state came along: 12 + 8 updates
    assert blob2["data"]["rounds"] > blob["data"]["rounds"]  # new deals, not a replay of the first ones
    assert any(not torch.equal(weights[k], v) for k, v in more.module.model.state_dict().items())


def test_init_starts_a_new_run_from_another_blueprints_belief(blueprint, tmp_path):
    first = micro_belief(tmp_path / "first")
    assert BeliefTrainer(first, blueprint, progress=False).run().step == 12
    trained = load_belief(Path(first.out_dir) / "latest.pt")[1].state_dict()
    other = make_blueprint(tmp_path / "bp2", seed=1)  # the belief of one blueprint starts another's
    cfg = micro_belief(tmp_path / "warm", init=str(Path(first.out_dir) / "latest.pt"), total_steps=4)
    warm = BeliefTrainer(cfg, other, progress=False)
    fresh = BeliefTrainer(replace(cfg, init="", out_dir=str(tmp_path / "fresh")), other, progress=False)
    start = warm.module.model.state_dict()
    assert all(torch.equal(start[k], v) for k, v in trained.items())
    assert any(not torch.equal(fresh.module.model.state_dict()[k], v) for k, v in trained.items())
    assert warm.run().step == 4  # a new run: its own steps, its own blueprint, the file named in its config
    blob = ckpt.load(Path(cfg.out_dir) / "latest.pt", "belief")
    assert blob["config"]["init"] == cfg.init and blob["blueprint"]["sha256"] == ckpt.file_hash(other)
    assert blob["init_sha256"] == ckpt.file_hash(cfg.init)  # by content: --init may be replaced
    assert ckpt.load(Path(first.out_dir) / "latest.pt", "belief")["init_sha256"] is None

    wider = replace(cfg, model=replace(cfg.model, hidden=8), out_dir=str(tmp_path / "wider"))
    with pytest.raises(ckpt.CheckpointError, match="--init needs the same --model"):
        BeliefTrainer(wider, other, progress=False)
    bigger = make_blueprint(tmp_path / "bp3", game=GameConfig(players=2, colors=2, ranks=3, hand_size=2))
    with pytest.raises(ckpt.CheckpointError, match="game"):
        BeliefTrainer(replace(cfg, out_dir=str(tmp_path / "bigger")), bigger, progress=False)

    cli = load_cli()  # the CLI takes the model of the belief it starts from; a --model.* flag must agree
    flags = ["--blueprint", str(other), "--init", cfg.init, "--out_dir", str(tmp_path / "cli")]
    built, _ = cli.build(cli.parser("tiny").parse_args(flags), None)
    assert built.model == first.model and built.init == cfg.init
    with pytest.raises(SystemExit, match="belief: .*--init needs the same --model"):
        cli.main(flags + ["--model.hidden", "32", "--no-progress"])


def test_blueprint_features_start_from_a_belief_without_them_and_ship(blueprint, tmp_path):
    """--model.blueprint_features: the encoder reads the blueprint network's scores. Warm-started from a
    belief without them it starts as exactly that belief (zero weights on the new inputs), trains them,
    and its file (run and shipped) carries the blueprint's network, which load_belief rebuilds; turn by
    turn it encodes what it encodes for the whole sequence. A rule bot has no network to read."""
    from lbs.ship import ship_belief

    first = micro_belief(tmp_path / "first")
    assert BeliefTrainer(first, blueprint, progress=False).run().step == 12
    _, plain = load_belief(Path(first.out_dir) / "latest.pt")
    model_cfg = replace(first.model, blueprint_features=True)
    cfg = micro_belief(tmp_path / "warm", model=model_cfg, init=str(Path(first.out_dir) / "latest.pt"),
                       total_steps=6)
    warm = BeliefTrainer(cfg, blueprint, progress=False)
    game, net = load_blueprint(blueprint)
    seeds = game_seeds(Stream.EVAL, 0, 4)
    episodes, _ = run_round(game, net.step, net.initial_state, seeds, 0,
                            ActorConfig(num_games=4, max_len=game.max_steps))
    streams = episodes_to_streams(game, episodes)
    priv = streams["priv"].float()
    with torch.no_grad():
        start, _ = warm.module.model.encode(priv)
        assert torch.allclose(start, plain.encode(priv)[0], atol=1e-6)  # exactly the belief it starts from
        scores, _ = warm.module.model.blueprint_scores(priv, tuple(net.mover.initial_state(priv.shape[0])))
        every = torch.ones_like(scores, dtype=torch.bool)  # the scores of the blueprint's own network
        mover = net.mover(priv, public_features(game, priv), every, net.mover.initial_state(priv.shape[0]))
        assert torch.allclose(scores, torch.log_softmax(mover[0], -1).clamp(min=-20), atol=1e-6)
    assert warm.run().step == 6
    _, trained = load_belief(Path(cfg.out_dir) / "latest.pt", blueprint_path=blueprint)
    assert trained.cfg.blueprint_features and trained.blueprint is not None
    for k, v in net.mover.state_dict().items():  # the network read is the blueprint's, frozen
        assert torch.equal(trained.blueprint.state_dict()[k], v)
    assert trained.mlp[0].weight[:, game.private_dim:].abs().sum() > 0  # the new inputs were learnt
    with torch.no_grad():
        whole, _ = trained.encode(priv)
        hid, steps = trained.initial_state(priv.shape[0]), []
        for t in range(priv.shape[1]):
            c, hid = trained.encode(priv[:, t:t + 1], hid)
            steps.append(c)
        assert len(hid) == 4 and torch.allclose(torch.cat(steps, 1), whole, atol=1e-5)
    ship_belief(Path(cfg.out_dir) / "latest.pt", str(blueprint), "feat", 8, torch.device("cpu"), tmp_path,
                "python train/ship.py belief ...")
    _, shipped = load_belief(tmp_path / "feat.pt", blueprint_path=blueprint)
    card = (tmp_path / "feat.md").read_text()  # the card names the warm start by content
    assert f"warm start\n  `{cfg.init}` (sha256 `{ckpt.file_hash(cfg.init)}`)" in card
    assert shipped.blueprint is not None and shipped.cfg == trained.cfg
    lstm = make_blueprint(tmp_path / "lstm", kind="lstm")  # another kind of network: the run reads its own
    again = replace(cfg, init=str(Path(cfg.out_dir) / "latest.pt"), out_dir=str(tmp_path / "again"))
    again = BeliefTrainer(again, lstm, progress=False)
    _, other = load_blueprint(lstm)
    for k, v in other.mover.state_dict().items():
        assert torch.equal(again.module.model.blueprint.state_dict()[k], v)
    with pytest.raises(ValueError, match="rule bot smartbot has none"):
        BeliefTrainer(replace(cfg, init="", out_dir=str(tmp_path / "bot"), players=2), "smartbot",
                      progress=False)


def test_wrong_blueprint_game_or_file_fails_clearly(blueprint, tmp_path):
    cfg = micro_belief(tmp_path / "run", total_steps=2, min_replay=16)
    BeliefTrainer(cfg, blueprint, progress=False).run()
    latest = Path(cfg.out_dir) / "latest.pt"
    other = make_blueprint(tmp_path / "other", seed=1)  # same game, different weights -> different hash
    with pytest.raises(ckpt.CheckpointError, match="different blueprint"):
        load_belief(latest, other)
    with pytest.raises(ckpt.CheckpointError, match="different blueprint"):
        BeliefTrainer(cfg, other, resume=latest, progress=False)
    with pytest.raises(ckpt.CheckpointError, match="for game config"):
        load_belief(latest, game=GameConfig(players=3))
    wrong_game = make_blueprint(tmp_path / "game", game=GameConfig(players=2, colors=2, ranks=2, hand_size=2))
    with pytest.raises(ckpt.CheckpointError, match="for game config"):
        BeliefTrainer(cfg, wrong_game, resume=latest, progress=False)
    with pytest.raises(ckpt.CheckpointError, match="trained with model"):
        BeliefTrainer(replace(cfg, model=BeliefConfig(hidden=8)), blueprint, resume=latest, progress=False)
    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes(latest.read_bytes()[:200])
    with pytest.raises(ckpt.CheckpointError, match="corrupt"):
        load_belief(corrupt)
    with pytest.raises(ckpt.CheckpointError, match="not found"):
        load_belief(tmp_path / "missing.pt")
    with pytest.raises(ckpt.CheckpointError, match="holds a 'blueprint' checkpoint"):
        load_belief(blueprint)
    with pytest.raises(ckpt.CheckpointError, match="blueprint checkpoint not found"):
        BeliefTrainer(replace(cfg, out_dir=str(tmp_path / "new")), tmp_path / "none.pt", progress=False)
    with pytest.raises(ValueError, match="already holds a run"):  # a new run never overwrites one
        BeliefTrainer(cfg, blueprint, progress=False)
    shipped = ROOT / "checkpoints" / "belief_2p.pt"
    with pytest.raises(ckpt.CheckpointError, match="weights only .* cannot be resumed"):
        BeliefTrainer(replace(cfg, out_dir=str(tmp_path / "x")), ROOT / "checkpoints" / "blueprint_2p.pt",
                      resume=shipped, progress=False)


def test_best_from_best_pt_survives_a_crash(blueprint, tmp_path):
    """best.pt can be newer than latest.pt (val_every not a multiple of checkpoint_every): a resume
    must not let a worse model replace it."""
    cfg = micro_belief(tmp_path / "run", total_steps=6, val_every=3, val_games=8, checkpoint_every=100)
    BeliefTrainer(cfg, blueprint, progress=False).run()
    best = Path(cfg.out_dir) / "best.pt"
    blob = ckpt.load(best, "belief")
    ckpt.save(best, "belief", {**{k: v for k, v in blob.items() if k not in ("kind", "format")},
                               "validation": {"best_nll": 1e-6, "best_step": 5}})
    more = BeliefTrainer(replace(cfg, total_steps=9), blueprint, resume=Path(cfg.out_dir) / "latest.pt",
                         progress=False)
    result = more.run()
    assert result.best_val_nll == 1e-6 and result.best_step == 5
    assert ckpt.load(best, "belief")["validation"]["best_nll"] == 1e-6  # not replaced by a worse model


def test_sigterm_saves_latest_and_says_so(blueprint, tmp_path):
    import signal
    import time

    out = tmp_path / "killed"
    cmd = [sys.executable, str(ROOT / "train" / "belief.py"), "--preset", "tiny", "--no-progress",
           "--threads", "1", "--blueprint", str(blueprint), "--out_dir", str(out), "--total_steps", "1000000",
           "--games_per_round", "8", "--min_replay", "16", "--batch_size", "8", "--eval_games", "0",
           "--model.hidden", "16", "--model.lstm_layers", "1", "--log_every", "2", "--data_ratio", "0",
           "--checkpoint_every", "1000000", "--val_every", "0"]
    proc = subprocess.Popen(cmd, env=ENV, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    for line in proc.stderr:
        if "belief run in" in line:
            break
    time.sleep(8)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, err[-3000:]
    assert "stopped by SIGTERM at step" in err and f"saved {out / 'latest.pt'}" in err
    assert "Traceback" not in err
    assert ckpt.load(out / "latest.pt", "belief")["step"] > 0


def test_cli_trains_resumes_and_rejects_bad_input(blueprint, tmp_path):
    out = tmp_path / "cli"
    cmd = [sys.executable, str(ROOT / "train" / "belief.py"), "--preset", "tiny", "--no-progress",
           "--threads", "1", "--blueprint", str(blueprint), "--out_dir", str(out), "--total_steps", "4",
           "--games_per_round", "8", "--min_replay", "16", "--batch_size", "8", "--eval_games", "8",
           "--model.hidden", "16", "--model.lstm_layers", "1", "--log_every", "2", "--data_ratio", "0",
           "--acted_weight", "4"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=ENV, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "final: step 4: train NLL per card" in r.stdout and "learned" in r.stdout
    resume = [sys.executable, str(ROOT / "train" / "belief.py"), "--no-progress", "--resume",
              str(out / "latest.pt"), "--total_steps", "6", "--eval_games", "0"]
    r = subprocess.run(resume, capture_output=True, text=True, env=ENV, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "final: step 6:" in r.stdout
    saved = ckpt.load(out / "latest.pt", "belief")["config"]
    assert saved["model"]["hidden"] == 16 and saved["acted_weight"] == 4
    cli = load_cli()
    with pytest.raises(SystemExit, match="belief: .*acted_weight=0.0: must be a finite number > 0"):
        cli.main(cmd[2:] + ["--out_dir", str(tmp_path / "refused"), "--acted_weight", "0"])
    assert not (tmp_path / "refused").exists()
    with pytest.raises(SystemExit, match="belief: .*exceeds replay_capacity"):
        cli.main(cmd[2:] + ["--min_replay", "99999"])
    with pytest.raises(SystemExit, match="belief: --blueprint is required"):  # one line, no usage text
        cli.main(["--preset", "tiny"])


def load_cli():
    spec = importlib.util.spec_from_file_location("train_belief_cli", ROOT / "train" / "belief.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
