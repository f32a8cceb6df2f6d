"""The SPARTA paper's Table 3 for our multi-agent SPARTA: one row per max range (MR), from
`search/run.py --mode sparta-ma` result files on the same deals, beside the paper's row for that MR.

    python search/run.py --mode sparta-ma --blueprint smartbot --budget quick --games 20 --batch-games 20 \\
        --max-range-joint 0 --threads 1 --out runs/t3/mr0.json     # and --max-range-joint 80 -> mr80.json
    python -m experiments.table3 runs/t3/mr0.json runs/t3/mr80.json --record smartbot_quick_20

Each row: the deals played, the mean score ± s.e.m., the paired gain over the blueprint on the same deals (the
run's own blueprint games), the paired difference from the MR 0 row where there is one (same deals), the share
of all moves searched, the rollouts per game (range-search replays included) and the seconds per game; the
paper's % searched, rollouts and score beside it (its budget: 10,000 rollouts per searched move).
Writes experiments/results/table3/table3_<date>_NAME.md with --record NAME.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import sys
from pathlib import Path

import torch

from experiments.common import command, machine, result_path, write_result
from lbs.search.report import paired_difference

PAPER = {0: (50.0, 1.5e5, "24.21 ± 0.002"), 80: (56.2, 3.0e6, "24.30 ± 0.02"),
         400: (65.1, 1.3e7, "24.40 ± 0.02"), 2000: (77.2, 5.2e7, "24.46 ± 0.01"),
         10000: (86.0, 1.8e8, "24.48 ± 0.01")}
"""The SPARTA paper's Table 3 (SmartBot blueprint): MR -> (% of moves searched, rollouts per game, score)."""

HEAD = ("| MR | deals | score ± s.e.m. | blueprint | vs blueprint (paired) | vs MR 0 (paired) | % searched | "
        "rollouts per game | s / game | paper: % searched | paper: rollouts | paper: score |\n"
        "|---:|---:|---|---|---|---|---:|---:|---:|---:|---:|---|")

SAME = ("blueprint", "players", "seed", "first_game", "games", "rollouts", "min_rollouts", "prune_z", "delta")
"""Settings every file must share for its rows to be paired."""


def load(path: str) -> dict:
    """One sparta-ma result file, checked to be one."""
    try:
        blob = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not a readable search result ({e})") from None
    if blob.get("config", {}).get("mode") != "sparta-ma" or "joint" not in blob.get("summary", {}):
        raise ValueError(f"{path}: not a `search/run.py --mode sparta-ma` result")
    if blob["summary"].get("blueprint") is None:
        raise ValueError(f"{path}: played without its blueprint baseline (--no-blueprint-baseline)")
    return blob


def scores(blob: dict) -> torch.Tensor:
    return torch.tensor([g["record"]["score"] for g in blob["games"]], dtype=torch.float64)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+", help="sparta-ma result files (search/run.py --out), one per MR")
    ap.add_argument("--record", default=None, metavar="NAME",
                    help="write experiments/results/table3/table3_<date>_NAME.md")
    ap.add_argument("--out", default="runs/table3", help="scratch folder when not recording")
    args = ap.parse_args(argv)
    try:
        blobs = [load(p) for p in args.results]
        first = blobs[0]["config"]
        for path, b in zip(args.results, blobs, strict=True):
            differ = [k for k in SAME if b["config"].get(k) != first.get(k)]
            if differ:
                raise ValueError(f"{path}: {', '.join(differ)} differ from {args.results[0]}'s: "
                                 "its rows would not pair")
    except ValueError as e:
        sys.exit(f"table3: {e}")
    out = result_path("table3", args.record, args.out)
    blobs.sort(key=lambda b: b["config"]["max_range_joint"])
    base = next((b for b in blobs if b["config"]["max_range_joint"] == 0), None)
    rows = []
    for b in blobs:
        s, mr, joint = b["summary"], b["config"]["max_range_joint"], b["summary"]["joint"]
        mine = scores(b)
        sem = float(mine.std(unbiased=True) / math.sqrt(len(mine))) if len(mine) > 1 else 0.0
        vs0 = "—"
        if base is not None and b is not base:
            d, e = paired_difference(mine, scores(base))
            vs0 = f"{d:+.2f} ± {e:.2f}"
        paper = (f"{PAPER[mr][0]}%", f"{PAPER[mr][1]:.2g}", PAPER[mr][2]) if mr in PAPER else ("—",) * 3
        cells = [f"{mr:,}", f"{len(mine)}", f"{mine.mean():.2f} ± {sem:.2f}", f"{s['blueprint']['mean']:.2f}",
                 f"{s['paired_diff']:+.2f} ± {s['paired_sem']:.2f}", vs0, f"{joint['searched_pct']:.1f}%",
                 f"{joint['rollouts_per_game']:.3g}", f"{s['seconds_per_game']:.0f}", *paper]
        rows.append("| " + " | ".join(cells) + " |")
    cfg = first
    runs = "\n".join(f"  - `{b['command'].replace(sys.executable, 'python')}`" for b in blobs)
    text = f"""# The SPARTA paper's Table 3: multi-agent SPARTA by max range ({datetime.date.today()})

- Command: `{command(argv)}`
- Machine: {machine()} (this table's process; each run's own: {cfg['threads']} torch threads)
- Runs (each row's):
{runs}
- Deals {cfg['first_game']}..{cfg['first_game'] + cfg['games'] - 1} of evaluation seed {cfg['seed']},
  blueprint `{cfg['blueprint']}`, {cfg['players'] or "the blueprint's"} players;
  {cfg['rollouts']:,} rollouts per searched move, {cfg['min_rollouts']} per move before pruning,
  delta {cfg['delta']} (the paper: 10,000 rollouts per move).
- vs blueprint: paired with the blueprint's own games on the deals; vs MR 0: paired with the MR 0 row's games.
  % searched: of all moves, both seats; rollouts per game: the range-search replays included.

{HEAD}
""" + "\n".join(rows) + "\n"
    write_result(text, "table3", args.record, args.out, out)


if __name__ == "__main__":
    main()
