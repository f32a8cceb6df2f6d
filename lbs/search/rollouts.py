"""Rollouts and leaf values: what one (root, sampled hand, first move) is worth.

A rollout starts from a root whose searcher hand was replaced by a sample, makes the candidate move,
then every seat plays the blueprint greedily (lbs.acting.play, the package's one lockstep loop) for k
more moves. Its return is the score gained so far plus, at the leaf, the VDN team value: the sum over
seats of the blueprint's Q of its greedy action (LBS paper, eq. 4). With no depth the rollout plays
to the end of the game (LBS-inf, SPARTA) and the return is the score gained.
"""

from __future__ import annotations

import torch

from ..acting import Policy, QFunction, Turn, play, seat_q
from ..graphs import Graphs
from ..hanabi import engine
from ..hanabi.config import GameConfig
from ..hanabi.state import HanabiState
from ..models.qnet import select_rows


def leaf_value(game: GameConfig, state: HanabiState, q_fn: QFunction, hid: tuple) -> torch.Tensor:
    """[R] sum over seats of the blueprint's Q of its greedy legal action (the waiting seats' no-op
    included); 0 for finished games. hid: the seats' recurrent state before this state's observation."""
    r, p = state.batch_size, game.players
    _, legal, q, _ = seat_q(game, state, q_fn, hid)
    legal = legal.reshape(r * p, -1)
    best = q.float().masked_fill(~legal, float("-inf")).max(-1).values.reshape(r, p).sum(1)
    return torch.where(state.done, torch.zeros_like(best), best)


def rollout_returns(game: GameConfig, root: HanabiState, hid: tuple, first: torch.Tensor,
                    q_fn: Policy, depth: int | None, horizon: int, graphs: Graphs | None = None,
                    keep_lost_points: bool = False, value_fn: QFunction | None = None) -> torch.Tensor:
    """Returns [R] of R rollouts: make `first` [R] in `root` [R], then `depth` greedy blueprint moves
    and bootstrap (depth None: play to the end, no bootstrap). `horizon`: moves after `first` that
    finish every game (engine.moves_left_bound); no rollout plays more, the rest would only idle.

    hid: every seat's recurrent state [layers, R*P, hidden] after reading the root's observation
    (the public-LSTM state, shared by every sample). No host sync: the loop length is fixed, so with
    `graphs` its step is captured once per batch size and replayed (lbs.graphs). On the CPU, without
    graphs, finished games leave the batch instead (_play_out_shrinking): the same returns, less work.
    keep_lost_points: a lost game is worth its points minus one (SearchConfig.keep_lost_points).
    value_fn: the step whose Q the leaf reads (default q_fn; q_fn may then be one read for its moves alone,
    Blueprint.moves).
    """
    value_fn = value_fn or q_fn
    after, _, _ = engine.step(game, root, first)
    steps = horizon if depth is None else min(depth, horizon)
    if graphs is None and root.device.type == "cpu":
        return _play_out_shrinking(game, root, after, q_fn, hid, steps, depth is not None, keep_lost_points,
                                   value_fn)
    end, hid = play(game, after, q_fn, hid, steps, graphs=graphs)
    gained = (rollout_score(end, keep_lost_points) - root.score).float()
    if depth is None:
        return gained
    return gained + leaf_value(game, end, value_fn, hid)


def rollout_score(state: HanabiState, keep_lost_points: bool) -> torch.Tensor:
    """[B] what a rollout's game is worth now: its score, or with keep_lost_points a lost game's points
    minus one (at least 0) instead of HLE's 0."""
    if not keep_lost_points:
        return state.score
    lost = (state.life_tokens <= 0).to(state.score.dtype)
    points = state.fireworks.sum(1).to(state.score.dtype)
    return state.score + lost * ((points - 1).clamp(min=0) - state.score)


SHRINK_AT = 4
"""A shrinking playout drops the finished games once they are at least 1/SHRINK_AT of its batch."""


def _play_out_shrinking(game: GameConfig, root: HanabiState, state: HanabiState, q_fn: Policy, hid: tuple,
                        steps: int, bootstrap: bool, keep_lost_points: bool, value_fn: QFunction
                        ) -> torch.Tensor:
    """rollout_returns' playout where reading the batch is free (the CPU): play until a quarter of the games
    are over, drop them, go on with the rest. A rollout's moves depend on its own row alone, so the
    returns are those of the fixed-length loop, for the moves the games really last instead of the longest
    game's bound."""
    p = game.players
    out = torch.zeros(root.batch_size, dtype=torch.float32, device=root.device)
    rows = torch.arange(root.batch_size, device=root.device)  # the batch's rows in the rollouts
    while True:
        played = 0

        def enough(turn: Turn) -> bool:
            nonlocal played
            played += 1
            return bool(turn.next_state.done.sum() * SHRINK_AT >= turn.next_state.batch_size)

        if steps > 0:
            state, hid = play(game, state, q_fn, hid, steps, hook=enough)
        steps -= played
        over = state.done if steps > 0 else torch.ones_like(state.done)
        value = (rollout_score(state, keep_lost_points) - root.score.index_select(0, rows)).float()
        if bootstrap and steps == 0:
            value = value + leaf_value(game, state, value_fn, hid)
        out[rows[over]] = value[over]
        keep = (~over).nonzero().squeeze(1)
        if not keep.numel():
            return out
        state, rows = state.index(keep), rows.index_select(0, keep)
        hid = select_rows(hid, (keep[:, None] * p + torch.arange(p, device=keep.device)).reshape(-1))
