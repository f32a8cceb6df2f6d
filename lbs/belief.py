"""Belief training (LBS paper, "Belief Learning"): a frozen blueprint plays, a learned belief fits its games.

Data: the blueprint (served by an InferenceServer) plays rounds of `games_per_round` lockstep games in
a producer thread; every (episode, player) pair becomes one stream (private observations [T, D] and
the player's true hand [T, H], -1 everywhere after the game ended) in a replay with uniform sampling.
The trainer (a Lightning module) draws batches of streams and minimises the negative log-likelihood
per card of the autoregressive BeliefModel. Because the blueprint is frozen the data distribution
never changes, so the replay is not checkpointed: a resumed run refills it with new games.

Checkpoints (kind "belief") are Lightning checkpoints written atomically by `ckpt.save` through a
CheckpointIO plugin, plus the belief config, game config, the blueprint's path and sha256, and the
producer's round counter. Resuming (`BeliefTrainer(cfg, blueprint, resume=path)`, or
`train/belief.py --resume path`) hands the file to Lightning's `fit(ckpt_path=...)`, which restores the
weights, the Adam state and the step counter (`global_step`); the producer continues with new deals
from the stored round counter. `load_belief` rebuilds the model alone for search.

Logged metrics:
  train/nll_per_card  teacher-forced NLL of the true hand, per held card, on the training batch
  train/acceptance    fraction of plain belief samples (acceptance_k per position, on acceptance_streams
                      streams of the batch) that pass the exact validity filter (hints and card counts)
  replay/size         streams in the replay;  replay/added: streams ever added
  replay/reuse        streams sampled / streams added (how often the learner sees each stream)
  data/rounds         self-play rounds played;  data/score: mean blueprint score of the latest round
  data/streams_per_s  producer throughput since the start of this process
  val/nll_per_card    every val_every steps, on held-out greedy games (also val/nll_grounded and
                      val/nll_counting); the best model so far is kept as out_dir/best.pt

Where we differ from the reference: all streams are whole games of at most max_len steps (no
sequence splitting); batches are sampled uniformly (the reference uses its prioritised replay with
uniform priorities, which is the same).
"""

from __future__ import annotations

import math
import os
import threading
import time
import warnings
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.fabric.plugins import CheckpointIO
from torch import nn
from torch.utils.data import DataLoader, IterableDataset

from . import ckpt
from .actors import ActorConfig, InitHidden, QFunction, run_round
from .belief_filter import HandConstraints, grounded_belief, hand_constraints, sample_valid
from .belief_model import BeliefConfig, BeliefModel, counting_log_prob
from .blueprint import KIND as BLUEPRINT_KIND
from .blueprint import TrainConfig, load_blueprint, resolve_device
from .cli import from_dict, to_dict
from .hanabi import engine
from .hanabi.config import GameConfig
from .hanabi.encode import encode, own_hand_facts, own_hands, public_features
from .infer import InferenceServer, ServerConfig
from .nets import env_moves, epsilon_greedy, legal_with_noop
from .r2d2 import apex_epsilons
from .replay import PrioritizedReplay, UniformSampler

KIND = "belief"
WANDB_MODES = ("offline", "online", "disabled")


