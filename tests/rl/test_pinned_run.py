"""A tiny fixed-seed blueprint run, pinned: the tiny preset for 60 updates, then resumed to 100.

The numbers were recorded on the CPU with one torch thread before the trainer was split into learner,
self-play, run I/O and schedule; a refactor of the trainer must reproduce them (losses, evaluations, what
the checkpoints hold), so any change here is a change of training, not of layout. Thread counts and CPU
kinds round float sums differently: the tolerance covers that (seen: 1e-7 relative between 1 and 2
threads), not a change of behaviour.
"""

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from lbs import ckpt
from lbs.rl.trainer import PRESETS, Trainer

RUN_KEYS = ["best", "config", "counters", "format", "game", "history", "kind", "model", "optimizer", "replay",
            "starts", "target", "wandb_id"]
PINNED = [  # per part: losses (first, middle, last, sum), final evaluation, latest.pt
    {"losses": (0.08182301372289658, 0.06208076700568199, 0.026370685547590256, 2.4277238929644227),
     "result": {"games": 200, "mean": 0.0, "sem": 0.0, "perfect": 0.0, "bombed": 0.0, "mean_length": 16.95},
     "counters": {"updates": 60, "rounds": 16, "episodes": 512, "actor_steps": 8191, "demo_games": 0},
     "replay": {"num_added": 512, "num_sampled": 1920}, "history": [0.0, 0.0], "best": 0.0, "best_at": 32,
     "norms": (117.02924605906502, 117.42000347307506)},
    {"losses": (0.043772511184215546, 0.06479241698980331, 0.4156777560710907, 6.545055236667395),
     "result": {"games": 200, "mean": 0.82, "sem": 0.07725179089173212, "perfect": 0.01, "bombed": 0.48,
                "mean_length": 15.135},
     "counters": {"updates": 100, "rounds": 27, "episodes": 864, "actor_steps": 13702, "demo_games": 0},
     "replay": {"num_added": 864, "num_sampled": 3200}, "history": [0.0, 0.0, 0.82], "best": 0.82,
     "best_at": 92,
     "norms": (118.85304789743664, 118.85304789743664)},
]


def squared_norm(state: dict[str, torch.Tensor]) -> float:
    return float(sum(v.double().pow(2).sum() for v in state.values()))


def test_tiny_run_reproduces_its_pinned_numbers(tmp_path, one_thread):
    cfg = replace(PRESETS["tiny"], total_updates=60, eval_every=30, eval_games=200,
                  out_dir=str(tmp_path / "run"), wandb_mode="disabled")
    latest = Path(cfg.out_dir) / "latest.pt"
    for part, (run_cfg, resume) in enumerate([(cfg, None), (replace(cfg, total_updates=100), latest)]):
        want = PINNED[part]
        trainer = Trainer(run_cfg, resume=resume, progress=False)
        losses: list[float] = []
        update = trainer.update

        def recorded(update=update, losses=losses):
            info = update()
            losses.append(float(info["loss"]))
            return info

        trainer.update = recorded
        result = trainer.run()
        got = (losses[0], losses[len(losses) // 2], losses[-1], sum(losses))
        assert got == pytest.approx(want["losses"], rel=1e-4), part
        assert result.to_dict() == pytest.approx(want["result"], rel=1e-6), part
        blob = ckpt.load(latest, "blueprint")
        assert sorted(blob) == RUN_KEYS
        assert {k: v for k, v in blob["counters"].items() if k != "wall_seconds"} == want["counters"]
        assert {k: blob["replay"][k] for k in ("num_added", "num_sampled")} == want["replay"]
        assert [h["mean"] for h in blob["history"]] == pytest.approx(want["history"])
        assert blob["best"] == pytest.approx(want["best"])
        norms = (squared_norm(blob["model"]), squared_norm(blob["target"]))
        assert norms == pytest.approx(want["norms"], rel=1e-6), part
        best = ckpt.load(Path(cfg.out_dir) / "best.pt", "blueprint")
        assert best["best"] == pytest.approx(want["best"]) and best["counters"]["updates"] == want["best_at"]
