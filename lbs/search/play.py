"""Playing whole games with a search set-up: batches of games one after another (or in concurrent groups), one
searching seat's loop (agent), both seats' (joint_range, multi-agent SPARTA) or every seat's tree search
(mcts_play), gathered over shards."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import torch

from ..graphs import Graphs
from ..shards import ONE, Shard
from . import agent, joint_range, mcts_play
from .agent import GameResult, Progress, Tally

if TYPE_CHECKING:
    from .setup import SearchSetup


def play_games(setup: SearchSetup, games: int, seed: int = 0, batch_games: int = 64, *,
               progress: Callable[[Progress], None] | None = None, groups: int = 1, shard: Shard = ONE,
               first: int = 0) -> list[GameResult]:
    """Play games first..first+games-1 of the evaluation stream of `seed`, `batch_games` at a time, the
    searcher searching at each of its turns (the blueprint mode: every seat plays the blueprint).

    groups > 1 splits each batch into that many groups played by concurrent threads, whose network calls
    an InferenceServer with coalescing merges into shared forward passes (SearchSetup.of(coalesce=True)).
    A game's moves do not depend on batch_games or groups: its random draws are keyed by its number. So
    with a Shard, each rank plays its slice of the game numbers and rank 0 gets every game's result in
    game order, the same as one process (the other ranks get [])."""
    if groups < 1 or batch_games < 1 or first < 0:
        raise ValueError(f"groups={groups} and batch_games={batch_games} must be >= 1, first={first} >= 0")
    if groups > 1 and setup.timing is not None:
        raise ValueError("profiling times one group: play with groups=1 or without timing")
    out: list[GameResult] = []
    # one set of captured rollout steps per concurrent group: replays share their static buffers
    graphs = [Graphs(setup.device) if setup.cfg.cuda_graphs else None for _ in range(groups)]
    # sparta-ma: both seats search; a tree search: every seat
    play_batch = (joint_range.play_batch if setup.mode.joint else mcts_play.play_batch if setup.mode.tree
                  else agent.play_batch)
    part = shard.games(games)
    mine = range(first + part.start, first + part.stop)
    tally = Tally(progress, len(mine)) if progress is not None else None
    pool = ThreadPoolExecutor(groups, thread_name_prefix="lbs-search") if groups > 1 else None
    try:
        for start in range(mine.start, mine.stop, batch_games):
            ids = torch.arange(start, min(mine.stop, start + batch_games), device=setup.device)
            if pool is None:
                out += play_batch(setup, ids, seed, graphs[0], tally)
            else:
                parts = [p for p in ids.tensor_split(groups) if len(p)]
                jobs = [pool.submit(play_batch, setup, part, seed, graphs[i], tally)
                        for i, part in enumerate(parts)]
                out += [r for job in jobs for r in job.result()]
    finally:
        if pool is not None:
            pool.shutdown()
    return shard.gather(out)
