"""Learning curves of several blueprint runs side by side: greedy score against the runs' CPU minutes, with
SmartBot's score as the line to reach, as PNG + markdown.

    python experiments/compare_curves.py dqfd=runs/demo_cmp/dqfd plain=runs/demo_cmp/plain \
        warm=runs/demo_cmp/warm --name demo_2p --notes "commands ..."

Each run is NAME=FOLDER (its latest.pt) or NAME=CHECKPOINT: a blueprint run's, or a network saved by
`experiments/imitation.py --save` (its measurements drawn the same way; it keeps no wall clock). The left
panel's x axis is the training process's CPU time (`cpu_seconds` of each evaluation: every thread of the
process, demonstration recording included, counted on from the last evaluation of a resumed run and from
the init file's clock for a run started from one), the fair clock on a shared machine; the right panel's
is the run's wall time (resumed parts included, start-up not). Writes
experiments/results/compare_curves/compare_curves_<date>_<name>.{md,png}.
"""

from __future__ import annotations

import argparse
import datetime
import io
import math
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from lbs import ckpt  # noqa: E402
from lbs.ckpt import SaveError, write_atomic  # noqa: E402

if __package__:
    from .common import machine, result_path, write_result
else:
    from common import machine, result_path, write_result

SMARTBOT_2P = 22.981
"""SmartBot's 2-player score over 100,000 games
(results/bench_smartbot/bench_smartbot_2026-11-23_scores_cpu_2p.md)."""
CONFIG_KEYS = ("demo_games", "demo_ratio", "warm_start_updates", "margin", "lr", "batch_size", "eval_games")


def load_run(spec: str) -> tuple[str, Path, dict]:
    """NAME=PATH -> (name, checkpoint path, blob); a bad spec or file exits with one line."""
    name, sep, where = spec.partition("=")
    if not sep or not name or not where:
        sys.exit(f"compare_curves: {spec!r}: give runs as NAME=FOLDER or NAME=CHECKPOINT")
    path = Path(where)
    path = path / "latest.pt" if path.is_dir() else path
    try:
        blob = ckpt.load(path, "blueprint", map_location="cpu")
    except ckpt.CheckpointError as e:
        sys.exit(f"compare_curves: {e}")
    return name, path, blob


def minutes(seconds: float) -> str:
    return "—" if math.isnan(seconds) else f"{seconds / 60:.1f}"


def curve(blob: dict) -> tuple[list[dict], str]:
    """A run's evaluations as the trainer's history rows (updates, cpu_seconds, wall_seconds, mean, sem,
    bombed), and what its training saw; an imitation run's measurements read the same way."""
    if "points" in blob and "history" not in blob:  # experiments/imitation.py --save
        rows = [{"updates": p["updates"], "cpu_seconds": 60 * p["cpu_min"],
                 "wall_seconds": 60 * p.get("wall_min", float("nan")),  # older files kept CPU time alone
                 "mean": p["score"], "sem": p["sem"], "bombed": p["bombed"]} for p in blob["points"]]
        prog = blob["progress"]
        return rows, (f"supervised imitation of SmartBot (experiments/imitation.py); {prog['updates']} "
                      f"updates, {prog['games']} SmartBot games, {prog['cpu_seconds'] / 60:.1f} CPU minutes "
                      "in all")
    c = blob["counters"]
    cfg = blob["config"]
    fields = ", ".join(f"{k} {cfg[k]}" for k in CONFIG_KEYS if k in cfg)
    return blob["history"], (f"{fields}; {c['updates']} updates, {c['episodes']} self-play episodes, "
                             f"{c['wall_seconds'] / 60:.1f} wall minutes in all")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="NAME=FOLDER or NAME=CHECKPOINT")
    ap.add_argument("--name", default="runs", help="the record's name: experiments/results/compare_curves/"
                    "compare_curves_<date>_NAME.md and .png")
    ap.add_argument("--notes", default="", help="free text for the markdown (how the runs were started)")
    args = ap.parse_args()
    out = result_path("compare_curves", args.name, "")  # refused now (a name taken today, a bad name)
    runs = [load_run(s) for s in args.runs]
    fig, (ax, ax_wall) = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    sections = []
    for name, path, blob in runs:
        hist, about = curve(blob)
        if hist:
            cpu = [h.get("cpu_seconds", h["wall_seconds"]) / 60 for h in hist]
            means, sems = [h["mean"] for h in hist], [h["sem"] for h in hist]
            line = ax.errorbar(cpu, means, yerr=sems, marker="o", ms=3, label=name)
            wall = [h["wall_seconds"] / 60 for h in hist]
            if not any(math.isnan(w) for w in wall):
                ax_wall.errorbar(wall, means, yerr=sems, marker="o", ms=3, label=name,
                                 color=line[0].get_color())
        rows = "\n".join(
            f"| {h['updates']} | {h.get('cpu_seconds', float('nan')) / 60:.1f} | "
            f"{minutes(h['wall_seconds'])} | {h['mean']:.3f} ± {h['sem']:.3f} | {100 * h['bombed']:.1f} |"
            for h in hist
        ) or "| - | - | - | no evaluation yet | - |"  # a run stopped before its first: listed, not drawn
        sections.append(
            f"### {name}\n\n`{path}`: {about}.\n\n"
            "| updates | CPU minutes | wall minutes | score ± s.e.m. | bomb-out % |\n"
            f"|---|---|---|---|---|\n{rows}\n"
        )
    for a, clock in ((ax, "CPU minutes of the training process"), (ax_wall, "wall minutes of training")):
        a.axhline(SMARTBOT_2P, ls="--", color="gray", label=f"SmartBot {SMARTBOT_2P:.2f}")
        a.set_xlabel(clock)
        a.grid(alpha=0.3)
    ax.set_ylabel("greedy score")
    ax.legend()
    fig.suptitle(f"blueprint learning curves: {args.name}")
    stamp = datetime.date.today()
    png = out.with_suffix(".png")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120)
    try:
        write_atomic(png, buf.getvalue())
    except SaveError as e:
        sys.exit(f"compare_curves: {e}")
    text = (f"# Learning curves: {args.name} ({stamp})\n\n- machine: {machine()}\n"
            f"- command: `python {' '.join(sys.argv)}`\n- figure: {png.name}\n"
            f"- line to reach: SmartBot {SMARTBOT_2P} (2 players, 100,000 games)\n\n{args.notes}\n\n"
            + "\n".join(sections))
    write_result(text, "compare_curves", args.name, "", out)


if __name__ == "__main__":
    main()
