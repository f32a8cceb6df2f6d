"""TrainConfig.overlap: self-play in a background thread while the learner updates.

The run trains, saves and resumes like the sequential one; an error in either thread stops the run
with that error, latest.pt written and the actor thread joined (never a hang); SIGTERM too.
"""

import os
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from test_blueprint import ROOT, micro_config

from lbs import ckpt
from lbs.rl.trainer import PRESETS, Trainer


def actor_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "lbs-actor"]


def test_overlap_trains_saves_and_resumes(tmp_path):
    cfg = micro_config(tmp_path, overlap=True)
    a = Trainer(cfg, progress=False)
    a.run()
    assert a.counters["updates"] == 6 and a.counters["rounds"] == 3  # as sequential: 2 updates a round
    assert a.counters["actor_steps"] > 0 and not actor_threads()
    latest = Path(cfg.out_dir) / "latest.pt"
    b = Trainer(replace(cfg, total_updates=10), resume=latest, progress=False)
    assert b.counters == a.counters
    b.run()
    assert b.counters["updates"] == 10 and b.counters["rounds"] == 5
    assert ckpt.load(latest, "blueprint")["counters"]["updates"] == 10 and not actor_threads()


def test_an_error_in_the_actor_thread_is_the_runs_error(tmp_path):
    cfg = replace(micro_config(tmp_path, overlap=True), total_updates=1000)
    t = Trainer(cfg, progress=False)
    play = t.selfplay.play_round

    def breaks_at_round_3(r, q_fn):
        if r == 3:
            raise ValueError("actor broke at round 3")
        return play(r, q_fn)

    t.selfplay.play_round = breaks_at_round_3
    with pytest.raises(ValueError, match="actor broke at round 3"):
        t.run()
    assert not actor_threads()
    blob = ckpt.load(Path(cfg.out_dir) / "latest.pt", "blueprint")
    assert blob["counters"]["rounds"] == 3 and blob["counters"]["updates"] == 6  # rounds 0-2 went in


def test_an_error_in_the_learner_stops_the_actor_thread(tmp_path):
    cfg = replace(micro_config(tmp_path, overlap=True), total_updates=1000)
    t = Trainer(cfg, progress=False)
    update = t.update

    def breaks_at_update_3():
        if t.counters["updates"] == 3:
            raise RuntimeError("learner broke")
        return update()

    t.update = breaks_at_update_3
    with pytest.raises(RuntimeError, match="learner broke"):
        t.run()
    assert not actor_threads()
    assert ckpt.load(Path(cfg.out_dir) / "latest.pt", "blueprint")["counters"]["updates"] == 3


def test_gpu_preset_is_valid_and_starts_on_a_cpu(tmp_path):
    """The `gpu` preset (bf16-mixed, overlap on) builds, and the CLI runs it shrunk on a CPU."""
    cfg = PRESETS["gpu"]
    assert cfg.overlap and cfg.precision == "bf16-mixed" and cfg.min_replay <= cfg.replay_capacity
    env = {**os.environ, "WANDB_MODE": "disabled"}
    shrink = ("--game.colors 1 --game.ranks 3 --game.hand_size 2 --net.hidden 16 --net.lstm_layers 1 "
              "--net.mlp_layers 1 --actor.num_games 8 --actor.max_len 10 --batch_size 4 --min_replay 8 "
              "--replay_capacity 64 --updates_per_round 2 --total_updates 4 --eval_every 4 "
              "--eval_games 8").split()
    cmd = [sys.executable, str(ROOT / "train" / "blueprint.py"), "--preset", "gpu", "--device", "cpu",
           "--no-progress", *shrink, "--out_dir", str(tmp_path / "gpu")]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "final: score" in r.stdout
    saved = ckpt.load(tmp_path / "gpu" / "latest.pt", "blueprint")["config"]
    assert saved["overlap"] is True and saved["precision"] == "bf16-mixed" and saved["lr"] == cfg.lr
