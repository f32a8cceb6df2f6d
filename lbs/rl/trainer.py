"""Blueprint training: R2D2 + VDN self-play on one device, learner on Lightning Fabric; this module is the
schedule that drives the parts (learner.py, selfplay.py, checkpoints.py).

Acting and learning interleave in one process: a round of self-play (N games, up to max_len steps)
goes into prioritized replay, then `updates_per_round` learner updates run. The acting copy of the
network lives in the InferenceServer and is refreshed every `actor_sync` updates. Every `eval_every`
updates rank 0 evaluates greedily (a new best writes best.pt); latest.pt is written every
`checkpoint_minutes` and when the run ends, however it ends.

With `devices` > 1 (Fabric's DDP strategy, Ape-X style) every rank runs this same loop with its own
actors on its own deals and its own replay; Fabric's DDP wrapper averages the gradients, so every rank
holds the same weights. Only rank 0 evaluates, logs, writes checkpoints and prints; a stop (signal, time
limit) is agreed by every rank at the top of a round, so no rank waits in a collective another never
reaches. With `overlap` the rounds are played in a background thread while the learner updates (see
TrainConfig.overlap).
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from .. import ckpt
from ..configs import to_dict
from ..graphs import Graphs
from ..models.io import BLUEPRINT_KIND, resolve_device
from ..runs import Lifecycle, Stopped, StopSignals, say, signal_name, stop_reason
from ..scoring import EvalResult, evaluate
from ..seeding import Stream, rank_seed
from .checkpoints import RunIO, RunRecord, read_init, read_resume
from .config import PRESETS, TrainConfig, apply_preset, replay_spec
from .demos import demo_replay, demo_sequences
from .learner import Learner
from .replay import PrioritizedReplay
from .selfplay import SelfPlay

__all__ = ["PRESETS", "TrainConfig", "Trainer", "apply_preset"]

DEMO_SAMPLING = 1 << 40
"""Added to the replay seed for the demonstration replay's draws (disjoint from the self-play replay's)."""


class Trainer:
    """One blueprint run: the learner, self-play into replay, run I/O, and the loop that schedules them."""

    def __init__(self, cfg: TrainConfig, resume: str | Path | None = None, progress: bool = True,
                 overwrite: bool = False):
        self.cfg, self.progress = cfg, progress
        self.cpu_start = time.process_time()  # a run's CPU seconds count from here (demo recording included)
        self.out = Path(cfg.out_dir)
        self.life = Lifecycle(BLUEPRINT_KIND, self.out, "update")
        # a new run's starting weights, refused before a folder is made
        init, init_cpu = read_init(cfg.init, cfg) if cfg.init and not resume else (None, 0.0)
        self.life.check_folder(resuming=resume or False, overwrite=overwrite)
        blob = read_resume(self.life, resume, cfg) if resume else None  # refused before any other process
        self.learner = Learner(cfg, resolve_device(cfg.device))
        if init is not None:
            self.learner.start_from(init)
        self.device, self.rank, self.is_main = self.learner.device, self.learner.rank, self.learner.is_main
        self.replay = PrioritizedReplay(
            cfg.replay_capacity,
            replay_spec(cfg),
            device=self.device,
            alpha=cfg.alpha,
            beta=cfg.beta,
            seed=rank_seed(cfg.seed, self.rank),
        )
        self.selfplay = SelfPlay(cfg, self.rank, self.device, self.replay, self.learner.priorities,
                                 self.learner.module)
        self.record = RunRecord()
        self.io = RunIO(self.life, cfg, self.learner, self.selfplay, self.replay, self.record)
        if blob is not None:
            self.io.restore(blob)
        self.demos = None  # the demonstration replay (learning from demonstrations), rebuilt on a resume
        if cfg.demo_games:
            self.demos = demo_replay(cfg, self.device, rank_seed(cfg.seed, self.rank) + DEMO_SAMPLING,
                                     self.learner.priorities)
            self.demos.num_sampled = demo_sequences(cfg, self.learner.updates)  # a resume draws on
        history = self.record.history  # the CPU clock goes on from a resumed run's, or from the init file's
        self.cpu_base = history[-1].get("cpu_seconds", 0.0) if history else init_cpu
        self.selfplay.sync(self.learner.module.state_dict())
        self.eval_graphs = Graphs(self.device) if cfg.actor.cuda_graphs else None  # the learner's net

    @property
    def counters(self) -> dict:
        """updates, rounds, episodes, actor_steps, wall_seconds: as a checkpoint stores them."""
        return self.io.counters()

    @property
    def best(self) -> float:
        return self.record.best

    @property
    def finished(self) -> bool:
        return self.learner.updates >= self.cfg.total_updates

    def save(self, name: str) -> Path:
        """Write out_dir/name (rank 0 only); its path."""
        return self.io.save(name)

    def update(self) -> dict[str, torch.Tensor]:
        """One learner update; every actor_sync updates the actors get its weights."""
        info = self.learner.update(self.replay, self.demos)
        if self.learner.updates % self.cfg.actor_sync == 0:
            self.selfplay.sync(self.learner.module.state_dict())
        return info

    def evaluate(self, games: int | None = None) -> EvalResult:
        """Greedy games of the learner's network now (served beside the actors' copy) on fixed deals of the
        validation stream."""
        learner = self.selfplay.serve_learner(self.learner.module.state_dict())
        with learner.pinned() as weights:
            return evaluate(
                self.cfg.game,
                learner.step,
                learner.initial_state,
                games=games or self.cfg.eval_games,
                seed=self.cfg.seed,
                batch=min(games or self.cfg.eval_games, 1000),
                device=self.device,
                stream=Stream.BLUEPRINT_VAL,
                graphs=self.eval_graphs,
                weights=weights,
            )

    # ---- the loop ------------------------------------------------------------------------------
    def _wandb(self, tags: list[str]):
        """The run's W&B run (runs.Lifecycle.wandb_settings); ranks other than 0 get a disabled one (its
        calls do nothing)."""
        import wandb

        cfg = self.cfg
        if not self.is_main:
            return wandb.init(mode="disabled")
        settings = self.life.wandb_settings(cfg.wandb_project, cfg.wandb_group, cfg.wandb_mode,
                                            self.record.wandb_id, tags)
        self.record.wandb_id = settings["id"]
        run = wandb.init(config=to_dict(cfg), **settings)
        self.life.declare_metrics(run, "updates", "eval/mean", "max")
        return run

    def _agree_stop(self, signum: int, timed_out: bool) -> tuple[int, bool]:
        """(signal to stop on or 0, time limit reached) as every rank sees it: the largest over the ranks
        (one all-reduce at the top of each round), so every rank stops at the same round."""
        signum, timed_out = self.learner.agree([signum, int(timed_out)])
        return int(signum), bool(timed_out)

    def _evaluate_and_keep_best(self, u: int, start: float, bar, run) -> EvalResult:
        """An evaluation at update u (the run's clock started at `start`): into the history, and best.pt
        when it is the best so far."""
        result = self.evaluate()
        rec = self.record
        wall = time.time() - start
        cpu = self.cpu_base + time.process_time() - self.cpu_start
        rec.history.append({"updates": u, "wall_seconds": wall, "cpu_seconds": cpu, **result.to_dict()})
        bar.write(f"[{u} updates] {result}")
        if result.mean > rec.best:
            before = rec.best, rec.wall_seconds
            rec.best, rec.wall_seconds = result.mean, wall
            try:  # the new best counts only once best.pt holds it (a stop mid-write keeps the old one)
                self.save("best.pt")
            except BaseException:
                rec.best, rec.wall_seconds = before
                raise
            run.summary["best/eval_mean"], run.summary["best/updates"] = result.mean, u
        return result

    def run(self, tags: list[str] | None = None) -> EvalResult | None:
        """Train to total_updates (or max_minutes); None when the run had already finished."""
        from tqdm import tqdm

        cfg, learner, selfplay = self.cfg, self.learner, self.selfplay
        if self.life.finished(learner.updates, cfg.total_updates):
            selfplay.close()
            return None
        # signals from here on are kept until the loop's first round reads them: the start line below is what
        # a supervisor waits for, and W&B's start can take seconds before the loop's handlers would be in
        signals = StopSignals(deferred=True)
        on_term = signals.install()
        self.life.begin(learner.updates, self.device.type)
        run = self._wandb(tags or [])
        start = time.time() - self.record.wall_seconds
        last_ckpt = time.time()
        last_eval = learner.updates // cfg.eval_every
        bar = tqdm(
            total=cfg.total_updates,
            initial=learner.updates,
            disable=not self.progress or not self.is_main,
            desc="updates",
            dynamic_ncols=True,
        )
        t_learn = 0.0
        steps_at, seqs = selfplay.actor_steps, 0
        result = None
        reason = f"finished ({cfg.total_updates} updates)"
        stats: dict[str, torch.Tensor] | None = None
        try:
            signals.deferred = learner.fabric.world_size > 1  # one process: a later SIGTERM stops at once
            if cfg.overlap:
                selfplay.start()
            while learner.updates < cfg.total_updates:
                signum, timed_out = self._agree_stop(
                    signals.pending, bool(cfg.max_minutes) and time.time() - start > 60 * cfg.max_minutes
                )
                if signum:
                    raise Stopped(signal_name(signum), signum)
                if timed_out:
                    reason = f"time limit (max_minutes={cfg.max_minutes:g}) reached"
                    break
                warm = learner.updates < cfg.warm_start_updates  # demonstrations alone: no self-play
                if not warm:
                    stats = selfplay.next_round()
                    if len(self.replay) < cfg.min_replay:
                        bar.set_description(f"filling replay {len(self.replay)}/{cfg.min_replay} episodes")
                        continue
                bar.set_description("warm start" if warm else "updates")
                rounds = cfg.updates_per_round
                if warm:  # the warm start ends on its own update count, whatever updates_per_round is
                    rounds = min(rounds, cfg.warm_start_updates - learner.updates)
                t0 = time.time()
                for _ in range(rounds):
                    info = self.update()
                    seqs += cfg.batch_size
                    bar.update(1)
                t_learn += time.time() - t0
                u = learner.updates
                log = {"train/" + k: float(v) for k, v in info.items()} | {
                    "updates": u,
                    "act/actor_steps_per_s": (selfplay.actor_steps - steps_at) / max(selfplay.seconds, 1e-9),
                    "learn/seqs_per_s": seqs / max(t_learn, 1e-9),
                    "replay/size": len(self.replay),
                    "counters/episodes": selfplay.episodes,
                } | ({"act/score": float(stats["score"].float().mean())} if stats is not None else {})
                if u // cfg.eval_every > last_eval and self.is_main:
                    last_eval = u // cfg.eval_every
                    result = self._evaluate_and_keep_best(u, start, bar, run)
                    log |= {f"eval/{k}": v for k, v in result.to_dict().items()}
                run.log(log, step=u)
                bar.set_postfix(loss=f"{log['train/loss']:.3f}", score=f"{log.get('act/score', 0.0):.2f}")
                if time.time() - last_ckpt > 60 * cfg.checkpoint_minutes:
                    self.record.wall_seconds = time.time() - start
                    self.save("latest.pt")
                    last_ckpt = time.time()
        except BaseException as e:
            reason, stop = stop_reason(e)
            if stop is not None:
                raise stop from None
            raise
        finally:
            on_term()
            selfplay.stop()
            self.record.wall_seconds = time.time() - start
            try:
                path, failed = self.save("latest.pt"), None
            except ckpt.SaveError as err:  # disk full: said once, below, never "saved"
                path, failed = None, err
            bar.close()
            if failed is None:
                self.life.end(reason, learner.updates, path)
            cut = selfplay.cut_fraction(stats) if stats is not None else 0.0
            if cut > 0.05:  # e.g. a preset's max_len after --game.* made games longer
                say(f"warning: actor.max_len={cfg.actor.max_len} cut {100 * cut:.0f}% of the last "
                              f"round's games (this game can last {cfg.game.max_steps} steps); raise "
                              "--actor.max_len, or 0 for whole games")
            run.finish()
            if failed is not None:
                raise ckpt.SaveError(f"{reason} at update {learner.updates}, but {failed}") from None
        try:  # the final evaluation plays through self-play's server: closed after it
            if not self.is_main:
                return None
            return result if result is not None else self.evaluate()
        finally:
            selfplay.close()
