"""Play Hanabi games with one seat searching (LBS or SPARTA) and report the score and the time.

    python search/run.py --mode lbs-16                       # shipped blueprint and belief, 10,000 rollouts
    python search/run.py --mode lbs-1 --games 200 --rollouts 1000 --min-rollouts 50
    python search/run.py --mode lbs-inf --batch-games 64 --device cuda --out runs/search/inf.json
    python search/run.py --mode blueprint --games 1000         # the blueprint alone
    python search/run.py --mode lbs-16 --show 1                 # print the first game as a text trace

Games are the evaluation deals of --seed (lbs.seeding): the blueprint is replayed on the same deals
and the paired difference reported. `--devices N` plays them in N processes (N GPUs with --device cuda),
each its slice of the game numbers; the first process gathers every game and reports, the same games as
one process. The JSON result holds every number and every game as a record
(config, deck, moves) with, for each searched move, the candidates' values, rollout counts and the choice.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm

from lbs.ckpt import CheckpointError
from lbs.hanabi.interop.text import playthrough
from lbs.models import load_belief, load_blueprint, resolve_device
from lbs.search.agent import SearchConfig, Timing, parse_mode, play_games, sampler_factory
from lbs.search.report import summarize_run
from lbs.search.samplers import serve
from lbs.seeding import Stream, game_seeds
from lbs.shards import launch, plan, rank_device

ROOT = Path(__file__).resolve().parent.parent
CHECKPOINTS = ROOT / "checkpoints"


def parser() -> argparse.ArgumentParser:
    d = SearchConfig()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--mode",
        default="lbs-16",
        help="blueprint, lbs-K (K >= 1 moves then bootstrap), lbs-inf, sparta (default lbs-16)",
    )
    ap.add_argument("--games", type=int, default=8, help="games to play (default 8)")
    ap.add_argument(
        "--rollouts",
        type=int,
        default=d.rollouts,
        help=f"rollouts per searched move, split over the moves still in play (default {d.rollouts})",
    )
    ap.add_argument(
        "--min-rollouts",
        "--min_rollouts",
        type=int,
        default=d.min_rollouts,
        help=f"rollouts per move before it may be pruned; also the round size (default {d.min_rollouts})",
    )
    ap.add_argument(
        "--prune-z",
        "--prune_z",
        type=float,
        default=d.prune_z,
        help=f"prune moves this many standard errors below the best (default {d.prune_z})",
    )
    ap.add_argument(
        "--delta",
        type=float,
        default=d.delta,
        help=f"play the search move only if it beats the "
        f"blueprint move by more than this (default {d.delta})",
    )
    ap.add_argument(
        "--min-valid",
        "--min_valid",
        type=int,
        default=d.min_valid,
        help=f"fewer valid sampled hands: play the blueprint move (default {d.min_valid})",
    )
    ap.add_argument("--seat", type=int, default=d.seat, help="the searching seat (default 0)")
    ap.add_argument("--seed", type=int, default=0, help="which evaluation deals (default 0)")
    ap.add_argument(
        "--batch-games", "--batch_games", type=int, default=64, help="games searched at once (default 64)"
    )
    ap.add_argument(
        "--groups",
        type=int,
        default=1,
        help="split each batch into this many groups searched by concurrent threads whose network calls the "
        "inference server merges (default 1: one group, direct calls)",
    )
    ap.add_argument(
        "--max-rows",
        "--max_rows",
        type=int,
        default=d.max_rows,
        help=f"rollouts per engine batch, a memory cap (default {d.max_rows})",
    )
    ap.add_argument(
        "--blueprint",
        default=str(CHECKPOINTS / "blueprint_2p.pt"),
        help="blueprint checkpoint (default: the shipped checkpoints/blueprint_2p.pt)",
    )
    ap.add_argument(
        "--belief",
        default=None,
        help="belief checkpoint for LBS (default: checkpoints/belief_2p.pt "
        "with the shipped blueprint; required with any other blueprint)",
    )
    ap.add_argument(
        "--max-range",
        "--max_range",
        type=int,
        default=1_000_000,
        help="sparta: above this many possible hands play the blueprint move (default 1,000,000)",
    )
    ap.add_argument("--device", default="auto", help="cpu, cuda or auto (default)")
    ap.add_argument("--cuda-graphs", "--cuda_graphs", action="store_true",
                    help="replay the rollout step as a captured CUDA graph (CUDA only)")
    ap.add_argument("--devices", type=int, default=1,
                    help="processes (GPUs with cuda) sharing the games (default 1)")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch CPU threads per process (0: torch's default, divided by --devices)")
    ap.add_argument("--out", default=None, help="JSON result path (default runs/search/<mode>-<time>.json)")
    ap.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    ap.add_argument("--show", type=int, default=0, help="print the first N games as text traces")
    ap.add_argument(
        "--no-blueprint-baseline",
        "--no_blueprint_baseline",
        action="store_true",
        help="skip replaying the blueprint on the same deals",
    )
    ap.add_argument("--profile", action="store_true", help="time networks, belief and rollouts separately")
    ap.add_argument("--no-progress", "--no_progress", action="store_true")
    return ap


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    try:
        sampler_kind, depth = parse_mode(args.mode)
        if min(args.games, args.batch_games, args.groups) < 1:
            raise ValueError(
                f"--games {args.games}, --batch-games {args.batch_games} and --groups {args.groups} "
                "must be >= 1"
            )
        if args.profile and (args.groups > 1 or args.devices > 1):
            raise ValueError("--profile times one group in one process; use it with --groups 1 --devices 1")
        game_seeds(Stream.EVAL, args.seed, 1)  # checks the seed's range
        if args.max_range < 1:
            raise ValueError(f"--max-range {args.max_range} must be >= 1")
        shard = plan(args.devices)
        device = rank_device(shard, resolve_device(args.device))
        if args.cuda_graphs and device.type != "cuda":
            raise ValueError(f"--cuda-graphs needs a CUDA device (the run is on {device.type})")
        game, net = load_blueprint(args.blueprint, device=device)
        cfg = SearchConfig(
            depth=depth,
            rollouts=args.rollouts,
            min_rollouts=args.min_rollouts,
            prune_z=args.prune_z,
            delta=args.delta,
            min_valid=args.min_valid,
            seat=args.seat,
            max_rows=args.max_rows,
            cuda_graphs=args.cuda_graphs,
        )
        cfg.check(game)
        if not getattr(net, "hidden_is_public", False):
            raise ValueError(
                f"{args.blueprint}: search needs a blueprint whose recurrent state sees public "
                "features only (publ_lstm or ff), so one state serves every sampled hand"
            )
        belief = None
        if sampler_kind == "belief":
            path = args.belief
            if path is None:
                if Path(args.blueprint).resolve() != (CHECKPOINTS / "blueprint_2p.pt").resolve():
                    raise ValueError("--belief is required with a blueprint other than the shipped one")
                path = str(CHECKPOINTS / "belief_2p.pt")
            _, belief = load_belief(path, blueprint_path=args.blueprint, game=game, device=device)
        out = (
            Path(args.out)
            if args.out
            else ROOT / "runs" / "search" / (f"{args.mode}-{datetime.datetime.now():%Y%m%d-%H%M%S}.json")
        )
        if out.exists() and not args.overwrite:
            raise ValueError(f"{out} exists; pass --overwrite to replace it or choose another --out")
    except (CheckpointError, ValueError) as e:
        sys.exit(f"search: {e}")

    server = serve(net, belief, device, coalesce=args.groups > 1)
    blueprint = server.qnet()
    timing = Timing() if args.profile else None
    # no clock inside a captured step: with --cuda-graphs the networks' time stays inside the rollouts'
    q_fn = timing.wrap(blueprint.step) if timing is not None and not args.cuda_graphs else blueprint.step
    make_sampler = sampler_factory(sampler_kind, game, server, cfg.seat, args.max_range)
    if shard.main:
        print(f"search: {args.mode} on {device}{f' x {shard.world} processes' if shard.world > 1 else ''}, "
              f"{args.games} games of {game}, {args.rollouts} rollouts per move", file=sys.stderr)
    mine = len(shard.games(args.games))  # the bar counts this process's games
    with (
        launch(shard, device),
        torch.no_grad(),
        tqdm(total=mine, desc=args.mode, disable=args.no_progress or not shard.main, unit="game") as bar,
    ):
        if args.threads:  # after launch, which splits the CPU's threads between processes
            torch.set_num_threads(args.threads)
        t0 = time.perf_counter()
        results = play_games(
            game,
            q_fn,
            blueprint.initial_state,
            make_sampler,
            cfg,
            args.games,
            args.seed,
            args.batch_games,
            device,
            timing,
            bar.update,
            args.groups,
            shard,
        )
        seconds = time.perf_counter() - t0
        baseline = None
        if make_sampler is not None and not args.no_blueprint_baseline:
            baseline = play_games(
                game,
                blueprint.step,
                blueprint.initial_state,
                None,
                cfg,
                args.games,
                args.seed,
                args.batch_games,
                device,
                shard=shard,
            )
    server.close()
    if not shard.main:
        return
    summary = summarize_run(args.mode, results, baseline, seconds, game.max_score)
    for line in summary.lines():
        print(line)
    if timing is not None:
        engine_s, rest = timing.rollouts - timing.networks, seconds - timing.rollouts - timing.sampler
        networks = "inside the rollouts (captured)" if args.cuda_graphs else f"{timing.networks:.1f} s"
        print(
            f"where the time goes: networks {networks}, sampler {timing.sampler:.1f} s, "
            f"rollout engine and bookkeeping {engine_s:.1f} s, the rest {rest:.1f} s"
        )
    for r in results[: args.show]:
        print(playthrough(r.record, f"game {results.index(r)}"))
    out.parent.mkdir(parents=True, exist_ok=True)
    blob = {
        "command": " ".join(sys.argv),
        "device": str(device),
        "config": vars(args),
        "summary": summary.to_dict(),
        "timing": vars(timing) if timing else None,
        "games": [
            {
                "record": r.record.to_dict(),
                "searched": r.searched,
                "deviated": r.deviated,
                "fallbacks": r.fallbacks,
                "rollouts": r.rollouts,
                "decisions": r.decisions,
            }
            for r in results
        ],
    }
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(blob) + "\n")
    tmp.replace(out)
    print(f"result: {out}")


if __name__ == "__main__":
    main()
