"""Learning curve of a blueprint run against scripted baselines, as PNG + markdown.

    python experiments/learning_curve.py runs/blueprint/tiny-20261122-120000      # any run folder
    python experiments/learning_curve.py runs/blueprint/tiny-.../latest.pt --record --name tiny

Writes learning_curve_<name>.{png,md} into the run's own folder (the same curve as W&B's eval/mean
panel, for users without W&B); --record writes into the tracked experiments/results/learning_curve/.

Baselines play the same evaluation seeds as the trainer's greedy evaluation: uniformly random legal
moves, and "safe play" (never plays a card its hints do not prove playable; lbs.hanabi.policies).
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from lbs import ckpt  # noqa: E402
from lbs.configs import from_dict  # noqa: E402
from lbs.hanabi import policies  # noqa: E402
from lbs.models import BLUEPRINT_KIND as KIND  # noqa: E402
from lbs.rl.trainer import TrainConfig  # noqa: E402
from lbs.scoring import play_policy  # noqa: E402

if __package__:  # python -m experiments.learning_curve, or imported
    from .common import machine
else:  # python experiments/learning_curve.py: this folder is first on the import path
    from common import machine


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint", help="a run folder (its latest.pt) or a blueprint checkpoint")
    ap.add_argument("--games", type=int, default=1000)
    ap.add_argument("--name", default=None, help="default: the run folder's name")
    ap.add_argument("--out", default=None, help="default: the run folder (or see --record)")
    ap.add_argument("--record", action="store_true", help="write into the tracked results/learning_curve/")
    args = ap.parse_args()
    path = Path(args.checkpoint)
    path = path / "latest.pt" if path.is_dir() else path
    args.name = args.name or path.parent.name
    tracked = Path(__file__).parent / "results" / "learning_curve"
    args.out = args.out or str(tracked if args.record else path.parent)
    try:
        blob = ckpt.load(path, KIND)
    except ckpt.CheckpointError as e:
        raise SystemExit(f"learning_curve: {e}") from None
    cfg = from_dict(TrainConfig, blob["config"])
    hist = blob["history"]
    if not hist:
        raise SystemExit(f"{args.checkpoint} has no evaluation history yet")
    eval_seed = cfg.seed
    base = {
        "random": play_policy(cfg.game, policies.random_policy, args.games, eval_seed),
        "safe play": play_policy(cfg.game, policies.safe_play, args.games, eval_seed),
    }
    minutes = [h["wall_seconds"] / 60 for h in hist]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.errorbar(minutes, [h["mean"] for h in hist], yerr=[h["sem"] for h in hist], marker="o", ms=3,
                label="blueprint (greedy)")
    for (name, res), style in zip(base.items(), ["--", ":"], strict=True):
        ax.axhline(res.mean, ls=style, color="gray", label=f"{name} {res.mean:.2f}")
    ax.set_xlabel("wall time (minutes)")
    ax.set_ylabel(f"mean score (max {cfg.game.max_score})")
    g = cfg.game
    ax.set_title(f"{g.players}p, {g.colors} colours x {g.ranks} ranks, {args.name} preset")
    ax.legend()
    ax.grid(alpha=0.3)
    stamp = datetime.datetime.now().strftime("%Y-%m-%d")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    png = out / f"learning_curve_{args.name}.png"
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    rows = "\n".join(
        f"| {h['updates']} | {h['wall_seconds'] / 60:.1f} | {h['mean']:.3f} ± {h['sem']:.3f} | "
        f"{100 * h['perfect']:.1f} | {100 * h['bombed']:.1f} |"
        for h in hist
    )
    brows = "\n".join(f"| {k} | {v} |" for k, v in base.items())
    text = f"""# Learning curve: {args.name} preset ({stamp})

- machine: {machine()}
- command: `python {" ".join(sys.argv)}`
- run config: game {cfg.game}, net {cfg.net}, {cfg.actor}, lr {cfg.lr}, batch {cfg.batch_size}
- figure: {png.name}

Baselines on the same {args.games} evaluation seeds:

| policy | result |
|---|---|
{brows}

Greedy evaluation during training ({cfg.eval_games} games each):

| updates | minutes | score ± s.e.m. | perfect % | bomb-out % |
|---|---|---|---|---|
{rows}
"""
    (out / f"learning_curve_{args.name}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
