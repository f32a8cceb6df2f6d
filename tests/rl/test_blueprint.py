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
    for k, v in a.learner.module.state_dict().items():
        assert torch.equal(v, b.learner.module.state_dict()[k]), k
    assert b.replay.num_sampled == a.replay.num_sampled
    b.run()
    assert b.counters["updates"] == 10
    assert b.counters["rounds"] > a.counters["rounds"]
    game, net = load_blueprint(Path(cfg.out_dir) / "latest.pt")
    assert game == cfg.game and not net.training


def test_a_new_run_starts_from_another_blueprints_weights(tmp_path):
    """TrainConfig.init: the online and target networks start as the file's, the actors play them, the file
    is recorded in the run's config; a file of another network is refused in one line before any work."""
    a = Trainer(micro_config(tmp_path / "a"), progress=False)
    a.run()
    src = Path(a.cfg.out_dir) / "latest.pt"
    b = Trainer(micro_config(tmp_path / "b", init=str(src)), progress=False)
    theirs = a.learner.module.state_dict()
    for net in (b.learner.module, b.learner.target):
        assert all(torch.equal(v, theirs[k]) for k, v in net.state_dict().items())
    assert not any(torch.equal(v, Trainer(micro_config(tmp_path / "c"), progress=False)
                                  .learner.module.state_dict()[k]) for k, v in theirs.items() if v.dim() > 1)
    b.run()
    done = ckpt.load(Path(b.cfg.out_dir) / "latest.pt", "blueprint")
    assert done["config"]["init"] == str(src)
    assert done["history"][0]["cpu_seconds"] > a.record.history[-1]["cpu_seconds"]  # its clock goes on
    wide = replace(micro_config(tmp_path / "d", init=str(src)), net=NetConfig(hidden=32, lstm_layers=1,
                                                                               mlp_layers=1))
    with pytest.raises(ckpt.CheckpointError, match=r"init .*latest\.pt: a blueprint of net .*hidden=16"):
        Trainer(wide, progress=False)


def test_bad_checkpoints_fail_clearly(tmp_path):
    cfg = micro_config(tmp_path)
    t = Trainer(cfg, progress=False)
    path = t.save("x.pt")
    with pytest.raises(ckpt.CheckpointError, match="for game config"):
        load_blueprint(path, game=GameConfig(players=3))
    with pytest.raises(ckpt.CheckpointError, match="trained with game .* cannot change on resume"):
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


def test_tiny_preset_beats_safe_play(tmp_path):
    """The blueprint docs' headline: `python train/blueprint.py --preset tiny` beats the scripted "safe play"
    heuristic (and random play) on the trainer's own evaluation deals. The whole preset, ~1.5 min."""
    from lbs.hanabi import policies
    from lbs.scoring import play_policy

    cfg = replace(PRESETS["tiny"], out_dir=str(tmp_path / "learn"), wandb_mode="disabled")
    result = Trainer(cfg, progress=False).run()
    safe = play_policy(cfg.game, policies.safe_play, cfg.eval_games, cfg.seed)
    random = play_policy(cfg.game, policies.random_policy, cfg.eval_games, cfg.seed)
    assert result.mean > safe.mean + 2 * (result.sem + safe.sem), (result, safe)
    assert result.mean > random.mean + 1.0 and result.bombed < random.bombed / 2, (result, random)


def test_aux_head_and_colour_shuffle_train(tmp_path):
    cfg = micro_config(tmp_path)
    cfg = replace(cfg, game=GameConfig(players=2, colors=2, ranks=3, hand_size=2),
                  net=replace(cfg.net, aux_head=True), actor=replace(cfg.actor, shuffle_colors=True))
    t = Trainer(cfg, progress=False)
    t.selfplay.act_round()
    info = t.update()
    assert "aux_loss" in info and info["aux_loss"] > 0
    assert t.replay.storage["aux_target"].max() <= 2


