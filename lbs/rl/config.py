"""The blueprint run's config (TrainConfig, stored in every checkpoint), its presets, and the replay's layout
of one episode."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import torch

from ..configs import check, is_int
from ..hanabi.config import GameConfig
from ..models.io import DEVICE_NAMES, RULE_BOTS, is_device_name
from ..models.qnet import NetConfig
from ..runs import PRECISIONS, WANDB_MODES
from ..seeding import MAX_SEED
from .actors import ActorConfig

PHASE_KINDS = ("imitate", "values", "improve")
"""What a phase of the recipe learns (see Phase.kind)."""


@dataclass(frozen=True)
class Phase:
    """One phase of a blueprint recipe: what it learns, for how many updates, at what rate."""

    kind: str
    """imitate: cross-entropy of a demonstrator's moves on its fresh games (DAgger: some played by the
    network), the policy only. values: the network's own action values Q^pi by n-step TD on exploring play
    (behaviour epsilon-greedy around the anchor, returns cut where it explored, the bootstrap at the anchor's
    move), the anchor's moves held best by a large margin, so its greedy moves stay (with
    NetConfig.policy_net the Q network alone trains, so every move stays). improve: R2D2 (double-Q targets) on
    self-play, the anchor's moves held by a margin term that decays to 0 over the phase"""
    updates: int
    """learner updates of this phase (a length any machine reproduces)"""
    lr: float | None = None
    """Adam's rate in this phase (None: TrainConfig.lr)"""
    demonstrator: str = "smartbot"
    """imitate: the rule bot whose moves are learnt (lbs.models.RULE_BOTS)"""
    dagger: float = 0.0
    """imitate: share of each chunk's games the network plays while the demonstrator labels its states"""
    bomb_weight: float = 0.0
    """imitate: weight of -log P(no losing play) (the true own cards say which plays lose a life)"""
    chunk: int = 256
    """imitate: fresh demonstrator games recorded at a time (each used once, in batches of batch_size)"""
    eps_base: float | None = None
    """values / improve: the behaviour's Ape-X exploration base (None: actor.eps_base)"""
    fit_games: int = 0
    """values: before the first TD update, the dueling value stream and the advantages' scale are fitted by
    least squares to the returns of this many of the network's own greedy games (lbs.rl.values.
    fit_value_head), so TD starts from values of the right size with every greedy move kept; 0: no fit"""
    n_step: int | None = None
    """values / improve: steps of the TD target (None: TrainConfig.n_step). A values phase learns faster with
    long ones: its returns stop where the behaviour explored anyway, and need no bootstrap to be right"""
    anchor_weight: float = 0.0
    """values / improve: weight of the large-margin loss that keeps the anchor's move best (the network as
    this phase began; in an improve phase it decays linearly to 0); 0: no anchor. Needed in a values phase
    unless NetConfig.policy_net (whose moves Q cannot change: unused there)"""
    anchor_margin: float = 0.1
    """values / improve: by how much the anchor's move must beat every other legal move's Q"""

    def __post_init__(self) -> None:
        check(self, "kind", self.kind in PHASE_KINDS, f"one of {PHASE_KINDS}")
        check(self, "updates", is_int(self.updates) and self.updates >= 1, "an int >= 1")
        check(self, "lr", self.lr is None or 0 < self.lr < math.inf, "> 0 and finite (or None)")
        check(self, "demonstrator", self.demonstrator in RULE_BOTS, f"a rule bot: {', '.join(RULE_BOTS)}")
        check(self, "dagger", 0 <= self.dagger <= 1, "in [0, 1]")
        check(self, "chunk", is_int(self.chunk) and self.chunk >= 1, "an int >= 1")
        check(self, "eps_base", self.eps_base is None or 0 <= self.eps_base <= 1, "in [0, 1] (or None)")
        check(self, "fit_games", is_int(self.fit_games) and self.fit_games >= 0, "an int >= 0")
        check(self, "n_step", self.n_step is None or (is_int(self.n_step) and self.n_step >= 1),
              "an int >= 1 (or None)")
        for name in ("bomb_weight", "anchor_weight", "anchor_margin"):
            check(self, name, 0 <= getattr(self, name) < math.inf, ">= 0 and finite")

    @property
    def learns_values(self) -> bool:
        """A TD phase: self-play into replay, Q learnt as values."""
        return self.kind != "imitate"


