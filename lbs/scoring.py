"""Score a policy over N seeded games: mean ± s.e.m., perfect and bomb-out rates.

From the command line: `python train/score.py checkpoints/blueprint_2p.pt --games 5000`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

from .acting import InitHidden, QFunction, play
from .graphs import Graphs
from .hanabi import engine
from .hanabi.config import GameConfig
from .seeding import Stream, game_seeds


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


def evaluate(
    game: GameConfig,
    q_fn: QFunction,
    init_hidden: InitHidden,
    games: int = 1000,
    seed: int = 0,
    batch: int = 1000,
    device: torch.device | str = "cpu",
    stream: Stream = Stream.EVAL,
    graphs: Graphs | None = None,
) -> EvalResult:
    """Greedy self-play on games 0 .. games-1 of (stream, seed): fixed deals, comparable across runs.
    graphs: replay the step as a CUDA graph (lbs.graphs); q_fn must read weights updated in place."""
    if games < 1 or batch < 1:
        raise ValueError(f"games={games} and batch={batch} must be >= 1")
    out = {k: [] for k in ("score", "perfect", "bombed", "length")}
    for start in range(0, games, batch):
        seeds = game_seeds(stream, seed, min(games, start + batch) - start, start, device)
        state = engine.reset(game, seeds)
        with torch.no_grad():
            state, _ = play(game, state, q_fn, init_hidden(seeds.shape[0] * game.players), game.max_steps,
                            graphs=graphs)
        out["score"].append(state.score)
        out["perfect"].append(state.fireworks.sum(1) == game.max_score)
        out["bombed"].append(state.life_tokens <= 0)
        out["length"].append(state.num_steps)
    return summarize(*(torch.cat(out[k]) for k in ("score", "perfect", "bombed", "length")))
