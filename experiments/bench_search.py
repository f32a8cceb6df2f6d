"""Search speed: rollouts per second and seconds per searched move, per mode and games searched at once.

    python -m experiments.bench_search --modes lbs-1 lbs-16 --batch-games 1 8 --games 8   # the table1 budget
    python -m experiments.bench_search --device cuda --batch-games 16 64 --budget paper   # on a GPU
    python -m experiments.bench_search --modes lbs-16 lbs-inf --playout both --games 4 --batch-games 4

Plays the same evaluation deals for every setting with the shipped blueprint and belief (or --blueprint /
--belief) and prints a table beside the LBS paper's anchors (10,000 rollouts per searched move: LBS-16
47 s per game, LBS-1 6 s, SPARTA 215 s). Two blueprint games are played first, off the clock, so that
one-time work (SmartBot compiling its step on the CPU) is not charged to the first setting. Writes to
--out (a scratch folder) unless --record NAME, which writes
experiments/results/bench_search/bench_search_<date>_NAME.md.

    python -m experiments.bench_search --blueprint smartbot --modes sparta --batch-games 2 --games 2 \
        --rollouts 10000 --min-rollouts 100 --reference-budget on --device cpu --reference <path>/sparta_eval

`--reference BINARY` times the reference SPARTA (Hanabi_SPARTA's SearchBot on SmartBot) on the same workload
in the same run, after the project's settings: BINARY is its C++ sources (csrc/, without the Python extension
and the network bot) built with a main that calls their game loop, `BINARY SearchBot PLAYERS GAMES SEED`
(the loop that the repository's eval_bot.py reaches through Python). It runs with its fibers on the calling
thread (FIBER_THREADS=0), SEARCH_N the rollouts per searched move, SEARCH_THRESH the margin, SEARCH_PLAYER the
searching seat, BOMB0 the scoring of a lost game (its default keeps the points minus one: --keep-lost-points),
on its own deals; its clock is the CPU time it used (core-seconds, like the project's rows).
"""

from __future__ import annotations

import datetime
import os
import re
import resource
import subprocess
import sys
import time
from dataclasses import fields, replace
from itertools import product
from pathlib import Path
from typing import NamedTuple

import torch

from experiments.common import command, machine, result_path, write_result
from lbs.acting import playout_policy
from lbs.ckpt import CheckpointError, SaveError, write_atomic
from lbs.configs import flag_names
from lbs.search import flags
from lbs.search.config import Sampler, SearchConfig
from lbs.search.exact_range import ExactRange
from lbs.search.play import play_games
from lbs.search.setup import SearchSetup
from lbs.search.timing import Timing

ROOT = Path(__file__).resolve().parent.parent
SWITCH = {"off": [False], "on": [True], "both": [False, True]}
PLAYOUT = {"moves": ["moves"], "step": ["step"], "both": ["step", "moves"]}
"""--playout: what rollouts play the blueprint with, one setting each (the baseline first)"""
"""--cuda-graphs and --reference-budget: one setting each, or both to compare"""
PAPER_S_PER_GAME = {"lbs-1": 6.0, "lbs-16": 47.0, "sparta": 215.0}  # LBS paper, 10,000 rollouts per move


