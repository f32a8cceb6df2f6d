"""Single-agent search (SPARTA / LBS): one seat searches, every other seat plays the blueprint.

At each of the searcher's turns, in every game being played at once: draw candidate hands from a
sampler, roll every legal move out on every valid hand (common random numbers: the same hand and the
same reshuffled deck for every move), in rounds of `min_rollouts` per move within a budget of
`rollouts` (shared by the moves in play, or each move's share as the reference SPARTA spends it:
`reference_budget`), pruning moves that fall `prune_z` standard errors behind; then play the best move if it
beats the blueprint move by more than `delta`, else the blueprint move (LBS paper, Fig. 1B and
"Implementation Details"; SPARTA, single-agent search).

A decision's rollouts (games x samples x moves) are one engine batch (in chunks of `max_rows`); the
only host syncs are between rounds (to size the next batch) and once per real move. The real games are
the package's one lockstep loop (acting.play): the search replaces the searcher's move through its
override, and the hand sampler follows every move through its hook.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from ..acting import Policy, QFunction, Turn, play
from ..graphs import Graphs
from ..hanabi import engine
from ..hanabi.config import GameConfig
from ..hanabi.interop.record import GameRecord
from ..hanabi.rng import hash_keys
from ..hanabi.state import HanabiState
from ..models.qnet import select_rows
from ..seeding import Stream, game_seeds, pack
from .config import SearchConfig
from .pruning import MoveStats, choose, prune, prune_bounds
from .rollouts import rollout_returns
from .samplers import HandSampler
from .timing import Timing

if TYPE_CHECKING:
    from .setup import SearchSetup


@dataclass
class Decision:
    """One searched move in G' games (host tensors, for the record)."""

    games: torch.Tensor  # [G'] indices into the batch
    move: torch.Tensor  # [G'] move played
    blueprint: torch.Tensor  # [G'] the blueprint's move
    deviated: torch.Tensor  # [G'] bool: the search move replaced the blueprint move
    fallback: torch.Tensor  # [G'] bool: too few valid hands, the blueprint move was played
    mean: torch.Tensor  # [G', M] mean return per move (0 where not rolled out)
    count: torch.Tensor  # [G', M] rollouts per move
    legal: torch.Tensor  # [G', M]


