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
from the stored round counter. `lbs.models.load_belief` rebuilds the model alone for search.

Logged metrics:
  train/nll_per_card  teacher-forced NLL of the true hand, per held card, on the training batch
  train/loss          with acted_weight != 1: the loss trained on, the played or discarded cards weighed
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
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.fabric.plugins import CheckpointIO
from torch.utils.data import DataLoader

from .. import ckpt
from ..configs import from_dict, to_dict
from ..hanabi.config import GameConfig
from ..models.belief import BeliefModel
from ..models.io import BELIEF_KIND as KIND
from ..models.io import (
    BLUEPRINT_KIND,
    blueprint_identity,
    check_blueprint_hash,
    is_rule_bot,
    load_belief,
    load_blueprint,
    resolve_device,
)
from ..rl.actors import ActorConfig
from ..runs import Lifecycle, stop_reason
from ..seeding import Stream
from .config import BeliefTrainConfig
from .data import BeliefData, ReplayBatches
from .evaluate import BeliefEval, evaluate_belief, sample_acceptance


# ---- Lightning module and checkpoints ---------------------------------------------------------------
def acted_weighted_nll(slot_log_prob: torch.Tensor, hands: torch.Tensor, acted: torch.Tensor,
                       weight: float) -> torch.Tensor:
    """Weighted mean NLL per held card: slot_log_prob [B, T, H], hands [B, T, H] (-1 empty), acted [B, T]
    (the slot played or discarded, -1 none) weighs `weight`, every other held card 1."""
    slots = torch.arange(hands.shape[-1], device=hands.device)
    w = torch.where(slots == acted[..., None], weight, 1.0) * (hands >= 0)
    return -(slot_log_prob * w).sum() / w.sum().clamp(min=1)


class BeliefModule(pl.LightningModule):
    """BeliefModel trained on NLL per card; carries what a belief checkpoint must record."""

    def __init__(self, cfg: BeliefTrainConfig, game: GameConfig, data: BeliefData | None = None,
                 blueprint: dict[str, str] | None = None, network: torch.nn.Module | None = None):
        """network: the blueprint's greedy-move network, which the encoder reads with
        cfg.model.blueprint_features."""
        super().__init__()
        self.cfg, self.game, self.data = cfg, game, data
        self.blueprint = dict(blueprint or {})
        self.conventions = ""  # the rule bot whose conventions the blueprint learnt (BeliefTrainer sets it)
        self.init_sha256: str | None = None  # the --init file's sha256 (BeliefTrainer sets it)
        self.model = BeliefModel(game, cfg.model, network if cfg.model.blueprint_features else None)
        self.best_val, self.best_step = math.inf, -1  # lowest validation NLL per card so far, and when
        self.life: Lifecycle | None = None  # the run's folder: best.pt is read on resume (it can be newer)

    def on_train_start(self) -> None:
        """A resumed optimizer would keep the checkpoint's lr and eps; this run's config wins."""
        for opt in self.trainer.optimizers:
            for group in opt.param_groups:
                group["lr"], group["eps"] = self.cfg.lr, self.cfg.adam_eps

    def configure_optimizers(self):
        return torch.optim.Adam(self.model.parameters(), lr=self.cfg.lr, eps=self.cfg.adam_eps)

    def train_dataloader(self) -> DataLoader:
        if self.data is None:
            raise RuntimeError("BeliefModule needs BeliefData to train")
        return DataLoader(ReplayBatches(self.data, self.cfg.batch_size), batch_size=None, num_workers=0)

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        out = self.model.log_prob(batch["priv"], batch["hand"])
        self.log("train/nll_per_card", out.nll_per_card, prog_bar=True)
        loss = out.nll_per_card
        if self.cfg.acted_weight != 1.0:
            loss = acted_weighted_nll(out.slot_log_prob, batch["hand"], batch["acted"], self.cfg.acted_weight)
            self.log("train/loss", loss)
        if self.global_step % self.cfg.log_every == 0:
            s = self.cfg.acceptance_streams
            acc = sample_acceptance(self.model, batch["priv"][:s], batch["hand"][:s], self.cfg.acceptance_k,
                                    self.global_step)
            self.log("train/acceptance", acc, prog_bar=True)
            if self.data is not None:
                self.log_dict(self.data.stats())
        return loss

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["config"] = to_dict(self.cfg)
        checkpoint["game"] = self.game.to_dict()
        checkpoint["blueprint"] = dict(self.blueprint)
        checkpoint["conventions"] = self.conventions
        checkpoint["init_sha256"] = self.init_sha256  # the warm start's file: --init may be replaced later
        if self.model.blueprint is not None:  # its shape: load_belief rebuilds it (weights: state_dict)
            checkpoint["blueprint_net"] = to_dict(self.model.blueprint.cfg)
        checkpoint["step"] = self.global_step
        checkpoint["data"] = {"rounds": self.data.rounds if self.data is not None else 0}
        checkpoint["validation"] = {"best_nll": self.best_val, "best_step": self.best_step}
        checkpoint["wandb_id"] = getattr(self, "wandb_id", None)

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        if self.data is not None:
            self.data.rounds = int(checkpoint["data"]["rounds"])
        best = _best_validation(checkpoint)
        if self.life is not None:  # best.pt can be newer than latest.pt: the lower NLL of the two wins
            best = self.life.best_so_far(best, _best_validation, lambda a, b: a[0] < b[0],
                                         game=self.game.to_dict())
        self.best_val, self.best_step = best


