"""Learning curves of blueprint runs, side by side: greedy score against the training process's CPU minutes
and against wall minutes, each recipe phase marked, with the lines to reach, as PNG + markdown.

    python -m experiments.curves runs/blueprint/recipe --record recipe_2p
    python -m experiments.curves plain=runs/blueprint/tiny-a other=runs/blueprint/tiny-b --record tiny_ab

Each run is FOLDER (its latest.pt), CHECKPOINT, or NAME=either. The CPU clock is the history's cpu_seconds
(every thread of the process, demonstrator games included, counted on across resumes and from an --init
file's clock): the fair clock on a shared machine. The lines to reach: SmartBot's score on the full 2-player
game; on any other game uniformly random legal moves and "safe play" (lbs.hanabi.policies) on the same
evaluation deals. Writes experiments/results/curves/curves_<date>_NAME.{md,png} with --record NAME, else a
scratch file under --out.
"""

from __future__ import annotations

import argparse
import datetime
import io
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from experiments.common import machine, result_path, write_result  # noqa: E402
from lbs import ckpt  # noqa: E402
from lbs.ckpt import SaveError, write_atomic  # noqa: E402
from lbs.configs import from_dict  # noqa: E402
from lbs.hanabi import GameConfig, policies  # noqa: E402
from lbs.rl.config import TrainConfig  # noqa: E402
from lbs.scoring import play_policy  # noqa: E402

SMARTBOT_2P = 22.981
"""SmartBot's 2-player score over 100,000 games
(results/bench_smartbot/bench_smartbot_2026-11-23_scores_cpu_2p.md)."""


def load_run(spec: str) -> tuple[str, Path, dict]:
    """[NAME=]PATH -> (name, checkpoint path, blob); a bad spec or file exits with one line."""
    name, sep, where = spec.partition("=")
    if not sep:
        name, where = "", spec
    path = Path(where)
    path = path / "latest.pt" if path.is_dir() else path
    try:
        blob = ckpt.load(path, "blueprint", map_location="cpu")
        cfg = from_dict(TrainConfig, blob["config"])
        blob["history"], blob["counters"]  # noqa: B018  (a run's checkpoint, not a shipped file)
    except (ckpt.CheckpointError, KeyError, TypeError, ValueError) as e:
        sys.exit(f"curves: {spec}: not a blueprint run's checkpoint ({type(e).__name__}: {e})")
    return name or path.parent.name, path, {**blob, "cfg": cfg}


def lines_to_reach(game: GameConfig, games: int, seed: int) -> dict[str, float]:
    if game == GameConfig():
        return {"SmartBot": SMARTBOT_2P}
    return {"random": play_policy(game, policies.random_policy, games, seed).mean,
            "safe play": play_policy(game, policies.safe_play, games, seed).mean}


def table(hist: list[dict], cfg: TrainConfig) -> str:
    rows = []
    for h in hist:
        phase = cfg.phases[h.get("phase", 0)].kind
        check = h.get("value_check", {})
        extra = f"{100 * h['agreement']:.1f}" if "agreement" in h else ""
        vc = f"{check['rms_own']:.2f} / {check['rms_other']:.2f}" if check else ""
        kept = f"{100 * check['moves_kept']:.1f}" if "moves_kept" in check else ""
        rows.append(f"| {h['updates']} | {h.get('phase', 0)} {phase} | {h['cpu_seconds'] / 60:.1f} | "
                    f"{h['wall_seconds'] / 60:.1f} | {h['mean']:.3f} ± {h['sem']:.3f} | "
                    f"{100 * h['bombed']:.1f} | {extra} | {vc} | {kept} |")
    head = ("| updates | phase | CPU minutes | wall minutes | score ± s.e.m. | bomb-out % | "
            "agreement with the demonstrator % | value check RMS own / other | moves kept % |\n"
            + "|---" * 9 + "|\n")
    return head + ("\n".join(rows) or "| - | - | - | - | no evaluation yet | - | - | - | - |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="[NAME=]FOLDER or [NAME=]CHECKPOINT of blueprint runs")
    ap.add_argument("--games", type=int, default=1000,
                    help="deals the random and safe-play lines are played on")
    ap.add_argument("--record", default=None, metavar="NAME",
                    help="write experiments/results/curves/curves_<date>_NAME.{md,png}")
    ap.add_argument("--out", default="runs/curves", help="scratch folder when not recording")
    ap.add_argument("--notes", default="", help="free text for the markdown (how the runs were started)")
    args = ap.parse_args()
    runs = [load_run(s) for s in args.runs]
    games = {r[2]["cfg"].game for r in runs}
    if len(games) > 1:
        sys.exit(f"curves: the runs play different games ({', '.join(map(str, games))})")
    out = result_path("curves", args.record, args.out)  # refused now (a name taken today, a bad name)
    first = runs[0][2]["cfg"]
    lines = lines_to_reach(first.game, args.games, first.seed)
    fig, (ax, ax_wall) = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    sections = []
    for name, path, blob in runs:
        hist, cfg = blob["history"], blob["cfg"]
        means, sems = [h["mean"] for h in hist], [h["sem"] for h in hist]
        drawn = ax.errorbar([h["cpu_seconds"] / 60 for h in hist], means, yerr=sems, marker="o", ms=3,
                            label=name)
        ax_wall.errorbar([h["wall_seconds"] / 60 for h in hist], means, yerr=sems, marker="o", ms=3,
                         label=name, color=drawn[0].get_color())
        ends = [h for h in hist if h["updates"] in {sum(p.updates for p in cfg.phases[: i + 1])
                                                    for i in range(len(cfg.phases))}]
        for h in ends:  # where each phase ended
            ax.axvline(h["cpu_seconds"] / 60, color=drawn[0].get_color(), alpha=0.25, ls=":")
        c = blob["counters"]
        recipe = "; ".join(f"{p.kind} {p.updates:,}" for p in cfg.phases)
        sections.append(f"### {name}\n\n`{path}`: recipe {recipe}; {c['updates']:,} updates, "
                        f"{c.get('demo_games', 0):,} demonstrator games, {c['episodes']:,} self-play "
                        f"episodes, {c['wall_seconds'] / 60:.1f} wall minutes in all.\n\n"
                        f"{table(hist, cfg)}\n")
    for a, clock in ((ax, "CPU minutes of the training process"), (ax_wall, "wall minutes of training")):
        for (label, y), style in zip(lines.items(), ("--", ":"), strict=False):
            a.axhline(y, ls=style, color="gray", label=f"{label} {y:.2f}")
        a.set_xlabel(clock)
        a.grid(alpha=0.3)
    ax.set_ylabel(f"greedy score (max {first.game.max_score})")
    ax.legend()
    fig.suptitle(f"blueprint learning curves: {args.record or ', '.join(r[0] for r in runs)}")
    png = out.with_suffix(".png")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120)
    try:
        write_atomic(png, buf.getvalue())
    except SaveError as e:
        sys.exit(f"curves: {e}")
    reach = ", ".join(f"{k} {v:.3f}" for k, v in lines.items())
    text = (f"# Learning curves ({datetime.date.today()})\n\n- machine: {machine()}\n"
            f"- command: `python -m experiments.curves {' '.join(sys.argv[1:])}`\n- figure: {png.name}\n"
            f"- lines to reach: {reach}\n\n{args.notes}\n\n" + "\n".join(sections))
    write_result(text, "curves", args.record, args.out, out)


if __name__ == "__main__":
    main()
