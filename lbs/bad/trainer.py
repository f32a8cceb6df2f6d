"""A BAD run: on-policy self-play rounds, one actor-critic update each, on the shared run lifecycle.

Every update plays `games_per_update` fresh games (game indices continue across resumes, so a resumed run
sees new deals) with the current network and learns from them once (no replay, no off-policy correction:
the paper's IMPALA actors trailed the learner and needed V-trace; here acting and learning take turns). The
run folder, its lock, best.pt / latest.pt, the resume, the stop lines and the W&B run are lbs.runs', as for
the blueprint and belief trainers. A checkpoint (kind "bad") holds the config, the weights, the optimizer,
the counters, the evaluation history and the W&B id; `load_bad` rebuilds the network from it alone.

Logged metrics (against `updates`):
  train/loss, train/policy_loss, train/value_error (squared), train/entropy (of the policy, nats),
  train/advantage (mean |R - V|), act/score (mean score of the update's games);
  belief/entropy_v0, belief/entropy_v2: mean per-card entropy of the grounded and the Bayesian public belief
  over the held slots of the update's games (BAD's claim: the Bayesian one is well below);
  eval/mean, eval/sem, ...: greedy games on fixed deals of the BAD validation stream (best.pt keeps the best).
"""

from __future__ import annotations

import math
import operator
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .. import ckpt
from ..configs import from_dict, to_dict
from ..hanabi.config import GameConfig
from ..machine import machine
from ..models.io import resolve_device
from ..runs import Lifecycle, Stopped, StopSignals, say, signal_name, stop_reason
from ..scoring import EvalResult, summarize
from ..seeding import Stream, game_seeds
from .a2c import a2c_loss
from .config import BadConfig
from .policy import BadNet, BadNetConfig
from .selfplay import play_round

KIND = "bad"
"""checkpoint kind of a BAD run"""


@dataclass
class RunRecord:
    """What the loop keeps besides weights; saved in every checkpoint."""

    updates: int = 0
    """updates done (each one round of games_per_update games)"""
    best: float = -math.inf
    """the best evaluation mean so far (best.pt holds its weights)"""
    history: list[dict] = field(default_factory=list)
    """one row per evaluation: updates, wall_seconds, cpu_seconds and the EvalResult's fields"""
    wandb_id: str | None = None
    """the W&B run this run logs to (a resume continues it)"""
    wall_seconds: float = 0.0
    """training time so far, resumed parts included"""
    cpu_seconds: float = 0.0
    """process CPU time so far, resumed parts included (curves compare at equal CPU time)"""
    starts: list[dict] = field(default_factory=list)
    """one row per start of the run: the command, the machine and the update it began at"""


def load_bad(path: str | Path, device: torch.device | str = "cpu") -> tuple[GameConfig, BadConfig, BadNet]:
    """The game, config and network (eval mode) of a BAD checkpoint."""
    blob = ckpt.load(path, KIND, map_location=device)
    cfg = from_dict(BadConfig, blob["config"])
    net = BadNet(cfg.game, cfg.net).to(device)
    net.load_state_dict(blob["model"])
    return cfg.game, cfg, net.eval()


@dataclass
class BadEval(EvalResult):
    """A greedy evaluation, with the mean under HLE's rule beside it (the same where the game zeroes)."""

    zeroed: float = 0.0
    """mean score with every game that lost all lives counted 0"""

    def __str__(self) -> str:
        return f"{super().__str__()}, zeroed {self.zeroed:.3f}"


def evaluate(cfg: BadConfig, net: BadNet, games: int, seed: int, device: torch.device,
             stream: Stream = Stream.BAD_VAL, batch: int = 1000) -> EvalResult:
    """Greedy BAD games (the partial policy's best move, the belief updated on it) on games 0..games-1 of
    `stream`."""
    scores, lengths, bombed = [], [], []
    for start in range(0, games, batch):
        seeds = game_seeds(stream, seed, min(batch, games - start), start=start, device=device)
        r = play_round(cfg.game, net, cfg, seeds, greedy=True, record=False)
        scores.append(r.score)
        lengths.append(r.length)
        bombed.append(r.bombed)
    s, lost = torch.cat(scores), torch.cat(bombed)
    r = summarize(s, s == cfg.game.max_score, lost, torch.cat(lengths))
    return BadEval(**r.to_dict(), zeroed=float(torch.where(lost, 0, s).double().mean()))


