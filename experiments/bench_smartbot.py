"""SmartBot: its scores beside the reference bot's, and its speed beside the engine's.

    python -m experiments.bench_smartbot scores --games 100000 --players 2 3 4 5 --record cpu
    python -m experiments.bench_smartbot speed --batch-sizes 256 1024 4096 16384 --threads 1 --record cpu

`scores` plays games 0 .. games-1 of the evaluation stream (the deals `train/score.py smartbot` plays) with
SmartBot in every seat and sets mean ± s.e.m. (HLE scoring: 0 when the last life is lost), the points kept
(the fireworks, the reference server's score), perfect and bomb-out rates beside the reference C++ bot's
numbers over 100,000 games, with the distance in standard errors. `speed` times whole games in lockstep
(as scoring and rollouts play them: SmartBot reading the engine state, the engine's step) at each batch
size on one process, the same games through every seat's encoded observation (the networks' interface),
and the engine alone with uniformly random legal moves over the same steps in the same run as the floor;
`--reference BINARY` times the reference C++ bot on the same core in the same run. Per CPU core:
`--threads 1`.
Results go to experiments/results/bench_smartbot/.
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from experiments.common import command, machine, result_path, sync, write_result
from lbs.acting import StatePolicy, Turn, play, until_all_over
from lbs.bots import SmartBot
from lbs.ckpt import SaveError, write_atomic
from lbs.hanabi import GameConfig, engine
from lbs.hanabi.random_play import core_step
from lbs.models import resolve_device
from lbs.seeding import Stream, game_seeds

NAME = "bench_smartbot"


@dataclass(frozen=True)
class Reference:
    """The reference C++ SmartBot over 100,000 games (HLE scoring)."""

    mean: float
    sem: float
    points: float
    perfect: float  # %
    bombed: float  # %


REFERENCE = {
    2: Reference(22.996, 0.008, 23.098, 29.6, 0.48),
    3: Reference(22.914, 0.011, 23.301, 19.5, 1.78),
    4: Reference(21.876, 0.012, 22.436, 4.7, 2.69),
    5: Reference(19.059, 0.019, 20.677, 0.07, 8.57),
}
REFERENCE_SPEED = "2,400-2,800 two-player games per second on one core of this machine class"
REFERENCE_GAMES = 10_000
"""speed --reference: the fewest games the C++ bot plays per timing (its start-up then costs under 1%)."""


def play_smartbot(game: GameConfig, seeds: torch.Tensor, reads_state: bool = True) -> dict[str, torch.Tensor]:
    """SmartBot in every seat on the deals of `seeds`, as scoring plays them (lockstep, until every game is
    over on the CPU; reading the engine state, or with reads_state False every seat's encoded observation):
    per game HLE score, points kept, bombed, perfect; and the lockstep steps played."""
    bot = SmartBot(game, seeds.device)
    state = engine.reset(game, seeds)
    steps = 0

    def stop(turn: Turn) -> bool:
        nonlocal steps
        steps += 1
        return bool(over(turn)) if over else False

    over = until_all_over(seeds.device)
    with torch.no_grad():
        hid = bot.initial_state(seeds.shape[0] * game.players)
        state, _ = play(game, state, StatePolicy(bot.act) if reads_state else bot.step, hid, game.max_steps,
                        hook=stop)
    points = state.fireworks.sum(1)
    return {"score": state.score.cpu(), "points": points.cpu(), "bombed": (state.life_tokens <= 0).cpu(),
            "perfect": (points == game.max_score).cpu(), "steps": torch.tensor([steps])}


def scores(args: argparse.Namespace, device: torch.device, save) -> str:
    """The table; `save(text)` receives it after every batch (a stopped run keeps what it played)."""
    head = ["| players | games | score (HLE) ± s.e.m. | reference | distance | points kept (reference) | "
            "perfect % (reference) | bombed % (reference) | seconds |", "|" + "---|" * 9]
    done: list[str] = []
    note = ("\n\nDistance: (mean - reference) / sqrt(s.e.m.^2 + reference s.e.m.^2). The deals are the "
            f"evaluation stream's games 0..N-1 of run seed {args.seed} (`train/score.py smartbot --players "
            "P` plays the same ones); the reference played its own 100,000 deals.\n")
    for p in args.players:
        game = GameConfig(players=p)
        t0, parts = time.perf_counter(), []
        for start in range(0, args.games, args.batch):
            n = min(args.batch, args.games - start)
            parts.append(play_smartbot(game, game_seeds(Stream.EVAL, args.seed, n, start, device)))
            print(f"{p} players: {start + n}/{args.games} games", file=sys.stderr, flush=True)
            so_far = {k: torch.cat([x[k] for x in parts]) for k in parts[0] if k != "steps"}
            row = _score_row(p, so_far, time.perf_counter() - t0)
            partial = start + n < args.games or p != args.players[-1]
            save("\n".join(head + done + [row]) + note, partial)
        done.append(row)
    return "\n".join(head + done) + note


def _score_row(p: int, out: dict[str, torch.Tensor], seconds: float) -> str:
    s = out["score"].double()
    mean, sem = float(s.mean()), float(s.std() / math.sqrt(s.numel()))
    ref = REFERENCE[p]
    dist = (mean - ref.mean) / math.hypot(sem, ref.sem)
    return (f"| {p} | {s.numel():,} | {mean:.3f} ± {sem:.3f} | {ref.mean:.3f} ± {ref.sem:.3f} | "
            f"{dist:+.2f} s.e. | {float(out['points'].double().mean()):.3f} ({ref.points:.3f}) | "
            f"{100 * float(out['perfect'].double().mean()):.2f} ({ref.perfect}) | "
            f"{100 * float(out['bombed'].double().mean()):.2f} ({ref.bombed}) | {seconds:.0f} |")


def _timed(fn, device: torch.device, repeats: int = 1) -> float:
    """The fastest of `repeats` runs of fn (seconds): what the machine does when nothing else runs on it."""
    best = math.inf
    for _ in range(repeats):
        sync(device)
        t0 = time.perf_counter()
        fn()
        sync(device)
        best = min(best, time.perf_counter() - t0)
    return best


def reference_speed(binary: str, players: int, games: int, repeats: int) -> float:
    """Games per second of the reference C++ SmartBot (`run_SmartBot` of Quuxplusone/Hanabi, built with
    `make FAST=1 run_SmartBot`) playing `games` games on this process's cores: the best of `repeats` runs.
    ValueError (one line) where it does not run."""
    cmd = [binary, "--players", str(players), "--games", str(games), "--quiet", "--seed", "0"]
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        try:
            subprocess.run(cmd, check=True, capture_output=True)
        except (OSError, subprocess.CalledProcessError) as e:
            raise ValueError(f"--reference {binary}: {e}") from None
        best = min(best, time.perf_counter() - t0)
    return games / best


def speed(args: argparse.Namespace, device: torch.device) -> str:
    game = GameConfig(players=args.players[0])
    ref = " reference C++ games/s |" if args.reference else ""
    rows = ["| games at once | SmartBot games/s | lockstep steps | ms per step | through observations "
            f"games/s | engine alone games/s | SmartBot / engine |{ref}", "|---|---|---|---|---|---|---|"
            + ("---|" if ref else "")]
    for batch in args.batch_sizes:
        seeds = game_seeds(Stream.EVAL, args.seed, batch, 0, device)
        for reads_state in (True, False):  # warm-up
            play_smartbot(game, seeds[: min(batch, 64)], reads_state)
        out: dict[str, torch.Tensor] = {}
        bot_s = _timed(lambda: out.update(play_smartbot(game, seeds)), device, args.repeats)  # noqa: B023
        steps = int(out["steps"])
        obs_s = _timed(lambda: play_smartbot(game, seeds, reads_state=False), device, args.repeats)  # noqa: B023

        def floor() -> None:
            state = engine.reset(game, seeds, torch.zeros_like(seeds))  # noqa: B023
            for _ in range(steps):  # noqa: B023
                state, *_ = core_step(game, state, seeds, seeds, torch.float32)  # noqa: B023

        floor_s = _timed(floor, device, args.repeats)
        row = (f"| {batch:,} | {batch / bot_s:,.0f} | {steps} | {1000 * bot_s / steps:.1f} | "
               f"{batch / obs_s:,.0f} | {batch / floor_s:,.0f} | {floor_s / bot_s:.2f} |")
        if args.reference:
            ref_games = max(batch, REFERENCE_GAMES)
            row += f" {reference_speed(args.reference, game.players, ref_games, args.repeats):,.0f} |"
        rows.append(row)
        print(rows[-1], file=sys.stderr, flush=True)
    return "\n".join(rows) + (
        f"\n\n{game.players} players. A batch plays as scoring and rollouts do: lockstep steps until every "
        f"game is over on the CPU (all {game.max_steps}, the longest possible game, elsewhere), finished "
        "games idling; SmartBot reads the engine state (SmartBot.act, what scoring and search's rollouts "
        "call). Through observations: the same games with every seat's observation encoded and decoded "
        "(SmartBot.step, the blueprint interface every network has). Engine alone: the legal-move mask, "
        "every seat's observation, a uniformly random legal move and the step, over the same number of steps "
        "(its games end early and idle; the work per step is the same). Each time: the best of "
        f"{args.repeats} runs (the machine's speed with nothing else on its cores). "
        + (f"Reference C++: `{Path(args.reference).name} --players {game.players} --games G --quiet --seed "
           f"0` on the same core in the same run, G = max(batch, {REFERENCE_GAMES:,}), the best of as many "
           "runs (it plays one game at a time).\n" if args.reference else
           f"For comparison, the reference C++ bot: {REFERENCE_SPEED} (it plays one game at a time; "
           "`--reference` times it in the same run).\n"))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["scores", "speed"])
    ap.add_argument("--games", type=int, default=10000, help="scores: games per player count")
    ap.add_argument("--players", type=int, nargs="+", default=None,
                    help="player counts (scores: default 2 3 4 5; speed: the first, default 2)")
    ap.add_argument("--batch", type=int, default=4096, help="scores: games played at once")
    ap.add_argument("--batch-sizes", "--batch_sizes", type=int, nargs="+", default=[256, 1024, 4096, 16384])
    ap.add_argument("--seed", type=int, default=0, help="run seed: which evaluation deals")
    ap.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (1: per core)")
    ap.add_argument("--record", default=None, help="write experiments/results/bench_smartbot/..._<record>.md")
    ap.add_argument("--out", default="runs/bench_smartbot", help="scratch folder when not recording")
    ap.add_argument("--repeats", type=int, default=3, help="speed: time each the best of this many runs")
    ap.add_argument("--reference", default=None,
                    help="speed: the reference C++ bot's binary (run_SmartBot of Quuxplusone/Hanabi, built "
                         "with `make FAST=1 run_SmartBot`), timed beside the project in the same run")
    args = ap.parse_args(argv)
    try:
        device = resolve_device(args.device)
        args.players = args.players or ([2, 3, 4, 5] if args.what == "scores" else [2])
        for p in args.players:
            GameConfig(players=p)
        if min([args.games, args.batch, *args.batch_sizes, args.threads, args.repeats]) < 1:
            raise ValueError("--games, --batch, --batch-sizes, --threads and --repeats must be >= 1")
        if args.reference and not os.access(args.reference, os.X_OK):
            raise ValueError(f"--reference {args.reference}: no executable file there")
    except ValueError as e:
        sys.exit(f"bench_smartbot: {e}")
    torch.set_num_threads(args.threads)
    out = result_path(NAME, f"{args.what}_{args.record}" if args.record else None, args.out)

    def text(body: str, partial: bool = False) -> str:
        mark = " (partial: the run goes on, or was stopped)" if partial else ""
        return (f"# SmartBot {args.what}, {datetime.date.today()}{mark}\n\n- Machine: {machine()}\n"
                f"- Command: `{command(argv)}`\n\n{body}")

    def save(body: str, partial: bool) -> None:
        try:
            write_atomic(out, text(body, partial).encode())
        except SaveError as e:
            sys.exit(f"bench_smartbot: {e}")

    body = scores(args, device, save) if args.what == "scores" else speed(args, device)
    write_result(text(body), NAME, args.record, args.out, out)


if __name__ == "__main__":
    main()
