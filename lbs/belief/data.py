"""Belief training data: a frozen blueprint's self-play feeding a replay of (episode, player) streams.

Round r of a run with seed s plays games 0..N-1 of the belief-training deal stream of s (lbs.seeding),
episode r: never a blueprint training, validation or evaluation deal.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import replace

import torch
from torch import nn
from torch.utils.data import IterableDataset

from ..graphs import Graphs
from ..hanabi.config import GameConfig
from ..hanabi.engine import tables
from ..infer import InferenceServer, ServerConfig
from ..rl.actors import ActorConfig, run_round
from ..rl.r2d2 import apex_epsilons
from ..rl.replay import PrioritizedReplay, UniformSampler
from ..seeding import Stream, game_seeds
from .config import BeliefTrainConfig


# ---- streams --------------------------------------------------------------------------------------
def stream_spec(game: GameConfig, max_len: int) -> dict[str, tuple]:
    """Replay fields of one (episode, player) stream: observations as bytes, floats when sampled."""
    return {
        "priv": ((max_len, game.private_dim), torch.uint8, torch.float32),
        "hand": ((max_len, game.hand_size), torch.int8, torch.long),
        "acted": ((max_len,), torch.int8, torch.long),
    }


def episodes_to_streams(game: GameConfig, episodes: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """run_round's [N, T, P, ...] episodes -> [N*P, T, ...] streams (row n*P + p); hands -1 after the end;
    acted: the slot the stream's player plays or discards at that step, -1 when it makes no such move."""
    priv, hand, mask = episodes["priv"], episodes["own_hand"], episodes["mask"]
    n, t, p = mask.shape[0], mask.shape[1], priv.shape[2]
    hand = torch.where(mask[:, :, None, None], hand, torch.full_like(hand, -1))
    slot_of = tables(game, mask.device).move_info[:, 1]  # per move id; -1 for hints
    slot_of = torch.cat([slot_of, slot_of.new_full((1,), -1)])  # the no-op of a seat not to move
    acted = torch.where(mask[:, :, None], slot_of[episodes["action"]], -1)
    return {
        "priv": priv.transpose(1, 2).reshape(n * p, t, -1),
        "hand": hand.transpose(1, 2).reshape(n * p, t, -1),
        "acted": acted.transpose(1, 2).reshape(n * p, t).to(torch.int8),
    }


# ---- data producer ---------------------------------------------------------------------------------
class BeliefData:
    """A frozen blueprint's self-play feeding a replay of streams; a thread keeps adding rounds.

    add/sample hold one lock. sample() blocks until min_replay streams are in, re-raises a producer
    failure, and returns None once close() was called. Round r plays games 0..N-1 of the run seed's
    BELIEF_TRAIN stream (lbs.seeding), episode r.
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
        # the moves alone are read (a policy network beside Q: the policy, Q never run)
        self.server = InferenceServer(blueprint.mover, device=self.device, cfg=ServerConfig(coalesce=False))
        cap = cfg.replay_capacity
        self.replay = PrioritizedReplay(cap, stream_spec(game, self.max_len), device=self.device,
                                        seed=cfg.seed, sampler=UniformSampler(cap, self.device))
        self.graphs = Graphs(self.device) if cfg.cuda_graphs else None  # the producer's rounds
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
        seeds = game_seeds(Stream.BELIEF_TRAIN, self.cfg.seed, n, device=self.device)
        with torch.no_grad():
            blueprint = self.server.qnet()
            episodes, stats = run_round(self.game, blueprint.step, blueprint.initial_state, seeds, r,
                                        self.actor, eps=self.eps, graphs=self.graphs)
        return episodes_to_streams(self.game, episodes), stats["score"]

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

    def stop(self) -> None:
        """Stop the producer after its current round. The blueprint stays served: validation plays through
        the same server (it runs calls inline, so it holds no thread)."""
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()

    def close(self) -> None:
        """Stop the producer and release the inference server."""
        self.stop()
        self.server.close()


class ReplayBatches(IterableDataset):
    """Endless batches of streams from BeliefData (starts the producer on first use)."""

    def __init__(self, data: BeliefData, batch_size: int):
        self.data, self.batch_size = data, batch_size

    def __iter__(self):
        self.data.start()
        while (batch := self.data.sample(self.batch_size)) is not None:
            yield batch