@dataclass
class BeliefTrainConfig:
    """Everything a belief run depends on (the game comes from the blueprint); stored in every checkpoint."""

    model: BeliefConfig = field(default_factory=BeliefConfig)
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
    adam_eps: float = 1e-8
    grad_clip: float = 50.0
    total_steps: int = 200_000
    """optimizer steps of the whole run (a resumed run counts from its checkpoint)"""
    max_minutes: float = 0.0
    """also stop once the run has trained this long, resumed parts included (like total_steps; 0: no
    limit); the checkpoint is written"""
    data_ratio: float = 0.0
    """once learning runs, the producer adds at most this many streams per stream sampled (0: no limit;
    on a CPU the producer otherwise takes most of the compute from the learner)"""
    explore: bool = True
    """blueprint acts with its training Ape-X epsilons (the reference's choice); False: greedy"""
    seed: int = 0
    device: str = "auto"
    precision: str = "32-true"
    """Lightning precision of the learner ("bf16-mixed" on recent GPUs)"""
    out_dir: str = "runs/belief"
    wandb_mode: str = "offline"
    """offline (default), online or disabled; the WANDB_MODE environment variable wins"""
    wandb_project: str = "lbs-belief"
    checkpoint_every: int = 2000
    """steps between writes of out_dir/latest.pt (also written at the end)"""
    log_every: int = 50
    """steps between logged metrics (acceptance and data counters are measured then)"""
    acceptance_streams: int = 4
    acceptance_k: int = 16
    eval_games: int = 1000
    """held-out greedy blueprint games for the final NLL (0: skip)"""
    eval_seed: int = 0
    val_every: int = 2000
    """steps between validations on val_games greedy games dealt with eval_seed + 1 (never a training
    or final-evaluation deal); the best model so far is written to out_dir/best.pt (0: no validation)"""
    val_games: int = 500

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
        if self.max_len < 0 or self.eval_games < 0:
            raise ValueError(f"BeliefTrainConfig: max_len={self.max_len} and eval_games={self.eval_games} "
                             "must be >= 0")
        if self.min_replay > self.replay_capacity:
            raise ValueError(f"BeliefTrainConfig.min_replay={self.min_replay} exceeds replay_capacity="
                             f"{self.replay_capacity}: learning would never start")
        if not (self.lr > 0 and self.adam_eps > 0 and self.grad_clip > 0):
            raise ValueError("BeliefTrainConfig: lr, adam_eps and grad_clip must be > 0")
        if self.data_ratio < 0 or self.max_minutes < 0:
            raise ValueError(f"BeliefTrainConfig: data_ratio={self.data_ratio} and max_minutes="
                             f"{self.max_minutes} must be >= 0")
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
}


def apply_preset(name: str) -> BeliefTrainConfig:
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose from {sorted(PRESETS)}")
    return replace(PRESETS[name])


# ---- streams ---------------------------------------------------------------------------------------
def stream_spec(game: GameConfig, max_len: int) -> dict[str, tuple]:
    """Replay fields of one (episode, player) stream: observations as bytes, floats when sampled."""
    return {
        "priv": ((max_len, game.private_dim), torch.uint8, torch.float32),
        "hand": ((max_len, game.hand_size), torch.int8, torch.long),
    }


