"""SPARTA exact range on the full 2-player game with the shipped blueprint: range sizes per turn and the
cost of the counterfactual filter.

    OMP_NUM_THREADS=1 python experiments/bench_range.py --games 3 --turns 12
    python experiments/bench_range.py --record   # also writes experiments/results/bench_range/

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

from lbs.acting import Turn, play
from lbs.hanabi import engine
from lbs.infer import InferenceServer, QNetHandle
from lbs.models import load_blueprint
from lbs.search.exact_range import ExactRange

if __package__:  # python -m experiments.bench_range, or imported
    from .common import machine
else:  # python experiments/bench_range.py: this folder is first on the import path
    from common import machine


def games(game, blueprint: QNetHandle, n: int, turns: int) -> list[Turn]:
    out: list[Turn] = []
    with torch.no_grad():
        play(game, engine.reset(game, torch.arange(n)), blueprint.step,
             blueprint.initial_state(n * game.players), turns, hook=out.append)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--blueprint", default="checkpoints/blueprint_2p.pt")
    ap.add_argument("--games", type=int, default=3)
    ap.add_argument("--turns", type=int, default=12)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-range", type=int, default=1_000_000)
    ap.add_argument("--chunk", type=int, default=None, help="rows per filter batch (default: ExactRange's)")
    ap.add_argument("--record", action="store_true", help="write results/bench_range/..._<date>.md")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    game, net = load_blueprint(args.blueprint)
    blueprint = InferenceServer(net).qnet()
    turns = games(game, blueprint, args.games, args.turns)
    lines = [f"# bench_range {datetime.date.today()}", "", f"- machine: {machine()}",
             f"- command: `python {' '.join(sys.argv)}`", f"- game: {game}", ""]

    for seat in range(game.players):
        rng = ExactRange(game, blueprint, seat, max_range=args.max_range, chunk=args.chunk)
        t0 = time.perf_counter()
        rng.reset(turns[0].state)
        reset_s = time.perf_counter() - t0
        lines += [f"## searcher seat {seat}", "", f"reset (enumerate the deal): {reset_s:.2f} s", "",
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
    for seat in range(game.players):
        first = next(t for t, turn in enumerate(turns) if int(turn.state.cur_player[0]) != seat)
        rng = ExactRange(game, blueprint, seat, max_range=args.max_range, chunk=args.chunk)
        rng.reset(turns[0].state)
        for turn in turns[: first + 1]:
            rng.update(turn.state, turn.move, turn.next_state)
        rows = rng.rows()
        t0 = time.perf_counter()
        rng.probabilities()
        dt = time.perf_counter() - t0
        kept = rng.size()
        what = game.move_name(int(turns[first].move[0]))
        lines.append(f"first partner filter, searcher seat {seat} (move {first}, game 0 {what}): "
                     f"{dt:.2f} s for {int(rows.sum())} candidates in {args.games} games "
                     f"({dt / args.games:.2f} s per game, {int(rows.sum()) / dt / 1e6:.2f} M candidates/s); "
                     f"kept {kept.tolist()} of {rows.tolist()}")
    report = "\n".join(lines) + "\n"
    print(report)
    if args.record:
        out = Path(__file__).parent / "results" / "bench_range" / f"bench_range_{datetime.date.today()}.md"
        out.write_text(report)
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
