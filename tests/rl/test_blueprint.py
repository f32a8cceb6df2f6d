"""Blueprint trainer: checkpoints resume the same run; bad checkpoints fail loudly; the CLI runs."""

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from lbs import ckpt
from lbs.hanabi import GameConfig
from lbs.models import NetConfig, load_blueprint
from lbs.rl.actors import ActorConfig
from lbs.rl.trainer import PRESETS, Trainer

ROOT = Path(__file__).resolve().parents[2]


def micro_config(tmp_path, **kw):
    return replace(
        PRESETS["tiny"],
        game=GameConfig(players=2, colors=1, ranks=3, hand_size=2),
        net=NetConfig(hidden=16, lstm_layers=1, mlp_layers=1),
        actor=ActorConfig(num_games=8, max_len=12),
        batch_size=4,
        replay_capacity=64,
        min_replay=8,
        total_updates=6,
        updates_per_round=2,
        eval_every=4,
        eval_games=16,
        out_dir=str(tmp_path / "run"),
        wandb_mode="disabled",
        **kw,
    )


def test_resume_continues_the_same_run(tmp_path):
    cfg = micro_config(tmp_path)
    a = Trainer(cfg, progress=False)
    a.run()
    assert a.counters["updates"] == 6 and a.counters["rounds"] == 3  # 1 fills replay, then 2 updates each
    latest = Path(cfg.out_dir) / "latest.pt"
    b = Trainer(replace(cfg, total_updates=10), resume=latest, progress=False)
    assert b.counters == a.counters
    for k, v in a._module().state_dict().items():
        assert torch.equal(v, b._module().state_dict()[k]), k
    assert b.replay.num_sampled == a.replay.num_sampled
    b.run()
    assert b.counters["updates"] == 10
    assert b.counters["rounds"] > a.counters["rounds"]
    game, net = load_blueprint(Path(cfg.out_dir) / "latest.pt")
    assert game == cfg.game and not net.training


def test_bad_checkpoints_fail_clearly(tmp_path):
    cfg = micro_config(tmp_path)
    t = Trainer(cfg, progress=False)
    path = t.save("x.pt")
    with pytest.raises(ckpt.CheckpointError, match="for game config"):
        load_blueprint(path, game=GameConfig(players=3))
    with pytest.raises(ckpt.CheckpointError, match="for game config"):
        Trainer(replace(cfg, game=GameConfig(players=2, colors=2, ranks=3, hand_size=2)), resume=path)
    with pytest.raises(ckpt.CheckpointError, match="trained with net"):
        Trainer(replace(cfg, net=NetConfig(hidden=32, lstm_layers=1, mlp_layers=1)), resume=path)
    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes(path.read_bytes()[:100])
    with pytest.raises(ckpt.CheckpointError, match="corrupt"):
        load_blueprint(corrupt)
    with pytest.raises(ckpt.CheckpointError, match="not found"):
        load_blueprint(tmp_path / "missing.pt")


def test_cli_tiny_run_and_eval(tmp_path):
    out = tmp_path / "cli"
    env = {**os.environ, "WANDB_MODE": "disabled"}
    cmd = [
        sys.executable,
        str(ROOT / "train" / "blueprint.py"),
        "--preset",
        "tiny",
        "--no-progress",
        "--total_updates",
        "4",
        "--min_replay",
        "8",
        "--actor.num_games",
        "8",
        "--actor.max_len",
        "10",
        "--batch_size",
        "4",
        "--eval_every",
        "4",
        "--eval_games",
        "8",
        "--net.hidden",
        "16",
        "--out_dir",
        str(out),
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "final: score" in r.stdout
    r = subprocess.run(
        [sys.executable, str(ROOT / "train" / "score.py"), str(out / "latest.pt"), "--games", "20"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "over 20 games" in r.stdout
    bad = subprocess.run(cmd + ["--game.players", "9"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert bad.returncode != 0 and "GameConfig.players=9" in bad.stderr


def test_learning_is_real(tmp_path):
    """A shrunk tiny run must clearly beat uniformly random play on the same evaluation seeds."""
    import sys

    sys.path.insert(0, str(ROOT / "experiments"))
    from learning_curve import play_policy

    from lbs.hanabi import policies

    cfg = replace(PRESETS["tiny"], total_updates=800, eval_every=800, out_dir=str(tmp_path / "learn"),
                  wandb_mode="disabled")
    result = Trainer(cfg, progress=False).run()
    random = play_policy(cfg.game, policies.random_policy, cfg.eval_games, 10**3 + cfg.seed)
    assert result.mean > random.mean + 1.0, (result, random)
    assert result.bombed < random.bombed / 2, (result, random)


def test_aux_head_and_colour_shuffle_train(tmp_path):
    cfg = micro_config(tmp_path)
    cfg = replace(cfg, game=GameConfig(players=2, colors=2, ranks=3, hand_size=2),
                  net=replace(cfg.net, aux_head=True), actor=replace(cfg.actor, shuffle_colors=True))
    t = Trainer(cfg, progress=False)
    t.act_round()
    info = t.update()
    assert "aux_loss" in info and info["aux_loss"] > 0
    assert t.replay.storage["aux_target"].max() <= 2


def test_kill_saves_latest_checkpoint(tmp_path):
    """SIGTERM (a plain `kill`) ends the run like Ctrl-C: latest.pt holds the progress made so far."""
    import signal
    import time

    out = tmp_path / "killed"
    env = {**os.environ, "WANDB_MODE": "disabled"}
    cmd = [sys.executable, str(ROOT / "train" / "blueprint.py"), "--preset", "tiny", "--no-progress",
           "--total_updates", "1000000", "--min_replay", "8", "--actor.num_games", "8",
           "--actor.max_len", "10", "--batch_size", "4", "--eval_every", "1000000",
           "--checkpoint_minutes", "1000", "--out_dir", str(out)]
    proc = subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    for line in proc.stderr:  # wait until the training loop runs
        if line.startswith("lbs: blueprint run in"):
            break
    time.sleep(3)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=120)
    blob = ckpt.load(out / "latest.pt", "blueprint")
    assert blob["counters"]["rounds"] > 0
