"""The belief run's configuration and presets (read by the data producer, the trainer and the loader)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from ..configs import check, is_int
from ..hanabi.config import MAX_PLAYERS, MIN_PLAYERS
from ..models.belief import BeliefConfig
from ..models.io import DEVICE_NAMES, RULE_BOTS, is_device_name
from ..runs import PRECISIONS, WANDB_MODES
from ..seeding import MAX_SEED


@dataclass
class BeliefTrainConfig:
    """Everything a belief run depends on (the game comes from the blueprint); stored in every checkpoint."""

    model: BeliefConfig = field(default_factory=BeliefConfig)
    players: int = 0
    """players, for a rule-bot blueprint (0: GameConfig's default); a checkpoint blueprint carries its own
    game (0 or its count)"""
    games_per_round: int = 1024
    """blueprint games played in lockstep per producer round (each gives one stream per player)"""
    max_len: int = 80
    """steps recorded per game (0: the game's max_steps, i.e. never cut)"""
    replay_capacity: int = 100_000
    """streams ((episode, player) pairs) kept in the replay"""
    min_replay: int = 20_000
    """streams in the replay before learning starts"""
    batch_size: int = 128
    """streams per update"""
    lr: float = 1e-3
    """Adam learning rate (takes effect on resume too)"""
    adam_eps: float = 1e-8
    """Adam epsilon"""
    grad_clip: float = 50.0
    """gradient norm clip"""
    total_steps: int = 200_000
    """optimizer steps of the whole run (a resumed run counts from its checkpoint)"""
    max_minutes: float = 0.0
    """also stop once the run has trained this long, resumed parts included (like total_steps; 0: no
    limit); the checkpoint is written"""
    data_ratio: float = 0.0
    """once learning runs, the producer adds at most this many streams per stream sampled (0: no limit;
    on a CPU the producer otherwise takes most of the compute from the learner)"""
    cuda_graphs: bool = False
    """the data producer replays its blueprint games' step as a captured CUDA graph (lbs.graphs)"""
    explore: bool = True
    """blueprint acts with its training Ape-X epsilons (the reference's choice); False: greedy"""
    acted_weight: float = 1.0
    """weight in the training loss of the card its holder plays or discards at that step, the others 1. Any
    weight > 0 has the same optimum, the true posterior (the move is a function of what the belief reads
    and of noise independent of the hand); a larger one spends the model's capacity on the cards that
    search decides on. Logged train/nll_per_card stays unweighted"""
    init: str = ""
    """a belief checkpoint whose weights start a new run: fine-tuning the belief of a related blueprint
    (checkpoints/belief_smartbot_2p.pt for a network that copies SmartBot) instead of learning from
    nothing. Same game; the run takes the file's model config ('': fresh weights; unused on resume)"""
    conventions: str = "auto"
    """the rule bot whose conventions the blueprint learnt, written into every checkpoint and its model card
    (a record: where LBS draws its hands is SearchConfig.knowledge, not this): auto, the demonstrator of the
    blueprint's imitation phases when its recipe had one; "" none; or a rule bot's name"""
    seed: int = 0
    """run seed: the producer's deals and exploration"""
    device: str = "auto"
    """cpu, cuda or auto (CUDA when present)"""
    precision: str = "32-true"
    """Lightning precision of the learner ("bf16-mixed" on recent GPUs)"""
    out_dir: str = "runs/belief"
    """run folder (train/belief.py default: runs/belief/<preset>-<date>-<time>)"""
    wandb_mode: str = "offline"
    """offline (default), online or disabled; the WANDB_MODE environment variable wins"""
    wandb_project: str = "lbs-belief"
    """W&B project"""
    wandb_group: str = ""
    """W&B group: give the blueprint, belief and search runs of one pipeline the same group"""
    checkpoint_every: int = 2000
    """steps between writes of out_dir/latest.pt (also written at the end)"""
    log_every: int = 50
    """steps between logged metrics (acceptance and data counters are measured then)"""
    acceptance_streams: int = 4
    """streams of a batch whose sampling acceptance is measured at each log step"""
    acceptance_k: int = 16
    """belief samples per position for that acceptance"""
    eval_games: int = 1000
    """held-out greedy blueprint games for the final NLL (0: skip)"""
    eval_seed: int = 0
    """seed of the held-out validation and final-evaluation deals"""
    val_every: int = 2000
    """steps between validations on val_games greedy games of the validation stream (never a training
    or final-evaluation deal); the best model so far is written to out_dir/best.pt (0: no validation)"""
    val_games: int = 500
    """greedy games per validation"""

    def __post_init__(self) -> None:
        positive = ("games_per_round", "replay_capacity", "min_replay", "batch_size", "total_steps",
                    "checkpoint_every", "log_every", "acceptance_streams", "acceptance_k")
        for name in positive:
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"BeliefTrainConfig.{name}={v!r}: must be an int >= 1")
        if self.val_every < 0 or self.val_games < 1:
            raise ValueError(f"BeliefTrainConfig: val_every={self.val_every} must be >= 0 and val_games="
                             f"{self.val_games} >= 1")
        if self.players != 0 and not MIN_PLAYERS <= self.players <= MAX_PLAYERS:
            raise ValueError(f"BeliefTrainConfig.players={self.players!r}: must be 0 (the blueprint's "
                             f"game) or {MIN_PLAYERS}..{MAX_PLAYERS}")
        if self.max_len < 0 or self.eval_games < 0:
            raise ValueError(f"BeliefTrainConfig: max_len={self.max_len} and eval_games={self.eval_games} "
                             "must be >= 0")
        if self.min_replay > self.replay_capacity:
            raise ValueError(f"BeliefTrainConfig.min_replay={self.min_replay} exceeds replay_capacity="
                             f"{self.replay_capacity}: learning would never start")
        if not (self.lr > 0 and self.adam_eps > 0 and self.grad_clip > 0):  # (NaN fails these too)
            raise ValueError("BeliefTrainConfig: lr, adam_eps and grad_clip must be > 0")
        if not (self.data_ratio >= 0 and self.max_minutes >= 0):
            raise ValueError(f"BeliefTrainConfig: data_ratio={self.data_ratio} and max_minutes="
                             f"{self.max_minutes} must be >= 0")
        check(self, "acted_weight", self.acted_weight > 0 and math.isfinite(self.acted_weight),
              "a finite number > 0")
        for name in ("lr", "adam_eps", "grad_clip", "data_ratio", "max_minutes"):
            check(self, name, math.isfinite(getattr(self, name)), "a finite number")
        for name in ("seed", "eval_seed"):
            check(self, name, is_int(getattr(self, name)) and 0 <= getattr(self, name) <= MAX_SEED,
                  f"an int in 0..{MAX_SEED}")
        check(self, "conventions", self.conventions in ("auto", "", *RULE_BOTS),
              f"auto, '' or a rule bot ({', '.join(RULE_BOTS)})")
        check(self, "precision", self.precision in PRECISIONS, f"one of {PRECISIONS}")
        check(self, "device", is_device_name(self.device), DEVICE_NAMES)
        if self.wandb_mode not in WANDB_MODES:
            raise ValueError(f"BeliefTrainConfig.wandb_mode={self.wandb_mode!r}: choose from {WANDB_MODES}")


PRESETS: dict[str, BeliefTrainConfig] = {
    # The reference model (hidden 512, 2-layer LSTM) and the public reference code's optimiser settings.
    "paper": BeliefTrainConfig(),
    # Minutes on a 2-core CPU, for a tiny blueprint (e.g. the 2-colour `tiny` blueprint preset).
    "tiny": BeliefTrainConfig(
        model=BeliefConfig(hidden=64, mlp_layers=2, lstm_layers=2, decoder_layers=1, card_embed=16),
        games_per_round=64,
        max_len=0,
        replay_capacity=8192,
        min_replay=512,
        batch_size=64,
        data_ratio=0.125,
        total_steps=3000,
        checkpoint_every=250,
        log_every=25,
        eval_games=500,
        val_every=500,
    ),
    # The shipped belief (checkpoints/belief_2p.pt) for the recipe blueprint, on one CPU core: a mid-sized
    # model with the counting prior, warm-started from SmartBot's belief (--init), fed by a replay the
    # blueprint's games refill at a quarter of the rate they are sampled.
    "recipe": BeliefTrainConfig(
        model=BeliefConfig(hidden=128, mlp_layers=2, lstm_layers=2, decoder_layers=1, card_embed=32,
                           count_prior=True),
        games_per_round=64,
        max_len=0,
        replay_capacity=32768,
        min_replay=2048,
        batch_size=64,
        data_ratio=0.25,
        total_steps=10000,
        checkpoint_every=500,
        val_every=1000,
        val_games=1000,
        eval_games=1000,
    ),
}
# The shipped belief's second stage: the recipe belief (--init, its shipped file) fine-tuned with the card its
# holder plays or discards weighing ten times in the loss, which LBS's rollouts act on.
PRESETS["recipe_weighted"] = replace(PRESETS["recipe"], total_steps=2000, checkpoint_every=250, val_every=500,
                                     val_games=300, acted_weight=10.0)


def apply_preset(name: str) -> BeliefTrainConfig:
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose from {sorted(PRESETS)}")
    return replace(PRESETS[name])