def episodes_to_streams(episodes: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """run_round's [N, T, P, ...] episodes -> [N*P, T, ...] streams (row n*P + p); hands -1 after the end."""
    priv, hand, mask = episodes["priv"], episodes["own_hand"], episodes["mask"]
    n, t, p = mask.shape[0], mask.shape[1], priv.shape[2]
    hand = torch.where(mask[:, :, None, None], hand, torch.full_like(hand, -1))
    return {
        "priv": priv.transpose(1, 2).reshape(n * p, t, -1),
        "hand": hand.transpose(1, 2).reshape(n * p, t, -1),
    }


def constraints_from_obs(game: GameConfig, obs: torch.Tensor) -> HandConstraints:
    """What a player's own canonical observation [Q, D] says about their hand (= hand_constraints);
    the hand length is the number of slots with any plausible card."""
    if obs.dim() != 2 or obs.shape[1] != game.obs_dim:
        raise ValueError(f"obs must be [Q, obs_dim={game.obs_dim}], got {tuple(obs.shape)}")
    unseen, plaus = own_hand_facts(game, obs)
    plaus = plaus.reshape(*plaus.shape[:-1], game.colors, game.ranks)
    return HandConstraints(
        unseen=unseen,
        color_plausible=plaus.any(-1),
        rank_plausible=plaus.any(-2),
        hand_len=plaus.flatten(-2).any(-1).sum(-1),
    )


@torch.no_grad()
def sample_acceptance(model: BeliefModel, priv: torch.Tensor, hands: torch.Tensor, k: int,
                      seed: int | torch.Tensor) -> torch.Tensor:
    """Fraction [] of k plain belief samples per position (streams [S, T]) that could be the true hand,
    over positions where the player holds cards. No host sync."""
    s, t, _ = priv.shape
    context, _ = model.encode(priv)
    cons = constraints_from_obs(model.game, priv.reshape(s * t, -1))
    seeds = torch.as_tensor(seed, device=priv.device) * (s * t) + torch.arange(s * t, device=priv.device)
    out = sample_valid(model, context.reshape(s * t, -1), k, seeds, cons)
    has = (hands.reshape(s * t, -1) >= 0).any(-1)
    return (out.num_valid * has).sum() / (k * has.sum()).clamp(min=1)


# ---- data producer ---------------------------------------------------------------------------------
class BeliefData:
    """A frozen blueprint's self-play feeding a replay of streams; a thread keeps adding rounds.

    add/sample hold one lock. sample() blocks until min_replay streams are in, re-raises a producer
    failure, and returns None once close() was called. Round r plays seeds seed*10**7 + i, episode r.
    """

    def __init__(self, cfg: BeliefTrainConfig, game: GameConfig, blueprint: nn.Module, actor: ActorConfig,
                 device: torch.device | str = "cpu", start_round: int = 0):
        self.cfg, self.game, self.device = cfg, game, torch.device(device)
        self.max_len = cfg.max_len or game.max_steps
        # the belief is queried in the true colour frame, so no other-play colour shuffling here
        self.actor = replace(actor, num_games=cfg.games_per_round, max_len=self.max_len, shuffle_colors=False)
        self.eps = (apex_epsilons(cfg.games_per_round, actor.eps_base, actor.eps_alpha, self.device)
                    if cfg.explore else None)
        # one caller (the producer thread): run in its thread, no coalescing worker to hand off to
        self.server = InferenceServer(blueprint, device=self.device, cfg=ServerConfig(coalesce=False))
        cap = cfg.replay_capacity
        self.replay = PrioritizedReplay(cap, stream_spec(game, self.max_len), device=self.device,
                                        seed=cfg.seed, sampler=UniformSampler(cap, self.device))
        self.rounds = start_round
        self.last_score = math.nan
        self.error: BaseException | None = None
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started_at = time.time()
        self._added_here = 0

    def play_round(self, r: int) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """Streams of round r and its scores [N] (no lock: only reads the frozen blueprint)."""
        n = self.cfg.games_per_round
        seeds = self.cfg.seed * 10**7 + torch.arange(n, device=self.device)
        with torch.no_grad():
            episodes, stats = run_round(self.game, self.server.step, self.server.initial_state, seeds, r,
                                        self.actor, eps=self.eps)
        return episodes_to_streams(episodes), stats["score"]

    def add_round(self) -> None:
        with self._cond:
            r = self.rounds
            self.rounds += 1
        streams, score = self.play_round(r)
        num = streams["priv"].shape[0]
        with self._cond:
            self.replay.add(streams, torch.ones(num, device=self.device))
            self.last_score = float(score.float().mean())
            self._added_here += num
            self._cond.notify_all()

    def start(self) -> None:
        """Start the producer thread (once)."""
        with self._cond:
            if self._thread is not None:
                return
            self._started_at = time.time()
            self._thread = threading.Thread(target=self._loop, name="lbs-belief-data", daemon=True)
            self._thread.start()

    def _behind(self) -> bool:
        """The producer may add a round: the replay is filling, or data_ratio allows more streams."""
        ratio = self.cfg.data_ratio
        return (ratio == 0 or len(self.replay) < self.cfg.min_replay
                or self.replay.num_added < self.cfg.min_replay + ratio * self.replay.num_sampled)

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                with self._cond:
                    self._cond.wait_for(lambda: self._stop.is_set() or self._behind())
                if self._stop.is_set():
                    break
                self.add_round()
        except BaseException as e:  # surfaced to the learner by sample()
            with self._cond:
                self.error = e
                self._cond.notify_all()

    def sample(self, batch_size: int) -> dict[str, torch.Tensor] | None:
        with self._cond:
            self._cond.wait_for(lambda: self.error is not None or self._stop.is_set()
                                or len(self.replay) >= self.cfg.min_replay)
            if self.error is not None:
                raise RuntimeError(f"the belief data producer failed: {self.error!r}") from self.error
            if self._stop.is_set():
                return None
            batch, _, _ = self.replay.sample(batch_size)
            self._cond.notify_all()  # a throttled producer may go on
            return batch

    def stats(self) -> dict[str, float]:
        with self._cond:
            added, sampled = self.replay.num_added, self.replay.num_sampled
            return {
                "replay/size": float(len(self.replay)),
                "replay/added": float(added),
                "replay/reuse": sampled / max(added, 1),
                "data/rounds": float(self.rounds),
                "data/score": self.last_score,
                "data/streams_per_s": self._added_here / max(time.time() - self._started_at, 1e-9),
            }

    def close(self) -> None:
        """Stop the producer after its current round and release the inference server."""
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()
        self.server.close()


class ReplayBatches(IterableDataset):
    """Endless batches of streams from BeliefData (starts the producer on first use)."""

    def __init__(self, data: BeliefData, batch_size: int):
        self.data, self.batch_size = data, batch_size

    def __iter__(self):
        self.data.start()
        while (batch := self.data.sample(self.batch_size)) is not None:
            yield batch


# ---- Lightning module and checkpoints ---------------------------------------------------------------
class BeliefModule(pl.LightningModule):
    """BeliefModel trained on NLL per card; carries what a belief checkpoint must record."""

    def __init__(self, cfg: BeliefTrainConfig, game: GameConfig, data: BeliefData | None = None,
                 blueprint: dict[str, str] | None = None):
        super().__init__()
        self.cfg, self.game, self.data = cfg, game, data
        self.blueprint = dict(blueprint or {})
        self.model = BeliefModel(game, cfg.model)
        self.best_val, self.best_step = math.inf, -1  # lowest validation NLL per card so far, and when

    def configure_optimizers(self):
        return torch.optim.Adam(self.model.parameters(), lr=self.cfg.lr, eps=self.cfg.adam_eps)

    def train_dataloader(self) -> DataLoader:
        if self.data is None:
            raise RuntimeError("BeliefModule needs BeliefData to train")
        return DataLoader(ReplayBatches(self.data, self.cfg.batch_size), batch_size=None, num_workers=0)

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        out = self.model.log_prob(batch["priv"], batch["hand"])
        self.log("train/nll_per_card", out.nll_per_card, prog_bar=True)
        if self.global_step % self.cfg.log_every == 0:
            s = self.cfg.acceptance_streams
            acc = sample_acceptance(self.model, batch["priv"][:s], batch["hand"][:s], self.cfg.acceptance_k,
                                    self.global_step)
            self.log("train/acceptance", acc, prog_bar=True)
            if self.data is not None:
                self.log_dict(self.data.stats())
        return out.nll_per_card

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["config"] = to_dict(self.cfg)
        checkpoint["game"] = self.game.to_dict()
        checkpoint["blueprint"] = dict(self.blueprint)
        checkpoint["step"] = self.global_step
        checkpoint["data"] = {"rounds": self.data.rounds if self.data is not None else 0}
        checkpoint["validation"] = {"best_nll": self.best_val, "best_step": self.best_step}

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        if self.data is not None:
            self.data.rounds = int(checkpoint["data"]["rounds"])
        val = checkpoint.get("validation", {})
        self.best_val, self.best_step = float(val.get("best_nll", math.inf)), int(val.get("best_step", -1))


class BeliefCheckpointIO(CheckpointIO):
    """Lightning checkpoints as atomic lbs checkpoints of kind "belief", checked on load."""

    def __init__(self, game: GameConfig, blueprint_sha256: str | None):
        self.game, self.sha256 = game, blueprint_sha256

    def save_checkpoint(self, checkpoint: dict, path, storage_options=None) -> None:
        ckpt.save(path, KIND, checkpoint)

    def load_checkpoint(self, path, map_location=None, weights_only=None) -> dict:
        blob = ckpt.load(path, KIND, game=self.game.to_dict(), map_location=map_location or "cpu")
        _check_blueprint(blob, path, self.sha256)
        return blob

    def remove_checkpoint(self, path) -> None:
        Path(path).unlink(missing_ok=True)


def _check_blueprint(blob: dict, path: str | Path, sha256: str | None, blueprint: str | Path = "") -> None:
    """A belief is only valid for the exact blueprint whose games it learned from."""
    stored = blob.get("blueprint", {})
    if sha256 is not None and stored.get("sha256") != sha256:
        given = f" ({blueprint})" if blueprint else ""
        want = str(stored.get("sha256"))[:16]
        raise ckpt.CheckpointError(
            f"{path} was trained for blueprint {stored.get('path')!r} (sha256 {want}...), but the blueprint "
            f"given{given} has sha256 {sha256[:16]}...: a different blueprint file"
        )


class _PeriodicCheckpoint(pl.Callback):
    """Write out_dir/latest.pt every `every` steps, at the last step, and when training stops early."""

    def __init__(self, path: Path, every: int):
        self.path, self.every, self.saved_step = path, every, -1

    def _save(self, trainer) -> None:
        if trainer.global_step != self.saved_step:
            trainer.save_checkpoint(self.path, weights_only=False)
            self.saved_step = trainer.global_step

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step % self.every == 0 or trainer.global_step >= trainer.max_steps:
            self._save(trainer)

    def on_train_end(self, trainer, pl_module) -> None:
        self._save(trainer)

    def on_exception(self, trainer, pl_module, exception) -> None:
        if isinstance(exception, KeyboardInterrupt):
            self._save(trainer)


class _Validation(pl.Callback):
    """Every `every` steps: score the model on held-out games, log val/*, and write `path` (best.pt)
    when the NLL per card is the lowest so far. Longer training can overfit a small replay."""

    def __init__(self, score, path: Path, every: int):
        self.score, self.path, self.every = score, path, every

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step % self.every:
            return
        ev = self.score(pl_module.model)
        pl_module.log_dict({"val/nll_per_card": ev.nll_learned, "val/nll_grounded": ev.nll_grounded,
                            "val/nll_counting": ev.nll_counting})
        if ev.nll_learned < pl_module.best_val:
            pl_module.best_val, pl_module.best_step = ev.nll_learned, trainer.global_step
            trainer.save_checkpoint(self.path, weights_only=False)


# ---- loading ---------------------------------------------------------------------------------------
def load_belief(path: str | Path, blueprint_path: str | Path | None = None, game: GameConfig | None = None,
                device: torch.device | str = "cpu") -> tuple[GameConfig, BeliefModel]:
    """(GameConfig, BeliefModel in eval mode) from a belief checkpoint.

    With blueprint_path, that file's sha256 must be the one the belief was trained for; with game, the
    stored game config must equal it. Either mismatch raises ckpt.CheckpointError.
    """
    blob = ckpt.load(path, KIND, game=game.to_dict() if game else None, map_location=device)
    if blueprint_path is not None:
        bp = Path(blueprint_path)
        if not bp.is_file():
            raise ckpt.CheckpointError(f"blueprint checkpoint not found: {bp}")
        _check_blueprint(blob, path, ckpt.file_hash(bp), bp)
    cfg = from_dict(BeliefTrainConfig, blob["config"])
    stored_game = GameConfig.from_dict(blob["game"])
    model = BeliefModel(stored_game, cfg.model).to(device)
    weights = {k.removeprefix("model."): v for k, v in blob["state_dict"].items() if k.startswith("model.")}
    model.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in weights.items()})
    model.eval()
    return stored_game, model


