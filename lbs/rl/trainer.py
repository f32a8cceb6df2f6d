"""Blueprint training: R2D2 + VDN self-play on one device, learner on Lightning Fabric.

Acting and learning interleave in one process: a round of self-play (N games, up to max_len steps)
goes into prioritized replay, then `updates_per_round` learner updates run. The acting copy of the
network lives in the InferenceServer and is refreshed every `actor_sync` updates.

With `devices` > 1 (Fabric's DDP strategy, Ape-X style) every rank runs this same loop with its own
actors on its own deals and its own replay; Fabric's DDP wrapper averages the gradients, so every rank
holds the same weights. Only rank 0 evaluates, logs, writes checkpoints and prints; a stop (signal, time
limit) is agreed by every rank at the top of a round, so no rank waits in a collective another never
reaches. With `overlap` the rounds are played in a background thread while the learner updates (see
TrainConfig.overlap).
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
import os
import queue
import secrets
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from .. import ckpt
from ..configs import check, from_dict, is_int, to_dict
from ..graphs import Graphs
from ..hanabi.config import GameConfig
from ..hanabi.encode import public_features
from ..hanabi.rng import hash_keys
from ..infer import InferenceServer
from ..models.io import BLUEPRINT_KIND as KIND
from ..models.io import resolve_device
from ..models.qnet import NetConfig, make_qnet
from ..runs import Stopped, check_out_dir, say, signal_name
from ..scoring import EvalResult, evaluate
from ..seeding import Stream, game_seeds, rank_seed
from ..shards import process_rank
from .actors import ActorConfig, run_round
from .r2d2 import apex_epsilons, r2d2_loss
from .replay import PrioritizedReplay

LEARNER = "learner"
"""Name of the copy of the learner's network that evaluation plays, in the trainer's server."""
PRECISIONS = ("32-true", "32", "16-mixed", "bf16-mixed", "bf16-true", "64-true")
WANDB_MODES = ("offline", "online", "disabled")


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
            check(self, name, getattr(self, name) > 0, "> 0")
        check(self, "gamma", 0 < self.gamma <= 1, "in (0, 1]")
        check(self, "alpha", self.alpha >= 0, ">= 0")
        for name in ("beta", "eta"):
            check(self, name, 0 <= getattr(self, name) <= 1, "in [0, 1]")
        check(self, "max_minutes", self.max_minutes >= 0, ">= 0 (0: no limit)")
        check(self, "seed", is_int(self.seed) and self.seed >= 0, "an int >= 0")
        check(self, "precision", self.precision in PRECISIONS, f"one of {PRECISIONS}")
        check(self, "wandb_mode", self.wandb_mode in WANDB_MODES, f"one of {WANDB_MODES}")
        check(self, "device", self.device == "auto" or self.device.split(":")[0] in ("cpu", "cuda", "mps"),
              "auto, cpu or cuda[:N]")
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
    # curve is recorded on a GPU. From the H100 numbers: actors 431K slot-steps/s at 8,192 games;
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
    # play and the scripted "safe play" heuristic (experiments/results/learning_curve_tiny.md).
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


class Trainer:
    """One blueprint run: self-play, replay, R2D2 learner, evaluation, checkpoints, logging."""

    def __init__(self, cfg: TrainConfig, resume: str | Path | None = None, progress: bool = True,
                 overwrite: bool = False):
        from lightning.fabric import Fabric

        self.cfg, self.progress = cfg, progress
        self.out = Path(cfg.out_dir)
        check_out_dir(self.out, resuming=resume is not None, overwrite=overwrite)
        blob = self._read(resume) if resume else None  # refused before any other process starts
        self.device = resolve_device(cfg.device)
        if self.device.type == "cuda" and torch.cuda.device_count() < cfg.devices:
            raise ValueError(f"TrainConfig.devices={cfg.devices} needs {cfg.devices} CUDA devices, found "
                             f"{torch.cuda.device_count()}")
        if process_rank() != 0:  # a rank Fabric started: rank 0 alone prints, Lightning's lines included
            logging.getLogger("lightning.fabric").setLevel(logging.WARNING)
        self.fabric = Fabric(
            accelerator="cuda" if self.device.type == "cuda" else "cpu", devices=cfg.devices,
            strategy="ddp" if cfg.devices > 1 else "auto", precision=cfg.precision
        )
        self.fabric.launch()  # devices > 1: rank 0 re-runs this script (same argv) for ranks 1..N-1
        self.rank, self.is_main = self.fabric.global_rank, self.fabric.is_global_zero
        if cfg.devices > 1:
            self.device = self.fabric.device
        self.fabric.seed_everything(cfg.seed, verbose=False)
        net = make_qnet(cfg.game, cfg.net)
        self.target = copy.deepcopy(net).to(self.device).requires_grad_(False)
        opt = torch.optim.Adam(net.parameters(), lr=cfg.lr, eps=cfg.adam_eps)
        self.net, self.opt = self.fabric.setup(net, opt)
        if cfg.net.aux_head:  # route the aux forward through Fabric's wrapper (autocast, DDP)
            self.net.mark_forward_method("forward_aux")
        self.replay = PrioritizedReplay(
            cfg.replay_capacity,
            replay_spec(cfg),
            device=self.device,
            alpha=cfg.alpha,
            beta=cfg.beta,
            seed=rank_seed(cfg.seed, self.rank),
        )
        # one caller at a time per model: the acting thread (overlap: the actor thread, on its own stream)
        # runs the forward passes itself. LEARNER: the learner's weights as of the latest evaluation
        self.server = InferenceServer(make_qnet(cfg.game, cfg.net), device=self.device)
        self.server.register(LEARNER, self._module())  # a copy, in the learner's dtype
        self.counters = {"updates": 0, "rounds": 0, "episodes": 0, "actor_steps": 0, "wall_seconds": 0.0}
        self.best = -math.inf
        self.history: list[dict] = []
        self.wandb_id: str | None = None
        if blob is not None:
            self._restore(blob, resume)
        self.server.update_weights(self._module().state_dict())
        self._eps_ladder = apex_epsilons(cfg.actor.num_games, cfg.actor.eps_base, cfg.actor.eps_alpha)
        self._graphs = Graphs(self.device) if cfg.actor.cuda_graphs else None  # actor rounds
        self._eval_graphs = Graphs(self.device) if cfg.actor.cuda_graphs else None  # the learner's net

    @property
    def finished(self) -> bool:
        return self.counters["updates"] >= self.cfg.total_updates

    def _module(self) -> torch.nn.Module:
        return self.net.module if hasattr(self.net, "module") else self.net

    # ---- checkpoints -------------------------------------------------------------------------
    def _payload(self) -> dict:
        return {
            "config": to_dict(self.cfg),
            "game": self.cfg.game.to_dict(),
            "model": self._module().state_dict(),
            "target": self.target.state_dict(),
            "optimizer": self.opt.state_dict(),
            "replay": self.replay.state_dict(include_data=False),
            "counters": dict(self.counters),
            "best": self.best,
            "history": self.history,
            "wandb_id": self.wandb_id,
        }

    def save(self, name: str) -> Path:
        """Write out_dir/name atomically; on ranks other than 0 (which hold the same weights) nothing."""
        if not self.is_main:
            return self.out / name
        return ckpt.save(self.out / name, KIND, self._payload())

    def _read(self, path: str | Path) -> dict:
        """A checkpoint to continue, read to the CPU and checked: a weights-only file, or a change of game
        or network, is refused."""
        blob = ckpt.load(path, KIND, map_location="cpu")
        if "optimizer" not in blob:
            raise ckpt.CheckpointError(f"{path} holds weights only (a shipped model), not a training state: "
                                       "it cannot be resumed; start a new run instead")
        stored = from_dict(TrainConfig, blob["config"])
        for name in ("game", "net"):
            theirs, mine = getattr(stored, name), getattr(self.cfg, name)
            if theirs != mine:
                raise ckpt.CheckpointError(f"{path} was trained with {name} {theirs}, this run uses {mine}: "
                                           f"--{name}.* cannot change on resume")
        return blob

    def _restore(self, blob: dict, path: str | Path) -> None:
        """Continue a run: weights, optimizer, counters, history. Config overrides take effect (the
        optimizer gets this config's lr and eps)."""
        self._module().load_state_dict(blob["model"])
        self.target.load_state_dict(blob["target"])
        self.opt.load_state_dict(blob["optimizer"])
        for group in self.opt.param_groups:  # the restored state would silently keep the old values
            group["lr"], group["eps"] = self.cfg.lr, self.cfg.adam_eps
        # the replay's contents are never saved: only its counters continue (capacity may change)
        rep = blob["replay"]
        self.replay.num_added, self.replay.num_sampled = rep["num_added"], rep["num_sampled"]
        self.counters.update(blob["counters"])
        self.best = blob["best"]
        self.history = list(blob["history"])
        self.wandb_id = blob.get("wandb_id")
        best = self.out / "best.pt"
        if best.is_file() and best.resolve() != Path(path).resolve():
            # best.pt is written at each new best, latest.pt only every few minutes: after a crash the
            # best so far is the larger of the two, so a worse model never replaces best.pt
            self.best = max(self.best, ckpt.load(best, KIND)["best"])

    # ---- acting --------------------------------------------------------------------------------
    def _q_fn(self, priv, publ, legal, hid):
        return self.server.qnet().step(priv, publ, legal, hid)

    def _init_hidden(self, rows: int):
        return self.server.qnet().initial_state(rows)

    def act_round(self) -> dict[str, torch.Tensor]:
        episodes, stats = self._play_round(self.counters["rounds"], self._q_fn)
        self._add_round(episodes)
        return stats

    def _play_round(self, r: int, q_fn) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """Self-play round r (its deals and exploration depend on r only); any thread."""
        cfg = self.cfg
        n = cfg.actor.num_games
        # rank r plays games r*n .. r*n+n-1 of the stream: ranks never share a deal, rank 0 keeps one device's
        seeds = game_seeds(Stream.BLUEPRINT_TRAIN, cfg.seed, n, start=self.rank * n, device=self.device)
        draw = hash_keys(seeds, torch.full_like(seeds, r)) % n  # Ape-X rate per game, re-drawn each round
        eps = self._eps_ladder.to(self.device)[draw].float()
        with torch.no_grad(), self.server.pinned() as weights:
            return run_round(
                cfg.game, q_fn, self._init_hidden, seeds, r, cfg.actor, eps=eps, aux=cfg.net.aux_head,
                graphs=self._graphs, weights=weights,
            )

    def _add_round(self, episodes: dict[str, torch.Tensor]) -> None:
        """Priorities from the learner, then into replay: the learner's thread only."""
        with torch.no_grad():
            prio = self._priorities(episodes)
        self.replay.add(episodes, prio)
        self.counters["rounds"] += 1
        self.counters["episodes"] += self.cfg.actor.num_games
        self.counters["actor_steps"] += int(episodes["mask"].sum())

    def _priorities(self, episodes: dict[str, torch.Tensor]) -> torch.Tensor:
        """Initial priorities from the learner's own TD errors on the fresh episodes."""
        w = torch.ones(episodes["mask"].shape[0], device=self.device)
        batch = dict(episodes, priv=episodes["priv"].float())
        return self._loss(batch, w)[1]

    def _loss(self, batch: dict[str, torch.Tensor], w: torch.Tensor):
        cfg = self.cfg
        return r2d2_loss(
            self.net, self.target, batch, w, cfg.gamma, cfg.n_step, eta=cfg.eta, public_fn=self._public
        )

    def _public(self, priv: torch.Tensor) -> torch.Tensor:
        return public_features(self.cfg.game, priv)

    # ---- learning ------------------------------------------------------------------------------
    def update(self) -> dict[str, torch.Tensor]:
        cfg = self.cfg
        batch, idx, w = self.replay.sample(cfg.batch_size)
        loss, prio, stats = self._loss(batch, w)
        self.opt.zero_grad(set_to_none=True)
        self.fabric.backward(loss)
        self.fabric.clip_gradients(self.net, self.opt, max_norm=cfg.grad_clip)
        self.opt.step()
        self.replay.update_priorities(idx, prio.detach())
        self.counters["updates"] += 1
        u = self.counters["updates"]
        if u % cfg.target_sync == 0:
            self.target.load_state_dict(self._module().state_dict())
        if u % cfg.actor_sync == 0:
            self.server.update_weights(self._module().state_dict())
        return {"loss": loss.detach(), **stats}  # 0-d tensors: read them only when logging (a host sync)

    def evaluate(self, games: int | None = None) -> EvalResult:
        """Greedy games with the learner's weights now, served as LEARNER."""
        learner = self.server.qnet(LEARNER)
        self.server.update_weights(self._module().state_dict(), LEARNER)
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
                graphs=self._eval_graphs,
                weights=weights,
            )

    def _cut_fraction(self, stats: dict[str, torch.Tensor]) -> float:
        """Fraction of a round's games that actor.max_len cut (one host sync; 0 when whole games)."""
        t = self.cfg.actor.max_len
        return float((stats["length"] >= t).float().mean()) if t else 0.0

    # ---- the loop ------------------------------------------------------------------------------
    def _wandb(self, tags: list[str]):
        """One W&B run per run folder: named after it, resumed by id, metrics declared with their step.
        Ranks other than 0 get a disabled run (its calls do nothing)."""
        import wandb

        cfg = self.cfg
        if not self.is_main:
            return wandb.init(mode="disabled")
        self.wandb_id = self.wandb_id or secrets.token_hex(4)
        run = wandb.init(
            project=cfg.wandb_project,
            mode=os.environ.get("WANDB_MODE", cfg.wandb_mode),  # the environment wins (tests: disabled)
            dir=str(self.out),
            config=to_dict(cfg),
            name=self.out.name,
            id=self.wandb_id,
            resume="allow",
            group=cfg.wandb_group or None,
            tags=tags,
            job_type="blueprint",
        )
        run.define_metric("updates")
        run.define_metric("*", step_metric="updates")
        run.define_metric("eval/mean", step_metric="updates", summary="max")
        return run

    def run(self, tags: list[str] | None = None) -> EvalResult | None:
        """Train to total_updates (or max_minutes); None when the run had already finished."""
        from tqdm import tqdm

        cfg = self.cfg
        if self.finished:
            say(f"the run in {self.out} already finished ({self.counters['updates']} of total_updates="
                f"{cfg.total_updates}): nothing to do; pass a larger --total_updates to train further")
            self.server.close()
            return None
        if self.is_main:
            self.out.mkdir(parents=True, exist_ok=True)
        say(f"blueprint run in {self.out} from update {self.counters['updates']} on {self.device.type}")
        run = self._wandb(tags or [])
        start = time.time() - self.counters["wall_seconds"]
        last_ckpt = time.time()
        last_eval = self.counters["updates"] // cfg.eval_every
        bar = tqdm(
            total=cfg.total_updates,
            initial=self.counters["updates"],
            disable=not self.progress or not self.is_main,
            desc="updates",
            dynamic_ncols=True,
        )
        t_act = t_learn = 0.0
        steps_at, seqs = self.counters["actor_steps"], 0
        result = None
        reason = f"finished ({cfg.total_updates} updates)"
        signals = _StopSignals(deferred=self.fabric.world_size > 1)
        on_term = signals.install()
        stats: dict[str, torch.Tensor] | None = None
        actors = None
        try:
            if cfg.overlap:
                actors = _ActorThread(self)
            while self.counters["updates"] < cfg.total_updates:
                signum, timed_out = self._agree_stop(
                    signals.pending, bool(cfg.max_minutes) and time.time() - start > 60 * cfg.max_minutes
                )
                if signum:
                    raise Stopped(signal_name(signum), signum)
                if timed_out:
                    reason = f"time limit (max_minutes={cfg.max_minutes:g}) reached"
                    break
                t0 = time.time()
                stats = self.act_round() if actors is None else actors.next_round()
                t_act = (t_act + time.time() - t0) if actors is None else actors.seconds
                if len(self.replay) < cfg.min_replay:
                    bar.set_description(f"filling replay {len(self.replay)}/{cfg.min_replay} episodes")
                    continue
                bar.set_description("updates")
                t0 = time.time()
                for _ in range(cfg.updates_per_round):
                    info = self.update()
                    seqs += cfg.batch_size
                    bar.update(1)
                t_learn += time.time() - t0
                u = self.counters["updates"]
                log = {"train/" + k: float(v) for k, v in info.items()} | {
                    "updates": u,
                    "act/score": float(stats["score"].float().mean()),
                    "act/actor_steps_per_s": (self.counters["actor_steps"] - steps_at) / max(t_act, 1e-9),
                    "learn/seqs_per_s": seqs / max(t_learn, 1e-9),
                    "replay/size": len(self.replay),
                    "counters/episodes": self.counters["episodes"],
                }
                if u // cfg.eval_every > last_eval and self.is_main:
                    last_eval = u // cfg.eval_every
                    result = self.evaluate()
                    log |= {f"eval/{k}": v for k, v in result.to_dict().items()}
                    self.history.append(
                        {"updates": u, "wall_seconds": time.time() - start, **result.to_dict()}
                    )
                    bar.write(f"[{u} updates] {result}")
                    if result.mean > self.best:
                        self.best = result.mean
                        self.counters["wall_seconds"] = time.time() - start
                        self.save("best.pt")
                        run.summary["best/eval_mean"], run.summary["best/updates"] = result.mean, u
                run.log(log, step=u)
                bar.set_postfix(loss=f"{log['train/loss']:.3f}", score=f"{log['act/score']:.2f}")
                if time.time() - last_ckpt > 60 * cfg.checkpoint_minutes:
                    self.counters["wall_seconds"] = time.time() - start
                    self.save("latest.pt")
                    last_ckpt = time.time()
        except KeyboardInterrupt as e:
            signum = e.signum if isinstance(e, Stopped) else 2
            reason = f"stopped by {signal_name(signum)}"
            raise Stopped(reason, signum) from None
        except BaseException as e:
            reason = f"stopped by an error ({type(e).__name__})"
            raise
        finally:
            on_term()
            if actors is not None:
                actors.close()
            self.counters["wall_seconds"] = time.time() - start
            path = self.save("latest.pt")
            bar.close()
            say(f"{reason} at update {self.counters['updates']}: saved {path}")
            cut = self._cut_fraction(stats) if stats is not None else 0.0
            if cut > 0.05:  # e.g. a preset's max_len after --game.* made games longer
                say(f"warning: actor.max_len={cfg.actor.max_len} cut {100 * cut:.0f}% of the last round's "
                    f"games (this game can last {cfg.game.max_steps} steps); raise --actor.max_len, or 0 for "
                    "whole games")
            run.finish()
        if not self.is_main:
            return None
        return result if result is not None else self.evaluate()

    def _agree_stop(self, signum: int, timed_out: bool) -> tuple[int, bool]:
        """(signal to stop on or 0, time limit reached) as every rank sees it: the largest over the ranks
        (one all-reduce at the top of each round), so every rank stops at the same round."""
        if self.fabric.world_size == 1:
            return signum, timed_out
        flags = torch.tensor([signum, int(timed_out)], device=self.device)
        flags = self.fabric.all_reduce(flags, reduce_op="max").tolist()
        return int(flags[0]), bool(flags[1])


