"""The BAD run's config (BadConfig, stored in every checkpoint) and its presets."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from ..configs import check, is_int
from ..hanabi.config import GameConfig
from ..models.io import DEVICE_NAMES, is_device_name
from ..runs import WANDB_MODES
from ..seeding import MAX_SEED
from .policy import BadNetConfig

OPTIMIZERS = ("rmsprop", "adam")


@dataclass
class BadConfig:
    """Everything a BAD run depends on; stored in every checkpoint. Defaults are the paper's (appendix B)
    where it states them."""

    game: GameConfig = field(default_factory=lambda: GameConfig(bomb_zero=False))
    """the game trained on; as the paper trained BAD, a game that loses every life keeps its points (the
    evaluation also reports the score with such games at 0, the paper's 23.917 beside its 24.174)"""
    net: BadNetConfig = field(default_factory=BadNetConfig)
    games_per_update: int = 32
    """self-play games per update, played to the end in lockstep (the paper's batch of 32)"""
    max_len: int = 0
    """moves per game at most (0: the game's longest possible game, so no game is cut)"""
    optimizer: str = "rmsprop"
    """rmsprop (the paper's: decay 0.99, momentum 0) or adam"""
    lr: float = 1.6e-4
    """learning rate (the paper's PBT drew it from [9e-5, 3e-4); this is that range's geometric middle)"""
    opt_eps: float = 1e-10
    """the optimizer's epsilon (the paper's RMSProp: 1e-10)"""
    grad_clip: float = 0.0
    """gradient norm clip (0: none; the paper states none)"""
    gamma: float = 0.999
    """discount per move"""
    entropy: float = 0.046
    """weight of the policy's entropy bonus (PBT drew it from [0.03, 0.07): its geometric middle)"""
    value_weight: float = 0.25
    """weight of the baseline's squared error in the loss"""
    samples: int = 3000
    """private views drawn per game at each move for the Bayesian update (the paper: 3,000 in training)"""
    exact_limit: int = 4096
    """enumerate every private view instead of drawing, weighed exactly, when there are at most this many
    (card types ** slots seen): small games get the exact update"""
    iterations: int = 100
    """self-consistency iterations of the belief (eqs. 12 and 14)"""
    mix: float = 0.01
    """share of the V1 belief mixed into the Bayesian one (alpha)"""
    inverse_temperature: float = 1.0
    """of the partial policy's softmax when acting and updating the belief"""
    total_updates: int = 100_000
    """stop the run after this many updates (a resume goes on from there)"""
    max_minutes: float = 0.0
    """stop after this wall time, resumed parts included (0: no limit); latest.pt is written"""
    eval_every: int = 500
    """updates between greedy evaluations"""
    eval_games: int = 1000
    """greedy games per evaluation (fixed deals of the BAD validation stream)"""
    checkpoint_minutes: float = 5.0
    """minutes between writes of out_dir/latest.pt (also written at every new best and at exit)"""
    out_dir: str = "runs/bad"
    """run folder (train/bad.py default: runs/bad/<preset>-<date>-<time>)"""
    seed: int = 0
    """run seed: deals, partial-policy draws, evaluation deals, initial weights"""
    device: str = "auto"
    """cpu, cuda or auto (CUDA when present)"""
    wandb_mode: str = "offline"
    """offline (default), online, or disabled; the WANDB_MODE environment variable wins"""
    wandb_project: str = "lbs-bad"
    """W&B project"""
    wandb_group: str = ""
    """W&B group"""

    def __post_init__(self) -> None:
        """Every field checked before any work, naming the field and the allowed range."""
        for name in ("games_per_update", "samples", "exact_limit", "total_updates", "eval_every",
                     "eval_games"):
            check(self, name, is_int(getattr(self, name)) and getattr(self, name) >= 1, "an int >= 1")
        for name in ("max_len", "iterations"):
            check(self, name, is_int(getattr(self, name)) and getattr(self, name) >= 0, "an int >= 0")
        for name in ("lr", "opt_eps", "checkpoint_minutes", "inverse_temperature"):
            check(self, name, 0 < getattr(self, name) < math.inf, "> 0 and finite")
        for name in ("grad_clip", "entropy", "value_weight", "max_minutes"):
            check(self, name, 0 <= getattr(self, name) < math.inf, ">= 0 and finite")
        check(self, "gamma", 0 < self.gamma <= 1, "in (0, 1]")
        check(self, "mix", 0 <= self.mix <= 1, "in [0, 1]")
        check(self, "optimizer", self.optimizer in OPTIMIZERS, f"one of {OPTIMIZERS}")
        check(self, "seed", is_int(self.seed) and 0 <= self.seed <= MAX_SEED, f"an int in 0..{MAX_SEED}")
        check(self, "wandb_mode", self.wandb_mode in WANDB_MODES, f"one of {WANDB_MODES}")
        check(self, "device", is_device_name(self.device), DEVICE_NAMES)

    @property
    def seq_len(self) -> int:
        """Moves per game at most: max_len, or the game's longest possible game when it is 0."""
        return self.max_len or self.game.max_steps


# Minutes on one CPU core: one colour of 4 ranks, 2-card hands (16 private views: the update is exact).
TINY = BadConfig(
    game=GameConfig(players=2, colors=1, ranks=4, hand_size=2),
    net=BadNetConfig(hidden=64, layers=2),
    games_per_update=64,
    optimizer="adam",
    lr=3e-3,
    opt_eps=1e-8,
    gamma=0.99,
    entropy=0.01,
    iterations=10,
    total_updates=300,
    eval_every=50,
    eval_games=500,
    checkpoint_minutes=1.0,
)

PRESETS: dict[str, BadConfig] = {
    "paper": BadConfig(),
    "tiny": TINY,
    # The 2-colour game (5-card hands: 10 card types, 10^5 views, so drawn): long on a CPU
    # (experiments/results/bad/bad_hanabi_small.md: 4.5 of 10 after 3,000 updates, 39 CPU minutes).
    "small": replace(
        TINY,
        game=GameConfig(players=2, colors=2, ranks=5, bomb_zero=False),
        net=BadNetConfig(hidden=128, layers=2),
        games_per_update=32,
        lr=1e-3,
        samples=256,
        iterations=20,
        total_updates=20_000,
        eval_every=100,
        eval_games=200,
        checkpoint_minutes=2.0,
    ),
}


def apply_preset(name: str) -> BadConfig:
    """A fresh copy of a named preset; an unknown name is one clear error."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose from {sorted(PRESETS)}")
    return replace(PRESETS[name])
