"""Score a policy over N seeded games: mean ± s.e.m., perfect and bomb-out rates.

From the command line: `python train/score.py checkpoints/blueprint_2p.pt --games 5000`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from dataclasses import asdict, dataclass

import torch

from .acting import InitHidden, Policy, play, until_all_over
from .graphs import Graphs
from .hanabi import engine
from .hanabi.config import GameConfig
from .seeding import Stream, game_seeds
from .shards import ONE, Shard

FIELDS = ("score", "perfect", "bombed", "length")
"""Per-game outcomes eval_games returns."""


@dataclass
class EvalResult:
    games: int
    mean: float
    sem: float
    perfect: float  # fraction of games scoring the maximum
    bombed: float  # fraction of games that lost every life
    mean_length: float

    def __str__(self) -> str:
        return (
            f"score {self.mean:.3f} ± {self.sem:.3f} over {self.games} games, "
            f"perfect {100 * self.perfect:.1f}%, bomb-out {100 * self.bombed:.1f}%, "
            f"length {self.mean_length:.1f}"
        )

    def to_dict(self) -> dict:
        return asdict(self)


def summarize(
    scores: torch.Tensor, perfect: torch.Tensor, bombed: torch.Tensor, length: torch.Tensor
) -> EvalResult:
    s = scores.double().cpu()
    n = s.numel()
    sem = float(s.std(unbiased=True) / math.sqrt(n)) if n > 1 else 0.0
    return EvalResult(
        games=n,
        mean=float(s.mean()),
        sem=sem,
        perfect=float(perfect.double().mean()),
        bombed=float(bombed.double().mean()),
        mean_length=float(length.double().mean()),
    )


def eval_games(
    game: GameConfig,
    q_fn: Policy,
    init_hidden: InitHidden,
    games: int = 1000,
    seed: int = 0,
    batch: int = 1000,
    device: torch.device | str = "cpu",
    stream: Stream = Stream.EVAL,
    shard: Shard = ONE,
    graphs: Graphs | None = None,
    weights: Hashable = None,
) -> dict[str, torch.Tensor] | None:
    """Greedy self-play on games 0 .. games-1 of (stream, seed): per game (in game order, on the CPU) the
    final score, perfect and bombed flags and length. With a Shard, this rank plays its slice of the games
    and rank 0 receives every game's row (other ranks: None), exactly as one process would play them.
    graphs: replay the step as a CUDA graph (lbs.graphs); q_fn must read weights updated in place, or
    `weights` must name the copy it reads (InferenceServer.pinned)."""
    if games < 1 or batch < 1:
        raise ValueError(f"games={games} and batch={batch} must be >= 1")
    out = {k: [] for k in FIELDS}
    mine = shard.games(games)
    for start in range(mine.start, mine.stop, batch):
        seeds = game_seeds(stream, seed, min(mine.stop, start + batch) - start, start, device)
        state = engine.reset(game, seeds)
        with torch.no_grad():
            state, _ = play(game, state, q_fn, init_hidden(seeds.shape[0] * game.players), game.max_steps,
                            graphs=graphs, weights=weights, hook=until_all_over(state.device))
        out["score"].append(state.score.cpu())
        out["perfect"].append((state.fireworks.sum(1) == game.max_score).cpu())
        out["bombed"].append((state.life_tokens <= 0).cpu())
        out["length"].append(state.num_steps.cpu())
    parts = shard.gather([out])
    if not shard.main:
        return None
    return {k: torch.cat([x for part in parts for x in part[k]]) for k in FIELDS}


def evaluate(
    game: GameConfig,
    q_fn: Policy,
    init_hidden: InitHidden,
    games: int = 1000,
    seed: int = 0,
    batch: int = 1000,
    device: torch.device | str = "cpu",
    stream: Stream = Stream.EVAL,
    shard: Shard = ONE,
    graphs: Graphs | None = None,
    weights: Hashable = None,
) -> EvalResult | None:
    """Greedy self-play on games 0 .. games-1 of (stream, seed): fixed deals, comparable across runs.
    With a Shard the games are split over its ranks; the result is rank 0's (other ranks: None)."""
    rows = eval_games(game, q_fn, init_hidden, games, seed, batch, device, stream, shard, graphs, weights)
    return summarize(*(rows[k] for k in FIELDS)) if rows is not None else None


def play_policy(game: GameConfig, policy: Callable, games: int, seed: int) -> EvalResult:
    """Score a state policy (game, state, seeds) -> moves, such as the scripted ones in
    lbs.hanabi.policies, on the blueprint trainer's validation deals: the baselines of its learning curve."""
    seeds = game_seeds(Stream.BLUEPRINT_VAL, seed, games)
    state = engine.reset(game, seeds, torch.zeros_like(seeds))
    for _ in range(game.max_steps):
        state, _, _ = engine.step(game, state, policy(game, state, seeds))
    perfect = state.fireworks.sum(1) == game.max_score
    return summarize(state.score, perfect, state.life_tokens <= 0, state.num_steps)