@dataclass
class TrainConfig:
    """Everything a blueprint run depends on; stored in every checkpoint."""

    game: GameConfig = field(default_factory=GameConfig)
    net: NetConfig = field(default_factory=NetConfig)
    actor: ActorConfig = field(default_factory=ActorConfig)
    lr: float = 6.25e-5
    """Adam learning rate of the phases that set none"""
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
    phases: tuple[Phase, ...] = (Phase("improve", updates=1_000_000),)
    """the recipe: its phases in order (on the command line, a JSON list of Phase fields). A run's length
    is the sum of their updates"""
    init: str = ""
    """a blueprint checkpoint whose network weights a new run starts from (online and target networks); its
    game and network must be this run's; the run's CPU clock (cpu_seconds) goes on from the file's, so curves
    compare at equal CPU time. A resume continues from its own weights. "": random weights"""
    total_updates: int = 0
    """stop the run after this many learner updates (a resume goes on from there, e.g. with 0); 0: at the end
    of the last phase"""
    max_minutes: float = 0.0
    """stop after this wall time, resumed parts included (0: no limit); latest.pt is written"""
    eval_every: int = 2000
    """updates between greedy evaluations"""
    eval_games: int = 1000
    """greedy games per evaluation (fixed deals of the validation stream)"""
    value_games: int = 200
    """held-out deals of the value check at the end of each TD phase (lbs.rl.values: Q of every legal move
    against its return), recorded in the history"""
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
                     "updates_per_round", "eval_every", "eval_games", "value_games"):
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
        check(self, "total_updates", is_int(self.total_updates) and self.total_updates >= 0, "an int >= 0")
        check(self, "phases", isinstance(self.phases, tuple) and len(self.phases) >= 1
              and all(isinstance(p, Phase) for p in self.phases), "a tuple of one Phase or more")
        check(self, "phases", not self.net.policy_net or all(p.kind != "improve" for p in self.phases),
              "without an improve phase when net.policy_net is on (TD does not move its policy network)")
        check(self, "phases", self.net.policy_net or all(p.kind != "values" or p.anchor_weight > 0
                                                          for p in self.phases),
              "with anchor_weight > 0 in every values phase (without the anchor or a policy network its "
              "greedy moves would drift)")
        check(self, "seed", is_int(self.seed) and 0 <= self.seed <= MAX_SEED, f"an int in 0..{MAX_SEED}")
        check(self, "precision", self.precision in PRECISIONS, f"one of {PRECISIONS}")
        check(self, "wandb_mode", self.wandb_mode in WANDB_MODES, f"one of {WANDB_MODES}")
        check(self, "device", is_device_name(self.device), DEVICE_NAMES)
        check(self, "devices", is_int(self.devices) and self.devices >= 1, "an int >= 1")
        check(self, "devices", self.devices == 1 or not self.net.policy_net,
              "1 with net.policy_net (its values phase freezes the policy, whose gradients DDP waits on)")
        check(self, "devices", self.devices == 1 or self.device in ("auto", "cpu", "cuda"),
              f"1 with device={self.device!r} (several devices take auto, cpu or cuda)")

    @property
    def length(self) -> int:
        """Updates of the whole recipe."""
        return sum(p.updates for p in self.phases)

    @property
    def stop_at(self) -> int:
        """The update this run stops at: total_updates, or the recipe's end."""
        return self.total_updates or self.length

    def phase_at(self, updates: int) -> tuple[int, Phase, int]:
        """(index, phase, updates done in it) of the phase that update number `updates` (from 0) belongs
        to; past the end, the last phase."""
        start = 0
        for i, p in enumerate(self.phases):
            if updates < start + p.updates or i == len(self.phases) - 1:
                return i, p, updates - start
            start += p.updates
        raise AssertionError("unreachable")

    def phase_lr(self, phase: Phase) -> float:
        return self.lr if phase.lr is None else phase.lr

    @property
    def seq_len(self) -> int:
        """Steps per self-play round: actor.max_len, or the game's longest possible game when it is 0."""
        return self.actor.max_len or self.game.max_steps


