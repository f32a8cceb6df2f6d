"""The blueprint run's config (TrainConfig, stored in every checkpoint), its presets, and the replay's layout
of one episode."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import torch

from ..configs import check, is_int
from ..hanabi.config import GameConfig
from ..models.io import DEVICE_NAMES, is_device_name
from ..models.qnet import NetConfig
from ..runs import PRECISIONS, WANDB_MODES
from ..seeding import MAX_SEED
from .actors import ActorConfig


@dataclass
class TrainConfig:
    """Everything a blueprint run depends on; stored in every checkpoint."""

    game: GameConfig = field(default_factory=GameConfig)
    net: NetConfig = field(default_factory=NetConfig)
    actor: ActorConfig = field(default_factory=ActorConfig)
    lr: float = 6.25e-5
    """Adam learning rate"""
    adam_eps: float = 1.5e-5
    """Adam epsilon"""
    grad_clip: float = 5.0
    """gradient norm clip"""
    gamma: float = 0.999
    """discount per step"""
    n_step: int = 3
    """steps of the double-Q target"""
    batch_size: int = 128
    """sequences per learner update"""
    replay_capacity: int = 100_000
    """episodes kept in the replay (its contents are never saved, so it may change on resume)"""
    min_replay: int = 1024
    """episodes in replay before learning starts"""
    alpha: float = 0.9
    """priority exponent of prioritized replay"""
    beta: float = 0.6
    """importance-sampling exponent of prioritized replay"""
    eta: float = 0.9
    """priority = eta * max|td| + (1 - eta) * mean|td|"""
    target_sync: int = 2500
    """updates between target-network copies"""
    actor_sync: int = 10
    """updates between refreshes of the acting weights"""
    updates_per_round: int = 16
    """act/learn ratio: learner updates per self-play round"""
    overlap: bool = False
    """play the next rounds in a background thread (its own CUDA stream) while the learner updates; the
    learner still inserts each round and runs updates_per_round updates per round, but which weights a
    round is played with depends on timing, so runs are not bit-reproducible"""
    demo_games: int = 0
    """learning from demonstrations (DQfD / R2D3): SmartBot games recorded into a demonstration replay
    beside the self-play replay (lbs.rl.demos; rebuilt the same on a resume). 0: plain R2D2"""
    demo_ratio: float = 0.0
    """fraction of each batch drawn from the demonstration replay (after any warm start); those sequences
    get the large-margin loss beside the TD loss every sequence gets"""
    warm_start_updates: int = 0
    """supervised warm start: the first updates learn from demonstrations alone (large-margin + TD loss)
    with no self-play; then self-play fills its replay and R2D2 goes on with demo_ratio"""
    margin: float = 0.8
    """DQfD's large margin: the demonstrator's move must beat every other legal move's Q by this much"""
    margin_weight: float = 1.0
    """weight of the large-margin loss beside the TD loss"""
    init: str = ""
    """a blueprint checkpoint whose network weights a new run starts from (online and target networks; e.g.
    experiments/imitation.py --save, a supervised warm start on fresh SmartBot games); its game and network
    must be this run's; the run's CPU clock (cpu_seconds) goes on from the file's, so curves compare at equal
    CPU time. A resume continues from its own weights. "": random weights"""
    total_updates: int = 1_000_000
    """learner updates of the whole run (a resumed run counts from its checkpoint)"""
    max_minutes: float = 0.0
    """stop after this wall time, resumed parts included (0: no limit); latest.pt is written"""
    eval_every: int = 2000
    """updates between greedy evaluations"""
    eval_games: int = 1000
    """greedy games per evaluation (fixed deals of the validation stream)"""
    checkpoint_minutes: float = 5.0
    """minutes between writes of out_dir/latest.pt (also written at every new best and at exit)"""
    out_dir: str = "runs/blueprint"
    """run folder (train/blueprint.py default: runs/blueprint/<preset>-<date>-<time>)"""
    seed: int = 0
    """run seed: deals, exploration and evaluation deals"""
    device: str = "auto"
    """cpu, cuda or auto (CUDA when present)"""
    devices: int = 1
    """processes learning data-parallel (Lightning Fabric DDP: N GPUs, or N CPU processes over gloo); each
    plays its own deals into its own replay and draws batch_size sequences per update, so an update
    averages the gradients of devices x batch_size sequences; rank 0 evaluates, logs and saves"""
    precision: str = "32-true"
    """Fabric precision for the learner ("bf16-mixed" on recent GPUs)"""
    wandb_mode: str = "offline"
    """offline (default), online, or disabled; the WANDB_MODE environment variable wins"""
    wandb_project: str = "lbs-blueprint"
    """W&B project"""
    wandb_group: str = ""
    """W&B group: give the blueprint, belief and search runs of one pipeline the same group"""

    def __post_init__(self) -> None:
        """Every field checked before any work, naming the field and the allowed range."""
        for name in ("n_step", "batch_size", "replay_capacity", "min_replay", "target_sync", "actor_sync",
                     "updates_per_round", "total_updates", "eval_every", "eval_games"):
            check(self, name, is_int(getattr(self, name)) and getattr(self, name) >= 1, "an int >= 1")
        check(self, "min_replay", self.min_replay <= self.replay_capacity,
              f"<= replay_capacity={self.replay_capacity} (learning would never start)")
        for name in ("lr", "adam_eps", "grad_clip", "checkpoint_minutes"):
            check(self, name, 0 < getattr(self, name) < math.inf, "> 0 and finite")
        check(self, "gamma", 0 < self.gamma <= 1, "in (0, 1]")
        check(self, "alpha", 0 <= self.alpha < math.inf, ">= 0 and finite")
        for name in ("beta", "eta"):
            check(self, name, 0 <= getattr(self, name) <= 1, "in [0, 1]")
        check(self, "max_minutes", 0 <= self.max_minutes < math.inf, ">= 0 and finite (0: no limit)")
        for name in ("demo_games", "warm_start_updates"):
            check(self, name, is_int(getattr(self, name)) and getattr(self, name) >= 0, "an int >= 0")
        check(self, "demo_ratio", 0 <= self.demo_ratio <= 1, "in [0, 1]")
        check(self, "margin", 0 <= self.margin < math.inf, ">= 0 and finite")
        check(self, "margin_weight", 0 <= self.margin_weight < math.inf, ">= 0 and finite")
        uses_demos = self.demo_ratio > 0 or self.warm_start_updates > 0
        check(self, "demo_games", self.demo_games > 0 or not uses_demos,
              f"> 0 for demo_ratio={self.demo_ratio} / warm_start_updates={self.warm_start_updates} (no "
              "demonstrations to learn from)")
        check(self, "seed", is_int(self.seed) and 0 <= self.seed <= MAX_SEED, f"an int in 0..{MAX_SEED}")
        check(self, "precision", self.precision in PRECISIONS, f"one of {PRECISIONS}")
        check(self, "wandb_mode", self.wandb_mode in WANDB_MODES, f"one of {WANDB_MODES}")
        check(self, "device", is_device_name(self.device), DEVICE_NAMES)
        check(self, "devices", is_int(self.devices) and self.devices >= 1, "an int >= 1")
        check(self, "devices", self.devices == 1 or self.device in ("auto", "cpu", "cuda"),
              f"1 with device={self.device!r} (several devices take auto, cpu or cuda)")

    @property
    def seq_len(self) -> int:
        """Steps per self-play round: actor.max_len, or the game's longest possible game when it is 0."""
        return self.actor.max_len or self.game.max_steps