class BadTrainer:
    """One BAD run (module doc)."""

    def __init__(self, cfg: BadConfig, resume: str | Path | None = None, progress: bool = True,
                 overwrite: bool = False):
        self.cfg, self.progress = cfg, progress
        self.device = resolve_device(cfg.device)
        self.life = Lifecycle(KIND, Path(cfg.out_dir), "update")
        self.life.check_folder(resuming=resume or False, overwrite=overwrite)
        torch.manual_seed(cfg.seed)
        self.net = BadNet(cfg.game, cfg.net).to(self.device)
        self.opt = self._optimizer()
        self.record = RunRecord()
        if resume is not None:
            self._restore(resume)

    def _optimizer(self) -> torch.optim.Optimizer:
        cfg, params = self.cfg, self.net.parameters()
        if cfg.optimizer == "adam":
            return torch.optim.Adam(params, lr=cfg.lr, eps=cfg.opt_eps)
        return torch.optim.RMSprop(params, lr=cfg.lr, alpha=0.99, eps=cfg.opt_eps, momentum=0.0)

    def _restore(self, path: str | Path) -> None:
        """Continue a run: weights, optimizer (this run's lr and eps win), counters, history."""
        blob = self.life.training_state(path, needs=("optimizer",))
        stored = from_dict(BadConfig, blob["config"])
        self.life.refuse_changes(path, stored, self.cfg, ("game", "net"))
        if stored.optimizer != self.cfg.optimizer:
            raise ckpt.CheckpointError(f"{path} was trained with optimizer {stored.optimizer}: --optimizer "
                                       "cannot change on resume")
        self.net.load_state_dict(blob["model"])
        self.opt.load_state_dict(blob["optimizer"])
        for group in self.opt.param_groups:
            group["lr"], group["eps"] = self.cfg.lr, self.cfg.opt_eps
        rec = from_dict(RunRecord, blob["record"])
        rec.best = self.life.best_so_far(rec.best, lambda b: b["record"]["best"], operator.gt,
                                         game=self.cfg.game.to_dict())
        self.record = rec

    def save(self, name: str) -> Path:
        """Write out_dir/name atomically."""
        payload = {"config": to_dict(self.cfg), "game": self.cfg.game.to_dict(),
                   "model": self.net.state_dict(), "optimizer": self.opt.state_dict(),
                   "record": to_dict(self.record)}
        return ckpt.save(self.life.out / name, KIND, payload)

    def update(self) -> dict[str, float]:
        """One round of fresh games with the current network, then one actor-critic step on it."""
        cfg, rec = self.cfg, self.record
        n = cfg.games_per_update
        seeds = game_seeds(Stream.BAD_TRAIN, cfg.seed, n, start=rec.updates * n, device=self.device)
        self.net.train()
        result = play_round(cfg.game, self.net, cfg, seeds)
        loss, info = a2c_loss(self.net, result.rollout, cfg.gamma, cfg.entropy, cfg.value_weight)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.grad_clip:
            torch.nn.utils.clip_grad_norm_(self.net.parameters(), cfg.grad_clip)
        self.opt.step()
        rec.updates += 1
        out = {f"train/{k}": float(v) for k, v in info.items()}
        return out | {"act/score": float(result.score.float().mean()), "belief/entropy_v0": result.entropy_v0,
                      "belief/entropy_v2": result.entropy_v2}

    def evaluate(self, games: int | None = None) -> EvalResult:
        self.net.eval()
        return evaluate(self.cfg, self.net, games or self.cfg.eval_games, self.cfg.seed, self.device)

    def _evaluate_and_keep_best(self, run, clock) -> EvalResult:
        rec = self.record
        result = self.evaluate()
        wall, cpu = clock()
        rec.history.append({"updates": rec.updates, "wall_seconds": wall, "cpu_seconds": cpu,
                            **result.to_dict()})
        say(f"[{rec.updates} updates] {result}")
        if result.mean > rec.best:
            before = rec.best
            rec.best = result.mean

            def undo() -> None:
                rec.best = before

            self.life.write_best(lambda: self.save("best.pt"), undo,
                                 f"eval mean {result.mean:.3f} at update {rec.updates}")
            run.summary["best/eval_mean"], run.summary["best/updates"] = result.mean, rec.updates
        return result

    def run(self, tags: list[str] | None = None, command: str = "") -> EvalResult | None:
        """Train to total_updates (or max_minutes); None when the run had already finished."""
        import wandb

        cfg, rec = self.cfg, self.record
        if self.life.finished(rec.updates, cfg.total_updates):
            return None
        signals = StopSignals(deferred=True)
        on_term = signals.install()
        self.life.begin(rec.updates, self.device.type)
        rec.starts.append({"command": command, "machine": machine(), "updates": rec.updates})
        settings = self.life.wandb_settings(cfg.wandb_project, cfg.wandb_group, cfg.wandb_mode, rec.wandb_id,
                                            tags or [])
        rec.wandb_id = settings["id"]
        run = wandb.init(config=to_dict(cfg), **settings)
        self.life.declare_metrics(run, "updates", "eval/mean", "max")
        wall0, cpu0 = time.time() - rec.wall_seconds, time.process_time() - rec.cpu_seconds

        def clock() -> tuple[float, float]:
            rec.wall_seconds, rec.cpu_seconds = time.time() - wall0, time.process_time() - cpu0
            return rec.wall_seconds, rec.cpu_seconds

        last_ckpt, result = time.time(), None
        reason = f"finished ({cfg.total_updates} updates)"
        try:
            signals.deferred = False
            if signals.pending:
                raise Stopped(signal_name(signals.pending), signals.pending)
            while rec.updates < cfg.total_updates:
                if cfg.max_minutes and clock()[0] > 60 * cfg.max_minutes:
                    reason = f"time limit (max_minutes={cfg.max_minutes:g}) reached"
                    break
                log = self.update()
                if rec.updates % cfg.eval_every == 0 or rec.updates == cfg.total_updates:
                    result = self._evaluate_and_keep_best(run, clock)
                    log |= {f"eval/{k}": v for k, v in result.to_dict().items()}
                run.log(log | {"updates": rec.updates}, step=rec.updates)
                if time.time() - last_ckpt > 60 * cfg.checkpoint_minutes:
                    clock()
                    self.save("latest.pt")
                    last_ckpt = time.time()
        except BaseException as e:
            reason, stop = stop_reason(e)
            clock()
            self._close(reason, run)
            if stop is not None:
                raise stop from None
            raise
        finally:
            on_term()
        clock()
        self._close(reason, run)
        return result if result is not None else self.evaluate()

    def _close(self, reason: str, run) -> None:
        """latest.pt and the closing line (a failed write is said once, never "saved")."""
        try:
            path = self.save("latest.pt")
        except ckpt.SaveError as err:
            run.finish()
            raise ckpt.SaveError(f"{reason} at update {self.record.updates}, but {err}") from None
        self.life.end(reason, self.record.updates, path)
        run.finish()


__all__ = ["KIND", "BadConfig", "BadNetConfig", "BadTrainer", "evaluate", "load_bad"]
