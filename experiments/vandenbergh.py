"""The Van den Bergh rule policy alone in self-play, 2-5 players, on the full game with the RIS-MCTS paper's
score (points kept when the last life is lost: GameConfig.bomb_zero=False), beside the paper's Table III.

    python -m experiments.vandenbergh --games 1000 --record selfplay

Prints, per player count, the mean score ± s.e.m. over the evaluation deals of --seed, the games that lost
every life, and the paper's number (the competition framework's implementation of the rules).
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time

import torch

from experiments.common import command, machine, result_path, write_result
from lbs import cli
from lbs.acting import play
from lbs.bots import VanDenBergh
from lbs.hanabi import GameConfig, engine
from lbs.seeding import Stream, game_seeds

PAPER = {2: 13.8, 3: 17.7, 4: 17.2, 5: 16.3}
"""Goodman 2019, Table III, 'Van den Bergh 2015' (4 players also Table I: 17.20 ± 0.08)"""


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--players", type=int, nargs="+", default=[2, 3, 4, 5], help="player counts")
    ap.add_argument("--games", type=int, default=1000, help="deals per player count, played at once")
    ap.add_argument("--seed", type=int, default=0, help="which evaluation deals")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (0: torch's default)")
    ap.add_argument("--record", default=None, metavar="NAME",
                    help="write experiments/results/vandenbergh/vandenbergh_<date>_NAME.md")
    ap.add_argument("--out", default="runs/vandenbergh", help="scratch folder when not recording")
    args = ap.parse_args(argv)
    try:
        cli.at_least("--games", args.games, 1)
        if cli.threads(args.threads):
            torch.set_num_threads(args.threads)
        games = {p: GameConfig(players=p, bomb_zero=False) for p in args.players}
    except ValueError as e:
        sys.exit(f"vandenbergh: {e}")
    out = result_path("vandenbergh", args.record, args.out)
    device = torch.device(args.device)
    rows = []
    for p, game in games.items():
        bot = VanDenBergh(game, device)
        t = time.perf_counter()
        state = engine.reset(game, game_seeds(Stream.EVAL, args.seed, args.games, device=device))
        final, _ = play(game, state, bot.step, bot.initial_state(args.games * p), game.max_steps)
        seconds = time.perf_counter() - t
        s = final.fireworks.sum(1).double().cpu()
        sem = float(s.std() / len(s) ** 0.5)
        lost = int((final.life_tokens <= 0).sum())
        print(f"{p} players: {s.mean():.2f} ± {sem:.2f} over {len(s)} deals ({lost} lost every life), paper "
              f"{PAPER.get(p, float('nan')):.1f}; {seconds:.1f} s", flush=True)
        paper = PAPER.get(p, float("nan"))
        rows.append(f"| {p} | {s.mean():.2f} ± {sem:.2f} | {lost}/{len(s)} | {paper:.1f} | {seconds:.1f} |")
    text = f"""# The Van den Bergh rule policy in self-play ({datetime.date.today()})

- machine: {machine()}
- command: `{command(argv)}`
- {args.games} evaluation deals of seed {args.seed} per player count; score: the fireworks at the end, kept
  when the last life is lost (the paper's; GameConfig.bomb_zero=False)
- paper: Goodman 2019, Table III (the CIG competition framework's implementation of the rules)

| players | score ± s.e.m. | lost every life | paper | seconds (all deals at once) |
|---|---|---|---|---|
{chr(10).join(rows)}
"""
    write_result(text, "vandenbergh", args.record, args.out, out)


if __name__ == "__main__":
    main()
