"""SPARTA exact range on the full 2-player game with the shipped blueprint: range sizes per turn and the
cost of the counterfactual filter.

    OMP_NUM_THREADS=1 python -m experiments.bench_range --games 3 --turns 12
    python -m experiments.bench_range --blueprint A.pt B.pt --record NAME   # both, same run, recorded

Several --blueprint files are measured one after the other in the same process (the first is the
baseline), each on its own greedy games, and a last table sets their first partner filters side by side.
--record NAME writes experiments/results/bench_range/bench_range_<date>_NAME.md (never over a file).

Greedy blueprint games; for each seat as the searcher an ExactRange is reset on the deal and updated
after every move. Reported per turn: the exact range size (min / median / max over games; `size()` is
called every turn, so pending filters of games within max_range run there; sizes above max_range are
upper bounds, their partner filters still pending) and the update time.
"First partner filter" times the counterfactual filter of each game's first partner move on every
candidate the cheap facts leave, forced at once (probabilities()), the worst case the deferred filters
avoid. For seat 0 the partner's first move follows the searcher's own hint, which says nothing about the
searcher's hand, so that filter runs on the whole deal (about 8 million candidates per game).
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import sys
import time
from pathlib import Path

import torch

from experiments.common import command, machine, result_path, sync, write_result
from lbs.acting import Turn, play
from lbs.hanabi import engine
from lbs.infer import InferenceServer, QNetHandle
from lbs.models import load_blueprint
from lbs.search.exact_range import ExactRange

NAME = "bench_range"


def games(game, blueprint: QNetHandle, n: int, turns: int, device: str) -> list[Turn]:
    out: list[Turn] = []
    with torch.no_grad():
        play(game, engine.reset(game, torch.arange(n, device=device)), blueprint.step,
             blueprint.initial_state(n * game.players), turns, hook=out.append)
    return out


def measure(path: str, args: argparse.Namespace) -> tuple[list[str], list[tuple[str, float, float]]]:
    """Report lines of one blueprint, and per searcher seat (seat, seconds per game, M candidates/s) of
    its first partner filter."""
    game, net = load_blueprint(path, args.device)
    blueprint = InferenceServer(net, args.device).qnet()
    turns = games(game, blueprint, args.games, args.turns, args.device)
    lines = [f"## {path}", "", f"- game: {game}", f"- network: {net.cfg}", ""]
    for seat in range(game.players):
        rng = ExactRange(game, blueprint, seat, max_range=args.max_range, chunk=args.chunk)
        t0 = time.perf_counter()
        rng.reset(turns[0].state)
        reset_s = time.perf_counter() - t0
        lines += [f"### searcher seat {seat}", "", f"reset (enumerate the deal): {reset_s:.2f} s", "",
                  "| turn | mover | min | median | max | update + size s |", "|---|---|---|---|---|---|"]
        for t, turn in enumerate(turns):
            t0 = time.perf_counter()
            rng.update(turn.state, turn.move, turn.next_state)
            size = rng.size().tolist()
            dt = time.perf_counter() - t0
            mover = "searcher" if int(turn.state.cur_player[0]) == seat else "partner"
            med = statistics.median(size)
            lines.append(f"| {t} | {mover} | {min(size)} | {med:.0f} | {max(size)} | {dt:.2f} |")
        lines.append("")

    # the counterfactual filter of the first partner move, forced on every candidate
    speeds = []
    for seat in range(game.players):
        first = next(t for t, turn in enumerate(turns) if int(turn.state.cur_player[0]) != seat)
        rng = ExactRange(game, blueprint, seat, max_range=args.max_range, chunk=args.chunk)
        rng.reset(turns[0].state)
        for turn in turns[: first + 1]:
            rng.update(turn.state, turn.move, turn.next_state)
        rows = rng.rows()
        sync(args.device)
        t0 = time.perf_counter()
        rng.probabilities()
        sync(args.device)
        dt = time.perf_counter() - t0
        kept = rng.size()
        what = game.move_name(int(turns[first].move[0]))
        rate = int(rows.sum()) / dt / 1e6
        speeds.append((f"{seat}", dt / args.games, rate))
        lines.append(f"first partner filter, searcher seat {seat} (move {first}, game 0 {what}): "
                     f"{dt:.2f} s for {int(rows.sum())} candidates in {args.games} games "
                     f"({dt / args.games:.2f} s per game, {rate:.2f} M candidates/s); "
                     f"kept {kept.tolist()} of {rows.tolist()}")
    return lines + [""], speeds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--blueprint", nargs="+", default=["checkpoints/blueprint_2p.pt"],
                    help="blueprint files, measured in turn (the first: the baseline)")
    ap.add_argument("--games", type=int, default=3)
    ap.add_argument("--turns", type=int, default=12)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    ap.add_argument("--max-range", type=int, default=1_000_000)
    ap.add_argument("--chunk", type=int, default=None, help="rows per filter batch (default: ExactRange's)")
    ap.add_argument("--record", metavar="NAME", default=None,
                    help="write experiments/results/bench_range/bench_range_<date>_NAME.md")
    ap.add_argument("--out", default="runs/bench_range", help="scratch folder when not recording")
    args = ap.parse_args()
    for path in args.blueprint:
        if not Path(path).is_file():
            sys.exit(f"bench_range: --blueprint {path}: no such file")
    out = result_path(NAME, args.record, args.out)  # refused now, not after the work
    torch.set_num_threads(args.threads)
    lines = [f"# bench_range {datetime.date.today()}", "", f"- machine: {machine()}",
             f"- command: `{command()}`", f"- device: {args.device}", ""]
    table = ["## first partner filter, side by side", "", "| blueprint | searcher seat | s per game | "
             "M candidates/s |", "|---|---|---|---|"]
    for path in args.blueprint:
        more, speeds = measure(path, args)
        lines += more
        table += [f"| {path} | {seat} | {per:.2f} | {rate:.2f} |" for seat, per, rate in speeds]
    write_result("\n".join(lines + table) + "\n", NAME, args.record, args.out, out)


if __name__ == "__main__":
    main()