class Searcher:
    """Decides the searcher's moves for a batch of games; q_fn plays the blueprint's seats in the rollouts
    (VDN seats; a StatePolicy for a blueprint that reads the engine state, SearchSetup.playout); depth: the
    blueprint moves after the candidate move before bootstrapping with Q (LBS-K), None: to the end
    (Mode.depth); value_fn: the step whose Q the leaf reads (default q_fn, which may then be read for its
    moves alone, SearchSetup.playout)."""

    def __init__(self, game: GameConfig, q_fn: Policy, sampler: HandSampler, cfg: SearchConfig,
                 depth: int | None, seed: int, timing: Timing | None = None, graphs: Graphs | None = None,
                 value_fn: QFunction | None = None):
        cfg.check(game)
        self.game, self.q_fn, self.sampler, self.cfg, self.seed = game, q_fn, sampler, cfg, seed
        self.value_fn = value_fn
        self.depth = depth
        self.timing, self.graphs = timing, graphs

    def decide(self, state: HanabiState, games: torch.Tensor, hid: tuple, blueprint: torch.Tensor,
               step: int, game_ids: torch.Tensor, allowed: torch.Tensor | None = None) -> Decision:
        """Moves for the games [G'] (indices into the batch) where the searcher is to move.

        state: the batch's real games; hid: every seat's blueprint state after reading this state's
        observation [layers, G*P, hidden]; blueprint [G] the blueprint's moves; game_ids [G] global
        game numbers (they key the random draws, so a game's decisions do not depend on its batch);
        allowed [G, M]: the moves the search may consider (default: every legal move).
        """
        game, cfg, p = self.game, self.cfg, self.game.players
        root = state.index(games)
        g_n, m_n, dev = games.shape[0], game.num_moves, state.device
        legal = engine.legal_moves(game, root)  # [G', M]
        if allowed is not None:
            legal = legal & allowed.index_select(0, games)
        live = legal.clone()
        stats = MoveStats.zeros(g_n, m_n, dev)
        used = torch.zeros(g_n, dtype=torch.long, device=dev)
        fallback = torch.zeros(g_n, dtype=torch.bool, device=dev)
        base = hash_keys(pack(Stream.SEARCH, self.seed, game_ids.index_select(0, games)), step)  # [G']
        bp = blueprint.index_select(0, games)
        seat = torch.full((g_n,), cfg.seat, dtype=torch.long, device=dev)
        seats = torch.arange(p, device=dev)
        # Moves after the first that finish every rollout: a rollout that plays to the end (or a depth
        # beyond the end) stops there instead of idling to the longest possible game.
        n, horizon = cfg.min_rollouts, int(engine.moves_left_bound(game, root).max()) - 1
        share = cfg.rollouts // legal.sum(1)  # samples per move under the reference budget
        # Pad rollout batches to powers of two with graphs (a few captures serve every decision) and on
        # CUDA (cheap there, and graphs on or off then run the same shapes, hence the same kernels).
        pad = self.graphs is not None or dev.type == "cuda"
        rnd = 0
        while True:
            n_live = live.sum(1)
            room = (rnd + 1) * n <= share if cfg.reference_budget else used + n_live * n <= cfg.rollouts
            go = ~fallback & room & ((n_live > 1) | (rnd == 0))
            if not bool(go.any()):  # host sync between rounds: sizes the next batch
                break
            keys = hash_keys(base, rnd)
            t0 = self._clock()
            samples = self.sampler.sample(n, keys, games)
            self._add(t0, "sampler", "drawing")
            valid = samples.valid & go[:, None]
            if rnd == 0:
                fallback = valid.sum(1) < cfg.min_valid
                valid = valid & ~fallback[:, None]
            rows = (valid[:, :, None] & live[:, None, :]).nonzero()  # [R, 3]: (game, sample, move)
            t0 = self._clock()
            for chunk in rows.split(cfg.max_rows) if rows.shape[0] else ():
                r_n = chunk.shape[0]
                if pad:  # static shapes: a few batch sizes serve every decision
                    chunk = torch.cat([chunk, chunk[:1].expand(_bucket(r_n, cfg.max_rows) - r_n, -1)])
                g, j, m = chunk.unbind(1)
                hands = samples.hands[g, j]  # [R, H]
                start = engine.set_hand(game, root.index(g), seat.index_select(0, g), hands,
                                        hash_keys(keys[g], j))  # the same deck for every move (CRN)
                rows_hid = (games[g][:, None] * p + seats).reshape(-1)
                h = select_rows(hid, rows_hid)
                ret = rollout_returns(game, start, h, m, self.q_fn, self.depth, horizon, self.graphs,
                                      cfg.keep_lost_points, self.value_fn)
                stats.add(g[:r_n], m[:r_n], ret[:r_n])
            self._add(t0, "rollouts")
            used = used + n_live * n * go
            if cfg.reference_budget:
                live = prune_bounds(stats, live, cfg.min_rollouts, cfg.prune_z, bp, cfg.delta)
            else:
                live = prune(stats, live, cfg.min_rollouts, cfg.prune_z)
            rnd += 1
        move, deviated = choose(stats, live, bp, cfg.delta)
        move = torch.where(fallback, bp, move)
        return Decision(games=games.cpu(), move=move, blueprint=bp.cpu(),
                        deviated=(deviated & ~fallback).cpu(), fallback=fallback.cpu(),
                        mean=stats.mean.float().cpu(), count=stats.count.long().cpu(), legal=legal.cpu())

    def _clock(self) -> float:
        return self.timing.clock() if self.timing is not None else 0.0

    def _add(self, t0: float, *what: str) -> None:
        if self.timing is not None:
            self.timing.add(t0, *what)


def _bucket(rows: int, cap: int) -> int:
    """The padded batch size for `rows` rollouts: the next power of two (at least 64), at most cap."""
    return min(cap, max(64, 1 << (rows - 1).bit_length()))


@dataclass
class GameResult:
    """One game played with search: its record and every searched move."""

    record: GameRecord
    bombed: bool
    searched: int = 0
    deviated: int = 0
    fallbacks: int = 0
    rollouts: int = 0
    decisions: list[dict] = field(default_factory=list)




@dataclass(frozen=True)
class Progress:
    """Where a play_games call stands, reported after every real move (summed over concurrent groups)."""

    games: int
    """games finished (a batch's games finish together)"""
    moves: int
    """real moves made so far"""
    searched: int
    """searched moves so far"""
    searched_left: int
    """an upper bound on the searched moves still to come (engine.moves_left_bound, the searcher's turns)"""


