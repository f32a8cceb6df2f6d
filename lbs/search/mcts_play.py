"""Whole games with a tree search (MO-ISMCTS, RIS-MCTS) at every seat: the paper's "all players use the
same agent". Every move of every game in the batch is one lockstep `mcts.search` call over the games still
running; its simulation policy is MctsConfig.sim_policy's (or its leaves are valued by the learned
evaluation function, MctsConfig.evaluation), its random numbers keyed by game number and
move, so a game's moves do not depend on the batch it is played in (play_games' contract). One move of the
batch is `search_running` then `make_moves`, which the tree-search tables (experiments/mcts.py) play too."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import torch

from ..acting import Policy, greedy_moves, playout_policy
from ..graphs import Graphs
from ..hanabi import GameConfig, engine
from ..hanabi.interop.record import GameRecord
from ..hanabi.rng import hash_keys
from ..hanabi.state import HanabiState
from ..models.io import RULE_BOTS
from ..models.qnet import select_rows
from ..seeding import Stream, game_seeds, pack
from .agent import GameResult, Tally
from .mcts import BlueprintPolicy, LeafValues, MctsConfig, MctsResult, search

if TYPE_CHECKING:
    from .setup import SearchSetup


def simulation_policy(setup: SearchSetup, cfg: MctsConfig) -> tuple[Policy, object] | None:
    """(step or state reader, the module whose initial_state starts it) for MctsConfig.sim_policy: the run's
    blueprint as rollouts play it (SearchSetup.playout), a rule bot by name built for the game, or None for
    uniformly random moves."""
    if cfg.sim_policy == "random":  # (MctsConfig.evaluation, valued leaves, needs it so)
        return None
    if cfg.sim_policy == "blueprint":
        return setup.playout, setup
    bot = RULE_BOTS[cfg.sim_policy](setup.game, setup.device)
    return playout_policy(bot, bot.step), bot


def search_running(game: GameConfig, state: HanabiState, cfg: MctsConfig, base: torch.Tensor,
                   policy: Policy | None, hid, evaluate: LeafValues | None
                   ) -> tuple[torch.Tensor, MctsResult]:
    """Search the move of every game still running (live: their rows), each keyed by its search key `base`
    [G] and its move number; the simulation policy's seats start from `hid` [G * players]."""
    p = game.players
    live = (~state.done).nonzero().squeeze(1)
    root = state.index(live)
    keys = hash_keys(base.index_select(0, live), root.num_steps)
    blueprint = None
    if policy is not None:
        rows = (live[:, None] * p + torch.arange(p, device=state.device)).reshape(-1)
        blueprint = BlueprintPolicy(policy, select_rows(hid, rows))
    return live, search(game, root, cfg, keys, blueprint, evaluate)


def make_moves(game: GameConfig, state: HanabiState, live: torch.Tensor, res: MctsResult,
               policy: Policy | None, hid) -> tuple[HanabiState, object, torch.Tensor]:
    """Make the searched moves (the others' a no-op where the game is over): the next state, the simulation
    policy's state after every seat read the state the move is made in, and the moves [G]."""
    move = torch.zeros(state.batch_size, dtype=torch.long, device=state.device).index_copy(0, live, res.move)
    if policy is not None:
        _, hid = greedy_moves(game, state, policy, hid)
    return engine.step(game, state, move)[0], hid, move


def play_batch(setup: SearchSetup, ids: torch.Tensor, seed: int, graphs: Graphs | None,
               tally: Tally | None) -> list[GameResult]:
    """The games `ids` (global numbers) to their end, every move searched. Host syncs: one per real move
    (which games still run) and the search's own (lbs.search.mcts.search)."""
    del graphs  # tree search captures no graphs
    game, dev, p = setup.game, setup.device, setup.game.players
    cfg = dataclasses.replace(setup.mcts, mode=str(setup.mode))
    g_n = ids.shape[0]
    state = engine.reset(game, game_seeds(Stream.EVAL, seed, g_n, int(ids[0]), dev))
    deck = state.deck.cpu()
    policy = simulation_policy(setup, cfg)
    step, hid = (policy[0], policy[1].initial_state(g_n * p)) if policy is not None else (None, None)
    evaluate = setup.evaluation.leaf_values if setup.evaluation is not None else None
    base = pack(Stream.SEARCH, seed, ids)  # [G] each game's search key
    key = object()
    if tally is not None:
        tally.start(key, g_n, int(engine.moves_left_bound(game, state).sum()))
    moves, decisions = [], []
    while not bool(state.done.all()):
        live, res = search_running(game, state, cfg, base, step, hid, evaluate)
        decisions.append((int(state.num_steps.max()), live.cpu(), res))
        done = state.done
        state, hid, move = make_moves(game, state, live, res, step, hid)
        moves.append(torch.where(done, -1, move))
        if tally is not None:
            tally.step(key, live.numel(), live.numel(), int(engine.moves_left_bound(game, state).sum()))
    if tally is not None:
        tally.finish(key, g_n)
    return _results(game, deck, torch.stack(moves, 1).cpu(), state, decisions, cfg.iterations)


def _results(game, deck: torch.Tensor, moves: torch.Tensor, final, decisions: list, iterations: int
             ) -> list[GameResult]:
    """Records and, per searched move, its root statistics: each tried move's visits and mean scaled score,
    and the decision depth (the deepest node of that tree)."""
    score, bombed = final.score.cpu(), (final.life_tokens <= 0).cpu()
    out = []
    for i in range(deck.shape[0]):
        played = [int(m) for m in moves[i] if m >= 0]
        out.append(GameResult(GameRecord(game.to_dict(), deck[i].tolist(), played, int(score[i])),
                              bool(bombed[i])))
    for step, live, res in decisions:
        visits, value, move = res.visits.cpu(), res.value.cpu(), res.move.cpu()
        for k, i in enumerate(live.tolist()):
            r = out[i]
            r.searched += 1
            r.rollouts += iterations
            tried = visits[k].nonzero().flatten().tolist()
            r.decisions.append({
                "step": step, "move": int(move[k]), "depth": res.stats.depth[k],
                "candidates": {game.move_name(m): {"id": m, "visits": int(visits[k, m]),
                                                   "mean": round(float(value[k, m] / visits[k, m]), 4)}
                               for m in tried},
            })
    return out