# ---- evaluation: cross-entropy of the true hand per turn -----------------------------------------------
@dataclass
class BeliefEval:
    """Per-card cross-entropy (nats) of the true hand under the learned and the grounded belief.

    Every player's own hand at every turn of every game counts (weighted by cards held). by_turn lists
    are indexed by turn; turns where no game is running have 0 cards and NaN entropies.
    """

    games: int
    nll_learned: float
    nll_grounded: float
    cards_by_turn: list[int]
    learned_by_turn: list[float]
    grounded_by_turn: list[float]
    acceptance_by_turn: list[float] | None = None  # plain samples passing the filter (if measured)
    nll_counting: float = math.nan  # the counting prior alone (slot by slot, no network)
    counting_by_turn: list[float] | None = None

    def __str__(self) -> str:
        return (f"NLL per card over {self.games} games: learned {self.nll_learned:.4f}, "
                f"grounded {self.nll_grounded:.4f}, counting {self.nll_counting:.4f}")

    def to_dict(self) -> dict:
        return asdict(self)


@torch.no_grad()
def _round_cross_entropy(game: GameConfig, model: BeliefModel, q_fn: QFunction, init_hidden: InitHidden,
                         seeds: torch.Tensor, episode: int, max_len: int, eps: torch.Tensor | None,
                         acceptance_k: int) -> torch.Tensor:
    """Sums per turn [6, T] (learned NLL, grounded NLL, cards, valid samples, samples, counting-prior NLL)
    over N games."""
    n, p, dev = seeds.shape[0], game.players, seeds.device
    state = engine.reset(game, seeds, torch.full_like(seeds, episode))
    hid, bhid = init_hidden(n * p), model.initial_state(n * p, dev)
    sums = torch.zeros(6, max_len, dtype=torch.float64, device=dev)
    seat = torch.arange(p, device=dev).repeat(n)
    keys = (seeds.repeat_interleave(p) * 8 + seat, torch.full((n * p,), episode, device=dev))
    eps_rows = torch.zeros(n * p, device=dev) if eps is None else eps.to(dev).repeat_interleave(p)
    for t in range(max_len):
        active = ~state.done
        priv = encode(game, state, dtype=torch.uint8).reshape(n * p, -1).float()  # [N*P, D]
        legal = legal_with_noop(game, state).reshape(n * p, -1)
        q, hid = q_fn(priv, public_features(game, priv), legal, hid)
        own = own_hands(game, state)  # [N, P, H]
        held = (own >= 0) & active[:, None, None]
        context, bhid = model.encode(priv[:, None], bhid)
        context = context[:, 0]  # [N*P, E]
        learned = model.hand_log_prob(context, own.reshape(n * p, -1)).reshape(n, p, -1).double()
        ground = torch.stack([grounded_belief(game, state, s, dtype=torch.float64) for s in range(p)], 1)
        g = ground.gather(-1, own.clamp(min=0)[..., None]).squeeze(-1)  # [N, P, H]
        sums[0, t] = -torch.where(held, learned, 0.0).sum()
        sums[1, t] = -torch.where(held, g.clamp(min=1e-300).log(), 0.0).sum()
        sums[2, t] = held.sum()
        unseen, plaus = own_hand_facts(game, priv)
        counting = counting_log_prob(unseen, plaus, own.reshape(n * p, -1)).reshape(n, p, -1)
        sums[5, t] = -torch.where(held, counting, 0.0).sum()
        if acceptance_k:
            has = held.any(-1)  # [N, P]
            for s in range(p):
                cons = hand_constraints(game, state, s)
                seeds_s = (seeds * p + s) * max_len + t
                out = sample_valid(model, context.reshape(n, p, -1)[:, s], acceptance_k, seeds_s, cons)
                sums[3, t] += (out.num_valid * has[:, s]).sum()
                sums[4, t] += acceptance_k * has[:, s].sum()
        step_keys = (*keys, torch.full((n * p,), t, device=dev))
        act = epsilon_greedy(q, legal, eps_rows, step_keys)
        state, _, _ = engine.step(game, state, env_moves(game, state, act.reshape(n, p)))
    return sums