@pytest.mark.parametrize("overlap", [False, True], ids=["sequential", "overlap"])
def test_kill_saves_latest_checkpoint(tmp_path, overlap):
    """SIGTERM (a plain `kill`) ends the run like Ctrl-C: latest.pt holds the progress made so far; with
    overlap the actor thread is stopped and joined first."""
    import signal

    out = tmp_path / "killed"
    env = {**os.environ, "WANDB_MODE": "disabled"}
    cmd = [sys.executable, str(ROOT / "train" / "blueprint.py"), "--preset", "tiny", "--no-progress",
           "--overlap", str(overlap).lower(), "--total_updates", "1000000", "--min_replay", "8",
           "--actor.num_games", "8", "--actor.max_len", "10", "--batch_size", "4", "--eval_every", "1000000",
           "--checkpoint_minutes", "0.001", "--out_dir", str(out)]
    proc = subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    for line in proc.stderr:  # wait until the training loop runs
        if line.startswith("lbs: blueprint run in"):
            break
    from conftest import wait_for_file  # here: DDP workers import this module without tests/ on their path

    wait_for_file(out / "latest.pt", proc)  # the loop has made progress: it saves after every round
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM and "stopped by SIGTERM" in err, err
    assert "Traceback" not in err
    blob = ckpt.load(out / "latest.pt", "blueprint")
    assert blob["counters"]["rounds"] > 0 and blob["config"]["overlap"] is overlap


MICRO_FLAGS = ["--no-progress", "--total_updates", "4", "--min_replay", "8", "--actor.num_games", "8",
               "--actor.max_len", "10", "--batch_size", "4", "--eval_every", "4", "--eval_games", "8",
               "--net.hidden", "16"]