def parser() -> flags.Parser:
    ap = flags.search_parser(__doc__, ROOT / "checkpoints", budget="table1",
                             modes=["lbs-1", "lbs-16", "lbs-inf"], games=8,
                             sweep=("cuda_graphs", "reference_budget", "max_rows"))
    ap.count(*flag_names("batch_games"), dest="batch_games", low=1, nargs="+", default=[1, 8],
             help="games searched at once, one setting each (default 1 8)")
    ap.count("--groups", low=1, nargs="+", default=[1],
             help="concurrent groups per batch (> 1: their calls merged by the inference server)")
    ap.add_argument(*flag_names("cuda_graphs"), dest="cuda_graphs", choices=list(SWITCH), default="off",
                    help="replay the rollout step as a CUDA graph (SearchConfig.cuda_graphs): off "
                    "(default), on, or both to compare")
    ap.add_argument(*flag_names("reference_budget"), dest="reference_budget", choices=list(SWITCH),
                    default="off", help="spend a searched move's rollouts as the reference SPARTA does, "
                    "each move its share (SearchConfig.reference_budget): off (default: shared by the moves "
                    "in play), on, or both")
    ap.count(*flag_names("max_rows"), dest="max_rows", low=1, nargs="+", default=[SearchConfig.max_rows],
             help="rollouts per engine batch (SearchConfig.max_rows), one setting each")
    ap.add_argument("--playout", choices=["moves", "step", "both"], default="moves",
                    help="what rollouts play the blueprint with: its moves alone (SearchSetup.playout, the "
                    "default), its whole step (the baseline for a policy network beside Q), or both")
    ap.add_argument("--reference", default=None, metavar="BINARY",
                    help="also time the reference SPARTA (Hanabi_SPARTA's SearchBot on SmartBot, built as "
                    "the module docstring says) on the same workload in the same run: needs --blueprint "
                    "smartbot, --modes sparta, --reference-budget on, one CPU thread")
    ap.add_argument("--out", default="runs/experiments")
    ap.add_argument("--record", default=None)
    return ap


def check_reference(args, search) -> None:
    """--reference: refused in one line unless the workload is one the reference plays, timed alike."""
    if args.reference is None:
        return
    if not os.access(args.reference, os.X_OK):
        raise ValueError(f"--reference {args.reference}: no executable file there")
    if str(search.blueprint).lower() != "smartbot" or [str(m) for m in search.modes] != ["sparta"]:
        raise ValueError("--reference: the reference searches SmartBot by SPARTA only; give --blueprint "
                         "smartbot --modes sparta")
    if args.reference_budget != "on":
        raise ValueError("--reference: the reference gives each legal move its share of the rollouts; give "
                         "--reference-budget on")
    if search.device.type != "cpu" or args.threads != 1:
        raise ValueError("--reference: both sides are timed in core-seconds; give --device cpu --threads 1")


def reference_sparta(binary: str, players: int, games: int, seed: int, cfg: SearchConfig) -> dict:
    """The reference SearchBot playing `games` games on this process's cores: its CPU seconds (user + system,
    from the OS's account of finished children), wall seconds and scores. ValueError (one line) where it does
    not run or prints no scores."""
    env = dict(os.environ, FIBER_THREADS="0", BPBOT="SmartBot", SEARCH_N=str(cfg.rollouts),
               SEARCH_THRESH=f"{cfg.delta:g}", SEARCH_PLAYER=str(cfg.seat),
               BOMB0="0" if cfg.keep_lost_points else "1")  # its rollouts scored as the project's are
    cmd = [binary, "SearchBot", str(players), str(games), str(seed + 1)]  # its seed 0 means "from the clock"
    before, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    try:
        done = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as e:
        raise ValueError(f"--reference {binary}: {e}") from None
    wall, after = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    scores = [int(m) for m in re.findall(r"^Final score \d+ : (\d+)", done.stdout, re.M)]
    if len(scores) != games:
        raise ValueError(f"--reference {binary}: printed {len(scores)} final scores for {games} games")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"cpu": cpu, "wall": wall, "scores": scores, "command": " ".join(
        [f"{k}={env[k]}" for k in ("FIBER_THREADS", "BPBOT", "SEARCH_N", "SEARCH_THRESH", "SEARCH_PLAYER",
                                   "BOMB0")] + [Path(binary).name, *cmd[1:]])}


class Setting(NamedTuple):
    """One setting's measurements (a table row)."""

    mode: str
    batch_games: int
    groups: int
    graphs: bool
    max_rows: int
    s_per_game: float
    s_per_move: float
    rollouts_per_s: float
    timing: Timing | None
    seconds: float
    score: float
    """the mean final score of its games"""