def evaluate_belief(game: GameConfig, model: BeliefModel, q_fn: QFunction, init_hidden: InitHidden,
                    games: int = 1000, seed: int = 0, batch: int = 500, max_len: int | None = None,
                    eps: float = 0.0, acceptance_k: int = 0, device: torch.device | str = "cpu"
                    ) -> BeliefEval:
    """Play `games` blueprint games (greedy unless eps > 0; seeds i, episode -1-seed, never a training deal)
    and score the learned belief (fed turn by turn) and the grounded belief on every player's true hand.
    acceptance_k > 0 also samples that many hands per player and turn and reports the fraction valid."""
    if games < 1 or batch < 1:
        raise ValueError(f"games={games} and batch={batch} must be >= 1")
    max_len = max_len or game.max_steps
    was_training = model.training
    model.eval()
    total = torch.zeros(6, max_len, dtype=torch.float64, device=device)
    for start in range(0, games, batch):
        seeds = torch.arange(start, min(games, start + batch), device=device)
        e = torch.full(seeds.shape, eps, device=device) if eps > 0 else None
        total += _round_cross_entropy(game, model, q_fn, init_hidden, seeds, -1 - seed, max_len, e,
                                      acceptance_k)
    model.train(was_training)
    total = total.cpu()
    cards = total[2]
    nan = torch.tensor(math.nan, dtype=torch.float64)

    def per_card(x: torch.Tensor, n: torch.Tensor) -> list[float]:
        return torch.where(n > 0, x / n.clamp(min=1), nan).tolist()

    return BeliefEval(
        games=games,
        nll_learned=float(total[0].sum() / cards.sum()),
        nll_grounded=float(total[1].sum() / cards.sum()),
        cards_by_turn=[int(c) for c in cards.tolist()],
        learned_by_turn=per_card(total[0], cards),
        grounded_by_turn=per_card(total[1], cards),
        acceptance_by_turn=per_card(total[3], total[4]) if acceptance_k else None,
        nll_counting=float(total[5].sum() / cards.sum().clamp(min=1)),
        counting_by_turn=per_card(total[5], cards),
    )


