"""Single-agent search (SPARTA / LBS): one seat searches, every other seat plays the blueprint.

At each of the searcher's turns, in every game being played at once: draw candidate hands from a
sampler, roll every legal move out on every valid hand (common random numbers: the same hand and the
same reshuffled deck for every move), in rounds of `min_rollouts` per move within a budget of
`rollouts`, pruning moves that fall `prune_z` standard errors behind; then play the best move if it
beats the blueprint move by more than `delta`, else the blueprint move (LBS paper, Fig. 1B and
"Implementation Details"; SPARTA, single-agent search).

A decision's rollouts (games x samples x moves) are one engine batch (in chunks of `max_rows`); the
only host syncs are between rounds (to size the next batch) and once per real move.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import torch

from ..acting import InitHidden, QFunction, env_moves, greedy, observe
from ..graphs import Graphs
from ..hanabi import engine
from ..hanabi.config import GameConfig
from ..hanabi.encode import public_features
from ..hanabi.interop.record import GameRecord
from ..hanabi.rng import hash_keys
from ..hanabi.state import HanabiState
from ..infer import InferenceServer
from ..seeding import Stream, game_seeds, pack
from ..shards import ONE, Shard
from .exact_range import ExactRange
from .pruning import MoveStats, choose, prune
from .rollouts import rollout_returns
from .samplers import HandSampler, LearnedBelief


@dataclass
class SearchConfig:
    """How one seat searches."""

    depth: int | None = 16
    """blueprint moves after the candidate move before bootstrapping with Q (LBS-k); None: play to the
    end of the game (LBS-inf, SPARTA)"""
    rollouts: int = 10_000
    """rollouts per searched move, split over the moves still in play"""
    min_rollouts: int = 100
    """rollouts each legal move gets before it may be pruned; also the samples drawn per round"""
    prune_z: float = 2.0
    """a move whose mean is more than this many standard errors below the best stops receiving rollouts"""
    delta: float = 0.05
    """play the search move only if its mean beats the blueprint move's by more than this"""
    min_valid: int = 1
    """fewer valid sampled hands than this in the first round: play the blueprint move (a fallback)"""
    seat: int = 0
    """the searching seat; every other seat plays the blueprint"""
    max_rows: int = 8192
    """rollouts run in one engine batch (memory cap); results do not depend on it"""
    cuda_graphs: bool = False
    """capture the rollout step as a CUDA graph per batch size and replay it (lbs.graphs); batches are
    padded to powers of two so a few graphs serve every decision. Off CUDA it runs eagerly (tests)"""

    def check(self, game: GameConfig) -> None:
        """ValueError naming the field, before any work."""
        if self.depth is not None and (not isinstance(self.depth, int) or self.depth < 0):
            raise ValueError(f"SearchConfig.depth={self.depth!r}: must be an int >= 0 or None (to the end)")
        for name in ("rollouts", "min_rollouts", "max_rows"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"SearchConfig.{name}={getattr(self, name)!r}: must be an int >= 1")
        if not 0 <= self.min_valid <= self.min_rollouts:
            raise ValueError(f"SearchConfig.min_valid={self.min_valid}: must be in 0..min_rollouts "
                             f"({self.min_rollouts})")
        if self.prune_z <= 0 or self.delta < 0:
            raise ValueError(f"SearchConfig: prune_z={self.prune_z} must be > 0 and delta={self.delta} >= 0")
        if not 0 <= self.seat < game.players:
            raise ValueError(f"SearchConfig.seat={self.seat}: must be in 0..{game.players - 1} "
                             f"for {game.players} players")
        need = self.min_rollouts * game.num_moves
        if self.rollouts < need:
            raise ValueError(f"SearchConfig.rollouts={self.rollouts} is too small: every one of up to "
                             f"{game.num_moves} legal moves needs min_rollouts={self.min_rollouts} rollouts "
                             f"(at least {need}); raise rollouts or lower min_rollouts")


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


@dataclass
class Timing:
    """Seconds spent, by kind (measured only when profiling; CUDA is synchronised around each part)."""

    networks: float = 0.0
    """blueprint forward passes (real games and rollouts)"""
    sampler: float = 0.0
    """the hand sampler: following the real games (belief encoder steps; range updates and counterfactual
    filters) and drawing hands"""
    rollouts: float = 0.0
    """rollouts, networks included"""
    drawing: float = 0.0
    """the part of `sampler` spent drawing hands for searched moves (SPARTA: with the deferred counterfactual
    filters of the searched games, which run there)"""

    def clock(self) -> float:
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        return time.perf_counter()

    def add(self, t0: float, *what: str) -> None:
        """The time since t0 (one clock read) added to each of `what`."""
        dt = self.clock() - t0
        for name in what:
            setattr(self, name, getattr(self, name) + dt)

    def wrap(self, fn: Callable, what: str = "networks") -> Callable:
        """fn, with its wall time added to `what`."""

        def run(*a, **kw):
            t0 = self.clock()
            out = fn(*a, **kw)
            self.add(t0, what)
            return out

        return run