class StepPlayout(SearchSetup):
    """The baseline of SearchSetup.playout: rollouts play the blueprint's whole step (a policy network's Q
    run beside it at every move)."""

    @property
    def playout(self):
        return playout_policy(self.net, self.q_fn) if self.mode.depth is None else self.q_fn


def playing(setup: SearchSetup, by: str) -> SearchSetup:
    """The set-up whose rollouts play by `by` ("moves": as it is; "step": StepPlayout)."""
    if by == "moves":
        return setup
    return StepPlayout(**{f.name: getattr(setup, f.name) for f in fields(setup) if f.init})


def main() -> None:
    ap = parser()
    args = ap.parse_args()
    try:  # the flags alone first: one line naming the flag, before any checkpoint is read
        search = flags.read(ap, args)
        device = search.device
        if args.cuda_graphs != "off":
            flags.needs_cuda(f"--cuda-graphs {args.cuda_graphs}", device)
        check_reference(args, search)
    except ValueError as e:
        sys.exit(f"bench_search: {e}")
    out = result_path("bench_search", args.record, args.out)  # refused now, not after the benchmark
    try:
        setups = {}  # groups > 1: a coalescing worker merges the groups' calls
        for coalesce in sorted({g > 1 for g in args.groups}):
            setups[coalesce] = search.setup(coalesce=coalesce)
        for mode in search.modes:  # every mode checked before any plays
            next(iter(setups.values())).with_mode(mode)
    except (CheckpointError, ValueError) as e:
        sys.exit(f"bench_search: {e}")
    game, cfg = next(iter(setups.values())).game, next(iter(setups.values())).cfg
    if args.threads:
        torch.set_num_threads(args.threads)
    rows, ranges = [], []
    with torch.no_grad():  # untimed: one-time work (SmartBot's compiling on the CPU) stays off the clock
        play_games(next(iter(setups.values())).with_mode("blueprint"), 2, args.seed, 2)
    cpu_clock = _cpu_clock(device, args.threads)
    clock = time.thread_time if cpu_clock else time.perf_counter
    with torch.no_grad():
        for mode in map(str, search.modes):
            grid = product(PLAYOUT[args.playout], SWITCH[args.reference_budget], args.batch_games,
                           args.groups, SWITCH[args.cuda_graphs], args.max_rows)
            for by, reference, bg, groups, graphs, max_rows in grid:
                timing = Timing(cpu=cpu_clock) if groups == 1 else None  # one group's time only
                setup = setups[groups > 1].with_mode(mode, timing, cuda_graphs=graphs, max_rows=max_rows,
                                                     reference_budget=reference)
                setup = playing(setup, by)
                label = f"{mode} (reference budget)" if reference else mode
                label += "" if args.playout == "moves" else f", rollouts by {by}"
                made: list[Followed] = []
                if setup.mode.searches:
                    setup = replace(setup, make_sampler=_recording(setup.sampler, made, clock))
                t0 = clock()
                res = play_games(setup, args.games, args.seed, bg, groups=groups, first=args.first_game)
                sec = clock() - t0
                searched, rollouts = sum(r.searched for r in res), sum(r.rollouts for r in res)
                rows.append(Setting(label, bg, groups, graphs, max_rows, sec / args.games,
                                    sec / max(searched, 1), rollouts / sec, timing, sec,
                                    sum(float(r.record.score) for r in res) / len(res)))
                if setup.mode.sampler is Sampler.RANGE:
                    ranges.append((label, bg, groups, graphs, searched, timing, made))
                try:  # a stopped run keeps its finished settings
                    write_atomic(out, report(args, cfg, game, device, rows, ranges, partial=True).encode())
                except SaveError as e:
                    sys.exit(f"bench_search: {e}")
                print(
                    f"{label} batch {bg} groups {groups} graphs {graphs} max rows {max_rows}: "
                    f"{sec / args.games:.2f} s/game, "
                    f"{sec / max(searched, 1):.3f} s/move, {rollouts / sec:,.0f} rollouts/s",
                    flush=True,
                )
    for setup in setups.values():
        setup.close()
    ref = None
    if args.reference:
        try:
            ref = reference_sparta(args.reference, game.players, args.games, args.seed, cfg)
        except ValueError as e:  # the project's rows stay in the partial record
            sys.exit(f"bench_search: {e}")
        print(f"reference SearchBot: {ref['cpu'] / args.games:.2f} core-s/game, mean score "
              f"{sum(ref['scores']) / args.games:.2f}", flush=True)
    text = report(args, cfg, game, device, rows, ranges, ref=ref)
    write_result(text, "bench_search", args.record, args.out, out)