def play_batch(setup: SearchSetup, ids: torch.Tensor, seed: int, graphs: Graphs | None,
               tally: Tally | None) -> list[GameResult]:
    """The games `ids` through the package's lockstep loop (acting.play), the searcher's moves replaced by
    the search's; the loop ends once every game is over."""
    game, cfg, timing = setup.game, setup.cfg, setup.timing
    g_n = ids.shape[0]
    state = engine.reset(game, game_seeds(Stream.EVAL, seed, g_n, int(ids[0]), setup.device))
    deck = state.deck.cpu()
    q_fn = setup.q_fn
    sampler = setup.sampler()
    searcher = Searcher(game, setup.playout, sampler, cfg, setup.mode.depth, seed, timing, graphs, q_fn) \
        if sampler is not None else None
    if sampler is not None:
        reset, update = sampler.reset, sampler.update
        if timing is not None:
            reset, update = timing.wrap(reset, "sampler"), timing.wrap(update, "sampler")
        reset(state)
    moves: list[torch.Tensor] = []
    decisions: list[tuple[int, Decision]] = []
    key = object()  # this batch's entry in the tally
    if tally is not None:
        tally.start(key, g_n, _searcher_turns(game, state, cfg.seat) if searcher is not None else None)

    def search(t: int, st: HanabiState, hid: tuple, blueprint: torch.Tensor) -> torch.Tensor:
        turn = (st.cur_player == cfg.seat) & ~st.done
        if not bool(turn.any()):
            return blueprint
        where = turn.nonzero().squeeze(1)
        dec = searcher.decide(st, where, hid, blueprint, t, ids)
        decisions.append((t, dec))
        return blueprint.index_copy(0, where, dec.move)

    def follow(turn: Turn) -> bool:
        if sampler is not None:
            update(turn.state, turn.move, turn.next_state)
        moves.append(torch.where(turn.state.done, -1, turn.move))
        if tally is not None:
            searched = len(decisions[-1][1].games) if decisions and decisions[-1][0] == turn.t else 0
            tally.step(key, int((~turn.state.done).sum()), searched, _searcher_turns(
                game, turn.next_state, cfg.seat) if searcher is not None else None)
        return bool(turn.next_state.done.all())

    final, _ = play(game, state, q_fn, setup.initial_state(g_n * game.players), game.max_steps, hook=follow,
                    override=search if searcher is not None else None)
    if tally is not None:
        tally.finish(key, g_n)
    return game_results(game, deck, torch.stack(moves, 1).cpu(), final, decisions)


def _searcher_turns(game: GameConfig, state: HanabiState, seat: int) -> int:
    """An upper bound on the searcher's turns still to come in the batch: of each game's remaining moves
    (engine.moves_left_bound, the first by the player to move), those that fall to `seat`."""
    to_seat = (seat - state.cur_player) % game.players  # moves before the searcher's next turn
    left = engine.moves_left_bound(game, state) - 1 - to_seat
    return int((torch.div(left, game.players, rounding_mode="floor") + 1).clamp(min=0).sum())


class Tally:
    """Progress of one play_games call, summed over the batches its groups play at once (thread-safe)."""

    def __init__(self, report: Callable[[Progress], None], games: int):
        self.report, self.lock = report, threading.Lock()
        self.games = self.moves = self.searched = 0
        self.unstarted, self.per_game = games, None  # a fresh deal's bound, per game (from the first batch)
        self.left: dict[object, int] = {}

    def start(self, key: object, games: int, left: int | None) -> None:
        with self.lock:
            self.unstarted -= games
            if left is not None:
                self.per_game = self.per_game or -(-left // games)
                self.left[key] = left

    def step(self, key: object, moves: int, searched: int, left: int | None) -> None:
        with self.lock:
            self.moves, self.searched = self.moves + moves, self.searched + searched
            if left is not None:
                self.left[key] = left
            self._send()

    def finish(self, key: object, games: int) -> None:
        with self.lock:
            self.games += games
            self.left.pop(key, None)
            self._send()

    def _send(self) -> None:
        later = self.unstarted * (self.per_game or 0)
        self.report(Progress(self.games, self.moves, self.searched, sum(self.left.values()) + later))


def game_results(game: GameConfig, deck: torch.Tensor, moves: torch.Tensor, final: HanabiState,
                 decisions: list[tuple[int, Decision]]) -> list[GameResult]:
    """Each game's record (its deck and moves) and search statistics, from a batch's moves and decisions."""
    score, bombed = final.score.cpu(), (final.life_tokens <= 0).cpu()
    out = []
    for i in range(deck.shape[0]):
        played = [int(m) for m in moves[i] if m >= 0]
        rec = GameRecord(game.to_dict(), deck[i].tolist(), played, int(score[i]))
        out.append(GameResult(rec, bool(bombed[i])))
    for step, d in decisions:
        chosen = d.move.cpu()  # one copy per decision, not one device read per game
        for k, i in enumerate(d.games.tolist()):
            res = out[i]
            res.searched += 1
            res.deviated += int(d.deviated[k])
            res.fallbacks += int(d.fallback[k])
            res.rollouts += int(d.count[k].sum())
            cand = d.legal[k].nonzero().flatten().tolist()
            res.decisions.append({
                "step": step, "move": int(chosen[k]), "blueprint": int(d.blueprint[k]),
                "deviated": bool(d.deviated[k]), "fallback": bool(d.fallback[k]),
                "candidates": {game.move_name(m): {"id": m, "mean": round(float(d.mean[k, m]), 4),
                                                   "rollouts": int(d.count[k, m])} for m in cand},
            })
    return out