def _cli(args, cwd, timeout=300, script="blueprint.py"):
    env = {**os.environ, "WANDB_MODE": "disabled"}
    return subprocess.run([sys.executable, str(ROOT / "train" / script), *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=timeout)


def test_every_run_gets_its_own_folder_and_a_run_is_never_overwritten(tmp_path):
    r = _cli(MICRO_FLAGS, tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    (run,) = (tmp_path / "runs" / "blueprint").iterdir()
    assert run.name.startswith("tiny-") and f"run in {Path('runs') / 'blueprint' / run.name}" in r.stderr
    before = (run / "latest.pt").read_bytes()
    r = _cli([*MICRO_FLAGS, "--out_dir", str(run)], tmp_path)
    assert r.returncode != 0 and "already holds a run" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = _cli([*MICRO_FLAGS, "--out_dir", str(run), "--lr", "0"], tmp_path)  # a bad config writes nothing
    assert r.returncode != 0 and "TrainConfig.lr=0.0: must be > 0" in r.stderr
    assert (run / "latest.pt").read_bytes() == before
    r = _cli([*MICRO_FLAGS, "--out_dir", str(run), "--overwrite"], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]


def test_resume_writes_next_to_the_file_and_a_finished_run_says_so(tmp_path):
    r = _cli([*MICRO_FLAGS, "--out_dir", str(tmp_path / "a")], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    moved = tmp_path / "moved"
    (tmp_path / "a").rename(moved)
    r = _cli(["--resume", str(moved / "latest.pt"), "--no-progress"], tmp_path)
    assert r.returncode == 0 and "already finished" in r.stderr and "final:" not in r.stdout, r.stderr[-2000:]
    r = _cli(["--resume", str(moved / "latest.pt"), "--no-progress", "--total-updates", "8"], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert not (tmp_path / "a").exists()
    assert ckpt.load(moved / "latest.pt", "blueprint")["counters"]["updates"] == 8
    curve = [sys.executable, "-m", "experiments.curves", str(moved), "--games", "20", "--out",
             str(tmp_path / "c")]
    r = subprocess.run(curve, capture_output=True, text=True, env=os.environ, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert list((tmp_path / "c").glob("curves_*.png"))  # the curve, for any run folder, without W&B


def test_shipped_weights_cannot_be_resumed(tmp_path):
    r = _cli(["--resume", str(ROOT / "checkpoints" / "blueprint_2p.pt"), "--out_dir", str(tmp_path / "x")],
             tmp_path)
    assert r.returncode != 0 and "weights only" in r.stderr and "cannot be resumed" in r.stderr
    assert "Traceback" not in r.stderr


def test_resume_overrides_take_effect_and_the_best_survives_a_crash(tmp_path):
    cfg = micro_config(tmp_path)
    Trainer(cfg, progress=False).run()
    latest, best = Path(cfg.out_dir) / "latest.pt", Path(cfg.out_dir) / "best.pt"
    b = Trainer(replace(cfg, lr=0.0123, adam_eps=1e-3, replay_capacity=32, min_replay=8), resume=latest,
                progress=False)
    assert all(g["lr"] == 0.0123 and g["eps"] == 1e-3 for g in b.learner.opt.param_groups)
    # a crash after a new best.pt but before the next latest.pt: the resume must know that best
    blob = ckpt.load(best, "blueprint")
    ckpt.save(best, "blueprint", {**{k: v for k, v in blob.items() if k not in ("kind", "format")},
                                  "best": 99.0})
    assert Trainer(cfg, resume=latest, progress=False).best == 99.0


@pytest.mark.parametrize("field,value,message", [
    ("min_replay", 100, "min_replay=100: must be <= replay_capacity=64"),
    ("eval_every", 0, "eval_every=0: must be an int >= 1"),
    ("target_sync", 0, "target_sync=0: must be an int >= 1"),
    ("actor_sync", 0, "actor_sync=0: must be an int >= 1"),
    ("updates_per_round", 0, "updates_per_round=0: must be an int >= 1"),
    ("eval_games", 0, "eval_games=0: must be an int >= 1"),
    ("gamma", 2.0, "gamma=2.0: must be in (0, 1]"),
    ("lr", 0.0, "lr=0.0: must be > 0"),
    ("total_updates", -5, "total_updates=-5: must be an int >= 0"),
    ("max_minutes", -1.0, "max_minutes=-1.0: must be >= 0"),
    ("wandb_mode", "onlne", "wandb_mode='onlne': must be one of"),
    ("devices", 0, "devices=0: must be an int >= 1"),
])
def test_every_config_field_is_checked(tmp_path, field, value, message):
    import re

    with pytest.raises(ValueError, match=re.escape(f"TrainConfig.{message}")):
        replace(micro_config(tmp_path), **{field: value})


def test_actor_config_is_checked_and_cut_games_are_announced(tmp_path):
    with pytest.raises(ValueError, match="ActorConfig.eps_base=2.0: must be in"):
        ActorConfig(eps_base=2.0)
    with pytest.raises(ValueError, match="ActorConfig.num_games=0"):
        ActorConfig(num_games=0)
    whole = replace(PRESETS["tiny"], actor=ActorConfig(max_len=0))
    assert whole.seq_len == whole.game.max_steps
    r = _cli([*MICRO_FLAGS, "--actor.max_len", "4", "--out_dir", str(tmp_path / "cut")], tmp_path)
    assert r.returncode == 0 and "warning: actor.max_len=4 cut" in r.stderr, r.stderr[-2000:]


def test_help_shows_docs_and_the_preset_and_both_spellings_work(tmp_path):
    r = _cli(["--help"], tmp_path)
    assert r.returncode == 0
    assert "updates between greedy evaluations [100]" in " ".join(r.stdout.split())  # tiny's eval_every
    assert "'tiny' preset" in r.stdout and "--total-updates" in r.stdout
    r = _cli(["--preset", "small", "--help"], tmp_path)
    assert "updates between greedy evaluations [250]" in " ".join(r.stdout.split())


def test_ctrl_c_is_one_line_with_what_was_saved(tmp_path):
    import signal

    out = tmp_path / "int"
    env = {**os.environ, "WANDB_MODE": "disabled"}
    cmd = [sys.executable, str(ROOT / "train" / "blueprint.py"), *MICRO_FLAGS, "--total_updates", "1000000",
           "--eval_every", "1000000", "--checkpoint_minutes", "0.001", "--out_dir", str(out)]
    proc = subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    for line in proc.stderr:
        if "blueprint run in" in line:
            break
    from conftest import wait_for_file

    wait_for_file(out / "latest.pt", proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "stopped by Ctrl-C at update" in err
    assert f"saved {out / 'latest.pt'}" in err