class Searcher:
    """Decides the searcher's moves for a batch of games; q_fn serves the blueprint (VDN seats)."""

    def __init__(self, game: GameConfig, q_fn: QFunction, sampler: HandSampler, cfg: SearchConfig, seed: int,
                 timing: Timing | None = None, graphs: Graphs | None = None):
        cfg.check(game)
        self.game, self.q_fn, self.sampler, self.cfg, self.seed = game, q_fn, sampler, cfg, seed
        self.timing, self.graphs = timing, graphs

    def decide(self, state: HanabiState, games: torch.Tensor, hid: tuple, blueprint: torch.Tensor,
               step: int, game_ids: torch.Tensor) -> Decision:
        """Moves for the games [G'] (indices into the batch) where the searcher is to move.

        state: the batch's real games; hid: every seat's blueprint state after reading this state's
        observation [layers, G*P, hidden]; blueprint [G] the blueprint's moves; game_ids [G] global
        game numbers (they key the random draws, so a game's decisions do not depend on its batch).
        """
        game, cfg, p = self.game, self.cfg, self.game.players
        root = state.index(games)
        g_n, m_n, dev = games.shape[0], game.num_moves, state.device
        legal = engine.legal_moves(game, root)  # [G', M]
        live = legal.clone()
        stats = MoveStats.zeros(g_n, m_n, dev)
        used = torch.zeros(g_n, dtype=torch.long, device=dev)
        fallback = torch.zeros(g_n, dtype=torch.bool, device=dev)
        base = hash_keys(pack(Stream.SEARCH, self.seed, game_ids.index_select(0, games)), step)  # [G']
        seat = torch.full((g_n,), cfg.seat, dtype=torch.long, device=dev)
        seats = torch.arange(p, device=dev)
        # Moves after the first that finish every rollout: a rollout that plays to the end (or a depth
        # beyond the end) stops there instead of idling to the longest possible game.
        n, horizon = cfg.min_rollouts, int(engine.moves_left_bound(game, root).max()) - 1
        # Pad rollout batches to powers of two with graphs (a few captures serve every decision) and on
        # CUDA (cheap there, and graphs on or off then run the same shapes, hence the same kernels).
        pad = self.graphs is not None or dev.type == "cuda"
        rnd = 0
        while True:
            n_live = live.sum(1)
            go = ~fallback & (used + n_live * n <= cfg.rollouts) & ((n_live > 1) | (rnd == 0))
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
                h = type(hid)(*(x.index_select(1, rows_hid) for x in hid))
                ret = rollout_returns(game, start, h, m, self.q_fn, cfg.depth, horizon, self.graphs)
                stats.add(g[:r_n], m[:r_n], ret[:r_n])
            self._add(t0, "rollouts")
            used = used + n_live * n * go
            live = prune(stats, live, cfg.min_rollouts, cfg.prune_z)
            rnd += 1
        bp = blueprint.index_select(0, games)
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


def play_games(game: GameConfig, q_fn: QFunction, init_hidden: InitHidden,
               make_sampler: Callable[[], HandSampler] | None, cfg: SearchConfig, games: int, seed: int = 0,
               batch_games: int = 64, device: torch.device | str = "cpu", timing: Timing | None = None,
               progress: Callable[[int], None] | None = None, groups: int = 1, shard: Shard = ONE,
               first: int = 0) -> list[GameResult]:
    """Play games first..first+games-1 of the evaluation stream of `seed`, `batch_games` at a time, the
    searcher searching at each of its turns (make_sampler None: every seat plays the blueprint).

    groups > 1 splits each batch into that many groups played by concurrent threads, whose network calls
    an InferenceServer with coalescing (ServerConfig.coalesce) merges into shared forward passes. A
    game's moves do not depend on batch_games or groups: its random draws are keyed by its number. So with
    a Shard, each rank plays its slice of the game numbers and rank 0 gets every game's result in game
    order, the same as one process (the other ranks get [])."""
    if groups < 1 or batch_games < 1 or first < 0:
        raise ValueError(f"groups={groups} and batch_games={batch_games} must be >= 1, first={first} >= 0")
    out: list[GameResult] = []
    # one set of captured rollout steps per concurrent group: replays share their static buffers
    graphs = [Graphs(device) if cfg.cuda_graphs else None for _ in range(groups)]
    part = shard.games(games)
    mine = range(first + part.start, first + part.stop)
    pool = ThreadPoolExecutor(groups, thread_name_prefix="lbs-search") if groups > 1 else None
    try:
        for start in range(mine.start, mine.stop, batch_games):
            ids = torch.arange(start, min(mine.stop, start + batch_games), device=device)
            parts = [p for p in ids.tensor_split(groups) if len(p)]
            if pool is None:
                out += _play_batch(game, q_fn, init_hidden, make_sampler, cfg, ids, seed, device, timing,
                                   graphs[0])
            else:
                args = (game, q_fn, init_hidden, make_sampler, cfg)
                jobs = [pool.submit(_play_batch, *args, part, seed, device, None, graphs[i])
                        for i, part in enumerate(parts)]
                out += [r for job in jobs for r in job.result()]
            if progress is not None:
                progress(len(ids))
    finally:
        if pool is not None:
            pool.shutdown()
    return shard.gather(out)