class _Cancelled(Exception):
    """Raised inside the actor thread's round when the run stops."""


class _ActorThread:
    """TrainConfig.overlap: rounds r, r+1, ... played in a background thread into a bounded queue.

    The learner's thread takes them in order (next_round) and inserts them into replay itself, so only
    one thread ever writes the replay. An error in the actor thread is raised again by next_round; close
    stops the round being played at its next step and joins the thread. Rounds still queued at a stop
    are dropped: the saved counters say which round comes next, so a resume plays them again.
    """

    DEPTH = 2
    """rounds played ahead of the learner at most"""

    def __init__(self, trainer: Trainer):
        self.trainer = trainer
        self.queue: queue.Queue = queue.Queue(maxsize=self.DEPTH)
        self.stop = threading.Event()
        self.seconds = 0.0  # spent playing rounds (the actor steps/s the log reports)
        dev = trainer.device
        self.stream = torch.cuda.Stream(dev) if dev.type == "cuda" else None
        first = trainer.counters["rounds"]
        self.thread = threading.Thread(target=self._loop, args=(first,), name="lbs-actor", daemon=True)
        self.thread.start()

    def _q_fn(self, *args):
        if self.stop.is_set():
            raise _Cancelled
        return self.trainer._q_fn(*args)

    def _loop(self, r: int) -> None:
        try:
            with torch.cuda.stream(self.stream) if self.stream is not None else contextlib.nullcontext():
                while not self.stop.is_set():
                    t0 = time.time()
                    episodes, stats = self.trainer._play_round(r, self._q_fn)
                    ready = None
                    if self.stream is not None:
                        ready = torch.cuda.Event()
                        ready.record(self.stream)
                        ready.synchronize()  # this thread waits for its own stream; the learner does not
                    self.seconds += time.time() - t0
                    self._put((r, episodes, stats, ready))
                    r += 1
        except _Cancelled:
            pass
        except BaseException as e:  # noqa: BLE001 - handed to the learner's thread, which raises it
            self._put(e)

    def _put(self, item) -> None:
        while not self.stop.is_set():
            try:
                self.queue.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def next_round(self) -> dict[str, torch.Tensor]:
        """Insert the next round into replay (as act_round does) and return its stats."""
        while True:
            try:
                item = self.queue.get(timeout=0.5)
                break
            except queue.Empty:
                if not self.thread.is_alive():
                    raise RuntimeError("the actor thread ended without a round or an error") from None
        if isinstance(item, BaseException):
            raise item
        r, episodes, stats, ready = item
        if ready is not None:  # made on the actor's stream: order this stream after it, keep memory alive
            here = torch.cuda.current_stream(self.trainer.device)
            here.wait_event(ready)
            for t in (*episodes.values(), *stats.values()):
                t.record_stream(here)
        assert r == self.trainer.counters["rounds"], (r, self.trainer.counters["rounds"])
        self.trainer._add_round(episodes)
        return stats

    def close(self) -> None:
        self.stop.set()
        self.thread.join()


class _StopSignals:
    """Signals that stop a run. One process: SIGTERM raises Stopped at once, like Ctrl-C (the loop's
    finally writes latest.pt). Several (DDP): SIGTERM and SIGINT are only recorded in `pending`; the loop
    agrees on them at the top of the next round (Trainer._agree_stop), so every rank stops there together
    rather than one rank leaving the others blocked in a gradient all-reduce."""

    def __init__(self, deferred: bool):
        self.deferred, self.pending = deferred, 0

    def install(self):
        """Install the handlers; returns the undo."""
        import signal
        import threading

        if threading.current_thread() is not threading.main_thread():
            return lambda: None

        def handler(signum, frame):
            if not self.deferred:
                raise Stopped("SIGTERM", signum)
            self.pending = self.pending or signum

        sigs = (signal.SIGTERM, signal.SIGINT) if self.deferred else (signal.SIGTERM,)
        old = {s: signal.signal(s, handler) for s in sigs}
        return lambda: [signal.signal(s, h) for s, h in old.items()]


def apply_preset(name: str) -> TrainConfig:
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose from {sorted(PRESETS)}")
    return replace(PRESETS[name])
