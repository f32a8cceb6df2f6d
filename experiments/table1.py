"""The LBS paper's Table 1 for our blueprints: every search mode on the same deals.

    python experiments/table1.py --games 200 --rollouts 1000 --min-rollouts 50           # shipped full game
    python experiments/table1.py --blueprint checkpoints/blueprint_2c.pt --belief checkpoints/belief_2c.pt \
        --games 1000 --rollouts 400 --min-rollouts 20 --record small_2c

Modes (default: blueprint sparta lbs-inf lbs-32 lbs-16 lbs-8 lbs-1) play games 0..N-1 of the evaluation
deals of --seed; the blueprint row is the same games without search. For each mode: mean ± s.e.m., the
paired difference with the blueprint (± its standard error), perfect %, time per game, rollouts per second,
how often the search move replaced the blueprint move, sampler fallbacks, and (when SPARTA ran) the share
of SPARTA's gain over the blueprint each mode keeps and its speed-up over SPARTA. Also a figure: gain over
the blueprint against time per game, one point per mode. Writes into --out (a scratch folder) unless
--record NAME, which writes experiments/results/table1_<date>_NAME.{md,png,json}.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch

from lbs.ckpt import CheckpointError
from lbs.models import load_belief, load_blueprint, resolve_device
from lbs.search.agent import SearchConfig, Timing, parse_mode, play_games, sampler_factory
from lbs.search.report import summarize_run
from lbs.search.samplers import serve

sys.path.insert(0, str(Path(__file__).parent))
from common import machine, write_result  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MODES = ["blueprint", "sparta", "lbs-inf", "lbs-32", "lbs-16", "lbs-8", "lbs-1"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--modes", nargs="+", default=MODES)
    ap.add_argument("--games", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rollouts", type=int, default=1000)
    ap.add_argument("--min-rollouts", type=int, default=50)
    ap.add_argument("--max-range", type=int, default=1_000_000)
    ap.add_argument("--batch-games", type=int, default=64)
    ap.add_argument("--blueprint", default=str(ROOT / "checkpoints" / "blueprint_2p.pt"))
    ap.add_argument("--belief", default=str(ROOT / "checkpoints" / "belief_2p.pt"))
    ap.add_argument("--device", default="auto")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--out", default="runs/experiments", help="scratch folder (default)")
    ap.add_argument("--record", default=None, help="write experiments/results/table1_<date>_NAME.* instead")
    args = ap.parse_args()
    try:
        kinds = {m: parse_mode(m) for m in args.modes}
        device = resolve_device(args.device)
        game, net = load_blueprint(args.blueprint, device=device)
        _, model = load_belief(args.belief, blueprint_path=args.blueprint, game=game, device=device)
        SearchConfig(rollouts=args.rollouts, min_rollouts=args.min_rollouts).check(game)
    except (CheckpointError, ValueError) as e:
        sys.exit(f"table1: {e}")
    if args.threads:
        torch.set_num_threads(args.threads)
    server = serve(net, model, device)
    rows, scores = [], {}
    with torch.no_grad():
        base = play_games(
            game,
            server.step,
            server.initial_state,
            None,
            SearchConfig(),
            args.games,
            args.seed,
            args.batch_games,
            device,
        )
        for mode in args.modes:
            kind, depth = kinds[mode]
            timing = None
            results, seconds = base, math.nan
            if kind != "none":
                cfg = SearchConfig(depth=depth, rollouts=args.rollouts, min_rollouts=args.min_rollouts)
                timing = Timing()
                make = sampler_factory(kind, game, server, net, cfg.seat, args.max_range)
                t0 = time.perf_counter()
                results = play_games(
                    game,
                    timing.wrap(server.step),
                    server.initial_state,
                    make,
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
    sparta = next((s for m, s, _ in rows if m == "sparta"), None)
    lines = [
        f"# Table 1 (LBS paper) for {Path(args.blueprint).name}: {game}",
        "",
        f"- Machine: {machine()}; device {device}.",
        f"- Command: `python {' '.join(sys.argv)}`",
        f"- {args.games} games (evaluation deals of seed {args.seed}), {args.rollouts} rollouts per "
        f"searched move, {args.min_rollouts} per move before pruning, delta 0.05, SPARTA max range "
        f"{args.max_range:,}.",
        "- Gain kept: the mode's paired gain over the blueprint / SPARTA's; speed-up: SPARTA's time / the "
        "mode's.",
        "",
        "| mode | score ± s.e.m. | vs blueprint (paired) | perfect % | s / game | rollouts/s | deviate % "
        "| fallback % | SPARTA's gain kept | speed-up over SPARTA | networks / engine / sampler / rest (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for mode, s, t in rows:
        if mode == "blueprint":
            lines.append(
                f"| blueprint | {s.score.mean:.3f} ± {s.score.sem:.3f} | — | {100 * s.score.perfect:.1f} "
                "| — | — | — | — | — | — | — |"
            )
            continue
        kept = speed = "—"
        if sparta is not None and mode != "sparta" and sparta.paired_diff > 0:
            kept = f"{100 * s.paired_diff / sparta.paired_diff:.0f}%"
            speed = f"{sparta.seconds_per_game / s.seconds_per_game:.1f}x"
        split = (
            f"{t.networks:.0f} / {t.rollouts - t.networks:.0f} / {t.sampler:.0f} / "
            f"{s.seconds - t.rollouts - t.sampler:.0f}"
        )
        lines.append(
            f"| {mode} | {s.score.mean:.3f} ± {s.score.sem:.3f} | {s.paired_diff:+.3f} ± "
            f"{s.paired_sem:.3f} | {100 * s.score.perfect:.1f} | {s.seconds_per_game:.2f} | "
            f"{s.rollouts_per_s:,.0f} | {s.deviation_pct:.1f} | {s.fallback_pct:.1f} | {kept} | {speed} "
            f"| {split} |"
        )
    out = write_result("\n".join(lines) + "\n", "table1", args.record, args.out)
    out.with_suffix(".json").write_text(
        json.dumps({"scores": scores, "summaries": {m: s.to_dict() for m, s, _ in rows}}, default=str) + "\n"
    )
    figure([(m, s) for m, s, _ in rows if m != "blueprint"], game, out.with_suffix(".png"))


def figure(points, game, path: Path) -> None:
    """Gain over the blueprint (± s.e.) against seconds per game, one point per mode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for mode, s in points:
        ax.errorbar(s.seconds_per_game, s.paired_diff, yerr=s.paired_sem, fmt="o", capsize=3)
        ax.annotate(mode, (s.seconds_per_game, s.paired_diff), textcoords="offset points", xytext=(5, 5))
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("seconds per game (log)")
    ax.set_ylabel("score gain over the blueprint (paired)")
    ax.set_title(f"Search on {game.colors} colours x {game.ranks} ranks, {game.players} players")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"figure: {path}")


if __name__ == "__main__":
    main()