def report(args, cfg: SearchConfig, game, device, rows: list[Setting], ranges: list, partial: bool = False,
           ref: dict | None = None) -> str:
    """The result file's text: one table row per setting, then SPARTA's split (rows so far if partial)."""
    scale = 10_000 / cfg.rollouts
    lines = [
        f"# Search speed: {game}",
        "",
        f"- Date: {datetime.date.today()}; machine: {machine()}; device {device}.",
        f"- Command: `{command()}`",
        "- Clock: " + ("CPU time of the searching thread (one torch thread on a CPU: core-seconds, whatever "
                       "else runs on the machine)." if _cpu_clock(device, args.threads) else "wall time."),
        f"- {args.games} games per setting, {cfg.rollouts} rollouts per searched move "
        f"({cfg.min_rollouts} per move before pruning, delta {cfg.delta:g}). 'At 10K' scales s/game "
        f"linearly by {scale:g} (rollout cost is linear in the budget); the paper's anchors are for 10,000 "
        "rollouts per searched move."
        + (" A rollout's lost game is worth its points minus one (--keep-lost-points)."
           if cfg.keep_lost_points else ""),
        "",
        "- With CUDA graphs a rollout step is one replay, so the networks' share is not separable (—).",
        "",
        "| mode | games at once | groups | CUDA graphs | max rows | s / game | s / searched move "
        "| rollouts / s | at 10K: s / game | paper s / game "
        "| networks / rollout engine / sampler / rest (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        paper = PAPER_S_PER_GAME.get(r.mode.split(" ")[0])
        split, t = "— (threads)", r.timing
        if t is not None:
            nets = (f"— / {t.rollouts:.1f}" if r.graphs
                    else f"{t.networks:.1f} / {t.rollouts - t.networks:.1f}")
            split = f"{nets} / {t.sampler:.1f} / {r.seconds - t.rollouts - t.sampler:.1f}"
        lines.append(
            f"| {r.mode} | {r.batch_games} | {r.groups} | {'on' if r.graphs else 'off'} | {r.max_rows:,} "
            f"| {r.s_per_game:.2f} | {r.s_per_move:.3f} | {r.rollouts_per_s:,.0f} "
            f"| {r.s_per_game * scale:.1f} | {paper if paper else '—'} | {split} |"
        )
    if partial:
        lines.append("\nPartial: the settings finished so far; the run stopped or goes on.")
    return "\n".join(lines + _reference_rows(ref, rows, args.games) + _range_split(ranges, args.games)) + "\n"


def _reference_rows(ref: dict | None, rows: list[Setting], games: int) -> list[str]:
    """The reference SearchBot's row and each project setting's speed-up over it (core-seconds per game)."""
    if ref is None:
        return []
    per_game = ref["cpu"] / games
    out = ["", "## The reference SPARTA in the same run", "",
           f"`{ref['command']}` (Hanabi_SPARTA's SearchBot on SmartBot, its fibers on one thread, its own "
           f"{games} deals), right after the settings above on the same machine:", "",
           "| side | core-s / game | wall s / game | mean score | reference / this |",
           "|---|---|---|---|---|",
           f"| reference SearchBot (C++) | {per_game:.1f} | {ref['wall'] / games:.1f} | "
           f"{sum(ref['scores']) / games:.2f} | 1.00 |"]
    for r in rows:
        out.append(f"| {r.mode}, {r.batch_games} games at once | {r.s_per_game:.1f} | — | {r.score:.2f} | "
                   f"{per_game / r.s_per_game:.2f} |")
    return out


class Followed:
    """A sampler as the search uses it, recording the range size of the searched games at the first draw
    after every real move (SPARTA: the exact size within max_range, an upper bound above it)."""

    def __init__(self, inner):
        self.inner, self.turn, self.fresh = inner, -1, False
        self.filters_in_draws = 0.0  # seconds of counterfactual filters that ran inside draws
        self.sizes: dict[int, list[int]] = {}

    def reset(self, state):
        self.inner.reset(state)
        self.fresh = True

    def update(self, before, move, after):
        self.inner.update(before, move, after)
        self.turn, self.fresh = self.turn + 1, True

    def sample(self, k, keys, games):
        before = getattr(self.inner, "filter_seconds", 0.0)
        out = self.inner.sample(k, keys, games)
        self.filters_in_draws += getattr(self.inner, "filter_seconds", 0.0) - before
        if self.fresh and isinstance(self.inner, ExactRange):
            self.sizes.setdefault(self.turn + 1, []).extend(self.inner.rows().index_select(0, games).tolist())
            self.fresh = False
        return out


def _cpu_clock(device: torch.device, threads: int) -> bool:
    """Time by the searching thread's CPU clock: one torch thread on a CPU, so its CPU time is the
    core-seconds spent, whatever else runs on the machine."""
    return device.type == "cpu" and threads == 1


def _recording(make, made: list[Followed], clock):
    def build():
        made.append(Followed(make()))
        if isinstance(made[-1].inner, ExactRange):
            made[-1].inner.clock = clock
        return made[-1]

    return build


def _range_split(ranges: list, games: int) -> list[str]:
    """SPARTA's split per searched move and per game, and its range size per turn."""
    if not ranges:
        return []
    out = ["", "## SPARTA: where a searched move's time goes, and the range size over the game", "",
           "Per searched move, in seconds: range upkeep (following the real game: the exact range's updates, "
           "their counterfactual filters excluded), counterfactual filters (deferred: they run in updates "
           "and draws), drawing hands (filters excluded), rollouts (networks included); then the same per "
           "game (with one thread, core-seconds per game).", "",
           "| mode | games at once | groups | CUDA graphs | range upkeep | counterfactual filters | draws "
           "| rollouts | per game: upkeep / filters / draws / rollouts |",
           "|---|---|---|---|---|---|---|---|---|"]
    sizes: dict[int, list[int]] = {}
    for mode, bg, groups, graphs, searched, t, made in ranges:
        for f in made:
            for turn, s in f.sizes.items():
                sizes.setdefault(turn, []).extend(s)
        if t is None:
            continue
        filt, n = sum(f.inner.filter_seconds for f in made), max(searched, 1)
        in_draws = sum(f.filters_in_draws for f in made)
        upkeep, draws = t.sampler - t.drawing - (filt - in_draws), t.drawing - in_draws
        out.append(f"| {mode} | {bg} | {groups} | {'on' if graphs else 'off'} | {upkeep / n:.3f} "
                   f"| {filt / n:.3f} | {draws / n:.3f} | {t.rollouts / n:.3f} | {upkeep / games:.1f} / "
                   f"{filt / games:.1f} / {draws / games:.1f} / {t.rollouts / games:.1f} |")
    out += ["", "Range size of the searched games at their turn (min / median / max over games; an upper "
            "bound above --max-range):", "", "| turn | games | min | median | max |", "|---|---|---|---|---|"]
    for turn in sorted(sizes):
        s = sorted(sizes[turn])
        out.append(f"| {turn} | {len(s)} | {s[0]:,} | {s[len(s) // 2]:,} | {s[-1]:,} |")
    return out


if __name__ == "__main__":
    main()
