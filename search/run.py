"""Play Hanabi games with one seat searching (LBS or SPARTA), or every seat (a tree search: MO-ISMCTS,
RIS-MCTS), and report the score and the time.

    python search/run.py --mode lbs-16                      # 6 deals at the quick budget: minutes on a CPU
    python search/run.py --mode lbs-16 --budget paper --games 100 --device cuda   # the paper's budget
    python search/run.py --mode lbs-1 --games 200 --budget table1
    python search/run.py --mode lbs-inf --batch-games 64 --device cuda --out runs/search/inf.json
    python search/run.py --mode blueprint --games 1000         # the blueprint alone
    python search/run.py --mode lbs-16 --show 1                 # print the first game as a text trace
    python search/run.py --mode ris-mcts --blueprint smartbot --players 4 --iterations 50 --sim-policy random

The budget is a named one (--budget; lbs.search.config.BUDGETS): quick by default (500 rollouts per searched
move, 25 per move before pruning, a search move played only when it beats the blueprint's by half a point;
more rollouts where a game has more than 20 moves), for a first run on a CPU; table1 the recorded Table 1's,
paper the LBS paper's (10,000 and 100, delta 0.05); any SearchConfig flag overrides a field. Games are the
evaluation deals of --seed (lbs.seeding): the blueprint is replayed on the same deals and the paired
difference reported, with whether it is more than noise. `--devices N` plays them in N processes (N GPUs
with --device cuda), each its slice of the game numbers; the first process gathers every game and
reports, the same games as one process. The JSON result holds every number and every game as a record
(config, deck, moves) with, for each searched move, the candidates' values, rollout counts and the choice.
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
from lbs.configs import flag_names
from lbs.hanabi.interop.text import playthrough
from lbs.models.io import blueprint_identity
from lbs.runs import InUseError, Stopped, StopSignals, hold, signal_name
from lbs.search import flags
from lbs.search.agent import Progress
from lbs.search.config import BUDGETS, Mode, SearchConfig
from lbs.search.journal import Journal, play_kept, result_to_dict
from lbs.search.play import play_games
from lbs.search.report import deviations, summarize_run
from lbs.shards import launch, plan, process_rank, rank_device

ROOT = Path(__file__).resolve().parent.parent
GAMES = 6
"""Deals a plain run plays (--games), all at once: a couple of minutes at the quick budget on an idle 2-core
CPU (2 deals took 37 s), enough to show what search changes; the paired difference says whether it is more
than noise (at this budget it rarely is: LBS-16 gained +0.94 ± 0.82 over 64 deals, docs/search.md)."""


def parser() -> flags.Parser:
    ap = flags.search_parser(__doc__, ROOT / "checkpoints", budget="quick", mode="lbs-16", games=GAMES)
    ap.count(*flag_names("batch_games"), dest="batch_games", low=1, default=64,
             help="games searched at once (default %(default)s)")
    ap.count("--groups", low=1, default=1,
             help="split each batch into this many groups searched by concurrent threads whose network calls "
             "the inference server merges (default 1: one group, direct calls)")
    ap.count("--devices", low=1, default=1, help="processes (GPUs with cuda) sharing the games (default 1)")
    ap.add_argument("--out", default=None, help="JSON result path (default runs/search/<mode>-<time>.json)")
    ap.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    ap.count("--show", default=0, help="print the first N games as text traces")
    ap.add_argument(*flag_names("no_blueprint_baseline"), dest="no_blueprint_baseline", action="store_true",
                    help="skip replaying the blueprint on the same deals")
    ap.add_argument("--profile", action="store_true", help="time networks, belief and rollouts separately")
    ap.add_argument(*flag_names("no_progress"), dest="no_progress", action="store_true",
                    help="no progress bar")
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


def settings(args: argparse.Namespace, search: flags.Search, cfg: SearchConfig, game, device,
             world: int) -> list[str]:
    """What the run will do, printed before it starts."""
    where = f"{device}{f' x {world} processes' if world > 1 else ''}"
    if args.mode.tree:
        mcts = dataclasses.replace(search.mcts, mode=str(args.mode))
        fields = ", ".join(f"{k}={v}" for k, v in dataclasses.asdict(mcts).items())
        return [f"search: {args.mode} on {where}, {args.games} games of {game}, "
                f"{mcts.iterations} iterations per move at every seat",
                f"  deals: evaluation seed {args.seed}, {args.batch_games} at a time in {args.groups} "
                f"group(s); blueprint {args.blueprint} (the baseline)",
                f"  tree search: {fields}"]
    fields = ", ".join(f"{k}={v}" for k, v in dataclasses.asdict(cfg).items())
    return [f"search: {args.mode} on {where}, {args.games} games of {game}, {cfg.rollouts} rollouts per move",
            f"  deals: evaluation seed {args.seed}, {args.batch_games} at a time in {args.groups} group(s); "
            f"blueprint {args.blueprint}" + (f", belief {search.belief}" if search.belief else ""),
            f"  search: the {search.budget.name} budget (--budget: {', '.join(BUDGETS)}): {fields}"]


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


def journal_key(mode: Mode, args: argparse.Namespace, setup, belief) -> dict:
    """The command a journal belongs to: what decides every game's moves (not how fast they are played),
    which games it plays and the result it writes (--out as given: a default one is timestamped), so only
    the same command run again uses (and at its end deletes) the journal."""
    search = {k: v for k, v in dataclasses.asdict(setup.cfg).items() if k not in ("max_rows", "cuda_graphs")}
    if mode.tree:  # its moves are MctsConfig's
        search = dataclasses.asdict(dataclasses.replace(setup.mcts, mode=str(mode)))
    return {"mode": str(mode), "seed": args.seed, "game": setup.game.to_dict(), "search": search,
            "blueprint": blueprint_identity(args.blueprint), "belief": file_hash(belief) if belief else None,
            "games": args.games, "first_game": args.first_game,
            "out": str(Path(args.out).resolve()) if args.out else None}


def main(argv: list[str] | None = None) -> None:
    ap = parser()
    args = ap.parse_args(argv)
    StopSignals(deferred=False).install()  # SIGTERM stops like Ctrl-C: the finished games are kept
    kept: list[Journal] = []  # the run's journal, once it has one
    try:
        play(ap, args, kept)
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


def play(ap: flags.Parser, args: argparse.Namespace, kept: list[Journal]) -> None:
    """The run: checks, the games (kept as they finish in a journal, put in `kept`), the report and the
    result file."""
    try:
        search = flags.read(ap, args)
        mode = args.mode
        if args.profile and mode.tree:
            raise ValueError(f"--profile times the one-ply searches' parts; {mode} has none of them")
        if args.profile and (args.groups > 1 or args.devices > 1):
            raise ValueError("--profile times one group in one process; use it with --groups 1 --devices 1")
        shard = plan(args.devices)
        device = rank_device(shard, search.device)
        out = result_file(args, mode) if shard.main else None
        setup = search.setup(device, coalesce=args.groups > 1, profile=args.profile)
        try:
            setup = setup.with_mode(mode, setup.timing)
            folder = Path(args.out).parent if args.out else ROOT / "runs" / "search"  # where a rerun looks
            journal = Journal(folder, str(mode), journal_key(mode, args, setup, search.belief),
                              writer=shard.main)
            kept.append(journal)
        except BaseException:
            setup.close()
            raise
    except (CheckpointError, ValueError) as e:
        sys.exit(f"search: {e}")

    game, cfg, timing = setup.game, setup.cfg, setup.timing
    if shard.main:
        print("\n".join(settings(args, search, cfg, game, device, shard.world)), file=sys.stderr)
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
    summary = summarize_run(str(mode), results, baseline, seconds, game.max_score, setup.knowledge_shown,
                            setup.belief_shown, tree=mode.tree)
    for line in summary.lines():
        print(line)
    if mode.searches and not mode.tree:
        print(deviations(results))
    joint = joint_summary(results) if mode.joint else None
    if joint is not None:
        print(f"multi-agent: {joint['searched_pct']:.1f}% of moves searched, "
              f"{joint['rollouts_per_game']:.3g} rollouts per game "
              f"({joint['range_rollouts_per_game']:.3g} of them replaying range-searches "
              f"over {joint['range_hands_per_game']:.1f} hands per game)")
    if timing is not None:
        engine_s, rest = timing.rollouts - timing.networks, seconds - timing.rollouts - timing.sampler
        networks = "inside the rollouts (captured)" if cfg.cuda_graphs else f"{timing.networks:.1f} s"
        print(f"where the time goes: networks {networks}, sampler {timing.sampler:.1f} s, "
              f"rollout engine and bookkeeping {engine_s:.1f} s, the rest {rest:.1f} s")
    for i, r in enumerate(results[: args.show]):
        print(playthrough(r.record, f"game {args.first_game + i}"))
    blob = {
        "command": " ".join(sys.argv),
        "device": str(device),
        "config": {**vars(args), "mode": str(mode), "belief": search.belief and str(search.belief),
                   **dataclasses.asdict(cfg),
                   **({"mcts": dataclasses.asdict(setup.mcts)} if mode.tree else {})},
        "summary": summary.to_dict() if joint is None else {**summary.to_dict(), "joint": joint},
        "timing": vars(timing) if timing else None,
        "games": [result_to_dict(r) for r in results],
    }
    try:
        write_atomic(out, json.dumps(blob).encode() + b"\n")
    except SaveError as e:
        sys.exit(f"search: {e}; the {len(results)} games stay kept in {journal.path}")
    journal.remove()
    print(f"result: {out}")


def joint_summary(results: list) -> dict:
    """sparta-ma's cost (the SPARTA paper's Table 3 columns): the share of all moves searched and the rollouts
    per game, the range-search replays included."""
    n = max(len(results), 1)
    moves = sum(len(r.record.moves) for r in results)
    ranged = [d for r in results for d in r.decisions if "range_hands" in d]
    return {"searched_pct": 100.0 * sum(r.searched for r in results) / max(moves, 1),
            "rollouts_per_game": sum(r.rollouts for r in results) / n,
            "range_rollouts_per_game": sum(d["range_rollouts"] for d in ranged) / n,
            "range_hands_per_game": sum(d["range_hands"] for d in ranged) / n}


if __name__ == "__main__":
    main()
