"""Play Hanabi games with one seat searching (LBS or SPARTA) and report the score and the time.

    python search/run.py --mode lbs-16                      # 2 games at 500 rollouts: minutes on a CPU
    python search/run.py --mode lbs-16 --paper --games 100 --device cuda   # the paper's search budget
    python search/run.py --mode lbs-1 --games 200 --rollouts 1000 --min-rollouts 50
    python search/run.py --mode lbs-inf --batch-games 64 --device cuda --out runs/search/inf.json
    python search/run.py --mode blueprint --games 1000         # the blueprint alone
    python search/run.py --mode lbs-16 --show 1                 # print the first game as a text trace

The default budget (QUICK: 500 rollouts per searched move, 25 per move before pruning, a search move
played only when it beats the blueprint's by half a point, one torch thread; more rollouts where a game
has more than 20 moves) is for a first run on a CPU; --paper starts from the LBS paper's (10,000 and 100,
delta 0.05) and any SearchConfig flag overrides either. Games are the
evaluation deals of --seed (lbs.seeding): the blueprint is replayed on the same deals and the paired
difference reported. `--devices N` plays them in
N processes (N GPUs with --device cuda), each its slice of the game numbers; the first process gathers
every game and reports, the same games as one process. The JSON result holds every number and every
game as a record (config, deck, moves) with, for each searched move, the candidates' values, rollout
counts and the choice.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import itertools
import json
import signal
import sys
from pathlib import Path

import torch
from tqdm import tqdm

from lbs import cli
from lbs.ckpt import CheckpointError, SaveError, file_hash, write_atomic
from lbs.configs import add_dataclass_args, apply_overrides, flag_names
from lbs.hanabi.interop.text import playthrough
from lbs.models import resolve_device
from lbs.models.io import blueprint_identity
from lbs.runs import InUseError, Stopped, StopSignals, hold, signal_name
from lbs.search.agent import Progress, play_games
from lbs.search.config import Mode, Sampler, SearchConfig
from lbs.search.journal import Journal, play_kept, result_to_dict
from lbs.search.report import summarize_run
from lbs.search.setup import BLUEPRINT, belief_for, build_search
from lbs.shards import launch, plan, process_rank, rank_device

ROOT = Path(__file__).resolve().parent.parent
CHECKPOINTS = ROOT / "checkpoints"
QUICK = SearchConfig(rollouts=500, min_rollouts=25, delta=0.5)
"""The default budget: a first run finishes in minutes on a CPU (rollouts raised to min_rollouts per legal
move where that is more: 750 for 3 players, 950 for 4). With so few rollouts a move's mean is a few tenths
of a point uncertain, so the best of some twenty candidates beats the blueprint's by 0.05 by chance on
most moves; a margin of 0.5 keeps the deviations that gain (full game, shipped pair: at this budget LBS-16
gains +0.9 on 64 deals at 0.5 and loses -1.9 at 0.05; at 1,000 rollouts +1.9 over 416 deals at 0.5:
docs/search.md)."""
PAPER = SearchConfig()
"""The LBS paper's budget (SearchConfig's defaults)."""


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", default="lbs-16",
                    help="blueprint, lbs-K (K >= 1 moves then bootstrap), lbs-inf, sparta (default lbs-16)")
    ap.add_argument("--paper", action="store_true",
                    help=f"start from the paper's budget ({PAPER.rollouts:,} rollouts per move, "
                    f"{PAPER.min_rollouts} per move before pruning, delta {PAPER.delta}) instead of the "
                    "quick default "
                    f"({QUICK.rollouts:,} and {QUICK.min_rollouts}, delta {QUICK.delta})")
    ap.add_argument("--games", type=int, default=2, help="games to play (default 2)")
    ap.add_argument("--seed", type=int, default=0, help="which evaluation deals (default 0)")
    ap.add_argument(*flag_names("first_game"), dest="first_game", type=int, default=0,
                    help="play deals F..F+games-1 (default 0): e.g. one deal of a table again, its "
                    "searches recorded")
    ap.add_argument(*flag_names("batch_games"), dest="batch_games", type=int, default=64,
                    help="games searched at once (default 64)")
    ap.add_argument("--groups", type=int, default=1,
                    help="split each batch into this many groups searched by concurrent threads whose "
                    "network calls the inference server merges (default 1: one group, direct calls)")
    cli.add_blueprint_args(ap, CHECKPOINTS / "blueprint_2p.pt")
    ap.add_argument("--belief", default=None,
                    help="belief checkpoint for LBS (default: the one shipped with a shipped blueprint, e.g. "
                    "checkpoints/belief_2p.pt, belief_smartbot_<P>p.pt for smartbot; needed with any other)")
    ap.add_argument("--device", default="auto", help="cpu, cuda or auto (default)")
    ap.add_argument("--devices", type=int, default=1,
                    help="processes (GPUs with cuda) sharing the games (default 1)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch CPU threads per process (default 1: on a small shared CPU more threads wait "
                    "on each other; 0: torch's default, divided by --devices)")
    ap.add_argument("--out", default=None, help="JSON result path (default runs/search/<mode>-<time>.json)")
    ap.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    ap.add_argument("--show", type=int, default=0, help="print the first N games as text traces")
    ap.add_argument(*flag_names("no_blueprint_baseline"), dest="no_blueprint_baseline", action="store_true",
                    help="skip replaying the blueprint on the same deals")
    ap.add_argument("--profile", action="store_true", help="time networks, belief and rollouts separately")
    ap.add_argument(*flag_names("no_progress"), dest="no_progress", action="store_true",
                    help="no progress bar")
    add_dataclass_args(ap, SearchConfig, defaults=QUICK, skip=("depth",),
                       title="SearchConfig fields ([values]: the quick default; --paper: the paper's; "
                       "the mode sets the rollout depth)")
    return ap


class Bar:
    """The progress bar: searched moves (an ETA from a bound on those still to come), games and moves."""

    def __init__(self, mode: Mode, games: int, disable: bool):
        self.mode, self.games = mode, games
        desc, unit = (f"{mode}: searched moves", "move") if mode.searches else (f"{mode}: games", "game")
        self.bar = tqdm(total=None if mode.searches else games, desc=desc, unit=unit, disable=disable)

    def __call__(self, p: Progress) -> None:
        if self.mode.searches:
            self.bar.total = p.searched + p.searched_left
            self.bar.set_postfix_str(f"games {p.games}/{self.games}, moves {p.moves}", refresh=False)
            self.bar.update(p.searched - self.bar.n)
        else:
            self.bar.update(p.games - self.bar.n)

    def close(self) -> None:
        self.bar.close()


def settings(args: argparse.Namespace, mode: Mode, cfg: SearchConfig, game, device, world: int) -> list[str]:
    """What the run will do, printed before it starts."""
    where = f"{device}{f' x {world} processes' if world > 1 else ''}"
    budget = "the paper's budget" if args.paper else "the quick default (--paper: the paper's budget)"
    fields = ", ".join(f"{k}={v}" for k, v in dataclasses.asdict(cfg).items() if k != "depth")
    return [f"search: {mode} on {where}, {args.games} games of {game}, {cfg.rollouts} rollouts per move",
            f"  deals: evaluation seed {args.seed}, {args.batch_games} at a time in {args.groups} group(s); "
            f"blueprint {args.blueprint}" + (f", belief {args.belief}" if args.belief else ""),
            f"  search: {budget}: {fields}"]


def result_file(args: argparse.Namespace, mode: Mode) -> Path:
    """The JSON result this run writes, checked writable and locked for this process now (before any work):
    --out, or runs/search/<mode>-<time>.json, made unique against runs started in the same second."""
    if args.out:
        out = cli.writable_file(args.out, "--out")
        if out.exists() and not args.overwrite:
            raise ValueError(f"{out} exists; pass --overwrite to replace it or choose another --out")
        hold(out.with_name(f".{out.name}.lock"), f"the result file {out}")
        return out
    stamp = ROOT / "runs" / "search" / f"{mode}-{datetime.datetime.now():%Y%m%d-%H%M%S}"
    cli.writable_file(stamp.with_suffix(".json"), "--out")
    for i in itertools.count(1):
        out = stamp.with_name(f"{stamp.name}{f'-{i}' if i > 1 else ''}.json")
        try:
            if not out.exists():
                hold(out.with_name(f".{out.name}.lock"), f"the result file {out}")
                if not out.exists():
                    return out
        except InUseError:
            pass


def journal_key(mode: Mode, args: argparse.Namespace, setup) -> dict:
    """The command a journal belongs to: what decides every game's moves (not how fast they are played),
    which games it plays and the result it writes (--out as given: a default one is timestamped), so only
    the same command run again uses (and at its end deletes) the journal."""
    search = {k: v for k, v in dataclasses.asdict(setup.cfg).items() if k not in ("max_rows", "cuda_graphs")}
    belief = args.belief if mode.sampler is Sampler.BELIEF else None
    return {"mode": str(mode), "seed": args.seed, "game": setup.game.to_dict(), "search": search,
            "blueprint": blueprint_identity(args.blueprint), "belief": file_hash(belief) if belief else None,
            "games": args.games, "first_game": args.first_game,
            "out": str(Path(args.out).resolve()) if args.out else None}


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    StopSignals(deferred=False).install()  # SIGTERM stops like Ctrl-C: the finished games are kept
    kept: list[Journal] = []  # the run's journal, once it has one
    try:
        play(args, kept)
    except KeyboardInterrupt as e:
        signum = e.signum if isinstance(e, Stopped) else signal.SIGINT
        if process_rank() == 0:
            print(f"search: {stop_line(signal_name(signum), args, kept[0] if kept else None)}",
                  file=sys.stderr)
        sys.exit(128 + signum)


def stop_line(how: str, args: argparse.Namespace, journal: Journal | None) -> str:
    """What a stop kept, in one line: the games the journal holds on disk now."""
    mine = range(args.first_game, args.first_game + args.games)
    kept = journal.on_disk(mine) if journal is not None else 0
    if not kept:
        return f"stopped by {how} before any game finished: nothing kept"
    return (f"stopped by {how}: {kept} of {args.games} games finished and kept in {journal.path}; run the "
            f"same command again to play the other {max(args.games - kept, 0)}")


def play(args: argparse.Namespace, kept: list[Journal]) -> None:
    """The run: checks, the games (kept as they finish in a journal, put in `kept`), the report and the
    result file."""
    try:
        mode = Mode.parse(args.mode)
        if min(args.games, args.batch_games, args.groups) < 1:
            raise ValueError(f"--games {args.games}, --batch-games {args.batch_games} and --groups "
                             f"{args.groups} must be >= 1")
        cli.at_least("--show", args.show, 0)
        cli.games(args.games, args.first_game)
        cli.threads(args.threads)
        if args.profile and (args.groups > 1 or args.devices > 1):
            raise ValueError("--profile times one group in one process; use it with --groups 1 --devices 1")
        cli.seed("--seed", args.seed)
        cfg = apply_overrides(PAPER if args.paper else QUICK, args)
        shard = plan(args.devices)
        device = rank_device(shard, resolve_device(args.device))
        if cfg.cuda_graphs and device.type != "cuda":
            raise ValueError(f"--cuda-graphs needs a CUDA device (the run is on {device.type})")
        out = result_file(args, mode) if shard.main else None
        args.belief = belief_for([mode], args.belief, args.blueprint, CHECKPOINTS, args.players)
        setup = build_search(BLUEPRINT, args.blueprint, args.belief, device, cfg, coalesce=args.groups > 1,
                             profile=args.profile, players=args.players)
        try:
            if not (args.paper or args.rollouts):  # the quick budget grows with the game's moves
                per_move = cfg.min_rollouts * setup.game.num_moves
                cfg = dataclasses.replace(cfg, rollouts=max(cfg.rollouts, per_move))
            setup = setup.with_mode(mode, setup.timing, rollouts=cfg.rollouts)
            folder = Path(args.out).parent if args.out else ROOT / "runs" / "search"  # where a rerun looks
            journal = Journal(folder, str(mode), journal_key(mode, args, setup), writer=shard.main)
            kept.append(journal)
        except BaseException:
            setup.close()
            raise
    except (CheckpointError, ValueError) as e:
        sys.exit(f"search: {e}")

    game, cfg, timing = setup.game, setup.cfg, setup.timing
    if shard.main:
        print("\n".join(settings(args, mode, cfg, game, device, shard.world)), file=sys.stderr)
        if journal.games:
            mine = range(args.first_game, args.first_game + args.games)
            print(f"search: {sum(n in mine for n in journal.games)} of {args.games} games kept from "
                  f"an earlier run of this command ({journal.path}): playing the rest", file=sys.stderr)
    bar = Bar(mode, len(shard.games(args.games)), args.no_progress or not shard.main)  # this process's games
    with launch(shard, device), torch.no_grad():
        if args.threads:  # after launch, which splits the CPU's threads between processes
            torch.set_num_threads(args.threads)
        try:
            results, seconds = play_kept(setup, journal, args.games, args.seed, args.batch_games,
                                         first=args.first_game, progress=bar, groups=args.groups, shard=shard)
        except SaveError as e:
            sys.exit(f"search: {e}")
        finally:  # before a stop's line
            bar.close()
        baseline = None
        if mode.searches and not args.no_blueprint_baseline:
            baseline = play_games(setup.blueprint_only(), args.games, args.seed, args.batch_games,
                                  shard=shard, first=args.first_game)
    setup.close()
    if not shard.main:
        return
    summary = summarize_run(str(mode), results, baseline, seconds, game.max_score)
    for line in summary.lines():
        print(line)
    if timing is not None:
        engine_s, rest = timing.rollouts - timing.networks, seconds - timing.rollouts - timing.sampler
        networks = "inside the rollouts (captured)" if cfg.cuda_graphs else f"{timing.networks:.1f} s"
        print(f"where the time goes: networks {networks}, sampler {timing.sampler:.1f} s, "
              f"rollout engine and bookkeeping {engine_s:.1f} s, the rest {rest:.1f} s")
    for i, r in enumerate(results[: args.show]):
        print(playthrough(r.record, f"game {args.first_game + i}"))
    search = {k: v for k, v in dataclasses.asdict(cfg).items() if k != "depth"}
    blob = {
        "command": " ".join(sys.argv),
        "device": str(device),
        "config": {**vars(args), **search},
        "summary": summary.to_dict(),
        "timing": vars(timing) if timing else None,
        "games": [result_to_dict(r) for r in results],
    }
    try:
        write_atomic(out, json.dumps(blob).encode() + b"\n")
    except SaveError as e:
        sys.exit(f"search: {e}; the {len(results)} games stay kept in {journal.path}")
    journal.remove()
    print(f"result: {out}")


if __name__ == "__main__":
    main()
