"""Self-play feeding replay: rounds of N lockstep games with the acting weights the InferenceServer holds.

A round's deals and exploration depend on its index alone (rank r plays games r*N .. r*N+N-1 of the
training stream, so ranks never share a deal). Rounds go into replay on the learner's thread only, with
the learner's TD errors as their first priorities. With TrainConfig.overlap an ActorThread plays the next
rounds in the background (its own CUDA stream) while the learner updates.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable

import torch
from torch import nn

from ..graphs import Graphs
from ..hanabi.rng import hash_keys
from ..infer import InferenceServer, QNetHandle
from ..models.qnet import make_qnet
from ..seeding import Stream, game_seeds
from .actors import run_round
from .config import TrainConfig
from .r2d2 import apex_epsilons
from .replay import PrioritizedReplay

Episodes = dict[str, torch.Tensor]
LEARNER = "learner"
"""Name of the copy of the learner's network that evaluation plays, in self-play's server."""


class SelfPlay:
    """The actors of one rank: they play rounds with the served weights and add them to replay.

    `rounds`, `episodes` and `actor_steps` count what went into replay; `seconds` the time spent acting."""

    def __init__(self, cfg: TrainConfig, rank: int, device: torch.device, replay: PrioritizedReplay,
                 priorities: Callable[[Episodes], torch.Tensor], learner: nn.Module):
        self.cfg, self.rank, self.device = cfg, rank, device
        self.replay, self.priorities = replay, priorities
        # one caller at a time per model, inline: the acting thread (overlap: the actor thread, on its own
        # stream) runs the forward passes itself. LEARNER: the learner's weights as of the latest evaluation
        # the actors' model is the network whose moves are played (a HeldQNet's policy: its Q is never read)
        self.server = InferenceServer(make_qnet(cfg.game, cfg.net).mover, device=device)
        self.server.register(LEARNER, learner.mover)  # a copy, in the learner's dtype
        self.blueprint = self.server.qnet()
        self.eps_ladder = apex_epsilons(cfg.actor.num_games, cfg.actor.eps_base, cfg.actor.eps_alpha)
        self.graphs = Graphs(device) if cfg.actor.cuda_graphs else None  # actor rounds
        self.rounds = self.episodes = self.actor_steps = 0
        self.seconds = 0.0
        self.thread: ActorThread | None = None

    def explore(self, base: float) -> None:
        """The Ape-X ladder of exploration rates, from `base` (a phase's own, or the actors')."""
        self.eps_ladder = apex_epsilons(self.cfg.actor.num_games, base, self.cfg.actor.eps_alpha)

    def sync(self, net: nn.Module) -> None:
        """Serve `net`'s moves to the actors (the learner's network, or a values phase's anchor)."""
        self.server.update_weights(net.mover.state_dict())

    def serve_learner(self, net: nn.Module) -> QNetHandle:
        """The learner's network now, its moves served as LEARNER beside the actors' copy (evaluation plays
        them)."""
        self.server.update_weights(net.mover.state_dict(), LEARNER)
        return self.server.qnet(LEARNER)

    def q_fn(self, priv, publ, legal, hid):
        return self.blueprint.step(priv, publ, legal, hid)

    def init_hidden(self, rows: int):
        return self.blueprint.initial_state(rows)

    def play_round(self, r: int, q_fn: Callable | None = None) -> tuple[Episodes, dict[str, torch.Tensor]]:
        """Self-play round r (its deals and exploration depend on r only) with `q_fn` (default: the served
        network); any thread."""
        cfg = self.cfg
        n = cfg.actor.num_games
        # rank r plays games r*n .. r*n+n-1 of the stream: ranks never share a deal, rank 0 keeps one device's
        seeds = game_seeds(Stream.BLUEPRINT_TRAIN, cfg.seed, n, start=self.rank * n, device=self.device)
        draw = hash_keys(seeds, torch.full_like(seeds, r)) % n  # Ape-X rate per game, re-drawn each round
        eps = self.eps_ladder.to(self.device)[draw].float()
        with torch.no_grad(), self.server.pinned() as weights:
            return run_round(
                cfg.game, q_fn or self.q_fn, self.init_hidden, seeds, r, cfg.actor, eps=eps,
                aux=cfg.net.aux_head, graphs=self.graphs, weights=weights,
            )

    def add_round(self, episodes: Episodes) -> None:
        """Priorities from the learner, then into replay: the learner's thread only."""
        self.replay.add(episodes, self.priorities(episodes))
        self.rounds += 1
        self.episodes += self.cfg.actor.num_games
        self.actor_steps += int(episodes["mask"].sum())

    def act_round(self) -> dict[str, torch.Tensor]:
        """Play the next round here and add it to replay; its stats (score, length per game)."""
        episodes, stats = self.play_round(self.rounds)
        self.add_round(episodes)
        return stats

    def start(self) -> None:
        """Play the next rounds ahead in an ActorThread (TrainConfig.overlap) until close."""
        self.thread = ActorThread(self)

    def next_round(self) -> dict[str, torch.Tensor]:
        """The next round into replay, played here or taken from the actor thread; its stats."""
        if self.thread is not None:
            stats = self.thread.next_round()
            self.seconds = self.thread.seconds
            return stats
        t0 = time.time()
        stats = self.act_round()
        self.seconds += time.time() - t0
        return stats

    def cut_fraction(self, stats: dict[str, torch.Tensor]) -> float:
        """Fraction of a round's games that actor.max_len cut (one host sync; 0 when whole games)."""
        t = self.cfg.actor.max_len
        return float((stats["length"] >= t).float().mean()) if t else 0.0

    def counters(self) -> dict[str, int]:
        return {"rounds": self.rounds, "episodes": self.episodes, "actor_steps": self.actor_steps}

    def load_counters(self, counters: dict) -> None:
        """A resumed run's counters: the next round is the one after the last saved."""
        self.rounds, self.episodes = counters.get("rounds", 0), counters.get("episodes", 0)
        self.actor_steps = counters.get("actor_steps", 0)

    def stop(self) -> None:
        """Stop and join the actor thread, if one plays."""
        if self.thread is not None:
            self.thread.close()
            self.thread = None

    def close(self) -> None:
        self.stop()
        self.server.close()