# ---- the run ---------------------------------------------------------------------------------------
@dataclass
class BeliefRunResult:
    step: int
    train_nll_per_card: float  # last logged training-batch value
    eval: BeliefEval | None  # held-out games (None when eval_games = 0)
    checkpoint: Path
    best: Path | None = None  # best.pt, the lowest validation NLL (None without validation)
    best_step: int = -1
    best_val_nll: float = math.nan

    def __str__(self) -> str:
        held = f"; held-out {self.eval}" if self.eval is not None else ""
        if self.best is not None:
            held += f"; best validation NLL {self.best_val_nll:.4f} at step {self.best_step} ({self.best})"
        train = (f"train NLL per card {self.train_nll_per_card:.4f}" if math.isfinite(self.train_nll_per_card)
                 else "no training step in this session")
        return f"step {self.step}: {train}{held}"


class BeliefTrainer:
    """One belief run for one blueprint checkpoint: data producer, Lightning trainer, checkpoints, logs."""

    def __init__(self, cfg: BeliefTrainConfig, blueprint: str | Path, resume: str | Path | None = None,
                 progress: bool = True):
        self.cfg, self.progress = cfg, progress
        self.device = resolve_device(cfg.device)
        self.blueprint_path = Path(blueprint)
        if not self.blueprint_path.is_file():
            raise ckpt.CheckpointError(f"blueprint checkpoint not found: {blueprint}")
        self.game, self.net = load_blueprint(self.blueprint_path, device=self.device)
        bp_cfg = from_dict(TrainConfig, ckpt.load(self.blueprint_path, BLUEPRINT_KIND)["config"])
        sha = ckpt.file_hash(self.blueprint_path)
        self.resume = Path(resume) if resume else None
        start_round = 0
        if self.resume is not None:
            blob = ckpt.load(self.resume, KIND, game=self.game.to_dict())
            _check_blueprint(blob, self.resume, sha, self.blueprint_path)
            stored = from_dict(BeliefTrainConfig, blob["config"])
            if stored.model != cfg.model:
                raise ckpt.CheckpointError(f"{self.resume} was trained with model {stored.model}, "
                                           f"this run uses {cfg.model}")
            start_round = int(blob["data"]["rounds"])
        pl.seed_everything(cfg.seed, verbose=False)
        self.data = BeliefData(cfg, self.game, self.net, bp_cfg.actor, self.device, start_round)
        self.module = BeliefModule(cfg, self.game, self.data,
                                   {"path": str(self.blueprint_path.resolve()), "sha256": sha})
        self.out = Path(cfg.out_dir)
        self._io = BeliefCheckpointIO(self.game, sha)

    def _trainer(self) -> pl.Trainer:
        from lightning.pytorch.callbacks import TQDMProgressBar
        from lightning.pytorch.loggers import WandbLogger

        cfg = self.cfg
        self.out.mkdir(parents=True, exist_ok=True)
        logger = WandbLogger(project=cfg.wandb_project, save_dir=str(self.out), name=self.out.name,
                             mode=os.environ.get("WANDB_MODE", cfg.wandb_mode))  # the environment wins
        logger.log_hyperparams({**to_dict(cfg), "game": self.game.to_dict(),
                                "blueprint": self.module.blueprint})
        callbacks: list = []
        if cfg.val_every:  # before latest.pt is written, so latest.pt knows the best of its own step
            callbacks.append(_Validation(self.validate, self.out / "best.pt", cfg.val_every))
        callbacks.append(_PeriodicCheckpoint(self.out / "latest.pt", cfg.checkpoint_every))
        if self.progress:
            callbacks.append(TQDMProgressBar(refresh_rate=max(1, min(cfg.log_every, 10))))
        max_time = {"minutes": cfg.max_minutes} if cfg.max_minutes else None
        return pl.Trainer(
            accelerator="gpu" if self.device.type == "cuda" else "cpu", devices=1, max_steps=cfg.total_steps,
            max_epochs=-1, max_time=max_time, precision=cfg.precision, logger=logger, callbacks=callbacks,
            plugins=[self._io], enable_progress_bar=self.progress,
            enable_checkpointing=False, enable_model_summary=False, gradient_clip_val=cfg.grad_clip,
            log_every_n_steps=cfg.log_every, num_sanity_val_steps=0, default_root_dir=str(self.out),
            use_distributed_sampler=False,
        )

    def validate(self, model: BeliefModel) -> BeliefEval:
        """NLL on val_games greedy games dealt with eval_seed + 1 (disjoint from the final evaluation)."""
        cfg, dev = self.cfg, self.device
        return evaluate_belief(self.game, model, self.net.step, lambda b: self.net.initial_state(b, dev),
                               cfg.val_games, cfg.eval_seed + 1, batch=min(cfg.val_games, 500),
                               max_len=self.data.max_len, device=dev)

    def run(self) -> BeliefRunResult:
        """Train to total_steps (continuing from `resume`), write latest.pt, evaluate on held-out games."""
        with warnings.catch_warnings():
            for msg in (".*does not have many workers.*", ".*resuming from a checkpoint that ended before.*",
                        ".*could not determine the length.*"):
                warnings.filterwarnings("ignore", message=msg)
            trainer = self._trainer()
            try:
                trainer.fit(self.module, ckpt_path=str(self.resume) if self.resume else None)
            finally:
                self.data.close()
                import wandb

                wandb.finish()
        nll = trainer.callback_metrics.get("train/nll_per_card")
        result = None
        if self.cfg.eval_games:
            result = evaluate_belief(self.game, self.module.model.to(self.device), self.net.step,
                                     lambda b: self.net.initial_state(b, self.device), self.cfg.eval_games,
                                     self.cfg.eval_seed, batch=min(self.cfg.eval_games, 500),
                                     max_len=self.data.max_len, device=self.device)
        best = self.out / "best.pt"
        m = self.module
        return BeliefRunResult(step=trainer.global_step, train_nll_per_card=float(nll) if nll is not None
                               else math.nan, eval=result, checkpoint=self.out / "latest.pt",
                               best=best if m.best_step >= 0 and best.is_file() else None,
                               best_step=m.best_step, best_val_nll=m.best_val)