def _best_validation(checkpoint: dict) -> tuple[float, int]:
    """(lowest validation NLL per card, its step) that a belief checkpoint records."""
    val = checkpoint.get("validation", {})
    return float(val.get("best_nll", math.inf)), int(val.get("best_step", -1))


class BeliefCheckpointIO(CheckpointIO):
    """Lightning checkpoints as atomic lbs checkpoints of kind "belief", checked on load."""

    def __init__(self, game: GameConfig, blueprint_sha256: str | None):
        self.game, self.sha256 = game, blueprint_sha256

    def save_checkpoint(self, checkpoint: dict, path, storage_options=None) -> None:
        ckpt.save(path, KIND, checkpoint)

    def load_checkpoint(self, path, map_location=None, weights_only=None) -> dict:
        blob = ckpt.load(path, KIND, game=self.game.to_dict(), map_location=map_location or "cpu")
        check_blueprint_hash(blob, path, self.sha256)
        return blob

    def remove_checkpoint(self, path) -> None:
        Path(path).unlink(missing_ok=True)


class _PeriodicCheckpoint(pl.Callback):
    """Write out_dir/latest.pt every `every` steps, at the last step, and whenever training stops early:
    a signal (Ctrl-C, SIGTERM: Lightning's own exception), the time limit or an error."""

    def __init__(self, path: Path, every: int):
        self.path, self.every, self.saved_step = path, every, -1
        self.exception: BaseException | None = None
        self.failed: ckpt.SaveError | None = None  # the last failed write (disk full): latest.pt is older

    def _save(self, trainer) -> None:
        if trainer.global_step != self.saved_step:
            try:
                trainer.save_checkpoint(self.path, weights_only=False)
            except ckpt.SaveError as e:
                self.failed = e
                raise
            self.saved_step, self.failed = trainer.global_step, None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step % self.every == 0 or trainer.global_step >= trainer.max_steps:
            self._save(trainer)

    def on_train_end(self, trainer, pl_module) -> None:
        self._save(trainer)

    def on_exception(self, trainer, pl_module, exception) -> None:
        self.exception = exception
        try:
            self._save(trainer)
        except ckpt.SaveError:  # kept in self.failed; the run's closing line says it
            pass


class _Validation(pl.Callback):
    """Every `every` steps: score the model on held-out games, log val/*, and write `path` (best.pt)
    when the NLL per card is the lowest so far (through the run's Lifecycle: a stop during the write takes
    effect once best.pt is complete). Longer training can overfit a small replay."""

    def __init__(self, score, path: Path, every: int, life: Lifecycle):
        self.score, self.path, self.every, self.life = score, path, every, life

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step % self.every:
            return
        ev = self.score(pl_module.model)
        if trainer.logger is not None:  # once per validation, at its step (self.log would repeat it)
            val = {"val/nll_per_card": ev.nll_learned, "val/nll_counting": ev.nll_counting,
                   "val/nll_grounded": ev.nll_grounded}
            trainer.logger.log_metrics(val, step=trainer.global_step)
        if ev.nll_learned < pl_module.best_val:
            before = pl_module.best_val, pl_module.best_step
            pl_module.best_val, pl_module.best_step = ev.nll_learned, trainer.global_step

            def undo() -> None:  # a failed write: the best is best.pt's, as before
                pl_module.best_val, pl_module.best_step = before

            what = f"validation NLL per card {ev.nll_learned:.4f} at step {trainer.global_step}"
            self.life.write_best(lambda: trainer.save_checkpoint(self.path, weights_only=False), undo, what)


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


