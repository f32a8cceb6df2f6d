"""The Bayesian action decoder's two-step matrix game (Foerster et al., ICML 2019, section 4.1, Figure 3):
policy gradient, BAD and BAD with counterfactual gradients, each trained as many independent runs at once
on the CPU (lbs.bad.matrix_game), against the exact optimum.

    python -m experiments.bad_matrix --runs 1000 --episodes 3500 --record NAME

Writes experiments/results/bad_matrix/bad_matrix_<date>_NAME.md with --record NAME, and the figure (mean
reward against episodes, s.e.m. bands over runs, the optimum dashed) beside it as a .png.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from pathlib import Path

import torch

from experiments.common import command, machine, result_path, write_result
from lbs import cli
from lbs.bad.matrix_game import MODES, Config, optimal_value, train

LABELS = {"pg": "policy gradient", "bad": "BAD", "bad_cf": "BAD + CF gradients"}


def plot(path: Path, curves: dict[str, torch.Tensor], every: int, optimum: float, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for mode, rewards in curves.items():
        x = [(i + 1) * every for i in range(rewards.shape[1])]
        mean = rewards.mean(0)
        sem = rewards.std(0) / rewards.shape[0] ** 0.5
        ax.plot(x, mean, label=LABELS[mode])
        ax.fill_between(x, mean - sem, mean + sem, alpha=0.3)
    ax.axhline(optimum, ls="--", color="k", label=f"optimum ({optimum:g})")
    ax.set_xlabel("episodes (updates of 32 deals)")
    ax.set_ylabel("mean reward")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=1000, help="independent runs per learner")
    ap.add_argument("--episodes", type=int, default=3500, help="updates per run (batches of --batch deals)")
    ap.add_argument("--batch", type=int, default=32, help="deals per update")
    ap.add_argument("--lr", type=float, default=1e-3, help="Adam's learning rate")
    ap.add_argument("--every", type=int, default=50, help="updates per point of the curve")
    ap.add_argument("--seed", type=int, default=0, help="seed of every learner (the same seeds)")
    ap.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES, help="learners to train")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (0: torch's default)")
    ap.add_argument("--record", default=None, metavar="NAME",
                    help="write experiments/results/bad_matrix/bad_matrix_<date>_NAME.md")
    ap.add_argument("--out", default="runs/bad_matrix", help="scratch folder when not recording")
    args = ap.parse_args(argv)
    try:
        if cli.threads(args.threads):
            torch.set_num_threads(args.threads)
        cfgs = {m: Config(runs=args.runs, episodes=args.episodes, batch=args.batch, lr=args.lr,
                          seed=args.seed, mode=m, every=args.every) for m in args.modes}
    except ValueError as e:
        sys.exit(f"bad_matrix: {e}")
    out = result_path("bad_matrix", args.record, args.out)
    optimum = optimal_value()
    curves, seconds = {}, {}
    for mode, cfg in cfgs.items():
        t = time.perf_counter()
        curves[mode] = train(cfg)
        seconds[mode] = time.perf_counter() - t
        final = curves[mode][:, -1]
        print(f"{mode}: final {final.mean():.3f} +- {final.std() / len(final) ** 0.5:.3f} "
              f"({seconds[mode]:.0f} s)", flush=True)
    png = out.with_suffix(".png")
    plot(png, curves, args.every, optimum,
         f"BAD matrix game: {args.runs} runs, batch {args.batch}, Adam lr {args.lr:g}, seed {args.seed}")
    rows = []
    for mode, rewards in curves.items():
        final = rewards[:, -1]
        sem = final.std() / len(final) ** 0.5
        rows.append(f"| {LABELS[mode]} (`{mode}`) | {final.mean():.3f} ± {sem:.3f} "
                    f"| {(final >= optimum - 1e-6).float().mean() * 100:.1f}% | {seconds[mode]:.0f} |")
    last = args.episodes - (len(curves[args.modes[0]][0]) - 1) * args.every
    text = f"""# BAD two-step matrix game (Foerster et al. 2019, Figure 3) ({datetime.date.today()})

- machine: {machine()}
- command: `{command(argv)}`
- {args.runs} independent runs per learner, {args.episodes} updates (episodes) of {args.batch} deals each,
  Adam lr {args.lr:g}, hidden 32, seed {args.seed} (the same seeds for every learner)
- optimum (brute force over all deterministic joint policies): **{optimum:g}**
- final reward: the mean reward of a run over its last {last} updates' deals (sampled actions, as trained);
  ± the s.e.m. over runs; "at optimum": runs whose final reward is the optimum
- figure: [{png.name}]({png.name})

| learner | final mean reward ± s.e.m. | at optimum | seconds |
|---|---|---|---|
{chr(10).join(rows)}
| optimum | {optimum:g} | | |
"""
    write_result(text, "bad_matrix", args.record, args.out, out)


if __name__ == "__main__":
    main()
