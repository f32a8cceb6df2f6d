"""Score a blueprint with greedy self-play on fixed deals (and a belief on those games).

    python train/score.py checkpoints/blueprint_2p.pt --games 5000 --seed 0 --device auto
    python train/score.py checkpoints/blueprint_2p.pt --belief checkpoints/belief_2p.pt --games 1000
    python train/score.py smartbot --players 3 --games 10000

The blueprint is a checkpoint file or a rule bot's name (`smartbot`, for `--players` players). A BAD
checkpoint (train/bad.py) plays its greedy partial policy with its public belief on the same deals; its line
adds the mean with every lost game at 0 (HLE's rule), since BAD trains with the points kept. A belief
trained for another blueprint is scored on this one's games all the same (how far it carries over, e.g. a
warm start's first guess), with a line that says so.

Games 0 .. games-1 of the evaluation stream of `--seed` (lbs.seeding): the same deals on any device,
for any --batch and any --devices, so numbers are comparable across runs and with model cards.
`--devices N` plays the games in N processes (N GPUs with --device cuda), each its slice of the game
numbers; the first process prints the numbers of all games, the same as one process.
"""

from __future__ import annotations

import argparse
import sys

from lbs import ckpt, cli
from lbs.acting import playout_policy
from lbs.bad.trainer import KIND as BAD_KIND
from lbs.bad.trainer import evaluate as evaluate_bad
from lbs.bad.trainer import load_bad
from lbs.belief.evaluate import evaluate_belief
from lbs.ckpt import CheckpointError
from lbs.graphs import Graphs
from lbs.infer import InferenceServer
from lbs.models import OtherBlueprint, load_belief, load_blueprint, resolve_device
from lbs.scoring import evaluate
from lbs.seeding import Stream
from lbs.shards import launch, plan, rank_device


def is_bad(path: str) -> bool:
    """Whether `path` is a BAD checkpoint (its header says so; a rule bot's name or a blueprint is not)."""
    try:
        header = ckpt.read_header(path)
    except CheckpointError:  # not a file: a rule bot's name, or a missing file load_blueprint names
        return False
    return header is not None and header.get("kind") == BAD_KIND


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint", help="blueprint checkpoint (.pt), or a rule bot: smartbot")
    ap.add_argument("--players", type=int, default=None,
                    help="players, for a rule bot (default 2); a checkpoint carries its own game")
    ap.add_argument("--games", type=int, default=1000, help="games to play (default 1000)")
    ap.add_argument("--seed", type=int, default=0, help="run seed: which fixed deals (default 0)")
    ap.add_argument("--batch", type=int, default=1000, help="games played at once (default 1000)")
    ap.add_argument("--device", default="auto", help="cpu, cuda or auto (default)")
    ap.add_argument("--cuda-graphs", "--cuda_graphs", action="store_true",
                    help="replay the game step as a captured CUDA graph (CUDA only)")
    ap.add_argument("--devices", type=int, default=1,
                    help="processes (GPUs with cuda) sharing the games (default 1)")
    ap.add_argument("--belief", default=None, help="also score this belief on the blueprint's games: "
                    "cross-entropy of the true hands per card against the grounded and counting beliefs (a "
                    "belief trained for another blueprint is scored all the same, and the output says so)")
    args = ap.parse_args(argv)
    bad = None
    try:
        cli.games(args.games)
        cli.at_least("--batch", args.batch, 1)
        cli.seed("--seed", args.seed)
        shard = plan(args.devices)
        device = rank_device(shard, resolve_device(args.device))
        if args.cuda_graphs and device.type != "cuda":
            raise ValueError(f"--cuda-graphs needs a CUDA device (the run is on {device.type})")
        if is_bad(args.checkpoint):
            if args.belief or args.cuda_graphs or args.devices > 1 or args.players:
                raise ValueError("a BAD checkpoint is scored on one process, without --belief, --cuda-graphs "
                                 "or --players (its game is its own)")
            _, cfg, bad = load_bad(args.checkpoint, device)
        else:
            game, net = load_blueprint(args.checkpoint, device, players=args.players)
        if args.belief:
            try:
                _, model = load_belief(args.belief, blueprint_path=args.checkpoint, game=game, device=device)
            except OtherBlueprint as e:  # how far a belief carries over to another blueprint's games
                _, model = load_belief(args.belief, game=game, device=device)
                if shard.main:
                    print(f"belief: {e}; scored on this blueprint's games all the same")
    except (CheckpointError, ValueError) as e:
        sys.exit(f"score: {e}")
    if bad is not None:  # the same deals as a blueprint's score
        print(evaluate_bad(cfg, bad, args.games, args.seed, device, Stream.EVAL, args.batch))
        return
    blueprint = InferenceServer(net.mover, device).qnet()  # moves alone: a policy network's Q is not run
    with launch(shard, device):
        graphs = Graphs(device) if args.cuda_graphs else None
        result = evaluate(game, playout_policy(net, blueprint.step), blueprint.initial_state, args.games,
                          args.seed, args.batch, device, shard=shard, graphs=graphs)
        if shard.main:
            print(result)
        if args.belief:
            ev = evaluate_belief(game, model, blueprint.step, blueprint.initial_state, args.games, args.seed,
                                 min(args.batch, 500), device=device, shard=shard)
            if shard.main:
                live = [t for t, n in enumerate(ev.cards_by_turn) if n > 0]
                grounded = sum(ev.learned_by_turn[t] < ev.grounded_by_turn[t] for t in live)
                counting = sum(ev.learned_by_turn[t] < ev.counting_by_turn[t] for t in live)
                print(f"belief: {ev}; learned below grounded at {grounded} of {len(live)} turns, below "
                      f"counting at {counting}")


if __name__ == "__main__":
    main()