class Cancelled(Exception):
    """Raised inside the actor thread's round when the run stops."""


class ActorThread:
    """Rounds r, r+1, ... played in a background thread into a bounded queue.

    The learner's thread takes them in order (next_round) and adds them to replay itself, so only one
    thread ever writes the replay. An error in the actor thread is raised again by next_round; close stops
    the round being played at its next step and joins the thread. Rounds still queued at a stop are
    dropped: the saved counters say which round comes next, so a resume plays them again.
    """

    DEPTH = 2
    """rounds played ahead of the learner at most"""

    def __init__(self, selfplay: SelfPlay):
        self.selfplay = selfplay
        self.queue: queue.Queue = queue.Queue(maxsize=self.DEPTH)
        self.halt = threading.Event()
        self.seconds = 0.0  # spent playing rounds (the actor steps/s the log reports)
        dev = selfplay.device
        self.stream = torch.cuda.Stream(dev) if dev.type == "cuda" else None
        first = selfplay.rounds
        self.thread = threading.Thread(target=self.loop, args=(first,), name="lbs-actor", daemon=True)
        self.thread.start()

    def q_fn(self, *args):
        """The served network's step, or Cancelled once the run stops."""
        if self.halt.is_set():
            raise Cancelled
        return self.selfplay.q_fn(*args)

    def loop(self, r: int) -> None:
        """The thread's body: play rounds r, r+1, ... until close."""
        try:
            with torch.cuda.stream(self.stream) if self.stream is not None else contextlib.nullcontext():
                while not self.halt.is_set():
                    t0 = time.time()
                    episodes, stats = self.selfplay.play_round(r, self.q_fn)
                    ready = None
                    if self.stream is not None:
                        ready = torch.cuda.Event()
                        ready.record(self.stream)
                        ready.synchronize()  # this thread waits for its own stream; the learner does not
                    self.seconds += time.time() - t0
                    self.put((r, episodes, stats, ready))
                    r += 1
        except Cancelled:
            pass
        except BaseException as e:  # noqa: BLE001 - handed to the learner's thread, which raises it
            self.put(e)

    def put(self, item) -> None:
        while not self.halt.is_set():
            try:
                self.queue.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def next_round(self) -> dict[str, torch.Tensor]:
        """Add the next round to replay (as SelfPlay.act_round does) and return its stats."""
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
            here = torch.cuda.current_stream(self.selfplay.device)
            here.wait_event(ready)
            for t in (*episodes.values(), *stats.values()):
                t.record_stream(here)
        assert r == self.selfplay.rounds, (r, self.selfplay.rounds)
        self.selfplay.add_round(episodes)
        return stats

    def close(self) -> None:
        self.halt.set()
        self.thread.join()
