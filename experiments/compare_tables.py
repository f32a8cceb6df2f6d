"""Two Table 1 results on the same deals, mode by mode: the second's score minus the first's, paired per deal.

    python experiments/compare_tables.py experiments/results/table1/table1_2026-11-26_smartbot_10k_ref.json \
        experiments/results/table1/table1_2026-11-26_smartbot_10k_ref_keep.json \
        --record smartbot_10k_keep_vs_hle

Table 1 pairs each mode with the blueprint on the same deal; this pairs a mode with itself under two settings
(a rule for lost rollouts, a budget, a belief) on the deals both tables played, so the deal's luck drops out
of the difference between settings as it does out of the table's own gains. Both tables must hold the same
blueprint scores on those deals (same deals, same blueprint), else it refuses. Writes the settings that
differ, each mode's B - A ± s.e. and the same split by the blueprint's score on the deal, into --out (a
scratch folder) or experiments/results/compare_tables/compare_tables_<date>_NAME.md with --record NAME.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

import torch

from lbs.hanabi import GameConfig
from lbs.search.report import paired_difference

if __package__:  # python -m experiments.compare_tables, or imported
    from .common import machine, result_path, write_result
    from .table1 import SETTINGS, UNRECORDED, score_buckets
else:  # python experiments/compare_tables.py: this folder is first on the import path
    from common import machine, result_path, write_result
    from table1 import SETTINGS, UNRECORDED, score_buckets

NAME = "compare_tables"


def load(name: str) -> dict:
    """A table1 result (.json of a run or a --combine), or exit naming the file."""
    try:
        d = json.loads(Path(name).read_text())
    except (OSError, ValueError) as e:
        sys.exit(f"compare_tables: cannot read {name}: {e}")
    if not (isinstance(d, dict) and isinstance(d.get("scores"), dict) and "blueprint" in d["scores"]):
        sys.exit(f"compare_tables: {name} is not a table1 result with a blueprint row (its .json)")
    return d


def deals(d: dict, mode: str) -> dict[int, tuple[float, float]]:
    """Deal index -> (the mode's score, the blueprint's) in one table."""
    first = d.get("settings", {}).get("first_game", 0)
    scores = d["scores"][mode]
    base = d.get("blueprint_scores", {}).get(mode, d["scores"]["blueprint"])
    return {first + i: (s, b) for i, (s, b) in enumerate(zip(scores, base, strict=False))}


def compare(a: dict, b: dict, names: tuple[str, str]) -> str:
    """The markdown body: settings that differ, then each shared mode's B - A on the deals both played."""
    sa, sb = ({**UNRECORDED, **d.get("settings", {})} for d in (a, b))
    for key in ("game", "seed"):
        if sa.get(key) != sb.get(key):
            sys.exit(f"compare_tables: the tables differ in {key}: they played other deals")
    differ = [f"{k}: {json.dumps(sa.get(k))} (A) -> {json.dumps(sb.get(k))} (B)" for k in SETTINGS
              if sa.get(k) != sb.get(k)]
    modes = [m for m in a["scores"] if m in b["scores"] and m != "blueprint"]
    if not modes:
        sys.exit("compare_tables: the tables share no search mode")
    game = GameConfig.from_dict(sa["game"]) if "game" in sa else GameConfig()  # before tables kept it
    edges, bucket_names = score_buckets(game.max_score)
    rows, splits = [], []
    for mode in modes:
        da, db = deals(a, mode), deals(b, mode)
        common = sorted(set(da) & set(db))
        if not common:
            sys.exit(f"compare_tables: no deal played by {mode} in both tables")
        base = [da[i][1] for i in common]
        if base != [db[i][1] for i in common]:
            sys.exit(f"compare_tables: B's blueprint scores differ from A's on {mode}'s shared deals: not "
                     "the same deals or blueprint")
        xa = torch.tensor([da[i][0] for i in common]).double()
        xb = torch.tensor([db[i][0] for i in common]).double()
        bp = torch.tensor(base).double()
        diff, sem = paired_difference(xb, xa)
        span = f"{common[0]}..{common[-1]}" + ("" if common[-1] - common[0] + 1 == len(common) else " (gaps)")
        rows.append(f"| {mode} | {len(common)} ({span}) | {float(bp.mean()):.3f} | {float(xa.mean()):.3f} | "
                    f"{float(xb.mean()):.3f} | {diff:+.3f} ± {sem:.3f} | {diff / sem if sem else 0:+.1f} |")
        cells = []
        for lo, hi in edges:
            at = (bp >= lo) & (bp <= hi)
            if bool(at.any()):
                d, s = paired_difference(xb[at], xa[at])
                cells.append(f"{int(at.sum())}: {d:+.2f} ± {s:.2f}")
            else:
                cells.append("—")
        splits.append(f"| {mode} | " + " | ".join(cells) + " |")
    return "\n".join([
        f"- A: `{names[0]}`", f"- B: `{names[1]}`",
        "- Settings that differ: " + ("; ".join(differ) if differ else "none recorded"),
        "- Each mode paired with itself on the deals both tables played it (deal indices of the evaluation "
        "stream); the runs' machines and commands are in their own files.",
        f"- Date: {datetime.date.today()}; computed (nothing played) on {machine()}.",
        "",
        "| mode | deals | blueprint | A | B | B - A (paired) | t |", "|---|---|---|---|---|---|---|",
        *rows, "",
        "B - A by the blueprint's score on the deal (deals: difference ± s.e.):", "",
        "| mode | " + " | ".join(f"blueprint {n}" for n in bucket_names) + " |",
        "|---|" + "---|" * len(bucket_names), *splits,
    ])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a", metavar="A.json", help="the first table1 result (the baseline)")
    ap.add_argument("b", metavar="B.json", help="the second, on the same deals")
    ap.add_argument("--out", default="runs/experiments", help="scratch folder (default)")
    ap.add_argument("--record", default=None, help="write experiments/results/compare_tables/..._NAME.md")
    args = ap.parse_args(argv)
    a, b = load(args.a), load(args.b)
    out = result_path(NAME, args.record, args.out)
    body = compare(a, b, (args.a, args.b))
    head = f"# Two Table 1 results on the same deals: B - A\n\n- Command: `python {' '.join(sys.argv)}`\n"
    write_result(head + body + "\n", NAME, args.record, args.out, out)


if __name__ == "__main__":
    main()
