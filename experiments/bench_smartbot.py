"""SmartBot: its scores beside the reference bot's, and its speed beside the engine's.

    python -m experiments.bench_smartbot scores --games 100000 --players 2 3 4 5 --record cpu
    python -m experiments.bench_smartbot speed --batch-sizes 256 1024 4096 16384 --threads 1 --record cpu

`scores` plays games 0 .. games-1 of the evaluation stream (the deals `train/score.py smartbot` plays) with
SmartBot in every seat and sets mean ± s.e.m. (HLE scoring: 0 when the last life is lost), the points kept
(the fireworks, the reference server's score), perfect and bomb-out rates beside the reference C++ bot's
numbers over 100,000 games, with the distance in standard errors. `speed` times whole games in lockstep
(as scoring plays them: the game's longest possible length in steps, every seat's observation encoded, the
bot's step, the engine's step) at each batch size on one process, and the engine alone with uniformly
random legal moves over the same steps in the same run as the floor. Per CPU core: `--threads 1`.
Results go to experiments/results/bench_smartbot/.
"""

from __future__ import annotations

import argparse
import datetime
import math
import sys
import time
from dataclasses import dataclass

import torch

from experiments.common import command, machine, result_path, sync, write_result
from lbs.acting import Turn, play, until_all_over
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


def play_smartbot(game: GameConfig, seeds: torch.Tensor) -> dict[str, torch.Tensor]:
    """SmartBot in every seat on the deals of `seeds`, as scoring plays them (lockstep, until every game is
    over on the CPU): per game HLE score, points kept, bombed, perfect; and the lockstep steps played."""
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
        state, _ = play(game, state, bot.step, hid, game.max_steps, hook=stop)
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


def _timed(fn, device: torch.device) -> float:
    sync(device)
    t0 = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - t0


def speed(args: argparse.Namespace, device: torch.device) -> str:
    game = GameConfig(players=args.players[0])
    rows = ["| games at once | SmartBot games/s | lockstep steps | ms per step | engine alone games/s | "
            "SmartBot / engine |", "|---|---|---|---|---|---|"]
    for batch in args.batch_sizes:
        seeds = game_seeds(Stream.EVAL, args.seed, batch, 0, device)
        play_smartbot(game, seeds[: min(batch, 64)])  # warm-up
        out: dict[str, torch.Tensor] = {}
        bot_s = _timed(lambda: out.update(play_smartbot(game, seeds)), device)  # noqa: B023
        steps = int(out["steps"])

        def floor() -> None:
            state = engine.reset(game, seeds, torch.zeros_like(seeds))  # noqa: B023
            for _ in range(steps):  # noqa: B023
                state, *_ = core_step(game, state, seeds, seeds, torch.float32)  # noqa: B023

        floor_s = _timed(floor, device)
        rows.append(f"| {batch:,} | {batch / bot_s:,.0f} | {steps} | {1000 * bot_s / steps:.1f} | "
                    f"{batch / floor_s:,.0f} | {floor_s / bot_s:.2f} |")
        print(rows[-1], file=sys.stderr, flush=True)
    return "\n".join(rows) + (
        f"\n\n{game.players} players. A batch plays as scoring does: lockstep steps until every game is over "
        f"on the CPU (all {game.max_steps}, the longest possible game, elsewhere), finished games idling. "
        "Engine alone: the legal-move mask, every seat's observation, a uniformly random legal move and the "
        "step, over the same number of steps (its games end early and idle; the work per step is the same). "
        f"For comparison, the reference C++ bot: {REFERENCE_SPEED} (it plays one game at a time).\n")


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
    args = ap.parse_args(argv)
    try:
        device = resolve_device(args.device)
        args.players = args.players or ([2, 3, 4, 5] if args.what == "scores" else [2])
        for p in args.players:
            GameConfig(players=p)
        if min([args.games, args.batch, *args.batch_sizes, args.threads]) < 1:
            raise ValueError("--games, --batch, --batch-sizes and --threads must be >= 1")
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
