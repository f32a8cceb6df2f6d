"""How much a search rollout's return varies under the two ways of scoring a lost game.

    python -m experiments.rollout_spread --blueprint smartbot --games 48 --samples 300 --record smartbot

HLE scores a game lost to bombs as 0; the reference SPARTA's server keeps its points minus one
(SearchConfig.keep_lost_points). Search compares moves by the mean of their rollouts, so the spread of a
rollout's return sets how many rollouts tell two moves apart. For roots after --moves blueprint moves of
--games evaluation deals, the player to move keeps its true hand, the undealt cards are reshuffled
--samples times (engine.set_hand) and the blueprint's own move is rolled out to the end under both rules,
on the same decks. Reported per root depth: the root-mean-square standard deviation of the returns, the
share of rollouts that end lost, and the variance ratio (how many more rollouts HLE's rule needs for the
same standard error). Writes to --out (a scratch folder) unless --record NAME, which writes
experiments/results/rollout_spread/rollout_spread_<date>_NAME.md.
"""

from __future__ import annotations

import argparse
import sys
from datetime import date
from pathlib import Path

import torch

from experiments.common import command, machine, result_path, write_result
from lbs import cli
from lbs.acting import play, seat_q
from lbs.ckpt import CheckpointError
from lbs.hanabi import engine
from lbs.models import load_blueprint
from lbs.models.qnet import select_rows
from lbs.search.rollouts import rollout_returns
from lbs.seeding import Stream, game_seeds

ROOT = Path(__file__).resolve().parent.parent


def spread(game, net, games: int, samples: int, moves: int, seed: int) -> dict[str, float]:
    """Returns' spread at roots after `moves` blueprint moves, under both rules, on the same decks."""
    p = game.players
    with torch.no_grad():
        state = engine.reset(game, game_seeds(Stream.EVAL, seed, games))
        state, hid = play(game, state, net.step, net.initial_state(games * p), moves)
        _, legal, q, hid = seat_q(game, state, net.step, hid)
        seat = state.cur_player
        live = (~state.done).nonzero().squeeze(1)
        bp = q.view(games, p, -1).masked_fill(~legal, float("-inf"))[torch.arange(games), seat].argmax(-1)
        idx = live.repeat_interleave(samples)
        root = state.index(idx)
        hand = root.hands[torch.arange(idx.numel()), seat[idx]]
        start = engine.set_hand(game, root, seat[idx], hand, torch.arange(idx.numel()) + 7919 * (moves + 1))
        h = select_rows(hid, (idx[:, None] * p + torch.arange(p)).reshape(-1))
        horizon = int(engine.moves_left_bound(game, state).max()) - 1
        zero, kept = (rollout_returns(game, start, h, bp[idx], net.step, None, horizon, keep_lost_points=k)
                      .view(-1, samples).double() for k in (False, True))
        end_lost = (zero != kept) | (zero < 0)  # a game that goes on never loses points
    return {"roots": live.numel(), "zero": float(zero.var(1).mean().sqrt()),
            "kept": float(kept.var(1).mean().sqrt()), "lost": float(end_lost.double().mean()),
            "ratio": float(zero.var(1).mean() / kept.var(1).mean())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_blueprint_args(ap, ROOT / "checkpoints" / "blueprint_2p.pt")
    ap.add_argument("--games", type=int, default=48, help="roots per depth (evaluation deals)")
    ap.add_argument("--samples", type=int, default=300, help="reshuffled decks per root")
    ap.add_argument("--moves", type=int, nargs="+", default=[10, 30, 45],
                    help="root depths (blueprint moves)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default="runs/experiments", help="scratch folder (default)")
    ap.add_argument("--record", default=None,
                    help="write experiments/results/rollout_spread/rollout_spread_<date>_NAME.md")
    args = ap.parse_args()
    try:
        cli.at_least("--games", args.games, 1)
        cli.at_least("--samples", args.samples, 2)
        for m in args.moves:
            cli.at_least("--moves", m, 0)
        cli.threads(args.threads)
        game, net = load_blueprint(args.blueprint, "cpu", players=args.players)
    except (CheckpointError, ValueError) as e:
        sys.exit(f"rollout_spread: {e}")
    out = result_path("rollout_spread", args.record, args.out)  # refused now, not after the work
    if args.threads:
        torch.set_num_threads(args.threads)
    lines = [f"# Rollout returns under the two rules for a lost game, {date.today()}", "",
             f"- Machine: {machine()}", f"- Command: `{command()}`",
             f"- Blueprint {Path(args.blueprint).name}, {game}; {args.samples} reshuffled decks per root, "
             "the blueprint's move rolled out to the end.", "",
             "| root after moves | roots | spread, lost game = 0 (HLE) | spread, lost game = points - 1 "
             "(reference) | rollouts that end lost | variance ratio |",
             "|---|---|---|---|---|---|"]
    for m in args.moves:
        r = spread(game, net, args.games, args.samples, m, args.seed)
        lines.append(f"| {m} | {r['roots']} | {r['zero']:.2f} | {r['kept']:.2f} | {100 * r['lost']:.2f}% "
                     f"| {r['ratio']:.2f} |")
        print(lines[-1], flush=True)
    lines += ["", "Spread: root-mean-square over roots of the standard deviation of a root's returns. "
              "Variance ratio: how many times the rollouts HLE's rule needs for the standard error the "
              "reference's rule gets."]
    write_result("\n".join(lines) + "\n", "rollout_spread", args.record, args.out, out)


if __name__ == "__main__":
    main()
