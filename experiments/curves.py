"""Learning curves of blueprint (and BAD) runs, side by side: greedy score against the training process's
CPU minutes, wall minutes and learner updates, each recipe phase marked, with the lines to reach, as PNG +
markdown.

    python -m experiments.curves runs/blueprint/recipe --record recipe_2p
    python -m experiments.curves plain=runs/blueprint/tiny-a other=runs/blueprint/tiny-b --record tiny_ab

Each run is FOLDER (its latest.pt), CHECKPOINT, or NAME=either, of a blueprint run (train/blueprint.py) or a
BAD run (train/bad.py, on the same game but for the rule of a lost game: BAD trains with the points kept, so
its curve is drawn twice, points kept and under HLE's rule, where its history has both). The CPU clock is the
history's cpu_seconds
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
from dataclasses import replace
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from experiments.common import machine, result_path, write_result  # noqa: E402
from lbs import ckpt  # noqa: E402
from lbs.bad.config import BadConfig  # noqa: E402
from lbs.bad.trainer import KIND as BAD_KIND  # noqa: E402
from lbs.ckpt import SaveError, write_atomic  # noqa: E402
from lbs.configs import from_dict  # noqa: E402
from lbs.hanabi import GameConfig, policies  # noqa: E402
from lbs.rl.config import TrainConfig  # noqa: E402
from lbs.scoring import play_policy  # noqa: E402

SMARTBOT_2P = 22.981
"""SmartBot's 2-player score over 100,000 games
(results/bench_smartbot/bench_smartbot_2026-11-23_scores_cpu_2p.md)."""


def load_run(spec: str) -> tuple[str, Path, dict]:
    """[NAME=]PATH -> (name, checkpoint path, blob with "game", "history", "phase_ends", "summary" and
    "table"); a bad spec or file exits with one line."""
    name, sep, where = spec.partition("=")
    if not sep:
        name, where = "", spec
    path = Path(where)
    path = path / "latest.pt" if path.is_dir() else path
    try:
        header = ckpt.read_header(path) or {}
        if header.get("kind") == BAD_KIND:
            blob = ckpt.load(path, BAD_KIND, map_location="cpu")
            bad, rec = from_dict(BadConfig, blob["config"]), blob["record"]
            blob.update(game=bad.game, seed=bad.seed, history=rec["history"], phase_ends=(),
                        table=bad_table(rec["history"]),
                        summary=f"BAD, {rec['updates']:,} updates of {bad.games_per_update} games, "
                                f"{rec['wall_seconds'] / 60:.1f} wall minutes in all")
        else:
            blob = ckpt.load(path, "blueprint", map_location="cpu")
            cfg = from_dict(TrainConfig, blob["config"])
            c = blob["counters"]
            recipe = "; ".join(f"{p.kind} {p.updates:,}" for p in cfg.phases)
            ends = {sum(p.updates for p in cfg.phases[: i + 1]) for i in range(len(cfg.phases))}
            blob.update(game=cfg.game, seed=cfg.seed, table=table(blob["history"], cfg), phase_ends=ends,
                        summary=f"recipe {recipe}; {c['updates']:,} updates, {c.get('demo_games', 0):,} "
                                f"demonstrator games, {c['episodes']:,} self-play episodes, "
                                f"{c['wall_seconds'] / 60:.1f} wall minutes in all")
    except (ckpt.CheckpointError, KeyError, TypeError, ValueError) as e:
        sys.exit(f"curves: {spec}: not a blueprint or BAD run's checkpoint ({type(e).__name__}: {e})")
    return name or path.parent.name, path, blob


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


def bad_table(hist: list[dict]) -> str:
    rows = [f"| {h['updates']} | {h['cpu_seconds'] / 60:.1f} | {h['wall_seconds'] / 60:.1f} | "
            f"{h['mean']:.3f} ± {h['sem']:.3f} | {100 * h['bombed']:.1f} | "
            f"{format(h['zeroed'], '.3f') if 'zeroed' in h else '-'} |" for h in hist]
    head = ("| updates | CPU minutes | wall minutes | score ± s.e.m. (its game's rule) | bomb-out % | "
            "HLE's rule (lost games 0) |\n" + "|---" * 6 + "|\n")
    return head + ("\n".join(rows) or "| - | - | - | no evaluation yet | - | - |")


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
    games = {replace(r[2]["game"], bomb_zero=True) for r in runs}  # BAD's rule of a lost game aside
    if len(games) > 1:
        sys.exit(f"curves: the runs play different games ({', '.join(map(str, games))})")
    out = result_path("curves", args.record, args.out)  # refused now (a name taken today, a bad name)
    lead = next((r[2] for r in runs if r[2]["game"].bomb_zero), runs[0][2])  # HLE's rule where a run has it
    game = lead["game"]
    lines = lines_to_reach(game, args.games, lead["seed"])
    fig, (ax, ax_wall, ax_upd) = plt.subplots(1, 3, figsize=(17, 4.5), sharey=True)
    sections = []
    for name, path, blob in runs:
        hist, kept = blob["history"], not blob["game"].bomb_zero
        curves = [(f"{name}, points kept" if kept else name, hist, "mean", "-")]
        if kept:  # its evaluation's second mean: the same games under HLE's rule
            curves.append((f"{name}, HLE's rule", [h for h in hist if "zeroed" in h], "zeroed", "--"))
        color = None
        for label, rows, key, style in curves:
            cpu, wall = [h["cpu_seconds"] / 60 for h in rows], [h["wall_seconds"] / 60 for h in rows]
            ys = [h[key] for h in rows]
            errs = [h["sem"] for h in rows] if key == "mean" else None
            drawn = ax.errorbar(cpu, ys, yerr=errs, marker="o", ms=2, ls=style, label=label, color=color)
            color = drawn[0].get_color()
            ax_wall.errorbar(wall, ys, yerr=errs, marker="o", ms=2, ls=style, label=label, color=color)
            ax_upd.errorbar([h["updates"] for h in rows], ys, yerr=errs, marker="o", ms=2, ls=style,
                            label=label, color=color)
        for h in (h for h in hist if h["updates"] in blob["phase_ends"]):  # where each phase ended
            ax.axvline(h["cpu_seconds"] / 60, color=color, alpha=0.25, ls=":")
        sections.append(f"### {name}\n\n`{path}`: {blob['summary']}.\n\n{blob['table']}\n")
    for a, clock in ((ax, "CPU minutes of the training process"), (ax_wall, "wall minutes of training"),
                     (ax_upd, "learner updates (a BAD update: one batch of whole games)")):
        for (label, y), style in zip(lines.items(), ("--", ":"), strict=False):
            a.axhline(y, ls=style, color="gray", label=f"{label} {y:.2f}")
        a.set_xlabel(clock)
        a.legend(fontsize=8)
        a.grid(alpha=0.3)
    ax.set_ylabel(f"greedy score (max {game.max_score})")
    fig.suptitle(f"learning curves: {args.record or ', '.join(r[0] for r in runs)}")
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