def _play_batch(game: GameConfig, q_fn: QFunction, init_hidden: InitHidden,
                make_sampler: Callable[[], HandSampler] | None, cfg: SearchConfig, ids: torch.Tensor,
                seed: int, device: torch.device | str, timing: Timing | None,
                graphs: Graphs | None = None) -> list[GameResult]:
    g_n, p = ids.shape[0], game.players
    state = engine.reset(game, game_seeds(Stream.EVAL, seed, g_n, int(ids[0]), device))
    deck = state.deck.cpu()
    hid = init_hidden(g_n * p)
    sampler = make_sampler() if make_sampler is not None else None
    searcher = Searcher(game, q_fn, sampler, cfg, seed, timing, graphs) if sampler is not None else None
    clock = timing.clock if timing is not None else (lambda: 0.0)
    if sampler is not None:
        t0 = clock()
        sampler.reset(state)
        if timing is not None:
            timing.add(t0, "sampler")
    moves: list[torch.Tensor] = []
    decisions: list[tuple[int, Decision]] = []
    for t in range(game.max_steps):
        if bool(state.done.all()):
            break
        obs, legal = observe(game, state)
        priv = obs.reshape(g_n * p, -1).float()
        legal = legal.reshape(g_n * p, -1)
        q, hid_next = q_fn(priv, public_features(game, priv), legal, hid)
        blueprint = env_moves(game, state, greedy(q, legal).reshape(g_n, p))
        move = blueprint
        turn = (state.cur_player == cfg.seat) & ~state.done
        if searcher is not None and bool(turn.any()):
            where = turn.nonzero().squeeze(1)
            dec = searcher.decide(state, where, hid_next, blueprint, t, ids)
            move = blueprint.index_copy(0, where, dec.move)
            decisions.append((t, dec))
        new, _, _ = engine.step(game, state, move)
        if sampler is not None:
            t0 = clock()
            sampler.update(state, move, new)
            if timing is not None:
                timing.add(t0, "sampler")
        moves.append(torch.where(state.done, -1, move))
        state, hid = new, hid_next
    return _results(game, deck, torch.stack(moves, 1).cpu() if moves else None, state, decisions)


def _results(game: GameConfig, deck: torch.Tensor, moves: torch.Tensor | None, final: HanabiState,
             decisions: list[tuple[int, Decision]]) -> list[GameResult]:
    score, bombed = final.score.cpu(), (final.life_tokens <= 0).cpu()
    out = []
    for i in range(deck.shape[0]):
        played = [] if moves is None else [int(m) for m in moves[i] if m >= 0]
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


MODES = ("blueprint", "lbs-K (K >= 1)", "lbs-inf", "sparta")


def parse_mode(mode: str) -> tuple[str, int | None]:
    """'blueprint' | 'lbs-K' | 'lbs-inf' | 'sparta' -> (sampler: 'none' | 'belief' | 'range', depth or None
    to play to the end). ValueError with the accepted modes for anything else."""
    if mode == "blueprint":
        return "none", None
    if mode == "sparta":
        return "range", None
    if mode == "lbs-inf":
        return "belief", None
    if mode.startswith("lbs-") and mode[4:].isdigit():
        k = int(mode[4:])
        if k >= 1:
            return "belief", k
        raise ValueError(f"mode {mode!r}: LBS needs at least one rollout move (lbs-1 or more, or lbs-inf)")
    raise ValueError(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")


def sampler_factory(kind: str, game: GameConfig, server: InferenceServer, seat: int,
                    max_range: int = 1_000_000) -> Callable[[], HandSampler] | None:
    """A fresh sampler per batch of games for a parse_mode kind: 'belief' (the learned belief served as
    "belief" by the server), 'range' (SPARTA's exact range over the server's blueprint), 'none' (no
    search)."""
    if kind == "belief":
        return lambda: LearnedBelief(game, server, seat)
    if kind == "range":
        return lambda: ExactRange(game, server.qnet(), seat, max_range=max_range)
    return None
