"""Search modes side by side on the same deals: score, paired difference with the blueprint, cost.

    python experiments/search_table.py --modes blueprint lbs-1 lbs-8 lbs-16 lbs-inf --games 200 \
        --rollouts 1000 --min-rollouts 50                      # shipped full-game pair
    python experiments/search_table.py --blueprint checkpoints/blueprint_2c.pt \
        --belief checkpoints/belief_2c.pt --games 500 --rollouts 1000 --min-rollouts 50 --record small_2c

Every mode plays games 0..N-1 of the evaluation deals of --seed; the blueprint row is the same games
without search, and each mode's paired difference is taken per deal against it. Writes a markdown
table (and the per-game scores as JSON) to --out (a scratch folder) or, with --record NAME, to
experiments/results/search_<date>_NAME.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import sys
import time
from pathlib import Path

import torch

from lbs.ckpt import CheckpointError
from lbs.infer import InferenceServer, ServerConfig
from lbs.models import load_belief, load_blueprint, resolve_device
from lbs.search.agent import SearchConfig, Timing, parse_mode, play_games
from lbs.search.report import summarize_run
from lbs.search.samplers import BELIEF, LearnedBelief

sys.path.insert(0, str(Path(__file__).parent))
from common import machine, write_result  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--modes", nargs="+", default=["blueprint", "lbs-1", "lbs-8", "lbs-16", "lbs-inf"])
    ap.add_argument("--games", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rollouts", type=int, default=1000)
    ap.add_argument("--min-rollouts", type=int, default=50)
    ap.add_argument("--batch-games", type=int, default=64)
    ap.add_argument("--blueprint", default=str(ROOT / "checkpoints" / "blueprint_2p.pt"))
    ap.add_argument("--belief", default=str(ROOT / "checkpoints" / "belief_2p.pt"))
    ap.add_argument("--device", default="auto")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--out", default="runs/experiments", help="scratch folder for the table (default)")
    ap.add_argument(
        "--record", default=None, help="write to experiments/results/search_<date>_NAME.md instead"
    )
    args = ap.parse_args()
    try:
        kinds = {m: parse_mode(m) for m in args.modes}
        device = resolve_device(args.device)
        game, net = load_blueprint(args.blueprint, device=device)
        _, model = load_belief(args.belief, blueprint_path=args.blueprint, game=game, device=device)
    except (CheckpointError, ValueError) as e:
        sys.exit(f"search_table: {e}")
    if args.threads:
        torch.set_num_threads(args.threads)
    server = InferenceServer(net, device=device, cfg=ServerConfig(coalesce=False))
    server.register(BELIEF, model)
    rows, scores = [], {}
    with torch.no_grad():
        base = play_games(
            game,
            server.step,
            server.initial_state,
            None,
            SearchConfig(rollouts=10**9),
            args.games,
            args.seed,
            args.batch_games,
            device,
        )
        for mode in args.modes:
            sampler, depth = kinds[mode]
            if sampler == "none":
                results, seconds, timing = base, math.nan, None
            else:
                cfg = SearchConfig(depth=depth, rollouts=args.rollouts, min_rollouts=args.min_rollouts)
                timing = Timing()
                t0 = time.perf_counter()
                results = play_games(
                    game,
                    timing.wrap(server.step),
                    server.initial_state,
                    lambda seat=cfg.seat: LearnedBelief(game, server, seat),
                    cfg,
                    args.games,
                    args.seed,
                    args.batch_games,
                    device,
                    timing,
                )
                seconds = time.perf_counter() - t0
            s = summarize_run(mode, results, base, seconds, game.max_score)
            scores[mode] = [r.record.score for r in results]
            rows.append((mode, s, timing))
            print(" | ".join(s.lines()), flush=True)
    server.close()
    lines = [
        f"# Search on the same deals: {game}",
        "",
        f"- Date: {datetime.date.today()}; machine: {machine()}; device {device}.",
        f"- Command: `python {' '.join(sys.argv)}`",
        f"- Blueprint `{args.blueprint}`, belief `{args.belief}`; {args.games} games (evaluation deals of "
        f"seed {args.seed}), {args.rollouts} rollouts per searched move, {args.min_rollouts} per move before "
        "pruning.",
        "",
        "| mode | score ± s.e.m. | paired diff vs blueprint | perfect % | bomb-out % | s / game "
        "| s / searched move | rollouts/s | deviate % "
        "| time in networks / rollout engine + bookkeeping / belief / rest (s) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for mode, s, t in rows:
        diff = "—" if mode == "blueprint" else f"{s.paired_diff:+.3f} ± {s.paired_sem:.3f}"
        cost = (
            "—"
            if t is None
            else (
                f"{t.networks:.0f} / {t.rollouts - t.networks:.0f} / {t.belief:.0f} / "
                f"{s.seconds - t.rollouts - t.belief:.0f}"
            )
        )
        per_game = "—" if mode == "blueprint" else f"{s.seconds_per_game:.2f}"
        per_move = "—" if mode == "blueprint" else f"{s.seconds_per_search:.3f}"
        rps = "—" if mode == "blueprint" else f"{s.rollouts_per_s:,.0f}"
        dev = "—" if mode == "blueprint" else f"{s.deviation_pct:.1f}"
        lines.append(
            f"| {mode} | {s.score.mean:.3f} ± {s.score.sem:.3f} | {diff} | {100 * s.score.perfect:.1f} | "
            f"{100 * s.score.bombed:.1f} | {per_game} | {per_move} | {rps} | {dev} | {cost} |"
        )
    out = write_result("\n".join(lines) + "\n", "search", args.record, args.out)
    out.with_suffix(".json").write_text(json.dumps(scores) + "\n")


if __name__ == "__main__":
    main()
