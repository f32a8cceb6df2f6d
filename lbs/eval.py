"""Score a policy or a blueprint checkpoint over N seeded games.

python -m lbs.eval checkpoints/blueprint_2p.pt --games 5000 --seed 0 --device auto
"""

from __future__ import annotations

import argparse
import math
from dataclasses import asdict, dataclass

import torch

from .actors import ActorConfig, InitHidden, QFunction, run_round
from .hanabi.config import GameConfig


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
) -> EvalResult:
    """Greedy self-play on games seeded seed*10**6 + i (fixed seeds: comparable across runs)."""
    cfg = ActorConfig(num_games=batch, max_len=game.max_steps)
    out = {k: [] for k in ("score", "perfect", "bombed", "length")}
    for start in range(0, games, batch):
        seeds = seed * 10**6 + torch.arange(start, min(games, start + batch), device=device)
        with torch.no_grad():
            _, stats = run_round(game, q_fn, init_hidden, seeds, episode=0, cfg=cfg, record=False)
        for k in out:
            out[k].append(stats[k])
    return summarize(*(torch.cat(out[k]) for k in ("score", "perfect", "bombed", "length")))


def main(argv: list[str] | None = None) -> None:
    from .blueprint import load_blueprint, resolve_device

    ap = argparse.ArgumentParser(description="Score a blueprint checkpoint with greedy self-play.")
    ap.add_argument("checkpoint")
    ap.add_argument("--games", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--device", default="auto")
    args = ap.parse_args(argv)
    device = resolve_device(args.device)
    game, net = load_blueprint(args.checkpoint, device=device)
    res = evaluate(
        game, net.step, lambda b: net.initial_state(b, device), args.games, args.seed, args.batch, device
    )
    print(res)


if __name__ == "__main__":
    main()