PRESETS: dict[str, TrainConfig] = {
    "paper": TrainConfig(),
    # One H100-class GPU. UNTUNED: these values are reasoned, not measured, until this preset's learning
    # curve is recorded on a GPU. From measured H100 numbers: actors 431K slot-steps/s at 8,192 games;
    # learner 5,500 sequences/s bf16 at batch 128 x 80 (4,400 fp32); `--preset paper` with 1,024 games,
    # batch 256 and bf16 made ~10 updates/s with acting and learning taking turns (its 16 updates are
    # ~0.75 s of a ~1.6 s round, so acting took about half). Hence bf16, batch 256 (~20 updates/s of
    # learner alone), overlap on (acting in its own stream while the learner runs), and 4,096 games a
    # round (~0.8 s of acting) against 64 updates (~3 s): each episode is sampled ~4 times (paper preset:
    # 16) and the acting weights trail the learner by at most ~3 rounds. lr is the paper's times sqrt(2)
    # for the doubled batch; total_updates is half the paper's (the same number of sequences).
    "gpu": TrainConfig(
        actor=ActorConfig(num_games=4096, max_len=80),
        lr=8.8e-5,
        batch_size=256,
        min_replay=4 * 4096,
        updates_per_round=64,
        total_updates=500_000,
        precision="bf16-mixed",
        overlap=True,
    ),
    # About a minute on a 2-core CPU: one colour of 4 ranks, 2-card hands, a small network. Beats random
    # play and the scripted "safe play" heuristic (experiments/results/learning_curve/learning_curve_tiny.md).
    "tiny": TrainConfig(
        game=GameConfig(players=2, colors=1, ranks=4, hand_size=2),
        net=NetConfig(hidden=32, lstm_layers=1, mlp_layers=1),
        actor=ActorConfig(num_games=32, max_len=16),
        lr=1e-3,
        adam_eps=1e-8,
        gamma=0.99,
        batch_size=32,
        replay_capacity=1024,
        min_replay=64,
        target_sync=50,
        actor_sync=1,
        updates_per_round=4,
        total_updates=1500,
        eval_every=100,
        eval_games=500,
        checkpoint_minutes=1.0,
    ),
    # The 2-colour game with a mid-sized network: tens of minutes on a CPU.
    "small": TrainConfig(
        game=GameConfig(players=2, colors=2, ranks=5),
        net=NetConfig(hidden=64, lstm_layers=1, mlp_layers=2),
        actor=ActorConfig(num_games=64, max_len=40),
        lr=1e-3,
        adam_eps=1e-8,
        gamma=0.99,
        batch_size=32,
        replay_capacity=4096,
        min_replay=256,
        target_sync=100,
        actor_sync=1,
        updates_per_round=4,
        total_updates=20000,
        eval_every=250,
        eval_games=500,
        checkpoint_minutes=2.0,
    ),
    # The full 2-player game on a 2-core CPU, learning from SmartBot's games (DQfD-style: a demonstration
    # replay of 4,096 SmartBot games, half of every batch, large-margin loss on them). The network and
    # learner settings are those of the shipped CPU blueprint (checkpoints/blueprint_2p.md); the curves
    # against plain R2D2 and a supervised warm start: experiments/results/compare_curves/.
    "demo": TrainConfig(
        net=NetConfig(hidden=128, lstm_layers=2, mlp_layers=2),
        actor=ActorConfig(num_games=64, max_len=80),
        lr=3e-4,
        adam_eps=1e-8,
        batch_size=32,
        replay_capacity=6000,
        min_replay=512,
        target_sync=500,
        actor_sync=1,
        updates_per_round=8,
        total_updates=100_000,
        eval_every=250,
        eval_games=300,
        checkpoint_minutes=2.0,
        demo_games=4096,
        demo_ratio=0.5,
    ),
}


def replay_spec(cfg: TrainConfig) -> dict[str, tuple]:
    """Stored fields of one episode: observations as uint8 (one byte a feature), floats on sampling."""
    g, t = cfg.game, cfg.seq_len
    a = g.num_actions
    return {
        "priv": ((t, g.players, g.obs_dim), torch.uint8, torch.float32),
        "legal": ((t, g.players, a), torch.bool),
        "action": ((t, g.players), torch.long),
        "reward": ((t,), torch.float32),
        "terminal": ((t,), torch.bool),
        "mask": ((t,), torch.bool),
        "own_hand": ((t, g.players, g.hand_size), torch.int8, torch.long),
    } | ({"aux_target": ((t, g.players, g.hand_size), torch.int8, torch.long)} if cfg.net.aux_head else {})


def apply_preset(name: str) -> TrainConfig:
    """A fresh copy of a named preset; an unknown name is one clear error."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose from {sorted(PRESETS)}")
    return replace(PRESETS[name])
