"""Why does LBS help or hurt a blueprint? The same search with the true hand instead of belief samples
(an oracle: it peeks, so only a diagnostic) or with another delta, paired with the blueprint.

    python experiments/diagnose_lbs.py --sampler true --delta 0.05 --games 64    # the search machinery alone
    python experiments/diagnose_lbs.py --sampler belief --delta 0.5 --games 64   # fewer noisy deviations
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from lbs.models import load_belief, load_blueprint
from lbs.search.agent import SearchConfig, parse_mode, play_games, sampler_factory
from lbs.search.report import summarize_run
from lbs.search.samplers import TrueHand, serve

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", default="lbs-1")
    ap.add_argument("--sampler", choices=("true", "belief"), default="belief")
    ap.add_argument("--delta", type=float, default=0.05)
    ap.add_argument("--games", type=int, default=64)
    ap.add_argument("--rollouts", type=int, default=1000)
    ap.add_argument("--min-rollouts", type=int, default=50)
    ap.add_argument("--blueprint", default=str(ROOT / "checkpoints" / "blueprint_2p.pt"))
    ap.add_argument("--belief", default=str(ROOT / "checkpoints" / "belief_2p.pt"))
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    game, net = load_blueprint(args.blueprint)
    _, model = load_belief(args.belief, blueprint_path=args.blueprint, game=game)
    server = serve(net, model)
    _, depth = parse_mode(args.mode)
    cfg = SearchConfig(depth=depth, rollouts=args.rollouts, min_rollouts=args.min_rollouts, delta=args.delta)
    make = (
        (lambda: TrueHand(game, cfg.seat))
        if args.sampler == "true"
        else sampler_factory("belief", game, server, net, cfg.seat)
    )
    with torch.no_grad():
        t0 = time.perf_counter()
        res = play_games(game, server.step, server.initial_state, make, cfg, args.games, 0, 64)
        seconds = time.perf_counter() - t0
        base = play_games(game, server.step, server.initial_state, None, cfg, args.games, 0, 64)
    print(f"{args.mode}, sampler {args.sampler}, delta {args.delta}:")
    for line in summarize_run(args.mode, res, base, seconds, game.max_score).lines():
        print(line)


if __name__ == "__main__":
    main()
