"""Training-loop throughput with and without TrainConfig.overlap, measured in the same run.

    python experiments/bench_overlap.py --preset small --updates 120 --repeats 2 --record cpu

Runs Trainer.run() to `--updates` learner updates from scratch, alternating overlap off / on
(`--repeats` times each, so a change in machine load hits both), and reports learner updates per
wall-clock second of the whole run (replay fill, acting, learning, the final latest.pt; no
evaluation). The sequential loop is the baseline. Results go to the scratch
folder, or experiments/results/bench_overlap/bench_overlap_<date>_<record>.md with --record.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch

from lbs.rl.trainer import PRESETS, Trainer

if __package__:  # python -m experiments.bench_overlap, or imported
    from .common import machine, write_result
else:  # python experiments/bench_overlap.py: this folder is first on the import path
    from common import machine, write_result


def one_run(cfg, overlap: bool) -> dict[str, float]:
    out = Path(tempfile.mkdtemp(prefix="bench_overlap_"))
    try:
        tr = Trainer(replace(cfg, overlap=overlap, out_dir=str(out / "run")), progress=False)
        tr.evaluate = lambda games=None: None  # the final evaluation is not the loop being measured
        t0 = time.perf_counter()
        tr.run()
        wall = time.perf_counter() - t0
        return {"wall": wall, "updates_per_s": tr.counters["updates"] / wall, "rounds": tr.counters["rounds"],
                "actor_steps": tr.counters["actor_steps"]}
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="small", choices=sorted(PRESETS))
    ap.add_argument("--updates", type=int, default=120)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    ap.add_argument("--record", default=None, help="write results/bench_overlap/..._NAME.md")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = replace(PRESETS[args.preset], total_updates=args.updates, eval_every=10**9,
                  checkpoint_minutes=10**6, device=args.device, wandb_mode="disabled")
    rows: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    for _ in range(args.repeats):
        for overlap in (False, True):
            res = one_run(cfg, overlap)
            rows[overlap].append(res)
            print(f"overlap={overlap}: {res['updates_per_s']:.2f} updates/s ({res['wall']:.1f} s)",
                  flush=True)
    base = statistics.mean(r["updates_per_s"] for r in rows[False])
    lines = [
        f"# Training loop with and without overlap, {time.strftime('%Y-%m-%d %H:%M')}",
        "",
        f"- machine: {machine()}",
        f"- command: `python {' '.join(sys.argv)}`",
        f"- config: preset {args.preset!r}, {args.updates} updates from scratch (replay fill included), "
        f"{cfg.actor.num_games} games x {cfg.seq_len} steps a round, {cfg.updates_per_round} updates a "
        f"round, batch {cfg.batch_size}, hidden {cfg.net.hidden}, device {args.device}",
        "",
        "| loop | runs | updates/s (each run) | mean | x sequential |",
        "|---|---:|---|---:|---:|",
    ]
    for overlap in (False, True):
        each = [r["updates_per_s"] for r in rows[overlap]]
        mean = statistics.mean(each)
        name = "overlap (actor thread)" if overlap else "sequential (baseline)"
        lines.append(f"| {name} | {len(each)} | {', '.join(f'{x:.2f}' for x in each)} | {mean:.2f} | "
                     f"{mean / base:.2f} |")
    write_result("\n".join(lines) + "\n", "bench_overlap", args.record, "runs/experiments")


if __name__ == "__main__":
    main()
