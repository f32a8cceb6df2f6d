"""Blueprint training: a recipe of phases on one device, learner on Lightning Fabric; this module is the
schedule that drives the parts (learner.py, selfplay.py, imitation.py, checkpoints.py).

A recipe (TrainConfig.phases) runs its phases in order, each for its number of updates: imitation of a
demonstrator on its fresh games (lbs.rl.imitation), then TD phases in which acting and learning interleave:
a round of self-play (N games, up to max_len steps) goes into prioritized replay, then `updates_per_round`
learner updates run. A values phase evaluates the anchor (the network as the phase began): the actors play
it, epsilon-greedy, and the learner learns its action values with its moves held best; an improve phase is
R2D2, the actors playing the learner's network (refreshed every `actor_sync` updates), the hold decaying.
Every `eval_every` updates rank 0 evaluates greedily. best.pt keeps the best network that has values: in a
recipe with TD phases, the network at the end of a values phase and at an improve phase's evaluations (so
an improvement ships only if it scores higher); in a recipe of imitation alone, any. latest.pt is written
every `checkpoint_minutes` and when the run ends, however it ends.

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
from ..machine import machine
from ..models.io import BLUEPRINT_KIND, resolve_device
from ..runs import Lifecycle, Stopped, StopSignals, say, signal_name, stop_reason
from ..scoring import EvalResult, evaluate
from ..seeding import Stream, rank_seed
from .checkpoints import RunIO, RunRecord, read_init, read_resume
from .config import PRESETS, Phase, TrainConfig, apply_preset, replay_spec
from .demos import agreement, record_demos
from .imitation import batch_order, fresh_games
from .learner import Learner
from .replay import PrioritizedReplay
from .selfplay import SelfPlay
from .values import fit_value_head, value_check, values_from_policy

__all__ = ["PRESETS", "Phase", "TrainConfig", "Trainer", "apply_preset"]

HELD_OUT = 256
"""Demonstrator games (evaluation deals) on which an imitation phase's agreement is measured."""


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
        self.phase = -1  # the phase the loop is in (entered at its first round)
        self.held_out = None  # the demonstrator's held-out games, recorded at the first imitation evaluation
        history = self.record.history  # the CPU clock goes on from a resumed run's, or from the init file's
        self.cpu_base = history[-1].get("cpu_seconds", 0.0) if history else init_cpu
        self.selfplay.sync(self.learner.module)
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
        return self.learner.updates >= self.cfg.stop_at

    def save(self, name: str) -> Path:
        """Write out_dir/name (rank 0 only); its path."""
        return self.io.save(name)

    def update(self) -> dict[str, torch.Tensor]:
        """One TD update; in an improve phase the actors get its weights every actor_sync updates (in a
        values phase they play the anchor)."""
        info = self.learner.update(self.replay)
        if self.learner.updates % self.cfg.actor_sync == 0 and self.learner.phase.kind == "improve":
            self.selfplay.sync(self.learner.module)
        return info

    # ---- the phases ---------------------------------------------------------------------------------
    def _enter(self, index: int, phase: Phase, done: int) -> None:
        """Set the learner and actors up for `phase` (update `done` of it): its rate and anchor weight every
        round; when it is new to this process, its anchor (taken at the phase's first update; a resume
        restored it), whom the actors play and how much they explore."""
        self.learner.set_phase(phase, done / phase.updates)
        if index == self.phase:
            return
        self.phase = index
        if not phase.learns_values:
            return
        if done == 0 and phase.kind == "values" and self.learner.by_policy:
            values_from_policy(self.learner.module)
            self.learner.target.load_state_dict(self.learner.module.state_dict())
        if done == 0 and phase.fit_games:
            fit = fit_value_head(self.cfg.game, self.learner.module, phase.fit_games, self.cfg.seed,
                                 self.cfg.gamma, self.device)
            self.learner.target.load_state_dict(self.learner.module.state_dict())
            say(f"phase {index} ({phase.kind}): value stream fitted on {phase.fit_games} greedy games, "
                f"advantages scaled by {fit['advantage_scale']:.4f}, RMS error {fit['rms']:.3f}")
        if done == 0 and (phase.kind == "values" or phase.anchor_weight > 0):
            self.learner.hold()
        weights = self.learner.anchor if phase.kind == "values" else self.learner.module
        self.selfplay.sync(weights)
        self.selfplay.explore(self.cfg.actor.eps_base if phase.eps_base is None else phase.eps_base)

    def _imitation_round(self, phase: Phase, done: int) -> dict[str, torch.Tensor]:
        """One chunk of fresh demonstrator games, learnt in batches (stopping at the phase's or run's end)."""
        cfg, learner, rec = self.cfg, self.learner, self.record
        start = rec.demo_games + self.rank * phase.chunk  # ranks never share a game
        games = fresh_games(cfg, phase, start, self.device, learner.module)
        rec.demo_games += phase.chunk * learner.fabric.world_size
        left = min(phase.updates - done, cfg.stop_at - learner.updates)
        info = {}
        for idx in batch_order(cfg, start, phase.chunk, self.device)[:left]:
            info = learner.imitate({k: v[idx] for k, v in games.items()})
        return info

    def _agreement(self, phase: Phase) -> float:
        """Greedy agreement of the learner's network with the demonstrator on held-out games."""
        if self.held_out is None:
            self.held_out = record_demos(self.cfg, HELD_OUT, self.device, stream=Stream.EVAL,
                                         bot=phase.demonstrator)
        net = self.learner.module
        was = net.training
        net.eval()
        try:
            return agreement(net, self.held_out, self.learner.public)
        finally:
            net.train(was)

    def _keeps_best(self, phase: Phase, phase_end: bool) -> bool:
        """Whether an evaluation now may become best.pt: only networks with values, in a recipe that
        learns them (the end of a values phase, an improve phase's evaluations)."""
        if not any(p.learns_values for p in self.cfg.phases):
            return True
        return phase.kind == "improve" or (phase.kind == "values" and phase_end)

    def _phase_end(self, phase: Phase) -> dict:
        """What the end of a phase records in a recipe that learns values: the value check of the network
        (at an imitation phase's end, the "before" of the TD phase), and in a TD phase how many greedy moves
        are the anchor's."""
        out = {}
        if any(p.learns_values for p in self.cfg.phases) and self.is_main:
            net = self.learner.module
            check = value_check(self.cfg.game, net, games=self.cfg.value_games, seed=self.cfg.seed,
                                gamma=self.cfg.gamma, device=self.device,
                                anchor=self.learner.anchor if phase.learns_values else None)
            out["value_check"] = check
        return out

    def evaluate(self, games: int | None = None) -> EvalResult:
        """Greedy games of the learner's network now (served beside the actors' copy) on fixed deals of the
        validation stream."""
        learner = self.selfplay.serve_learner(self.learner.module)
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

    def _evaluate_and_keep_best(self, u: int, start: float, bar, run, keep: bool = True,
                                extra: dict | None = None) -> EvalResult:
        """An evaluation at update u (the run's clock started at `start`): into the history with `extra`,
        and best.pt when `keep` allows it and it is the best so far."""
        result = self.evaluate()
        rec = self.record
        wall = time.time() - start
        cpu = self.cpu_base + time.process_time() - self.cpu_start
        index, phase, _ = self.cfg.phase_at(max(u - 1, 0))
        row = {"updates": u, "wall_seconds": wall, "cpu_seconds": cpu, "phase": index, **result.to_dict(),
               **(extra or {})}
        rec.history.append(row)
        shown = {**(extra or {}), **{k: v for k, v in (extra or {}).get("value_check", {}).items()
                                     if k in ("moves_kept", "rms_own", "rms_other")}}
        said = "".join(f", {k} {v:.3f}" for k, v in shown.items() if isinstance(v, float))
        bar.write(f"[{u} updates, phase {index} {phase.kind}] {result}{said}")
        if keep and result.mean > rec.best:
            before = rec.best, rec.wall_seconds
            rec.best, rec.wall_seconds = result.mean, wall

            def undo() -> None:  # the new best counts only once best.pt holds it
                rec.best, rec.wall_seconds = before

            what = f"eval mean {result.mean:.3f} at update {u}"
            self.life.write_best(lambda: self.save("best.pt"), undo, what)
            run.summary["best/eval_mean"], run.summary["best/updates"] = result.mean, u
        return result

    def run(self, tags: list[str] | None = None, command: str = "") -> EvalResult | None:
        """Train to the recipe's end, or total_updates (or max_minutes); None when the run had already
        finished. `command`: how this start was asked for, kept in the run's record with the machine."""
        from tqdm import tqdm

        cfg, learner, selfplay = self.cfg, self.learner, self.selfplay
        if self.life.finished(learner.updates, cfg.stop_at):
            selfplay.close()
            return None
        # signals from here on are kept until the loop's first round reads them: the start line below is what
        # a supervisor waits for, and W&B's start can take seconds before the loop's handlers would be in
        signals = StopSignals(deferred=True)
        on_term = signals.install()
        self.life.begin(learner.updates, self.device.type)
        self.record.starts.append({"command": command, "machine": machine(), "updates": learner.updates})
        run = self._wandb(tags or [])
        start = time.time() - self.record.wall_seconds
        last_ckpt = time.time()
        last_eval = learner.updates // cfg.eval_every
        bar = tqdm(
            total=cfg.stop_at,
            initial=learner.updates,
            disable=not self.progress or not self.is_main,
            desc="updates",
            dynamic_ncols=True,
        )
        t_learn = 0.0
        steps_at, seqs = selfplay.actor_steps, 0
        result = None
        reason = f"finished ({cfg.stop_at} updates)"
        stats: dict[str, torch.Tensor] | None = None
        try:
            signals.deferred = learner.fabric.world_size > 1  # one process: a later SIGTERM stops at once
            if cfg.overlap:
                selfplay.start()
            while learner.updates < cfg.stop_at:
                signum, timed_out = self._agree_stop(
                    signals.pending, bool(cfg.max_minutes) and time.time() - start > 60 * cfg.max_minutes
                )
                if signum:
                    raise Stopped(signal_name(signum), signum)
                if timed_out:
                    reason = f"time limit (max_minutes={cfg.max_minutes:g}) reached"
                    break
                index, phase, done = cfg.phase_at(learner.updates)
                end = learner.updates - done + phase.updates  # the update this phase ends at
                self._enter(index, phase, done)
                bar.set_description(f"phase {index} {phase.kind}")
                t0 = time.time()
                if phase.kind == "imitate":
                    before = learner.updates
                    info = self._imitation_round(phase, done)
                    seqs += (learner.updates - before) * cfg.batch_size
                    bar.update(learner.updates - before)
                else:
                    stats = selfplay.next_round()
                    if len(self.replay) < cfg.min_replay:
                        bar.set_description(f"filling replay {len(self.replay)}/{cfg.min_replay} episodes")
                        continue
                    for _ in range(min(cfg.updates_per_round, phase.updates - done,
                                       cfg.stop_at - learner.updates)):
                        info = self.update()
                        seqs += cfg.batch_size
                        bar.update(1)
                t_learn += time.time() - t0
                u = learner.updates
                log = {"train/" + k: float(v) for k, v in info.items()} | {
                    "updates": u,
                    "phase": index,
                    "learn/seqs_per_s": seqs / max(t_learn, 1e-9),
                    "counters/demo_games": self.record.demo_games,
                }
                if phase.learns_values:
                    log |= {
                        "act/actor_steps_per_s": (selfplay.actor_steps - steps_at)
                        / max(selfplay.seconds, 1e-9),
                        "replay/size": len(self.replay),
                        "counters/episodes": selfplay.episodes,
                    } | ({"act/score": float(stats["score"].float().mean())} if stats is not None else {})
                phase_end = u == end
                if self.is_main and (u // cfg.eval_every > last_eval or phase_end):
                    last_eval = u // cfg.eval_every
                    extra = {"agreement": self._agreement(phase)} if phase.kind == "imitate" else {}
                    if phase_end:
                        extra |= self._phase_end(phase)
                    keep = self._keeps_best(phase, phase_end)
                    result = self._evaluate_and_keep_best(u, start, bar, run, keep, extra)
                    log |= {f"eval/{k}": v for k, v in result.to_dict().items()}
                    log |= {f"eval/{k}": v for k, v in extra.items() if isinstance(v, float)}
                run.log(log, step=u)
                bar.set_postfix(loss=f"{log['train/loss']:.3f}" if "train/loss" in log else "",
                                score=f"{log.get('act/score', 0.0):.2f}")
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