def conventions_of(setting: str, blueprint: str | Path) -> str:
    """The conventions a belief names (BeliefTrainConfig.conventions): "auto" reads the blueprint's own recipe
    (the demonstrator of its imitation phases; none for a rule bot, whose knowledge search already has)."""
    if setting != "auto":
        return setting
    if is_rule_bot(blueprint):
        return ""
    phases = ckpt.load(blueprint, BLUEPRINT_KIND, map_location="cpu")["config"].get("phases", ())
    return next((p["demonstrator"] for p in phases if p.get("kind") == "imitate"), "")


class BeliefTrainer:
    """One belief run for one blueprint checkpoint: data producer, Lightning trainer, checkpoints, logs."""

    def __init__(self, cfg: BeliefTrainConfig, blueprint: str | Path, resume: str | Path | None = None,
                 progress: bool = True, overwrite: bool = False):
        self.cfg, self.progress = cfg, progress
        self.out = Path(cfg.out_dir)
        self.device = resolve_device(cfg.device)
        if cfg.cuda_graphs and self.device.type != "cuda":  # it would be ignored without a word
            raise ValueError(f"--cuda_graphs needs a CUDA device (the run is on {self.device.type})")
        sha = blueprint_identity(blueprint)  # a rule bot ("smartbot") needs no file
        self.blueprint_path = Path(blueprint)
        self.game, net = load_blueprint(blueprint, device=self.device, players=cfg.players or None)
        if cfg.model.blueprint_features and is_rule_bot(blueprint):
            raise ValueError(f"--model.blueprint_features reads a blueprint network's scores; the rule bot "
                             f"{blueprint} has none")
        self.life = Lifecycle(KIND, self.out, "step")  # the folder claimed once the blueprint loads
        self.life.check_folder(resuming=resume or False, overwrite=overwrite)
        bp_actor = ActorConfig() if is_rule_bot(blueprint) else from_dict(
            ActorConfig, ckpt.load(self.blueprint_path, BLUEPRINT_KIND)["config"]["actor"])
        self.resume = Path(resume) if resume else None
        self.start_step, self.wandb_id = 0, None
        start_round, init_sha256 = 0, None
        if self.resume is not None:
            blob = self.life.training_state(self.resume, ("optimizer_states", "data"), self.game.to_dict())
            check_blueprint_hash(blob, self.resume, sha, self.blueprint_path)
            stored = from_dict(BeliefTrainConfig, blob["config"])
            self.life.refuse_changes(self.resume, stored, cfg, ("model",))
            start_round = int(blob["data"]["rounds"])
            self.start_step, self.wandb_id = int(blob.get("step", 0)), blob.get("wandb_id")
            init_sha256 = blob.get("init_sha256")
        pl.seed_everything(cfg.seed, verbose=False)
        self.data = BeliefData(cfg, self.game, net, bp_actor, self.device, start_round)
        # the blueprint's path relative to the run folder, so the pair can move together
        rel = str(blueprint) if is_rule_bot(blueprint) else os.path.relpath(self.blueprint_path.resolve(),
                                                                             self.out.resolve())
        self.module = BeliefModule(cfg, self.game, self.data, {"path": rel, "sha256": sha}, net.mover)
        self.module.life = self.life
        self.module.conventions = conventions_of(cfg.conventions, blueprint)
        self.module.init_sha256 = init_sha256
        self._io = BeliefCheckpointIO(self.game, sha)
        if self.resume is None and cfg.init:
            self._warm_start(Path(cfg.init))

    def _warm_start(self, path: Path) -> None:
        """Start from another belief's weights: same game, same model config, any blueprint. A belief
        without blueprint_features can start one with it: the encoder's new inputs get zero weights, so the
        run starts from exactly that belief. The blueprint network read is always this run's."""
        _, model = load_belief(path, game=self.game)
        want = self.cfg.model
        if replace(model.cfg, blueprint_features=want.blueprint_features) != want or (
                model.cfg.blueprint_features and not want.blueprint_features):
            raise ckpt.CheckpointError(f"{path} holds a belief with {model.cfg}, this run's model is "
                                       f"{want}: --init needs the same --model.* (but blueprint_features, "
                                       "which a warm start may add)")
        weights, own = model.state_dict(), self.module.model.state_dict()
        if want.blueprint_features and not model.cfg.blueprint_features:
            w = weights["mlp.0.weight"]
            extra = own["mlp.0.weight"].shape[1] - w.shape[1]
            weights["mlp.0.weight"] = torch.cat([w, w.new_zeros(w.shape[0], extra)], 1)
        if want.blueprint_features:  # the run's own blueprint network, whatever shape the file's had
            weights = {k: v for k, v in weights.items() if not k.startswith("blueprint.")}
            weights.update({k: v for k, v in own.items() if k.startswith("blueprint.")})
        self.module.model.load_state_dict(weights)
        self.module.init_sha256 = ckpt.file_hash(path)

    @property
    def finished(self) -> bool:
        return self.start_step >= self.cfg.total_steps

    def _trainer(self) -> pl.Trainer:
        from lightning.pytorch.callbacks import TQDMProgressBar
        from lightning.pytorch.loggers import WandbLogger

        cfg = self.cfg
        self.out.mkdir(parents=True, exist_ok=True)
        settings = self.life.wandb_settings(cfg.wandb_project, cfg.wandb_group, cfg.wandb_mode, self.wandb_id,
                                            self.tags)
        self.wandb_id = self.module.wandb_id = settings["id"]
        logger = WandbLogger(save_dir=None, **settings)  # settings["dir"]: the run folder
        logger.log_hyperparams({**to_dict(cfg), "game": self.game.to_dict(),
                                "blueprint": self.module.blueprint})
        callbacks: list = []
        if cfg.val_every:  # before latest.pt is written, so latest.pt knows the best of its own step
            callbacks.append(_Validation(self.validate, self.out / "best.pt", cfg.val_every, self.life))
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
        """NLL on val_games greedy games of the validation stream (disjoint from the final evaluation)."""
        cfg, dev, blueprint = self.cfg, self.device, self.data.server.qnet()
        return evaluate_belief(self.game, model, blueprint.step, blueprint.initial_state, cfg.val_games,
                               cfg.eval_seed, batch=min(cfg.val_games, 500), max_len=self.data.max_len,
                               device=dev, stream=Stream.BELIEF_VAL)

    def run(self, tags: list[str] | None = None) -> BeliefRunResult | None:
        """Train to total_steps (continuing from `resume`), write latest.pt, evaluate on held-out games.
        None when the resumed run had already finished; a stop by signal raises runs.Stopped after
        latest.pt is written."""
        import wandb

        cfg = self.cfg
        if self.life.finished(self.start_step, cfg.total_steps):
            self.data.stop()
            return None
        self.tags = tags or []
        self.life.begin(self.start_step, self.device.type)
        with warnings.catch_warnings():
            for msg in (".*does not have many workers.*", ".*resuming from a checkpoint that ended before.*",
                        ".*could not determine the length.*", ".*module\\(s\\) in eval mode.*"):
                warnings.filterwarnings("ignore", message=msg)
            trainer = self._trainer()
            saver = next(c for c in trainer.callbacks if isinstance(c, _PeriodicCheckpoint))
            run = trainer.logger.experiment
            self.life.declare_metrics(run, "trainer/global_step", "val/nll_per_card", "min")
            try:
                trainer.fit(self.module, ckpt_path=str(self.resume) if self.resume else None)
            except BaseException as e:  # latest.pt was written by _PeriodicCheckpoint.on_exception
                self.data.stop()
                wandb.finish()
                reason, stop = stop_reason(saver.exception or e, sigterm=trainer.received_sigterm)
                if saver.failed is not None:  # never "saved": latest.pt holds an earlier step, or nothing
                    step, best = trainer.global_step, self.life.best_written
                    raise ckpt.SaveError(f"{reason} at step {step}, but {saver.failed}"
                                         + (f"; best.pt holds {best}" if best else "")) from None
                self.life.end(reason, trainer.global_step, saver.path)
                if stop is not None:
                    raise stop from None
                raise
            self.data.stop()
        step = trainer.global_step
        reason = (f"finished ({cfg.total_steps} steps)" if step >= cfg.total_steps
                  else f"time limit (max_minutes={cfg.max_minutes:g}) reached")
        self.life.end(reason, step, saver.path)
        nll = trainer.callback_metrics.get("train/nll_per_card")
        result = None
        if cfg.eval_games:
            blueprint = self.data.server.qnet()
            result = evaluate_belief(self.game, self.module.model.to(self.device), blueprint.step,
                                     blueprint.initial_state, cfg.eval_games,
                                     cfg.eval_seed, batch=min(cfg.eval_games, 500),
                                     max_len=self.data.max_len, device=self.device)
            run.summary.update({"final/nll_per_card": result.nll_learned,
                                "final/nll_grounded": result.nll_grounded,
                                "final/nll_counting": result.nll_counting, "final/games": result.games})
        wandb.finish()  # after the held-out result, so the run records it
        best = self.out / "best.pt"
        m = self.module
        return BeliefRunResult(step=step, train_nll_per_card=float(nll) if nll is not None
                               else math.nan, eval=result, checkpoint=self.out / "latest.pt",
                               best=best if m.best_step >= 0 and best.is_file() else None,
                               best_step=m.best_step, best_val_nll=m.best_val)
