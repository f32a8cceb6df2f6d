"""Blueprint run I/O: latest.pt and best.pt written from the run's parts, and a resume read back into them.

A checkpoint (kind "blueprint") holds the config, the game, the learner's weights, target and Adam state,
the replay's counters (never its episodes), the run's counters, best evaluation, history and W&B id;
`lbs.models.load_blueprint` rebuilds the network from it alone. Only rank 0 writes: every rank holds the
same weights. A new run may start from another blueprint's weights (TrainConfig.init, read_init).
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .. import ckpt
from ..configs import from_dict, to_dict
from ..hanabi.config import GameConfig
from ..models.io import BLUEPRINT_KIND as KIND
from ..models.io import float_weights, training_record
from ..models.qnet import NetConfig
from ..runs import Lifecycle
from .config import TrainConfig
from .learner import Learner
from .replay import PrioritizedReplay
from .selfplay import SelfPlay


@dataclass
class RunRecord:
    """What the loop keeps besides weights and the actors' counters; saved in every checkpoint."""

    best: float = -math.inf
    """the best evaluation mean so far (best.pt holds its weights)"""
    history: list[dict] = field(default_factory=list)
    """one row per evaluation: updates, wall_seconds and the EvalResult's fields"""
    wandb_id: str | None = None
    """the W&B run this run logs to (a resume continues it)"""
    wall_seconds: float = 0.0
    """training time so far, resumed parts included"""
    demo_games: int = 0
    """demonstrator games the imitation phases have used (the next chunk starts there)"""
    starts: list[dict] = field(default_factory=list)
    """one row per start of the run (new or resumed): the command, the machine and the update it began at,
    so a model card can say how its file was made"""


def read_resume(life: Lifecycle, path: str | Path, cfg: TrainConfig) -> dict:
    """A checkpoint to continue, read to the CPU and checked before any other process starts: a weights-only
    file, a change of game or network, or of a phase already begun, is refused (the phases still to come
    may change: a recipe can be extended or retuned ahead of where the run is)."""
    blob = life.training_state(path, needs=("optimizer",))
    stored = from_dict(TrainConfig, blob["config"])
    life.refuse_changes(path, stored, cfg, ("game", "net"))
    done, start = blob["counters"]["updates"], 0
    for i, (theirs, mine) in enumerate(zip(stored.phases, cfg.phases, strict=False)):
        if start >= done:
            break
        if theirs != mine:
            raise ckpt.CheckpointError(f"{path} is at update {done}, inside or past phase {i} ({theirs}); "
                                       f"this run's phase {i} is {mine}: a phase begun cannot change on "
                                       "resume")
        start += theirs.updates
    if start < done and len(cfg.phases) < len(stored.phases):
        raise ckpt.CheckpointError(f"{path} is at update {done}, inside phase {len(cfg.phases)} of its "
                                   f"recipe, which this run's recipe of {len(cfg.phases)} phases drops")
    return blob


def read_init(path: str | Path, cfg: TrainConfig) -> tuple[dict[str, torch.Tensor], float]:
    """The network weights a new run starts from (TrainConfig.init) and the CPU seconds that made them (a
    blueprint run's clock; 0 for a file that keeps none), read to the CPU and checked
    before any other process starts: a file of another game or network is refused in one line."""
    blob = ckpt.load(path, KIND, map_location="cpu")
    try:
        stored = {"game": GameConfig.from_dict(blob["config"]["game"]),
                  "net": from_dict(NetConfig, blob["config"]["net"])}
        weights = blob["model"]
        rec = training_record(blob)
        history = rec.get("history") or [{}]
        cpu = float(history[-1].get("cpu_seconds", 0.0))
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ckpt.CheckpointError(f"init {path}: not a loadable blueprint ({type(e).__name__}: {e})") from e
    for name, theirs in stored.items():
        if theirs != getattr(cfg, name):
            raise ckpt.CheckpointError(f"init {path}: a blueprint of {name} {theirs}; this run's {name} is "
                                       f"{getattr(cfg, name)} (--{name}.* must match the file's)")
    return float_weights(weights), cpu


class RunIO:
    """The run's checkpoints, assembled from (and restored into) the learner, actors, replay and record."""

    def __init__(self, life: Lifecycle, cfg: TrainConfig, learner: Learner, selfplay: SelfPlay,
                 replay: PrioritizedReplay, record: RunRecord):
        self.life, self.cfg = life, cfg
        self.learner, self.selfplay, self.replay, self.record = learner, selfplay, replay, record

    def counters(self) -> dict:
        return {"updates": self.learner.updates, **self.selfplay.counters(),
                "demo_games": self.record.demo_games, "wall_seconds": self.record.wall_seconds}

    def payload(self) -> dict:
        rec = self.record
        return {
            "config": to_dict(self.cfg),
            "game": self.cfg.game.to_dict(),
            **self.learner.state_dict(),  # model, target, optimizer
            "replay": self.replay.state_dict(include_data=False),
            "counters": self.counters(),
            "best": rec.best,
            "history": rec.history,
            "starts": rec.starts,
            "wandb_id": rec.wandb_id,
        }

    def save(self, name: str) -> Path:
        """Write out_dir/name atomically; on ranks other than 0 (which hold the same weights) nothing."""
        if not self.learner.is_main:
            return self.life.out / name
        return ckpt.save(self.life.out / name, KIND, self.payload())

    def restore(self, blob: dict) -> None:
        """Continue a run: weights, optimizer, counters, history. Config overrides take effect."""
        self.learner.load_state_dict(blob)
        # the replay's contents are never saved: only its counters continue (capacity may change)
        rep = blob["replay"]
        self.replay.num_added, self.replay.num_sampled = rep["num_added"], rep["num_sampled"]
        counters = blob["counters"]
        self.learner.updates = counters["updates"]
        self.selfplay.load_counters(counters)
        rec = self.record
        rec.wall_seconds = counters.get("wall_seconds", 0.0)
        rec.demo_games = counters.get("demo_games", 0)
        rec.history, rec.wandb_id = list(blob["history"]), blob.get("wandb_id")
        rec.starts = list(blob.get("starts", []))
        rec.best = self.life.best_so_far(blob["best"], operator.itemgetter("best"), operator.gt)
