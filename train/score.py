"""Score a blueprint checkpoint with greedy self-play on fixed deals.

    python train/score.py checkpoints/blueprint_2p.pt --games 5000 --seed 0 --device auto

Games 0 .. games-1 of the evaluation stream of `--seed` (lbs.seeding): the same deals on any device
and for any --batch, so numbers are comparable across runs and with model cards.
"""

from __future__ import annotations

import argparse
import sys

from lbs.ckpt import CheckpointError
from lbs.models import load_blueprint, resolve_device
from lbs.scoring import evaluate
from lbs.seeding import Stream, game_seeds


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint", help="blueprint checkpoint (.pt)")
    ap.add_argument("--games", type=int, default=1000, help="games to play (default 1000)")
    ap.add_argument("--seed", type=int, default=0, help="run seed: which fixed deals (default 0)")
    ap.add_argument("--batch", type=int, default=1000, help="games played at once (default 1000)")
    ap.add_argument("--device", default="auto", help="cpu, cuda or auto (default)")
    args = ap.parse_args(argv)
    try:
        if args.games < 1 or args.batch < 1:
            raise ValueError(f"--games {args.games} and --batch {args.batch} must be >= 1")
        game_seeds(Stream.EVAL, args.seed, 1)  # checks the seed's range
        device = resolve_device(args.device)
        game, net = load_blueprint(args.checkpoint, device=device)
    except (CheckpointError, ValueError) as e:
        sys.exit(f"score: {e}")
    print(evaluate(game, net.step, lambda b: net.initial_state(b, device), args.games, args.seed, args.batch,
                   device))


if __name__ == "__main__":
    main()