# About a minute on a 2-core CPU: one colour of 4 ranks, 2-card hands, a small network. Beats random
# play and the scripted "safe play" heuristic (experiments/results/learning_curve/learning_curve_tiny.md).
TINY = TrainConfig(
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
    phases=(Phase("improve", updates=1500),),
    eval_every=100,
    eval_games=500,
    checkpoint_minutes=1.0,
)


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
        phases=(Phase("improve", updates=500_000),),
        precision="bf16-mixed",
        overlap=True,
    ),
    "tiny": TINY,
    # The 2-colour game with a mid-sized network: tens of minutes on a CPU.
    "small": replace(
        TINY,
        game=GameConfig(players=2, colors=2, ranks=5),
        net=NetConfig(hidden=64, lstm_layers=1, mlp_layers=2),
        actor=ActorConfig(num_games=64, max_len=40),
        replay_capacity=4096,
        min_replay=256,
        target_sync=100,
        phases=(Phase("improve", updates=20000),),
        eval_every=250,
        checkpoint_minutes=2.0,
    ),
    # The shipped blueprint (checkpoints/blueprint_2p.pt): the full 2-player game within three hours of one
    # CPU core. Imitation of SmartBot by a policy network on fresh games (DAgger on half of them; losing plays
    # weighed from update 3,000; the rate lowered to 3e-4 for 4,000, then 1e-4 for the last 6,000), then a Q
    # network beside it learns the policy's own action values by TD (values phase settings as measured in
    # experiments/results/values/); the policy network is frozen there, so every greedy move stays.
    "recipe": TrainConfig(
        net=NetConfig(hidden=128, lstm_layers=2, mlp_layers=2, counting=True, hint_facts=True,
                      discard_facts=True, policy_net=True),
        actor=ActorConfig(num_games=64, max_len=80),
        lr=1e-3,
        adam_eps=1e-8,
        batch_size=32,
        replay_capacity=4096,
        min_replay=512,
        target_sync=500,
        actor_sync=1,
        updates_per_round=8,
        phases=(
            Phase("imitate", updates=3000, dagger=0.5),
            Phase("imitate", updates=6000, dagger=0.5, bomb_weight=2.0),
            Phase("imitate", updates=4000, lr=3e-4, dagger=0.5, bomb_weight=2.0),
            Phase("imitate", updates=6000, lr=1e-4, dagger=0.5, bomb_weight=2.0),
            Phase("values", updates=1500, lr=3e-4, eps_base=0.3, n_step=80, fit_games=2048),
        ),
        eval_every=1000,
        eval_games=1000,
        checkpoint_minutes=5.0,
    ),
    # The recipe at the paper's size on one GPU. UNTUNED: the imitation settings are those measured on an
    # H200 (batch 256, chunks of 4,096 fresh games: 21.36 after 5 GPU minutes), the rest reasoned from the
    # CPU recipe; the length of every phase is a guess until its curve is recorded.
    "recipe-gpu": TrainConfig(
        net=NetConfig(counting=True, hint_facts=True, discard_facts=True),
        actor=ActorConfig(num_games=4096, max_len=80),
        lr=1e-3,
        batch_size=256,
        min_replay=4 * 4096,
        updates_per_round=64,
        precision="bf16-mixed",
        phases=(
            Phase("imitate", updates=3000, dagger=0.5, chunk=4096),
            Phase("imitate", updates=6000, dagger=0.5, bomb_weight=2.0, chunk=4096),
            Phase("imitate", updates=6000, lr=3e-4, dagger=0.5, bomb_weight=2.0, chunk=4096),
            Phase("values", updates=5000, lr=1e-4, eps_base=0.3, n_step=80, fit_games=8192, anchor_weight=5.0,
                  anchor_margin=0.2),
            Phase("improve", updates=100_000, lr=6.25e-5, anchor_weight=5.0, anchor_margin=0.2),
        ),
        eval_every=1000,
        eval_games=2000,
        value_games=1000,
    ),
    # The same recipe on a small game in a few CPU minutes (its end-to-end test runs a shortened copy).
    "recipe-small": replace(
        TINY,
        game=GameConfig(players=2, colors=2, ranks=3, hand_size=3),
        actor=ActorConfig(num_games=32, max_len=0),
        phases=(
            Phase("imitate", updates=300, dagger=0.5, chunk=128),
            Phase("values", updates=300, eps_base=0.3, n_step=40, fit_games=256, anchor_weight=5.0,
                  anchor_margin=0.2),
            Phase("improve", updates=300, lr=3e-4, anchor_weight=5.0, anchor_margin=0.2),
        ),
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
