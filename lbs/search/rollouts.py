"""Rollouts and leaf values: what one (root, sampled hand, first move) is worth.

A rollout starts from a root whose searcher hand was replaced by a sample, makes the candidate move,
then every seat plays the blueprint greedily (lbs.acting.play, the package's one lockstep loop) for k
more moves. Its return is the score gained so far plus, at the leaf, the VDN team value: the sum over
seats of the blueprint's Q of its greedy action (LBS paper, eq. 4). With no depth the rollout plays
to the end of the game (LBS-inf, SPARTA) and the return is the score gained.
"""

from __future__ import annotations

import torch

from ..acting import QFunction, play, seat_q
from ..graphs import Graphs
from ..hanabi import engine
from ..hanabi.config import GameConfig
from ..hanabi.state import HanabiState


def leaf_value(game: GameConfig, state: HanabiState, q_fn: QFunction, hid: tuple) -> torch.Tensor:
    """[R] sum over seats of the blueprint's Q of its greedy legal action (the waiting seats' no-op
    included); 0 for finished games. hid: the seats' recurrent state before this state's observation."""
    r, p = state.batch_size, game.players
    _, legal, q, _ = seat_q(game, state, q_fn, hid)
    legal = legal.reshape(r * p, -1)
    best = q.float().masked_fill(~legal, float("-inf")).max(-1).values.reshape(r, p).sum(1)
    return torch.where(state.done, torch.zeros_like(best), best)


def rollout_returns(game: GameConfig, root: HanabiState, hid: tuple, first: torch.Tensor, q_fn: QFunction,
                    depth: int | None, horizon: int, graphs: Graphs | None = None) -> torch.Tensor:
    """Returns [R] of R rollouts: make `first` [R] in `root` [R], then `depth` greedy blueprint moves
    and bootstrap (depth None: play to the end, no bootstrap). `horizon`: moves after `first` that
    finish every game (engine.moves_left_bound); no rollout plays more, the rest would only idle.

    hid: every seat's recurrent state [layers, R*P, hidden] after reading the root's observation
    (the public-LSTM state, shared by every sample). No host sync: the loop length is fixed, so with
    `graphs` its step is captured once per batch size and replayed (lbs.graphs).
    """
    after, _, _ = engine.step(game, root, first)
    end, hid = play(game, after, q_fn, hid, horizon if depth is None else min(depth, horizon), graphs=graphs)
    gained = (end.score - root.score).float()
    if depth is None:
        return gained
    return gained + leaf_value(game, end, q_fn, hid)
